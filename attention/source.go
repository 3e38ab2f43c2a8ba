package attention

import "fmt"

// The first seam of the tile loop: where K and V rows come from. A call
// reads them from tensor views (Forward), from a contiguous cache per
// batch entry (ForwardKVCaches), through the block tables of paged pools
// (ForwardPagedKV over a caller's, ForwardPaged over a PagedCache's), or
// from a shared prefix whose panels were packed once (the prefix product
// of ForwardSharedPrefix with SharedPrefixKV.Packed). Each is a type of
// its own that implements kvOrigin and carries everything in which they
// differ: its part of the validation (shapes, lengths, tables), the
// memory a call reads from it (for the overlap checks) and its reads. The
// entry point picks the origin; validation, the planner and the tile loop
// see only the interface, and the tile loop only the kvSource an origin
// hands out for one (batch entry, K/V head), which gives the keys of a
// tile as runs of rows lying one after the other in memory. A contiguous
// view is one run; a paged sequence is a run per stretch of consecutive
// blocks. This file is the only place that tells the origins apart.
//
// The origins of a call live in its pooled job (origins), so that an
// entry point picks one without allocating.

// kvOrigin is where a call's keys and values lie.
type kvOrigin interface {
	// check checks the origin against what the queries ask of it and
	// returns the shape of its keys and values. It reads bookkeeping
	// (shapes, tables, lengths), never values.
	check(a kvAsk) (kvShape, error)
	// batch names a batch of caches or paged sequences in error messages
	// ("caches", "sequences"), or is "" for tensor views, which are none.
	batch() string
	// subject names the origin as the subject of a count in error
	// messages: "q has 4 heads and k has 3", "... and the caches 3".
	subject() string
	// dimError is the error of keys of head dim d for queries of head
	// dim qd.
	dimError(fn string, qd, d int) error
	// keysText names the length of sequence s in an error message.
	keysText(s int) string
	// overlap returns the first buffer of the origin that a call reads
	// and that shares memory with out or lse, in the order in which
	// overlaps are reported.
	overlap(out, lse span) (input, bool)

	// keys returns the number of keys of batch entry b.
	keys(b int) int
	// source returns where the keys of sequence sg of batch entry b, K/V
	// head hk, lie.
	source(b, hk int, sg seg) kvSource
	// interleaved reports whether K's and V's rows of the K/V heads of a
	// position lie together (heads > 1, a head's stride shorter than a
	// position's), so that decoding may fold several heads tile by tile.
	interleaved(heads int) bool
	// whole reports whether the keys of each (batch entry, K/V head) are
	// one strided matrix of the call's own views, which a bf16 prefill
	// may pack once for all its query blocks.
	whole() bool
	// gathers reports whether the decode kernels read the origin's rows
	// through a table of their offsets (kvSource.offsets;
	// kernel.QKRowsGather): a paged sequence, whose table also lists the
	// rows of the keys after a tile, so that the kernels prefetch where
	// the sequence goes on. A tensor view or cache is read at its own
	// stride (keyRow, valueRow).
	gathers() bool
	// packed returns the panels packed once for calls in precision prec,
	// which the tile loop reads instead of packing each tile, or nil.
	packed(prec Precision) *prepack
}

// kvAsk is what an origin's check needs of its request: the error prefix,
// q's batch and head dim, the number of sequences the origin must describe
// (q's batch entries, or one per pair of Options.CuSeqQ offsets) and the
// number of those offsets (0 without).
type kvAsk struct {
	fn           string
	qBatch, qDim int
	seqs         int
	offsets      int
}

// origins holds a job's origin values, so that the kvOrigin of a call
// points into the pooled job and picking one allocates nothing.
type origins struct {
	views  viewOrigin
	caches cacheOrigin
	pool   poolOrigin
	cache  pagedCacheOrigin
	packed packedOrigin
}

// viewOrigin is Forward's K and V tensor views.
type viewOrigin struct{ k, v Tensor }

