package attention

import (
	"fmt"
	"math"
	"unsafe"
)

// request is an attention call as an entry point receives it: the queries,
// the outputs, the options and where the keys and values lie (kv, one of
// the origins of source.go). validateRequest is the one validation of
// every attention entry point: the same checks of shapes, dims, strides,
// element types and limits, and of every output against every byte the
// call reads, whatever the origin.
type request struct {
	fn     string // error prefix: "attention: " or "attention: ForwardPaged: ", ...
	kv     kvOrigin
	out, q Tensor
	lse    []float32
	// seqQ is Options.CuSeqQ of a batch of caches or paged sequences once
	// its offsets are checked: sequence s's queries are the packed
	// positions [seqQ[s], seqQ[s+1]) of q's one batch entry. nil: each
	// batch entry of q is a sequence.
	seqQ []int
}

// sequences returns the number of sequences of a request over caches or
// paged sequences: one per batch entry of q, or one per pair of
// consecutive offsets of Options.CuSeqQ.
func (r *request) sequences() int {
	if r.seqQ != nil {
		return len(r.seqQ) - 1
	}
	return r.q.Batch
}

// kvShape is the shape of a request's keys and values, whatever their
// source: batch entries, K/V heads, keys (the longest sequence's), head
// dims of K and of V, element type.
type kvShape struct {
	batch, heads, seq, dim, dimV int
	dtype, dtypeV                DType
}

// validateRequest checks every argument of r and the options and returns
// the call they describe. It reads the inputs' bookkeeping (shapes, block
// tables, lengths) but never their values, and writes nothing.
func validateRequest(r *request, opts *Options) (call, error) {
	fn := r.fn
	for _, t := range [...]namedTensor{{"q", r.q}, {"out", r.out}} {
		if err := t.t.Validate(); err != nil {
			return call{}, fmt.Errorf("%s%s: %w", fn, t.name, err)
		}
		if !activationType(t.t.dtype) {
			return call{}, fmt.Errorf("%s%s has element type %v; want f32, f16 or bf16", fn, t.name, t.t.dtype)
		}
	}
	q := r.q
	if q.Dim == 0 {
		return call{}, fmt.Errorf("%sq has head dim 0; want >= 1", fn)
	}
	if q.Heads == 0 {
		return call{}, fmt.Errorf("%sq has 0 heads; want >= 1", fn)
	}
	what := r.kv.batch()
	if what != "" {
		if err := checkBatchOptions(fn, what, opts); err != nil {
			return call{}, err
		}
	}
	if what == "" && (opts.TreeMask.Offsets != nil || opts.TreeMask.Bits != nil) {
		return call{}, fmt.Errorf("%sOptions.TreeMask is set; want it nil: it is for the paged and cache calls (ForwardPagedKV, ForwardPaged, ForwardKVCaches), and Forward takes a mask of any shape in Options.BoolMask", fn)
	}
	if what != "" && opts.CuSeqQ != nil {
		// Per-sequence query counts: the offsets say how many sequences
		// the tables, lengths or caches must describe.
		if q.Batch != 1 {
			return call{}, fmt.Errorf("%sq has batch %d with Options.CuSeqQ set; want 1 (the sequences' queries are packed along the sequence axis)", fn, q.Batch)
		}
		if err := checkOffsets(fn, "CuSeqQ", opts.CuSeqQ, "Nq", q.Seq); err != nil {
			return call{}, err
		}
		r.seqQ = opts.CuSeqQ
	}
	kv, err := r.kv.check(kvAsk{fn: fn, qBatch: q.Batch, qDim: q.Dim, seqs: r.sequences(), offsets: len(r.seqQ)})
	if err != nil {
		return call{}, err
	}
	if kv.heads < 1 {
		return call{}, fmt.Errorf("%sq has %d heads and %s %d; want >= 1 each", fn, q.Heads, r.kv.subject(), kv.heads)
	}
	if kv.dim != q.Dim {
		return call{}, r.kv.dimError(fn, q.Dim, kv.dim)
	}
	if kv.dimV < 1 {
		return call{}, fmt.Errorf("%sv has head dim %d; want >= 1", fn, kv.dimV)
	}
	if kv.batch != r.sequences() {
		return call{}, fmt.Errorf("%sq has batch %d and the keys %d; want the same", fn, q.Batch, kv.batch)
	}
	if q.Heads%kv.heads != 0 {
		return call{}, fmt.Errorf("%sq has %d heads and %s %d; want a multiple (grouped-query attention)", fn, q.Heads, r.kv.subject(), kv.heads)
	}
	if err := checkOutputShape(fn, r.out, r.lse, q, kv.dimV); err != nil {
		return call{}, err
	}
	scale, err := callScale(fn, opts.Scale, q.Dim)
	if err != nil {
		return call{}, err
	}
	shape := Tensor{Layout: Layout{Batch: kv.batch, Heads: kv.heads, Seq: kv.seq, Dim: kv.dim}, dtype: kv.dtype}
	c := call{out: r.out, q: q, k: shape, v: shape, lse: r.lse, scale: scale, causal: opts.Causal,
		group: q.Heads / kv.heads, dv: kv.dimV, kv: r.kv, cuQ: r.seqQ}
	c.v.Dim, c.v.dtype = kv.dimV, kv.dtypeV
	if err := validateOptions(&c, opts); err != nil {
		return call{}, err
	}
	if err := checkTreeMask(fn, &c, &opts.TreeMask); err != nil {
		return call{}, err
	}
	if err := r.checkOverlaps(opts); err != nil {
		return call{}, err
	}
	return c, nil
}

