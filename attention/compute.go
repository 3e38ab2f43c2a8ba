package attention

import (
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel"
)

// The second seam of the tile loop: how a tile's products are computed. A
// compute path gathers a block's queries once, then per K/V tile computes
// the scores and folds the tile into the accumulators; the tile loop
// (foldTiles) decides which tiles, and which keys of a tile each row sees.
// f32Math is the float32 FMA kernels (Precision Float32, the default) and
// bf16Math the bfloat16 ones (Precision BFloat16); a new arithmetic is a
// new implementation of tileMath, not new branches in the loop.
type tileMath interface {
	// loadQ gathers the query rows of the block of np positions from p0
	// of K/V head hk's group (ws.blk holds the block's geometry).
	loadQ(ws *workspace, c *task, b, hk, p0, np int)
	// scores writes the tile's scores scale·Q·Kᵀ for keys [j0, j0+bc) of
	// ws.blk.src into ws.s.
	scores(ws *workspace, c *task, j0, bc int) error
	// foldWhole folds a tile of scores that every row sees entirely:
	// online softmax, rescale of the accumulators, P·V.
	foldWhole(ws *workspace, c *task, j0, bc int) error
	// foldCrossing folds a tile that the edge of some row's range crosses:
	// row r sees keys [ws.lo[r], ws.vis[r]) of it and no other.
	foldCrossing(ws *workspace, c *task, j0, bc int) error
}

// block is the geometry of the block of query rows being folded and the
// source of its keys.
type block struct {
	rows, np, d int      // rows = group × np query positions; d the head dim of q and k
	dv          int      // the head dim of v and of the output
	ld, ldS     int      // row strides of ws.q and ws.o, and of ws.s
	src         kvSource // where the block's K/V rows lie
	scaled      bool     // bf16Math: ws.s holds scale·Q·Kᵀ (else Q·Kᵀ, scaled by the softmax)
	offTile     int      // j0+1 when ws.off holds the K row offsets of the tile at j0 (scoresInPlace), else 0

	// bf16Math, chunked: the product of the tile is left to the fold,
	// which computes it chunk by chunk from the K pair panel kp.
	kp  []fp16.BFloat16
	ldK int

	// bf16Math with c.pre: the whole sequence's pair panels and the
	// finiteness of each V tile.
	preK, preV []fp16.BFloat16
	preBad     []int32 // prefix counts of non-finite V rows (prepack.bad)

	// f32Math with c.pre packed for float32: the sequence's transposed K
	// (whole, leading dimension c.pre.ldKF, for a PackedPrefix; tile by
	// tile, c.pre.tileKF a tile, for a prefill) and V rows (leading
	// dimension c.pre.ldVF; nil where they are read in place).
	preKT, preVF []float32
	ldVF         int

	// f32Math with c.fold: the current tile's transposed K panel and its
	// leading dimension, whose product the fold computes (scores leaves
	// ws.s unwritten).
	kt   []float32
	ldKT int
}

// f32Math computes in float32: K and V are converted (exactly, or
// dequantised) to float32 and every product is a float32 FMA.
type f32Math struct{}

func (f32Math) loadQ(ws *workspace, c *task, b, hk, p0, np int) {
	gatherQ(ws, c, b, hk, p0, np)
	if c.q8Query {
		bl := &ws.blk
		_ = ws.q8.Set(ws.q, bl.ld, bl.rows, bl.d) // sizes of the block: cannot fail
	}
}