func (o *viewOrigin) check(a kvAsk) (kvShape, error) {
	fn, k, v := a.fn, o.k, o.v
	for _, t := range [...]namedTensor{{"k", k}, {"v", v}} {
		if err := t.t.Validate(); err != nil {
			return kvShape{}, fmt.Errorf("%s%s: %w", fn, t.name, err)
		}
	}
	if k.Dim != a.qDim {
		return kvShape{}, o.dimError(fn, a.qDim, k.Dim)
	}
	if v.Dim == 0 {
		return kvShape{}, fmt.Errorf("%sv has head dim 0; want >= 1", fn)
	}
	if k.Batch != a.qBatch || v.Batch != a.qBatch {
		return kvShape{}, fmt.Errorf("%sbatch sizes are q %d, k %d, v %d; want all equal", fn, a.qBatch, k.Batch, v.Batch)
	}
	if v.Heads != k.Heads || v.Seq != k.Seq {
		return kvShape{}, fmt.Errorf("%sv has %d heads × %d keys and k has %d × %d; want the same", fn, v.Heads, v.Seq, k.Heads, k.Seq)
	}
	if err := checkRowStrides(fn, "k", k, "v", v); err != nil {
		return kvShape{}, err
	}
	o.k, o.v = denseRows(k), denseRows(v)
	return kvShape{batch: k.Batch, heads: k.Heads, seq: k.Seq, dim: k.Dim, dimV: v.Dim, dtype: k.dtype, dtypeV: v.dtype}, nil
}

func (o *viewOrigin) batch() string   { return "" }
func (o *viewOrigin) subject() string { return "k has" }

func (o *viewOrigin) dimError(fn string, qd, d int) error {
	return fmt.Errorf("%shead dims are q %d and k %d; want them equal (v and out may have another)", fn, qd, d)
}

func (o *viewOrigin) keysText(int) string { return fmt.Sprintf("k holds %d positions", o.k.Seq) }

func (o *viewOrigin) overlap(out, lse span) (input, bool) {
	s := overlapScan{out: out, lse: lse}
	found := s.tensor("k", -1, "", &o.k) || s.tensor("v", -1, "", &o.v)
	return s.hit, found
}

func (o *viewOrigin) keys(int) int { return o.k.Seq }

func (o *viewOrigin) source(b, hk int, sg seg) kvSource {
	return kvSource{k: &o.k, v: &o.v, kBase: o.k.Offset(b, hk, sg.kv0), vBase: o.v.Offset(b, hk, sg.kv0), hk: hk}
}

func (o *viewOrigin) interleaved(heads int) bool { return interleavedRows(heads, &o.k, &o.v) }
func (o *viewOrigin) whole() bool                { return true }
func (o *viewOrigin) gathers() bool              { return false }
func (o *viewOrigin) packed(Precision) *prepack  { return nil }

// cacheOrigin is ForwardKVCaches' batch of KVCaches, one a batch entry.
type cacheOrigin struct{ caches []*KVCache }

func (o *cacheOrigin) check(a kvAsk) (kvShape, error) {
	fn, caches := a.fn, o.caches
	if a.seqs != len(caches) {
		if a.offsets > 0 {
			return kvShape{}, fmt.Errorf("%sOptions.CuSeqQ has %d offsets (%d sequences) and caches has %d caches; want one more offset than caches", fn, a.offsets, a.seqs, len(caches))
		}
		return kvShape{}, fmt.Errorf("%sq has batch %d and caches has %d caches; want the same", fn, a.qBatch, len(caches))
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
		return kvShape{heads: 1, dim: a.qDim, dimV: a.qDim, dtype: F32, dtypeV: F32}, nil
	}
	return kvShape{batch: len(caches), heads: first.heads, seq: maxLen, dim: first.dim, dimV: first.dim, dtype: first.k.dtype, dtypeV: first.v.dtype}, nil
}

func (o *cacheOrigin) batch() string   { return "caches" }
func (o *cacheOrigin) subject() string { return "the caches" }

func (o *cacheOrigin) dimError(fn string, qd, d int) error {
	return otherDimError(fn, o.subject(), qd, d)
}

func (o *cacheOrigin) keysText(s int) string {
	return fmt.Sprintf("caches[%d] holds %d positions", s, o.caches[s].n)
}

func (o *cacheOrigin) overlap(out, lse span) (input, bool) {
	s := overlapScan{out: out, lse: lse}
	for b, kc := range o.caches {
		if s.tensor("caches", b, "'s keys", &kc.k) || s.tensor("caches", b, "'s values", &kc.v) {
			return s.hit, true
		}
	}
	found := s.slice("caches", spanOf(o.caches))
	return s.hit, found
}

