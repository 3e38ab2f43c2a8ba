// Package reference holds the yardsticks that every flashgo attention kernel
// is measured against:
//
//   - [Attention], a float64 oracle that materialises the full score matrix
//     and does a textbook, max-subtracted softmax;
//   - [Compare] and [CompareF64], which summarise how far a result is from
//     the oracle, with explicit rules for NaN and ±Inf;
//   - [Naive], the float32 baseline a user would write without a fused
//     kernel (two Sgemm calls around a row softmax), for benchmarking.
//
// The package deliberately imports no other flashgo package: an oracle that
// shared code with the engine could share its bugs too.
//
// All tensors are plain contiguous slices in layout [batch, heads, seq, dim]
// with dim varying fastest. Attention computes softmax(scale·Q·Kᵀ + mask)·V
// independently for every (batch, query head) pair. Grouped-query attention
// is expressed by HeadsQ = g·HeadsKV: query head h reads K/V head h/g.
//
// # The attention row
//
// Every feature of [Params] is one term of the following definition, which
// Attention implements literally. Fix a batch entry b, a query head h and a
// query row i, and let the row's sequence have nq queries and nk keys (the
// whole SeqQ and SeqKV, or one sequence of a variable-length batch, see
// Params.CuSeqQ). With i and j the positions of the query and of a key
// within that sequence, the row's diagonal position is
//
//	i' = i + (nk − nq)   (bottom-right alignment, the default)
//	i' = i               (top-left alignment, when CausalTopLeft is set)
//
// Key j is visible to the row iff all of these hold:
//
//	Causal or CausalTopLeft:   j <= i'
//	Window, WindowLeft  >= 0:  j >= i' − WindowLeft
//	Window, WindowRight >= 0:  j <= i' + WindowRight
//	BoolMask != nil:           BoolMask[b, h, i, j] is true
//	Mask != nil:               Mask[b, h, i, j] is not −Inf
//
// (the masks are indexed by the packed positions, with broadcasting). A
// visible key has the logit
//
//	s   = Scale·⟨q_i, k_j⟩
//	s   = SoftCap·tanh(s/SoftCap)          if SoftCap > 0
//	x_j = s + (−Slopes[h]·|i' − j|) + Mask[b, h, i, j]
//
// with the ALiBi and Mask terms present only when those fields are set. Soft
// capping therefore bounds the dot product alone, before any bias, as in
// Gemma 2 and llama.cpp. With σ = Sinks[h] (−Inf when Sinks is nil) and V the
// visible keys,
//
//	M   = max(σ, max_{j∈V} x_j)
//	Z   = e^(σ−M) + Σ_{j∈V} e^(x_j−M)
//	out = Σ_{j∈V} (e^(x_j−M)/Z)·v_j
//	lse = M + ln Z  = ln(e^σ + Σ_{j∈V} e^(x_j))
//
// A row with no visible key gets out = 0 and lse = σ, that is −Inf without a
// sink. The sink only enlarges the denominator: it has no value vector, so
// the weights of a row with a sink sum to less than 1.
package reference

import (
	"fmt"
	"math"
	"math/bits"
)

