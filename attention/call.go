package attention

import (
	"fmt"
	"math"
)

// call is one validated attention problem.
type call struct {
	out, q, k, v Tensor
	lse          []float32
	scale        float32
	causal       bool
	group        int       // query heads per K/V head
	dv           int       // head dim of V and of the output (q's and k's is q.Dim)
	asked        Precision // Options.Precision; each path of the plan computes in its own (plan.precision)
	q8Query      bool      // Options.QuantizeQuery: Q·Kᵀ from Q8 query rows (ws.q8) in integers

	topLeft    bool
	window     bool
	winL, winR int // -1: unbounded; otherwise clamped so that i' ± w cannot overflow
	softCap    float32
	slopes     []float32
	sinks      []float32
	mask       Tensor // dtype 0: none
	bmask      BoolMask
	tree       treeMask // Options.TreeMask where some sequence has a mask
	// cuQ, with Options.CuSeqQ, holds the offsets of each sequence's
	// queries, packed along q's sequence axis (batch 1), and cuKV, with
	// Forward's Options.CuSeqKV, those of its keys; without cuKV sequence
	// s's keys are batch entry s of the origin (a batch of caches or
	// paged sequences). call.sequence reads them.
	cuQ, cuKV []int
	// callTerms: softCap, slopes, Mask or BoolMask: every sequence's score
	// tiles need a per-element pass (a tree mask's sequences have a path
	// of their own that has it: plan.terms).
	callTerms bool

	// kv is where the keys and values lie (source.go); k and v carry
	// their shape, Seq being the longest sequence's keys.
	kv kvOrigin
}

// wsDim is the widest head dim of the call, which sizes the scratch rows:
// q's (and k's) or v's (and the output's).
func (c *call) wsDim() int { return max(c.q.Dim, c.dv) }

// seg is the sequence a block of queries belongs to: packed queries
// [q0, q0+nq) and keys [kv0, kv0+nk). Without variable lengths it is the
// whole batch entry.
type seg struct {
	q0, nq, kv0, nk int
	// seq is the batch entry of the origin that holds the sequence's
	// keys: the block's batch entry, or with Options.CuSeqQ over caches or
	// paged sequences (whose q has one batch entry for all of them) the
	// sequence's number.
	seq int
}

// keyRange returns the keys [lo, hi), in the sequence's own key numbering,
// that the structural masks (causal, window) leave visible to the query at
// position il of the sequence. Both bounds are non-decreasing in il; the
// range is empty when lo >= hi.
func (c *call) keyRange(sg seg, il int) (lo, hi int) {
	diag := il
	if !c.topLeft {
		diag += sg.nk - sg.nq
	}
	lo, hi = 0, sg.nk
	if c.causal {
		hi = min(hi, diag+1)
	}
	if c.window {
		if c.winL >= 0 {
			lo = max(lo, diag-c.winL)
		}
		if c.winR >= 0 {
			hi = min(hi, diag+c.winR+1)
		}
	}
	return lo, hi
}

// activationType reports whether queries and outputs may have element type
// t: float32, or binary16 and bfloat16 (widened as the queries are
// gathered, rounded as the output rows are written).
func activationType(t DType) bool { return t == F32 || t == F16 || t == BF16 }

// validateOptions checks the options that go beyond Scale and Causal and
// records them in c. The shapes of q, k and out have been checked.
func validateOptions(c *call, opts *Options) error {
	q := &c.q
	switch opts.Precision {
	case PrecisionFloat32, PrecisionBFloat16:
		c.asked = opts.Precision
	default:
		return fmt.Errorf("attention: Options.Precision is %v; want PrecisionFloat32 or PrecisionBFloat16", opts.Precision)
	}
	if opts.QuantizeQuery {
		if c.k.dtype != Q8 {
			return fmt.Errorf("attention: Options.QuantizeQuery needs Q8 keys; the keys are %v", c.k.dtype)
		}
		if c.asked != PrecisionFloat32 {
			return fmt.Errorf("attention: Options.QuantizeQuery needs PrecisionFloat32; Options.Precision is %v", c.asked)
		}
		c.q8Query = true
	}
	switch opts.CausalAlign {
	case BottomRight:
	case TopLeft:
		c.topLeft = true
	default:
		return fmt.Errorf("attention: Options.CausalAlign is %v; want BottomRight or TopLeft", opts.CausalAlign)
	}
	if w := opts.Window; w != nil {
		if w.Left < -1 {
			return fmt.Errorf("attention: Options.Window.Left is %d; want >= 0, or -1 for unbounded", w.Left)
		}
		if w.Right < -1 {
			return fmt.Errorf("attention: Options.Window.Right is %d; want >= 0, or -1 for unbounded", w.Right)
		}
		// A bound past every key reaches as far as unbounded does; clamping
		// keeps i' ± w from overflowing (|i'| <= Nq + Nkv).
		reach := satAdd(satAdd(q.Seq, c.k.Seq), 1)
		c.window, c.winL, c.winR = true, w.Left, w.Right
		if c.winL > reach {
			c.winL = reach
		}
		if c.winR > reach {
			c.winR = reach
		}
	}
	if sc := opts.SoftCap; sc != 0 {
		if sc != sc || sc < 0 || math.IsInf(float64(sc), 1) {
			return fmt.Errorf("attention: Options.SoftCap is %v; want a finite number > 0, or 0 for no capping", sc)
		}
		c.softCap = sc
	}
	if s := opts.Slopes; s != nil {
		if len(s) != q.Heads {
			return fmt.Errorf("attention: Options.Slopes has %d elements; want one ALiBi slope per query head (%d), or nil", len(s), q.Heads)
		}
		for h, x := range s {
			if x != x || math.IsInf(float64(x), 0) {
				return fmt.Errorf("attention: Options.Slopes[%d] is %v; want a finite number", h, x)
			}
		}
		c.slopes = s
	}
	if s := opts.Sinks; s != nil {
		if len(s) != q.Heads {
			return fmt.Errorf("attention: Options.Sinks has %d elements; want one sink logit per query head (%d), or nil", len(s), q.Heads)
		}
		for h, x := range s {
			if x != x || math.IsInf(float64(x), 1) {
				return fmt.Errorf("attention: Options.Sinks[%d] is %v; want a finite number, or -Inf for no sink", h, x)
			}
		}
		c.sinks = s
	}
	if m := opts.Mask; m.dtype != 0 || m.Layout != (Layout{}) {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("attention: Options.Mask: %w", err)
		}
		if !activationType(m.dtype) {
			return fmt.Errorf("attention: Options.Mask has element type %v; want f32, f16 or bf16", m.dtype)
		}
		if err := checkMaskLayout("Mask", m.Layout, c); err != nil {
			return err
		}
		c.mask = m
	}
	if m := opts.BoolMask; m.Data != nil || m.Layout != (Layout{}) {
		if m.Data == nil {
			return fmt.Errorf("attention: Options.BoolMask has a layout but no Data; want both or neither")
		}
		if err := m.Layout.Validate(); err != nil {
			return fmt.Errorf("attention: Options.BoolMask: %w", err)
		}
		if err := checkMaskLayout("BoolMask", m.Layout, c); err != nil {
			return err
		}
		if need := m.Span(); len(m.Data) < need {
			return fmt.Errorf("attention: Options.BoolMask.Data has %d elements; want >= %d for shape [%d %d %d %d] with strides [%d %d %d 1]",
				len(m.Data), need, m.Batch, m.Heads, m.Seq, m.Dim, m.BatchStride, m.HeadStride, m.SeqStride)
		}
		c.bmask = m
	}
	if err := checkVarlen(c, opts); err != nil {
		return err
	}
	c.callTerms = c.softCap != 0 || c.slopes != nil || c.mask.dtype != 0 || c.bmask.Data != nil
	return nil
}

