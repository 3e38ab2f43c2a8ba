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
dv float32 accumulators. The rows are taken 32 at a time, a pair of row
tiles of 16 (the last pair may have one); the last tile reads q's rows
and reads and writes o's rows up to the next multiple of 16, whose
values are scratch. s holds two pairs of scores (up to 64 rows × cols,
ldS), p one pair of probabilities (up to 32 rows × cols, ldP).

Every tile is 16 rows × 64 bytes (one configuration, loaded once); the
products are 2 × 2 blocks of C tiles (AmxTiles's: C in tmm0–3, A in
tmm4–5, B in tmm6–7). The next pair's scores are computed a pair of key
tiles at a time, and after each such block piece rows of the current
pair go through the softmax, so that the tile unit computes the next
products while the vector units take the exponentials of the current
ones; then the current pair's P·V adds to its accumulators, each C tile
of o loaded once and stored once.`

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

// Tile registers of a 2 × 2 block (AmxTiles's): C tile (r, c) in tmm
// 2r+c, the A tiles of the row tiles in tmm4–5, the B tiles of the
// column tiles in tmm6–7.
func chunkC(r, c int) int { return 2*r + c }
func chunkA(r int) int    { return 4 + r }
func chunkB(c int) int    { return 6 + c }

// chunkGen holds the frame slots of FoldChunkAMX.
type chunkGen struct {
	ldQ, ldK, ldV, ldO, ldS, ldP Mem // leading dimensions in bytes
	qTile, oTile, sTile, pTile   Mem // 16 rows of Q, O, S and P in bytes: from a row tile to the next
	kStep, vStep                 Mem // 16 pair rows of K and of V, in bytes
	dTiles, kvSteps              Mem // d/32 and cols/32: k steps of the two products
	kBlocks, dvBlocks            Mem // key tile pairs (cols/32), dv's column tile pairs (dv/32)
	piece                        Mem // rows of the current pair after each key block

	rowsLeft   Mem // rows from the next pair on
	curRows    Mem // rows of the current pair (0 before the first)
	nextRows   Mem // rows of the next pair (0 when none)
	curRow0    Mem // the current pair's first row
	qNext      Mem // Q at the next pair's first row
	sCur, sNxt Mem // the two score buffers of 32 rows
	oCur       Mem // O at the current pair's first row
	done       Mem // rows of the current pair through the softmax
	limit      Mem // softmax the current pair's rows up to here
	bLeft      Mem // key blocks of the next pair left
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

// tileAt2 is tileAt on the tile at base+off+disp, off a register.
func tileAt2(base, off Register, disp int, ld Mem, op func(base, index GPPhysical)) {
	LEAQ(Mem{Base: base, Index: off, Scale: 1, Disp: disp}, tBase)
	MOVQ(ld, tStride)
	op(tBase, tStride)
}

// qkBlock emits the scores of a pair of key tiles for the next pair's mr
// row tiles (mr = 1 or 2): C from zero, d/32 k steps, C stored into S at
// sCol.
func (g *chunkGen) qkBlock(mr int) {
	Commentf("scores of 2 key tiles of the next pair's %d row tile(s)", mr)
	for r := range mr {
		for c := range 2 {
			asmkit.TileZero(chunkC(r, c))
		}
	}
	qa, kb, kc, qo := GP64(), GP64(), GP64(), GP64()
	MOVQ(g.qNext, qa)
	MOVQ(g.kCol, kb)
	MOVQ(g.dTiles, kc)
	MOVQ(g.qTile, qo)
	lK := g.label("qk")
	Label(lK)
	// The products are issued as soon as their operands are loaded.
	tileAt(qa, 0, g.ldQ, func(b, i GPPhysical) { asmkit.TileLoad(chunkA(0), b, i) })
	tileAt(kb, 0, g.ldK, func(b, i GPPhysical) { asmkit.TileLoad(chunkB(0), b, i) })
	asmkit.TDPBF16PS(chunkC(0, 0), chunkA(0), chunkB(0))
	tileAt(kb, 64, g.ldK, func(b, i GPPhysical) { asmkit.TileLoad(chunkB(1), b, i) })
	asmkit.TDPBF16PS(chunkC(0, 1), chunkA(0), chunkB(1))
	if mr == 2 {
		tileAt2(qa, qo, 0, g.ldQ, func(b, i GPPhysical) { asmkit.TileLoad(chunkA(1), b, i) })
		asmkit.TDPBF16PS(chunkC(1, 0), chunkA(1), chunkB(0))
		asmkit.TDPBF16PS(chunkC(1, 1), chunkA(1), chunkB(1))
	}
	ADDQ(U8(64), qa)
	ADDQ(g.kStep, kb)
	DECQ(kc)
	JNZ(LabelRef(lK))
	sc, so := GP64(), GP64()
	MOVQ(g.sCol, sc)
	MOVQ(g.sTile, so)
	for r := range mr {
		for c := range 2 {
			if r == 0 {
				tileAt(sc, 64*c, g.ldS, func(b, x GPPhysical) { asmkit.TileStore(b, x, chunkC(r, c)) })
			} else {
				tileAt2(sc, so, 64*c, g.ldS, func(b, x GPPhysical) { asmkit.TileStore(b, x, chunkC(r, c)) })
			}
		}
	}
}

// pvBlock emits P·V into a pair of column tiles of the current pair's mr
// row tiles of accumulators at oc (mr = 1 or 2): C loaded from O, cols/32
// k steps, C stored.
func (g *chunkGen) pvBlock(mr int, oc, vc Register) {
	Commentf("P·V into 2 column tiles of the current pair's %d row tile(s)", mr)
	oo := GP64()
	MOVQ(g.oTile, oo)
	for r := range mr {
		for c := range 2 {
			if r == 0 {
				tileAt(oc, 64*c, g.ldO, func(b, x GPPhysical) { asmkit.TileLoad(chunkC(r, c), b, x) })
			} else {
				tileAt2(oc, oo, 64*c, g.ldO, func(b, x GPPhysical) { asmkit.TileLoad(chunkC(r, c), b, x) })
			}
		}
	}
	pa, vb, kc, po := GP64(), GP64(), GP64(), GP64()
	Load(Param("p"), pa)
	MOVQ(vc, vb)
	MOVQ(g.kvSteps, kc)
	MOVQ(g.pTile, po)
	lK := g.label("pv")
	Label(lK)
	tileAt(pa, 0, g.ldP, func(b, x GPPhysical) { asmkit.TileLoad(chunkA(0), b, x) })
	tileAt(vb, 0, g.ldV, func(b, x GPPhysical) { asmkit.TileLoad(chunkB(0), b, x) })
	asmkit.TDPBF16PS(chunkC(0, 0), chunkA(0), chunkB(0))
	tileAt(vb, 64, g.ldV, func(b, x GPPhysical) { asmkit.TileLoad(chunkB(1), b, x) })
	asmkit.TDPBF16PS(chunkC(0, 1), chunkA(0), chunkB(1))
	if mr == 2 {
		tileAt2(pa, po, 0, g.ldP, func(b, x GPPhysical) { asmkit.TileLoad(chunkA(1), b, x) })
		asmkit.TDPBF16PS(chunkC(1, 0), chunkA(1), chunkB(0))
		asmkit.TDPBF16PS(chunkC(1, 1), chunkA(1), chunkB(1))
	}
	ADDQ(U8(64), pa)
	ADDQ(g.vStep, vb)
	DECQ(kc)
	JNZ(LabelRef(lK))
	MOVQ(g.oTile, oo)
	for r := range mr {
		for c := range 2 {
			if r == 0 {
				tileAt(oc, 64*c, g.ldO, func(b, x GPPhysical) { asmkit.TileStore(b, x, chunkC(r, c)) })
			} else {
				tileAt2(oc, oo, 64*c, g.ldO, func(b, x GPPhysical) { asmkit.TileStore(b, x, chunkC(r, c)) })
			}
		}
	}
}

// pv emits the current pair's P·V over every column tile pair of dv.
func (g *chunkGen) pv() {
	oc, vc, n := GP64(), GP64(), GP64()
	MOVQ(g.oCur, oc)
	Load(Param("vp"), vc)
	MOVQ(g.dvBlocks, n)
	lOne, lNext := g.label("pvone"), g.label("pvnext")
	Label("fc_pvcols")
	CMPQ(g.curRows, U8(16))
	JBE(LabelRef(lOne))
	g.pvBlock(2, oc, vc)
	JMP(LabelRef(lNext))
	Label(lOne)
	g.pvBlock(1, oc, vc)
	Label(lNext)
	ADDQ(U32(128), oc)
	ADDQ(U32(128), vc)
	DECQ(n)
	JNZ(LabelRef("fc_pvcols"))
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
	for _, slot := range []*Mem{&g.ldQ, &g.ldK, &g.ldV, &g.ldO, &g.ldS, &g.ldP, &g.qTile, &g.oTile, &g.sTile, &g.pTile,
		&g.kStep, &g.vStep, &g.dTiles, &g.kvSteps, &g.kBlocks, &g.dvBlocks, &g.piece, &g.rowsLeft, &g.curRows, &g.nextRows,
		&g.curRow0, &g.qNext, &g.sCur, &g.sNxt, &g.oCur, &g.done, &g.limit, &g.bLeft, &g.kCol, &g.sCol, &g.last} {
		*slot = AllocLocal(8)
	}

	Comment("One tile configuration for the call: every tile 16 rows × 64 bytes.")
	LEAQ(amxFoldConfig, tBase)
	asmkit.LdTileCfg(tBase)

	Comment("Leading dimensions in bytes, 16 rows of each, and the k steps.")
	t := GP64()
	for _, ld := range []struct {
		param      string
		shift      uint8
		slot, tile Mem
	}{{"ldQ", 1, g.ldQ, g.qTile}, {"ldK", 1, g.ldK, g.kStep}, {"ldV", 1, g.ldV, g.vStep}, {"ldO", 2, g.ldO, g.oTile},
		{"ldS", 2, g.ldS, g.sTile}, {"ldP", 1, g.ldP, g.pTile}} {
		Load(Param(ld.param), t)
		SHLQ(U8(ld.shift), t)
		MOVQ(t, ld.slot)
		SHLQ(U8(4), t)
		MOVQ(t, ld.tile)
	}
	Load(Param("d"), t)
	SHRQ(U8(5), t)
	MOVQ(t, g.dTiles)
	cols := GP64()
	Load(Param("cols"), cols)
	MOVQ(cols, t)
	SHRQ(U8(5), t)
	MOVQ(t, g.kvSteps)
	MOVQ(t, g.kBlocks)
	Load(Param("dv"), t)
	SHRQ(U8(5), t)
	MOVQ(t, g.dvBlocks)
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

	Comment("No current pair of row tiles yet; the next is the first.")
	MOVQ(U32(0), g.curRows)
	MOVQ(I32(-32), g.curRow0)
	Load(Param("rows"), t)
	MOVQ(t, g.rowsLeft)
	CMPQ(t, U8(32))
	JBE(LabelRef("fc_firstmin"))
	MOVQ(U32(32), t)
	Label("fc_firstmin")
	MOVQ(t, g.nextRows)
	SUBQ(t, g.rowsLeft)
	Load(Param("q"), t)
	MOVQ(t, g.qNext)
	Load(Param("s"), t)
	MOVQ(t, g.sNxt)
	MOVQ(g.sTile, t)
	SHLQ(U8(1), t)
	ADDQ(g.sNxt, t)
	MOVQ(t, g.sCur)

	Label("fc_pair")
	Comment("A pair of row tiles: the next pair's scores, a key tile pair at a time, each followed by piece rows of the current pair's softmax.")
	Load(Param("kp"), t)
	MOVQ(t, g.kCol)
	MOVQ(g.sNxt, t)
	MOVQ(t, g.sCol)
	MOVQ(g.kBlocks, t)
	MOVQ(t, g.bLeft)
	MOVQ(U32(0), g.done)
	MOVQ(U32(0), g.last)

	Label("fc_piece")
	CMPQ(g.bLeft, U8(0))
	JE(LabelRef("fc_final"))
	DECQ(g.bLeft)
	MOVQ(g.nextRows, t)
	TESTQ(t, t)
	JZ(LabelRef("fc_share"))
	CMPQ(t, U8(16))
	JBE(LabelRef("fc_qkone"))
	g.qkBlock(2)
	JMP(LabelRef("fc_qkdone"))
	Label("fc_qkone")
	g.qkBlock(1)
	Label("fc_qkdone")
	ADDQ(U32(128), g.kCol) // 2 key tiles: 128 bytes of a pair row
	ADDQ(U32(128), g.sCol)
	Label("fc_share")
	// The current pair's rows up to done+piece (at most all of them).
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
	Comment("Row done of the current pair, row curRow0+done of the call.")
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
	Comment("The current pair's P·V, then the next pair becomes the current one.")
	CMPQ(g.curRows, U8(0))
	JE(LabelRef("fc_advance"))
	g.pv()
	Label("fc_advance")
	MOVQ(g.nextRows, t)
	TESTQ(t, t)
	JZ(LabelRef("fc_end"))
	MOVQ(t, g.curRows)
	ADDQ(U8(32), g.curRow0)
	MOVQ(g.curRow0, t)
	IMULQ(g.ldO, t)
	ADDQ(asmkit.ParamAddr("o"), t)
	MOVQ(t, g.oCur)
	MOVQ(g.sCur, t)
	u := GP64()
	MOVQ(g.sNxt, u)
	MOVQ(t, g.sNxt)
	MOVQ(u, g.sCur)
	MOVQ(g.qTile, t)
	SHLQ(U8(1), t)
	ADDQ(t, g.qNext)
	MOVQ(g.rowsLeft, t)
	CMPQ(t, U8(32))
	JBE(LabelRef("fc_nextmin"))
	MOVQ(U32(32), t)
	Label("fc_nextmin")
	MOVQ(t, g.nextRows)
	SUBQ(t, g.rowsLeft)
	JMP(LabelRef("fc_pair"))

	Label("fc_end")
	asmkit.TileRelease()
	VZEROUPPER()
	RET()
}
