package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
)

// The constants of kernel/tanh.go, spelled the same way.
const (
	tanhSplit = 0.625

	tanhC0 = -0.33333331010377593
	tanhC1 = 0.13333212501733507
	tanhC2 = -0.053947454169667799
	tanhC3 = 0.021704000400234427
	tanhC4 = -0.0081846616708225253
	tanhC5 = 0.0021489841078801922
)

const softCapDoc = `dst[i] = c·Tanh(src[i]·inv) for i < n (inv = 1/c):

	for i := range n {
		x := src[i] * inv
		a := |x|
		if a < 0.625 {
			t = a + a³·P(a²)   // Horner's rule in fused multiply-adds
		} else {
			t = 1 − 2/(Exp(min(2a, 20)) + 1)
		}
		dst[i] = c * (t with the sign of x)
	}

The polynomial is taken for every lane, the exponential branch only for
vectors with a lane at or above 0.625 (a NaN lane counts as one, and
keeps NaN), blended by a < 0.625. The exponential is Exp's
polynomial without its range handling: its argument is in [0, 20]
(tanh(10) rounds to 1), so 2^n is one exact scaling. n >= 1; dst may
equal src.`

// genSoftCap emits the SoftCap kernel of x (softCapDoc): two vectors a
// step, then one, then a masked tail. The coefficients are memory operands
// (broadcast with AVX-512) so that the exponential keeps its registers.
func genSoftCap(x *asmkit.ISA) {
	name := asmkit.Export("softCap" + x.Name)
	TEXT(name, NOSPLIT, "func(dst, src *float32, n int, c, inv float32)")
	Pragma("noescape")
	isaDoc := x.Doc
	if !x.IsAVX512() {
		isaDoc += "+FMA"
	}
	doc(name + " is the " + isaDoc + " SoftCap kernel: " + softCapDoc)
	lanes, vb := x.Lanes(), x.VecBytes
	unroll := 2
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	cx := Load(Param("c"), XMM())
	ix := Load(Param("inv"), XMM())
	cv, iv := x.Vec(), x.Vec()
	VBROADCASTSS(cx, cv)
	VBROADCASTSS(ix, iv)

	// fmac sets p = p·s + constant slot i.
	fmac := func(i int, s, p VecVirtual) {
		if x.IsAVX512() {
			VFMADD213PS_BCST(constAt(i), s, p)
		} else {
			VFMADD213PS(constAt(i), s, p)
		}
	}
	// tanhCap returns c·Tanh(v·inv).
	calls := 0
	tanhCap := func(v VecVirtual) VecVirtual {
		xv := x.Vec()
		VMULPS(v, iv, xv)
		a := x.Vec()
		sgn := x.Vec()
		if x.IsAVX512() {
			VPANDD_BCST(constAt(cAbsMask), xv, a)
			VPXORD(a, xv, sgn)
		} else {
			VANDPS(constAt(cAbsMask), xv, a)
			VXORPS(a, xv, sgn)
		}
		// Small: a + a³·P(a²).
		s := x.Vec()
		VMULPS(a, a, s)
		p := constVec(x, cTanh5)
		for i := cTanh4; i >= cTanh0; i-- {
			fmac(i, s, p)
		}
		VMULPS(s, a, s) // a³
		VFMADD213PS(a, s, p)
		t := x.Vec()
		VMOVAPS(p, t)
		// Large: 1 − 2/(Exp(2a) + 1), skipped when every lane is small
		// (as most scores are, well inside the cap).
		calls++
		skip := fmt.Sprintf("small%d", calls)
		var k Register
		var m VecVirtual
		if x.IsAVX512() {
			k = K()
			VCMPPS_BCST(U8(1), constAt(cTanhSplit), a, k) // a < 0.625; false for NaN
			KORTESTW(k, k)
			JCS(LabelRef(skip)) // every lane
		} else {
			m = YMM()
			VCMPPS(U8(1), constAt(cTanhSplit), a, m) // a < 0.625; false for NaN
			g := GP32()
			VMOVMSKPS(m, g)
			CMPL(g, U8(0xff))
			JE(LabelRef(skip))
		}
		a2 := x.Vec()
		VADDPS(a, a, a2)
		e := expTanh(x, a2)
		VADDPS(constVec(x, cOne), e, e)
		VDIVPS(e, constVec(x, cTwo), e)
		VSUBPS(e, constVec(x, cOne), e)
		if x.IsAVX512() {
			VMOVAPS(p, k, e)
			VMOVAPS(e, t)
		} else {
			VBLENDVPS(m, p, e, t)
		}
		Label(skip)
		if x.IsAVX512() {
			VPORD(sgn, t, t)
		} else {
			VORPS(sgn, t, t)
		}
		VMULPS(cv, t, t)
		return t
	}

	Label("loop")
	CMPQ(n, U32(lanes*unroll))
	JL(LabelRef("tail"))
	ys := make([]VecVirtual, unroll)
	for i := range ys {
		v := x.Vec()
		VMOVUPS(Mem{Base: src}.Offset(vb*i), v)
		ys[i] = tanhCap(v)
	}
	for i, y := range ys {
		VMOVUPS(y, Mem{Base: dst}.Offset(vb*i))
	}
	ADDQ(U32(vb*unroll), src)
	ADDQ(U32(vb*unroll), dst)
	SUBQ(U32(lanes*unroll), n)
	JMP(LabelRef("loop"))

	Label("tail")
	if unroll > 1 {
		// At most unroll−1 whole vectors and a partial one are left.
		CMPQ(n, U32(lanes))
		JL(LabelRef("partial"))
		v := x.Vec()
		VMOVUPS(Mem{Base: src}, v)
		VMOVUPS(tanhCap(v), Mem{Base: dst})
		ADDQ(U32(vb), src)
		ADDQ(U32(vb), dst)
		SUBQ(U32(lanes), n)
		JMP(LabelRef("tail"))
		Label("partial")
	}
	TESTQ(n, n)
	JE(LabelRef("done"))
	t := newTail(x, n)
	v := x.Vec()
	t.load(Mem{Base: src}, v)
	t.store(tanhCap(v), Mem{Base: dst})

	Label("done")
	asmkit.Ret()
}