// scores reads the K rows where they lie with the row kernels when the
// call has few rows (c.direct: decode, a few draft tokens); otherwise it
// packs them into the transposed panel that QKT reuses across many rows.
func (f32Math) scores(ws *workspace, c *task, j0, bc int) error {
	bl := &ws.blk
	src := &bl.src
	if c.q8Query {
		// Integer products of the Q8 query rows with the Q8 keys where
		// they lie, whatever the number of rows: there is no float32
		// panel to reuse.
		k := src.k
		if c.gather {
			return kernel.QKRowsQ8DotGather(ws.s, bl.ldS, &ws.q8, k.i8, k.q8s, keyOffsets(ws, j0, bc), bc, c.scale)
		}
		off := src.keyRow(j0)
		return kernel.QKRowsQ8Dot(ws.s, bl.ldS, &ws.q8, k.i8[off:], k.q8s[off/Q8Block:], k.SeqStride, bc, c.scale)
	}
	if c.direct {
		return scoresInPlace(ws, c, j0, bc)
	}
	// Packed once for many calls (the same float32 values, read with the
	// panel's leading dimension), or packed here.
	bl.kt, bl.ldKT = ws.kt, bl.ldS
	switch {
	case bl.preKT != nil && c.pre.tileKF > 0:
		bl.kt = bl.preKT[j0/c.bkv*c.pre.tileKF:] // tiles start on multiples of c.bkv
	case bl.preKT != nil:
		bl.kt, bl.ldKT = bl.preKT[j0:], c.pre.ldKF
	default:
		for j := j0; j < j0+bc; {
			r := src.run(j, j0+bc)
			if err := src.kOps.packK(ws.kt[j-j0:], bl.ldS, src.k, src.hk, r.kOff, r.n, bl.d); err != nil {
				return err
			}
			j += r.n
		}
	}
	if c.fold {
		return nil // the fold computes the product (foldWhole, foldCrossing)
	}
	return tileScores(ws, c, bc)
}

// tileScores writes the scores of the tile of bc keys whose K panel
// scores left in bl.kt into ws.s.
func tileScores(ws *workspace, c *task, bc int) error {
	bl := &ws.blk
	return kernel.QKT(ws.s, bl.ldS, ws.q, bl.ld, bl.kt, bl.ldKT, bl.rows, bc, bl.d, c.scale)
}

func (f32Math) foldWhole(ws *workspace, c *task, j0, bc int) error {
	bl := &ws.blk
	if c.direct {
		// P·V from the V rows where they lie.
		if err := softmaxWholeTile(ws, bl.rows, bc, bl.dv, bl.ld, bl.ldS); err != nil {
			return err
		}
		return valuesInPlace(ws, c, j0, bc)
	}
	vt, ldV, err := valuesF32(ws, j0, bc)
	if err != nil {
		return err
	}
	if c.fold {
		return kernel.FoldTile(ws.o, bl.ld, ws.q, bl.ld, bl.kt, bl.ldKT, vt, ldV, bl.rows, bc, bl.d, bl.dv, c.scale, ws.m, ws.z, ws.alpha, nil)
	}
	return foldWholeTile(ws, bl.rows, bc, bl.dv, bl.ld, bl.ldS, vt, ldV)
}

func (f32Math) foldCrossing(ws *workspace, c *task, j0, bc int) error {
	bl := &ws.blk
	vt, ldV, err := valuesF32(ws, j0, bc)
	if err != nil {
		return err
	}
	if c.fold {
		if n := foldsFromFirst(ws); n > 0 && finiteRows(vt, ldV, n, bl.dv) {
			// Every row sees keys [0, vis[r]) of the tile: FoldTile's
			// crossing tile, over the keys some row sees.
			return kernel.FoldTile(ws.o, bl.ld, ws.q, bl.ld, bl.kt, bl.ldKT, vt, ldV, bl.rows, n, bl.d, bl.dv, c.scale, ws.m, ws.z, ws.alpha, ws.vis[:bl.rows])
		}
		if err := tileScores(ws, c, bc); err != nil {
			return err
		}
	}
	return foldCrossingTile(ws, bl.rows, bl.dv, bl.ld, bl.ldS, vt, ldV)
}