// checkRowStrides checks that the rows of the K and V views (or of a
// pool's blocks) do not overlap: the kernels read rows SeqStride apart as
// the rows of a matrix. With one position the stride steps nowhere:
// denseRows makes it Dim.
func checkRowStrides(fn, kName string, k Tensor, vName string, v Tensor) error {
	for _, t := range [...]namedTensor{{kName, k}, {vName, v}} {
		if t.t.Seq >= 2 && t.t.SeqStride < t.t.Dim {
			return fmt.Errorf("%s%s has SeqStride %d with %d positions of head dim %d; want SeqStride >= %d (the head dim), so that its rows do not overlap",
				fn, t.name, t.t.SeqStride, t.t.Seq, t.t.Dim, t.t.Dim)
		}
	}
	return nil
}

// denseRows returns the K or V view t with SeqStride Dim when it has at
// most one position, so that a stride that steps nowhere (0 in a Layout
// literal that sets only the sizes) reaches the kernels as the dense one.
// The elements the view reaches are the same.
func denseRows(t Tensor) Tensor {
	if t.Seq <= 1 {
		t.SeqStride = t.Dim
	}
	return t
}

// namedTensor is a tensor argument with the name an error gives it.
type namedTensor struct {
	name string
	t    Tensor
}

// checkOutputShape checks out and lse (which may be nil) against the
// queries q: out has q's shape with head dim dv (v's) and distinct
// elements, and lse holds a value per row.
func checkOutputShape(prefix string, out Tensor, lse []float32, q Tensor, dv int) error {
	if out.Batch != q.Batch || out.Heads != q.Heads || out.Seq != q.Seq || out.Dim != dv {
		if dv == q.Dim {
			return fmt.Errorf("%sout has shape [%d %d %d %d]; want q's shape [%d %d %d %d]",
				prefix, out.Batch, out.Heads, out.Seq, out.Dim, q.Batch, q.Heads, q.Seq, q.Dim)
		}
		return fmt.Errorf("%sout has shape [%d %d %d %d]; want q's shape with v's head dim, [%d %d %d %d]",
			prefix, out.Batch, out.Heads, out.Seq, out.Dim, q.Batch, q.Heads, q.Seq, dv)
	}
	if !out.injective() {
		return fmt.Errorf("%sout has strides [%d %d %d 1] under which elements of shape [%d %d %d %d] overlap; want every element distinct",
			prefix, out.BatchStride, out.HeadStride, out.SeqStride, out.Batch, out.Heads, out.Seq, out.Dim)
	}
	if lse == nil {
		return nil
	}
	if need, ok := rowCount(q.Layout); !ok || len(lse) < need {
		return fmt.Errorf("%slse has %d elements; want >= B·Hq·Nq = %s", prefix, len(lse), rowCountText(q.Layout))
	}
	return nil
}

// input is one buffer a call reads, for the overlap checks: its name in an
// error message (name, name[index] when index >= 0, followed by part, and
// " scales" for the scales of a Q8 or fp8 tensor) and the addresses
// [lo, hi) it spans. The name is put together only when an error is
// reported: a call that succeeds builds no string.
type input struct {
	name   string
	index  int
	part   string
	scales bool
	lo, hi uintptr
}

