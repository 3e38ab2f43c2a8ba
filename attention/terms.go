package attention

import "github.com/flashgo/flashgo/kernel"

// applyTerms applies soft-capping, ALiBi and the masks to the scores of the
// current tile: rows of the block of queries [p0, p0+np) (packed) of K/V
// head hk, keys [j0, j0+bc) of the sequence (local numbering), each row r
// only over its columns [lo[r], hi[r]). A tree mask hides keys as BoolMask
// does, at the same point: the same bits for the same hidden keys.
func applyTerms(ws *workspace, c *task, b, hk, p0, np, j0, ldS int, sg seg) {
	g := c.group
	tm := c.treeSeg(sg)
	for hg := range g {
		h := hk*g + hg
		var slope float32
		if c.slopes != nil {
			slope = c.slopes[h]
		}
		for pi := range np {
			r := hg*np + pi
			a, e := ws.lo[r], ws.vis[r]
			if a >= e {
				continue
			}
			row := ws.s[r*ldS+a : r*ldS+e]
			if cp := c.softCap; cp != 0 {
				kernel.SoftCap(row, row, cp) // cp·tanh(x/cp), vectorised
			}
			i := p0 + pi // packed query position
			if c.slopes != nil {
				diag := i - sg.q0
				if !c.topLeft {
					diag += sg.nk - sg.nq
				}
				for t := range row {
					d := diag - (j0 + a + t)
					if d < 0 {
						d = -d
					}
					row[t] -= slope * float32(d)
				}
			}
			kj := sg.kv0 + j0 + a // packed key of row[0]
			if m := &c.bmask; m.Data != nil {
				bm, hm := b, h
				if m.Batch == 1 {
					bm = 0
				}
				if m.Heads == 1 {
					hm = 0
				}
				keep := m.Data[m.Offset(bm, hm, i)+kj:][:len(row)]
				for t, k := range keep {
					if !k {
						row[t] = negInf
					}
				}
			}
			if tm != nil {
				// The draft keys among the row's: from local key nk−nq on.
				j := j0 + a // local key of row[0]
				for t := max(0, sg.nk-sg.nq-j); t < len(row); t++ {
					if !treeKeeps(tm, sg, i-sg.q0, j+t) {
						row[t] = negInf
					}
				}
			}
			if m := &c.mask; m.dtype != 0 {
				bm, hm := b, h
				if m.Batch == 1 {
					bm = 0
				}
				if m.Heads == 1 {
					hm = 0
				}
				c.maskOps.add(row, m, m.Offset(bm, hm, i)+kj)
			}
		}
	}
}

// maskHidesTile reports whether the float, boolean or tree mask hides
// every key of the tile [j0, j0+bc) from every row of the block that the
// causal mask and the window would let see it, so that the tile can be
// skipped like a tile outside every window. The scan stops at the first
// key some row sees, which for an ordinary tile is the first one it reads.
func maskHidesTile(c *task, b, hk, p0, np, j0, bc int, sg seg) bool {
	tm := c.treeSeg(sg)
	if c.mask.dtype == 0 && c.bmask.Data == nil && tm == nil {
		return false
	}
	il0 := p0 - sg.q0
	for hg := range c.group {
		h := hk*c.group + hg
		for pi := range np {
			lo, hi := c.keyRange(sg, il0+pi)
			lo, hi = max(lo, j0), min(hi, j0+bc)
			if lo >= hi {
				continue
			}
			i := p0 + pi
			kj := sg.kv0 + lo
			n := hi - lo
			if m := &c.bmask; m.Data != nil {
				keep := m.Data[m.Offset(maskIndex(m.Batch, b), maskIndex(m.Heads, h), i)+kj:][:n]
				all := true
				for _, k := range keep {
					if k {
						all = false
						break
					}
				}
				if all {
					continue // this row sees nothing in the tile
				}
			}
			if m := &c.mask; m.dtype != 0 {
				off := m.Offset(maskIndex(m.Batch, b), maskIndex(m.Heads, h), i) + kj
				if c.maskOps.allNegInf(m, off, n) {
					continue
				}
			}
			if tm != nil && treeHidesAll(tm, sg, i-sg.q0, lo, hi) {
				continue
			}
			return false
		}
	}
	return true
}

// trimMasked narrows the range [ws.lo[r], ws.vis[r]) of each row of the
// block in the tile of keys [j0, j0+bc) to run from the row's first to its
// last key there that Mask, BoolMask and TreeMask leave visible, so that the keys
// they hide at the edges of a row's range are never read for it, whatever
// their values (a key-padding mask's padding may be uninitialised
// memory). It reports whether every range stayed as it was. The scan stops
// at the first visible key from either end, which for an ordinary row is
// the one at the end.
func trimMasked(ws *workspace, c *task, b, hk, p0, np, j0 int, sg seg) bool {
	same := true
	kj := sg.kv0 + j0 // packed key of the tile's column 0
	tm := c.treeSeg(sg)
	hides := func(h, i, t int) bool { // whether a mask hides column t from query i of head h
		return maskHides(c, b, h, i, kj+t) || tm != nil && !treeKeeps(tm, sg, i-sg.q0, j0+t)
	}
	for hg := range c.group {
		h := hk*c.group + hg
		for pi := range np {
			r := hg*np + pi
			lo, e := ws.lo[r], ws.vis[r]
			i := p0 + pi
			for lo < e && hides(h, i, lo) {
				lo++
			}
			for e > lo && hides(h, i, e-1) {
				e--
			}
			if lo != ws.lo[r] || e != ws.vis[r] {
				ws.lo[r], ws.vis[r] = lo, e
				same = false
			}
		}
	}
	return same
}

// maskHides reports whether Mask or BoolMask hides packed key j from query
// i of head h, batch entry b.
func maskHides(c *task, b, h, i, j int) bool {
	if m := &c.bmask; m.Data != nil && !m.Data[m.Offset(maskIndex(m.Batch, b), maskIndex(m.Heads, h), i)+j] {
		return true
	}
	if m := &c.mask; m.dtype != 0 {
		return c.maskOps.allNegInf(m, m.Offset(maskIndex(m.Batch, b), maskIndex(m.Heads, h), i)+j, 1)
	}
	return false
}

// maskIndex maps a batch or head index onto a mask dimension of size n,
// which is either the full size or 1 (broadcast).
func maskIndex(n, i int) int {
	if n == 1 {
		return 0
	}
	return i
}
