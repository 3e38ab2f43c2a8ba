package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
)

// The vector exponential is asmkit.Exp512 (AVX-512) and exp2 below (AVX2),
// the same steps as kernel/exp.go's Exp.

const expSumDoc = `dst[i] = Exp(src[i]-max) for i < n, returning the sum:

	var sum float32
	for i := range n {
		dst[i] = Exp(src[i] - max)
		sum += dst[i]
	}
	return sum

n >= 1; dst may equal src. The order of the additions differs from the loop.`

// exp2t512 holds the zmm constants of the base-2 exponential of the
// softmax of bf16 precision, whose arguments are t = (s·scale − m)·log2e
// for the scores s and the row maximum m, each operation rounded:
//
//	n = roundToEven(t);  f = t − n   (exact, |f| <= 1/2)
//	p = 1 + f·(C1 + f·(C2 + f·(C3 + f·(C4 + f·C5))))   (FMA)
//	result = p·2^n, 0 where t < −126 (−Inf included), NaN for NaN
type exp2t512 struct {
	scale, m, log2e, min, one VecVirtual
	p                         [5]VecVirtual // C5, C4, …, C1
}

func newExp2t512(scale, m, log2e VecVirtual) *exp2t512 {
	e := &exp2t512{scale: scale, m: m, log2e: log2e, min: broadcast512(cExp2Min), one: broadcast512(cOne)}
	for i := range e.p {
		e.p[i] = broadcast512(cExp2C5 - i)
	}
	return e
}

// of returns 2^((s·scale − m)·log2e) for the scores s (memory, or a
// register whose lanes outside tail are anything: they come out 0). The
// product s·scale is rounded before the subtraction, as the maximum m
// was rounded from it, so that the maximum's t is 0 exactly: an FMA
// would leave the product's rounding error, up to half an ulp of m, in t.
func (e *exp2t512) of(s Op, tail Register) VecVirtual {
	t := ZMM()
	VMULPS(s, e.scale, t) // s·scale
	VSUBPS(e.m, t, t)     // − m
	VMULPS(e.log2e, t, t) // ·log2e
	return e.exp2(t, tail)
}

// exp2 returns 2^t, consuming t.
func (e *exp2t512) exp2(t VecVirtual, tail Register) VecVirtual {
	keep := K()
	if tail != nil {
		VCMPPS(U8(5), e.min, t, tail, keep) // !(t < min), NaN included, in tail
	} else {
		VCMPPS(U8(5), e.min, t, keep)
	}
	n := ZMM()
	VRNDSCALEPS(U8(0), t, n) // round to nearest even
	VSUBPS(n, t, t)          // f = t − n, exact
	p := ZMM()
	VMOVAPS(e.p[0], p)
	for i := 1; i < len(e.p); i++ {
		VFMADD213PS(e.p[i], t, p) // p = p·f + C
	}
	VFMADD213PS(e.one, t, p)   // p·f + 1
	VSCALEFPS_Z(n, p, keep, p) // ·2^n, 0 where t < −126
	return p
}

// exp2 computes Exp(v − max) for 8 lanes with AVX2 and FMA. Constants other
// than max and the clamp bound come from memory. mask, when not nil, is a
// ymm of all-ones lanes to keep; other lanes come out 0.
func exp2(vmax, clamp, v, mask VecVirtual) VecVirtual {
	x := YMM()
	VSUBPS(vmax, v, x)
	keep := YMM()
	VCMPPS(U8(5), constAt(cExpMin), x, keep) // !(x < min), NaN included
	if mask != nil {
		VANDPS(mask, keep, keep)
	}
	VMINPS(x, clamp, x)
	n := YMM()
	VMULPS(constAt(cLog2e), x, n)
	VROUNDPS(U8(0), n, n)
	VFNMADD231PS(constAt(cLn2Hi), n, x)
	VFNMADD231PS(constAt(cLn2Lo), n, x)
	ni := YMM()
	VCVTPS2DQ(n, ni) // exact: n is an integer, at most 128
	p := YMM()
	VMOVUPS(constAt(cP0), p)
	for i := 1; i < 6; i++ {
		VFMADD213PS(constAt(cP0+i), x, p)
	}
	VMULPS(x, p, p)
	VFMADD213PS(x, x, p)
	VADDPS(constAt(cOne), p, p)
	// 2^n = 2^h · 2^(n−h) with h = n>>1: both factors are normal for
	// every n in [−126, 128], and the first product is exact, so the
	// result is rounded once, as the scalar p·2^n is.
	h := YMM()
	VPSRAD(U8(1), ni, h)
	VPSUBD(h, ni, ni)
	VPSLLD(U8(23), h, h)
	VPSLLD(U8(23), ni, ni)
	VPADDD(constAt(cBias), h, h)
	VPADDD(constAt(cBias), ni, ni)
	VMULPS(h, p, p)
	VMULPS(ni, p, p)
	VANDPS(keep, p, p)
	return p
}

