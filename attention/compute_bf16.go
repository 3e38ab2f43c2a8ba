package attention

import (
	"math"
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel"
)

// bf16Math computes the products with bfloat16 operands and float32
// accumulation (Precision BFloat16; docs/math.md has the error model):
//
//	Q̃ = bf16(Q) once per block;  K̃, Ṽ = bf16(K), bf16(V) per tile
//	S = Q̃·K̃ᵀ in float32;  online softmax in float32;  P̃ = bf16(P)
//	O = α·O + P̃·Ṽ in float32
//
// The row sums z add P before rounding, as the float32 path does. K and V
// of any storage type are packed into the pair panels of kernel.QKTBF16
// and kernel.PVBF16 (rounding float32, fp16 and dequantised q8 values);
// bfloat16 K and V are exact there. A call of few rows (readsRows) never
// gets here: it is computed in float32.
type bf16Math struct{}

// bf16Strides returns the leading dimensions of the bf16 scratch of a
// block of cols keys and head dim d: the queries (rows of 64 bytes or
// more), the K pair panel (cols rounded up to 16 keys), the probabilities
// and the V pair panel (d rounded up to 16 columns). The last three are
// padded by one cache line (panelPad): the tile products read 16 rows of
// a tile 64 bytes each, and at a stride that is a multiple of 1 KiB (256
// keys, d = 128) those rows crowd into a few sets of the L1 cache.
func bf16Strides(cols, d, dv int) (ldQ, ldK, ldP, ldV int) {
	return roundUp(d, 32), 2*roundUp(cols, 16) + panelPad, roundUp(cols, 32) + panelPad, 2*roundUp(dv, 16) + panelPad
}

// panelPad is the padding of the bf16 panels' rows: 32 bfloat16s, 64 bytes.
const panelPad = 32

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// alignedBF16 returns n zeroed bfloat16s starting on a 64-byte boundary.
func alignedBF16(n int) []fp16.BFloat16 {
	buf := make([]fp16.BFloat16, n+31)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(buf))) % 64 / 2)
	return buf[off : off+n : off+n]
}

func (bf16Math) loadQ(ws *workspace, c *task, b, hk, p0, np int) {
	bl := &ws.blk
	d, ld := bl.d, bl.ld
	ldQ, _, _, _ := bf16Strides(bl.ldS, d, bl.dv)
	// The arguments fit the workspace by construction.
	if c.q.dtype != F32 {
		gatherQ(ws, c, b, hk, p0, np)
		_ = kernel.RoundRowsBF16(ws.qb, ldQ, ws.q, ld, bl.rows, d)
	} else {
		// The packed products read only the rounded queries: round them
		// straight from Q, row r = hi·np + pi as gatherQ lays them out.
		// One call a query head, its np positions SeqStride apart (row by
		// row where the view's rows overlap, or np = 1 with any stride).
		q := &c.q
		for g := range c.group {
			h := hk*c.group + g
			if q.SeqStride >= d {
				_ = kernel.RoundRowsBF16(ws.qb[g*np*ldQ:], ldQ, q.f32[q.Offset(b, h, p0):], q.SeqStride, np, d)
				continue
			}
			for pi := range np {
				_ = kernel.RoundRowsBF16(ws.qb[(g*np+pi)*ldQ:], ldQ, q.f32[q.Offset(b, h, p0+pi):], d, 1, d)
			}
		}
	}
	if d%2 == 1 {
		for r := range bl.rows {
			ws.qb[r*ldQ+d] = 0 // the zero partner of the last component
		}
	}
}

func (bf16Math) scores(ws *workspace, c *task, j0, bc int) error {
	bl := &ws.blk
	src := &bl.src
	ldQ, ldK, _, _ := bf16Strides(bl.ldS, bl.d, bl.dv)
	kp := ws.kp
	if bl.preK != nil {
		kp, ldK = bl.preK[2*j0:], c.pre.ldK // packed once for the call
	} else {
		for j := j0; j < j0+bc; {
			r := src.run(j, j0+bc)
			if err := src.kOps.packKPairs(ws.kp[2*(j-j0):], ldK, src.k, src.hk, r.kOff, r.n, bl.d); err != nil {
				return err
			}
			j += r.n
		}
	}
	// The softmax applies the scale as it reads the scores (the same
	// multiplication, so the same bits), which saves the AMX product its
	// pass over the tile. The per-element terms need scaled scores, and
	// foldCrossing's −Inf for hidden keys stays −Inf only under a positive
	// finite scale: otherwise the product applies it.
	bl.scaled = c.terms || !(c.scale > 0 && c.scale <= math.MaxFloat32)
	// Chunked (the plan's choice: without per-element terms nothing reads
	// the whole tile's scores between the product and the softmax), the
	// fold computes them chunk by chunk (foldTile).
	if c.chunked {
		bl.kp, bl.ldK = kp, ldK
		return nil
	}
	return kernel.QKTBF16(ws.s, bl.ldS, ws.qb, ldQ, kp, ldK, bl.rows, bc, bl.d+bl.d%2, productScale(c, bl))
}

