package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/kernel"
)

// quick shrinks the start-up measurements so that a test run takes a
// fraction of a second, and pretends that the last-level cache is 256 KiB
// (a fake sysfs tree), so that the bandwidth buffers and the K/V copies of
// a cold decode run stay small.
func quick(t *testing.T) {
	t.Helper()
	savedPeak, savedBuf, savedSys := peakTime, bandwidthBuffer, sysfsCPU
	t.Cleanup(func() { peakTime, bandwidthBuffer, sysfsCPU = savedPeak, savedBuf, savedSys })
	peakTime, bandwidthBuffer = 10*time.Millisecond, 1<<20
	sysfsCPU = fakeSysfs(t, map[string][3]string{"index0": {"1", "Data", "32K"}, "index3": {"3", "Unified", "256K"}})
}

// tiny is a small prefill shape (custom) plus a small decode shape (D1/64:
// Nkv 128), with f32 and bf16 K/V, one and two threads.
var tiny = []string{"-shape", "custom,D1/64", "-heads", "4", "-kv-heads", "2", "-dim", "16", "-nq", "33", "-nkv", "47",
	"-kv", "f32,bf16", "-threads", "1,2", "-reps", "3"}

func TestRunTable(t *testing.T) {
	quick(t)
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(tiny, &stdout, &stderr)
	elapsed := time.Since(start)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	assert.Empty(t, stderr.String())
	assert.Less(t, elapsed, 2*time.Second)
	out := stdout.String()
	for _, want := range []string{"FMA peak", "streaming read", "custom: Hq 4, Hkv 2, d 16, Nq 33, Nkv 47, causal", "D1/64",
		"shape", "GFLOP/s", "%peak", "%BW", "vs naive", "max abs", "within the project's tolerance"} {
		assert.Contains(t, out, want)
	}
	rows := 0
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); isRow(f) {
			rows++
			assert.Len(t, f, 16, "row %q", l) // the time column holds two fields: "1.23 (1.20-1.30)"
			assert.NotContains(t, l, "!", "row outside tolerance: %q", l)
		}
	}
	assert.Equal(t, 2*2*2, rows)
}

