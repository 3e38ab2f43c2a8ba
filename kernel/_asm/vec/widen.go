package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
)

// The bfloat16 conversions of the levels without bf16 instructions: the
// exact widening of bfloat16 operands to float32 that the widened products
// (kernel/bf16_widen.go) multiply, and the integer rounding of float32 to
// bfloat16 (RoundBF16) that their softmax and packs use.
//
// A bfloat16 widens to the float32 with its bits in the high half; one
// whose exponent field is 0 (zero or subnormal) keeps only its sign, as
// the bf16 instructions read it. The rounding adds 0x7fff plus the lowest
// kept bit and keeps the high half; a NaN becomes the quiet NaN of its high
// half, a zero or subnormal input the zero of its sign.
//
// AVX-512 ends a row through an opmask. AVX2 redoes the last 8 elements of
// a row of 8 or more (overlapping the vector before: the same values are
// written again), and runs a row shorter than 8 element by element.

const widenDoc = `dst[i] = bf16Value(src[i]) for i < n:

	for i := range n {
		b := src[i]
		if b&0x7f80 == 0 {
			b &= 0x8000 // zero or subnormal: a zero of its sign
		}
		dst[i] = math.Float32frombits(uint32(b) << 16)
	}

n >= 1.`

const widenPairsDoc = `the first and second elements of n pairs,
widened as bf16Value widens them, into even and odd:

	for j := range n {
		even[j], odd[j] = bf16Value(src[2*j]), bf16Value(src[2*j+1])
	}

n >= 1.`

const roundBitsDoc = `dst[i] = RoundBF16(src[i]) for i < n, with
integer instructions:

	u := math.Float32bits(src[i])
	switch {
	case u&0x7fffffff > 0x7f800000: // NaN: quiet, sign kept
		dst[i] = uint16(u>>16 | 0x0040)
	case u&0x7f800000 == 0: // zero or subnormal: a zero of its sign
		dst[i] = uint16(u >> 16 & 0x8000)
	default: // to nearest, ties to even; may round up to ±Inf
		dst[i] = uint16((u + 0x7fff + (u>>16)&1) >> 16)
	}

n >= 1.`

// bfConsts holds the constants of the conversions in registers.
type bfConsts struct {
	x                *asmkit.ISA
	exp, sign, hi    VecVirtual // 0x7f800000, 0x80000000, 0xffff0000
	abs              VecVirtual // 0x7fffffff
	one, bias, quiet VecVirtual // 1, 0x7fff, 0x00400000
	zero             VecVirtual // AVX2: 0
}

// newBFConsts loads the constants of the widening (pairs: of pairs too)
// or, round, of the rounding.
func newBFConsts(x *asmkit.ISA, pairs, round bool) *bfConsts {
	c := &bfConsts{x: x}
	c.exp = constVec(x, cExpMask)
	if round || x.IsAVX512() {
		c.sign = constVec(x, cSignMask)
	}
	if pairs {
		c.hi = constVec(x, cHi16)
	}
	if round {
		c.abs, c.one, c.bias, c.quiet = constVec(x, cAbsMask), constVec(x, cOneBit), constVec(x, cRoundBias), constVec(x, cQuietBit)
	}
	if !x.IsAVX512() {
		c.zero = YMM()
		VPXOR(c.zero, c.zero, c.zero)
	}
	return c
}

// flush makes the lanes of v (float32 bits) whose exponent field is 0 the
// zero of their sign.
func (c *bfConsts) flush(v VecVirtual) {
	if c.x.IsAVX512() {
		k := K()
		VPTESTNMD(c.exp, v, k)
		VPANDD(c.sign, v, k, v)
		return
	}
	m := YMM()
	VPAND(c.exp, v, m)
	VPCMPEQD(c.zero, m, m) // all ones where the exponent is 0,
	VPSRLD(U8(1), m, m)    // cut to the bits to clear
	VPANDN(v, m, v)        // v &^ m
}

