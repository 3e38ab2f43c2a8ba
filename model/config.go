package model

import (
	"errors"
	"fmt"
	"math"

	"github.com/flashgo/flashgo/model/gguf"
)

// DefaultRopeFreqBase is the RoPE base frequency θ used when a file has no
// <arch>.rope.freq_base key, as in llama.cpp and llama2.c.
const DefaultRopeFreqBase = 10000

// Config holds the hyperparameters of a decoder-only transformer of the
// Llama family, read from GGUF metadata by [ReadConfig].
type Config struct {
	// Architecture is general.architecture, such as "llama"; the other keys
	// are read under it ("llama.embedding_length").
	Architecture string
	// EmbeddingLength is the width of the residual stream (d_model).
	EmbeddingLength int
	// FeedForwardLength is the hidden width of the feed-forward network.
	FeedForwardLength int
	// BlockCount is the number of transformer blocks (layers).
	BlockCount int
	// HeadCount is the number of query heads.
	HeadCount int
	// HeadCountKV is the number of key/value heads (grouped-query attention
	// when smaller than HeadCount); it defaults to HeadCount.
	HeadCountKV int
	// HeadDim is the width of one head: <arch>.attention.key_length, or
	// EmbeddingLength / HeadCount, which must then be a whole number.
	HeadDim int
	// RopeDimensionCount is the number of dimensions of each head that RoPE
	// rotates; it defaults to HeadDim.
	RopeDimensionCount int
	// RopeFreqBase is the RoPE base frequency θ; it defaults to
	// DefaultRopeFreqBase.
	RopeFreqBase float32
	// RMSNormEpsilon is the ε added to the mean square in RMSNorm.
	RMSNormEpsilon float32
	// ContextLength is the context the model was trained for.
	ContextLength int
	// VocabSize is the number of tokens: <arch>.vocab_size, or the length of
	// tokenizer.ggml.tokens, or the second dimension of token_embd.weight.
	VocabSize int
}

// ReadConfig reads the model hyperparameters from f's metadata and
// validates them with [Config.Validate]. Required keys are
// general.architecture and, under the architecture's prefix,
// embedding_length, feed_forward_length, block_count, attention.head_count,
// attention.layer_norm_rms_epsilon and context_length. Missing keys give
// errors wrapping [gguf.ErrNotFound], values of the wrong type or out of range
// ones wrapping [gguf.ErrFormat].
func ReadConfig(f *gguf.File) (Config, error) {
	if f == nil {
		return Config{}, errors.New("model: ReadConfig: nil *gguf.File; want a file from gguf.Open or gguf.Read")
	}
	var c Config
	var err error
	if c.Architecture, err = f.String("general.architecture"); err != nil {
		return Config{}, ggufError(err)
	}
	if c.Architecture == "" {
		return Config{}, fmt.Errorf("model: config: %w: empty general.architecture", gguf.ErrFormat)
	}
	p := c.Architecture + "."
	required := []struct {
		key string
		dst *int
	}{
		{"embedding_length", &c.EmbeddingLength},
		{"feed_forward_length", &c.FeedForwardLength},
		{"block_count", &c.BlockCount},
		{"attention.head_count", &c.HeadCount},
		{"context_length", &c.ContextLength},
	}
	for _, r := range required {
		if *r.dst, err = f.Int(p + r.key); err != nil {
			return Config{}, ggufError(err)
		}
	}
	if c.RMSNormEpsilon, err = f.Float32(p + "attention.layer_norm_rms_epsilon"); err != nil {
		return Config{}, ggufError(err)
	}

	optional := func(key string, dst *int, def func() int) error {
		v, err := f.Int(p + key)
		switch {
		case err == nil:
			*dst = v
		case errors.Is(err, gguf.ErrNotFound):
			*dst = def()
		default:
			return ggufError(err)
		}
		return nil
	}
	if err := optional("attention.head_count_kv", &c.HeadCountKV, func() int { return c.HeadCount }); err != nil {
		return Config{}, err
	}
	if err := optional("attention.key_length", &c.HeadDim, func() int {
		if c.HeadCount <= 0 || c.EmbeddingLength%c.HeadCount != 0 {
			return 0 // Validate reports it
		}
		return c.EmbeddingLength / c.HeadCount
	}); err != nil {
		return Config{}, err
	}
	if err := optional("rope.dimension_count", &c.RopeDimensionCount, func() int { return c.HeadDim }); err != nil {
		return Config{}, err
	}
	c.RopeFreqBase = DefaultRopeFreqBase
	if f.Has(p + "rope.freq_base") {
		if c.RopeFreqBase, err = f.Float32(p + "rope.freq_base"); err != nil {
			return Config{}, ggufError(err)
		}
	}

	switch {
	case f.Has(p + "vocab_size"):
		if c.VocabSize, err = f.Int(p + "vocab_size"); err != nil {
			return Config{}, ggufError(err)
		}
	case f.Has("tokenizer.ggml.tokens"):
		tokens, _ := f.Value("tokenizer.ggml.tokens")
		c.VocabSize = tokens.Len()
	default:
		if t, ok := f.Tensor("token_embd.weight"); ok && len(t.Dims) == 2 {
			c.VocabSize = t.Dims[1]
		}
	}

	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate checks that the hyperparameters describe a model that can run:
// positive sizes (a zero HeadDim is what ReadConfig leaves when the heads do
// not divide the embedding width), query heads that the KV heads divide, an even
// RoPE dimension count no larger than the head width, and positive finite
// ε and θ. Errors wrap [gguf.ErrFormat].
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("model: config: %w: "+format, append([]any{gguf.ErrFormat}, args...)...)
	}
	if c.Architecture == "" {
		return bad("empty architecture")
	}
	for _, v := range []struct {
		name string
		n    int
	}{
		{"embedding_length", c.EmbeddingLength},
		{"feed_forward_length", c.FeedForwardLength},
		{"block_count", c.BlockCount},
		{"attention.head_count", c.HeadCount},
		{"attention.head_count_kv", c.HeadCountKV},
		{"head dimension", c.HeadDim},
		{"rope.dimension_count", c.RopeDimensionCount},
		{"context_length", c.ContextLength},
		{"vocabulary size", c.VocabSize},
	} {
		if v.n <= 0 {
			return bad("%s is %d, want > 0", v.name, v.n)
		}
	}
	if c.HeadCount%c.HeadCountKV != 0 {
		return bad("%d query heads are not a multiple of %d KV heads", c.HeadCount, c.HeadCountKV)
	}
	if c.RopeDimensionCount%2 != 0 || c.RopeDimensionCount > c.HeadDim {
		return bad("rope dimension count %d must be even and at most the head dimension %d", c.RopeDimensionCount, c.HeadDim)
	}
	if !(c.RMSNormEpsilon > 0) || math.IsInf(float64(c.RMSNormEpsilon), 0) {
		return bad("RMS norm epsilon %g, want a positive finite number", c.RMSNormEpsilon)
	}
	if !(c.RopeFreqBase > 0) || math.IsInf(float64(c.RopeFreqBase), 0) {
		return bad("rope freq base %g, want a positive finite number", c.RopeFreqBase)
	}
	return nil
}

// ggufError prefixes an error of package gguf (a missing key or tensor, a
// value of the wrong type) with this package's name, so that every error the
// package returns starts with "model: ".
func ggufError(err error) error { return fmt.Errorf("model: %w", err) }
