package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
)

const foldChunkDoc = `FoldChunkAMX folds a tile of cols keys into the online softmax of rows
query rows in bf16 precision, in one call: for rows i < rows,

	S = Q·Kᵀ                      (TDPBF16PS, unscaled)
	S[i][:lo[i]] = S[i][vis[i]:] = −Inf   (only with lo != nil)
	SoftmaxBF16AVX512 of S's row i into P's row, m[i], z[i], alpha[i]
	O[i] *= alpha[i] unless alpha[i] == 1
	O += P·V                      (TDPBF16PS)

the bits of QKTBF16 (scale 1), the −Inf edges, OnlineSoftmaxBF16,
ScaleRows and PVBF16 at the amx level. Sizes: rows >= 1, cols, d and
dv multiples of 32, leading dimensions in elements; lo and vis (int
slices of rows elements, or both nil) as FoldChunkBF16 says.

q is rows × d bfloat16 (the queries), kp the K pair panel (d/2 pair rows
of 2·cols), vp the V pair panel (cols/2 pair rows of 2·dv), o the rows ×
dv float32 accumulators. The rows are taken 16 at a time (a row tile);
the last tile reads q's rows and reads and writes o's rows up to the
next multiple of 16, whose values are scratch. s is two tiles of scores
(32 rows × cols, ldS; 16 rows when rows <= 16), p one tile of
probabilities (16 rows × cols, ldP).

Every tile is 16 rows × 64 bytes (one configuration, loaded once): C in
tmm0–3, A in tmm4, B in tmm5–7 in turn. The scores of row tile t+1 are
computed a block of 4 (or 2) key tiles at a time, and after each block
piece rows of tile t go through the softmax, so that the tile unit
computes the next products while the vector units take the exponentials
of the current ones; then tile t's P·V adds to its accumulators, each C
tile of o loaded once and stored once.`

// amxFoldConfig is the tile configuration of FoldChunkAMX: palette 1,
// every tile 16 rows × 64 bytes.
var amxFoldConfig Mem

func amxFoldData() {
	amxFoldConfig = GLOBL("amxfoldcfg", RODATA|NOPTR)
	DATA(0, U8(1))
	for t := range 8 {
		DATA(16+2*t, U16(64))
	}
	for t := range 8 {
		DATA(48+t, U8(16))
	}
	DATA(56, U64(0))
}

// Physical registers of the tile instructions' operands, written just
// before each one (the register allocator cannot see inside their bytes).
var (
	tBase   = R10
	tStride = R11
)

// Tile registers: C tiles 0–3, the A tile 4, the B tiles 5–7 in turn.
const tileAChunk = 4

func tileBChunk(i int) int { return 5 + i%3 }

// chunkGen holds the frame slots of FoldChunkAMX.
type chunkGen struct {
	ldQ, ldK, ldV, ldO, ldS, ldP Mem // leading dimensions in bytes
	kStep, vStep                 Mem // 16 pair rows of K and of V, in bytes
	dTiles, kvSteps              Mem // d/32 and cols/32: k steps of the two products
	blocks4, dv4, dv2            Mem // key blocks of 4; dv's column blocks of 4 and of 2
	keys2                        Mem // 1 when a block of 2 key tiles ends the key tiles
	piece                        Mem // rows of the current tile after each key block

	rowsLeft   Mem // rows from the next tile on
	curRows    Mem // rows of the current tile (0 before the first)
	nextRows   Mem // rows of the next tile (0 when none)
	curRow0    Mem // the current tile's first row
	qNext      Mem // Q at the next tile's first row
	sCur, sNxt Mem // the two score tiles
	oCur       Mem // O at the current tile's first row
	done       Mem // rows of the current tile through the softmax
	limit      Mem // softmax the current tile's rows up to here
	b4Left     Mem // key blocks of 4 left
	b2Left     Mem // a key block of 2 left
	kCol, sCol Mem // the next key block: K at its first key, S at its first column
	last       Mem // 1 once the key blocks are done
	seq        int
}

func (g *chunkGen) label(s string) string { g.seq++; return fmt.Sprintf("fc_%s_%d", s, g.seq) }

