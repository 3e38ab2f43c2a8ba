package attention

import (
	"fmt"
	"math"
	"unsafe"
)

// request is an attention call as an entry point receives it: the queries,
// the outputs, the options and where the keys and values lie. Exactly one
// K/V source is set: k and v (Forward, ForwardLSE), caches
// (ForwardKVCaches), pool (ForwardPagedKV) or cache with seqs
// (ForwardPaged, called with the cache's read lock held). validateRequest
// is the one validation of every attention entry point: the same checks of
// shapes, dims, strides, element types and limits, and of every output
// against every byte the call reads, whatever the source.
type request struct {
	fn     string // error prefix: "attention: " or "attention: ForwardPaged: ", ...
	src    sourceKind
	out, q Tensor
	lse    []float32
	k, v   Tensor      // Forward: the K/V views
	caches []*KVCache  // ForwardKVCaches
	pool   PagedKV     // ForwardPagedKV (a copy: a pointer would escape)
	cache  *PagedCache // ForwardPaged
	seqs   []SeqID     // ForwardPaged
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

// keysOf returns the number of keys of sequence s of a request over caches
// or paged sequences whose shape has been checked.
func (r *request) keysOf(s int) int {
	switch r.src {
	case fromPool:
		return int(r.pool.SeqLens[s])
	case fromPagedCache:
		return r.cache.seqs[r.seqs[s]].n
	}
	return r.caches[s].n
}

// keysText names the length of sequence s in an error message.
func (r *request) keysText(s int) string {
	n := r.keysOf(s)
	switch r.src {
	case fromPool:
		return fmt.Sprintf("kv.SeqLens[%d] is %d", s, n)
	case fromPagedCache:
		return fmt.Sprintf("seqs[%d] (sequence %d) holds %d positions", s, r.seqs[s], n)
	}
	return fmt.Sprintf("caches[%d] holds %d positions", s, n)
}

// sourceKind says where a request's keys and values lie.
type sourceKind uint8

const (
	fromTensors    sourceKind = iota // Forward: K/V views
	fromCaches                       // ForwardKVCaches: a KVCache per batch entry
	fromPool                         // ForwardPagedKV: a caller's paged pools
	fromPagedCache                   // ForwardPaged: a PagedCache's pools
)

// batchOf names the batch of a request over caches or paged sequences for
// error messages ("caches", "sequences"), or gives "" for tensor views.
func (r *request) batchOf() string {
	switch r.src {
	case fromCaches:
		return "caches"
	case fromPool, fromPagedCache:
		return "sequences"
	}
	return ""
}

// kvShape is the shape of a request's keys and values, whatever their
// source: batch entries, K/V heads, keys (the longest sequence's), head
// dims of K and of V, element type.
type kvShape struct {
	batch, heads, seq, dim, dimV int
	dtype                        DType
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
	if what := r.batchOf(); what != "" {
		if err := checkBatchOptions(fn, what, opts); err != nil {
			return call{}, err
		}
	}
	if r.batchOf() != "" && opts.CuSeqQ != nil {
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
	kv, err := r.kvShape()
	if err != nil {
		return call{}, err
	}
	if kv.heads < 1 {
		return call{}, fmt.Errorf("%sq has %d heads and %s %d; want >= 1 each", fn, q.Heads, r.kvName(), kv.heads)
	}
	if kv.dim != q.Dim {
		return call{}, r.dimError(kv.dim)
	}
	if kv.dimV < 1 {
		return call{}, fmt.Errorf("%sv has head dim %d; want >= 1", fn, kv.dimV)
	}
	if kv.batch != r.sequences() {
		return call{}, fmt.Errorf("%sq has batch %d and the keys %d; want the same", fn, q.Batch, kv.batch)
	}
	if q.Heads%kv.heads != 0 {
		return call{}, fmt.Errorf("%sq has %d heads and %s %d; want a multiple (grouped-query attention)", fn, q.Heads, r.kvName(), kv.heads)
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
		group: q.Heads / kv.heads, dv: kv.dimV, caches: r.caches, seqQ: r.seqQ}
	c.v.Dim = kv.dimV
	switch r.src {
	case fromPool:
		// Blocks of one position step no SeqStride: any value reads as the
		// dense one (as for Forward's views), which the kernels need.
		pool := r.pool
		pool.K, pool.V = denseRows(pool.K), denseRows(pool.V)
		k, v := pool.K, pool.V
		c.paged = pagedRead{pool: pool, bs: k.Seq, merge: k.BatchStride == k.Seq*k.SeqStride && v.BatchStride == v.Seq*v.SeqStride}
	case fromPagedCache:
		c.paged = pagedRead{cache: r.cache, seqs: r.seqs, bs: r.cache.blockSize, merge: true}
	case fromTensors:
		c.k, c.v = denseRows(r.k), denseRows(r.v)
	}
	if err := validateOptions(&c, opts); err != nil {
		return call{}, err
	}
	if err := r.checkOverlaps(opts); err != nil {
		return call{}, err
	}
	return c, nil
}

// kvShape checks the request's K/V source and returns its shape.
func (r *request) kvShape() (kvShape, error) {
	switch r.src {
	case fromPool:
		return r.poolShape()
	case fromPagedCache:
		return r.pagedCacheShape()
	case fromCaches:
		return r.cachesShape()
	}
	return r.tensorShape()
}

// tensorShape checks Forward's K and V views.
func (r *request) tensorShape() (kvShape, error) {
	fn, k, v := r.fn, r.k, r.v
	for _, t := range [...]namedTensor{{"k", k}, {"v", v}} {
		if err := t.t.Validate(); err != nil {
			return kvShape{}, fmt.Errorf("%s%s: %w", fn, t.name, err)
		}
	}
	if k.Dim != r.q.Dim {
		return kvShape{}, r.dimError(k.Dim)
	}
	if v.Dim == 0 {
		return kvShape{}, fmt.Errorf("%sv has head dim 0; want >= 1", fn)
	}
	if k.Batch != r.q.Batch || v.Batch != r.q.Batch {
		return kvShape{}, fmt.Errorf("%sbatch sizes are q %d, k %d, v %d; want all equal", fn, r.q.Batch, k.Batch, v.Batch)
	}
	if v.Heads != k.Heads || v.Seq != k.Seq {
		return kvShape{}, fmt.Errorf("%sv has %d heads × %d keys and k has %d × %d; want the same", fn, v.Heads, v.Seq, k.Heads, k.Seq)
	}
	if err := checkRowStrides(fn, "k", k, "v", v); err != nil {
		return kvShape{}, err
	}
	return kvShape{batch: k.Batch, heads: k.Heads, seq: k.Seq, dim: k.Dim, dimV: v.Dim, dtype: k.dtype}, nil
}

// kvName names the request's K/V source in error messages, as the
// subject of a count: "q has 4 heads and k has 3", "... and the caches 3".
func (r *request) kvName() string {
	return [...]string{fromTensors: "k has", fromCaches: "the caches", fromPool: "the pools", fromPagedCache: "the cache"}[r.src]
}

// dimError is the error of keys of head dim d for queries of another.
func (r *request) dimError(d int) error {
	if r.src == fromTensors {
		return fmt.Errorf("%shead dims are q %d and k %d; want them equal (v and out may have another)", r.fn, r.q.Dim, d)
	}
	return fmt.Errorf("%sq has head dim %d and %s %d; want the same", r.fn, r.q.Dim, r.kvName(), d)
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

// poolShape checks ForwardPagedKV's pools, block table and lengths.
func (r *request) poolShape() (kvShape, error) {
	fn, kv, B := r.fn, &r.pool, r.sequences()
	for _, t := range [...]namedTensor{{"kv.K", kv.K}, {"kv.V", kv.V}} {
		if err := t.t.Validate(); err != nil {
			return kvShape{}, fmt.Errorf("%s%s: %w", fn, t.name, err)
		}
	}
	k, v := kv.K, kv.V
	if k.dtype != v.dtype || k.Batch != v.Batch || k.Seq != v.Seq || k.Heads != v.Heads {
		return kvShape{}, fmt.Errorf("%skv.K is %s and kv.V %s; want the same type, blocks, positions and heads (the head dims may differ)",
			fn, poolText(k), poolText(v))
	}
	if k.Seq < 1 || k.Heads < 1 || k.Dim < 1 || v.Dim < 1 {
		return kvShape{}, fmt.Errorf("%skv.K is %s and kv.V %s; want >= 1 position per block, head and head dim", fn, poolText(k), poolText(v))
	}
	if err := checkRowStrides(fn, "kv.K", k, "kv.V", v); err != nil {
		return kvShape{}, err
	}
	bs, nBlocks := k.Seq, k.Batch
	if len(kv.SeqLens) != B {
		if r.seqQ != nil {
			return kvShape{}, fmt.Errorf("%skv.SeqLens has %d lengths and Options.CuSeqQ %d offsets (%d sequences); want one length per sequence", fn, len(kv.SeqLens), len(r.seqQ), B)
		}
		return kvShape{}, fmt.Errorf("%skv.SeqLens has %d lengths and q a batch of %d; want one length per sequence", fn, len(kv.SeqLens), B)
	}
	if kv.MaxBlocks < 0 {
		return kvShape{}, fmt.Errorf("%skv.MaxBlocks is %d; want >= 0", fn, kv.MaxBlocks)
	}
	if n, ok := mulSize(B, kv.MaxBlocks); !ok || len(kv.BlockTable) < n {
		return kvShape{}, fmt.Errorf("%skv.BlockTable has %d entries; want >= batch·MaxBlocks = %d·%d", fn, len(kv.BlockTable), B, kv.MaxBlocks)
	}
	maxKeys, ok := mulSize(kv.MaxBlocks, bs)
	if !ok {
		return kvShape{}, fmt.Errorf("%skv.MaxBlocks %d × block size %d overflows int", fn, kv.MaxBlocks, bs)
	}
	maxLen := 0
	for b, n32 := range kv.SeqLens {
		n := int(n32)
		if n < 0 {
			return kvShape{}, fmt.Errorf("%skv.SeqLens[%d] is %d; want >= 0", fn, b, n)
		}
		if n > maxKeys { // the table's fault as much as the length's: name both
			return kvShape{}, fmt.Errorf("%skv.SeqLens[%d] is %d, more than kv.MaxBlocks·BlockSize = %d·%d = %d positions; want kv.MaxBlocks >= %d (the table's entries per sequence)",
				fn, b, n, kv.MaxBlocks, bs, maxKeys, ceilDiv(n, bs))
		}
		for i, id := range kv.BlockTable[b*kv.MaxBlocks:][:ceilDiv(n, bs)] {
			if id < 0 || int(id) >= nBlocks {
				return kvShape{}, fmt.Errorf("%skv.BlockTable[%d][%d] is block %d; want 0 to %d (the pools' blocks)", fn, b, i, id, nBlocks-1)
			}
		}
		maxLen = max(maxLen, n)
	}
	return kvShape{batch: B, heads: k.Heads, seq: maxLen, dim: k.Dim, dimV: v.Dim, dtype: k.dtype}, nil
}

// poolText formats the shape of a pool for error messages, one format for
// both pools.
func poolText(t Tensor) string {
	return fmt.Sprintf("%v [%d blocks, %d heads, %d positions, dim %d]", t.dtype, t.Batch, t.Heads, t.Seq, t.Dim)
}

// pagedCacheShape checks ForwardPaged's sequences.
func (r *request) pagedCacheShape() (kvShape, error) {
	fn, cache := r.fn, r.cache
	if r.sequences() != len(r.seqs) {
		if r.seqQ != nil {
			return kvShape{}, fmt.Errorf("%sOptions.CuSeqQ has %d offsets (%d sequences) and seqs %d sequences; want one more offset than sequences", fn, len(r.seqQ), r.sequences(), len(r.seqs))
		}
		return kvShape{}, fmt.Errorf("%sq has batch %d and seqs %d sequences; want the same", fn, r.q.Batch, len(r.seqs))
	}
	maxLen := 0
	for b, id := range r.seqs {
		s := cache.seqs[id]
		if s == nil {
			return kvShape{}, fmt.Errorf("%sseqs[%d] is %d, an unknown or freed sequence", fn, b, id)
		}
		maxLen = max(maxLen, s.n)
	}
	return kvShape{batch: len(r.seqs), heads: cache.heads, seq: maxLen, dim: cache.dim, dimV: cache.dim, dtype: cache.k.dtype}, nil
}

// cachesShape checks ForwardKVCaches' caches.
func (r *request) cachesShape() (kvShape, error) {
	fn, caches := r.fn, r.caches
	if r.sequences() != len(caches) {
		if r.seqQ != nil {
			return kvShape{}, fmt.Errorf("%sOptions.CuSeqQ has %d offsets (%d sequences) and caches has %d caches; want one more offset than caches", fn, len(r.seqQ), r.sequences(), len(caches))
		}
		return kvShape{}, fmt.Errorf("%sq has batch %d and caches has %d caches; want the same", fn, r.q.Batch, len(caches))
	}
	var first *KVCache
	maxLen := 0
	for b, kc := range caches {
		if kc == nil {
			return kvShape{}, fmt.Errorf("%scaches[%d] is nil; want a cache from NewKVCache", fn, b)
		}
		if kc.k.dtype == 0 {
			return kvShape{}, fmt.Errorf("%scaches[%d] is a zero KVCache; want a cache from NewKVCache", fn, b)
		}
		if first == nil {
			first = kc
		} else if kc.k.dtype != first.k.dtype || kc.heads != first.heads || kc.dim != first.dim {
			return kvShape{}, fmt.Errorf("%scaches[%d] holds %v × %d heads × dim %d and caches[0] %v × %d × %d; want every cache the same",
				fn, b, kc.k.dtype, kc.heads, kc.dim, first.k.dtype, first.heads, first.dim)
		}
		maxLen = max(maxLen, kc.n)
	}
	if first == nil { // an empty batch: the queries' shape, nothing to read
		return kvShape{heads: 1, dim: r.q.Dim, dimV: r.q.Dim, dtype: F32}, nil
	}
	return kvShape{batch: len(caches), heads: first.heads, seq: maxLen, dim: first.dim, dimV: first.dim, dtype: first.k.dtype}, nil
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
// and Q8 and fp8 scales; block tables, lengths and sequence lists; the masks,
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
	return r.eachInput(opts, func(in input) error {
		if overlaps(olo, ohi, in.lo, in.hi) {
			return fmt.Errorf("%sout overlaps %v in memory; want separate buffers", r.fn, in)
		}
		if overlaps(llo, lhi, in.lo, in.hi) {
			return fmt.Errorf("%slse overlaps %v in memory; want separate buffers", r.fn, in)
		}
		return nil
	})
}

// eachInput calls f with every buffer the request reads, in the order in
// which overlaps are reported, and returns f's first error.
func (r *request) eachInput(opts *Options, f func(input) error) error {
	tensor := func(name string, index int, part string, t *Tensor) error {
		lo, hi := t.byteRange()
		if err := f(input{name, index, part, false, lo, hi}); err != nil {
			return err
		}
		if !t.dtype.scaled() {
			return nil
		}
		lo, hi = t.scaleRange()
		return f(input{name, index, part, true, lo, hi})
	}
	slice := func(name string, s span) error { return f(input{name, -1, "", false, s.lo, s.hi}) }
	if err := tensor("q", -1, "", &r.q); err != nil {
		return err
	}
	switch r.src {
	case fromPool:
		kv := &r.pool
		if err := tensor("kv.K", -1, "", &kv.K); err != nil {
			return err
		}
		if err := tensor("kv.V", -1, "", &kv.V); err != nil {
			return err
		}
		if err := slice("kv.BlockTable", spanOf(kv.BlockTable[:len(kv.SeqLens)*kv.MaxBlocks])); err != nil {
			return err
		}
		if err := slice("kv.SeqLens", spanOf(kv.SeqLens)); err != nil {
			return err
		}
	case fromPagedCache:
		if err := tensor("the cache's", -1, " keys", &r.cache.k); err != nil {
			return err
		}
		if err := tensor("the cache's", -1, " values", &r.cache.v); err != nil {
			return err
		}
		if err := slice("seqs", spanOf(r.seqs)); err != nil {
			return err
		}
	case fromCaches:
		for b, kc := range r.caches {
			if err := tensor("caches", b, "'s keys", &kc.k); err != nil {
				return err
			}
			if err := tensor("caches", b, "'s values", &kc.v); err != nil {
				return err
			}
		}
		if err := slice("caches", spanOf(r.caches)); err != nil {
			return err
		}
	default:
		if err := tensor("k", -1, "", &r.k); err != nil {
			return err
		}
		if err := tensor("v", -1, "", &r.v); err != nil {
			return err
		}
	}
	if opts.Mask.dtype != 0 {
		if err := tensor("Options.Mask", -1, "", &opts.Mask); err != nil {
			return err
		}
	}
	if m := opts.BoolMask; m.Data != nil {
		if err := slice("Options.BoolMask.Data", spanOf(m.Data[:m.Span()])); err != nil {
			return err
		}
	}
	for _, s := range [...]struct {
		name string
		x    []float32
	}{{"Options.Slopes", opts.Slopes}, {"Options.Sinks", opts.Sinks}} {
		if err := slice(s.name, spanOf(s.x)); err != nil {
			return err
		}
	}
	if err := slice("Options.CuSeqQ", spanOf(opts.CuSeqQ)); err != nil {
		return err
	}
	return slice("Options.CuSeqKV", spanOf(opts.CuSeqKV))
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
