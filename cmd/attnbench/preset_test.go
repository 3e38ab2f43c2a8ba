package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/model"
	"github.com/flashgo/flashgo/model/gguf"
)

func TestParsePresetAndWindow(t *testing.T) {
	tests := []struct {
		args  []string
		check func(t *testing.T, c config)
	}{
		{[]string{"-preset", "llama-3-8b"}, func(t *testing.T, c config) {
			require.Len(t, c.shapes, 1, "without -shape only the presets run")
			assert.Equal(t, shape{name: "llama3-8b", what: "Llama 3 8B", batch: 1, heads: 32, kvHeads: 8, dim: 128, nq: 1024, nkv: 1024,
				causal: true, scaled: 1}, c.shapes[0])
		}},
		{[]string{"-preset", "gemma2-9b, Gemma 2 9B,stories260k", "-mode", "decode"}, func(t *testing.T, c config) {
			require.Len(t, c.shapes, 2, "repeats are dropped")
			g := c.shapes[0]
			assert.Equal(t, "gemma2-9b", g.name)
			assert.Equal(t, [3]int{16, 8, 256}, [3]int{g.heads, g.kvHeads, g.dim})
			assert.Equal(t, [2]int{1, 4096}, [2]int{g.nq, g.nkv}, "decode defaults")
			assert.Equal(t, 4096, g.window)
			assert.Equal(t, float32(50), g.softCap)
			assert.Equal(t, "stories260k", c.shapes[1].name)
			assert.Zero(t, c.shapes[1].window)
		}},
		{[]string{"-preset", "stories260k", "-batch", "2", "-nq", "64", "-nkv", "128", "-mode", "prefill"}, func(t *testing.T, c config) {
			require.Len(t, c.shapes, 1)
			s := c.shapes[0]
			assert.Equal(t, [6]int{2, 8, 4, 8, 64, 128}, [6]int{s.batch, s.heads, s.kvHeads, s.dim, s.nq, s.nkv})
		}},
		{[]string{"-shape", "P1,custom", "-heads", "4", "-kv-heads", "2", "-preset", "gpt2", "-window", "16"}, func(t *testing.T, c config) {
			require.Len(t, c.shapes, 3)
			assert.Equal(t, []string{"P1", "custom", "gpt2"}, shapeNames(c.shapes))
			assert.Equal(t, 4, c.shapes[1].heads, "-heads sizes the custom shape")
			for _, s := range c.shapes {
				assert.Equal(t, 16, s.window, s.name)
			}
		}},
		{[]string{"-preset", "mistral-7b", "-window", "8"}, func(t *testing.T, c config) {
			assert.Equal(t, 8, c.shapes[0].window, "-window overrides the preset's")
		}},
		{[]string{"-shape", "D1/64", "-window", "1", "-sweep", "100,200"}, func(t *testing.T, c config) {
			require.Len(t, c.shapes, 2)
			assert.Equal(t, 1, c.shapes[1].window, "a swept shape keeps its window")
			assert.Equal(t, 200, c.shapes[1].nkv)
		}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c, err := parse(tt.args, &bytes.Buffer{})
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

func TestRunBadPresetAndWindow(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-preset", "llama9"}, `unknown preset "llama9"; want one of llama3-8b, llama3-70b,`},
		{[]string{"-preset", " , "}, `-preset is " , ", which has an empty entry`},
		{[]string{"-preset", "gpt2", "-heads", "4"}, "-heads describes a custom shape"},
		{[]string{"-preset", "gpt2", "-causal=false"}, "-causal describes a custom shape"},
		{[]string{"-preset", "gpt2", "-mode", "decode", "-nq", "4"}, "leaves none of the shapes gpt2"},
		{[]string{"-window", "0"}, "-window is 0; want a window of >= 1 keys"},
		{[]string{"-window", "-3"}, "-window is -3"},
		{[]string{"-window", "x"}, "-window"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, 2, run(tt.args, &stdout, &stderr), "stderr: %s", stderr.String())
			assert.Contains(t, stderr.String(), tt.want)
			assert.Empty(t, stdout.String())
		})
	}
}

