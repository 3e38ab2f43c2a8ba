package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
)

func TestParseWrite(t *testing.T) {
	all := []attention.DType{attention.F32, attention.F16, attention.BF16, attention.Q8, attention.FP8E4M3, attention.FP8E5M2}
	tests := []struct {
		args []string
		want writeSpec
		kv   []attention.DType
	}{
		{[]string{"-write", "64,512"}, writeSpec{tokens: []int{64, 512}, kvHeads: 8, dim: 128, block: 16}, all},
		{[]string{"-write", "7", "-paged", "8", "-kv", "f16,q8"}, writeSpec{tokens: []int{7}, kvHeads: 8, dim: 128, block: 8}, []attention.DType{attention.F16, attention.Q8}},
		// A head dim that is no multiple of 32: every type but q8.
		{[]string{"-write", "3", "-kv-heads", "2", "-dim", "40"}, writeSpec{tokens: []int{3}, kvHeads: 2, dim: 40, block: 16},
			[]attention.DType{attention.F32, attention.F16, attention.BF16, attention.FP8E4M3, attention.FP8E5M2}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c, err := parse(tt.args, &bytes.Buffer{})
			require.NoError(t, err)
			require.NotNil(t, c.write)
			assert.Equal(t, tt.want, *c.write)
			assert.Equal(t, tt.kv, c.kv)
			assert.Nil(t, c.shapes, "no shapes of the standard run")
			assert.Nil(t, c.shared)
		})
	}
}

// TestRunWriteBadFlags checks that a bad -write command line exits 2
// before any work, with a message that names the problem.
func TestRunWriteBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-write", "x"}, `-write has "x"`},
		{[]string{"-write", "0"}, `-write has "0"; want positive integers`},
		{[]string{"-write", "4,4"}, "-write has 4 twice"},
		{[]string{"-write", "4", "-paged", "0"}, "-paged is 0; want a block size >= 1"},
		{[]string{"-write", "4", "-shape", "D1"}, "-shape does not apply to -write"},
		{[]string{"-write", "4", "-heads", "4"}, "-heads does not apply to -write"},
		{[]string{"-write", "4", "-precision", "bf16"}, "-precision does not apply to -write"},
		{[]string{"-write", "4", "-check", "off"}, "-check does not apply to -write"},
		{[]string{"-write", "4", "-shared-prefix", "64"}, "-shared-prefix and -write are two runs of their own"},
		{[]string{"-write", "4", "-kv-heads", "0"}, "-write with -kv-heads 0, -dim 128; want positive numbers"},
		{[]string{"-write", "4", "-format", "csv"}, "-format csv is not available with -write"},
		{[]string{"-write", "4", "-kv", "q8", "-dim", "40"}, "-kv q8 needs a head dim that is a multiple of 32"},
		{[]string{"-write", "1073741824", "-kv", "f32"}, "needs about"},
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

// tinyWrite is a -write case small enough for a test: steps of 1 and 37
// tokens (more tokens than threads, and fewer), 2 K/V heads of dim 32,
// blocks of 4, every pool type.
var tinyWrite = []string{"-write", "1,37", "-kv-heads", "2", "-dim", "32", "-paged", "4", "-threads", "1,2", "-reps", "3"}

func TestRunWriteTable(t *testing.T) {
	quick(t)
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(tinyWrite, &stdout, &stderr), "stderr: %s", stderr.String())
	assert.Empty(t, stderr.String())
	out := stdout.String()
	words := strings.Join(strings.Fields(out), " ") // the header lines wrap anywhere
	for _, want := range []string{"pool write: PagedKV.Write of float32 rows [tokens, Hkv 2, d 32] into pools [blocks, 4, 2, 32]",
		"streaming read", "with 1 thread", "with 2 threads", "cold", "ms (min-max)", "stored GB/s", "%BW", "moved GB/s", "pool MiB"} {
		assert.Contains(t, words, want)
	}
	rows := 0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.Contains(" f32 f16 bf16 q8 fp8e4m3 fp8e5m2 ", " "+f[0]+" ") {
			continue
		}
		rows++
		assert.Len(t, f, 9, "row %q", l) // the time column holds two fields
	}
	assert.Equal(t, 6*2*2, rows, "K/V types × steps × threads:\n%s", out)
}