// fuseRows is the number of rows of a chunk of foldTile: four AMX row
// tiles, whose scores (64 KiB with 256 keys) and probabilities stay in
// the core's L2 cache, mostly in L1, between the product that writes them
// and the next that reads them. On the 16-core Xeon (P1 and P3 in bf16,
// one thread, 2026-11-27) 64 rows were 0–25 % faster than 32 and 10–45 %
// faster than the unfused fold's 256.
var fuseRows = 64

// foldTile folds a tile of bc keys from key j0 into the block: −Inf for
// the keys outside each row's range (crossing), softmax, P·V. Chunked
// (c.chunked) it takes the rows fuseRows at a time and computes each chunk's
// scores first, so that a chunk's scores and probabilities are written
// and read again while cached, in the first rows of ws.s and ws.pb; row
// by row that is what one pass over every row computes, in the same
// order: the same bits. A crossing tile whose values are not all finite
// goes through pvHidingNonFinite; a whole tile's values are all read,
// finite or not, as in float32 (see Options).
func foldTile(ws *workspace, c *task, j0, bc int, crossing bool) error {
	bl := &ws.blk
	vp, ldV, finite, err := valuesBF16(ws, c, j0, bc)
	if err != nil {
		return err
	}
	ldQ, _, ldP, _ := bf16Strides(bl.ldS, bl.d, bl.dv)
	d, ld := bl.d, bl.ld
	if c.chunkFused && bc%32 == 0 && !bl.scaled && (!crossing || finite) {
		// One kernel for the whole block (the level's fused chunk: the
		// same bits as the steps below).
		var lo, vis []int
		if crossing {
			lo, vis = ws.lo[:bl.rows], ws.vis[:bl.rows]
		}
		return kernel.FoldChunkBF16(ws.o, ld, ws.qb, ldQ, bl.kp, bl.ldK, vp, ldV, ws.s, bl.ldS, ws.pb, ldP,
			bl.rows, bc, d, bl.dv, c.scale, ws.m, ws.z, ws.alpha, lo, vis)
	}
	step := bl.rows
	if c.chunked {
		step = fuseRows
	}
	for r0 := 0; r0 < bl.rows; r0 += step {
		nr := min(step, bl.rows-r0)
		if c.chunked {
			if err := kernel.QKTBF16(ws.s, bl.ldS, ws.qb[r0*ldQ:], ldQ, bl.kp, bl.ldK, nr, bc, d+d%2, productScale(c, bl)); err != nil {
				return err
			}
		}
		if crossing {
			hideEdges(ws, r0, nr, bc)
		}
		if err := softmaxBF16(ws, c, r0, nr, bc); err != nil {
			return err
		}
		if crossing && !finite {
			if err := pvHidingNonFinite(ws, r0, nr, vp, ldV, bc); err != nil {
				return err
			}
			continue
		}
		if err := kernel.PVBF16(ws.o[r0*ld:], ld, ws.pb, ldP, vp, ldV, nr, bc+bc%2, bl.dv); err != nil {
			return err
		}
	}
	return nil
}

// productScale is the scale QKTBF16 applies: the call's when the scores
// must hold scaled values (bl.scaled), else 1 and the softmax applies it.
func productScale(c *task, bl *block) float32 {
	if bl.scaled {
		return c.scale
	}
	return 1
}

// hideEdges sets to −Inf the scores of the keys outside each row's range,
// so that their probabilities are exactly 0: rows [r0, r0+nr) of the
// block, whose scores are the first nr rows of ws.s.
func hideEdges(ws *workspace, r0, nr, bc int) {
	for r := range nr {
		row := ws.s[r*ws.blk.ldS:][:bc]
		lo, hi := ws.lo[r0+r], ws.vis[r0+r]
		for j := range lo {
			row[j] = negInf
		}
		for j := hi; j < bc; j++ {
			row[j] = negInf
		}
	}
}

func (bf16Math) foldWhole(ws *workspace, c *task, j0, bc int) error {
	return foldTile(ws, c, j0, bc, false)
}

// foldCrossing hides the keys outside each row's range by a −Inf score, so
// that their probabilities are exactly 0, and multiplies the whole tile.
// 0 times a finite value adds nothing; if the tile holds a value that is
// not finite, the rows are multiplied over their own ranges only, so that
// such a value never reaches a row that cannot see it (as in float32).
func (bf16Math) foldCrossing(ws *workspace, c *task, j0, bc int) error {
	return foldTile(ws, c, j0, bc, true)
}

