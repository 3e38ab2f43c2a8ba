package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
)

// The gathering kernels, QKRowsGather and PVRowsGather: the same products
// as QKRows and PVRows, but key (value) j's row starts at element off[j]
// of k (v) instead of j·ldK, so that one call covers a whole tile of a
// paged cache, whatever its blocks and wherever they lie. They read the
// offsets as they go: a key costs one load, a shift and an add more, not a
// call. Key j's prefetch target is the row at pfo[j] (the caller's table
// from further down the sequence, through the block table).
//
// QK prefetches, as it reads each vector of a group of keys' rows, the same
// vector of the group's target rows (as QKRows does along its rows: a
// burst of whole target rows before the group's products left binary16
// rows at 0.41–0.55 × the contiguous kernels' speed on a Zen 5 core, this
// 0.74–0.78 ×: docs/benchmarks.md); PV, walking each key once per block
// of columns, prefetches the target's columns of the block, as PVRows
// does.

// gatherDoc says what the offsets of t rows must be.
func gatherDoc(t elemType) string {
	switch t {
	case q8:
		return "a multiple of 32: rows start Q8 blocks"
	}
	return "in elements"
}

func genQKGather(x *isa, t elemType) {
	name := asmkit.Export("qkRowsGather" + t.Name() + x.Name)
	TEXT(name, NOSPLIT, fmt.Sprintf("func(s *float32, ldS int, q *float32, ldQ int, k %s, off, pfo *int, ks *float32, rows, cols, dv int, scale float32)", t.GoType()))
	Pragma("noescape")
	Doc(append([]string{
		fmt.Sprintf("%s is the %s kernel of QKRowsGather for %s keys:", name, x.Doc, elemDoc[t]),
		fmt.Sprintf("the scaled dot products of rows (1..%d) query rows with cols key rows,", x.mr),
		fmt.Sprintf("key j's at element off[j] of k (%s), over their first", gatherDoc(t)),
		fmt.Sprintf("dv components (dv a multiple of %d, ldS and ldQ in elements):", x.dvMultiple(t)),
		"",
		"	for i := 0; i < rows; i++ {",
		"		for j := 0; j < cols; j++ {",
		"			var acc float32",
		"			for c := 0; c < dv; c++ {",
		"				acc += q[i*ldQ+c] * K(off[j] + c)",
		"			}",
		"			s[i*ldS+j] = scale * acc",
		"		}",
		"	}",
		"",
	}, gatherRowsDoc("K", "k", "ks", t, "The order of the additions differs from the loop.")...)...)
	step := x.Lanes()
	if t == q8 {
		step = 32
	}
	sub := step / x.Lanes()
	zs := x.Vec()
	sx := Load(Param("scale"), XMM())
	if t.IsFP8() {
		foldFP8Scale(t, sx)
	}
	VBROADCASTSS(sx, zs)
	jl := AllocLocal(8) // the next key
	var tp [4]Mem       // the target rows of a group's keys
	for u := range tp {
		tp[u] = AllocLocal(8)
	}
	pfScale := uint8(1) // the target rows' bytes per unit of c
	if t == q8 {
		pfScale = 8
	}

	dispatchRows(x, name)
	for rb := x.mr; rb >= 1; rb-- {
		lbl := func(s string) string { return fmt.Sprintf("%s_r%d_%s", name, rb, s) }
		Label(fmt.Sprintf("%s_r%d", name, rb))
		MOVQ(U32(0), jl)
		for _, nk := range []int{4, 1} {
			loop, done := lbl(fmt.Sprintf("k%d", nk)), lbl(fmt.Sprintf("k%d_done", nk))
			j := gatherGroup(t, jl, nk, loop, done, tp[:nk])
			kc, ksc := gatherRows(t, j, nk)
			acc := zeroAcc(x, rb, nk)
			qc := Load(Param("q"), GP64())
			ldQ, ldQ3 := floatStride("ldQ")
			cnt := Load(Param("dv"), GP64())
			SHRQ(U8(map[int]uint64{8: 3, 16: 4, 32: 5}[step]), cnt)
			// c indexes the rows: their bytes (scale 1) for float32 and the
			// 16-bit types; for Q8, the bytes of their scales, 4 a block of
			// 32 elements, so that the int8 data are at 8·c.
			c := GP64()
			XORQ(c, c)
			inner := lbl(fmt.Sprintf("k%d_inner", nk))
			Label(inner)
			prefetchTargets(tp[:nk], c, pfScale)
			qkStep(x, t, acc, sub, qc, ldQ, ldQ3, func(u, si int) (m, sc Mem) {
				disp := si * x.Lanes() * t.Size()
				if t == q8 {
					return Mem{Base: kc[u], Index: c, Scale: 8, Disp: disp}, Mem{Base: ksc[u], Index: c, Scale: 1}
				}
				return Mem{Base: kc[u], Index: c, Scale: 1, Disp: disp}, sc
			})
			ADDQ(U32(step*4), qc)
			if t == q8 {
				ADDQ(U8(4), c)
			} else {
				ADDQ(U32(step*t.Size()), c)
			}
			DECQ(cnt)
			JNZ(LabelRef(inner))

			gatherGroupEnd(x, acc, zs, jl, nk, loop)
			Label(done)
		}
		asmkit.Ret()
	}
}