// Params describes one attention call: the tensor shapes, the softmax scale
// and the masks and logit modifiers of the call. The zero value of every
// optional field (everything after Scale) turns its feature off, so a
// Params that sets only the shapes is plain softmax attention. The package
// comment gives the exact definition that all fields together implement.
type Params struct {
	// Batch is the number of independent sequences.
	// HeadsQ is the number of query heads and HeadsKV the number of key/value
	// heads; HeadsQ must be a multiple of HeadsKV (grouped-query attention).
	Batch, HeadsQ, HeadsKV int
	// SeqQ is the number of queries and SeqKV the number of keys per head.
	// Either may be zero: an empty query set gives an empty result, an empty
	// key set gives rows with no visible key (zeros, log-sum-exp −Inf).
	SeqQ, SeqKV int
	// Dim is the head dimension of Q and K.
	Dim int
	// DimV is the head dimension of V and of the output; 0 means Dim
	// (DeepSeek's multi-head latent attention has Dim 192 and DimV 128,
	// its absorbed decode 576 and 512).
	DimV int
	// Scale multiplies Q·Kᵀ before the softmax; 0 means 1/sqrt(Dim), the
	// usual choice, so the zero value of the field does the common thing.
	Scale float64

	// Causal enables the bottom-right aligned causal mask: query i sees key
	// j iff j <= i + (SeqKV − SeqQ), as in FlashAttention >= 2.1 (see
	// Visible).
	Causal bool
	// CausalTopLeft enables the top-left aligned causal mask of PyTorch's
	// is_causal: query i sees key j iff j <= i. It also moves the diagonal
	// that Window and Slopes measure from to i' = i. At most one of Causal
	// and CausalTopLeft may be set.
	CausalTopLeft bool

	// Window enables the sliding-window (local) mask of FlashAttention's
	// window_size = (WindowLeft, WindowRight): a query with diagonal
	// position i' sees key j iff i' − WindowLeft <= j <= i' + WindowRight.
	// A bound of -1 leaves that side unbounded, so (-1, -1) is no window
	// and (w, 0) is the usual causal sliding window of w+1 keys. The window
	// intersects the causal masks (a causal window has an effective right
	// bound of 0). Without Window both bounds must be 0: Window is the
	// switch, so that the zero Params has no window while (0, 0), which
	// shows a query only its diagonal key, stays expressible.
	Window                  bool
	WindowLeft, WindowRight int

	// SoftCap, when positive, caps each scaled dot product s smoothly to
	// (−SoftCap, SoftCap) as SoftCap·tanh(s/SoftCap) (Gemma 2's
	// attn_logit_softcapping), before ALiBi and Mask are added. 0 is off.
	SoftCap float64

	// Slopes, when non-nil, holds one ALiBi slope per query head (length
	// HeadsQ); head h adds −Slopes[h]·|i' − j| to the logit of key j, where
	// i' is the diagonal position. This is llama.cpp's ALiBi (its mask holds
	// −|p_q − p_k|, scaled per head by the slope) and FlashAttention's
	// alibi_slopes; for the keys a causal row sees it equals
	// Slopes[h]·(j − i') <= 0, so distant keys are penalised.
	Slopes []float64

	// Mask, when non-nil, is an additive float mask of shape MaskShape,
	// broadcast to [Batch, HeadsQ, SeqQ, SeqKV]: each dimension of
	// MaskShape is either the full size or 1, and len(Mask) must be the
	// product of MaskShape. The entry for (b, h, i, j) is added to the
	// logit; an entry of −Inf hides the key instead (it is never added, so
	// a NaN in a hidden K or V row cannot leak). NaN or +Inf entries make
	// the row NaN, as any NaN or +Inf logit does.
	Mask      []float64
	MaskShape [4]int
	// BoolMask, when non-nil, is a boolean mask (true keeps the key, false
	// hides it) of shape BoolMaskShape, broadcast like Mask.
	BoolMask      []bool
	BoolMaskShape [4]int

	// Sinks, when non-nil, holds one attention-sink logit per query head
	// (length HeadsQ), as in gpt-oss: the sink joins the softmax
	// denominator but has no value, and it is counted in the log-sum-exp,
	// lse = ln(e^sink + Σ_j e^(x_j)). A row with no visible key gets zero
	// output and lse = sink. −Inf is allowed and is the same as no sink.
	// When partial results are merged by log-sum-exp, exactly one part may
	// carry the sink.
	Sinks []float64

	// CuSeqQ and CuSeqKV, when non-nil, make the call a variable-length
	// batch as in flash_attn_varlen_func: Batch must be 1, and the
	// sequences are packed one after another along the sequence axis, so
	// that q is [1, HeadsQ, SeqQ, Dim] and k, v are [1, HeadsKV, SeqKV,
	// Dim]. Sequence s owns queries CuSeqQ[s] ≤ i < CuSeqQ[s+1] and keys
	// CuSeqKV[s] ≤ j < CuSeqKV[s+1] and attends only within itself; its
	// causal alignment, window and ALiBi positions use its own lengths and
	// positions. Both slices have length nseq+1, start at 0, never
	// decrease (empty sequences are allowed) and end at SeqQ and SeqKV
	// respectively. Mask and BoolMask are indexed by the packed positions.
	CuSeqQ, CuSeqKV []int
}

