package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
)

// A fused bf16 fold (FoldChunkAMX, FoldChunkBF16AVX512) computes, for a
// tile of cols keys and rows query rows, the bits of QKTBF16 (scale 1),
// the rows' −Inf edges, OnlineSoftmaxBF16, ScaleRows and PVBF16 in one
// call. genFoldChunk emits the part the two share: the rows are taken a
// row tile at a time, and the scores of the next row tile are computed a
// key block (4 key tiles of 16 columns, or a last 2) at a time, each block
// followed by piece rows of the current tile's softmax (the row code of
// SoftmaxBF16AVX512, softmaxRowBF16), so that the products of the next
// tile run while the vector units take the exponentials of the current
// one; then the current tile's P·V. The products are the fold's own
// (chunkFold).

// chunkFold is what a fused fold brings to genFoldChunk.
type chunkFold interface {
	// begin emits what the call does first; end what it does before it
	// returns.
	begin()
	end()
	// qkBlock emits the unscaled scores of n key tiles (n = 4 or 2) of
	// the next row tile (nextRows rows of Q from qNext; K from kCol) into
	// S at sCol, and advances kCol and sCol past them.
	qkBlock(g *chunkGen, n int)
	// rescale emits, for the current tile's row done just through the
	// softmax, its accumulators times alpha (at ar) where pv does not.
	rescale(g *chunkGen, ar Register, one VecVirtual)
	// pv emits the current tile's P·V into its accumulators.
	pv(g *chunkGen)
}

// chunkSpec names a fused fold and the shape of its row loop.
type chunkSpec struct {
	name, signature, doc string
	tileRows             int  // rows of a row tile
	perRow               bool // the softmax's constants made for each row: the products take every vector register
}

