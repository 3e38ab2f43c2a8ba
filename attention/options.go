package attention

import "fmt"

// Options are the per-call settings of an attention computation. The zero
// value of every field turns its feature off, so Options{} is plain
// softmax attention and Options{Causal: true} is causal attention.
//
// For batch entry b, query head h, query i and key j, with i' the query's
// diagonal position (see Alignment), key j is visible iff
//
//	Causal:       j <= i'
//	Window:       i' − Window.Left <= j <= i' + Window.Right (−1: unbounded)
//	BoolMask:     BoolMask[b, h, i, j] is true
//	Mask:         Mask[b, h, i, j] is not −Inf
//	CuSeqQ/KV:    i and j belong to the same sequence
//	TreeMask:     j is not among the sequence's last nq keys (its drafts),
//	              or bit i·nq + j − (Nkv − nq) of its mask is set
//
// and a visible key has the logit
//
//	s   = Scale·⟨q_i, k_j⟩
//	s   = SoftCap·tanh(s/SoftCap)                 if SoftCap > 0
//	x_j = s − Slopes[h]·|i' − j| + Mask[b, h, i, j]
//
// With σ = Sinks[h] (−Inf without sinks) and the sums over visible keys,
//
//	out_i = Σ_j e^{x_j}·v_j / (e^σ + Σ_j e^{x_j}),   lse_i = ln(e^σ + Σ_j e^{x_j})
//
// computed with every exponent relative to the running maximum. A row with
// no visible key, under any combination of options, gets out = 0 and lse =
// σ (−Inf without a sink), never NaN.
//
// Tiles of keys that the causal mask, the window or the sequence bounds hide
// from a whole block of queries are neither converted nor computed, so a
// sliding window of w keys costs in proportion to w, not to Nkv. Keys that
// those structural masks hide from a row are left out of its P·V entirely,
// so a NaN or Inf in their K or V rows never reaches it.
//
// Keys hidden by Mask or BoolMask: of the keys the structural masks leave
// a row, those that Mask or BoolMask hides before the row's first visible
// key or after its last visible key are never read for that row either,
// whatever their K and V rows hold: the padding of a key-padding mask, at
// the end or at the start of each sequence, may be uninitialised memory.
// A key that the mask hides between two keys the row sees gets
// probability exactly 0 but may still be read by P·V: a NaN or ±Inf in its
// value row may turn the row into NaN (0·NaN), so keep such value rows
// finite, or hide them with a window or CuSeqKV instead. (A NaN or ±Inf in
// the K row of a hidden key never matters: its score is replaced by −Inf,
// not added to.) A tile of keys that the mask hides from every row of a
// block of queries is skipped whole, like one outside every window.
type Options struct {
	// Scale multiplies Q·Kᵀ before the softmax; 0 means 1/sqrt(Dim). It
	// must be finite.
	Scale float32
	// Causal masks the keys after each query's diagonal position: query i
	// sees key j iff j <= i'. With the default alignment (BottomRight, as
	// FlashAttention >= 2.1) i' = i + Nkv − Nq; when Nq > Nkv the first
	// Nq − Nkv queries see no key at all and their output rows are zero and
	// their log-sum-exp −Inf (or the sink).
	Causal bool
	// CausalAlign picks the diagonal that Causal, Window and Slopes measure
	// from: BottomRight (the zero value, FlashAttention's and llama.cpp's
	// convention) or TopLeft (PyTorch's is_causal). It only matters when
	// Nq != Nkv.
	CausalAlign Alignment
	// Window, when non-nil, is a sliding attention window (Mistral, Gemma 2,
	// gpt-oss); see Window. Bounds below -1 are an error. nil is no window.
	Window *Window
	// SoftCap, when positive, caps each scaled score s smoothly as
	// SoftCap·tanh(s/SoftCap) before ALiBi and Mask are added (Gemma 2's
	// attn_logit_softcapping). 0 is off; a negative, NaN or infinite value
	// is an error.
	SoftCap float32
	// Slopes, when non-nil, holds one ALiBi slope per query head (length
	// Hq; see ALiBiSlopes): head h adds −Slopes[h]·|i' − j| to the logit
	// of key j. Each slope must be finite.
	Slopes []float32
	// Sinks, when non-nil, holds one attention-sink logit per query head
	// (length Hq), as in gpt-oss: the sink joins the softmax denominator
	// but has no value vector, so a row's weights sum to less than 1, and
	// it is counted in the log-sum-exp. −Inf is no sink for that head; NaN
	// and +Inf are errors. When partial results are merged (Merge), exactly
	// one part may carry the sink.
	Sinks []float32
	// Mask, when set (not the zero Tensor), is an additive float mask of
	// element type F32, F16 or BF16, read as [batch, heads, Nq, Nkv] with
	// the keys contiguous (the Layout's Dim is Nkv, its Seq is Nq). Batch
	// may be 1 to broadcast over the batch, Heads 1 to broadcast over the
	// query heads, and SeqStride 0 to broadcast one row over the queries.
	// Its entry is added to the logit; an entry of −Inf hides the key (the
	// score is replaced, not added to, so a NaN score of a hidden key does
	// not survive). A NaN or +Inf entry of a visible key makes the row NaN.
	Mask Tensor
	// BoolMask, when its Data is non-nil, is a boolean mask (true keeps the
	// key), broadcast like Mask; see BoolMask. Keys it hides at either end
	// of a row's range are never read (see above), so a key-padding mask
	// may hide uninitialised padding.
	BoolMask BoolMask
	// TreeMask, when its Offsets are non-nil, gives each sequence of a
	// paged or cache call (ForwardPagedKV, ForwardPaged, ForwardKVCaches,
	// with or without CuSeqQ) a bit mask over its query rows and its last
	// nq keys, the draft tokens of a tree being verified (FlashInfer's
	// packed custom_mask); see TreeMask. Each masked sequence's rows are
	// bitwise those of Forward over the sequence with the equivalent
	// BoolMask. Forward and ForwardSharedPrefix refuse it (Forward takes
	// BoolMask).
	TreeMask TreeMask
	// CuSeqQ and CuSeqKV, when non-nil, make a Forward call a
	// variable-length batch, as flash_attn_varlen_func: the batch must be
	// 1 and the sequences are packed one after another along the sequence
	// axis. Sequence s owns queries CuSeqQ[s] <= i < CuSeqQ[s+1] and keys
	// CuSeqKV[s] <= j < CuSeqKV[s+1] and attends only within itself; its
	// causal alignment, window and ALiBi distances use its own lengths and
	// positions. Both slices have nseq+1 elements, start at 0, never
	// decrease (empty sequences are allowed) and end at Nq and Nkv. Mask and
	// BoolMask are indexed by the packed positions. The work is shared out
	// by (sequence, K/V head, block of queries).
	//
	// ForwardPagedKV, ForwardPaged and ForwardKVCaches take CuSeqQ alone
	// (CuSeqKV is an error there: each sequence's keys are its own
	// length's positions of the store): per-sequence query counts, as
	// vLLM's query_start_loc, flash_attn_varlen_func's cu_seqlens_q with a
	// block_table, or FlashInfer's qo_indptr, so that one call serves a
	// continuous-batching step of decoding sequences and prefill chunks.
	// q and out are then [1, Hq, totalQ, Dim] (any strides), CuSeqQ has
	// one offset more than there are sequences (tables, lengths, seqs or
	// caches), starts at 0, never decreases and ends at totalQ, and
	// sequence s's CuSeqQ[s+1]−CuSeqQ[s] queries (0 allowed) are its
	// newest positions: query i of a sequence of nq queries and n keys is
	// at position n−nq+i, where the bottom-right causal mask, the window
	// and ALiBi measure from. A sequence may have more queries than keys
	// (n = 0 included), as a batch entry of the uniform form may: its
	// first nq−n queries lie before its first position, so with Causal
	// they see no key and give zero rows and −Inf log-sum-exps (or their
	// sink's), and without it every query sees all n keys. One rule for
	// both forms, because a batch entry with fewer keys than queries is
	// legitimate there (an empty or padding sequence, a shared-prefix
	// suffix of no keys) and the packed form computes each sequence as
	// that call for it alone. The log-sum-exps are laid out [1, Hq, totalQ]. Each
	// sequence's rows are bitwise those of the same entry point called
	// for that sequence alone (batch 1, Nq its query count) on the same
	// engine: it is computed in its own precision (ComputedPrecision of
	// its query count), with its own split of the keys (Config.KVSplits),
	// as that call would be.
	//
	// The offsets are ints, while PagedKV's BlockTable and SeqLens are
	// int32: offsets count positions of the caller's own Go slices of
	// packed queries, keys and outputs, which Go indexes with ints (as
	// Layout.Offset does), whereas a block table and lengths are read in
	// place from a runtime's arrays, which vLLM and FlashInfer keep as
	// int32 tensors. PagedKV.SlotMapping takes the same []int offsets.
	CuSeqQ, CuSeqKV []int
	// Precision is the arithmetic of the products Q·Kᵀ and P·V:
	// PrecisionFloat32 (the zero value) or PrecisionBFloat16, several
	// times faster where the CPU has AMX or AVX512-BF16. See Precision.
	Precision Precision
	// QuantizeQuery, with Q8 keys, quantises each query row to Q8 (a scale
	// per block of Q8Block values, as llama.cpp's Q8_0 and as the keys)
	// and computes Q·Kᵀ in integer dot products (kernel.QKRowsQ8Dot)
	// instead of dequantising every key: an opt-in, as llama.cpp's CPU
	// attention does by default, that trades the rounding of the query, at
	// most half a step of its block (docs/math.md, Section 9), for speed
	// where the CPU has integer dot-product instructions (amd64 with AVX2
	// or VNNI); elsewhere (purego, arm64) it is slower.
	// P·V and everything else stay as they are. It needs keys of type Q8
	// and PrecisionFloat32; otherwise the call returns an error.
	QuantizeQuery bool
}

