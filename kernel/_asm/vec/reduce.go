package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

const maxDoc = `the largest of x[0:n], or the first NaN among them:

	m := float32(math.Inf(-1))
	for _, v := range x[:n] {
		if v != v {
			return v
		}
		m = max(m, v)
	}
	return m

n >= 1. VMAXPS alone drops NaN operands, so the kernel ORs an unordered
compare of every vector into a NaN flag and, when it is set, rescans for
the first NaN.`

const scaleDoc = `dst[i] = a * src[i] for i < n:

	for i := range n {
		dst[i] = a * src[i]
	}

n >= 1; dst may equal src.`

// nanScan emits the rescan that returns the first NaN of x (one is known
// to be there) and returns from the function.
func nanScan(x Register) {
	Label("nan")
	s := XMM()
	Label("scan")
	VMOVSS(Mem{Base: x}, s)
	VUCOMISS(s, s)
	JPS(LabelRef("found"))
	ADDQ(U32(4), x)
	JMP(LabelRef("scan"))
	Label("found")
	Store(s, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

func genMaxAVX512() {
	TEXT("maxAVX512", NOSPLIT, "func(x *float32, n int) float32")
	Pragma("noescape")
	doc("maxAVX512 is the AVX-512 Max kernel: " + maxDoc)
	base := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	x := GP64()
	MOVQ(base, x)
	negInf := broadcast512(cNegInf)
	var acc [4]VecVirtual
	for i := range acc {
		acc[i] = ZMM()
		VMOVAPS(negInf, acc[i])
	}
	knan := K()
	KXORW(knan, knan, knan)

	Label("loop")
	CMPQ(n, U32(64))
	JL(LabelRef("single"))
	var v [4]VecVirtual
	for i := range v {
		v[i] = ZMM()
		VMOVUPS(Mem{Base: x}.Offset(64*i), v[i])
		VMAXPS(v[i], acc[i], acc[i])
	}
	for i := 0; i < 4; i += 2 {
		k := K()
		VCMPPS(U8(3), v[i+1], v[i], k) // unordered: either is NaN
		KORW(k, knan, knan)
	}
	ADDQ(U32(256), x)
	SUBQ(U32(64), n)
	JMP(LabelRef("loop"))

	Label("single")
	CMPQ(n, U32(16))
	JL(LabelRef("tail"))
	w := ZMM()
	VMOVUPS(Mem{Base: x}, w)
	VMAXPS(w, acc[0], acc[0])
	k := K()
	VCMPPS(U8(3), w, w, k)
	KORW(k, knan, knan)
	ADDQ(U32(64), x)
	SUBQ(U32(16), n)
	JMP(LabelRef("single"))

	Label("tail")
	TESTQ(n, n)
	JE(LabelRef("reduce"))
	kt := mask16(n)
	w = ZMM()
	VMOVAPS(negInf, w)
	VMOVUPS(Mem{Base: x}, kt, w) // lanes past n stay −Inf
	VMAXPS(w, acc[1], acc[1])
	k = K()
	VCMPPS(U8(3), w, w, k)
	KORW(k, knan, knan)

	Label("reduce")
	KORTESTW(knan, knan)
	JNE(LabelRef("nan"))
	r := XMM()
	hmax512(acc, r)
	Store(r, ReturnIndex(0))
	VZEROUPPER()
	RET()

	nanScan(base)
}

// hmax512 writes the largest lane of the four accumulators into dst (an
// xmm; VMAXPS throughout, so NaN lanes must have been ruled out).
func hmax512(acc [4]VecVirtual, dst Register) {
	VMAXPS(acc[1], acc[0], acc[0])
	VMAXPS(acc[3], acc[2], acc[2])
	VMAXPS(acc[2], acc[0], acc[0])
	y := ZMM()
	VEXTRACTF64X4(U8(1), acc[0], y.AsY())
	VMAXPS(y.AsY(), acc[0].AsY(), y.AsY())
	r := ZMM()
	VEXTRACTF32X4(U8(1), y.AsY(), r.AsX())
	VMAXPS(r.AsX(), y.AsX(), r.AsX())
	t := ZMM()
	VPERMILPS(U8(0x4e), r.AsX(), t.AsX())
	VMAXPS(t.AsX(), r.AsX(), r.AsX())
	VPERMILPS(U8(0xb1), r.AsX(), t.AsX())
	VMAXPS(t.AsX(), r.AsX(), dst)
}

func genMaxAVX2() {
	TEXT("maxAVX2", NOSPLIT, "func(x *float32, n int) float32")
	Pragma("noescape")
	doc("maxAVX2 is the AVX2 Max kernel: " + maxDoc)
	base := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	x := GP64()
	MOVQ(base, x)
	negInf := YMM()
	VMOVUPS(constAt(cNegInf), negInf)
	var acc [2]VecVirtual
	for i := range acc {
		acc[i] = YMM()
		VMOVAPS(negInf, acc[i])
	}
	nan := YMM()
	VXORPS(nan, nan, nan)

	Label("loop")
	CMPQ(n, U32(32))
	JL(LabelRef("single"))
	var v [4]VecVirtual
	for i := range v {
		v[i] = YMM()
		VMOVUPS(Mem{Base: x}.Offset(32*i), v[i])
		VMAXPS(v[i], acc[i%2], acc[i%2])
	}
	for i := 0; i < 4; i += 2 {
		u := YMM()
		VCMPPS(U8(3), v[i+1], v[i], u)
		VORPS(u, nan, nan)
	}
	ADDQ(U32(128), x)
	SUBQ(U32(32), n)
	JMP(LabelRef("loop"))

	Label("single")
	CMPQ(n, U32(8))
	JL(LabelRef("tail"))
	w := YMM()
	VMOVUPS(Mem{Base: x}, w)
	VMAXPS(w, acc[0], acc[0])
	u := YMM()
	VCMPPS(U8(3), w, w, u)
	VORPS(u, nan, nan)
	ADDQ(U32(32), x)
	SUBQ(U32(8), n)
	JMP(LabelRef("single"))

	Label("tail")
	TESTQ(n, n)
	JE(LabelRef("reduce"))
	m := mask8(n)
	w = YMM()
	VMASKMOVPS(Mem{Base: x}, m, w)
	VBLENDVPS(m, w, negInf, w) // lanes past n become −Inf
	VMAXPS(w, acc[1], acc[1])
	u = YMM()
	VCMPPS(U8(3), w, w, u)
	VORPS(u, nan, nan)

	Label("reduce")
	bits := GP32()
	VMOVMSKPS(nan, bits)
	TESTL(bits, bits)
	JNE(LabelRef("nan"))
	VMAXPS(acc[1], acc[0], acc[0])
	r := XMM()
	VEXTRACTF128(U8(1), acc[0], r)
	VMAXPS(r, acc[0].AsX(), r)
	t := XMM()
	VPERMILPS(U8(0x4e), r, t)
	VMAXPS(t, r, r)
	VPERMILPS(U8(0xb1), r, t)
	VMAXPS(t, r, r)
	Store(r, ReturnIndex(0))
	VZEROUPPER()
	RET()

	nanScan(base)
}

func genScaleAVX512() {
	TEXT("scaleAVX512", NOSPLIT, "func(dst, src *float32, n int, a float32)")
	Pragma("noescape")
	doc("scaleAVX512 is the AVX-512 Scale kernel: " + scaleDoc)
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	ax := Load(Param("a"), XMM())
	a := ZMM()
	VBROADCASTSS(ax, a)

	Label("loop")
	CMPQ(n, U32(64))
	JL(LabelRef("single"))
	var v [4]VecVirtual
	for i := range v {
		v[i] = ZMM()
		VMULPS(Mem{Base: src}.Offset(64*i), a, v[i])
	}
	for i := range v {
		VMOVUPS(v[i], Mem{Base: dst}.Offset(64*i))
	}
	ADDQ(U32(256), src)
	ADDQ(U32(256), dst)
	SUBQ(U32(64), n)
	JMP(LabelRef("loop"))

	Label("single")
	CMPQ(n, U32(16))
	JL(LabelRef("tail"))
	w := ZMM()
	VMULPS(Mem{Base: src}, a, w)
	VMOVUPS(w, Mem{Base: dst})
	ADDQ(U32(64), src)
	ADDQ(U32(64), dst)
	SUBQ(U32(16), n)
	JMP(LabelRef("single"))

	Label("tail")
	TESTQ(n, n)
	JE(LabelRef("done"))
	k := mask16(n)
	w = ZMM()
	VMOVUPS_Z(Mem{Base: src}, k, w)
	VMULPS(w, a, w)
	VMOVUPS(w, k, Mem{Base: dst})

	Label("done")
	VZEROUPPER()
	RET()
}

func genScaleAVX2() {
	TEXT("scaleAVX2", NOSPLIT, "func(dst, src *float32, n int, a float32)")
	Pragma("noescape")
	doc("scaleAVX2 is the AVX2 Scale kernel: " + scaleDoc)
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	ax := Load(Param("a"), XMM())
	a := YMM()
	VBROADCASTSS(ax, a)

	Label("loop")
	CMPQ(n, U32(32))
	JL(LabelRef("single"))
	var v [4]VecVirtual
	for i := range v {
		v[i] = YMM()
		VMULPS(Mem{Base: src}.Offset(32*i), a, v[i])
	}
	for i := range v {
		VMOVUPS(v[i], Mem{Base: dst}.Offset(32*i))
	}
	ADDQ(U32(128), src)
	ADDQ(U32(128), dst)
	SUBQ(U32(32), n)
	JMP(LabelRef("loop"))

	Label("single")
	CMPQ(n, U32(8))
	JL(LabelRef("tail"))
	w := YMM()
	VMULPS(Mem{Base: src}, a, w)
	VMOVUPS(w, Mem{Base: dst})
	ADDQ(U32(32), src)
	ADDQ(U32(32), dst)
	SUBQ(U32(8), n)
	JMP(LabelRef("single"))

	Label("tail")
	TESTQ(n, n)
	JE(LabelRef("done"))
	m := mask8(n)
	w = YMM()
	VMASKMOVPS(Mem{Base: src}, m, w)
	VMULPS(w, a, w)
	VMASKMOVPS(w, m, Mem{Base: dst})

	Label("done")
	VZEROUPPER()
	RET()
}
