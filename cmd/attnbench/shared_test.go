package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
)

func TestParseSharedPrefix(t *testing.T) {
	tests := []struct {
		args []string
		want sharedSpec
		kv   []attention.DType
	}{
		{[]string{"-shared-prefix", "8192"}, sharedSpec{prefix: 8192, suffix: 256, seqs: 16, heads: 32, kvHeads: 8, dim: 128, block: 16}, []attention.DType{attention.F16}},
		{[]string{"-shared-prefix", "64,5", "-paged", "8", "-kv", "f32,q8"}, sharedSpec{prefix: 64, suffix: 5, seqs: 16, heads: 32, kvHeads: 8, dim: 128, block: 8}, []attention.DType{attention.F32, attention.Q8}},
		{[]string{"-shared-prefix", "48,3,5", "-heads", "6", "-kv-heads", "2", "-dim", "40"}, sharedSpec{prefix: 48, suffix: 3, seqs: 5, heads: 6, kvHeads: 2, dim: 40, block: 16}, []attention.DType{attention.F16}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c, err := parse(tt.args, &bytes.Buffer{})
			require.NoError(t, err)
			require.NotNil(t, c.shared)
			assert.Equal(t, tt.want, *c.shared)
			assert.Equal(t, tt.kv, c.kv)
			assert.Nil(t, c.shapes, "no shapes of the standard run")
		})
	}
}

// TestRunSharedPrefixBadFlags checks that a bad -shared-prefix command
// line exits 2 before any work, with a message that names the problem.
func TestRunSharedPrefixBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-shared-prefix", "x"}, `-shared-prefix has "x"`},
		{[]string{"-shared-prefix", "0"}, "-shared-prefix has a prefix of 0 positions; want >= 1"},
		{[]string{"-shared-prefix", "64,0"}, "-shared-prefix has a suffix of 0 positions; want >= 1"},
		{[]string{"-shared-prefix", "64,1,0"}, "-shared-prefix has 0 sequences; want >= 1"},
		{[]string{"-shared-prefix", "64,1,2,3"}, "-shared-prefix has 4 numbers; want PREFIX[,SUFFIX[,SEQS]]"},
		{[]string{"-shared-prefix", "60"}, "prefix of 60 positions, which does not fill blocks of 16"},
		{[]string{"-shared-prefix", "64", "-paged", "0"}, "-paged is 0; want a block size >= 1"},
		{[]string{"-shared-prefix", "64", "-shape", "D1"}, "-shape does not apply to -shared-prefix"},
		{[]string{"-shared-prefix", "64", "-nkv", "9"}, "-nkv does not apply to -shared-prefix"},
		{[]string{"-shared-prefix", "64", "-naive", "on"}, "-naive does not apply to -shared-prefix"},
		{[]string{"-shared-prefix", "64", "-heads", "6", "-kv-heads", "4"}, "-heads a multiple of -kv-heads"},
		{[]string{"-shared-prefix", "64", "-format", "csv"}, "-format csv is not available with -shared-prefix"},
		{[]string{"-shared-prefix", "64", "-precision", "q8q", "-kv", "q8"}, "-precision q8q is not available with -shared-prefix"},
		{[]string{"-shared-prefix", "64", "-kv", "q8", "-dim", "40"}, "-kv q8 needs a head dim that is a multiple of 32"},
		{[]string{"-shared-prefix", "1048576,1048576,1024"}, "needs about"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			assert.Equal(t, 2, code, "stderr: %s", stderr.String())
			assert.Contains(t, stderr.String(), tt.want)
			assert.Empty(t, stdout.String())
		})
	}
}

// tinyShared is a -shared-prefix case small enough for a test, with
// enough stacked rows (5 sequences × 4 query heads a K/V head) for its
// prefix product to be computed in bf16 in bf16 precision.
var tinyShared = []string{"-shared-prefix", "96,7,5", "-heads", "8", "-kv-heads", "2", "-dim", "32",
	"-kv", "f16,q8", "-precision", "f32,bf16", "-threads", "1,2", "-reps", "3"}