// Alignment says where the diagonal of the score matrix lies when the
// number of queries Nq differs from the number of keys Nkv. The diagonal
// position of query i is
//
//	i' = i + Nkv − Nq   (BottomRight, the zero value)
//	i' = i              (TopLeft)
//
// Causal masking (key j visible iff j <= i'), the sliding window and the
// ALiBi distance |i' − j| are all measured from i'. In a variable-length
// batch, i, Nq and Nkv are those of the row's own sequence.
type Alignment uint8

const (
	// BottomRight aligns the diagonal to the bottom-right corner, as
	// FlashAttention >= 2.1 and llama.cpp do: the last query sees every
	// key, which is what decoding against a KV cache needs.
	BottomRight Alignment = iota
	// TopLeft aligns the diagonal to the top-left corner, as PyTorch's
	// scaled_dot_product_attention(is_causal=True) does: query i sees keys
	// 0..i whatever Nkv is.
	TopLeft
)

// String returns the constant's name, "BottomRight" or "TopLeft".
func (a Alignment) String() string {
	switch a {
	case BottomRight:
		return "BottomRight"
	case TopLeft:
		return "TopLeft"
	}
	return fmt.Sprintf("Alignment(%d)", uint8(a))
}

// Window is a sliding (local) attention window, FlashAttention's
// window_size = (Left, Right): the query with diagonal position i' (see
// Alignment) sees key j iff i' − Left <= j <= i' + Right. A bound of -1
// leaves that side unbounded, so {-1, -1} is no window at all and {w, 0}
// (or {w, -1} with Causal) is the causal sliding window of w+1 keys of
// Mistral, Gemma 2 and gpt-oss. The window intersects the causal mask.
type Window struct {
	Left, Right int
}