func TestRunJSONSchema(t *testing.T) {
	quick(t)
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(append(tiny, "-format", "json"), &stdout, &stderr), "stderr: %s", stderr.String())
	assert.Empty(t, stderr.String(), "json mode writes nothing to stderr")

	var doc map[string]any
	dec := json.NewDecoder(&stdout)
	require.NoError(t, dec.Decode(&doc))
	assert.False(t, dec.More(), "stdout holds exactly one JSON value")

	assert.Equal(t, "attnbench", doc["tool"])
	assert.Equal(t, map[string]any{"bytes": 256.0 * 1024, "source": "L3 of cpu0, sysfs"}, doc["llc"])
	assert.Equal(t, false, doc["warm_kv"])
	date, ok := doc["date"].(string)
	require.True(t, ok)
	_, err := time.Parse(time.RFC3339, date)
	assert.NoError(t, err)
	for _, k := range []string{"go", "os", "arch", "cpu", "kernel"} {
		assert.IsType(t, "", doc[k], k)
	}
	assert.IsType(t, float64(0), doc["cpus"])
	assert.IsType(t, float64(0), doc["reps"])
	assert.IsType(t, []any{}, doc["kernels_available"])
	assert.IsType(t, []any{}, doc["notes"])
	peak := doc["peak"].(map[string]any)
	assert.Greater(t, peak["gflops_per_core"].(float64), 0.0)
	assert.IsType(t, "", peak["isa"])
	if hasBF16Unit() {
		assert.Greater(t, peak["bf16_gflops_per_core"].(float64), 0.0)
		assert.Contains(t, []any{kernel.AMX, kernel.AVX512BF16}, peak["bf16_isa"])
	} else {
		assert.Equal(t, 0.0, peak["bf16_gflops_per_core"])
		assert.Equal(t, "", peak["bf16_isa"])
	}
	bw := doc["bandwidth"].([]any)
	require.Len(t, bw, 2)
	for _, b := range bw {
		b := b.(map[string]any)
		assert.IsType(t, float64(0), b["threads"])
		assert.Greater(t, b["gbps"].(float64), 0.0)
	}

	results := doc["results"].([]any)
	require.Len(t, results, 8)
	keys := []string{"shape", "description", "mode", "scaled", "batch", "heads", "kv_heads", "dim", "nq", "nkv", "causal", "window", "softcap", "kv",
		"precision", "threads", "kernel", "time_ms", "flops", "gflops", "pct_peak", "kv_bytes", "gbps", "pct_bandwidth", "kv_copies", "naive", "check"}
	for _, r := range results {
		r := r.(map[string]any)
		for _, k := range keys {
			assert.Contains(t, r, k)
		}
		assert.Len(t, r, len(keys))
		assert.IsType(t, "", r["shape"])
		assert.Contains(t, []any{"f32", "bf16"}, r["kv"])
		assert.Contains(t, []any{1.0, 2.0}, r["threads"])
		assert.IsType(t, true, r["causal"])
		assert.Nil(t, r["window"])
		assert.Nil(t, r["softcap"])
		tm := r["time_ms"].(map[string]any)
		assert.Greater(t, tm["median"].(float64), 0.0)
		assert.LessOrEqual(t, tm["min"].(float64), tm["median"].(float64))
		assert.LessOrEqual(t, tm["median"].(float64), tm["max"].(float64))
		assert.Equal(t, 3.0, tm["runs"])
		assert.Greater(t, r["gflops"].(float64), 0.0)
		switch r["mode"] {
		case "prefill":
			assert.Equal(t, "custom", r["shape"])
			assert.Equal(t, 33.0, r["nq"])
			assert.IsType(t, float64(0), r["pct_peak"])
			assert.Nil(t, r["gbps"])
			assert.Nil(t, r["pct_bandwidth"])
			assert.Equal(t, 1.0, r["kv_copies"])
			assert.Equal(t, 4.0*4*33*47*16/2, r["flops"])
		case "decode":
			assert.Equal(t, "D1/64", r["shape"])
			assert.Equal(t, 64.0, r["scaled"])
			assert.Equal(t, 128.0, r["nkv"])
			assert.Nil(t, r["pct_peak"])
			assert.Greater(t, r["gbps"].(float64), 0.0)
			assert.Greater(t, r["pct_bandwidth"].(float64), 0.0)
			// A cache of 2·8·128·128 values, 1 MiB in f32 and 512 KiB in bf16: 2 copies exceed 2 × 256 KiB.
			assert.Equal(t, 2.0, r["kv_copies"])
		default:
			t.Errorf("mode %v", r["mode"])
		}
		naive := r["naive"].(map[string]any)
		assert.Greater(t, naive["speedup"].(float64), 0.0)
		assert.Greater(t, naive["gflops"].(float64), 0.0)
		assert.IsType(t, true, naive["cold"])
		assert.IsType(t, map[string]any{}, naive["time_ms"])
		check := r["check"].(map[string]any)
		assert.Equal(t, true, check["pass"])
		assert.Equal(t, true, check["full"]) // tiny shapes are checked whole
		for _, k := range []string{"batches", "kv_heads", "rows", "elements", "max_abs", "max_rel", "rms", "naive_max_abs", "tolerance"} {
			assert.IsType(t, float64(0), check[k], k)
		}
		assert.Less(t, check["max_abs"].(float64), 1e-5)
	}
}