// Validate reports whether p describes a well-formed attention call. The
// error names the offending field and what was expected, so a failing test
// or a user's misconfiguration can be diagnosed from the message alone.
func (p Params) Validate() error {
	// Plain if-chains rather than a table: Validate runs on every call of
	// the hot baseline, and a table of structs would be heap-allocated.
	if err := atLeast("Batch", p.Batch, 1); err != nil {
		return err
	}
	if err := atLeast("HeadsQ", p.HeadsQ, 1); err != nil {
		return err
	}
	if err := atLeast("HeadsKV", p.HeadsKV, 1); err != nil {
		return err
	}
	if err := atLeast("SeqQ", p.SeqQ, 0); err != nil {
		return err
	}
	if err := atLeast("SeqKV", p.SeqKV, 0); err != nil {
		return err
	}
	if err := atLeast("Dim", p.Dim, 1); err != nil {
		return err
	}
	if err := atLeast("DimV", p.DimV, 0); err != nil {
		return err
	}
	if p.HeadsQ%p.HeadsKV != 0 {
		return fmt.Errorf("reference: Params.HeadsQ = %d is not a multiple of Params.HeadsKV = %d", p.HeadsQ, p.HeadsKV)
	}
	if math.IsNaN(p.Scale) || math.IsInf(p.Scale, 0) {
		return fmt.Errorf("reference: Params.Scale = %v, want a finite number (0 means 1/sqrt(Dim))", p.Scale)
	}
	// The length helpers multiply the sizes together; refuse shapes whose
	// element counts (or the per-head score matrix) do not fit in an int
	// rather than let them wrap around silently.
	if !fits(p.Batch, p.HeadsQ, p.SeqQ, p.Dim) {
		return fmt.Errorf("reference: Params sizes overflow int in QLen (Batch·HeadsQ·SeqQ·Dim)")
	}
	if !fits(p.Batch, p.HeadsKV, p.SeqKV, p.Dim) {
		return fmt.Errorf("reference: Params sizes overflow int in KVLen (Batch·HeadsKV·SeqKV·Dim)")
	}
	if !fits(p.Batch, p.HeadsKV, p.SeqKV, p.DimV) || !fits(p.Batch, p.HeadsQ, p.SeqQ, p.DimV) {
		return fmt.Errorf("reference: Params sizes overflow int in VLen or OutLen (·DimV)")
	}
	if !fits(p.SeqQ, p.SeqKV, 1, 1) {
		return fmt.Errorf("reference: Params sizes overflow int in the score matrix (SeqQ·SeqKV)")
	}

	if p.Causal && p.CausalTopLeft {
		return fmt.Errorf("reference: Params.Causal and Params.CausalTopLeft are both true; want at most one (bottom-right or top-left alignment)")
	}
	if p.Window {
		if err := windowBound("WindowLeft", p.WindowLeft); err != nil {
			return err
		}
		if err := windowBound("WindowRight", p.WindowRight); err != nil {
			return err
		}
	} else if p.WindowLeft != 0 || p.WindowRight != 0 {
		return fmt.Errorf("reference: Params.WindowLeft = %d and Params.WindowRight = %d but Params.Window is false; want Window = true to enable the window, or both bounds 0",
			p.WindowLeft, p.WindowRight)
	}
	if math.IsNaN(p.SoftCap) || math.IsInf(p.SoftCap, 0) || p.SoftCap < 0 {
		return fmt.Errorf("reference: Params.SoftCap = %v, want a finite number >= 0 (0 = off)", p.SoftCap)
	}
	if p.Slopes != nil {
		if len(p.Slopes) != p.HeadsQ {
			return fmt.Errorf("reference: Params.Slopes has %d elements, want HeadsQ = %d (one ALiBi slope per query head) or nil", len(p.Slopes), p.HeadsQ)
		}
		for h, s := range p.Slopes {
			if math.IsNaN(s) || math.IsInf(s, 0) {
				return fmt.Errorf("reference: Params.Slopes[%d] = %v, want a finite number", h, s)
			}
		}
	}
	if p.Sinks != nil {
		if len(p.Sinks) != p.HeadsQ {
			return fmt.Errorf("reference: Params.Sinks has %d elements, want HeadsQ = %d (one sink logit per query head) or nil", len(p.Sinks), p.HeadsQ)
		}
		for h, s := range p.Sinks {
			if math.IsNaN(s) || math.IsInf(s, 1) {
				return fmt.Errorf("reference: Params.Sinks[%d] = %v, want a finite number or -Inf (no sink)", h, s)
			}
		}
	}
	if err := p.checkMaskShape("Mask", p.Mask != nil, len(p.Mask), p.MaskShape); err != nil {
		return err
	}
	if err := p.checkMaskShape("BoolMask", p.BoolMask != nil, len(p.BoolMask), p.BoolMaskShape); err != nil {
		return err
	}
	return p.checkVarlen()
}

