// Package model is the smallest LLM runtime around flashgo's attention: it
// reads the tokenizer and the hyperparameters of models stored in the GGUF
// format and runs Llama-family decoders on flashgo's attention engine and
// SIMD kernels.
//
// The GGUF container itself (header, metadata, tensor directory and tensor
// data) is package gguf (github.com/flashgo/flashgo/model/gguf); this
// package builds on the *gguf.File that its Open and Read return.
//
// # Tokenizer
//
// [NewTokenizer] builds the SentencePiece-style tokenizer of llama-family
// models (tokenizer.ggml.model "llama") from the GGUF metadata. Encoding
// follows llama.cpp's llm_tokenizer_spm: a space is prepended, spaces become
// "▁" (U+2581), the text is split into UTF-8 characters, and adjacent pieces
// are merged by vocabulary score, highest first; characters that are not in
// the vocabulary fall back to byte tokens ("<0x41>"). Decoding follows
// llama2.c: special tokens vanish, byte tokens become raw bytes, and the
// space that encoding prepended is removed from the first token after BOS.
//
// # Config
//
// [ReadConfig] collects the hyperparameters of a decoder-only transformer
// (embedding width, heads, grouped-query KV heads, RoPE and RMSNorm
// parameters, context and vocabulary size) from the "<arch>.*" metadata keys
// and validates them.
//
// # Decoder
//
// [Load] builds a [Model] from a GGUF file: token embedding, RMSNorm, Q/K/V
// and output projections, RoPE ([RopeNormal] on adjacent pairs or [RopeNeoX]
// on halves, theta from the metadata), grouped-query attention, a SwiGLU
// feed-forward block, the final norm and the logits (tied to the embedding
// when output.weight is absent). Weights are converted to float32 and
// transposed once at load, so that every projection of a block of tokens is
// one GEMM (the kernel package's SIMD kernel.MatMul), its output columns split
// across threads. A [Session] owns one contiguous
// [attention.KVCache] per layer, holding keys and values as float32 or, with
// [SessionOptions].KVType, as fp16, bfloat16, 8-bit (Q8) or fp8 (E4M3, per-head scales), grown by
// doubling as tokens arrive, so that a Session's memory follows what it
// runs rather than the context length a file claims; each layer
// appends the new tokens' keys and values to its cache, and its attention
// is one call of the attention engine with the new tokens' queries and the
// cache's views of the cached keys and values, so a prompt is prefilled in
// one call and then decoded a token at a time through the same code (causal
// masking aligned to the bottom right). [Sampler] does greedy and seeded temperature, top-k and
// top-p sampling, and [Session.Generate] streams text. (The attention
// shapes of well-known models, for benchmarks, are attnbench's -preset.)
package model