func TestRunJSONNullsWhenOff(t *testing.T) {
	quick(t)
	var stdout, stderr bytes.Buffer
	args := []string{"-shape", "custom", "-heads", "2", "-kv-heads", "1", "-dim", "8", "-nq", "5", "-nkv", "9", "-kv", "f16",
		"-threads", "1", "-reps", "1", "-naive", "off", "-check", "off", "-format", "json"}
	require.Equal(t, 0, run(args, &stdout, &stderr), "stderr: %s", stderr.String())
	var doc struct {
		Results []map[string]any `json:"results"`
		Notes   []string         `json:"notes"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &doc))
	require.Len(t, doc.Results, 1)
	assert.Contains(t, doc.Results[0], "naive")
	assert.Nil(t, doc.Results[0]["naive"])
	assert.Nil(t, doc.Results[0]["check"])
	assert.Contains(t, strings.Join(doc.Notes, "\n"), "-naive=off")
}

func TestRunCSV(t *testing.T) {
	quick(t)
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(append(tiny, "-format", "csv"), &stdout, &stderr), "stderr: %s", stderr.String())
	records, err := csv.NewReader(&stdout).ReadAll()
	require.NoError(t, err)
	require.Len(t, records, 1+8)
	assert.Equal(t, csvHeader, records[0])
	for _, r := range records[1:] {
		assert.Len(t, r, len(csvHeader))
		assert.Equal(t, "true", r[len(r)-1], "pass column")
	}
	assert.Contains(t, stderr.String(), "attnbench: GFLOP/s", "the notes go to stderr")
}

func TestRunSweepPlot(t *testing.T) {
	quick(t)
	dir := t.TempDir()
	for _, name := range []string{"sweep.svg", "sweep.png"} {
		file := filepath.Join(dir, name)
		var stdout, stderr bytes.Buffer
		args := []string{"-shape", "custom", "-heads", "4", "-kv-heads", "1", "-dim", "16", "-kv", "f32,f16", "-threads", "1",
			"-reps", "1", "-sweep", "16,32,64", "-plot", file, "-check", "off"}
		require.Equal(t, 0, run(args, &stdout, &stderr), "stderr: %s", stderr.String())
		assert.Contains(t, stdout.String(), "custom: Hq 4, Hkv 1, d 16, causal; swept over Nq = Nkv = 16, 32, 64")
		assert.Contains(t, stdout.String(), "plot written to "+file)
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		if strings.HasSuffix(name, ".svg") {
			assert.Contains(t, string(data), "<svg")
			assert.Contains(t, string(data), "naive float32, 1 thread")
			assert.Contains(t, string(data), "flashgo f16 K/V, 1 thread")
		} else {
			assert.True(t, bytes.HasPrefix(data, []byte("\x89PNG")))
		}
	}
}

func TestRunCPUProfile(t *testing.T) {
	quick(t)
	file := filepath.Join(t.TempDir(), "cpu.prof")
	var stdout, stderr bytes.Buffer
	args := []string{"-shape", "custom", "-heads", "2", "-kv-heads", "2", "-dim", "8", "-nq", "4", "-nkv", "4", "-kv", "f32",
		"-threads", "1", "-reps", "1", "-cpuprofile", file}
	require.Equal(t, 0, run(args, &stdout, &stderr), "stderr: %s", stderr.String())
	fi, err := os.Stat(file)
	require.NoError(t, err)
	assert.Positive(t, fi.Size())
}

// isRow reports whether the fields of a line of the table make a result row.
func isRow(f []string) bool {
	if len(f) < 2 || (f[0] != "custom" && f[0] != "D1/64") {
		return false
	}
	_, err := strconv.Atoi(f[1])
	return err == nil
}

// perturb replaces the forward function with one that adds 1e-3 to the
// first output element of calls whose K is stored as dt.
func perturb(t *testing.T, dt attention.DType) {
	t.Helper()
	real := forward
	t.Cleanup(func() { forward = real })
	forward = func(eng *attention.Engine, c *call) error {
		if err := real(eng, c); err != nil {
			return err
		}
		if c.kT.DType() == dt {
			c.out[len(c.out)-1] += 1e-3 // the last element lies in the oracle's sub-problem
		}
		return nil
	}
}

func TestRunFlagsInaccurateEngine(t *testing.T) {
	quick(t)
	perturb(t, attention.BF16)
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, run(tiny, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "4 of 8 rows are outside the accuracy tolerance")
	assert.Contains(t, stdout.String(), "! = outside the project's tolerance")
	for _, l := range strings.Split(stdout.String(), "\n") {
		if f := strings.Fields(l); isRow(f) {
			assert.Equal(t, f[3] == "bf16", strings.Contains(l, "!"), "row %q", l)
		}
	}
}

func TestCheckShortPasses(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"check", "-short"}, &stdout, &stderr)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "check passed: ")
	assert.NotContains(t, out, "FAIL")
	m := regexp.MustCompile(`kernels? \(([^)]*)\)`).FindStringSubmatch(out) // "1 kernel (generic)" on a purego build
	require.NotNil(t, m, out)
	for _, impl := range strings.Split(m[1], ", ") {
		assert.Contains(t, out, impl+": 180 cases, 0 failed") // 18 shapes × 5 K/V types × 2 precisions
	}
}

func TestCheckFailsOnBrokenKernel(t *testing.T) {
	perturb(t, attention.F16)
	var stdout, stderr bytes.Buffer
	code := run([]string{"check", "-short", "-kernel", "generic", "-precision", "f32"}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	out := stdout.String()
	assert.Contains(t, out, "check FAILED: 18 of 90 cases outside the tolerance")
	// Each failure names the case (implementation, K/V type, precision,
	// shape), saying which is which, and by how much it failed.
	assert.Contains(t, out, "FAIL generic, K/V f16, precision f32: B1 Hq8 Hkv2 d8 Nq1 Nkv77 full: max abs 1.00e-03, tolerance")
	assert.Contains(t, out, "× the tolerance)")
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "FAIL") {
			assert.Contains(t, l, " K/V f16,")
		}
	}
}

// TestCheckFailsOnBrokenBF16 breaks only the bf16 precision, by more than
// its looser tolerance, and watches check catch exactly those cases.
func TestCheckFailsOnBrokenBF16(t *testing.T) {
	real := forward
	t.Cleanup(func() { forward = real })
	forward = func(eng *attention.Engine, c *call) error {
		if err := real(eng, c); err != nil {
			return err
		}
		if c.opts.Precision == attention.PrecisionBFloat16 {
			c.out[len(c.out)-1] += 0.1
		}
		return nil
	}
	var stdout bytes.Buffer
	var stderr bytes.Buffer
	assert.Equal(t, 1, run([]string{"check", "-short", "-kernel", "generic"}, &stdout, &stderr))
	out := stdout.String()
	assert.Contains(t, out, "check FAILED: 90 of 180 cases outside the tolerance")
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "FAIL") {
			assert.Contains(t, l, ", precision bf16: ")
		}
	}
}

// TestSubProblem checks the premise of checking big shapes on a corner:
// the oracle on the last rows, heads and batch entry against all keys gives
// exactly the corresponding rows of the oracle on the whole problem,
// causal (bottom-right aligned) or not, Nq below or above Nkv.
func TestSubProblem(t *testing.T) {
	for _, s := range []shape{
		{name: "a", batch: 2, heads: 6, kvHeads: 3, dim: 8, nq: 70, nkv: 90, causal: true},
		{name: "b", batch: 1, heads: 4, kvHeads: 4, dim: 4, nq: 100, nkv: 30, causal: true},
		{name: "c", batch: 3, heads: 2, kvHeads: 1, dim: 8, nq: 80, nkv: 80},
	} {
		sub := subProblem{batches: 1, kvHeads: min(2, s.kvHeads), rows: 64}
		p := s.params()
		q, k, v := make([]float32, p.QLen()), make([]float32, p.KVLen()), make([]float32, p.KVLen())
		for i := range q {
			q[i] = float32(i%7) - 3
		}
		for i := range k {
			k[i], v[i] = float32(i%5)-2, float32(i%11)/3
		}
		full := oracle(t, p, q, k, v)
		part := oracle(t, sub.params(s), sub.subQ(s, q), sub.subKV(s, k), sub.subKV(s, v))
		want := sub.subQ(s, full)
		require.Len(t, part, len(want), s.name)
		for i := range want {
			require.InDelta(t, want[i], part[i], 1e-12, "%s: element %d", s.name, i)
		}
	}
}

// TestRunPaged runs the tiny shapes with K/V read through a paged cache of
// 5-position blocks (no block size divides 47 or 128): every call goes
// through ForwardPaged and every row is within the tolerance.
func TestRunPaged(t *testing.T) {
	quick(t)
	saved := forward
	t.Cleanup(func() { forward = saved })
	paged, plain := 0, 0
	forward = func(eng *attention.Engine, c *call) error {
		if c.paged != nil {
			paged++
		} else {
			plain++
		}
		return saved(eng, c)
	}
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(append(tiny, "-paged", "5", "-naive", "off"), &stdout, &stderr), "stderr: %s", stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "-paged 5: K and V are read through an attention.PagedCache of 5-position blocks")
	assert.Contains(t, out, "within the project's tolerance")
	assert.NotContains(t, out, "!")
	assert.Positive(t, paged)
	assert.Zero(t, plain)
}

// TestRunPrecisions runs both precisions: each case gets a row per
// precision, within its own tolerance, and a bf16 row names the
// implementation of its products: the bf16 products, or for a decode row,
// which is computed in float32 where the row kernels are SIMD, the float32
// kernels.
func TestRunPrecisions(t *testing.T) {
	quick(t)
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(append(tiny, "-precision", "f32,bf16"), &stdout, &stderr), "stderr: %s", stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "bf16 products "+bf16Kernel())
	rows := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); isRow(f) {
			rows[f[4]]++
			assert.NotContains(t, l, "!", "row outside tolerance: %q", l)
			if f[4] == "bf16" {
				want := bf16Kernel()
				if f[0] == "D1/64" && kernel.Current().RowKernels {
					want = f32Kernel()
				}
				assert.Contains(t, l, " "+want+" ", "row %q", l)
			}
		}
	}
	assert.Equal(t, map[string]int{"f32": 8, "bf16": 8}, rows)
	for _, bad := range []string{"f64", "bf16,bf16", ""} {
		assert.Equal(t, 2, run([]string{"-precision", bad}, io.Discard, io.Discard), "-precision %q", bad)
	}
}
