package model

import (
	"math"
	"testing"

	"github.com/flashgo/flashgo/model/gguf"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readConfig(t *testing.T, kvs []kv, tensors ...tensorSpec) (Config, error) {
	t.Helper()
	return ReadConfig(mustRead(t, builder{kvs: kvs, tensors: tensors}.bytes()))
}

func TestReadConfig(t *testing.T) {
	kvs := configKVs(
		kv{"llama.rope.freq_base", gguf.ValueFloat32, float32(500000)},
		kv{"llama.vocab_size", gguf.ValueUint32, uint32(300)},
	)
	c, err := readConfig(t, kvs)
	require.NoError(t, err)
	assert.Equal(t, Config{
		Architecture:       "llama",
		EmbeddingLength:    32,
		FeedForwardLength:  96,
		BlockCount:         2,
		HeadCount:          4,
		HeadCountKV:        2,
		HeadDim:            8,
		RopeDimensionCount: 8,
		RopeFreqBase:       500000,
		RMSNormEpsilon:     1e-6,
		ContextLength:      128,
		VocabSize:          300,
	}, c)
}

func TestReadConfigDefaults(t *testing.T) {
	kvs := configKVs()
	kvs = withoutKey(kvs, "llama.attention.head_count_kv")
	kvs = withoutKey(kvs, "llama.rope.dimension_count")
	kvs = append(kvs, tokenizerKVs([]string{"a", "b"}, []float32{0, 0})...)
	c, err := readConfig(t, kvs)
	require.NoError(t, err)
	assert.Equal(t, 4, c.HeadCountKV, "defaults to head_count")
	assert.Equal(t, 8, c.RopeDimensionCount, "defaults to the head dimension")
	assert.Equal(t, float32(DefaultRopeFreqBase), c.RopeFreqBase)
	assert.Equal(t, 3+256+2, c.VocabSize, "from tokenizer.ggml.tokens")

	// Without a tokenizer the vocabulary comes from token_embd.weight.
	c, err = readConfig(t, configKVs(), f32Tensor("token_embd.weight", 32, 10))
	require.NoError(t, err)
	assert.Equal(t, 10, c.VocabSize)

	// An explicit key_length sets the head width apart from the embedding.
	c, err = readConfig(t, configKVs(
		kv{"llama.attention.key_length", gguf.ValueUint32, uint32(16)},
		kv{"llama.vocab_size", gguf.ValueUint32, uint32(5)}))
	require.NoError(t, err)
	assert.Equal(t, 16, c.HeadDim)
	assert.Equal(t, 8, c.RopeDimensionCount)

	// Other architectures read their own prefix; float64 and int64 values
	// convert.
	kvs = []kv{
		{"general.architecture", gguf.ValueString, "mistral"},
		{"mistral.context_length", gguf.ValueUint64, uint64(4096)},
		{"mistral.embedding_length", gguf.ValueInt32, int32(64)},
		{"mistral.feed_forward_length", gguf.ValueUint16, uint16(128)},
		{"mistral.block_count", gguf.ValueUint8, uint8(3)},
		{"mistral.attention.head_count", gguf.ValueInt64, int64(8)},
		{"mistral.attention.layer_norm_rms_epsilon", gguf.ValueFloat64, 1e-5},
		{"mistral.vocab_size", gguf.ValueUint32, uint32(1000)},
	}
	c, err = readConfig(t, kvs)
	require.NoError(t, err)
	assert.Equal(t, "mistral", c.Architecture)
	assert.Equal(t, 4096, c.ContextLength)
	assert.Equal(t, 8, c.HeadCountKV)
	assert.Equal(t, float32(1e-5), c.RMSNormEpsilon)
}

func TestReadConfigErrors(t *testing.T) {
	withVocab := func(extra ...kv) []kv {
		return configKVs(append([]kv{{"llama.vocab_size", gguf.ValueUint32, uint32(100)}}, extra...)...)
	}
	for name, c := range map[string]struct {
		kvs  []kv
		want error
	}{
		"no architecture":  {withoutKey(withVocab(), "general.architecture"), gguf.ErrNotFound},
		"no embedding":     {withoutKey(withVocab(), "llama.embedding_length"), gguf.ErrNotFound},
		"no ffn":           {withoutKey(withVocab(), "llama.feed_forward_length"), gguf.ErrNotFound},
		"no blocks":        {withoutKey(withVocab(), "llama.block_count"), gguf.ErrNotFound},
		"no heads":         {withoutKey(withVocab(), "llama.attention.head_count"), gguf.ErrNotFound},
		"no context":       {withoutKey(withVocab(), "llama.context_length"), gguf.ErrNotFound},
		"no eps":           {withoutKey(withVocab(), "llama.attention.layer_norm_rms_epsilon"), gguf.ErrNotFound},
		"no vocab":         {configKVs(), gguf.ErrFormat},
		"empty arch":       {withVocab(kv{"general.architecture", gguf.ValueString, ""}), gguf.ErrFormat},
		"string heads":     {withVocab(kv{"llama.attention.head_count", gguf.ValueString, "8"}), gguf.ErrFormat},
		"array heads":      {withVocab(kv{"llama.attention.head_count", gguf.ValueArray, arr{gguf.ValueUint32, []any{uint32(4)}}}), gguf.ErrFormat},
		"zero heads":       {withVocab(kv{"llama.attention.head_count", gguf.ValueUint32, uint32(0)}), gguf.ErrFormat},
		"negative blocks":  {withVocab(kv{"llama.block_count", gguf.ValueInt32, int32(-1)}), gguf.ErrFormat},
		"kv not divisor":   {withVocab(kv{"llama.attention.head_count_kv", gguf.ValueUint32, uint32(3)}), gguf.ErrFormat},
		"kv > heads":       {withVocab(kv{"llama.attention.head_count_kv", gguf.ValueUint32, uint32(8)}), gguf.ErrFormat},
		"heads not divide": {withVocab(kv{"llama.embedding_length", gguf.ValueUint32, uint32(30)}), gguf.ErrFormat},
		"odd rope":         {withVocab(kv{"llama.rope.dimension_count", gguf.ValueUint32, uint32(7)}), gguf.ErrFormat},
		"rope > head":      {withVocab(kv{"llama.rope.dimension_count", gguf.ValueUint32, uint32(16)}), gguf.ErrFormat},
		"zero eps":         {withVocab(kv{"llama.attention.layer_norm_rms_epsilon", gguf.ValueFloat32, float32(0)}), gguf.ErrFormat},
		"NaN eps":          {withVocab(kv{"llama.attention.layer_norm_rms_epsilon", gguf.ValueFloat32, float32(math.NaN())}), gguf.ErrFormat},
		"int eps":          {withVocab(kv{"llama.attention.layer_norm_rms_epsilon", gguf.ValueUint32, uint32(1)}), gguf.ErrFormat},
		"negative theta":   {withVocab(kv{"llama.rope.freq_base", gguf.ValueFloat32, float32(-1)}), gguf.ErrFormat},
		"inf theta":        {withVocab(kv{"llama.rope.freq_base", gguf.ValueFloat64, math.Inf(1)}), gguf.ErrFormat},
		"string theta":     {withVocab(kv{"llama.rope.freq_base", gguf.ValueString, "1e4"}), gguf.ErrFormat},
		"string kv heads":  {withVocab(kv{"llama.attention.head_count_kv", gguf.ValueString, "2"}), gguf.ErrFormat},
		"zero vocab":       {withVocab(kv{"llama.vocab_size", gguf.ValueUint32, uint32(0)}), gguf.ErrFormat},
	} {
		_, err := readConfig(t, c.kvs)
		assert.ErrorIs(t, err, c.want, name)
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{Architecture: "llama", EmbeddingLength: 64, FeedForwardLength: 172, BlockCount: 5,
		HeadCount: 8, HeadCountKV: 4, HeadDim: 8, RopeDimensionCount: 8, RopeFreqBase: 10000,
		RMSNormEpsilon: 1e-5, ContextLength: 2048, VocabSize: 512}
	assert.NoError(t, good.Validate())
	bad := good
	bad.HeadDim = 0
	assert.ErrorIs(t, bad.Validate(), gguf.ErrFormat)
	bad = good
	bad.Architecture = ""
	assert.ErrorIs(t, bad.Validate(), gguf.ErrFormat)
	bad = good
	bad.RMSNormEpsilon = float32(math.Inf(1))
	assert.ErrorIs(t, bad.Validate(), gguf.ErrFormat)
}