func TestHelpListsPresets(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"-h"}, &stdout, &stderr))
	for _, p := range modelPresets() {
		assert.Contains(t, stdout.String(), p.Name)
	}
	assert.Contains(t, stdout.String(), "window 4096 (even layers), soft-cap 50")
}

// TestVisiblePairs checks the exact FLOP count of a windowed shape against
// hand-computed counts and against the reference's visibility rule.
func TestVisiblePairs(t *testing.T) {
	// Nq 9, Nkv 12, window 5: diagonals i' = 3..11 see 4, 5, then 5 keys
	// each (7 rows): 44 pairs.
	assert.Equal(t, 44.0, visiblePairs(9, 12, 5))
	// Nq 6 > Nkv 4, window 2: i' = -2..3 see 0, 0, 1, 2, 2, 2 keys.
	assert.Equal(t, 7.0, visiblePairs(6, 4, 2))
	assert.Equal(t, 1.0, visiblePairs(1, 100, 1))
	assert.Equal(t, 100.0, visiblePairs(1, 100, 4096), "a window wider than the cache")
	s := shape{batch: 2, heads: 3, kvHeads: 1, dim: 8, nq: 9, nkv: 12, causal: true, window: 5}
	assert.Equal(t, 4.0*2*3*8*44, s.flops())
	assert.Equal(t, 2.0*2*1*12*8*4, s.kvBytes(attention.F32), "every key is seen by some query")
	d := shape{batch: 1, heads: 8, kvHeads: 4, dim: 8, nq: 1, nkv: 100, causal: true, window: 16}
	assert.Equal(t, 2.0*4*16*8*2, d.kvBytes(attention.F16), "a decode row reads only its window")

	for _, c := range [][3]int{{1, 1, 1}, {9, 12, 5}, {12, 9, 5}, {33, 47, 16}, {64, 64, 1}, {5, 200, 300}} {
		s := shape{batch: 1, heads: 1, kvHeads: 1, dim: 1, nq: c[0], nkv: c[1], causal: true, window: c[2]}
		p := s.params()
		n := 0
		for i := range s.nq {
			for j := range s.nkv {
				if p.Visible(i, j) {
					n++
				}
			}
		}
		assert.Equal(t, float64(n), visiblePairs(s.nq, s.nkv, s.window), "%v", c)
		assert.Equal(t, attention.Window{Left: c[2] - 1, Right: 0}, *s.options().Window)
	}
}

// TestSubProblemWindow checks that the oracle's sub-problem of a big
// windowed, soft-capped shape keeps the window and the soft-cap.
func TestSubProblemWindow(t *testing.T) {
	s := shape{batch: 1, heads: 16, kvHeads: 8, dim: 256, nq: 1024, nkv: 1024, causal: true, window: 100, softCap: 50}
	sub := pickSub(s)
	require.False(t, sub.full)
	p := sub.params(s)
	assert.True(t, p.Window)
	assert.Equal(t, [2]int{99, 0}, [2]int{p.WindowLeft, p.WindowRight})
	assert.Equal(t, 50.0, p.SoftCap)
	assert.Equal(t, 64, p.SeqQ)
}

func TestRunPreset(t *testing.T) {
	quick(t)
	var stdout, stderr bytes.Buffer
	args := []string{"-preset", "stories260k", "-nq", "33", "-nkv", "47", "-kv", "f32,f16", "-threads", "1", "-reps", "2"}
	require.Equal(t, 0, run(args, &stdout, &stderr), "stderr: %s", stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "stories260k (TinyStories 260K): Hq 8, Hkv 4, d 8, Nq 33, Nkv 47, causal\n")
	assert.Contains(t, out, "within the project's tolerance")
	rows := 0
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[0] == "stories260k" && f[1] == "33" {
			rows++
			assert.NotContains(t, l, "!")
		}
	}
	assert.Equal(t, 2, rows)
}

