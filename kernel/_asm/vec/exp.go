package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The vector exponential follows kernel/exp.go step by step:
//
//	n = roundToEven(x·log2e)          (x·log2e rounded to float32 first)
//	r = x − n·ln2Hi − n·ln2Lo          (FMA; n·ln2Hi is exact)
//	p = ((((P0·r+P1)·r+P2)·r+P3)·r+P4)·r+P5   (FMA)
//	y = (p·r)·r + r + 1
//	result = y·2^n
//
// and the special cases are handled with masks rather than branches:
// arguments below expMin (−Inf included) give exactly 0 through a "not less
// than expMin" mask that is true for NaN; arguments are clamped to
// expClamp from above, which keeps +Inf out of the reduction while still
// overflowing to +Inf; and a NaN argument flows through every operation
// unchanged (it is the only NaN in each lane's computation, so every
// operation returns it), so the result is the NaN x − max itself.

const expSumDoc = `dst[i] = Exp(src[i]-max) for i < n, returning the sum:

	var sum float32
	for i := range n {
		dst[i] = Exp(src[i] - max)
		sum += dst[i]
	}
	return sum

n >= 1; dst may equal src. The order of the additions differs from the loop.`

// exp512 holds the zmm constants of the AVX-512 exponential.
type exp512 struct {
	max, log2e, hi, lo, one, min, clamp VecVirtual
	p                                   [6]VecVirtual

	// nonPositive says every argument v − max is <= 0 or NaN (v is never
	// above max, as in a softmax over the row maximum): the clamp, which
	// only matters above expMax, is left out, with the same results.
	nonPositive bool
}

// newExp512 broadcasts the constants of the exponential of v − max; with
// nonPositive the arguments are <= 0 or NaN and the clamp is left out.
func newExp512(max VecVirtual, nonPositive bool) *exp512 {
	e := &exp512{max: max, nonPositive: nonPositive}
	e.log2e = broadcast512(cLog2e)
	e.hi = broadcast512(cLn2Hi)
	e.lo = broadcast512(cLn2Lo)
	for i := range e.p {
		e.p[i] = broadcast512(cP0 + i)
	}
	e.one = broadcast512(cOne)
	e.min = broadcast512(cExpMin)
	if !nonPositive {
		e.clamp = broadcast512(cClamp)
	}
	return e
}

// exp computes Exp(v − max) into a new register. Lanes outside the opmask
// tail (when not nil) come out 0.
func (e *exp512) exp(v VecVirtual, tail Register) VecVirtual {
	x := ZMM()
	VSUBPS(e.max, v, x)
	keep := K()
	if tail != nil {
		VCMPPS(U8(5), e.min, x, tail, keep) // !(x < min), NaN included, in tail
	} else {
		VCMPPS(U8(5), e.min, x, keep)
	}
	if !e.nonPositive {
		VMINPS(x, e.clamp, x) // min(clamp, x); NaN x stays x
	}
	n := ZMM()
	VMULPS(e.log2e, x, n)
	VRNDSCALEPS(U8(0), n, n) // round to nearest even
	VFNMADD231PS(e.hi, n, x) // r = x − n·hi
	VFNMADD231PS(e.lo, n, x) // r −= n·lo
	p := ZMM()
	VMOVAPS(e.p[0], p)
	for i := 1; i < 6; i++ {
		VFMADD213PS(e.p[i], x, p) // p = p·r + Pi
	}
	VMULPS(x, p, p)            // p·r
	VFMADD213PS(x, x, p)       // (p·r)·r + r
	VADDPS(e.one, p, p)        // + 1
	VSCALEFPS_Z(n, p, keep, p) // ·2^n, 0 where x < expMin
	return p
}

