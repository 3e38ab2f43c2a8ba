package attention

import "github.com/flashgo/flashgo/kernel"

// The first seam of the tile loop: where K and V rows come from. A call
// reads them from tensor views (Forward), from a contiguous cache per
// batch entry (ForwardKVCaches) or through the block tables of paged pools
// (ForwardPagedKV over a caller's, ForwardPaged over a PagedCache's); the
// loop sees none of them, only a kvSource that
// hands out the keys of a tile as runs of rows lying one after the other in
// memory. A contiguous view is one run; a paged sequence is a run per
// stretch of consecutive blocks. This is the only place that tells the two
// apart.

// kvSource is where the keys and values of one (batch entry, K/V head) lie.
type kvSource struct {
	k, v         *Tensor    // the storage: the call's tensors or a cache's
	kBase, vBase int        // tensor view: offsets of the sequence's key 0
	pg           *pagedRead // paged: the pools and their geometry, or nil
	blocks       []int32    // paged: the sequence's block table
	hk           int        // paged: the K/V head
}

// kvRun is a run of n keys whose K rows start at element kOff of the
// source's k and whose V rows start at vOff of its v, SeqStride apart.
// kAhead and vAhead are the distances, in elements, from a row to the row
// the decode kernels prefetch while reading it.
type kvRun struct {
	kOff, vOff, n  int
	kAhead, vAhead int
}

// keys returns the number of keys of batch entry b: the K/V sequence
// length, or the paged sequence's length.
func (c *call) keys(b int) int {
	if c.paged.on() {
		_, n := c.paged.table(b)
		return n
	}
	if c.caches != nil {
		return c.caches[b].n
	}
	return c.k.Seq
}

// source returns where the keys of sequence sg of batch entry b, K/V head
// hk, lie.
func (c *call) source(b, hk int, sg seg) kvSource {
	if p := &c.paged; p.on() {
		blocks, _ := p.table(b)
		k, v := p.pools()
		return kvSource{k: k, v: v, pg: p, blocks: blocks, hk: hk}
	}
	if c.caches != nil {
		kc := c.caches[b]
		return kvSource{k: &kc.k, v: &kc.v, kBase: kc.k.Offset(0, hk, sg.kv0), vBase: kc.v.Offset(0, hk, sg.kv0)}
	}
	return kvSource{k: &c.k, v: &c.v, kBase: c.k.Offset(b, hk, sg.kv0), vBase: c.v.Offset(b, hk, sg.kv0)}
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

// rowRun is run for the decode kernels, which read rows in place and
// prefetch ahead of them: in a paged sequence the run also ends where the
// rows kernel.Current().PrefetchRows further on stop being consecutive, and the
// prefetch distance goes through the block table to where the sequence
// continues (0 past its last block).
func (s *kvSource) rowRun(j, end int) kvRun {
	if s.pg == nil {
		return s.viewRun(j, end)
	}
	return s.pg.runAhead(s.blocks, s.hk, j, end)
}

// scattered reports whether keys [j0, end) of a paged sequence lie in more
// than one run of consecutive rows: then the decode kernels gather them
// in one call (kernel.QKRowsGather) instead of one call per run.
func (s *kvSource) scattered(j0, end int) bool {
	if s.pg == nil {
		return false
	}
	_, _, n := s.pg.run(s.blocks, j0, end)
	return n < end-j0
}

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
	ahead := kernel.Current().PrefetchRows
	return kvRun{
		kOff: s.kBase + j*s.k.SeqStride, vOff: s.vBase + j*s.v.SeqStride, n: end - j,
		kAhead: ahead * s.k.SeqStride, vAhead: ahead * s.v.SeqStride,
	}
}
