package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
)

// fakeSysfs writes a sysfs CPU tree whose cpu0 has the caches given, by
// directory name: {level, type, size}. It returns the tree's root.
func fakeSysfs(t *testing.T, caches map[string][3]string) string {
	t.Helper()
	root := t.TempDir()
	for name, c := range caches {
		dir := filepath.Join(root, "cpu0", "cache", name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for i, f := range []string{"level", "type", "size"} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(c[i]+"\n"), 0o644))
		}
	}
	return root
}

func TestRotationCount(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		cache, llc int64
		want       int
	}{
		{64 * mib, 32 * mib, 2},   // one cache is already 2 × the LLC: the minimum
		{33 * mib, 32 * mib, 2},   // D1 in fp16 against a 32 MiB L3: 66 MiB > 64 MiB
		{32 * mib, 32 * mib, 3},   // 2 caches are exactly 2 × the LLC, not over it
		{10 * mib, 32 * mib, 7},   // 70 MiB
		{1 * mib, 300 * mib, 601}, // small caches against a big L3
		{100 * mib, 0, 2},         // no LLC: still 2
		{0, 32 * mib, 2},          // degenerate size
	} {
		n := rotationCount(tt.cache, tt.llc)
		assert.Equal(t, tt.want, n, "cache %d, llc %d", tt.cache, tt.llc)
		if tt.cache > 0 && tt.llc > 0 {
			assert.Greater(t, int64(n)*tt.cache, 2*tt.llc, "together over 2 × the LLC")
			assert.LessOrEqual(t, int64(n-1)*tt.cache, max(2*tt.llc, tt.cache), "no more than needed")
		}
	}
}

func TestParseCacheSize(t *testing.T) {
	for s, want := range map[string]int64{
		"32768K": 32 << 20, "32M": 32 << 20, "1G": 1 << 30, "48K": 48 << 10, "107520K": 105 << 20,
		"4096": 4096, " 512k\n": 512 << 10, "2MiB": 2 << 20, "8 KB": 8 << 10,
	} {
		got, err := parseCacheSize(s)
		require.NoError(t, err, "%q", s)
		assert.Equal(t, want, got, "%q", s)
	}
	for _, s := range []string{"", "K", "big", "-1K", "12T", "99999999999999999999G"} {
		_, err := parseCacheSize(s)
		assert.Error(t, err, "%q", s)
	}
}

func TestLastLevelCache(t *testing.T) {
	// A usual x86 tree: L1d, L1i, L2, L3.
	root := fakeSysfs(t, map[string][3]string{
		"index0": {"1", "Data", "48K"}, "index1": {"1", "Instruction", "32K"},
		"index2": {"2", "Unified", "2048K"}, "index3": {"3", "Unified", "32M"},
	})
	assert.Equal(t, llcInfo{32 << 20, "L3 of cpu0, sysfs"}, lastLevelCache(root))

	// No L3: the highest level present; an instruction cache does not count.
	root = fakeSysfs(t, map[string][3]string{
		"index0": {"1", "Data", "64K"}, "index1": {"1", "Instruction", "128K"}, "index2": {"2", "Unified", "4M"},
	})
	assert.Equal(t, llcInfo{4 << 20, "L2 of cpu0, sysfs"}, lastLevelCache(root))

	// Unreadable entries are skipped.
	root = fakeSysfs(t, map[string][3]string{"index0": {"1", "Data", "64K"}, "index3": {"3", "Unified", "lots"}})
	assert.Equal(t, llcInfo{64 << 10, "L1 of cpu0, sysfs"}, lastLevelCache(root))

	// Nothing there: the fallback.
	l := lastLevelCache(filepath.Join(t.TempDir(), "missing"))
	assert.Equal(t, int64(fallbackLLC), l.bytes)
	assert.Contains(t, l.source, "assumed")
}

func TestBandwidthBytesBeyondLLC(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 8, 16, 64} {
		for _, llc := range []int64{1 << 20, 32 << 20, 300 << 20, 1 << 30} {
			b := bandwidthBytes(n, llc)
			assert.GreaterOrEqual(t, int64(b), 4*llc, "n %d, llc %d", n, llc)
			assert.GreaterOrEqual(t, b, min(n, 4)*bandwidthBuffer, "n %d: no less than before", n)
			assert.Zero(t, b/n%64, "whole cache lines each")
		}
	}
}

