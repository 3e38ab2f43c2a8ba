package attention

// The first seam of the tile loop: where K and V rows come from. A call
// reads them from tensor views (Forward), from a contiguous cache per
// batch entry (ForwardKVCaches) or through the block tables of paged pools
// (ForwardPagedKV over a caller's, ForwardPaged over a PagedCache's). Each
// is a kvStore, resolved once per call (stores.resolve); the loop sees none
// of them, only the kvSource a store hands out for one (batch entry, K/V
// head), which gives the keys of a tile as runs of rows lying one after
// the other in memory. A contiguous view is one run; a paged sequence is a
// run per stretch of consecutive blocks. This file is the only place that
// tells the stores apart.

// kvStore is where a call's keys and values lie.
type kvStore interface {
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
}

// viewStore is the call's K and V tensor views (Forward).
type viewStore struct{ k, v *Tensor }

func (s *viewStore) keys(int) int { return s.k.Seq }

func (s *viewStore) source(b, hk int, sg seg) kvSource {
	return kvSource{k: s.k, v: s.v, kBase: s.k.Offset(b, hk, sg.kv0), vBase: s.v.Offset(b, hk, sg.kv0), hk: hk}
}

func (s *viewStore) interleaved(heads int) bool { return interleavedRows(heads, s.k, s.v) }

func (s *viewStore) whole() bool { return true }

// cacheStore is a KVCache per batch entry (ForwardKVCaches).
type cacheStore struct{ caches []*KVCache }

func (s *cacheStore) keys(b int) int { return s.caches[b].n }

func (s *cacheStore) source(b, hk int, sg seg) kvSource {
	kc := s.caches[b]
	return kvSource{k: &kc.k, v: &kc.v, kBase: kc.k.Offset(0, hk, sg.kv0), vBase: kc.v.Offset(0, hk, sg.kv0), hk: hk}
}

// interleaved is false: a KVCache keeps each head's rows together.
func (s *cacheStore) interleaved(int) bool { return false }

func (s *cacheStore) whole() bool { return false }

// pagedRead (pagedkv.go) is the paged store: ForwardPagedKV's caller's
// pools and ForwardPaged's PagedCache.

func (p *pagedRead) keys(b int) int {
	_, n := p.table(b)
	return n
}

func (p *pagedRead) source(b, hk int, _ seg) kvSource {
	blocks, _ := p.table(b)
	k, v := p.pools()
	return kvSource{k: k, v: v, pg: p, blocks: blocks, hk: hk}
}

func (p *pagedRead) interleaved(heads int) bool {
	k, v := p.pools()
	return interleavedRows(heads, k, v)
}

func (p *pagedRead) whole() bool { return false }

// interleavedRows reports whether the rows of the heads of a position lie
// together in k and v.
func interleavedRows(heads int, k, v *Tensor) bool {
	return heads > 1 && k.HeadStride < k.SeqStride && v.HeadStride < v.SeqStride
}

// stores holds a job's store values, so that the kvStore of a call points
// into the pooled job and resolving it allocates nothing.
type stores struct {
	views  viewStore
	caches cacheStore
}

// resolve returns the store of call c (which must be the job's own
// copy, as s is the job's).
func (s *stores) resolve(c *call) kvStore {
	switch {
	case c.paged.on():
		return &c.paged
	case c.caches != nil:
		s.caches = cacheStore{c.caches}
		return &s.caches
	}
	s.views = viewStore{&c.k, &c.v}
	return &s.views
}

// kvSource is where the keys and values of one (batch entry, K/V head) lie.
type kvSource struct {
	k, v         *Tensor    // the storage: the call's tensors or a cache's
	kBase, vBase int        // tensor view: offsets of the sequence's key 0
	pg           *pagedRead // paged: the pools and their geometry, or nil
	blocks       []int32    // paged: the sequence's block table
	hk           int        // the K/V head (a paged pool's rows, an fp8 tensor's scale)
	kOps, vOps   *elemKernels
}

// kvRun is a run of n keys whose K rows start at element kOff of the
// source's k and whose V rows start at vOff of its v, SeqStride apart.
type kvRun struct {
	kOff, vOff, n int
}

// keys returns the number of keys of batch entry b.
func (c *task) keys(b int) int { return c.src.keys(b) }

// source returns where the keys of sequence sg of batch entry b, K/V head
// hk, lie.
func (c *task) source(b, hk int, sg seg) kvSource {
	s := c.src.source(b, hk, sg)
	s.kOps, s.vOps = c.kOps, c.vOps
	return s
}

// run returns the run of keys that starts at key j and ends at end or
// where the rows stop being consecutive, for the packs.
func (s *kvSource) run(j, end int) kvRun {
	if s.pg == nil {
		return s.viewRun(j, end)
	}
	blk, pos, n := s.pg.run(s.blocks, j, end)
	return kvRun{kOff: s.k.Offset(blk, s.hk, pos), vOff: s.v.Offset(blk, s.hk, pos), n: n}
}

// gathers reports whether the decode kernels read the source's rows
// through a table of their offsets (offsets; kernel.QKRowsGather): a paged
// sequence, whose table also lists the rows of the keys after a tile, so
// that the kernels prefetch where the sequence goes on. A tensor view or
// cache is read at its own stride (keyRow, valueRow).
func (s *kvSource) gathers() bool { return s.pg != nil }

// keyRow and valueRow return the element offsets of key j's K and V rows
// in a source that does not gather (gathers is false).
func (s *kvSource) keyRow(j int) int   { return s.kBase + j*s.k.SeqStride }
func (s *kvSource) valueRow(j int) int { return s.vBase + j*s.v.SeqStride }

// offsets fills off with the element offsets in x (the source's k or v)
// of the rows of keys j0, j0+1, ... of a paged sequence, through its block
// table. Entries past the table's last position (prefetch targets past
// the end of the sequence) repeat that position's row.
func (s *kvSource) offsets(off []int, x *Tensor, j0 int) {
	bs := s.pg.bs
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

func (s *kvSource) viewRun(j, end int) kvRun {
	return kvRun{kOff: s.keyRow(j), vOff: s.valueRow(j), n: end - j}
}