// foldsFromFirst returns the keys that some row of the block sees in the
// current crossing tile if every row sees keys from the tile's first on
// (ws.lo[r] = 0, or none: a row that sees none gets ws.vis[r] = 0, which
// foldCrossingTile reads the same way), else 0.
func foldsFromFirst(ws *workspace) int {
	n := 0
	for r := range ws.blk.rows {
		switch lo, hi := ws.lo[r], ws.vis[r]; {
		case hi <= lo:
			ws.vis[r] = 0
		case lo > 0:
			return 0
		default:
			n = max(n, hi)
		}
	}
	return n
}

// valuesF32 returns the float32 V tile of keys [j0, j0+bc) and its leading
// dimension. Float32 values whose rows are consecutive and contiguous are
// read where they lie. Others are copied or converted into the panel once
// per tile: P·V re-reads the tile for every strip of rows, and rows a power
// of two apart (4 KiB in the [batch, seq, heads, dim] layout of an 8-head
// K/V) would all fall into the same few L1 sets.
func valuesF32(ws *workspace, j0, bc int) ([]float32, int, error) {
	bl := &ws.blk
	src := &bl.src
	if bl.preVF != nil {
		return bl.preVF[j0*bl.ldVF:], bl.ldVF, nil // packed once for the call, or for many
	}
	if r := src.run(j0, j0+bc); src.v.dtype == F32 && r.n == bc && src.v.SeqStride == bl.dv {
		return src.v.f32[r.vOff:], bl.dv, nil
	}
	for j := j0; j < j0+bc; {
		r := src.run(j, j0+bc)
		if err := src.vOps.packV(ws.v[(j-j0)*bl.ld:], bl.ld, src.v, src.hk, r.vOff, r.n, bl.dv); err != nil {
			return nil, 0, err
		}
		j += r.n
	}
	return ws.v, bl.ld, nil
}

// gatherAhead is how many keys after a tile a paged tile's offset table
// also holds: the gathering kernels prefetch the rows of the keys the
// table lists after the tile, up to their own distance (64 keys).
const gatherAhead = 64

// scoresInPlace writes the scores of the block's query rows against the
// keys of tile [j0, j0+bc), reading the K rows where they lie: through the
// block table in one gathering call (kernel.QKRowsGather) for a paged
// pool, which prefetches the rows of the keys after the tile through the
// table too, else in one call over the tile's rows, SeqStride apart.
func scoresInPlace(ws *workspace, c *task, j0, bc int) error {
	bl := &ws.blk
	src := &bl.src
	if c.gather {
		return src.kOps.qkGather(ws.s, bl.ldS, ws.q, bl.ld, src.k, src.hk, keyOffsets(ws, j0, bc), bl.rows, bc, bl.d, c.scale)
	}
	return src.kOps.qkDirect(ws.s, bl.ldS, ws.q, bl.ld, src.k, src.hk, src.keyRow(j0), bc, bl.rows, bl.d, c.scale)
}

// valuesInPlace adds the block's probabilities of tile [j0, j0+bc) times
// the V rows, read where they lie, to the accumulators, as scoresInPlace
// reads the K rows.
func valuesInPlace(ws *workspace, c *task, j0, bc int) error {
	bl := &ws.blk
	src := &bl.src
	if c.gather {
		return src.vOps.pvGather(ws.o, bl.ld, ws.s, bl.ldS, src.v, src.hk, valueOffsets(ws, j0, bc), bl.rows, bc, bl.dv)
	}
	return src.vOps.pvDirect(ws.o, bl.ld, ws.s, bl.ldS, src.v, src.hk, src.valueRow(j0), bc, bl.rows, bl.dv)
}

// keyOffsets fills ws.off with the element offsets of the K rows of tile
// [j0, j0+bc) of a paged source and of the gatherAhead keys after it (the
// gathering kernels' prefetch targets), and returns them.
func keyOffsets(ws *workspace, j0, bc int) []int {
	bl := &ws.blk
	off := ws.off[:bc+gatherAhead]
	bl.src.offsets(off, bl.src.k, j0)
	bl.offTile = j0 + 1
	return off
}