// expTanh returns Exp(min(v, 20)) for v >= 0 or NaN, in the steps of
// asmkit.Exp512 and exp2 but without their range handling: the argument is
// clamped to 20 (NaN passes, as VMINPS returns its second source operand
// when one is NaN), so n <= 29 and 2^n is one exact scaling.
func expTanh(x *asmkit.ISA, v VecVirtual) VecVirtual {
	c := constVec(x, cTanhClamp)
	VMINPS(v, c, v) // min(c, v): v when NaN
	n := x.Vec()
	if x.IsAVX512() {
		VMULPS_BCST(constAt(cLog2e), v, n)
		VRNDSCALEPS(U8(0), n, n) // round to nearest even
		VFNMADD231PS_BCST(constAt(cLn2Hi), n, v)
		VFNMADD231PS_BCST(constAt(cLn2Lo), n, v)
	} else {
		VMULPS(constAt(cLog2e), v, n)
		VROUNDPS(U8(0), n, n)
		VFNMADD231PS(constAt(cLn2Hi), n, v)
		VFNMADD231PS(constAt(cLn2Lo), n, v)
	}
	p := constVec(x, cP0)
	for i := 1; i < 6; i++ {
		if x.IsAVX512() {
			VFMADD213PS_BCST(constAt(cP0+i), v, p)
		} else {
			VFMADD213PS(constAt(cP0+i), v, p)
		}
	}
	VMULPS(v, p, p)
	VFMADD213PS(v, v, p)
	VADDPS(constVec(x, cOne), p, p)
	if x.IsAVX512() {
		VSCALEFPS(n, p, p)
		return p
	}
	ni := YMM()
	VCVTPS2DQ(n, ni) // exact: n is an integer, at most 29
	VPSLLD(U8(23), ni, ni)
	VPADDD(constAt(cBias), ni, ni)
	VMULPS(ni, p, p)
	return p
}