// tileAt emits a tile instruction on the tile at base+disp, stride in the
// frame slot ld.
func tileAt(base Register, disp int, ld Mem, op func(base, index GPPhysical)) {
	LEAQ(Mem{Base: base, Disp: disp}, tBase)
	MOVQ(ld, tStride)
	op(tBase, tStride)
}

// qkBlock emits the scores of n key tiles (n = 4 or 2) of the next row
// tile: C from zero, d/32 k steps, C stored into S at sCol.
func (g *chunkGen) qkBlock(n int) {
	Commentf("scores of %d key tiles of the next row tile", n)
	for i := range n {
		asmkit.TileZero(i)
	}
	qa, kb, kc := GP64(), GP64(), GP64()
	MOVQ(g.qNext, qa)
	MOVQ(g.kCol, kb)
	MOVQ(g.dTiles, kc)
	lK := g.label("qk")
	Label(lK)
	tileAt(qa, 0, g.ldQ, func(b, i GPPhysical) { asmkit.TileLoad(tileAChunk, b, i) })
	for i := range n {
		tileAt(kb, 64*i, g.ldK, func(b, x GPPhysical) { asmkit.TileLoad(tileBChunk(i), b, x) })
		asmkit.TDPBF16PS(i, tileAChunk, tileBChunk(i))
	}
	ADDQ(U8(64), qa)
	ADDQ(g.kStep, kb)
	DECQ(kc)
	JNZ(LabelRef(lK))
	sc := GP64()
	MOVQ(g.sCol, sc)
	for i := range n {
		tileAt(sc, 64*i, g.ldS, func(b, x GPPhysical) { asmkit.TileStore(b, x, i) })
	}
	ADDQ(U32(64*n), g.kCol) // n key tiles of 16 pairs' columns: 64n bytes of a pair row
	ADDQ(U32(64*n), g.sCol)
}

// pvBlock emits P·V into n column tiles (n = 4 or 2) of the current row
// tile's accumulators at oc: C loaded from O, cols/32 k steps, C stored.
func (g *chunkGen) pvBlock(n int, oc, vc Register) {
	Commentf("P·V into %d column tiles of the current row tile", n)
	for i := range n {
		tileAt(oc, 64*i, g.ldO, func(b, x GPPhysical) { asmkit.TileLoad(i, b, x) })
	}
	pa, vb, kc := GP64(), GP64(), GP64()
	Load(Param("p"), pa)
	MOVQ(vc, vb)
	MOVQ(g.kvSteps, kc)
	lK := g.label("pv")
	Label(lK)
	tileAt(pa, 0, g.ldP, func(b, x GPPhysical) { asmkit.TileLoad(tileAChunk, b, x) })
	for i := range n {
		tileAt(vb, 64*i, g.ldV, func(b, x GPPhysical) { asmkit.TileLoad(tileBChunk(i), b, x) })
		asmkit.TDPBF16PS(i, tileAChunk, tileBChunk(i))
	}
	ADDQ(U8(64), pa)
	ADDQ(g.vStep, vb)
	DECQ(kc)
	JNZ(LabelRef(lK))
	for i := range n {
		tileAt(oc, 64*i, g.ldO, func(b, x GPPhysical) { asmkit.TileStore(b, x, i) })
	}
}

// pv emits the current row tile's P·V over every column block of dv.
func (g *chunkGen) pv() {
	oc, vc, n := GP64(), GP64(), GP64()
	MOVQ(g.oCur, oc)
	Load(Param("vp"), vc)
	for _, blk := range []struct {
		n     int
		count Mem
	}{{4, g.dv4}, {2, g.dv2}} {
		lLoop, lDone := g.label("pvcols"), g.label("pvcolsdone")
		MOVQ(blk.count, n)
		Label(lLoop)
		TESTQ(n, n)
		JZ(LabelRef(lDone))
		g.pvBlock(blk.n, oc, vc)
		ADDQ(U32(64*blk.n), oc)
		ADDQ(U32(64*blk.n), vc)
		DECQ(n)
		JMP(LabelRef(lLoop))
		Label(lDone)
	}
}