// checkMaskLayout checks that a mask of layout l broadcasts to [B, Hq, Nq,
// Nkv].
func checkMaskLayout(name string, l Layout, c *call) error {
	if l.Batch != 1 && l.Batch != c.q.Batch {
		return fmt.Errorf("attention: Options.%s has batch %d; want %d (B) or 1 (broadcast)", name, l.Batch, c.q.Batch)
	}
	if l.Heads != 1 && l.Heads != c.q.Heads {
		return fmt.Errorf("attention: Options.%s has %d heads; want %d (query heads) or 1 (broadcast)", name, l.Heads, c.q.Heads)
	}
	if l.Seq != c.q.Seq || l.Dim != c.k.Seq {
		return fmt.Errorf("attention: Options.%s has %d rows × %d keys; want Nq × Nkv = %d × %d (SeqStride 0 broadcasts one row over the queries)",
			name, l.Seq, l.Dim, c.q.Seq, c.k.Seq)
	}
	return nil
}

// checkVarlen validates the cumulative sequence offsets.
func checkVarlen(c *call, opts *Options) error {
	cq, ck := opts.CuSeqQ, opts.CuSeqKV
	if (cq == nil && ck == nil) || c.cuQ != nil {
		return nil // none, or per-sequence query counts, checked by validateRequest
	}
	if cq == nil || ck == nil {
		return fmt.Errorf("attention: only one of Options.CuSeqQ (%d elements) and Options.CuSeqKV (%d elements) is set; want both (variable-length batch) or neither", len(cq), len(ck))
	}
	if len(cq) != len(ck) {
		return fmt.Errorf("attention: Options.CuSeqQ has %d elements and Options.CuSeqKV %d; want the same (number of sequences + 1)", len(cq), len(ck))
	}
	if c.q.Batch != 1 {
		return fmt.Errorf("attention: batch is %d with Options.CuSeqQ/CuSeqKV set; want 1 (the sequences are packed along the sequence axis)", c.q.Batch)
	}
	if err := checkOffsets("attention: ", "CuSeqQ", cq, "Nq", c.q.Seq); err != nil {
		return err
	}
	if err := checkOffsets("attention: ", "CuSeqKV", ck, "Nkv", c.k.Seq); err != nil {
		return err
	}
	c.cuQ, c.cuKV = cq, ck
	return nil
}

// checkOffsets checks the cumulative offsets cu of Options.name (prefix
// starts its errors): number of sequences + 1 of them, from 0, never
// decreasing, ending at the packed length n (named total).
func checkOffsets(prefix, name string, cu []int, total string, n int) error {
	if len(cu) == 0 {
		return fmt.Errorf("%sOptions.%s is empty; want number of sequences + 1 offsets starting at 0", prefix, name)
	}
	if cu[0] != 0 {
		return fmt.Errorf("%sOptions.%s[0] is %d; want 0", prefix, name, cu[0])
	}
	for s := 1; s < len(cu); s++ {
		if cu[s] < cu[s-1] {
			return fmt.Errorf("%sOptions.%s[%d] is %d, less than %s[%d] = %d; want non-decreasing offsets", prefix, name, s, cu[s], name, s-1, cu[s-1])
		}
	}
	if last := cu[len(cu)-1]; last != n {
		return fmt.Errorf("%sOptions.%s[%d] is %d; want %s = %d (the packed length)", prefix, name, len(cu)-1, last, total, n)
	}
	return nil
}
