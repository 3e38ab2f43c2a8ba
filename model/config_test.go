package model

import (
	"math"
	"testing"

	"github.com/flashgo/flashgo/model/gguf"
	"github.com/flashgo/flashgo/model/internal/ggufwrite"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readConfig(t *testing.T, kvs []ggufwrite.KV, tensors ...ggufwrite.Tensor) (Config, error) {
	t.Helper()
	return ReadConfig(mustRead(t, ggufwrite.File{KVs: kvs, Tensors: tensors}.Bytes()))
}

func TestReadConfig(t *testing.T) {
	kvs := configKVs(
		ggufwrite.KV{Key: "llama.rope.freq_base", Type: ggufwrite.ValueFloat32, Val: float32(500000)},
		ggufwrite.KV{Key: "llama.vocab_size", Type: ggufwrite.ValueUint32, Val: uint32(300)},
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
	c, err = readConfig(t, configKVs(), ggufwrite.F32Tensor("token_embd.weight", 32, 10))
	require.NoError(t, err)
	assert.Equal(t, 10, c.VocabSize)

	// An explicit key_length sets the head width apart from the embedding.
	c, err = readConfig(t, configKVs(
		ggufwrite.KV{Key: "llama.attention.key_length", Type: ggufwrite.ValueUint32, Val: uint32(16)},
		ggufwrite.KV{Key: "llama.vocab_size", Type: ggufwrite.ValueUint32, Val: uint32(5)}))
	require.NoError(t, err)
	assert.Equal(t, 16, c.HeadDim)
	assert.Equal(t, 8, c.RopeDimensionCount)

	// Other architectures read their own prefix; float64 and int64 values
	// convert.
	kvs = []ggufwrite.KV{
		{Key: "general.architecture", Type: ggufwrite.ValueString, Val: "mistral"},
		{Key: "mistral.context_length", Type: ggufwrite.ValueUint64, Val: uint64(4096)},
		{Key: "mistral.embedding_length", Type: ggufwrite.ValueInt32, Val: int32(64)},
		{Key: "mistral.feed_forward_length", Type: ggufwrite.ValueUint16, Val: uint16(128)},
		{Key: "mistral.block_count", Type: ggufwrite.ValueUint8, Val: uint8(3)},
		{Key: "mistral.attention.head_count", Type: ggufwrite.ValueInt64, Val: int64(8)},
		{Key: "mistral.attention.layer_norm_rms_epsilon", Type: ggufwrite.ValueFloat64, Val: 1e-5},
		{Key: "mistral.vocab_size", Type: ggufwrite.ValueUint32, Val: uint32(1000)},
	}
	c, err = readConfig(t, kvs)
	require.NoError(t, err)
	assert.Equal(t, "mistral", c.Architecture)
	assert.Equal(t, 4096, c.ContextLength)
	assert.Equal(t, 8, c.HeadCountKV)
	assert.Equal(t, float32(1e-5), c.RMSNormEpsilon)
}

func TestReadConfigErrors(t *testing.T) {
	withVocab := func(extra ...ggufwrite.KV) []ggufwrite.KV {
		return configKVs(append([]ggufwrite.KV{{Key: "llama.vocab_size", Type: ggufwrite.ValueUint32, Val: uint32(100)}}, extra...)...)
	}
	for name, c := range map[string]struct {
		kvs  []ggufwrite.KV
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
		"empty arch":       {withVocab(ggufwrite.KV{Key: "general.architecture", Type: ggufwrite.ValueString, Val: ""}), gguf.ErrFormat},
		"string heads":     {withVocab(ggufwrite.KV{Key: "llama.attention.head_count", Type: ggufwrite.ValueString, Val: "8"}), gguf.ErrFormat},
		"array heads":      {withVocab(ggufwrite.KV{Key: "llama.attention.head_count", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueUint32, Items: []any{uint32(4)}}}), gguf.ErrFormat},
		"zero heads":       {withVocab(ggufwrite.KV{Key: "llama.attention.head_count", Type: ggufwrite.ValueUint32, Val: uint32(0)}), gguf.ErrFormat},
		"negative blocks":  {withVocab(ggufwrite.KV{Key: "llama.block_count", Type: ggufwrite.ValueInt32, Val: int32(-1)}), gguf.ErrFormat},
		"kv not divisor":   {withVocab(ggufwrite.KV{Key: "llama.attention.head_count_kv", Type: ggufwrite.ValueUint32, Val: uint32(3)}), gguf.ErrFormat},
		"kv > heads":       {withVocab(ggufwrite.KV{Key: "llama.attention.head_count_kv", Type: ggufwrite.ValueUint32, Val: uint32(8)}), gguf.ErrFormat},
		"heads not divide": {withVocab(ggufwrite.KV{Key: "llama.embedding_length", Type: ggufwrite.ValueUint32, Val: uint32(30)}), gguf.ErrFormat},
		"odd rope":         {withVocab(ggufwrite.KV{Key: "llama.rope.dimension_count", Type: ggufwrite.ValueUint32, Val: uint32(7)}), gguf.ErrFormat},
		"rope > head":      {withVocab(ggufwrite.KV{Key: "llama.rope.dimension_count", Type: ggufwrite.ValueUint32, Val: uint32(16)}), gguf.ErrFormat},
		"zero eps":         {withVocab(ggufwrite.KV{Key: "llama.attention.layer_norm_rms_epsilon", Type: ggufwrite.ValueFloat32, Val: float32(0)}), gguf.ErrFormat},
		"NaN eps":          {withVocab(ggufwrite.KV{Key: "llama.attention.layer_norm_rms_epsilon", Type: ggufwrite.ValueFloat32, Val: float32(math.NaN())}), gguf.ErrFormat},
		"int eps":          {withVocab(ggufwrite.KV{Key: "llama.attention.layer_norm_rms_epsilon", Type: ggufwrite.ValueUint32, Val: uint32(1)}), gguf.ErrFormat},
		"negative theta":   {withVocab(ggufwrite.KV{Key: "llama.rope.freq_base", Type: ggufwrite.ValueFloat32, Val: float32(-1)}), gguf.ErrFormat},
		"inf theta":        {withVocab(ggufwrite.KV{Key: "llama.rope.freq_base", Type: ggufwrite.ValueFloat64, Val: math.Inf(1)}), gguf.ErrFormat},
		"string theta":     {withVocab(ggufwrite.KV{Key: "llama.rope.freq_base", Type: ggufwrite.ValueString, Val: "1e4"}), gguf.ErrFormat},
		"string kv heads":  {withVocab(ggufwrite.KV{Key: "llama.attention.head_count_kv", Type: ggufwrite.ValueString, Val: "2"}), gguf.ErrFormat},
		"zero vocab":       {withVocab(ggufwrite.KV{Key: "llama.vocab_size", Type: ggufwrite.ValueUint32, Val: uint32(0)}), gguf.ErrFormat},
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
