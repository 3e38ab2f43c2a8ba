// Package gguf reads GGUF, the file format of llama.cpp and ggml: a header,
// typed metadata and a directory of tensors, then the tensors' data. Package
// model builds tokenizers and decoders on what it reads.
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
// Every error the package returns starts with "gguf: " once; test for the
// kinds with [errors.Is] and [ErrFormat], [ErrUnsupported] and [ErrNotFound].
package gguf