// pvHidingNonFinite adds P·V to the rows [r0, r0+nr) of the block's
// accumulators for a crossing tile of bc keys whose V panel vp holds a
// NaN or ±Inf, without letting such a value reach a row that does not see
// its key. The product runs over a copy of the panel whose non-finite
// keys are zeroed (ws.vc), so that a row that sees none of them gets
// exactly the bits it would get had those values been zeros (as with a
// runtime's zeroed padding: the same kernel, the same operands); then each
// row adds p·v for the non-finite keys inside its own range, which makes
// it NaN or infinite as float arithmetic says. The probabilities are the
// first nr rows of ws.pb, the rows' ranges ws.lo and ws.vis from r0.
func pvHidingNonFinite(ws *workspace, r0, nr int, vp []fp16.BFloat16, ldV, bc int) error {
	bl := &ws.blk
	_, _, ldP, _ := bf16Strides(bl.ldS, bl.d, bl.dv)
	d, ld := bl.dv, bl.ld
	pairs := (bc + 1) / 2
	vc := ws.vc[:pairs*ldV]
	copy(vc, vp[:pairs*ldV])
	bad := func(j int) bool {
		for c := range d {
			if vp[(j/2)*ldV+2*c+j%2]&0x7f80 == 0x7f80 {
				return true
			}
		}
		return false
	}
	for j := range bc {
		if bad(j) {
			for c := range d {
				vc[(j/2)*ldV+2*c+j%2] = 0
			}
		}
	}
	o := ws.o[r0*ld:]
	if err := kernel.PVBF16(o, ld, ws.pb, ldP, vc, ldV, nr, bc+bc%2, d); err != nil {
		return err
	}
	for j := range bc {
		if !bad(j) {
			continue
		}
		v := vp[(j/2)*ldV+j%2:]
		for r := range nr {
			if j < ws.lo[r0+r] || j >= ws.vis[r0+r] {
				continue
			}
			pj := ws.pb[r*ldP+j].Float32()
			or := o[r*ld:][:d]
			for k := range or {
				or[k] += pj * v[2*k].Float32()
			}
		}
	}
	return nil
}

// valuesBF16 returns the V pair panel of keys [j0, j0+bc), its leading
// dimension, and whether the tile's values are all finite: a view of the
// panel packed once for the call where the tile starts a pair row (a
// window can start tiles anywhere), or the tile packed now.
func valuesBF16(ws *workspace, c *task, j0, bc int) ([]fp16.BFloat16, int, bool, error) {
	bl := &ws.blk
	if bl.preV != nil && j0%2 == 0 {
		// An odd tile's partner row in the panel is the next key (or the
		// zero row after the last): its probability is 0, which is
		// harmless only if its values are finite.
		bad, nk := bl.preBad, len(bl.preBad)-1
		if bc%2 == 0 || j0+bc == nk || bad[j0+bc+1] == bad[j0+bc] {
			return bl.preV[(j0/2)*c.pre.ldV:], c.pre.ldV, bad[j0+bc] == bad[j0], nil
		}
	}
	finite, err := packVPairsTile(ws, j0, bc)
	_, _, _, ldV := bf16Strides(bl.ldS, bl.d, bl.dv)
	return ws.vp, ldV, finite, err
}

// softmaxBF16 folds the scores of rows [r0, r0+nr) of the block (the first
// nr rows of ws.s) into their running maxima and sums, writes their
// probabilities rounded to bfloat16 into the first nr rows of ws.pb (with
// a zero partner after an odd last key) and rescales their accumulators.
func softmaxBF16(ws *workspace, c *task, r0, nr, bc int) error {
	bl := &ws.blk
	scale := c.scale
	if bl.scaled {
		scale = 1
	}
	_, _, ldP, _ := bf16Strides(bl.ldS, bl.d, bl.dv)
	m, z, alpha := ws.m[r0:r0+nr], ws.z[r0:r0+nr], ws.alpha[r0:r0+nr]
	if err := kernel.OnlineSoftmaxBF16(ws.s, bl.ldS, ws.pb, ldP, nr, bc, scale, m, z, alpha); err != nil {
		return err
	}
	if bc%2 == 1 {
		for r := range nr {
			ws.pb[r*ldP+bc] = 0
		}
	}
	return kernel.ScaleRows(ws.o[r0*bl.ld:], bl.ld, alpha, nr, bl.dv)
}

// packVPairsTile packs the values of keys [j0, j0+bc) into the V pair
// panel ws.vp, run by run, and reports whether all of them are finite. A
// run that starts at an odd key shares its first pair row with the run
// before: its first key is written into the odd slots one by one.
func packVPairsTile(ws *workspace, j0, bc int) (bool, error) {
	bl := &ws.blk
	src := &bl.src
	_, _, _, ldV := bf16Strides(bl.ldS, bl.d, bl.dv)
	all := true
	for j := j0; j < j0+bc; {
		r := src.run(j, j0+bc)
		off, n := r.vOff, r.n
		if t := j - j0; t%2 == 1 {
			if err := src.vOps.packV(ws.v, bl.ld, src.v, src.hk, off, 1, bl.dv); err != nil {
				return false, err
			}
			dst := ws.vp[(t/2)*ldV+1:]
			for k, x := range ws.v[:bl.dv] {
				b := kernel.RoundBF16(x)
				all = all && b&0x7f80 != 0x7f80
				dst[2*k] = b
			}
			j, off, n = j+1, off+src.v.SeqStride, n-1
			if n == 0 {
				continue
			}
		}
		finite, err := src.vOps.packVPairs(ws.vp[((j-j0)/2)*ldV:], ldV, src.v, src.hk, off, n, bl.dv)
		if err != nil {
			return false, err
		}
		all = all && finite
		j += n
	}
	return all, nil
}