// BoolMask is a boolean attention mask: true keeps a key, false hides it.
// Element (b, h, i, j) for batch entry b, query head h, query i and key j
// lives at Data[Layout.Offset(b, h, i) + j], so the Layout is read as
// [batch, heads, Nq, Nkv] with the key axis contiguous (Layout.Dim is
// Nkv). Broadcasting: Batch may be 1 (one mask for every batch entry),
// Heads may be 1 (one mask for every head), and SeqStride may be 0 (one row
// of keys for every query, as a key-padding mask is); Seq must be Nq and
// Dim must be Nkv. The zero BoolMask (nil Data) is no mask. The keys it
// hides at either end of a row's range are never read for that row (see
// Options), so a key-padding mask may hide uninitialised padding.
type BoolMask struct {
	Layout
	Data []bool
}

// Precision is the arithmetic of attention's two products, S = Q·Kᵀ and
// P·V. Whatever the precision, the online softmax, its running maxima and
// sums, and the output accumulators are float32.
type Precision uint8

const (
	// PrecisionFloat32 computes both products in float32 (FMA): K and V
	// of every storage type are converted to float32 exactly, or
	// dequantised. It is the default.
	PrecisionFloat32 Precision = iota
	// PrecisionBFloat16 computes both products with bfloat16 operands and
	// float32 accumulation, which AMX (TDPBF16PS) and AVX512-BF16
	// (VDPBF16PS) run several times faster than float32 FMA: Q is rounded
	// to bfloat16 once per block of queries, K and V are used as bfloat16
	// (float32, fp16 and q8 values are rounded when a tile is packed;
	// bfloat16 ones are exact), the scores accumulate in float32, the
	// softmax is float32, and its probabilities are rounded to bfloat16
	// for P·V, which accumulates in float32. docs/math.md gives the error
	// this adds. Every option has the same meaning as in float32. On a
	// machine without AMX or AVX512-BF16 the bfloat16 products run the
	// float32 FMA kernels on operands widened exactly to float32 (AVX-512,
	// AVX2, NEON; portable Go with purego; kernel.BF16Implementation says
	// which), to the same rounding points and slower than float32.
	//
	// A call of few query rows (decode, a few draft tokens; see
	// ComputedPrecision) is computed in float32 instead: it reads K and V
	// rows where they lie, which bfloat16 products would first have to
	// pack, so float32 is the faster arithmetic there as well as the more
	// accurate one. Its output and log-sum-exp are those of the same call
	// with PrecisionFloat32, bit for bit.
	PrecisionBFloat16
)

