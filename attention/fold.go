package attention

import (
	"math"
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel"
)

// workspace is the scratch memory of one tile loop. Rows of a tile are
// numbered r = hg·np + pi: query head hg of the K/V head's group, query
// position p0 + pi.
type workspace struct {
	rows, cols, dim int
	bf16            bool // the bf16 buffers are sized too

	q     []float32 // rows × dim: the tile's query rows, gathered
	kt    []float32 // dim × cols: the K tile, transposed and in float32
	v     []float32 // cols × dim: the V tile in float32, when it is not read in place (valuesF32)
	s     []float32 // rows × cols: scores, then probabilities
	o     []float32 // rows × dim: unnormalised output accumulators
	m, z  []float32 // rows: running max and running sum
	alpha []float32 // rows: the current tile's rescale factors
	lo    []int     // rows: first key of the current tile that each row sees
	vis   []int     // rows: one past the last key of the tile each row sees
	off   []int     // cols + gatherAhead: a paged tile's row offsets (scoresInPlace)

	// Precision BFloat16 (leading dimensions from bf16Strides).
	qb []fp16.BFloat16 // rows: the block's queries, rounded
	kp []fp16.BFloat16 // the K tile's pair panel
	pb []fp16.BFloat16 // rows: the probabilities, rounded
	vp []fp16.BFloat16 // the V tile's pair panel
	vc []fp16.BFloat16 // a copy of a V panel without its non-finite rows (pvHidingNonFinite)

	q8 kernel.Q8Query // Options.QuantizeQuery: the block's query rows in Q8

	blk block // the block being folded
}

func (e *Engine) getWorkspace() *workspace {
	if ws := takeFree(&e.mu, &e.free); ws != nil {
		return ws
	}
	return new(workspace)
}

func (e *Engine) putWorkspace(ws *workspace) { giveFree(&e.mu, &e.free, ws) }

// ensure grows the buffers to hold a tile of rows × cols with head dim dim,
// and the bf16 buffers too if bf16 is set. It allocates only when a shape
// exceeds every earlier one.
func (ws *workspace) ensure(rows, cols, dim int, bf16 bool) {
	if rows <= ws.rows && cols <= ws.cols && dim <= ws.dim && (ws.bf16 || !bf16) {
		return
	}
	ws.rows, ws.cols, ws.dim, ws.bf16 = max(rows, ws.rows), max(cols, ws.cols), max(dim, ws.dim), ws.bf16 || bf16
	rows, cols, ld := ws.rows, ws.cols, padRow(ws.dim)
	// The fused bf16 chunk (kernel.FoldChunkBF16) may take the rows 16 at
	// a time: its scratch, queries and accumulators have whole tiles of
	// rows.
	r16 := roundUp(rows, 16)
	ws.q = alignedFloats(rows * ld)
	ws.kt = alignedFloats(ld * cols)
	ws.v = alignedFloats(cols * ld)
	ws.s = alignedFloats(r16 * cols)
	ws.o = alignedFloats(r16 * ld)
	ws.m = make([]float32, rows)
	ws.z = make([]float32, rows)
	ws.alpha = make([]float32, rows)
	ws.lo = make([]int, rows)
	ws.vis = make([]int, rows)
	ws.off = make([]int, cols+gatherAhead)
	if ws.bf16 {
		ldQ, ldK, ldP, ldV := bf16Strides(cols, ws.dim, ws.dim)
		ws.qb = alignedBF16(r16 * ldQ)
		ws.kp = alignedBF16(ldQ / 2 * ldK)
		ws.pb = alignedBF16(r16 * ldP)
		ws.vp = alignedBF16(ldP / 2 * ldV)
		ws.vc = alignedBF16(ldP / 2 * ldV)
	}
}

// trimStep is the granularity of a crossing tile's trimmed width: the
// columns a row pass of the vector softmax takes at a time (four vectors
// of 16, one per partial sum). A trimmed tile is then a whole number of
// those passes, each column goes to the partial sum it goes to in the
// untrimmed tile, and the sums are the same bits whichever block, so
// whichever width, a row is computed in (blocks differ with the thread
// count).
const trimStep = 64

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
func (e *Engine) foldBlock(ws *workspace, c *task, b, hk, p0, p1 int, sg seg) error {
	err := e.foldTiles(ws, c, b, hk, p0, p1, sg, 0, 1)
	if c.pre != nil {
		c.pre.done(c, b, hk) // beginTiles took the panels, error or not
	}
	if err != nil {
		return err
	}
	finishBlock(ws, c, b, hk, p0, p1-p0)
	return nil
}

