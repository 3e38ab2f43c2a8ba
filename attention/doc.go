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
// Queries and outputs are float32; keys and values may be float32, fp16 or
// bfloat16, converted to float32 once per tile.
//
// An Engine owns scratch memory and reuses it: after the first call with a
// given shape, calls allocate nothing. One Engine may be used from many
// goroutines at once.
//
// Special values: a row that sees no key (causal masking with more queries
// than keys, or no keys) gets zeros and a log-sum-exp of −Inf, never NaN;
// logits of any finite magnitude are safe, because every exponent is taken
// relative to the row's running maximum; a NaN in an input reaches only the
// rows whose computation reads it (a key or value that a mask hides from a
// row is never read for that row).
package attention