func TestRunSharedPrefixTable(t *testing.T) {
	quick(t)
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(tinyShared, &stdout, &stderr), "stderr: %s", stderr.String())
	assert.Empty(t, stderr.String())
	out := stdout.String()
	words := strings.Join(strings.Fields(out), " ") // the header lines wrap anywhere
	for _, want := range []string{"shared prefix: 5 sequences of 96 shared + 7 own positions", "Hq 8, Hkv 2, d 32", "blocks of 16",
		"shared ms (min-max)", "packed ms (min-max)", "unshared ms (min-max)", "speed-up", "max abs", "tolerance", "rotate over"} {
		assert.Contains(t, words, want)
	}
	rows := 0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || (f[0] != "f16" && f[0] != "q8") {
			continue
		}
		rows++
		assert.NotContains(t, l, "!", "row outside tolerance: %q", l)
		assert.NotContains(t, strings.Join(f[4:], " "), " - ", "every row has a packed step: %q", l)
	}
	assert.Equal(t, 2*2*2, rows, "K/V types × precisions × threads:\n%s", out)
}

func TestRunSharedPrefixJSON(t *testing.T) {
	quick(t)
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(append(tinyShared, "-format", "json", "-warm"), &stdout, &stderr), "stderr: %s", stderr.String())
	var doc map[string]any
	dec := json.NewDecoder(&stdout)
	require.NoError(t, dec.Decode(&doc))
	assert.False(t, dec.More(), "stdout holds exactly one JSON value")
	assert.Equal(t, "attnbench", doc["tool"])
	assert.Equal(t, "shared-prefix", doc["mode"])
	assert.Equal(t, true, doc["warm_kv"])
	assert.Equal(t, map[string]any{"prefix": 96.0, "suffix": 7.0, "sequences": 5.0, "heads": 8.0, "kv_heads": 2.0, "dim": 32.0, "block": 16.0}, doc["shape"])
	results := doc["results"].([]any)
	require.Len(t, results, 8)
	for _, x := range results {
		r := x.(map[string]any)
		for _, k := range []string{"shared_ms", "unshared_ms"} {
			tm := r[k].(map[string]any)
			assert.Greater(t, tm["median"].(float64), 0.0, k)
			assert.Equal(t, 3.0, tm["runs"], k)
		}
		assert.Equal(t, 1.0, r["kv_copies"])
		assert.Greater(t, r["speedup"].(float64), 0.0)
		require.NotNil(t, r["check"])
		assert.Equal(t, true, r["check"].(map[string]any)["pass"])
		assert.Greater(t, r["packed_ms"].(map[string]any)["median"].(float64), 0.0)
		assert.Greater(t, r["packed_speedup"].(float64), 0.0)
		assert.GreaterOrEqual(t, r["pack_ms"].(float64), 0.0)
		assert.Equal(t, true, r["check_packed"].(map[string]any)["pass"])
	}
}

// TestRunSharedPrefixFewRows checks that a case whose stacked prefix rows
// are few (2 sequences × 2 query heads a K/V head), which reads K and V
// rows in place and no panels where the row kernels are SIMD, runs
// without the packed step there (null in the JSON), and with it where
// the call packs its tiles (ComputedPrecision says bf16: purego).
func TestRunSharedPrefixFewRows(t *testing.T) {
	quick(t)
	var stdout, stderr bytes.Buffer
	args := []string{"-shared-prefix", "32,3,2", "-heads", "4", "-kv-heads", "2", "-dim", "16", "-precision", "f32,bf16", "-threads", "1", "-reps", "2", "-format", "json"}
	require.Equal(t, 0, run(args, &stdout, &stderr), "stderr: %s", stderr.String())
	var doc struct {
		Results []map[string]any `json:"results"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &doc))
	require.Len(t, doc.Results, 2)
	packs := attention.ComputedPrecision(attention.Options{Precision: attention.PrecisionBFloat16}, 4, 2, 2) == attention.PrecisionBFloat16
	for _, r := range doc.Results {
		for _, k := range []string{"packed_ms", "packed_speedup", "pack_ms", "check_packed"} {
			if packs {
				assert.NotNil(t, r[k], k)
			} else {
				assert.Nil(t, r[k], k)
			}
		}
		assert.Equal(t, true, r["check"].(map[string]any)["pass"])
	}
}
