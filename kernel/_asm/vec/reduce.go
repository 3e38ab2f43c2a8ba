package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
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

// genMax emits the Max kernel of x (maxDoc).
func genMax(x *asmkit.ISA) {
	name := asmkit.Export("max" + x.Name)
	TEXT(name, NOSPLIT, "func(x *float32, n int) float32")
	Pragma("noescape")
	doc(name + " is the " + x.Doc + " Max kernel: " + maxDoc)
	lanes, vb := x.Lanes(), x.VecBytes
	base := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	p := GP64()
	MOVQ(base, p)
	negInf := constVec(x, cNegInf)
	// The four vectors of an iteration go to four accumulators with
	// AVX-512 and to two with AVX2, which has half the registers.
	acc := make([]VecVirtual, 4)
	if !x.IsAVX512() {
		acc = acc[:2]
	}
	for i := range acc {
		acc[i] = x.Vec()
		VMOVAPS(negInf, acc[i])
	}
	nan := newNaNFlag(x)

	Label("loop")
	CMPQ(n, U32(4*lanes))
	JL(LabelRef("single"))
	var v [4]VecVirtual
	for i := range v {
		v[i] = x.Vec()
		VMOVUPS(Mem{Base: p}.Offset(vb*i), v[i])
		a := acc[i%len(acc)]
		VMAXPS(v[i], a, a)
	}
	for i := 0; i < 4; i += 2 {
		nan.or(v[i+1], v[i]) // unordered: either is NaN
	}
	ADDQ(U32(4*vb), p)
	SUBQ(U32(4*lanes), n)
	JMP(LabelRef("loop"))

	Label("single")
	CMPQ(n, U32(lanes))
	JL(LabelRef("tail"))
	w := x.Vec()
	VMOVUPS(Mem{Base: p}, w)
	VMAXPS(w, acc[0], acc[0])
	nan.or(w, w)
	ADDQ(U32(vb), p)
	SUBQ(U32(lanes), n)
	JMP(LabelRef("single"))

	Label("tail")
	TESTQ(n, n)
	JE(LabelRef("reduce"))
	t := newTail(x, n)
	w = x.Vec()
	t.loadFill(Mem{Base: p}, negInf, w) // lanes past n are −Inf
	VMAXPS(w, acc[1], acc[1])
	nan.or(w, w)

	Label("reduce")
	nan.jumpIfSet("nan")
	r := XMM()
	if x.IsAVX512() {
		hmax512([4]VecVirtual(acc), r)
	} else {
		hmax2(acc, r)
	}
	Store(r, ReturnIndex(0))
	asmkit.Ret()

	nanScan(base)
}

// nanFlag accumulates unordered compares: in an opmask with AVX-512, in a
// ymm with AVX2.
type nanFlag struct {
	x *asmkit.ISA
	f VecVirtual // AVX2
	k Register   // AVX-512
}

func newNaNFlag(x *asmkit.ISA) *nanFlag {
	f := &nanFlag{x: x}
	if x.IsAVX512() {
		f.k = K()
		KXORW(f.k, f.k, f.k)
	} else {
		f.f = YMM()
		VXORPS(f.f, f.f, f.f)
	}
	return f
}

// or sets the flag if a lane of a or b is NaN.
func (f *nanFlag) or(a, b VecVirtual) {
	if f.x.IsAVX512() {
		k := K()
		VCMPPS(U8(3), a, b, k)
		KORW(k, f.k, f.k)
	} else {
		u := YMM()
		VCMPPS(U8(3), a, b, u)
		VORPS(u, f.f, f.f)
	}
}

// jumpIfSet jumps to label if the flag is set.
func (f *nanFlag) jumpIfSet(label string) {
	if f.x.IsAVX512() {
		KORTESTW(f.k, f.k)
	} else {
		bits := GP32()
		VMOVMSKPS(f.f, bits)
		TESTL(bits, bits)
	}
	JNE(LabelRef(label))
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

// hmax2 writes the largest lane of the two ymm accumulators into r (an
// xmm; NaN lanes must have been ruled out).
func hmax2(acc []VecVirtual, r VecVirtual) {
	VMAXPS(acc[1], acc[0], acc[0])
	VEXTRACTF128(U8(1), acc[0], r)
	VMAXPS(r, acc[0].AsX(), r)
	t := XMM()
	VPERMILPS(U8(0x4e), r, t)
	VMAXPS(t, r, r)
	VPERMILPS(U8(0xb1), r, t)
	VMAXPS(t, r, r)
}

// genScale emits the Scale kernel of x (scaleDoc).
func genScale(x *asmkit.ISA) {
	name := asmkit.Export("scale" + x.Name)
	TEXT(name, NOSPLIT, "func(dst, src *float32, n int, a float32)")
	Pragma("noescape")
	doc(name + " is the " + x.Doc + " Scale kernel: " + scaleDoc)
	lanes, vb := x.Lanes(), x.VecBytes
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	ax := Load(Param("a"), XMM())
	a := x.Vec()
	VBROADCASTSS(ax, a)

	Label("loop")
	CMPQ(n, U32(4*lanes))
	JL(LabelRef("single"))
	var v [4]VecVirtual
	for i := range v {
		v[i] = x.Vec()
		VMULPS(Mem{Base: src}.Offset(vb*i), a, v[i])
	}
	for i := range v {
		VMOVUPS(v[i], Mem{Base: dst}.Offset(vb*i))
	}
	ADDQ(U32(4*vb), src)
	ADDQ(U32(4*vb), dst)
	SUBQ(U32(4*lanes), n)
	JMP(LabelRef("loop"))

	Label("single")
	CMPQ(n, U32(lanes))
	JL(LabelRef("tail"))
	w := x.Vec()
	VMULPS(Mem{Base: src}, a, w)
	VMOVUPS(w, Mem{Base: dst})
	ADDQ(U32(vb), src)
	ADDQ(U32(vb), dst)
	SUBQ(U32(lanes), n)
	JMP(LabelRef("single"))

	Label("tail")
	TESTQ(n, n)
	JE(LabelRef("done"))
	t := newTail(x, n)
	w = x.Vec()
	t.load(Mem{Base: src}, w)
	VMULPS(w, a, w)
	t.store(w, Mem{Base: dst})

	Label("done")
	asmkit.Ret()
}