// foldTiles folds part part of parts of the K/V tiles that the block of
// query positions [p0, p1) can see into fresh accumulators (ws.m, ws.z,
// ws.o): the visible tiles, numbered 0..nT−1, are cut into parts spans of
// consecutive tiles, part p taking tiles [p·nT/parts, (p+1)·nT/parts).
// With parts = 1 it folds every visible tile.
//
// Per tile it is the fold of foldBlock's doc comment: the scores, the
// per-element terms, then the softmax and P·V of a tile that every row
// sees whole, or of one that the edge of some row's range crosses. Where
// the K/V rows come from is the source's business (ws.blk.src: a tensor
// view or a paged cache) and how the products are computed is the compute
// path's (c.math: float32 or bfloat16).
func (e *Engine) foldTiles(ws *workspace, c *task, b, hk, p0, p1 int, sg seg, part, parts int) error {
	sp, err := e.beginTiles(ws, c, b, hk, p0, p1, sg, part, parts)
	if err != nil {
		return err
	}
	for j0 := sp.kBeg; j0 < sp.kEnd; j0 += c.bkv {
		if err := e.foldTile(ws, c, &sp, j0); err != nil {
			return err
		}
	}
	return nil
}

// tileSpan is what foldTile needs to know of the block beyond ws.blk: its
// batch entry, K/V head, positions and sequence, and the keys that every
// row sees.
type tileSpan struct {
	b, hk, p0, np int
	sg            seg
	il0           int // the block's first row, within its sequence
	kBeg, kEnd    int // the tiles to fold: [kBeg, kEnd) in steps of c.bkv
	allLo, allHi  int // keys [allLo, allHi) are visible to every row
}

// beginTiles sets ws up for the block of query positions [p0, p1) of K/V
// head hk (geometry, queries, fresh accumulators) and returns the span of
// tiles of part part of parts that foldTiles folds.
func (e *Engine) beginTiles(ws *workspace, c *task, b, hk, p0, p1 int, sg seg, part, parts int) (tileSpan, error) {
	np := p1 - p0
	ws.blk = block{rows: c.group * np, np: np, d: c.q.Dim, dv: c.dv, ld: padRow(c.wsDim()), ldS: c.bkv, src: c.source(sg.seq, hk, sg)}
	switch {
	case c.pre != nil && c.pre.f32:
		var err error
		if ws.blk.preKT, ws.blk.preVF, err = c.pre.panelsF32(c, b, hk); err != nil {
			return tileSpan{}, err
		}
		ws.blk.ldVF = c.pre.ldVF
	case c.pre != nil:
		var err error
		if ws.blk.preK, ws.blk.preV, ws.blk.preBad, err = c.pre.panels(c, b, hk); err != nil {
			return tileSpan{}, err
		}
	}
	c.math.loadQ(ws, c, b, hk, p0, np)
	rows, ld := ws.blk.rows, ws.blk.ld
	clear(ws.o[:rows*ld])
	for r := range rows {
		ws.m[r] = negInf
		ws.z[r] = 0
	}

	// Row i of the sequence sees keys [lo(i), hi(i)) under the causal mask
	// and the window, both bounds non-decreasing in i. Keys before the first
	// row's lo or at or past the last row's hi are invisible to the whole
	// block, so the tiles that hold only such keys are never computed.
	sp := tileSpan{b: b, hk: hk, p0: p0, np: np, sg: sg, il0: p0 - sg.q0}
	il1 := p1 - 1 - sg.q0
	kBeg, _ := c.keyRange(sg, sp.il0)
	_, kEnd := c.keyRange(sg, il1)
	kBeg, kEnd = max(kBeg, 0), min(kEnd, sg.nk)
	// Tiles start on multiples of the tile width, whatever the block's
	// first visible key: a row's scores are folded in the same tiles, so
	// in the same order, whichever block holds it, and blocks shrink with
	// the thread count (makePlan). The keys before a row's range
	// in the first tile are hidden as at any crossing edge.
	kBeg -= kBeg % c.bkv
	// Keys [allLo, allHi) are visible to every row of the block.
	sp.allLo, _ = c.keyRange(sg, il1)
	_, sp.allHi = c.keyRange(sg, sp.il0)
	if parts > 1 && kEnd > kBeg {
		nT := (kEnd - kBeg + c.bkv - 1) / c.bkv
		kBeg, kEnd = kBeg+part*nT/parts*c.bkv, min(kEnd, kBeg+(part+1)*nT/parts*c.bkv)
	}
	sp.kBeg, sp.kEnd = kBeg, kEnd
	return sp, nil
}