// hideEdges emits, for the row whose scores are at sr, −Inf over the
// scores of keys [vis, cols) and [0, lo) (cols a multiple of 16).
func hideEdges(sr, lo, vis, cols Register, negInf VecVirtual) {
	j, r := GP64(), GP64()
	lVis, lVisDone, lLo, lLoTail, lDone := "fc_hide_vis", "fc_hide_visdone", "fc_hide_lo", "fc_hide_lotail", "fc_hide_done"
	// [vis, cols): the first vector from vis rounded down to 16, its lanes
	// before vis kept; whole vectors after it.
	MOVQ(vis, j)
	CMPQ(j, cols)
	JAE(LabelRef(lVisDone))
	MOVQ(j, r)
	ANDQ(U8(15), r)
	ANDQ(I8(-16), j)
	keep := mask16(r)
	KNOTW(keep, keep)
	VMOVUPS(negInf, keep, Mem{Base: sr, Index: j, Scale: 4})
	ADDQ(U8(16), j)
	Label(lVis)
	CMPQ(j, cols)
	JAE(LabelRef(lVisDone))
	VMOVUPS(negInf, Mem{Base: sr, Index: j, Scale: 4})
	ADDQ(U8(16), j)
	JMP(LabelRef(lVis))
	Label(lVisDone)
	// [0, lo): whole vectors, then the first lo mod 16 lanes of the next.
	XORQ(j, j)
	Label(lLo)
	MOVQ(j, r)
	ADDQ(U8(16), r)
	CMPQ(r, lo)
	JA(LabelRef(lLoTail))
	VMOVUPS(negInf, Mem{Base: sr, Index: j, Scale: 4})
	MOVQ(r, j)
	JMP(LabelRef(lLo))
	Label(lLoTail)
	MOVQ(lo, r)
	ANDQ(U8(15), r)
	JZ(LabelRef(lDone))
	part := mask16(r)
	VMOVUPS(negInf, part, Mem{Base: sr, Index: j, Scale: 4})
	Label(lDone)
}