func TestParseWarmAndDTypes(t *testing.T) {
	c, err := parse([]string{"-mode", "decode"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.False(t, c.warm, "cold by default")
	assert.Equal(t, []attention.DType{attention.F32, attention.F16, attention.Q8}, c.kvFor(c.shapes[0]))
	assert.Positive(t, c.llc.bytes)

	c, err = parse([]string{"-mode", "decode", "-warm"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.True(t, c.warm)
	n, capped := kvCaches(c, c.shapes[0], attention.F16)
	assert.Equal(t, 1, n, "-warm: one cache")
	assert.False(t, capped)

	c, err = parse([]string{"-mode", "decode", "-warm=false", "-kv", "q8,f16"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.False(t, c.warm)
	assert.Equal(t, []attention.DType{attention.Q8, attention.F16}, c.kvFor(c.shapes[1]))

	// q8 runs for prefill too when asked for.
	c, err = parse([]string{"-shape", "P2", "-kv", "q8"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, []attention.DType{attention.Q8}, c.kvFor(c.shapes[0]))

	// Without -kv, a decode shape whose head dim q8 cannot split runs without it.
	c, err = parse([]string{"-shape", "custom", "-dim", "16", "-nq", "1"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, []attention.DType{attention.F32, attention.F16}, c.kvFor(c.shapes[0]))

	// Asked for, it is refused.
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, run([]string{"-shape", "custom", "-dim", "16", "-nq", "1", "-kv", "q8"}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "-kv q8 needs a head dim that is a multiple of 32; shape custom has d 16")
	stderr.Reset()
	assert.Equal(t, 2, run([]string{"-warm", "off"}, &stdout, &stderr), "-warm is a bool flag")
	assert.Contains(t, stderr.String(), `unexpected argument "off"`)
}

func TestKVCachesMemoryCap(t *testing.T) {
	d1 := shape{name: "D1", batch: 1, heads: 32, kvHeads: 8, dim: 128, nq: 1, nkv: 8192}
	c := config{kv: []attention.DType{attention.F16}, threads: []int{1}, shapes: []shape{d1},
		llc: llcInfo{bytes: 32 << 20}, avail: 16 << 30}
	n, capped := kvCaches(c, d1, attention.F16) // 32 MiB caches against a 32 MiB LLC
	assert.Equal(t, 3, n)
	assert.False(t, capped)
	assert.NoError(t, checkMemory(c))

	pre := shape{name: "P", batch: 1, heads: 4, kvHeads: 4, dim: 32, nq: 8, nkv: 8}
	n, _ = kvCaches(c, pre, attention.F16)
	assert.Equal(t, 1, n, "prefill: one cache")

	// D1/8 (a 4 MiB cache) against a 4 MiB LLC wants 3 caches. With little
	// memory it gets fewer, but 2 at least.
	saved := bandwidthBuffer
	t.Cleanup(func() { bandwidthBuffer = saved })
	bandwidthBuffer = 1 << 20 // the bandwidth buffers: 16 MiB
	d8 := d1
	d8.nkv /= 8
	c = config{kv: []attention.DType{attention.F16}, threads: []int{1}, shapes: []shape{d8}, llc: llcInfo{bytes: 4 << 20}, avail: 1 << 30}
	n, capped = kvCaches(c, d8, attention.F16)
	assert.Equal(t, 3, n)
	assert.False(t, capped)
	base, _ := memoryNeed(c, d8)
	c.avail = (base + 1.5*d8.cacheBytes(attention.F16)) / rotationShare
	n, capped = kvCaches(c, d8, attention.F16)
	assert.Equal(t, 2, n)
	assert.True(t, capped)
	assert.NoError(t, checkMemory(c))

	// Not even 2: refused, with -warm as the way out.
	c.avail = base + 0.5*d8.cacheBytes(attention.F16)
	c.availSource = "test cap"
	err := checkMemory(c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "2 copies of its K/V cache")
	assert.Contains(t, err.Error(), "-warm")
	c.warm = true
	assert.NoError(t, checkMemory(c))
}

// TestRunDecodeQ8 runs a tiny decode shape with q8 K/V, cold and warm, and
// checks the rows, the caches rotated over and the accuracy.
func TestRunDecodeQ8(t *testing.T) {
	quick(t)
	// K and V: 2·2·640·32 values, 90 KiB in q8 with its scales, 160 KiB in
	// f16: 6 and 4 copies exceed 2 × the fake 256 KiB LLC.
	args := []string{"-shape", "custom", "-heads", "4", "-kv-heads", "2", "-dim", "32", "-nq", "1", "-nkv", "640",
		"-kv", "q8,f16", "-threads", "1", "-reps", "3"}
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(append(args, "-format", "json"), &stdout, &stderr), "stderr: %s", stderr.String())
	var doc struct {
		WarmKV  bool             `json:"warm_kv"`
		Results []map[string]any `json:"results"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &doc))
	assert.False(t, doc.WarmKV)
	require.Len(t, doc.Results, 2)
	q8, f16 := doc.Results[0], doc.Results[1]
	assert.Equal(t, "q8", q8["kv"])
	assert.Equal(t, "decode", q8["mode"])
	assert.Equal(t, 2.0*2*640*32*(1+4.0/32), q8["kv_bytes"], "q8 bytes count the scales")
	assert.Equal(t, 6.0, q8["kv_copies"])
	assert.Equal(t, 4.0, f16["kv_copies"])
	for _, r := range doc.Results {
		check := r["check"].(map[string]any)
		assert.Equal(t, true, check["pass"], "%v", r["kv"])
		assert.Less(t, check["max_abs"].(float64), 1e-5)
		assert.Greater(t, r["gbps"].(float64), 0.0)
	}

	stdout.Reset()
	require.Equal(t, 0, run(args, &stdout, &stderr), "stderr: %s", stderr.String())
	out := strings.Join(strings.Fields(stdout.String()), " ") // undo the wrapping
	assert.Contains(t, out, "decode K/V cold")
	assert.Contains(t, out, "256 KiB last-level cache (L3 of cpu0, sysfs)")
	assert.Contains(t, out, "N = custom: q8 6, f16 4")
	assert.Contains(t, out, "within the project's tolerance")

	stdout.Reset()
	require.Equal(t, 0, run(append(args, "-warm", "-format", "csv"), &stdout, &stderr), "stderr: %s", stderr.String())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Len(t, lines, 3)
	col := -1
	for i, h := range strings.Split(lines[0], ",") {
		if h == "kv_copies" {
			col = i
		}
	}
	require.GreaterOrEqual(t, col, 0)
	for _, l := range lines[1:] {
		assert.Equal(t, "1", strings.Split(l, ",")[col], "-warm: one cache: %s", l)
	}
}
