package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/model"
)

// windowLayers says which layers of a model use its sliding window.
type windowLayers uint8

const (
	// windowAll applies the window on every layer (Mistral 7B v0.1).
	windowAll windowLayers = iota
	// windowEven applies it on even layers 0, 2, 4, … and leaves odd
	// layers global (Gemma 2: Hugging Face's is_sliding = not layer_idx %
	// 2; llama.cpp's swa pattern 2).
	windowEven
)

// modelPreset is the attention geometry and the hyperparameters of a
// well-known model, as its published configuration gives them: what
// benchmarks and tests need to reproduce its attention calls without its
// weights. The comments in modelPresets cite the config.json fields each
// value comes from.
type modelPreset struct {
	// Name is the lookup key ("llama3-8b"); Title is for people to read;
	// Source is the repository whose configuration the values come from.
	Name, Title, Source string

	Layers      int // num_hidden_layers
	Embedding   int // hidden_size
	FeedForward int // intermediate_size
	Vocab       int // vocab_size

	Heads   int // num_attention_heads
	KVHeads int // num_key_value_heads (Heads when the model has none)
	HeadDim int // head_dim, or hidden_size / num_attention_heads
	Context int // max_position_embeddings

	// Window is the sliding window in keys, the query's own included, as
	// llama.cpp counts it (a key p0 is hidden from query p1 iff p1 − p0 >=
	// Window; Hugging Face's sliding_window); 0 is none. WindowLayers
	// says which layers use it.
	Window       int
	WindowLayers windowLayers
	// SoftCap is the attention logit soft-cap (attn_logit_softcapping),
	// FinalSoftCap the one on the output logits (final_logit_softcapping);
	// 0 is none.
	SoftCap, FinalSoftCap float32
	// Scale is the attention scale when it is not 1/sqrt(HeadDim)
	// (query_pre_attn_scalar^−½), 0 otherwise.
	Scale float32

	// RoPE is the rotary embedding mode as llama.cpp runs the model's GGUF
	// conversion (normal for the "llama" architecture, whose converter
	// permutes Q and K; NeoX for Qwen 2 and Gemma 2; none for GPT-2).
	RoPE      model.RopeMode
	RopeTheta float32 // rope_theta
	NormEps   float32 // rms_norm_eps (layer_norm_epsilon for GPT-2)
}