func (o *cacheOrigin) keys(b int) int { return o.caches[b].n }

func (o *cacheOrigin) source(b, hk int, sg seg) kvSource {
	kc := o.caches[b]
	return kvSource{k: &kc.k, v: &kc.v, kBase: kc.k.Offset(0, hk, sg.kv0), vBase: kc.v.Offset(0, hk, sg.kv0), hk: hk}
}

// interleaved is false: a KVCache keeps each head's rows together.
func (o *cacheOrigin) interleaved(int) bool      { return false }
func (o *cacheOrigin) whole() bool               { return false }
func (o *cacheOrigin) gathers() bool             { return false }
func (o *cacheOrigin) packed(Precision) *prepack { return nil }

// poolOrigin is ForwardPagedKV's caller's pools, block tables and lengths.
type poolOrigin struct {
	kv PagedKV
	// merge: the first row of a block follows the last of the block
	// before it in the pool, in K and in V, so that consecutive blocks in
	// a table are one run of rows.
	merge bool
}

func (o *poolOrigin) check(a kvAsk) (kvShape, error) {
	fn, kv, B := a.fn, &o.kv, a.seqs
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
		if a.offsets > 0 {
			return kvShape{}, fmt.Errorf("%skv.SeqLens has %d lengths and Options.CuSeqQ %d offsets (%d sequences); want one length per sequence", fn, len(kv.SeqLens), a.offsets, B)
		}
		return kvShape{}, fmt.Errorf("%skv.SeqLens has %d lengths and q a batch of %d; want one length per sequence", fn, len(kv.SeqLens), B)
	}
	maxLen, err := checkTable(fn, kv, B, bs, nBlocks)
	if err != nil {
		return kvShape{}, err
	}
	// Blocks of one position step no SeqStride: any value reads as the
	// dense one (as for Forward's views), which the kernels need.
	kv.K, kv.V = denseRows(kv.K), denseRows(kv.V)
	k, v = kv.K, kv.V
	o.merge = k.BatchStride == k.Seq*k.SeqStride && v.BatchStride == v.Seq*v.SeqStride
	return kvShape{batch: B, heads: k.Heads, seq: maxLen, dim: k.Dim, dimV: v.Dim, dtype: k.dtype, dtypeV: v.dtype}, nil
}

// poolText formats the shape of a pool for error messages, one format for
// both pools.
func poolText(t Tensor) string {
	return fmt.Sprintf("%v [%d blocks, %d heads, %d positions, dim %d]", t.dtype, t.Batch, t.Heads, t.Seq, t.Dim)
}

func (o *poolOrigin) batch() string   { return "sequences" }
func (o *poolOrigin) subject() string { return "the pools" }

func (o *poolOrigin) dimError(fn string, qd, d int) error {
	return otherDimError(fn, o.subject(), qd, d)
}

func (o *poolOrigin) keysText(s int) string {
	return fmt.Sprintf("kv.SeqLens[%d] is %d", s, o.kv.SeqLens[s])
}

func (o *poolOrigin) overlap(out, lse span) (input, bool) {
	s := overlapScan{out: out, lse: lse}
	kv := &o.kv
	rows, _ := kv.tableEntries(len(kv.SeqLens)) // checked: the table holds them
	found := s.tensor("kv.K", -1, "", &kv.K) || s.tensor("kv.V", -1, "", &kv.V) ||
		s.slice("kv.BlockTable", spanOf(kv.BlockTable[:rows])) ||
		s.slice("kv.SeqLens", spanOf(kv.SeqLens))
	return s.hit, found
}

func (o *poolOrigin) keys(b int) int { return int(o.kv.SeqLens[b]) }

func (o *poolOrigin) source(b, hk int, _ seg) kvSource {
	bs, n := o.kv.K.Seq, int(o.kv.SeqLens[b])
	blocks := o.kv.row(b, (n+bs-1)/bs)
	return kvSource{k: &o.kv.K, v: &o.kv.V, blocks: blocks, bs: bs, merge: o.merge, hk: hk}
}