// ComputedPrecision returns the arithmetic in which a call computes its
// products: opts.Precision, except that a call in PrecisionBFloat16 with
// at most 16 query rows per K/V head (qHeads/kvHeads query heads per K/V
// head times nq query positions) is computed in PrecisionFloat32 where the
// row kernels are SIMD (kernel.Current().RowKernels). nq is the query
// count of each batch entry of the paged and cache calls, as their query
// tensors give it, and of each sequence when those calls take
// Options.CuSeqQ (each sequence is computed in its own precision); for
// Forward with Options.CuSeqQ it is the number of packed query rows. The
// result describes a valid call; arguments that do
// not describe one (kvHeads not dividing qHeads, negative counts) return
// opts.Precision.
func ComputedPrecision(opts Options, qHeads, kvHeads, nq int) Precision {
	if opts.Precision != PrecisionBFloat16 || kvHeads <= 0 || qHeads <= 0 || qHeads%kvHeads != 0 || nq < 0 {
		return opts.Precision
	}
	if readsRows(qHeads/kvHeads, nq) {
		return PrecisionFloat32
	}
	return opts.Precision
}

// String returns the precision's short name: "float32" or "bfloat16".
func (p Precision) String() string {
	switch p {
	case PrecisionFloat32:
		return "float32"
	case PrecisionBFloat16:
		return "bfloat16"
	}
	return fmt.Sprintf("Precision(%d)", uint8(p))
}