// gatherGroup emits the head of a gathering kernel's loop over groups of
// nk keys, from the key held in the local jl: at loop, it leaves for done
// unless nk keys are left, then stores the addresses of the group's target
// rows (at pfo[j..j+nk)) in the locals tp, whose data the group's products
// prefetch as they go (prefetchTargets), and prefetches, for Q8, their
// scales into the L1. It returns the register holding j, the group's first
// key.
func gatherGroup(t elemType, jl Mem, nk int, loop, done string, tp []Mem) Register {
	Label(loop)
	j := GP64()
	MOVQ(jl, j)
	end := GP64()
	LEAQ(Mem{Base: j, Disp: nk}, end)
	CMPQ(end, asmkit.ParamAddr("cols"))
	JG(LabelRef(done))
	kb := Load(Param("k"), GP64())
	po := Load(Param("pfo"), GP64())
	for u := range nk {
		a := GP64()
		MOVQ(Mem{Base: po, Index: j, Scale: 8, Disp: 8 * u}, a)
		if t == q8 {
			ts := GP64()
			MOVQ(a, ts)
			SHRQ(U8(3), ts)
			ADDQ(asmkit.ParamAddr("ks"), ts)
			PREFETCHT0(Mem{Base: ts})
		}
		if t.Shift() > 0 {
			SHLQ(U8(t.Shift()), a)
		}
		ADDQ(kb, a)
		MOVQ(a, tp[u])
	}
	return j
}

// prefetchTargets prefetches into the L2 the bytes of the target rows whose
// addresses the locals tp hold at the offset the rows being read are at:
// c bytes on (scale 1), or 8·c (Q8, whose c counts scale bytes).
func prefetchTargets(tp []Mem, c Register, scale uint8) {
	for _, m := range tp {
		a := GP64()
		MOVQ(m, a)
		PREFETCHT2(Mem{Base: a, Index: c, Scale: scale})
	}
}

// gatherRows returns the addresses of the rows of keys j..j+nk−1 (key u's
// at element off[j+u] of k) and, for Q8, of their scales.
func gatherRows(t elemType, j Register, nk int) (kc, ksc []Register) {
	op := Load(Param("off"), GP64())
	kc, ksc = make([]Register, nk), make([]Register, nk)
	for u := range kc {
		kc[u] = GP64()
		MOVQ(Mem{Base: op, Index: j, Scale: 8, Disp: 8 * u}, kc[u])
		if t == q8 {
			ksc[u] = GP64()
			MOVQ(kc[u], ksc[u])
			SHRQ(U8(3), ksc[u])
			ADDQ(asmkit.ParamAddr("ks"), ksc[u])
		}
		if t.Shift() > 0 {
			SHLQ(U8(t.Shift()), kc[u])
		}
		ADDQ(asmkit.ParamAddr("k"), kc[u])
	}
	return kc, ksc
}

// gatherGroupEnd stores the group's scores (at s's column of the key in
// jl), moves jl nk keys on and jumps back to loop.
func gatherGroupEnd(x *isa, acc [][]VecVirtual, zs VecVirtual, jl Mem, nk int, loop string) {
	sp := Load(Param("s"), GP64())
	jn := GP64()
	MOVQ(jl, jn)
	LEAQ(Mem{Base: sp, Index: jn, Scale: 4}, sp)
	storeScores(x, acc, sp, zs)
	ADDQ(U8(nk), jn)
	MOVQ(jn, jl)
	JMP(LabelRef(loop))
}