func (o *poolOrigin) interleaved(heads int) bool { return interleavedRows(heads, &o.kv.K, &o.kv.V) }
func (o *poolOrigin) whole() bool                { return false }
func (o *poolOrigin) gathers() bool              { return true }
func (o *poolOrigin) packed(Precision) *prepack  { return nil }

// pagedCacheOrigin is ForwardPaged's sequences of a PagedCache, read under
// its read lock.
type pagedCacheOrigin struct {
	cache *PagedCache
	seqs  []SeqID
}

func (o *pagedCacheOrigin) check(a kvAsk) (kvShape, error) {
	fn, cache := a.fn, o.cache
	if a.seqs != len(o.seqs) {
		if a.offsets > 0 {
			return kvShape{}, fmt.Errorf("%sOptions.CuSeqQ has %d offsets (%d sequences) and seqs %d sequences; want one more offset than sequences", fn, a.offsets, a.seqs, len(o.seqs))
		}
		return kvShape{}, fmt.Errorf("%sq has batch %d and seqs %d sequences; want the same", fn, a.qBatch, len(o.seqs))
	}
	maxLen := 0
	for b, id := range o.seqs {
		s := cache.seqs[id]
		if s == nil {
			return kvShape{}, fmt.Errorf("%sseqs[%d] is %d, an unknown or freed sequence", fn, b, id)
		}
		maxLen = max(maxLen, s.n)
	}
	return kvShape{batch: len(o.seqs), heads: cache.heads, seq: maxLen, dim: cache.dim, dimV: cache.dim, dtype: cache.k.dtype, dtypeV: cache.v.dtype}, nil
}

func (o *pagedCacheOrigin) batch() string   { return "sequences" }
func (o *pagedCacheOrigin) subject() string { return "the cache" }

func (o *pagedCacheOrigin) dimError(fn string, qd, d int) error {
	return otherDimError(fn, o.subject(), qd, d)
}

func (o *pagedCacheOrigin) keysText(s int) string {
	return fmt.Sprintf("seqs[%d] (sequence %d) holds %d positions", s, o.seqs[s], o.keys(s))
}

func (o *pagedCacheOrigin) overlap(out, lse span) (input, bool) {
	s := overlapScan{out: out, lse: lse}
	found := s.tensor("the cache's", -1, " keys", &o.cache.k) || s.tensor("the cache's", -1, " values", &o.cache.v) ||
		s.slice("seqs", spanOf(o.seqs))
	return s.hit, found
}

func (o *pagedCacheOrigin) keys(b int) int { return o.cache.seqs[o.seqs[b]].n }

func (o *pagedCacheOrigin) source(b, hk int, _ seg) kvSource {
	// The cache's pools are one per head, [heads, blocks, block size,
	// dim]: consecutive blocks are always one run.
	c := o.cache
	return kvSource{k: &c.k, v: &c.v, blocks: c.seqs[o.seqs[b]].blocks, bs: c.blockSize, merge: true, hk: hk}
}

func (o *pagedCacheOrigin) interleaved(heads int) bool {
	return interleavedRows(heads, &o.cache.k, &o.cache.v)
}
func (o *pagedCacheOrigin) whole() bool               { return false }
func (o *pagedCacheOrigin) gathers() bool             { return true }
func (o *pagedCacheOrigin) packed(Precision) *prepack { return nil }

// packedOrigin is the prefix of ForwardSharedPrefix with its panels packed
// once (SharedPrefixKV.Packed): a caller's pools, read as poolOrigin reads
// them where the call reads rows in place, and through the panels where it
// computes in the precision they were packed for.
type packedOrigin struct {
	poolOrigin
	pp *PackedPrefix
}

func (o *packedOrigin) packed(prec Precision) *prepack {
	if prec != o.pp.prec {
		return nil
	}
	return &o.pp.pre
}

// otherDimError is the dimError of an origin other than tensor views.
func otherDimError(fn, subject string, qd, d int) error {
	return fmt.Errorf("%sq has head dim %d and %s %d; want the same", fn, qd, subject, d)
}

// interleavedRows reports whether the rows of the heads of a position lie
// together in k and v.
func interleavedRows(heads int, k, v *Tensor) bool {
	return heads > 1 && k.HeadStride < k.SeqStride && v.HeadStride < v.SeqStride
}