func genExpSumAVX512() {
	TEXT("expSumAVX512", NOSPLIT, "func(dst, src *float32, n int, max float32) float32")
	Pragma("noescape")
	doc("expSumAVX512 is the AVX-512 ExpSum kernel: " + expSumDoc)
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	mx := Load(Param("max"), XMM())
	vmax := ZMM()
	VBROADCASTSS(mx, vmax)
	e := newExp512(vmax, false)
	acc := ZMM()
	VPXORD(acc, acc, acc) // VXORPS on zmm would need AVX512DQ

	const unroll = 4
	Label("loop")
	CMPQ(n, U32(16*unroll))
	JL(LabelRef("single"))
	var ys [unroll]VecVirtual
	for i := range ys {
		v := ZMM()
		VMOVUPS(Mem{Base: src}.Offset(64*i), v)
		ys[i] = e.exp(v, nil)
	}
	for i, y := range ys {
		VMOVUPS(y, Mem{Base: dst}.Offset(64*i))
	}
	VADDPS(ys[0], ys[1], ys[0])
	VADDPS(ys[2], ys[3], ys[2])
	VADDPS(ys[0], acc, acc)
	VADDPS(ys[2], acc, acc)
	ADDQ(U32(64*unroll), src)
	ADDQ(U32(64*unroll), dst)
	SUBQ(U32(16*unroll), n)
	JMP(LabelRef("loop"))

	Label("single")
	CMPQ(n, U32(16))
	JL(LabelRef("tail"))
	v := ZMM()
	VMOVUPS(Mem{Base: src}, v)
	y := e.exp(v, nil)
	VMOVUPS(y, Mem{Base: dst})
	VADDPS(y, acc, acc)
	ADDQ(U32(64), src)
	ADDQ(U32(64), dst)
	SUBQ(U32(16), n)
	JMP(LabelRef("single"))

	Label("tail")
	TESTQ(n, n)
	JE(LabelRef("reduce"))
	k := mask16(n)
	v = ZMM()
	VMOVUPS_Z(Mem{Base: src}, k, v)
	y = e.exp(v, k)
	VMOVUPS(y, k, Mem{Base: dst})
	VADDPS(y, acc, acc)

	Label("reduce")
	Store(hsum512(acc), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// hsum512 adds the 16 lanes of z into the low lane of the returned xmm,
// using only EVEX-encodable instructions.
func hsum512(z VecVirtual) Register {
	y := ZMM()
	VEXTRACTF64X4(U8(1), z, y.AsY())
	VADDPS(y.AsY(), z.AsY(), y.AsY())
	x := ZMM()
	VEXTRACTF32X4(U8(1), y.AsY(), x.AsX())
	VADDPS(x.AsX(), y.AsX(), x.AsX())
	t := ZMM()
	VPERMILPS(U8(0x4e), x.AsX(), t.AsX())
	VADDPS(t.AsX(), x.AsX(), x.AsX())
	VPERMILPS(U8(0xb1), x.AsX(), t.AsX())
	VADDPS(t.AsX(), x.AsX(), x.AsX())
	return x.AsX()
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

func genExpSumAVX2() {
	TEXT("expSumAVX2", NOSPLIT, "func(dst, src *float32, n int, max float32) float32")
	Pragma("noescape")
	doc("expSumAVX2 is the AVX2+FMA ExpSum kernel: " + expSumDoc)
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	mx := Load(Param("max"), XMM())
	vmax := YMM()
	VBROADCASTSS(mx, vmax)
	clamp := YMM()
	VMOVUPS(constAt(cClamp), clamp)
	acc := YMM()
	VXORPS(acc, acc, acc)

	const unroll = 2
	Label("loop")
	CMPQ(n, U32(8*unroll))
	JL(LabelRef("single"))
	var ys [unroll]VecVirtual
	for i := range ys {
		v := YMM()
		VMOVUPS(Mem{Base: src}.Offset(32*i), v)
		ys[i] = exp2(vmax, clamp, v, nil)
	}
	for i, y := range ys {
		VMOVUPS(y, Mem{Base: dst}.Offset(32*i))
		VADDPS(y, acc, acc)
	}
	ADDQ(U32(32*unroll), src)
	ADDQ(U32(32*unroll), dst)
	SUBQ(U32(8*unroll), n)
	JMP(LabelRef("loop"))

	Label("single")
	CMPQ(n, U32(8))
	JL(LabelRef("tail"))
	v := YMM()
	VMOVUPS(Mem{Base: src}, v)
	y := exp2(vmax, clamp, v, nil)
	VMOVUPS(y, Mem{Base: dst})
	VADDPS(y, acc, acc)
	ADDQ(U32(32), src)
	ADDQ(U32(32), dst)
	SUBQ(U32(8), n)

	Label("tail")
	TESTQ(n, n)
	JE(LabelRef("reduce"))
	m := mask8(n)
	v = YMM()
	VMASKMOVPS(Mem{Base: src}, m, v)
	y = exp2(vmax, clamp, v, m)
	VMASKMOVPS(y, m, Mem{Base: dst})
	VADDPS(y, acc, acc)

	Label("reduce")
	Store(hsum2(acc), ReturnIndex(0))
	VZEROUPPER()
	RET()
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