func (in input) String() string {
	s := in.name
	if in.index >= 0 {
		s = fmt.Sprintf("%s[%d]", s, in.index)
	}
	if in.scales {
		return s + in.part + " scales"
	}
	return s + in.part
}

// checkOverlaps refuses a request whose out or lse shares memory with any
// byte the call reads (the queries; the K/V views, pools, caches' storage
// and Q8 and fp8 scales; block tables, lengths and sequence lists; the masks
// (a tree mask's bytes up to its last offset, and its offsets),
// slopes, sinks and offsets of opts) or with each other. The shapes have
// been checked, so the spans are those the call will touch.
func (r *request) checkOverlaps(opts *Options) error {
	olo, ohi := r.out.byteRange()
	var llo, lhi uintptr
	if r.lse != nil {
		n, _ := rowCount(r.q.Layout)
		llo, lhi = floatsRange(r.lse[:n])
		if overlaps(llo, lhi, olo, ohi) {
			return fmt.Errorf("%slse overlaps out in memory; want separate buffers", r.fn)
		}
	}
	in, found := r.firstOverlap(span{olo, ohi}, span{llo, lhi}, opts)
	switch {
	case !found:
		return nil
	case overlaps(olo, ohi, in.lo, in.hi):
		return fmt.Errorf("%sout overlaps %v in memory; want separate buffers", r.fn, in)
	}
	return fmt.Errorf("%slse overlaps %v in memory; want separate buffers", r.fn, in)
}

// firstOverlap returns the first buffer the request reads that shares
// memory with out or lse, in the order in which overlaps are reported: the
// queries, the origin's buffers, the options'.
func (r *request) firstOverlap(out, lse span, opts *Options) (input, bool) {
	s := overlapScan{out: out, lse: lse}
	if s.tensor("q", -1, "", &r.q) {
		return s.hit, true
	}
	if in, found := r.kv.overlap(out, lse); found {
		return in, true
	}
	if opts.Mask.dtype != 0 && s.tensor("Options.Mask", -1, "", &opts.Mask) {
		return s.hit, true
	}
	if m := opts.BoolMask; m.Data != nil && s.slice("Options.BoolMask.Data", spanOf(m.Data[:m.Span()])) {
		return s.hit, true
	}
	if m := opts.TreeMask; m.Offsets != nil {
		if s.slice("Options.TreeMask.Bits", spanOf(m.Bits[:m.Offsets[len(m.Offsets)-1]])) || s.slice("Options.TreeMask.Offsets", spanOf(m.Offsets)) {
			return s.hit, true
		}
	}
	found := s.slice("Options.Slopes", spanOf(opts.Slopes)) || s.slice("Options.Sinks", spanOf(opts.Sinks)) ||
		s.slice("Options.CuSeqQ", spanOf(opts.CuSeqQ)) || s.slice("Options.CuSeqKV", spanOf(opts.CuSeqKV))
	return s.hit, found
}

// span is the memory [lo, hi) of a buffer; lo == hi when it is empty.
type span struct{ lo, hi uintptr }

// spanOf returns the memory of the elements of s.
func spanOf[T any](s []T) span {
	if len(s) == 0 {
		return span{}
	}
	var z T
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return span{lo, lo + uintptr(len(s))*unsafe.Sizeof(z)}
}

// callScale checks Options.Scale and resolves 0 to 1/sqrt(dim).
func callScale(fn string, scale float32, dim int) (float32, error) {
	if scale != scale || math.IsInf(float64(scale), 0) {
		return 0, fmt.Errorf("%sOptions.Scale is %v; want a finite number, or 0 for 1/sqrt(dim)", fn, scale)
	}
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(dim)))
	}
	return scale, nil
}

// checkBatchOptions refuses the options that a batch of caches or paged
// sequences (what) cannot take: the masks, and key offsets, as each
// sequence's keys are its own (CuSeqQ, per-sequence query lengths, is
// checked by validateRequest).
func checkBatchOptions(prefix, what string, opts *Options) error {
	if opts.Mask.dtype != 0 || opts.Mask.Layout != (Layout{}) || opts.BoolMask.Data != nil || opts.BoolMask.Layout != (Layout{}) {
		return fmt.Errorf("%sOptions.Mask and Options.BoolMask are not supported; want them unset", prefix)
	}
	if opts.CuSeqKV != nil {
		return fmt.Errorf("%sOptions.CuSeqKV is not supported (the keys of each of the %s are its own, with its own length); want it nil, with Options.CuSeqQ alone for per-sequence query counts", prefix, what)
	}
	return nil
}