// gatherRowsDoc is rowsDoc for the gathering kernels: the element
// function, the prefetch through pfo and the order of the sums.
func gatherRowsDoc(f, x, xs string, t elemType, order string) []string {
	d := append(elemDocLines(f, x, xs, t),
		"While it reads key j it prefetches the row that starts at element pfo[j]",
		"of "+x+" into the L2 cache; pfo changes the speed, never the result.")
	return append(d, strings.Split(order, "\n")...)
}

func genPVGather(x *isa, t elemType) {
	name := asmkit.Export("pvRowsGather" + t.Name() + x.Name)
	TEXT(name, NOSPLIT, fmt.Sprintf("func(o *float32, ldO int, p *float32, ldP int, v %s, off, pfo *int, vs *float32, rows, cols, dv int)", t.GoType()))
	Pragma("noescape")
	doc := append([]string{
		fmt.Sprintf("%s is the %s kernel of PVRowsGather for %s values:", name, x.Doc, elemDoc[t]),
		fmt.Sprintf("it accumulates rows (1..%d) probability rows times cols value rows, value", x.mr),
		fmt.Sprintf("j's at element off[j] of v (%s), into the first dv", gatherDoc(t)),
	}, x.pvDvDoc(t, true)...)
	Doc(append(append(doc,
		"",
		"	for i := 0; i < rows; i++ {",
		"		for c := 0; c < dv; c++ {",
		"			acc := o[i*ldO+c]",
		"			for j := 0; j < cols; j++ {",
		"				acc += p[i*ldP+j] * V(off[j] + c)",
		"			}",
		"			o[i*ldO+c] = acc",
		"		}",
		"	}",
		"",
	), gatherRowsDoc("V", "v", "vs", t, "Each product is added with an FMA, rounded once, in the order of the\nkeys.")...)...)
	genPVBlocks(x, t, name, func(rb, nv int, tail bool, lbl string, oc, vc, sc Register) {
		pvGatherBlock(x, t, rb, nv, tail, lbl, oc, vc, sc)
	})
}

// pvGatherBlock emits the product of rb probability rows and every value
// row into nv vectors of output columns at oc; vc is v advanced to the
// block's columns, sc (Q8) the scales advanced to them. With tail, the
// last vector holds the row's dv mod 16 last columns.
func pvGatherBlock(x *isa, t elemType, rb, nv int, tail bool, lbl string, oc, vc, sc Register) {
	var k Register
	if tail {
		k = pvTailMask()
	}
	acc, _ := loadOut(x, rb, nv, oc, k)
	pp := Load(Param("p"), GP64())
	ldP, ldP3 := floatStride("ldP")
	op := Load(Param("off"), GP64())
	po := Load(Param("pfo"), GP64())
	j := Load(Param("cols"), GP64())
	Label(lbl)
	// Prefetch the block's columns of the target row.
	pf := GP64()
	MOVQ(Mem{Base: po}, pf)
	if t == q8 {
		ps := GP64()
		MOVQ(pf, ps)
		SHRQ(U8(3), ps)
		PREFETCHT0(Mem{Base: sc, Index: ps, Scale: 1})
	}
	if t.Shift() > 0 {
		SHLQ(U8(t.Shift()), pf)
	}
	for off := 0; off < nv*x.Lanes()*t.Size(); off += 64 {
		PREFETCHT2(Mem{Base: vc, Index: pf, Scale: 1, Disp: off})
	}
	// The row.
	vo := GP64()
	MOVQ(Mem{Base: op}, vo)
	var so Register
	if t == q8 {
		so = GP64()
		MOVQ(vo, so)
		SHRQ(U8(3), so)
	}
	if t.Shift() > 0 {
		SHLQ(U8(t.Shift()), vo)
	}
	vv := make([]VecVirtual, nv)
	for w := range vv {
		vv[w] = x.Vec()
		var m Mem
		if t == q8 {
			m = Mem{Base: sc, Index: so, Scale: 1, Disp: w * x.Lanes() / 32 * 4}
		}
		x.loadVec(t, Mem{Base: vc, Index: vo, Scale: 1, Disp: w * x.Lanes() * t.Size()}, m, lastMask(k, w, nv), vv[w])
	}
	for r := 0; r < rb; r++ {
		b := x.Vec()
		VBROADCASTSS(rowAddr(pp, ldP, ldP3, r, 0), b)
		for w := range vv {
			VFMADD231PS(b, vv[w], acc[r][w])
		}
	}
	ADDQ(U8(4), pp)
	ADDQ(U8(8), op)
	ADDQ(U8(8), po)
	DECQ(j)
	JNZ(LabelRef(lbl))

	storeOut(x, acc, oc, nil, k)
}