// windowBound checks one side of the sliding window.
func windowBound(field string, v int) error {
	if v < -1 {
		return fmt.Errorf("reference: Params.%s = %d, want >= 0, or -1 for unbounded", field, v)
	}
	return nil
}

// maskDims names the dimensions of a mask, for error messages.
var maskDims = [4]string{"Batch", "HeadsQ", "SeqQ", "SeqKV"}

// checkMaskShape validates a broadcast mask named name (Mask or BoolMask)
// with n elements, set when set is true, against the full score shape.
func (p Params) checkMaskShape(name string, set bool, n int, shape [4]int) error {
	if !set {
		if shape != [4]int{} {
			return fmt.Errorf("reference: Params.%sShape = %v but Params.%s is nil; want both set or neither", name, shape, name)
		}
		return nil
	}
	full := [4]int{p.Batch, p.HeadsQ, p.SeqQ, p.SeqKV}
	for d, s := range shape {
		if s != full[d] && s != 1 {
			return fmt.Errorf("reference: Params.%sShape[%d] (%s) = %d, want %d (%s) or 1 (broadcast)", name, d, maskDims[d], s, full[d], maskDims[d])
		}
	}
	// Every dim is at most its full size, which fits (checked above for the
	// query and score sizes), but the product of all four may not.
	if !fits(shape[0], shape[1], shape[2], shape[3]) {
		return fmt.Errorf("reference: Params.%sShape = %v has more elements than an int can count", name, shape)
	}
	if want := shape[0] * shape[1] * shape[2] * shape[3]; n != want {
		return fmt.Errorf("reference: Params.%s has %d elements, want %d (the product of %sShape %v)", name, n, want, name, shape)
	}
	return nil
}

// checkVarlen validates CuSeqQ and CuSeqKV.
func (p Params) checkVarlen() error {
	if p.CuSeqQ == nil && p.CuSeqKV == nil {
		return nil
	}
	if p.CuSeqQ == nil || p.CuSeqKV == nil {
		return fmt.Errorf("reference: only one of Params.CuSeqQ (%d elements) and Params.CuSeqKV (%d elements) is set; want both (variable-length batch) or neither",
			len(p.CuSeqQ), len(p.CuSeqKV))
	}
	if len(p.CuSeqQ) != len(p.CuSeqKV) {
		return fmt.Errorf("reference: Params.CuSeqQ has %d elements and Params.CuSeqKV %d; want the same (number of sequences + 1)", len(p.CuSeqQ), len(p.CuSeqKV))
	}
	if p.Batch != 1 {
		return fmt.Errorf("reference: Params.Batch = %d with CuSeqQ/CuSeqKV set; want 1 (the sequences are packed along the sequence axis)", p.Batch)
	}
	if err := checkOffsets("CuSeqQ", p.CuSeqQ, "SeqQ", p.SeqQ); err != nil {
		return err
	}
	return checkOffsets("CuSeqKV", p.CuSeqKV, "SeqKV", p.SeqKV)
}

// checkOffsets validates one cumulative-offset slice against its total.
func checkOffsets(name string, cu []int, totalName string, total int) error {
	if len(cu) == 0 {
		return fmt.Errorf("reference: Params.%s is empty; want number of sequences + 1 offsets starting at 0", name)
	}
	if cu[0] != 0 {
		return fmt.Errorf("reference: Params.%s[0] = %d, want 0", name, cu[0])
	}
	for s := 1; s < len(cu); s++ {
		if cu[s] < cu[s-1] {
			return fmt.Errorf("reference: Params.%s[%d] = %d is less than %s[%d] = %d; want non-decreasing offsets", name, s, cu[s], name, s-1, cu[s-1])
		}
	}
	if last := cu[len(cu)-1]; last != total {
		return fmt.Errorf("reference: Params.%s[%d] = %d, want Params.%s = %d (the packed length)", name, len(cu)-1, last, totalName, total)
	}
	return nil
}

// atLeast returns an error naming the field when v < lo.
func atLeast(field string, v, lo int) error {
	if v < lo {
		return fmt.Errorf("reference: Params.%s = %d, want >= %d", field, v, lo)
	}
	return nil
}