func TestRunWriteJSON(t *testing.T) {
	quick(t)
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(append(tinyWrite, "-format", "json", "-kv", "f16,fp8e4m3"), &stdout, &stderr), "stderr: %s", stderr.String())
	var doc map[string]any
	dec := json.NewDecoder(&stdout)
	require.NoError(t, dec.Decode(&doc))
	assert.False(t, dec.More(), "stdout holds exactly one JSON value")
	assert.Equal(t, "attnbench", doc["tool"])
	assert.Equal(t, "write", doc["mode"])
	assert.Equal(t, false, doc["warm_kv"])
	assert.Equal(t, map[string]any{"kv_heads": 2.0, "dim": 32.0, "block": 4.0}, doc["shape"])
	assert.Len(t, doc["bandwidth"], 2)
	results := doc["results"].([]any)
	require.Len(t, results, 2*2*2)
	for _, x := range results {
		r := x.(map[string]any)
		tm := r["time_ms"].(map[string]any)
		assert.Greater(t, tm["median"].(float64), 0.0)
		assert.Equal(t, 3.0, tm["runs"])
		assert.Greater(t, r["gbps"].(float64), 0.0)
		assert.Greater(t, r["moved_gbps"].(float64), r["gbps"].(float64))
		assert.Greater(t, r["pct_bandwidth"].(float64), 0.0)
		elem := map[string]float64{"f16": 2, "fp8e4m3": 1}[r["kv"].(string)]
		assert.Equal(t, 2*r["tokens"].(float64)*2*32*elem, r["stored_bytes"].(float64))
		// Cold pools: room for a step per run, and over twice the
		// (pretended) 256 KiB last-level cache.
		blocks := r["pool_blocks"].(float64)
		assert.GreaterOrEqual(t, blocks*4, 4*r["tokens"].(float64))
		assert.Greater(t, blocks*4*2*32*2*elem, 2*256*1024.0)
	}
}

// TestRunWriteWarm: under -warm the pools hold one step, which every run
// writes again.
func TestRunWriteWarm(t *testing.T) {
	quick(t)
	var stdout, stderr bytes.Buffer
	args := []string{"-write", "9", "-kv-heads", "1", "-dim", "8", "-paged", "4", "-kv", "bf16", "-threads", "1", "-reps", "2", "-warm", "-format", "json"}
	require.Equal(t, 0, run(args, &stdout, &stderr), "stderr: %s", stderr.String())
	var doc struct {
		WarmKV  bool             `json:"warm_kv"`
		Results []map[string]any `json:"results"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &doc))
	assert.True(t, doc.WarmKV)
	require.Len(t, doc.Results, 1)
	assert.Equal(t, 3.0, doc.Results[0]["pool_blocks"], "ceil(9/4) blocks")
}

// TestWriteStepFillsSlots runs a -write case's steps directly and checks
// that each run wrote its own slots: the rows of the slots of runs 0 and
// 1 hold the step's rows (the rest of the pool is zero), with the tokens
// split between threads.
func TestWriteStepFillsSlots(t *testing.T) {
	s := &writeSpec{tokens: []int{5}, kvHeads: 2, dim: 4, block: 2}
	c := config{reps: 1}
	kv := attention.PagedKV{K: s.newPool(attention.F32, 8), V: s.newPool(attention.F32, 8)}
	k, v := make([]float32, 5*8), make([]float32, 5*8)
	for i := range k {
		k[i], v[i] = float32(i+1), -float32(i+1)
	}
	slots := []int32{15, 0, 7, 3, 9, 1, 2, 4, 5, 6, 8, 10, 11, 12, 13, 14}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	_, err := s.benchCase(c, kv, k, v, slots, 5, 2, nil)
	require.NoError(t, err)
	pool := kv.K.Float32s()
	for i, slot := range slots {
		for j := range 8 {
			got := pool[int(slot)*8+j]
			switch {
			case i < 10: // runs 0 and 1: token i%5's rows
				assert.Equal(t, k[(i%5)*8+j], got, "slot %d element %d", slot, j)
			default:
				assert.Zero(t, got, "slot %d element %d", slot, j)
			}
		}
	}
}
