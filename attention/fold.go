package attention

import (
	"math"
	"unsafe"

	"github.com/flashgo/flashgo/kernel"
)

// workspace is the scratch memory of one tile loop. Rows of a tile are
// numbered r = hi·np + pi: query head hi of the K/V head's group, query
// position p0 + pi.
type workspace struct {
	rows, cols, dim int

	q     []float32 // rows × dim: the tile's query rows, gathered
	kt    []float32 // dim × cols: the K tile, transposed and in float32
	v     []float32 // cols × dim: the V tile in float32 (fp16/bf16 only)
	s     []float32 // rows × cols: scores, then probabilities
	o     []float32 // rows × dim: unnormalised output accumulators
	m, z  []float32 // rows: running max and running sum
	alpha []float32 // rows: the current tile's rescale factors
	lo    []int     // rows: first key of the current tile that each row sees
	vis   []int     // rows: one past the last key of the tile each row sees
}

func (e *Engine) getWorkspace() *workspace {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := len(e.free); n > 0 {
		ws := e.free[n-1]
		e.free[n-1] = nil
		e.free = e.free[:n-1]
		return ws
	}
	return new(workspace)
}

func (e *Engine) putWorkspace(ws *workspace) {
	e.mu.Lock()
	e.free = append(e.free, ws)
	e.mu.Unlock()
}

// ensure grows the buffers to hold a tile of rows × cols with head dim dim.
// It allocates only when a shape exceeds every earlier one.
func (ws *workspace) ensure(rows, cols, dim int) {
	if rows <= ws.rows && cols <= ws.cols && dim <= ws.dim {
		return
	}
	ws.rows, ws.cols, ws.dim = max(rows, ws.rows), max(cols, ws.cols), max(dim, ws.dim)
	rows, cols, ld := ws.rows, ws.cols, padRow(ws.dim)
	ws.q = alignedFloats(rows * ld)
	ws.kt = alignedFloats(ld * cols)
	ws.v = alignedFloats(cols * ld)
	ws.s = alignedFloats(rows * cols)
	ws.o = alignedFloats(rows * ld)
	ws.m = make([]float32, rows)
	ws.z = make([]float32, rows)
	ws.alpha = make([]float32, rows)
	ws.lo = make([]int, rows)
	ws.vis = make([]int, rows)
}

// padRow returns the row stride used for rows of n floats in the scratch
// buffers: n rounded up to 16 floats (64 bytes), so that with 64-byte
// aligned buffers every row starts on a cache line and a vector load never
// straddles two. Misaligned rows cost the P·V kernel up to a tenth of its
// speed.
func padRow(n int) int { return (n + 15) &^ 15 }

// alignedFloats returns n zeroed float32s starting on a 64-byte boundary.
func alignedFloats(n int) []float32 {
	buf := make([]float32, n+15)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(buf))) % 64 / 4)
	return buf[off : off+n : off+n]
}

var negInf = float32(math.Inf(-1))

// foldBlock computes the output rows of query positions [p0, p1) (packed
// positions, inside sequence sg) of every query head in K/V head hk's group,
// batch b. It streams the K/V tiles the block can see through the
// online-softmax fold (docs/math.md):
//
//	S = scale·Q·Kᵀ;  m' = max(m, rowmax S);  P = exp(S − m')
//	z = exp(m − m')·z + rowsum P;  O = exp(m − m')·O + P·V
//
// and divides by z once at the end. Each K/V tile is converted to float32
// once and shared by every row of the block, whichever head it belongs to.
func (e *Engine) foldBlock(ws *workspace, c *call, b, hk, p0, p1 int, sg seg) error {
	if err := e.foldTiles(ws, c, b, hk, p0, p1, sg, 0, 1); err != nil {
		return err
	}
	finishBlock(ws, c, b, hk, p0, p1-p0)
	return nil
}