// round turns the float32 lanes of u into their bfloat16 bits in the low
// half of each lane (the high half zero), clobbering u.
func (c *bfConsts) round(u VecVirtual) VecVirtual {
	r := c.x.Vec()
	VPSRLD(U8(16), u, r)
	if c.x.IsAVX512() {
		VPANDD(c.one, r, r)
		VPADDD(c.bias, r, r)
		VPADDD(u, r, r) // u + 0x7fff + lowest kept bit
		a := ZMM()
		VPANDD(c.abs, u, a)
		nan, z := K(), K()
		VPCMPGTD(c.exp, a, nan) // |u| > +Inf
		VPTESTNMD(c.exp, u, z)
		VPORD(c.quiet, u, nan, r)
		VPANDD(c.sign, u, z, r)
	} else {
		VPAND(c.one, r, r)
		VPADDD(c.bias, r, r)
		VPADDD(u, r, r)
		a := YMM()
		VPAND(c.abs, u, a)
		VPCMPGTD(c.exp, a, a) // NaN lanes
		q := YMM()
		VPOR(c.quiet, u, q)
		VPBLENDVB(a, q, r, r)
		z := YMM()
		VPAND(c.exp, u, z)
		VPCMPEQD(c.zero, z, z) // zero or subnormal lanes
		VPAND(c.sign, u, q)
		VPBLENDVB(z, q, r, r)
	}
	VPSRLD(U8(16), r, r)
	return r
}

func genWidenBF16(x *asmkit.ISA) {
	name := asmkit.Export("widenBF16" + x.Name)
	TEXT(name, NOSPLIT, "func(dst *float32, src *uint16, n int)")
	Pragma("noescape")
	doc(name + " is the " + x.Doc + " widening of a bfloat16 row: " + widenDoc)
	lanes, vb := x.Lanes(), x.VecBytes
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	c := newBFConsts(x, false, false)
	widen := func(m Op) VecVirtual {
		v := x.Vec()
		VPMOVZXWD(m, v)
		VPSLLD(U8(16), v, v)
		c.flush(v)
		return v
	}
	if !x.IsAVX512() {
		CMPQ(n, U32(lanes))
		JL(LabelRef("scalar"))
	}

	Label("loop")
	CMPQ(n, U32(2*lanes))
	JL(LabelRef("single"))
	var v [2]VecVirtual
	for i := range v {
		v[i] = widen(Mem{Base: src}.Offset(2 * lanes * i))
	}
	for i := range v {
		VMOVUPS(v[i], Mem{Base: dst}.Offset(vb*i))
	}
	ADDQ(U32(4*lanes), src)
	ADDQ(U32(2*vb), dst)
	SUBQ(U32(2*lanes), n)
	JMP(LabelRef("loop"))

	Label("single")
	CMPQ(n, U32(lanes))
	JL(LabelRef("tail"))
	w := widen(Mem{Base: src})
	VMOVUPS(w, Mem{Base: dst})
	ADDQ(U32(2*lanes), src)
	ADDQ(U32(vb), dst)
	SUBQ(U32(lanes), n)

	Label("tail")
	TESTQ(n, n)
	JE(LabelRef("done"))
	if x.IsAVX512() {
		k := mask16(n)
		h := YMM()
		VMOVDQU16_Z(Mem{Base: src}, k, h)
		w = widen(h)
		VMOVUPS(w, k, Mem{Base: dst})
	} else {
		// The last 8 elements, overlapping the vector before.
		back := GP64()
		MOVQ(U32(lanes), back)
		SUBQ(n, back)
		NEGQ(back)
		w = widen(Mem{Base: src, Index: back, Scale: 2, Disp: 0})
		VMOVUPS(w, Mem{Base: dst, Index: back, Scale: 4})
		JMP(LabelRef("done"))

		Label("scalar")
		b := GP32()
		Label("selem")
		MOVWLZX(Mem{Base: src}, b)
		scalarFlush(b)
		SHLL(U8(16), b)
		MOVL(b, Mem{Base: dst})
		ADDQ(U32(2), src)
		ADDQ(U32(4), dst)
		DECQ(n)
		JNZ(LabelRef("selem"))
	}
	Label("done")
	asmkit.Ret()
}

// scalarFlush keeps only the sign of the bfloat16 in b when its exponent
// field is 0.
func scalarFlush(b Register) {
	s := GP32()
	MOVL(b, s)
	ANDL(U32(0x8000), s)
	TESTL(U32(0x7f80), b)
	CMOVLEQ(s, b)
}