// TestRunWindowJSON runs a windowed prefill (a preset's shape) and a
// windowed decode shape, checked against the oracle and timed against the
// naive baseline with the same window, and reads the exact FLOP and byte
// counts back from the JSON.
func TestRunWindowJSON(t *testing.T) {
	quick(t)
	var stdout, stderr bytes.Buffer
	args := []string{"-shape", "D1/64", "-preset", "stories260k", "-nq", "9", "-nkv", "12", "-window", "5", "-kv", "f32",
		"-threads", "1", "-reps", "1", "-format", "json"}
	require.Equal(t, 0, run(args, &stdout, &stderr), "stderr: %s", stderr.String())
	var doc struct {
		Results []map[string]any `json:"results"`
		Notes   []string         `json:"notes"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &doc))
	require.Len(t, doc.Results, 2)
	dec, pre := doc.Results[0], doc.Results[1]
	assert.Equal(t, "D1/64", dec["shape"])
	assert.Equal(t, 5.0, dec["window"])
	assert.Equal(t, 4.0*32*128*5, dec["flops"], "one row sees the 5 keys of its window")
	assert.Equal(t, 2.0*8*5*128*4, dec["kv_bytes"])
	assert.Equal(t, "stories260k", pre["shape"])
	assert.Equal(t, 5.0, pre["window"])
	assert.Nil(t, pre["softcap"])
	assert.Equal(t, 4.0*8*8*44, pre["flops"], "44 visible pairs, as in TestVisiblePairs")
	for _, r := range doc.Results {
		assert.Equal(t, true, r["check"].(map[string]any)["pass"])
		assert.NotNil(t, r["naive"])
	}
	assert.Contains(t, strings.Join(doc.Notes, "\n"), "the (query, key) pairs the window shows")
}

func TestPresetValues(t *testing.T) {
	type geometry struct {
		heads, kv, d, ctx, window int
		rope                      model.RopeMode
		theta                     float32
	}
	want := map[string]geometry{
		"llama3-8b":   {32, 8, 128, 8192, 0, model.RopeNormal, 500000},
		"llama3-70b":  {64, 8, 128, 8192, 0, model.RopeNormal, 500000},
		"mistral-7b":  {32, 8, 128, 32768, 4096, model.RopeNormal, 10000},
		"qwen2.5-7b":  {28, 4, 128, 131072, 0, model.RopeNeoX, 1000000},
		"gemma2-9b":   {16, 8, 256, 8192, 4096, model.RopeNeoX, 10000},
		"gpt2":        {12, 12, 64, 1024, 0, model.RopeNone, 0},
		"stories260k": {8, 4, 8, 2048, 0, model.RopeNormal, 10000},
	}
	ps := modelPresets()
	require.Len(t, ps, len(want))
	names := map[string]bool{}
	for _, p := range ps {
		g, ok := want[p.Name]
		require.True(t, ok, "unexpected preset %q", p.Name)
		assert.False(t, names[p.Name], "duplicate %q", p.Name)
		names[p.Name] = true
		assert.Equal(t, g, geometry{p.Heads, p.KVHeads, p.HeadDim, p.Context, p.Window, p.RoPE, p.RopeTheta}, p.Name)
		assert.Zero(t, p.Heads%p.KVHeads, "%s: query heads a multiple of KV heads", p.Name)
		assert.NotEmpty(t, p.Title)
		assert.NotEmpty(t, p.Source)
		assert.Positive(t, p.Layers)
		assert.Positive(t, p.Vocab)
		assert.Positive(t, p.FeedForward)
		assert.Positive(t, p.NormEps)
		if p.Name != "gemma2-9b" {
			assert.Equal(t, p.Embedding, p.Heads*p.HeadDim, "%s: head_dim = hidden_size / num_attention_heads", p.Name)
		}
	}
	g, _ := lookupPreset("gemma2-9b")
	assert.Equal(t, float32(50), g.SoftCap)
	assert.Equal(t, float32(30), g.FinalSoftCap)
	assert.Equal(t, windowEven, g.WindowLayers)
	assert.Equal(t, 2*42*8*256*2, g.KVBytesPerToken(2))
	l, _ := lookupPreset("llama3-8b")
	assert.Equal(t, 128*1024, l.KVBytesPerToken(2), "128 KiB of fp16 K/V per token")
}

func TestLookupPreset(t *testing.T) {
	for _, name := range []string{"llama3-8b", "Llama 3 8B", "LLAMA3_8B", "llama-3-8b"} {
		p, ok := lookupPreset(name)
		assert.True(t, ok, name)
		assert.Equal(t, "llama3-8b", p.Name, name)
	}
	p, ok := lookupPreset("Qwen 2.5 7B")
	assert.True(t, ok)
	assert.Equal(t, "qwen2.5-7b", p.Name)
	_, ok = lookupPreset("gpt-5")
	assert.False(t, ok)
	_, ok = lookupPreset("")
	assert.False(t, ok)
}

func TestPresetAttentionOptions(t *testing.T) {
	g, _ := lookupPreset("gemma2-9b")
	even, odd := g.AttentionOptions(0), g.AttentionOptions(1)
	require.NotNil(t, even.Window)
	assert.Equal(t, attention.Window{Left: 4095, Right: 0}, *even.Window, "4096 keys, the query's own included")
	assert.Nil(t, odd.Window)
	assert.True(t, even.Causal && odd.Causal)
	assert.Equal(t, float32(50), odd.SoftCap)

	m, _ := lookupPreset("mistral-7b")
	for l := range 3 {
		assert.True(t, m.Sliding(l))
	}
	ll, _ := lookupPreset("llama3-70b")
	assert.False(t, ll.Sliding(0))
	assert.Equal(t, attention.Options{Causal: true}, ll.AttentionOptions(0))

	// Every preset's options are accepted by the engine on a decode step
	// of its head geometry (a short cache).
	rng := rand.New(rand.NewPCG(1, 1))
	for _, p := range modelPresets() {
		nkv := 9
		q := make([]float32, p.Heads*p.HeadDim)
		k := make([]float32, p.KVHeads*nkv*p.HeadDim)
		for i := range k {
			k[i] = float32(rng.NormFloat64())
		}
		for i := range q {
			q[i] = float32(rng.NormFloat64())
		}
		out := make([]float32, len(q))
		for layer := range 2 {
			err := attention.Forward(
				attention.F32Tensor(out, attention.BHSD(1, p.Heads, 1, p.HeadDim)),
				attention.F32Tensor(q, attention.BHSD(1, p.Heads, 1, p.HeadDim)),
				attention.F32Tensor(k, attention.BHSD(1, p.KVHeads, nkv, p.HeadDim)),
				attention.F32Tensor(k, attention.BHSD(1, p.KVHeads, nkv, p.HeadDim)),
				p.AttentionOptions(layer))
			assert.NoError(t, err, "%s layer %d", p.Name, layer)
		}
	}
}

// TestStoriesPreset checks the stories260K preset against the file.
func TestStoriesPreset(t *testing.T) {
	f, err := gguf.Open(storiesModel)
	if err != nil {
		t.Skipf("test model %s not available (%v); it lives outside the repository: set FLASHGO_MODEL to its path, or README.md (\"The test model\") says how to download it", storiesModel, err)
	}
	defer f.Close()
	c, err := model.ReadConfig(f)
	require.NoError(t, err)
	p, ok := lookupPreset("stories260k")
	require.True(t, ok)
	assert.Equal(t, model.Config{
		Architecture: "llama", EmbeddingLength: p.Embedding, FeedForwardLength: p.FeedForward, BlockCount: p.Layers,
		HeadCount: p.Heads, HeadCountKV: p.KVHeads, HeadDim: p.HeadDim, RopeDimensionCount: p.HeadDim,
		RopeFreqBase: p.RopeTheta, RMSNormEpsilon: p.NormEps, ContextLength: p.Context, VocabSize: p.Vocab,
	}, c)
}