// foldTiles folds part part of parts of the K/V tiles that the block of
// query positions [p0, p1) can see into fresh accumulators (ws.m, ws.z,
// ws.o): the visible tiles, numbered 0..nT−1, are cut into parts runs of
// consecutive tiles, part p taking tiles [p·nT/parts, (p+1)·nT/parts).
// With parts = 1 it folds every visible tile.
func (e *Engine) foldTiles(ws *workspace, c *call, b, hk, p0, p1 int, sg seg, part, parts int) error {
	q, k, v := &c.q, &c.k, &c.v
	d, g, np := q.Dim, c.group, p1-p0
	rows, ldS, ld := g*np, e.blockKV, padRow(q.Dim)

	for hi := range g {
		h := hk*g + hi
		for pi := range np {
			r := hi*np + pi
			copy(ws.q[r*ld:r*ld+d], q.f32[q.Offset(b, h, p0+pi):][:d])
		}
	}
	clear(ws.o[:rows*ld])
	for r := range rows {
		ws.m[r] = negInf
		ws.z[r] = 0
	}

	// Row i of the sequence sees keys [lo(i), hi(i)) under the causal mask
	// and the window, both bounds non-decreasing in i. Keys before the first
	// row's lo or at or past the last row's hi are invisible to the whole
	// block, so the tiles that hold only such keys are never computed.
	il0, il1 := p0-sg.q0, p1-1-sg.q0
	kBeg, _ := c.keyRange(sg, il0)
	_, kEnd := c.keyRange(sg, il1)
	kBeg, kEnd = max(kBeg, 0), min(kEnd, sg.nk)
	// Keys [allLo, allHi) are visible to every row of the block.
	allLo, _ := c.keyRange(sg, il1)
	_, allHi := c.keyRange(sg, il0)
	var kBase, vBase int
	var blocks []int32 // the sequence's block table (ForwardPaged)
	if c.paged.cache == nil {
		kBase, vBase = k.Offset(b, hk, sg.kv0), v.Offset(b, hk, sg.kv0)
	} else {
		blocks, _ = c.paged.table(b)
	}
	if parts > 1 && kEnd > kBeg {
		nT := (kEnd - kBeg + e.blockKV - 1) / e.blockKV
		kBeg, kEnd = kBeg+part*nT/parts*e.blockKV, min(kEnd, kBeg+(part+1)*nT/parts*e.blockKV)
	}
	// With few rows (c.direct: decode, a few draft tokens) the row kernels
	// read K and V where they lie instead of packing tiles. The choice
	// depends on the call's shape only (not on the block size, which
	// depends on the thread count), so that every thread count gives the
	// same bits.
	direct := c.direct
	for j0 := kBeg; j0 < kEnd; j0 += e.blockKV {
		bc := min(e.blockKV, kEnd-j0)
		if c.terms && maskHidesTile(c, b, hk, p0, np, j0, bc, sg) {
			continue // a mask hides the whole tile: nothing to pack or compute
		}
		// Direct (few rows): the scores come from the K rows where they
		// lie. Otherwise K is packed into the transposed panel QKT reuses
		// across many rows.
		var err error
		switch {
		case direct && c.paged.cache != nil:
			err = qkPaged(ws, c.paged.cache, blocks, hk, j0, bc, rows, d, ldS, ld, c.scale)
		case direct:
			err = qkDirect(ws.s, ldS, ws.q, ld, k, kBase+j0*k.SeqStride, bc, rows, d, c.scale, kernel.PrefetchRows*k.SeqStride)
		case c.paged.cache != nil:
			err = packPagedK(ws, c.paged.cache, blocks, hk, j0, bc, d, ldS)
		default:
			err = packK(ws.kt, ldS, k, kBase+j0*k.SeqStride, bc, d)
		}
		if err == nil && !direct {
			err = kernel.QKT(ws.s, ldS, ws.q, ld, ws.kt, ldS, rows, bc, d, c.scale)
		}
		if err != nil {
			return err
		}
		// Only a tile that the edge of some row's range crosses is masked
		// row by row; a tile inside every row's range is visible to all.
		whole := allLo <= j0 && j0+bc <= allHi
		if whole {
			if c.terms {
				for r := range rows {
					ws.lo[r], ws.vis[r] = 0, bc
				}
			}
		} else {
			for pi := range np {
				lo, hi := c.keyRange(sg, il0+pi)
				lo, hi = min(bc, max(0, lo-j0)), min(bc, max(0, hi-j0))
				hi = max(hi, lo)
				for hi0 := 0; hi0 < rows; hi0 += np {
					ws.lo[hi0+pi], ws.vis[hi0+pi] = lo, hi
				}
			}
		}
		if c.terms {
			applyTerms(ws, c, b, hk, p0, np, j0, ldS, sg)
		}
		if whole && direct {
			// P·V from the V rows where they lie.
			if err := softmaxWholeTile(ws, rows, bc, d, ld, ldS); err != nil {
				return err
			}
			if c.paged.cache != nil {
				err = pvPaged(ws, c.paged.cache, blocks, hk, j0, bc, rows, d, ldS, ld)
			} else {
				err = pvDirect(ws.o, ld, ws.s, ldS, v, vBase+j0*v.SeqStride, bc, rows, d, kernel.PrefetchRows*v.SeqStride)
			}
			if err != nil {
				return err
			}
			continue
		}
		// Float32 values whose rows are contiguous are read where they
		// lie. Others are copied or converted into the panel once per tile:
		// P·V re-reads the tile for every strip of rows, and rows a power
		// of two apart (4 KiB in the [batch, seq, heads, dim] layout of an
		// 8-head K/V) would all fall into the same few L1 sets.
		var vt []float32
		var ldV int
		switch {
		case c.paged.cache != nil:
			vt, ldV, err = packPagedV(ws, c.paged.cache, blocks, hk, j0, bc, d, ld)
		case v.dtype == F32 && v.SeqStride == d:
			vt, ldV = v.f32[vBase+j0*v.SeqStride:], v.SeqStride
		default:
			vt, ldV, err = ws.v, ld, packV(ws.v, ld, v, vBase+j0*v.SeqStride, bc, d)
		}
		if err != nil {
			return err
		}
		if whole {
			err = foldWholeTile(ws, rows, bc, d, ld, ldS, vt, ldV)
		} else {
			err = foldCrossingTile(ws, rows, np, d, ld, ldS, vt, ldV)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// finishBlock divides the accumulators of the block of np query positions
// from p0 by their sums, folds in the sinks, and writes the output rows and
// log-sum-exps.
func finishBlock(ws *workspace, c *call, b, hk, p0, np int) {
	q, d, g, ld := &c.q, c.q.Dim, c.group, padRow(c.q.Dim)
	out := &c.out
	for hi := range g {
		h := hk*g + hi
		sink := negInf
		if c.sinks != nil {
			sink = c.sinks[h]
		}
		for pi := range np {
			r := hi*np + pi
			orow := out.f32[out.Offset(b, h, p0+pi):][:d]
			lse := sink
			if z := ws.z[r]; z == 0 {
				clear(orow)
			} else if sink == negInf {
				kernel.Scale(orow, ws.o[r*ld:r*ld+d], 1/z)
				lse = ws.m[r] + float32(math.Log(float64(z)))
			} else {
				// The sink joins the denominator: with M = max(m, σ),
				// Z = z·e^{m−M} + e^{σ−M} and out = O·e^{m−M}/Z.
				m := ws.m[r]
				mm := max(m, sink)
				a := kernel.Exp(m - mm)
				zz := z*a + kernel.Exp(sink-mm)
				kernel.Scale(orow, ws.o[r*ld:r*ld+d], a/zz)
				lse = mm + float32(math.Log(float64(zz)))
			}
			if c.lse != nil {
				c.lse[(b*q.Heads+h)*q.Seq+p0+pi] = lse
			}
		}
	}
}

// directRows is the most rows (query heads of a group × query positions of
// the call, c.direct) for which a call reads K and V rows in place with kernel.QKRows and
// kernel.PVRows rather than packing each tile for QKT and PV: the row
// kernels re-read a tile's rows for every 4 query rows (2 with AVX2), the
// packed kernels reuse a packed tile across all of them.
const directRows = 16

// qkDirect writes the scores of rows query rows of ws.q against n keys of
// k, from element off on, read in place. While it reads a key row it
// prefetches the row ahead elements further on (kernel.QKRowsPrefetch).
func qkDirect(s []float32, ldS int, q []float32, ldQ int, k *Tensor, off, n, rows, d int, scale float32, ahead int) error {
	switch k.dtype {
	case F16:
		return kernel.QKRowsPrefetch(s, ldS, q, ldQ, k.f16[off:], nil, k.SeqStride, rows, n, d, scale, ahead)
	case BF16:
		return kernel.QKRowsPrefetch(s, ldS, q, ldQ, k.bf16[off:], nil, k.SeqStride, rows, n, d, scale, ahead)
	case Q8:
		return kernel.QKRowsPrefetch(s, ldS, q, ldQ, k.i8[off:], k.q8s[off/Q8Block:], k.SeqStride, rows, n, d, scale, ahead)
	}
	return kernel.QKRowsPrefetch(s, ldS, q, ldQ, k.f32[off:], nil, k.SeqStride, rows, n, d, scale, ahead)
}

// pvDirect accumulates rows probability rows times n value rows of v, from
// element off on, read in place, prefetching as qkDirect does.
func pvDirect(o []float32, ldO int, p []float32, ldP int, v *Tensor, off, n, rows, d, ahead int) error {
	switch v.dtype {
	case F16:
		return kernel.PVRowsPrefetch(o, ldO, p, ldP, v.f16[off:], nil, v.SeqStride, rows, n, d, ahead)
	case BF16:
		return kernel.PVRowsPrefetch(o, ldO, p, ldP, v.bf16[off:], nil, v.SeqStride, rows, n, d, ahead)
	case Q8:
		return kernel.PVRowsPrefetch(o, ldO, p, ldP, v.i8[off:], v.q8s[off/Q8Block:], v.SeqStride, rows, n, d, ahead)
	}
	return kernel.PVRowsPrefetch(o, ldO, p, ldP, v.f32[off:], nil, v.SeqStride, rows, n, d, ahead)
}

// packK converts n keys starting at element off of k into the transposed
// panel dst (leading dimension ld).
func packK(dst []float32, ld int, k *Tensor, off, n, d int) error {
	switch k.dtype {
	case F16:
		return kernel.PackKTFloat16(dst, ld, k.f16[off:], k.SeqStride, n, d)
	case BF16:
		return kernel.PackKTBFloat16(dst, ld, k.bf16[off:], k.SeqStride, n, d)
	case Q8:
		packKTQ8(dst, ld, k, off, n, d)
		return nil
	}
	return kernel.PackKT(dst, ld, k.f32[off:], k.SeqStride, n, d)
}

// packV converts (or copies) n value rows starting at element off of v
// into the row-major panel dst (leading dimension ld).
func packV(dst []float32, ld int, v *Tensor, off, n, d int) error {
	switch v.dtype {
	case F16:
		return kernel.PackFloat16(dst, ld, v.f16[off:], v.SeqStride, n, d)
	case BF16:
		return kernel.PackBFloat16(dst, ld, v.bf16[off:], v.SeqStride, n, d)
	case Q8:
		packQ8(dst, ld, v, off, n, d)
		return nil
	}
	for j := range n {
		copy(dst[j*ld:j*ld+d], v.f32[off+j*v.SeqStride:][:d])
	}
	return nil
}

// foldWholeTile folds a tile that every row of the block sees entirely.
func foldWholeTile(ws *workspace, rows, bc, d, ld, ldS int, vt []float32, ldV int) error {
	if err := softmaxWholeTile(ws, rows, bc, d, ld, ldS); err != nil {
		return err
	}
	return kernel.PV(ws.o, ld, ws.s, ldS, vt, ldV, rows, bc, d)
}

// softmaxWholeTile is the first half of folding a tile that every row sees
// entirely: it turns the scores into probabilities against the updated
// running maxima and rescales the accumulators, leaving P·V to the caller.
func softmaxWholeTile(ws *workspace, rows, bc, d, ld, ldS int) error {
	if err := kernel.OnlineSoftmax(ws.s, ldS, rows, bc, ws.m, ws.z, ws.alpha); err != nil {
		return err
	}
	return kernel.ScaleRows(ws.o, ld, ws.alpha, rows, d)
}

// foldCrossingTile folds a tile that the edge of some row's visible range
// crosses: row r sees the tile's keys [ws.lo[r], ws.vis[r]). Keys outside
// the range are left out of the softmax and of P·V rather than weighted by
// zero, so that a NaN in a value a row cannot see never reaches it. Rows go
// to P·V in runs of crossRun consecutive positions of one head: the keys
// that every row of a run sees (the intersection of their ranges) go
// through one block P·V with a column offset; only the ragged remainders on
// either side go row by row.
func foldCrossingTile(ws *workspace, rows, np, d, ld, ldS int, vt []float32, ldV int) error {
	for r := range rows {
		lo, hi := ws.lo[r], ws.vis[r]
		ws.alpha[r] = 1
		if hi <= lo {
			continue
		}
		if err := kernel.OnlineSoftmax(ws.s[r*ldS+lo:], ldS, 1, hi-lo, ws.m[r:], ws.z[r:], ws.alpha[r:]); err != nil {
			return err
		}
	}
	if err := kernel.ScaleRows(ws.o, ld, ws.alpha, rows, d); err != nil {
		return err
	}
	for h0 := 0; h0 < rows; h0 += np {
		for r0 := h0; r0 < h0+np; r0 += crossRun {
			n := min(crossRun, h0+np-r0)
			// The ranges are monotone in the position, so the intersection
			// runs from the last row's lo to the first row's hi.
			cLo, cHi := ws.lo[r0+n-1], ws.vis[r0]
			if cHi > cLo {
				if err := kernel.PV(ws.o[r0*ld:], ld, ws.s[r0*ldS+cLo:], ldS, vt[cLo*ldV:], ldV, n, cHi-cLo, d); err != nil {
					return err
				}
			} else {
				cLo, cHi = 0, 0
			}
			for r := r0; r < r0+n; r++ {
				lo, hi := ws.lo[r], ws.vis[r]
				if hi <= lo {
					continue
				}
				if cHi <= cLo { // no common part: the row's whole range
					if err := rowPV(ws, r, lo, hi, d, ld, ldS, vt, ldV); err != nil {
						return err
					}
					continue
				}
				if err := rowPV(ws, r, lo, cLo, d, ld, ldS, vt, ldV); err != nil {
					return err
				}
				if err := rowPV(ws, r, cHi, hi, d, ld, ldS, vt, ldV); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// rowPV accumulates keys [lo, hi) of the tile into output row r.
func rowPV(ws *workspace, r, lo, hi, d, ld, ldS int, vt []float32, ldV int) error {
	if hi <= lo {
		return nil
	}
	return kernel.PV(ws.o[r*ld:], ld, ws.s[r*ldS+lo:], ldS, vt[lo*ldV:], ldV, 1, hi-lo, d)
}

// crossRun is the number of consecutive query positions of a crossing tile
// that share one block P·V over their common visible keys.
const crossRun = 8