// modelPresets returns the known models: Llama 3 8B and 70B, Mistral 7B v0.1,
// Qwen 2.5 7B, Gemma 2 9B, GPT-2 (small) and stories260K, in that order.
func modelPresets() []modelPreset {
	return []modelPreset{
		{
			// meta-llama/Meta-Llama-3-8B config.json: hidden_size 4096,
			// intermediate_size 14336, num_hidden_layers 32,
			// num_attention_heads 32, num_key_value_heads 8,
			// max_position_embeddings 8192, rope_theta 500000.0,
			// rms_norm_eps 1e-05, vocab_size 128256.
			Name: "llama3-8b", Title: "Llama 3 8B", Source: "meta-llama/Meta-Llama-3-8B",
			Layers: 32, Embedding: 4096, FeedForward: 14336, Vocab: 128256,
			Heads: 32, KVHeads: 8, HeadDim: 128, Context: 8192,
			RoPE: model.RopeNormal, RopeTheta: 500000, NormEps: 1e-5,
		},
		{
			// meta-llama/Meta-Llama-3-70B config.json: hidden_size 8192,
			// intermediate_size 28672, num_hidden_layers 80,
			// num_attention_heads 64, num_key_value_heads 8,
			// max_position_embeddings 8192, rope_theta 500000.0,
			// rms_norm_eps 1e-05, vocab_size 128256.
			Name: "llama3-70b", Title: "Llama 3 70B", Source: "meta-llama/Meta-Llama-3-70B",
			Layers: 80, Embedding: 8192, FeedForward: 28672, Vocab: 128256,
			Heads: 64, KVHeads: 8, HeadDim: 128, Context: 8192,
			RoPE: model.RopeNormal, RopeTheta: 500000, NormEps: 1e-5,
		},
		{
			// mistralai/Mistral-7B-v0.1 config.json: hidden_size 4096,
			// intermediate_size 14336, num_hidden_layers 32,
			// num_attention_heads 32, num_key_value_heads 8,
			// max_position_embeddings 32768, sliding_window 4096,
			// rope_theta 10000.0, rms_norm_eps 1e-05, vocab_size 32000.
			// llama.cpp converts it to the "llama" architecture (normal
			// RoPE). Later versions (v0.2, v0.3) have no sliding window.
			Name: "mistral-7b", Title: "Mistral 7B v0.1", Source: "mistralai/Mistral-7B-v0.1",
			Layers: 32, Embedding: 4096, FeedForward: 14336, Vocab: 32000,
			Heads: 32, KVHeads: 8, HeadDim: 128, Context: 32768,
			Window: 4096, WindowLayers: windowAll,
			RoPE: model.RopeNormal, RopeTheta: 10000, NormEps: 1e-5,
		},
		{
			// Qwen/Qwen2.5-7B config.json: hidden_size 3584,
			// intermediate_size 18944, num_hidden_layers 28,
			// num_attention_heads 28, num_key_value_heads 4,
			// max_position_embeddings 131072, use_sliding_window false,
			// rope_theta 1000000.0, rms_norm_eps 1e-06, vocab_size 152064.
			// (Qwen2.5-7B-Instruct's config has max_position_embeddings
			// 32768 and reaches 131072 with YaRN.) Q, K and V have biases.
			Name: "qwen2.5-7b", Title: "Qwen 2.5 7B", Source: "Qwen/Qwen2.5-7B",
			Layers: 28, Embedding: 3584, FeedForward: 18944, Vocab: 152064,
			Heads: 28, KVHeads: 4, HeadDim: 128, Context: 131072,
			RoPE: model.RopeNeoX, RopeTheta: 1000000, NormEps: 1e-6,
		},
		{
			// google/gemma-2-9b config.json: hidden_size 3584,
			// intermediate_size 14336, num_hidden_layers 42,
			// num_attention_heads 16, num_key_value_heads 8, head_dim 256,
			// max_position_embeddings 8192, sliding_window 4096 (even
			// layers), attn_logit_softcapping 50.0,
			// final_logit_softcapping 30.0, query_pre_attn_scalar 256
			// (so the scale is 1/sqrt(head_dim), the default),
			// rope_theta 10000.0, rms_norm_eps 1e-06, vocab_size 256000.
			Name: "gemma2-9b", Title: "Gemma 2 9B", Source: "google/gemma-2-9b",
			Layers: 42, Embedding: 3584, FeedForward: 14336, Vocab: 256000,
			Heads: 16, KVHeads: 8, HeadDim: 256, Context: 8192,
			Window: 4096, WindowLayers: windowEven, SoftCap: 50, FinalSoftCap: 30,
			RoPE: model.RopeNeoX, RopeTheta: 10000, NormEps: 1e-6,
		},
		{
			// openai-community/gpt2 config.json: n_embd 768, n_layer 12,
			// n_head 12, n_positions 1024 (n_ctx), n_inner null (4·n_embd),
			// layer_norm_epsilon 1e-05, vocab_size 50257; learned absolute
			// positions, no RoPE; multi-head attention.
			Name: "gpt2", Title: "GPT-2 (124M)", Source: "openai-community/gpt2",
			Layers: 12, Embedding: 768, FeedForward: 3072, Vocab: 50257,
			Heads: 12, KVHeads: 12, HeadDim: 64, Context: 1024,
			RoPE: model.RopeNone, NormEps: 1e-5,
		},
		{
			// karpathy/tinyllamas stories260K as llama.cpp converts it
			// (README.md, "The test model"): llama.embedding_length 64,
			// feed_forward_length 172, block_count 5,
			// attention.head_count 8, head_count_kv 4, context_length
			// 2048, no rope.freq_base (10000), layer_norm_rms_epsilon
			// 1e-05, 512 tokens.
			Name: "stories260k", Title: "TinyStories 260K", Source: "karpathy/tinyllamas (stories260K.gguf)",
			Layers: 5, Embedding: 64, FeedForward: 172, Vocab: 512,
			Heads: 8, KVHeads: 4, HeadDim: 8, Context: 2048,
			RoPE: model.RopeNormal, RopeTheta: 10000, NormEps: 1e-5,
		},
	}
}