// genExpSum emits the ExpSum kernel of x (expSumDoc). With AVX-512 the
// main loop takes four vectors and adds their exponentials to the sum in
// pairs; with AVX2 (half the registers, and exp2 needs more of them) it
// takes two and adds them in turn, and at most one whole vector is left
// after it.
func genExpSum(x *asmkit.ISA) {
	name := asmkit.Export("expSum" + x.Name)
	TEXT(name, NOSPLIT, "func(dst, src *float32, n int, max float32) float32")
	Pragma("noescape")
	isaDoc := x.Doc
	if !x.IsAVX512() {
		isaDoc += "+FMA"
	}
	doc(name + " is the " + isaDoc + " ExpSum kernel: " + expSumDoc)
	lanes, vb := x.Lanes(), x.VecBytes
	unroll, pairs := 2, false
	if x.IsAVX512() {
		unroll, pairs = 4, true
	}
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	mx := Load(Param("max"), XMM())
	vmax := x.Vec()
	VBROADCASTSS(mx, vmax)
	exp := newVecExp(x, vmax)
	acc := x.Vec()
	x.Zero(acc)

	Label("loop")
	CMPQ(n, U32(lanes*unroll))
	JL(LabelRef("single"))
	ys := make([]VecVirtual, unroll)
	for i := range ys {
		v := x.Vec()
		VMOVUPS(Mem{Base: src}.Offset(vb*i), v)
		ys[i] = exp(v, nil)
	}
	if pairs {
		for i, y := range ys {
			VMOVUPS(y, Mem{Base: dst}.Offset(vb*i))
		}
		for i := 0; i < unroll; i += 2 {
			VADDPS(ys[i], ys[i+1], ys[i])
		}
		for i := 0; i < unroll; i += 2 {
			VADDPS(ys[i], acc, acc)
		}
	} else {
		for i, y := range ys {
			VMOVUPS(y, Mem{Base: dst}.Offset(vb*i))
			VADDPS(y, acc, acc)
		}
	}
	ADDQ(U32(vb*unroll), src)
	ADDQ(U32(vb*unroll), dst)
	SUBQ(U32(lanes*unroll), n)
	JMP(LabelRef("loop"))

	Label("single")
	CMPQ(n, U32(lanes))
	JL(LabelRef("tail"))
	v := x.Vec()
	VMOVUPS(Mem{Base: src}, v)
	y := exp(v, nil)
	VMOVUPS(y, Mem{Base: dst})
	VADDPS(y, acc, acc)
	ADDQ(U32(vb), src)
	ADDQ(U32(vb), dst)
	SUBQ(U32(lanes), n)
	if unroll > 2 {
		JMP(LabelRef("single"))
	}

	Label("tail")
	TESTQ(n, n)
	JE(LabelRef("reduce"))
	t := newTail(x, n)
	v = x.Vec()
	t.load(Mem{Base: src}, v)
	y = exp(v, t)
	t.store(y, Mem{Base: dst})
	VADDPS(y, acc, acc)

	Label("reduce")
	if x.IsAVX512() {
		Store(asmkit.HSum512(acc), ReturnIndex(0))
	} else {
		Store(hsum2(acc), ReturnIndex(0))
	}
	asmkit.Ret()
}

// newVecExp sets up the exponential of v − max for x (the AVX-512
// constants in registers, the AVX2 clamp bound) and returns it; lanes
// outside tail, when not nil, come out 0.
func newVecExp(x *asmkit.ISA, vmax VecVirtual) func(v VecVirtual, t *tail) VecVirtual {
	if x.IsAVX512() {
		e := asmkit.NewExp512(vmax, expConsts(), false)
		return func(v VecVirtual, t *tail) VecVirtual {
			if t == nil {
				return e.Exp(v, nil)
			}
			return e.Exp(v, t.m)
		}
	}
	clamp := YMM()
	VMOVUPS(constAt(cClamp), clamp)
	return func(v VecVirtual, t *tail) VecVirtual {
		if t == nil {
			return exp2(vmax, clamp, v, nil)
		}
		return exp2(vmax, clamp, v, t.m.(VecVirtual))
	}
}

// hsum2 adds the 8 lanes of y into the low lane of the returned xmm.
func hsum2(y VecVirtual) VecVirtual {
	x := XMM()
	VEXTRACTF128(U8(1), y, x)
	VADDPS(x, y.AsX(), x)
	t := XMM()
	VMOVHLPS(x, x, t)
	VADDPS(t, x, x)
	VMOVSHDUP(x, t)
	VADDSS(t, x, x)
	return x
}
