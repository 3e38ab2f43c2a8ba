// Package model is the smallest LLM runtime around flashgo's attention: it
// reads models stored in the GGUF format (the file container, the tokenizer
// and the hyperparameters) and runs Llama-family decoders on flashgo's
// attention engine and SIMD kernels.
//
// # GGUF
//
// [Open] and [Read] parse a GGUF file (versions 2 and 3, little-endian): the
// header, metadata of every value type (nested arrays included) and the
// tensor directory. Tensor data is not read up front; [File.Float32s] reads one
// tensor through [io.ReaderAt] when asked and dequantises it to float32. F32,
// F16, BF16 and Q8_0 tensors can be dequantised; the directory accepts every
// tensor type that ggml defines, so the metadata and tokenizer of a model in
// another quantisation can still be read.
//
// The reader treats its input as hostile: every count, length, dimension and
// offset is checked against the bytes that remain in the file before anything
// is allocated, array nesting is capped at [MaxArrayDepth], and tensor data
// must lie, aligned, inside the file, no two tensors sharing bytes. A broken file gives an error wrapping
// [ErrFormat] (or [ErrUnsupported] for well-formed features that the package
// does not handle; a failing reader gives its own error); it never causes a
// panic, and the memory allocated is bounded by a small multiple of the file
// size, or of the bytes actually read if the reader holds fewer than the
// size it was given. FuzzGGUF in the tests checks this.
//
// Tensor shapes are reported in GGUF (ggml) order: Dims[0] is the
// innermost, contiguous dimension. A weight matrix that maps an n-vector to an
// m-vector therefore has Dims [n m] and is stored as m rows of n values.
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
// one GEMM (the kernel package's SIMD kernel.QKT), its output columns split
// across threads. A [Session] owns one contiguous
// [attention.KVCache] per layer, holding keys and values as float32 or, with
// [SessionOptions].KVType, as fp16, bfloat16 or 8-bit (Q8), grown by
// doubling as tokens arrive, so that a session's memory follows what it
// runs rather than the context length a file claims; each layer
// appends the new tokens' keys and values to its cache, and its attention
// is one call of the attention engine with the new tokens' queries and the
// cache's views of the cached keys and values, so a prompt is prefilled in
// one call and then decoded a token at a time through the same code (causal
// masking aligned to the bottom right). [Sampler] does greedy and seeded temperature, top-k and
// top-p sampling, and [Session.Generate] streams text. [Presets] lists the
// attention shapes of well-known models for benchmarks.
package model