// lookupPreset returns the preset called name, compared without regard to
// case, spaces, dots, dashes and underscores ("Llama-3 8B", "llama3_8b"
// and "llama3-8b" are the same), against both Name and Title.
func lookupPreset(name string) (modelPreset, bool) {
	key := presetKey(name)
	for _, p := range modelPresets() {
		if presetKey(p.Name) == key || presetKey(p.Title) == key {
			return p, true
		}
	}
	return modelPreset{}, false
}

func presetKey(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '-', '_', '.':
			return -1
		}
		return r
	}, strings.ToLower(s))
}

// Sliding reports whether layer uses the sliding window.
func (p modelPreset) Sliding(layer int) bool {
	if p.Window <= 0 {
		return false
	}
	return p.WindowLayers == windowAll || layer%2 == 0
}

// AttentionOptions returns the engine options of the model's attention in
// the given layer during decoding: causal, with the window (a window of W
// keys is attention.Window{Left: W − 1, Right: 0}) on the layers that have
// it, the logit soft-cap and the scale.
func (p modelPreset) AttentionOptions(layer int) attention.Options {
	o := attention.Options{Causal: true, SoftCap: p.SoftCap, Scale: p.Scale}
	if p.Sliding(layer) {
		o.Window = &attention.Window{Left: p.Window - 1, Right: 0}
	}
	return o
}

// KVBytesPerToken is the size of one position of a KV cache of the model
// over all its layers, with elements of elemSize bytes (4 for float32, 2
// for fp16): 2·Layers·KVHeads·HeadDim·elemSize.
func (p modelPreset) KVBytesPerToken(elemSize int) int {
	return 2 * p.Layers * p.KVHeads * p.HeadDim * elemSize
}

// Sequence lengths of a preset's shape when -nq and -nkv are not given
// under -mode decode: one query row against a 4K cache.
const (
	presetDecodeNq  = 1
	presetDecodeNkv = 4096
)

// presetShapes turns the -preset list into shapes: each takes the model's
// heads, K/V heads and head dimension, and the mask, sliding window,
// soft-cap and scale of its layer 0 (modelPreset.AttentionOptions), with
// the batch and sequence lengths given. Repeats are dropped.
func presetShapes(list string, batch, nq, nkv int) ([]shape, error) {
	names, err := splitFlag("-preset", list)
	if err != nil {
		return nil, err
	}
	var out []shape
	for _, name := range names {
		p, ok := lookupPreset(name)
		if !ok {
			return nil, fmt.Errorf("unknown preset %q; want one of %s (attnbench -h describes them)", name, strings.Join(presetNames(), ", "))
		}
		if slices.ContainsFunc(out, func(s shape) bool { return s.name == p.Name }) {
			continue
		}
		o := p.AttentionOptions(0)
		what := p.Title
		if p.Sliding(0) && !p.Sliding(1) {
			what += ", a sliding-window layer"
		}
		s := shape{name: p.Name, what: what, batch: batch, heads: p.Heads, kvHeads: p.KVHeads, dim: p.HeadDim, nq: nq, nkv: nkv,
			causal: o.Causal, softCap: o.SoftCap, scale: o.Scale, scaled: 1}
		if o.Window != nil {
			s.window = o.Window.Left + 1
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-preset is empty; want one of %s", strings.Join(presetNames(), ", "))
	}
	return out, nil
}

func presetNames() []string {
	var names []string
	for _, p := range modelPresets() {
		names = append(names, p.Name)
	}
	return names
}

// presetHelp lists the presets for the usage, one line each.
func presetHelp() string {
	var b strings.Builder
	for _, p := range modelPresets() {
		fmt.Fprintf(&b, "\n  %-12s %s: Hq %d, Hkv %d, d %d, context %d", p.Name, p.Title, p.Heads, p.KVHeads, p.HeadDim, p.Context)
		if p.Window > 0 {
			fmt.Fprintf(&b, ", window %d", p.Window)
			if p.Sliding(0) && !p.Sliding(1) {
				b.WriteString(" (even layers)")
			}
		}
		if p.SoftCap > 0 {
			fmt.Fprintf(&b, ", soft-cap %g", p.SoftCap)
		}
		if p.Scale != 0 {
			fmt.Fprintf(&b, ", scale %g", p.Scale)
		}
	}
	return b.String()
}