// fits reports whether the product of four non-negative ints fits in an int.
func fits(a, b, c, d int) bool {
	r := uint64(1)
	for _, x := range [4]int{a, b, c, d} {
		hi, lo := bits.Mul64(r, uint64(x))
		if hi != 0 || lo > math.MaxInt {
			return false
		}
		r = lo
	}
	return true
}

// QLen is the number of elements of Q and of the output:
// Batch·HeadsQ·SeqQ·Dim.
func (p Params) QLen() int { return p.Batch * p.HeadsQ * p.SeqQ * p.Dim }

// KVLen is the number of elements of K: Batch·HeadsKV·SeqKV·Dim (and of V
// when DimV is 0 or Dim).
func (p Params) KVLen() int { return p.Batch * p.HeadsKV * p.SeqKV * p.Dim }

// VDim is the head dimension of V and of the output: DimV, or Dim when
// DimV is 0.
func (p Params) VDim() int {
	if p.DimV == 0 {
		return p.Dim
	}
	return p.DimV
}

// VLen is the number of elements of V: Batch·HeadsKV·SeqKV·VDim.
func (p Params) VLen() int { return p.Batch * p.HeadsKV * p.SeqKV * p.VDim() }

// OutLen is the number of elements of the output: Batch·HeadsQ·SeqQ·VDim.
func (p Params) OutLen() int { return p.Batch * p.HeadsQ * p.SeqQ * p.VDim() }

// LSELen is the number of log-sum-exp values, one per query row:
// Batch·HeadsQ·SeqQ.
func (p Params) LSELen() int { return p.Batch * p.HeadsQ * p.SeqQ }

// EffectiveScale is the scale actually applied to Q·Kᵀ: Scale, or
// 1/sqrt(Dim) when Scale is 0. It is only meaningful for valid Params.
func (p Params) EffectiveScale() float64 {
	if p.Scale == 0 {
		return 1 / math.Sqrt(float64(p.Dim))
	}
	return p.Scale
}

// Visible reports whether query i (0-based, of SeqQ) may attend to key j
// (0-based, of SeqKV) under the masks that depend on positions only: the
// causal masks, the sliding window and the sequence boundaries of a
// variable-length batch (i and j are then packed positions). Mask and
// BoolMask, which may vary with batch and head, are not consulted; Bias
// applies them. Indices outside the sequences are never visible. It is only
// meaningful for valid Params.
//
// With Causal the mask is aligned to the bottom right: query i sees key j
// iff j <= i + (SeqKV − SeqQ). The alignment matters when SeqQ ≠ SeqKV. In
// decoding with a KV cache the queries are the newest SeqQ tokens of a
// SeqKV-long sequence, so the last query must see every key; aligning to
// the top left (CausalTopLeft, j <= i) would instead hide the cached prefix.
// When SeqQ > SeqKV the first SeqQ − SeqKV queries see no key at all under
// Causal; such rows give zeros and log-sum-exp −Inf (or the sink).
func (p Params) Visible(i, j int) bool {
	if i < 0 || i >= p.SeqQ || j < 0 || j >= p.SeqKV {
		return false
	}
	lo, hi := p.keyRange(i)
	return lo <= j && j < hi
}

// Bias returns the additive term that ALiBi and Mask contribute to the
// logit of query i and key j (packed positions) in batch entry b and query
// head h, and whether that key is visible to the row at all under every
// mask (Visible, BoolMask, and a −Inf Mask entry). The logit of a visible
// key is softcap(Scale·⟨q, k⟩) + bias. It is only meaningful for valid
// Params and in-range indices.
func (p Params) Bias(b, h, i, j int) (bias float64, visible bool) {
	if !p.Visible(i, j) {
		return 0, false
	}
	_, kv0, diag := p.rowGeom(i)
	return p.elementBias(b, h, i, j, diag, j-kv0)
}

// hasElementTerms reports whether any feature needs a per-element look at
// the visible keys (rather than just the structural key range).
func (p Params) hasElementTerms() bool {
	return p.SoftCap != 0 || p.Slopes != nil || p.Mask != nil || p.BoolMask != nil
}