// foldTile folds the tile of keys from j0 (a tile of sp) into the block
// that beginTiles set up in ws.
func (e *Engine) foldTile(ws *workspace, c *task, sp *tileSpan, j0 int) error {
	b, hk, p0, np, sg := sp.b, sp.hk, sp.p0, sp.np, sp.sg
	rows, m := ws.blk.rows, c.math
	bc := min(c.bkv, sp.kEnd-j0)
	if c.gridTiles {
		// The tile's width is the grid's, whatever the block's last
		// visible key: the vector softmax assigns columns to its
		// partial sums by the width, so a row's bits must not depend
		// on which block holds it. Keys past the block's range are
		// hidden as at any crossing edge (and trimmed below).
		bc = min(c.bkv, sg.nk-j0)
	}
	if c.terms && maskHidesTile(c, b, hk, p0, np, j0, bc, sg) {
		return nil // a mask hides the whole tile: nothing to pack or compute
	}
	// Only a tile that the edge of some row's range crosses is masked
	// row by row; a tile inside every row's range is visible to all.
	whole := sp.allLo <= j0 && j0+bc <= sp.allHi
	if whole {
		if c.terms {
			for r := range rows {
				ws.lo[r], ws.vis[r] = 0, bc
			}
		}
	} else {
		vmax := 0
		for pi := range np {
			lo, hi := c.keyRange(sg, sp.il0+pi)
			lo, hi = min(bc, max(0, lo-j0)), min(bc, max(0, hi-j0))
			hi = max(hi, lo)
			vmax = max(vmax, hi)
			for r0 := 0; r0 < rows; r0 += np {
				ws.lo[r0+pi], ws.vis[r0+pi] = lo, hi
			}
		}
		if c.trim && vmax > 0 {
			// The keys past every row's range (the diagonal tile of a
			// causal block) are left out, in steps of trimStep keys.
			bc = min(bc, roundUp(vmax, trimStep))
		}
	}
	if err := m.scores(ws, c, j0, bc); err != nil {
		return err
	}
	if (c.mask.dtype != 0 || c.bmask.Data != nil || c.treeMasked) && !trimMasked(ws, c, b, hk, p0, np, j0, sg) {
		whole = false // keys a mask hides at the edge of a row's range are not read for it
	}
	if c.terms {
		applyTerms(ws, c, b, hk, p0, np, j0, ws.blk.ldS, sg)
	}
	if whole {
		return m.foldWhole(ws, c, j0, bc)
	}
	return m.foldCrossing(ws, c, j0, bc)
}

// gatherQ copies the query rows of the block of np positions from p0 of
// K/V head hk's group into ws.q: row r = hg·np + pi.
func gatherQ(ws *workspace, c *task, b, hk, p0, np int) {
	q, d, ld := &c.q, c.q.Dim, ws.blk.ld
	for hg := range c.group {
		h := hk*c.group + hg
		for pi := range np {
			r := hg*np + pi
			c.qIO.load(ws.q[r*ld:r*ld+d], q, q.Offset(b, h, p0+pi))
		}
	}
}

// finishBlock divides the accumulators of the block of np query positions
// from p0 by their sums, folds in the sinks, and writes the output rows and
// log-sum-exps.
func finishBlock(ws *workspace, c *task, b, hk, p0, np int) {
	q, d, g, ld := &c.q, c.dv, c.group, padRow(c.wsDim())
	out := &c.out
	for hg := range g {
		h := hk*g + hg
		sink := negInf
		if c.sinks != nil {
			sink = c.sinks[h]
		}
		for pi := range np {
			r := hg*np + pi
			off := out.Offset(b, h, p0+pi)
			orow := ws.o[r*ld : r*ld+d] // divided in place, then written to out
			if out.dtype == F32 {
				orow = out.f32[off:][:d]
			}
			// The log-sum-exp only where the call asks for it: a
			// logarithm a row is not free next to the row's last tile.
			lse := sink
			if z := ws.z[r]; z == 0 {
				clear(orow)
			} else if sink == negInf {
				kernel.Scale(orow, ws.o[r*ld:r*ld+d], 1/z)
				if c.lse != nil {
					lse = ws.m[r] + float32(math.Log(float64(z)))
				}
			} else {
				// The sink joins the denominator: with M = max(m, σ),
				// Z = z·e^{m−M} + e^{σ−M} and out = O·e^{m−M}/Z.
				m := ws.m[r]
				mm := max(m, sink)
				a := kernel.Exp(m - mm)
				zz := z*a + kernel.Exp(sink-mm)
				kernel.Scale(orow, ws.o[r*ld:r*ld+d], a/zz)
				if c.lse != nil {
					lse = mm + float32(math.Log(float64(zz)))
				}
			}
			if out.dtype != F32 {
				c.outIO.store(out, off, orow)
			}
			if c.lse != nil {
				c.lse[(b*q.Heads+h)*q.Seq+p0+pi] = lse
			}
		}
	}
}