// valueOffsets is keyOffsets for the V rows: the K rows' table again where
// the tile's scores left it there and V's rows lie where K's do.
func valueOffsets(ws *workspace, j0, bc int) []int {
	bl := &ws.blk
	off := ws.off[:bc+gatherAhead]
	if bl.offTile != j0+1 || !sameRows(bl.src.k, bl.src.v) {
		bl.src.offsets(off, bl.src.v, j0)
		bl.offTile = 0
	}
	return off
}

// sameRows reports whether the rows of k and v lie at the same offsets of
// their tensors (the same strides), so that a tile's K row offsets are its
// V row offsets too.
func sameRows(k, v *Tensor) bool {
	return k.BatchStride == v.BatchStride && k.HeadStride == v.HeadStride && k.SeqStride == v.SeqStride
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
// crosses: row r sees the tile's keys [ws.lo[r], ws.vis[r]). Each row's
// softmax takes its own range; the probabilities of the keys outside it are
// set to 0 and, when every value of the tile is finite, one P·V over the
// whole tile serves all rows, as for a whole tile. So a row's sums run over
// the same keys in the same order whichever rows share its block, and the
// block, which shrinks as threads are added (makePlan), cannot
// change a bit (0·v adds nothing). If the tile holds a value that is not
// finite, each row multiplies its own range only, so that such a value
// never reaches a row that cannot see it (0·NaN would).
func foldCrossingTile(ws *workspace, rows, d, ld, ldS int, vt []float32, ldV int) error {
	bc := 0
	for r := range rows {
		bc = max(bc, ws.vis[r])
	}
	for r := range rows {
		lo, hi := ws.lo[r], ws.vis[r]
		ws.alpha[r] = 1
		row := ws.s[r*ldS:]
		if hi > lo {
			if err := kernel.OnlineSoftmax(row[lo:], ldS, 1, hi-lo, ws.m[r:], ws.z[r:], ws.alpha[r:]); err != nil {
				return err
			}
		} else {
			lo, hi = 0, 0
		}
		clear(row[:lo])
		clear(row[hi:bc])
	}
	if err := kernel.ScaleRows(ws.o, ld, ws.alpha, rows, d); err != nil {
		return err
	}
	if bc == 0 {
		return nil
	}
	if finiteRows(vt, ldV, bc, d) {
		return kernel.PV(ws.o, ld, ws.s, ldS, vt, ldV, rows, bc, d)
	}
	for r := range rows {
		if err := rowPV(ws, r, ws.lo[r], ws.vis[r], d, ld, ldS, vt, ldV); err != nil {
			return err
		}
	}
	return nil
}

// finiteRows reports whether the n rows of d values of v (ld apart) are
// all finite.
func finiteRows(v []float32, ld, n, d int) bool {
	for j := range n {
		// x − x is 0 for a finite x, NaN for ±Inf and NaN; four sums,
		// so that each add waits for the one four elements back only.
		var a0, a1, a2, a3 float32
		row := v[j*ld:][:d]
		k := 0
		for ; k+4 <= d; k += 4 {
			x := row[k : k+4 : k+4]
			a0 += x[0] - x[0]
			a1 += x[1] - x[1]
			a2 += x[2] - x[2]
			a3 += x[3] - x[3]
		}
		for _, x := range row[k:] {
			a0 += x - x
		}
		if a0+a1+a2+a3 != 0 {
			return false
		}
	}
	return true
}

// rowPV accumulates keys [lo, hi) of the tile into output row r.
func rowPV(ws *workspace, r, lo, hi, d, ld, ldS int, vt []float32, ldV int) error {
	if hi <= lo {
		return nil
	}
	return kernel.PV(ws.o[r*ld:], ld, ws.s[r*ldS+lo:], ldS, vt[lo*ldV:], ldV, 1, hi-lo, d)
}