// elementBias applies BoolMask, Mask and ALiBi to key j (packed) of row i
// (packed) of batch b and head h, where diag is the row's diagonal position
// and jl the key's position, both within its sequence. It reports false for
// a key a mask hides. The structural masks are not checked.
func (p Params) elementBias(b, h, i, j, diag, jl int) (float64, bool) {
	if p.BoolMask != nil && !p.BoolMask[maskIndex(p.BoolMaskShape, b, h, i, j)] {
		return 0, false
	}
	var bias float64
	if p.Slopes != nil {
		d := diag - jl
		if d < 0 {
			d = -d
		}
		bias = -p.Slopes[h] * float64(d)
	}
	if p.Mask != nil {
		m := p.Mask[maskIndex(p.MaskShape, b, h, i, j)]
		if math.IsInf(m, -1) {
			return 0, false
		}
		bias += m
	}
	return bias, true
}

// maskIndex is the index of element (b, h, i, j) in a mask of the given
// broadcast shape.
func maskIndex(shape [4]int, b, h, i, j int) int {
	if shape[0] == 1 {
		b = 0
	}
	if shape[1] == 1 {
		h = 0
	}
	if shape[2] == 1 {
		i = 0
	}
	if shape[3] == 1 {
		j = 0
	}
	return ((b*shape[1]+h)*shape[2]+i)*shape[3] + j
}

// rowGeom locates packed query row i: its sequence's key count nk and first
// packed key kv0, and the row's diagonal position diag = i' (see the
// package comment) in that sequence's key coordinates.
func (p Params) rowGeom(i int) (nk, kv0, diag int) {
	q0, nq := 0, p.SeqQ
	nk = p.SeqKV
	if p.CuSeqQ != nil {
		// The sequence of row i is the first s with CuSeqQ[s+1] > i; empty
		// sequences (equal neighbouring offsets) are skipped over.
		lo, hi := 0, len(p.CuSeqQ)-1
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if p.CuSeqQ[mid+1] > i {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		q0, nq = p.CuSeqQ[lo], p.CuSeqQ[lo+1]-p.CuSeqQ[lo]
		kv0, nk = p.CuSeqKV[lo], p.CuSeqKV[lo+1]-p.CuSeqKV[lo]
	}
	diag = i - q0
	if !p.CausalTopLeft {
		diag += nk - nq
	}
	return nk, kv0, diag
}

// keyRange returns the packed keys [lo, hi) that row i may see under the
// structural masks (causal, window, sequence boundaries). They always form
// one contiguous range, empty when lo == hi; the oracle relies on that to
// touch only keys in it.
func (p Params) keyRange(i int) (lo, hi int) {
	nk, kv0, diag := p.rowGeom(i)
	l, h := 0, nk
	if p.Causal || p.CausalTopLeft {
		h = min(h, diag+1)
	}
	if p.Window {
		// A bound beyond nk+nq reaches past every key; clamping keeps the
		// arithmetic from overflowing for huge bounds. |diag| <= max(nk, nq).
		reach := nk + p.SeqQ + 1
		if p.WindowLeft >= 0 {
			l = max(l, diag-min(p.WindowLeft, reach))
		}
		if p.WindowRight >= 0 {
			h = min(h, diag+min(p.WindowRight, reach)+1)
		}
	}
	if h <= l {
		return kv0, kv0
	}
	return kv0 + l, kv0 + h
}

// FLOPs is the nominal floating-point operation count of the call:
// 4·Batch·HeadsQ·SeqQ·SeqKV·Dim (two matrix products of 2·SeqQ·SeqKV·Dim
// each), halved when Causal or CausalTopLeft. Halving is the convention of
// the project's shape suite; it ignores the softmax, the exact triangle
// size, windows, masks and sequence boundaries so that GFLOP/s figures are
// comparable across kernels and published numbers.
func (p Params) FLOPs() float64 {
	f := 4 * float64(p.Batch) * float64(p.HeadsQ) * float64(p.SeqQ) * float64(p.SeqKV) * float64(p.Dim)
	if p.Causal || p.CausalTopLeft {
		f /= 2
	}
	return f
}

// checkLen returns an error naming the argument when a slice is too short.
// Longer slices are accepted so that callers may pass views into larger
// buffers; only the leading need elements are used.
func checkLen(name string, have, need int, what string) error {
	if have < need {
		return fmt.Errorf("reference: %s has %d elements, want at least %d (%s)", name, have, need, what)
	}
	return nil
}