func genWidenPairsBF16(x *asmkit.ISA) {
	name := asmkit.Export("widenPairsBF16" + x.Name)
	TEXT(name, NOSPLIT, "func(even, odd *float32, src *uint16, n int)")
	Pragma("noescape")
	doc(name + " is the " + x.Doc + " widening of a row of bfloat16 pairs: " + widenPairsDoc)
	lanes, vb := x.Lanes(), x.VecBytes
	even := Load(Param("even"), GP64())
	odd := Load(Param("odd"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	c := newBFConsts(x, true, false)
	// split widens the pairs in u (a vector of them) and stores their
	// even and odd elements through store, from the bases even and odd.
	split := func(u VecVirtual, store func(v VecVirtual, base Register)) {
		e, o := x.Vec(), x.Vec()
		VPSLLD(U8(16), u, e)
		if x.IsAVX512() {
			VPANDD(c.hi, u, o)
		} else {
			VPAND(c.hi, u, o)
		}
		c.flush(e)
		c.flush(o)
		store(e, even)
		store(o, odd)
	}
	at := func(off int) func(v VecVirtual, base Register) {
		return func(v VecVirtual, base Register) { VMOVUPS(v, Mem{Base: base}.Offset(off)) }
	}
	if !x.IsAVX512() {
		CMPQ(n, U32(lanes))
		JL(LabelRef("scalar"))
	}

	Label("loop")
	CMPQ(n, U32(2*lanes))
	JL(LabelRef("single"))
	var u [2]VecVirtual
	for i := range u {
		u[i] = x.Vec()
		VMOVDQU32orDQU(x, Mem{Base: src}.Offset(vb*i), u[i])
	}
	for i := range u {
		split(u[i], at(vb*i))
	}
	ADDQ(U32(2*vb), src)
	ADDQ(U32(2*vb), even)
	ADDQ(U32(2*vb), odd)
	SUBQ(U32(2*lanes), n)
	JMP(LabelRef("loop"))

	Label("single")
	CMPQ(n, U32(lanes))
	JL(LabelRef("tail"))
	w := x.Vec()
	VMOVDQU32orDQU(x, Mem{Base: src}, w)
	split(w, at(0))
	ADDQ(U32(vb), src)
	ADDQ(U32(vb), even)
	ADDQ(U32(vb), odd)
	SUBQ(U32(lanes), n)

	Label("tail")
	TESTQ(n, n)
	JE(LabelRef("done"))
	if x.IsAVX512() {
		k := mask16(n)
		w = ZMM()
		VMOVDQU32_Z(Mem{Base: src}, k, w)
		split(w, func(v VecVirtual, base Register) { VMOVUPS(v, k, Mem{Base: base}) })
	} else {
		// The last 8 pairs, overlapping the vector before.
		back := GP64()
		MOVQ(U32(lanes), back)
		SUBQ(n, back)
		NEGQ(back)
		w = YMM()
		VMOVDQU(Mem{Base: src, Index: back, Scale: 4}, w)
		split(w, func(v VecVirtual, base Register) { VMOVUPS(v, Mem{Base: base, Index: back, Scale: 4}) })
		JMP(LabelRef("done"))

		Label("scalar")
		b := GP32()
		Label("spair")
		for i, out := range []Register{even, odd} {
			MOVWLZX(Mem{Base: src}.Offset(2*i), b)
			scalarFlush(b)
			SHLL(U8(16), b)
			MOVL(b, Mem{Base: out})
		}
		ADDQ(U32(4), src)
		ADDQ(U32(4), even)
		ADDQ(U32(4), odd)
		DECQ(n)
		JNZ(LabelRef("spair"))
	}
	Label("done")
	asmkit.Ret()
}

// VMOVDQU32orDQU loads a whole vector of integers: VMOVDQU32 on a zmm,
// VMOVDQU on a ymm.
func VMOVDQU32orDQU(x *asmkit.ISA, m Mem, v VecVirtual) {
	if x.IsAVX512() {
		VMOVDQU32(m, v)
	} else {
		VMOVDQU(m, v)
	}
}

func genRoundBF16Bits(x *asmkit.ISA) {
	name := asmkit.Export("roundBF16Bits" + x.Name)
	TEXT(name, NOSPLIT, "func(dst *uint16, src *float32, n int)")
	Pragma("noescape")
	doc(name + " is the " + x.Doc + " rounding of a row to bfloat16: " + roundBitsDoc)
	lanes, vb := x.Lanes(), x.VecBytes
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	c := newBFConsts(x, false, true)
	// store writes the bfloat16 bits of the lanes of r (low halves) to m.
	store := func(r VecVirtual, m Mem) {
		if x.IsAVX512() {
			VPMOVDW(r, m)
			return
		}
		h := XMM()
		VEXTRACTI128(U8(1), r, h)
		VPACKUSDW(h, r.AsX(), h)
		VMOVDQU(h, m)
	}
	if !x.IsAVX512() {
		CMPQ(n, U32(lanes))
		JL(LabelRef("scalar"))
	}

	Label("loop")
	CMPQ(n, U32(2*lanes))
	JL(LabelRef("single"))
	var r [2]VecVirtual
	for i := range r {
		u := x.Vec()
		VMOVDQU32orDQU(x, Mem{Base: src}.Offset(vb*i), u)
		r[i] = c.round(u)
	}
	if x.IsAVX512() {
		for i := range r {
			store(r[i], Mem{Base: dst}.Offset(2*lanes*i))
		}
	} else {
		// One 32-byte store: the packed words of both vectors, their
		// 128-bit lanes put back in order.
		p := YMM()
		VPACKUSDW(r[1], r[0], p)
		VPERMQ(U8(0xd8), p, p)
		VMOVDQU(p, Mem{Base: dst})
	}
	ADDQ(U32(2*vb), src)
	ADDQ(U32(4*lanes), dst)
	SUBQ(U32(2*lanes), n)
	JMP(LabelRef("loop"))

	Label("single")
	CMPQ(n, U32(lanes))
	JL(LabelRef("tail"))
	u := x.Vec()
	VMOVDQU32orDQU(x, Mem{Base: src}, u)
	store(c.round(u), Mem{Base: dst})
	ADDQ(U32(vb), src)
	ADDQ(U32(2*lanes), dst)
	SUBQ(U32(lanes), n)

	Label("tail")
	TESTQ(n, n)
	JE(LabelRef("done"))
	if x.IsAVX512() {
		k := mask16(n)
		u = ZMM()
		VMOVDQU32_Z(Mem{Base: src}, k, u)
		VPMOVDW(c.round(u), k, Mem{Base: dst})
	} else {
		// The last 8 elements, overlapping the vector before.
		back := GP64()
		MOVQ(U32(lanes), back)
		SUBQ(n, back)
		NEGQ(back)
		u = YMM()
		VMOVDQU(Mem{Base: src, Index: back, Scale: 4}, u)
		store(c.round(u), Mem{Base: dst, Index: back, Scale: 2})
		JMP(LabelRef("done"))

		Label("scalar")
		v, t := GP32(), GP32()
		Label("selem")
		MOVL(Mem{Base: src}, v)
		MOVL(v, t)
		ANDL(U32(0x7fffffff), t)
		CMPL(t, U32(0x7f800000))
		JA(LabelRef("snan"))
		TESTL(U32(0x7f800000), v)
		JZ(LabelRef("szero"))
		MOVL(v, t)
		SHRL(U8(16), t)
		ANDL(U32(1), t)
		LEAL(Mem{Base: v, Index: t, Scale: 1, Disp: 0x7fff}, v)
		JMP(LabelRef("sstore"))
		Label("snan")
		ORL(U32(0x00400000), v)
		JMP(LabelRef("sstore"))
		Label("szero")
		ANDL(U32(0x80000000), v)
		Label("sstore")
		SHRL(U8(16), v)
		MOVW(v.As16(), Mem{Base: dst})
		ADDQ(U32(4), src)
		ADDQ(U32(2), dst)
		DECQ(n)
		JNZ(LabelRef("selem"))
	}
	Label("done")
	asmkit.Ret()
}

const addScaleDoc = `dst[i] = a * (dst[i] + src[i]) for i < n:

	for i := range n {
		dst[i] = a * (dst[i] + src[i])
	}

n >= 1; a = 1 leaves the sums as they are. The widened QKTBF16 adds the
scores of its later blocks of components with it.`

func genAddScale(x *asmkit.ISA) {
	name := asmkit.Export("addScale" + x.Name)
	TEXT(name, NOSPLIT, "func(dst, src *float32, n int, a float32)")
	Pragma("noescape")
	doc(name + " is the " + x.Doc + " scaled addition of a row: " + addScaleDoc)
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
		VMOVUPS(Mem{Base: dst}.Offset(vb*i), v[i])
		VADDPS(Mem{Base: src}.Offset(vb*i), v[i], v[i])
		VMULPS(a, v[i], v[i])
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
	VMOVUPS(Mem{Base: dst}, w)
	VADDPS(Mem{Base: src}, w, w)
	VMULPS(a, w, w)
	VMOVUPS(w, Mem{Base: dst})
	ADDQ(U32(vb), src)
	ADDQ(U32(vb), dst)
	SUBQ(U32(lanes), n)
	JMP(LabelRef("single"))

	Label("tail")
	TESTQ(n, n)
	JE(LabelRef("done"))
	t := newTail(x, n)
	w, s := x.Vec(), x.Vec()
	t.load(Mem{Base: dst}, w)
	t.load(Mem{Base: src}, s)
	VADDPS(s, w, w)
	VMULPS(a, w, w)
	t.store(w, Mem{Base: dst})

	Label("done")
	asmkit.Ret()
}
