package model

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
)

func TestPresetValues(t *testing.T) {
	type geometry struct {
		heads, kv, d, ctx, window int
		rope                      RopeMode
		theta                     float32
	}
	want := map[string]geometry{
		"llama3-8b":   {32, 8, 128, 8192, 0, RopeNormal, 500000},
		"llama3-70b":  {64, 8, 128, 8192, 0, RopeNormal, 500000},
		"mistral-7b":  {32, 8, 128, 32768, 4096, RopeNormal, 10000},
		"qwen2.5-7b":  {28, 4, 128, 131072, 0, RopeNeoX, 1000000},
		"gemma2-9b":   {16, 8, 256, 8192, 4096, RopeNeoX, 10000},
		"gpt2":        {12, 12, 64, 1024, 0, RopeNone, 0},
		"stories260k": {8, 4, 8, 2048, 0, RopeNormal, 10000},
	}
	ps := Presets()
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
	g, _ := LookupPreset("gemma2-9b")
	assert.Equal(t, float32(50), g.SoftCap)
	assert.Equal(t, float32(30), g.FinalSoftCap)
	assert.Equal(t, WindowEven, g.WindowLayers)
	assert.Equal(t, 2*42*8*256*2, g.KVBytesPerToken(2))
	l, _ := LookupPreset("llama3-8b")
	assert.Equal(t, 128*1024, l.KVBytesPerToken(2), "128 KiB of fp16 K/V per token")
}

func TestLookupPreset(t *testing.T) {
	for _, name := range []string{"llama3-8b", "Llama 3 8B", "LLAMA3_8B", "llama-3-8b"} {
		p, ok := LookupPreset(name)
		assert.True(t, ok, name)
		assert.Equal(t, "llama3-8b", p.Name, name)
	}
	p, ok := LookupPreset("Qwen 2.5 7B")
	assert.True(t, ok)
	assert.Equal(t, "qwen2.5-7b", p.Name)
	_, ok = LookupPreset("gpt-5")
	assert.False(t, ok)
	_, ok = LookupPreset("")
	assert.False(t, ok)
}

func TestPresetAttentionOptions(t *testing.T) {
	g, _ := LookupPreset("gemma2-9b")
	even, odd := g.AttentionOptions(0), g.AttentionOptions(1)
	require.NotNil(t, even.Window)
	assert.Equal(t, attention.Window{Left: 4095, Right: 0}, *even.Window, "4096 keys, the query's own included")
	assert.Nil(t, odd.Window)
	assert.True(t, even.Causal && odd.Causal)
	assert.Equal(t, float32(50), odd.SoftCap)

	m, _ := LookupPreset("mistral-7b")
	for l := range 3 {
		assert.True(t, m.Sliding(l))
	}
	ll, _ := LookupPreset("llama3-70b")
	assert.False(t, ll.Sliding(0))
	assert.Equal(t, attention.Options{Causal: true}, ll.AttentionOptions(0))

	// Every preset's options are accepted by the engine on a decode step
	// of its head geometry (a short cache).
	rng := rand.New(rand.NewPCG(1, 1))
	for _, p := range Presets() {
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
	c, err := ReadConfig(openStories(t))
	require.NoError(t, err)
	p, ok := LookupPreset("stories260k")
	require.True(t, ok)
	assert.Equal(t, Config{
		Architecture: "llama", EmbeddingLength: p.Embedding, FeedForwardLength: p.FeedForward, BlockCount: p.Layers,
		HeadCount: p.Heads, HeadCountKV: p.KVHeads, HeadDim: p.HeadDim, RopeDimensionCount: p.HeadDim,
		RopeFreqBase: p.RopeTheta, RMSNormEpsilon: p.NormEps, ContextLength: p.Context, VocabSize: p.Vocab,
	}, c)
}