func genFoldChunkAMX() {
	TEXT("FoldChunkAMX", NOSPLIT, "func(q *uint16, ldQ int, kp *uint16, ldK int, vp *uint16, ldV int, o *float32, ldO int, s *float32, ldS int, p *uint16, ldP int, rows, cols, d, dv, piece int, scale float32, m, z, alpha *float32, lo, vis *int)")
	Pragma("noescape")
	doc(foldChunkDoc)
	g := &chunkGen{}
	for _, slot := range []*Mem{&g.ldQ, &g.ldK, &g.ldV, &g.ldO, &g.ldS, &g.ldP, &g.kStep, &g.vStep, &g.dTiles, &g.kvSteps,
		&g.blocks4, &g.dv4, &g.dv2, &g.keys2, &g.piece, &g.rowsLeft, &g.curRows, &g.nextRows, &g.curRow0, &g.qNext,
		&g.sCur, &g.sNxt, &g.oCur, &g.done, &g.limit, &g.b4Left, &g.b2Left, &g.kCol, &g.sCol, &g.last} {
		*slot = AllocLocal(8)
	}

	Comment("One tile configuration for the call: every tile 16 rows × 64 bytes.")
	LEAQ(amxFoldConfig, tBase)
	asmkit.LdTileCfg(tBase)

	Comment("Leading dimensions in bytes, and the k steps.")
	t := GP64()
	for _, ld := range []struct {
		param string
		shift uint8
		slot  Mem
	}{{"ldQ", 1, g.ldQ}, {"ldK", 1, g.ldK}, {"ldV", 1, g.ldV}, {"ldO", 2, g.ldO}, {"ldS", 2, g.ldS}, {"ldP", 1, g.ldP}} {
		Load(Param(ld.param), t)
		SHLQ(U8(ld.shift), t)
		MOVQ(t, ld.slot)
	}
	MOVQ(g.ldK, t)
	SHLQ(U8(4), t)
	MOVQ(t, g.kStep)
	MOVQ(g.ldV, t)
	SHLQ(U8(4), t)
	MOVQ(t, g.vStep)
	Load(Param("d"), t)
	SHRQ(U8(5), t)
	MOVQ(t, g.dTiles)
	cols := GP64()
	Load(Param("cols"), cols)
	MOVQ(cols, t)
	SHRQ(U8(5), t)
	MOVQ(t, g.kvSteps)
	MOVQ(cols, t)
	SHRQ(U8(6), t)
	MOVQ(t, g.blocks4)
	MOVQ(cols, t)
	SHRQ(U8(5), t)
	ANDQ(U8(1), t)
	MOVQ(t, g.keys2)
	Load(Param("dv"), t)
	SHRQ(U8(6), t)
	MOVQ(t, g.dv4)
	Load(Param("dv"), t)
	SHRQ(U8(5), t)
	ANDQ(U8(1), t)
	MOVQ(t, g.dv2)
	Load(Param("piece"), t)
	MOVQ(t, g.piece)

	Comment("The softmax's constants (genSoftmaxBF16AVX512's).")
	scx := XMM()
	MOVSS(asmkit.ParamAddr("scale"), scx)
	sc := ZMM()
	VBROADCASTSS(scx, sc)
	negInf := broadcast512(cNegInf)
	log2e := broadcast512(cLog2e)
	vm := ZMM()
	e := newExp2t512(sc, vm, log2e)
	rem := GP64()
	MOVQ(cols, rem)
	ANDQ(U8(15), rem)
	tail := mask16(rem)
	full := GP64()
	MOVQ(cols, full)
	ANDQ(I32(-16), full)

	Comment("No current tile yet; the next is the first.")
	MOVQ(U32(0), g.curRows)
	MOVQ(I32(-16), g.curRow0)
	Load(Param("rows"), t)
	MOVQ(t, g.rowsLeft)
	CMPQ(t, U8(16))
	lMin := "fc_firstmin"
	JBE(LabelRef(lMin))
	MOVQ(U32(16), t)
	Label(lMin)
	MOVQ(t, g.nextRows)
	SUBQ(t, g.rowsLeft)
	Load(Param("q"), t)
	MOVQ(t, g.qNext)
	Load(Param("s"), t)
	MOVQ(t, g.sNxt)
	MOVQ(g.ldS, t)
	SHLQ(U8(4), t)
	ADDQ(g.sNxt, t)
	MOVQ(t, g.sCur)

	Label("fc_tile")
	Comment("A row tile: the next tile's scores, a key block at a time, each followed by piece rows of the current tile's softmax.")
	Load(Param("kp"), t)
	MOVQ(t, g.kCol)
	MOVQ(g.sNxt, t)
	MOVQ(t, g.sCol)
	MOVQ(g.blocks4, t)
	MOVQ(t, g.b4Left)
	MOVQ(g.keys2, t)
	MOVQ(t, g.b2Left)
	MOVQ(U32(0), g.done)
	MOVQ(U32(0), g.last)

	Label("fc_piece")
	CMPQ(g.b4Left, U8(0))
	JE(LabelRef("fc_piece2"))
	DECQ(g.b4Left)
	CMPQ(g.nextRows, U8(0))
	JE(LabelRef("fc_nopk4"))
	g.qkBlock(4)
	Label("fc_nopk4")
	JMP(LabelRef("fc_share"))
	Label("fc_piece2")
	CMPQ(g.b2Left, U8(0))
	JE(LabelRef("fc_final"))
	MOVQ(U32(0), g.b2Left)
	CMPQ(g.nextRows, U8(0))
	JE(LabelRef("fc_share"))
	g.qkBlock(2)
	Label("fc_share")
	// The current tile's rows up to done+piece (at most all of them).
	MOVQ(g.done, t)
	ADDQ(g.piece, t)
	CMPQ(t, g.curRows)
	JBE(LabelRef("fc_limit"))
	MOVQ(g.curRows, t)
	JMP(LabelRef("fc_limit"))
	Label("fc_final")
	MOVQ(U32(1), g.last)
	MOVQ(g.curRows, t)
	Label("fc_limit")
	MOVQ(t, g.limit)

	Label("fc_rowloop")
	MOVQ(g.done, t)
	CMPQ(t, g.limit)
	JAE(LabelRef("fc_rowsdone"))
	Comment("Row done of the current tile, row curRow0+done of the call.")
	sr, pr, mr, zr, ar := GP64(), GP64(), GP64(), GP64(), GP64()
	MOVQ(t, sr)
	IMULQ(g.ldS, sr)
	ADDQ(g.sCur, sr)
	MOVQ(t, pr)
	IMULQ(g.ldP, pr)
	ADDQ(asmkit.ParamAddr("p"), pr)
	ADDQ(g.curRow0, t) // the call's row
	Load(Param("m"), mr)
	LEAQ(Mem{Base: mr, Index: t, Scale: 4}, mr)
	Load(Param("z"), zr)
	LEAQ(Mem{Base: zr, Index: t, Scale: 4}, zr)
	Load(Param("alpha"), ar)
	LEAQ(Mem{Base: ar, Index: t, Scale: 4}, ar)
	lp := GP64()
	Load(Param("lo"), lp)
	TESTQ(lp, lp)
	JZ(LabelRef("fc_row"))
	lov, visv, cw := GP64(), GP64(), GP64()
	MOVQ(Mem{Base: lp, Index: t, Scale: 8}, lov)
	Load(Param("vis"), visv)
	MOVQ(Mem{Base: visv, Index: t, Scale: 8}, visv)
	Load(Param("cols"), cw)
	hideEdges(sr, lov, visv, cw, negInf)

	Label("fc_row")
	r := &softmaxRowBF16{prefix: "fc_", s: sr, p: pr, m: mr, z: zr, alpha: ar, scx: scx, sc: sc, negInf: negInf, log2e: log2e, vm: vm, e: e,
		rem: rem, tail: tail, full: full, x: GP64(), pp: GP64(), j: GP64()}
	r.code(true)
	Label("fc_slow_row")
	r.code(false)
	Label("fc_next")
	Comment("The row's accumulators times alpha, unless it is 1 (ScaleRows).")
	av := XMM()
	VMOVSS(Mem{Base: ar}, av)
	VUCOMISS(e.one.AsX(), av)
	JNE(LabelRef("fc_rescale"))
	JPS(LabelRef("fc_rescale"))
	JMP(LabelRef("fc_rowend"))
	Label("fc_rescale")
	za, or, n := ZMM(), GP64(), GP64()
	VBROADCASTSS(av, za)
	MOVQ(g.done, or)
	IMULQ(g.ldO, or)
	ADDQ(g.oCur, or)
	Load(Param("dv"), n)
	SHRQ(U8(4), n)
	Label("fc_rescale_vec")
	zt := ZMM()
	VMULPS(Mem{Base: or}, za, zt)
	VMOVUPS(zt, Mem{Base: or})
	ADDQ(U8(64), or)
	DECQ(n)
	JNZ(LabelRef("fc_rescale_vec"))
	Label("fc_rowend")
	INCQ(g.done)
	JMP(LabelRef("fc_rowloop"))

	Label("fc_rowsdone")
	CMPQ(g.last, U8(0))
	JE(LabelRef("fc_piece"))
	Comment("The current tile's P·V, then the next tile becomes the current one.")
	CMPQ(g.curRows, U8(0))
	JE(LabelRef("fc_advance"))
	g.pv()
	Label("fc_advance")
	MOVQ(g.nextRows, t)
	TESTQ(t, t)
	JZ(LabelRef("fc_end"))
	MOVQ(t, g.curRows)
	ADDQ(U8(16), g.curRow0)
	MOVQ(g.curRow0, t)
	IMULQ(g.ldO, t)
	ADDQ(asmkit.ParamAddr("o"), t)
	MOVQ(t, g.oCur)
	MOVQ(g.sCur, t)
	u := GP64()
	MOVQ(g.sNxt, u)
	MOVQ(t, g.sNxt)
	MOVQ(u, g.sCur)
	MOVQ(g.ldQ, t)
	SHLQ(U8(4), t)
	ADDQ(t, g.qNext)
	MOVQ(g.rowsLeft, t)
	CMPQ(t, U8(16))
	JBE(LabelRef("fc_nextmin"))
	MOVQ(U32(16), t)
	Label("fc_nextmin")
	MOVQ(t, g.nextRows)
	SUBQ(t, g.rowsLeft)
	JMP(LabelRef("fc_tile"))

	Label("fc_end")
	asmkit.TileRelease()
	VZEROUPPER()
	RET()
}