// chunkGen holds the frame slots of a fused fold.
type chunkGen struct {
	ldQ, ldK, ldV, ldO, ldS, ldP Mem // leading dimensions in bytes
	kStep, vStep                 Mem // 16 pair rows of K and of V, in bytes
	dTiles, kvSteps              Mem // d/32 and cols/32: k steps of the two tile products
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

// softmaxState is the softmax row code's constants and registers
// (genSoftmaxBF16AVX512's).
type softmaxState struct {
	scx               VecVirtual
	sc, negInf, log2e VecVirtual
	vm                VecVirtual
	e                 *exp2t512
	rem, full         Register
	tail              Register
}

func newSoftmaxState(cols Register) *softmaxState {
	st := &softmaxState{scx: XMM()}
	MOVSS(asmkit.ParamAddr("scale"), st.scx)
	st.sc = ZMM()
	VBROADCASTSS(st.scx, st.sc)
	st.negInf = broadcast512(cNegInf)
	st.log2e = broadcast512(cLog2e)
	st.vm = ZMM()
	st.e = newExp2t512(st.sc, st.vm, st.log2e)
	st.rem = GP64()
	MOVQ(cols, st.rem)
	ANDQ(U8(15), st.rem)
	st.tail = mask16(st.rem)
	st.full = GP64()
	MOVQ(cols, st.full)
	ANDQ(I32(-16), st.full)
	return st
}

// mulRows emits dst = src·n (n a tile's rows): a shift where n is a power
// of 2.
func mulRows(src Op, dst Register, n int) {
	MOVQ(src, dst)
	if n&(n-1) == 0 {
		shift := 0
		for 1<<shift < n {
			shift++
		}
		SHLQ(U8(shift), dst)
		return
	}
	IMUL3Q(I32(n), dst, dst)
}

func genFoldChunk(spec chunkSpec, f chunkFold) {
	h := spec.tileRows
	TEXT(spec.name, NOSPLIT, spec.signature)
	Pragma("noescape")
	doc(spec.doc)
	g := &chunkGen{}
	for _, slot := range []*Mem{&g.ldQ, &g.ldK, &g.ldV, &g.ldO, &g.ldS, &g.ldP, &g.kStep, &g.vStep, &g.dTiles, &g.kvSteps,
		&g.blocks4, &g.dv4, &g.dv2, &g.keys2, &g.piece, &g.rowsLeft, &g.curRows, &g.nextRows, &g.curRow0, &g.qNext,
		&g.sCur, &g.sNxt, &g.oCur, &g.done, &g.limit, &g.b4Left, &g.b2Left, &g.kCol, &g.sCol, &g.last} {
		*slot = AllocLocal(8)
	}

	f.begin()

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

	var st *softmaxState
	if !spec.perRow {
		Comment("The softmax's constants (genSoftmaxBF16AVX512's).")
		st = newSoftmaxState(cols)
	}

	Comment("No current tile yet; the next is the first.")
	MOVQ(U32(0), g.curRows)
	MOVQ(I32(-h), g.curRow0)
	Load(Param("rows"), t)
	MOVQ(t, g.rowsLeft)
	CMPQ(t, U8(h))
	lMin := "fc_firstmin"
	JBE(LabelRef(lMin))
	MOVQ(U32(h), t)
	Label(lMin)
	MOVQ(t, g.nextRows)
	SUBQ(t, g.rowsLeft)
	Load(Param("q"), t)
	MOVQ(t, g.qNext)
	Load(Param("s"), t)
	MOVQ(t, g.sNxt)
	mulRows(g.ldS, t, h)
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
	f.qkBlock(g, 4)
	Label("fc_nopk4")
	JMP(LabelRef("fc_share"))
	Label("fc_piece2")
	CMPQ(g.b2Left, U8(0))
	JE(LabelRef("fc_final"))
	MOVQ(U32(0), g.b2Left)
	CMPQ(g.nextRows, U8(0))
	JE(LabelRef("fc_share"))
	f.qkBlock(g, 2)
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
	if spec.perRow {
		c := GP64()
		Load(Param("cols"), c)
		st = newSoftmaxState(c)
	}
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
	hideEdges(sr, lov, visv, cw, st.negInf)

	Label("fc_row")
	r := &softmaxRowBF16{prefix: "fc_", s: sr, p: pr, m: mr, z: zr, alpha: ar, scx: st.scx, sc: st.sc, negInf: st.negInf, log2e: st.log2e,
		vm: st.vm, e: st.e, rem: st.rem, tail: st.tail, full: st.full, x: GP64(), pp: GP64(), j: GP64()}
	r.code(true)
	Label("fc_slow_row")
	r.code(false)
	Label("fc_next")
	f.rescale(g, ar, st.e.one)
	Label("fc_rowend")
	INCQ(g.done)
	JMP(LabelRef("fc_rowloop"))

	Label("fc_rowsdone")
	CMPQ(g.last, U8(0))
	JE(LabelRef("fc_piece"))
	Comment("The current tile's P·V, then the next tile becomes the current one.")
	CMPQ(g.curRows, U8(0))
	JE(LabelRef("fc_advance"))
	f.pv(g)
	Label("fc_advance")
	MOVQ(g.nextRows, t)
	TESTQ(t, t)
	JZ(LabelRef("fc_end"))
	MOVQ(t, g.curRows)
	ADDQ(U8(h), g.curRow0)
	MOVQ(g.curRow0, t)
	IMULQ(g.ldO, t)
	ADDQ(asmkit.ParamAddr("o"), t)
	MOVQ(t, g.oCur)
	MOVQ(g.sCur, t)
	u := GP64()
	MOVQ(g.sNxt, u)
	MOVQ(t, g.sNxt)
	MOVQ(u, g.sCur)
	mulRows(g.ldQ, t, h)
	ADDQ(t, g.qNext)
	MOVQ(g.rowsLeft, t)
	CMPQ(t, U8(h))
	JBE(LabelRef("fc_nextmin"))
	MOVQ(U32(h), t)
	Label("fc_nextmin")
	MOVQ(t, g.nextRows)
	SUBQ(t, g.rowsLeft)
	JMP(LabelRef("fc_tile"))

	Label("fc_end")
	f.end()
	VZEROUPPER()
	RET()
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