// overlapScan looks for the first input that shares memory with out or
// lse: each method reports whether its buffer does, and keeps it in hit.
type overlapScan struct {
	out, lse span
	hit      input
}

func (s *overlapScan) add(in input) bool {
	if overlaps(s.out.lo, s.out.hi, in.lo, in.hi) || overlaps(s.lse.lo, s.lse.hi, in.lo, in.hi) {
		s.hit = in
		return true
	}
	return false
}

// tensor checks the memory of t, then its Q8 or fp8 scales.
func (s *overlapScan) tensor(name string, index int, part string, t *Tensor) bool {
	lo, hi := t.byteRange()
	if s.add(input{name, index, part, false, lo, hi}) {
		return true
	}
	if !t.dtype.scaled() {
		return false
	}
	lo, hi = t.scaleRange()
	return s.add(input{name, index, part, true, lo, hi}) // named " scales" only in an error: no string built here
}

func (s *overlapScan) slice(name string, sp span) bool {
	return s.add(input{name, -1, "", false, sp.lo, sp.hi})
}

// kvSource is where the keys and values of one (batch entry, K/V head) lie:
// one run of rows SeqStride apart from kBase and vBase (a tensor view or a
// cache), or the blocks of a paged sequence (bs > 0).
type kvSource struct {
	k, v         *Tensor // the storage: the call's tensors, a cache's, or the pools
	kBase, vBase int     // one run: offsets of the sequence's key 0
	blocks       []int32 // paged: the sequence's block table
	bs           int     // paged: positions per block; 0 for one run
	// merge, paged: the first row of a block follows the last of the
	// block before it in the pools, so that consecutive blocks in a
	// table are one run of rows.
	merge      bool
	hk         int // the K/V head (a paged pool's rows, an fp8 tensor's scale)
	kOps, vOps *elemKernels
}

// kvRun is a run of n keys whose K rows start at element kOff of the
// source's k and whose V rows start at vOff of its v, SeqStride apart.
type kvRun struct {
	kOff, vOff, n int
}

// source returns where the keys of sequence sg of batch entry b, K/V head
// hk, lie.
func (c *task) source(b, hk int, sg seg) kvSource {
	s := c.kv.source(b, hk, sg)
	s.kOps, s.vOps = c.kOps, c.vOps
	return s
}

// run returns the run of keys that starts at key j and ends at end or
// where the rows stop being consecutive, for the packs: of a paged
// sequence, the rest of j's block and, where the pools' blocks follow each
// other, of each next block of the table that is the next block of the
// pool.
func (s *kvSource) run(j, end int) kvRun {
	if s.bs == 0 {
		return kvRun{kOff: s.keyRow(j), vOff: s.valueRow(j), n: end - j}
	}
	bs := s.bs
	i := j / bs
	blk, pos := int(s.blocks[i]), j-i*bs
	n := bs - pos
	for s.merge && j+n < end && i+1 < len(s.blocks) && s.blocks[i+1] == s.blocks[i]+1 {
		i++
		n += bs
	}
	return kvRun{kOff: s.k.Offset(blk, s.hk, pos), vOff: s.v.Offset(blk, s.hk, pos), n: min(n, end-j)}
}

// keyRow and valueRow return the element offsets of key j's K and V rows
// in a source of one run.
func (s *kvSource) keyRow(j int) int   { return s.kBase + j*s.k.SeqStride }
func (s *kvSource) valueRow(j int) int { return s.vBase + j*s.v.SeqStride }

// offsets fills off with the element offsets in x (the source's k or v)
// of the rows of keys j0, j0+1, ... of a paged sequence, through its block
// table. Entries past the table's last position (prefetch targets past
// the end of the sequence) repeat that position's row.
func (s *kvSource) offsets(off []int, x *Tensor, j0 int) {
	bs := s.bs
	last := len(s.blocks)*bs - 1
	for i := 0; i < len(off); {
		j := min(j0+i, last)
		b := j / bs
		pos := j - b*bs
		row := x.Offset(int(s.blocks[b]), s.hk, 0)
		if j0+i > last {
			row += pos * x.SeqStride
			for ; i < len(off); i++ {
				off[i] = row
			}
			return
		}
		for ; pos < bs && i < len(off); pos, i = pos+1, i+1 {
			off[i] = row + pos*x.SeqStride
		}
	}
}
