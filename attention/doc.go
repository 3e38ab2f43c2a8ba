// Package attention computes scaled dot-product attention,
//
//	out = softmax(scale·Q·Kᵀ + mask)·V,
//
// on the CPU without building the Nq×Nkv score matrix: K and V are streamed
// in tiles and each tile's softmax is folded into a running output with the
// rescale-by-exp(m − m_new) rule (docs/math.md derives it). Memory traffic
// and scratch space are those of a few tiles, whatever the sequence length.
//
// Tensors are strided views (Tensor, Layout) of caller-owned slices of shape
// [batch, heads, seq, dim] with the head dimension contiguous, so the
// [batch, seq, heads, dim] layout of a projection, the [batch, heads, seq,
// dim] layout and views into a larger buffer all work without copies.
// Queries and outputs are float32, fp16 or bfloat16 (widened as they are
// gathered, rounded once as they are written); keys and values may be
// float32, fp16, bfloat16, 8-bit quantised (Q8, a scale per 32 values) or
// 8-bit floats (FP8E4M3, FP8E5M2, a scale per tensor or K/V head, as
// vLLM's fp8 caches), converted to float32 once per tile or in registers. V and the output may
// have another head dim than Q and K (multi-head latent attention).
// Options.Precision picks float32 products or bfloat16 ones with float32
// accumulation (AMX, AVX512-BF16).
//
// KV caches: KVCache is the contiguous cache of one sequence, whose K and V
// views Forward reads in place, so that decode and chunked prefill are one
// causal Forward call, and Engine.ForwardKVCaches decodes a batch of them,
// of different lengths, in one call; PagedCache holds many sequences in
// fixed-size blocks with copy-on-write forks, and Engine.ForwardPaged
// decodes a batch of its sequences in one call, reading the tiles through
// the block tables; Engine.ForwardPagedKV does the same over a caller's own
// block pool (PagedKV, vLLM's layout; V may be a view of K's pool, an MLA
// cache), and Engine.ForwardSharedPrefix decodes sequences that share a
// prefix reading the prefix once for all of them (cascade attention),
// from panels packed once for every step of a decode loop where a
// PackedPrefix holds them (Engine.PackPrefix packs them on the engine's
// threads); with Options.CuSeqQ and SharedPrefixKV.Groups one call takes
// a serving step of decodes and prefill chunks over several shared
// prompts.
// Config.KVSplits splits each decode's key range across threads
// (flash-decoding).
//
// An Engine owns scratch memory and reuses it: after the first call with a
// given shape, calls allocate nothing. One Engine may be used from many
// goroutines at once.
//
// Options adds, each off by default: causal masking aligned to the bottom
// right (FlashAttention) or the top left (PyTorch), sliding windows,
// additive float and boolean masks with broadcasting, ALiBi slopes, logit
// soft-capping, attention sinks and variable-length batches; together they
// cover the attention of Llama 3, Mistral, Qwen 2.5, Gemma 2, Phi and
// gpt-oss. The paged and cache calls take per-sequence query counts and
// per-sequence bit masks over draft tokens (TreeMask: speculative trees
// verified for many sequences in one call). Tiles that the causal mask, a window or the sequence bounds hide
// from a whole block of queries are never computed.
//
// Special values: a row that sees no key (causal masking with more queries
// than keys, no keys, a window or mask that hides everything, an empty
// sequence) gets zeros and a log-sum-exp of −Inf (or its sink), never NaN;
// logits of any finite magnitude are safe, because every exponent is taken
// relative to the row's running maximum; a NaN in an input reaches only the
// rows whose computation reads it (a key or value that the causal mask, a
// window or the sequence bounds hide from a row is never read for that row,
// nor is one that Mask, BoolMask or TreeMask hides before the row's first visible key
// or after its last, such as padding; one that they hide between visible
// keys may be read with weight 0, see Options).
//
// The examples show each way in: Engine.Forward (prefill over the [batch,
// seq, heads, dim] projections of a model, fp16 K/V), Engine.ForwardLSE
// (log-sum-exps, an empty row), Forward's error (what a misuse returns),
// Engine.Forward_latent (V of another head dim, multi-head latent
// attention), KVCache (a decode loop over one cache),
// Engine.ForwardKVCaches (a serving loop over one cache per request),
// PagedCache (forked sequences sharing a prompt), Engine.ForwardPagedKV
// (a runtime's own vLLM-style block pool; _mla, an MLA cache in one pool;
// _mixedBatch, a continuous-batching step; _treeMask, draft trees of two
// sequences verified in one step), Engine.ForwardSharedPrefix (samples of
// one prompt; _tableView, its tables as views of one; _mixedBatch, decodes
// and a prefill chunk over one prompt; _groups, two prompts in one step),
// PackedPrefix (a decode loop that packs its shared prompt once),
// Engine.PackPrefix (the pack on the engine's threads, and its memory),
// Merge and MergeN (attention over
// key ranges computed apart), DequantizeQ8 (int8 K/V) and
// Options_quantizeQuery (Q8 queries against Q8 keys in int8 dot products).
package attention
