// Command encode generates the amd64 assembly of flashgo's encoders: the
// conversions of float32, binary16 and bfloat16 rows to the element types
// a K/V cache or pool stores (binary16, bfloat16, OCP fp8 E4M3FN and E5M2
// with a scale, Q8), which attention's writes (PagedKV.Write,
// KVCache.Append, PagedCache.Append) and its reads into another type run
// through kernel's Encode functions and QuantizeQ8. Each kernel gives the
// bits of its Go twin (kernel/encode.go), which are those of fp16's
// scalar conversions and of QuantizeQ8's loop:
//
//   - binary16: VCVTPS2PH with the rounding in the immediate (to nearest
//     even), which is IEEE's conversion, as fp16.FromFloat32's is (±Inf
//     beyond the range, subnormals, NaN quiet with its sign and the top of
//     its payload).
//   - bfloat16: fp16.BFloat16FromFloat32 in integer instructions: add
//     0x7fff and the lowest kept bit, keep the high half; a NaN keeps its
//     high half with the quiet bit set. Unlike RoundBF16 (the bf16
//     products' rounding) a subnormal is rounded, not flushed.
//   - fp8: the value divided by the scale in float32 (VDIVPS, the
//     division Go compiles), then fp16's encoder in integer instructions:
//     normal magnitudes round their float32 mantissa to nearest even by
//     an integer add and move the exponent to the format's bias;
//     magnitudes below the smallest normal add a power of two whose ulp is
//     the smallest subnormal (the float32 addition rounds to nearest even,
//     the one rounding of math.RoundToEven on the scaled value); the
//     result saturates at the largest finite pattern, and NaN gives the
//     format's NaN, each with the sign of the quotient.
//   - Q8: a block of 32 values at a time: the largest magnitude as the
//     largest of the magnitudes' bits (the integer order of non-negative
//     floats, in which NaN and ±Inf come last, so one compare finds a
//     non-finite block), the scale amax/127 and its reciprocal in scalar
//     float32 divisions, the quotients v·(1/d) rounded half away from zero
//     as trunc(p) + trunc(2·(p − trunc(p))) (exact: p − trunc(p) and its
//     double are), clamped to ±127. A block whose scale is subnormal or
//     whose 127·scale would overflow (QuantizeQ8's two rare branches) ends
//     the kernel, which returns the blocks done; the Go wrapper quantises
//     that block with its twin and calls again.
//
// The sources widen exactly to float32 first (VCVTPH2PS; a bfloat16
// shifted left by 16), as fp16's decoders do.
//
// AVX-512 ends a row through an opmask (loads that suppress the faults of
// the lanes they skip, masked stores); AVX2 copies the last elements of a
// row (fewer than 8) into a zeroed buffer on the stack, converts it whole
// and copies their results out. Run it from kernel/_asm:
//
//	go run ./encode -out ../internal/x86/encode_amd64.s -stubs ../internal/x86/encode_amd64.go -pkg x86
package main

import (
	"fmt"
	"math"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
)

// Slots of the constant table: each holds one 32-bit value repeated 16
// times, so that a slot is a whole zmm (or ymm) memory operand.
const (
	cAbs      = iota // 0x7fffffff
	cExp             // 0x7f800000: +Inf, above which a magnitude is NaN
	cOne             // int32 1
	cRound           // 0x7fff: bfloat16's rounding bias
	cQuiet16         // 0x0040: the quiet bit of a bfloat16 NaN
	cSign8           // 0x80: an 8-bit float's sign bit
	cE4M3            // the E4M3 constants (fp8Slots of them)
	cE5M2     = cE4M3 + fp8Slots
	c127      = cE5M2 + fp8Slots // float32 127
	cOneF     = c127 + 1         // float32 1
	cMinus127 = c127 + 2         // int32 −127
	cPerm     = c127 + 3         // int32 0, 4, 1, 5, 2, 6, 3, 7: AVX2's order of the packed bytes
	nConsts   = c127 + 4
)

// The slots of an fp8 format, from its first.
const (
	fHalf    = iota // 1<<(drop−1) − 1 − (127−bias)<<23: half an ulp of the kept mantissa less one, and the exponent moved to the format's bias
	fMinNorm        // float32 bits of the smallest normal, less one
	fMagic          // float32 2^(23+1−bias−mant): its ulp is the smallest subnormal
	fMax            // the largest finite pattern
	fNaN            // the NaN the encoder gives
	fp8Slots
)

// fp8 describes an 8-bit float format as fp16's encoder does.
type fp8 struct {
	name        string // E4M3 or E5M2
	goType      string // fp16's type
	mant, bias  int
	maxEnc, nan uint32
	firstSlot   int
}

var (
	e4m3 = &fp8{name: "E4M3", goType: "Float8E4M3", mant: 3, bias: 7, maxEnc: 0x7e, nan: 0x7f, firstSlot: cE4M3}
	e5m2 = &fp8{name: "E5M2", goType: "Float8E5M2", mant: 2, bias: 15, maxEnc: 0x7b, nan: 0x7e, firstSlot: cE5M2}
)

func (f *fp8) drop() int      { return 23 - f.mant }
func (f *fp8) slot(i int) Mem { return constAt(f.firstSlot + i) }

func (f *fp8) values() [fp8Slots]U32 {
	return [fp8Slots]U32{
		fHalf:    U32(uint32(1<<(f.drop()-1)-1) - uint32(127-f.bias)<<23),
		fMinNorm: U32((127+1-f.bias)<<23 - 1),
		fMagic:   U32(math.Float32bits(float32(math.Ldexp(1, 23+1-f.bias-f.mant)))),
		fMax:     U32(f.maxEnc),
		fNaN:     U32(f.nan),
	}
}

var (
	consts Mem
	tail16 Mem // uint16 (1<<i)−1 for i = 0..16: the opmask of the first i lanes
)

func constAt(i int) Mem { return consts.Offset(64 * i) }

func genData() {
	consts = GLOBL("encconst", RODATA|NOPTR)
	var vals [nConsts]U32
	vals[cAbs], vals[cExp], vals[cOne], vals[cRound], vals[cQuiet16], vals[cSign8] = 0x7fffffff, 0x7f800000, 1, 0x7fff, 0x40, 0x80
	for _, f := range []*fp8{e4m3, e5m2} {
		for i, v := range f.values() {
			vals[f.firstSlot+i] = v
		}
	}
	vals[c127] = U32(math.Float32bits(127))
	vals[cOneF] = U32(math.Float32bits(1))
	vals[cMinus127] = U32(0xffffff81)
	for i, v := range vals {
		for j := range 16 {
			if i == cPerm {
				v = U32([8]uint32{0, 4, 1, 5, 2, 6, 3, 7}[j%8])
			}
			DATA(64*i+4*j, v)
		}
	}
	tail16 = asmkit.Opmask16("enctail16", 0)
}

// doc sets the doc comment of the current function from text.
func doc(text string) { Doc(strings.Split(text, "\n")...) }

// out is a destination type of the element encoders.
type out int

const (
	outF16 out = iota
	outBF16
	outE4M3
	outE5M2
)

func (o out) name() string { return [...]string{"F16", "BF16", "E4M3", "E5M2"}[o] }
func (o out) size() int    { return [...]int{2, 2, 1, 1}[o] }
func (o out) goType() string {
	return [...]string{"*uint16", "*uint16", "*uint8", "*uint8"}[o]
}
func (o out) fp8() *fp8 {
	switch o {
	case outE4M3:
		return e4m3
	case outE5M2:
		return e5m2
	}
	return nil
}

// srcText is the reference loop's float32 value of src[i].
func srcText(t asmkit.Elem) string {
	switch t {
	case asmkit.F16:
		return "fp16.Float16(src[i]).Float32()"
	case asmkit.BF16:
		return "fp16.BFloat16(src[i]).Float32()"
	}
	return "src[i]"
}

// enc is one element encoder: a source type, a destination type and an
// instruction set.
type enc struct {
	x   *asmkit.ISA
	src asmkit.Elem
	dst out
	sc  VecVirtual // fp8: the scale in every lane
}

func (e *enc) name() string {
	return "Encode" + e.dst.name() + "From" + e.src.Name() + e.x.Name
}

// gen writes the kernel: 4 vectors an iteration, then single vectors, then
// the tail.
func (e *enc) gen() {
	x := e.x
	name := e.name()
	sig := fmt.Sprintf("func(dst %s, src %s, n int)", e.dst.goType(), e.src.GoType())
	if e.dst.fp8() != nil {
		sig = fmt.Sprintf("func(dst %s, src %s, n int, scale float32)", e.dst.goType(), e.src.GoType())
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	e.doc(name)

	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	if e.dst.fp8() != nil {
		e.sc = x.Vec()
		VBROADCASTSS(asmkit.ParamAddr("scale"), e.sc)
	}
	lanes := x.Lanes()
	sb, db := e.src.Size(), e.dst.size()
	const unroll = 4

	Label("loop")
	CMPQ(n, U32(unroll*lanes))
	JL(LabelRef("single"))
	for i := range unroll {
		f := x.Vec()
		e.src.Widen(Mem{Base: src}.Offset(i*lanes*sb), f)
		e.store(e.convert(f), Mem{Base: dst}.Offset(i*lanes*db), nil)
	}
	ADDQ(U32(unroll*lanes*sb), src)
	ADDQ(U32(unroll*lanes*db), dst)
	SUBQ(U32(unroll*lanes), n)
	JMP(LabelRef("loop"))

	Label("single")
	CMPQ(n, U32(lanes))
	JL(LabelRef("tail"))
	f := x.Vec()
	e.src.Widen(Mem{Base: src}, f)
	e.store(e.convert(f), Mem{Base: dst}, nil)
	ADDQ(U32(lanes*sb), src)
	ADDQ(U32(lanes*db), dst)
	SUBQ(U32(lanes), n)
	JMP(LabelRef("single"))

	Label("tail")
	TESTQ(n, n)
	JE(LabelRef("done"))
	if x.IsAVX512() {
		k := asmkit.LoadOpmask(tail16, n)
		f := ZMM()
		switch e.src {
		case asmkit.F32:
			VMOVUPS_Z(Mem{Base: src}, k, f)
		default:
			h := YMM()
			VMOVDQU16_Z(Mem{Base: src}, k, h)
			e.src.Widen(h, f)
		}
		e.store(e.convert(f), Mem{Base: dst}, k)
	} else {
		// Through buffers on the stack: the n < 8 elements copied into a
		// zeroed vector, converted whole, their results copied out.
		in, res := AllocLocal(32), AllocLocal(16)
		z := YMM()
		VPXOR(z, z, z)
		VMOVDQU(z, in)
		i, v := GP64(), GP32()
		XORQ(i, i)
		Label("tailin")
		switch sb {
		case 4:
			MOVL(Mem{Base: src, Index: i, Scale: 4}, v)
			MOVL(v, in.Idx(i, 4))
		case 2:
			MOVW(Mem{Base: src, Index: i, Scale: 2}, v.As16())
			MOVW(v.As16(), in.Idx(i, 2))
		}
		INCQ(i)
		CMPQ(i, n)
		JL(LabelRef("tailin"))
		f := YMM()
		e.src.Widen(in, f)
		e.store(e.convert(f), res, nil)
		XORQ(i, i)
		Label("tailout")
		switch db {
		case 2:
			MOVW(res.Idx(i, 2), v.As16())
			MOVW(v.As16(), Mem{Base: dst, Index: i, Scale: 2})
		case 1:
			MOVB(res.Idx(i, 1), v.As8())
			MOVB(v.As8(), Mem{Base: dst, Index: i, Scale: 1})
		}
		INCQ(i)
		CMPQ(i, n)
		JL(LabelRef("tailout"))
	}
	Label("done")
	asmkit.Ret()
}

func (e *enc) doc(name string) {
	var conv, want, notes string
	switch e.dst {
	case outF16:
		conv, want = "binary16", fmt.Sprintf("fp16.FromFloat32(%s)", srcText(e.src))
		notes = "VCVTPS2PH, rounding to nearest even (the immediate's rounding, not MXCSR's)."
	case outBF16:
		conv, want = "bfloat16", fmt.Sprintf("fp16.BFloat16FromFloat32(%s)", srcText(e.src))
		notes = "Integer instructions; a subnormal is rounded, not flushed (unlike RoundBF16)."
	default:
		f := e.dst.fp8()
		conv, want = f.name, fmt.Sprintf("fp16.%sFromFloat32(%s / scale)", f.goType, srcText(e.src))
		notes = "The quotient is VDIVPS's, Go's float32 division; its encoding integer instructions\n" +
			"and a float32 addition (to nearest even) for the subnormal range."
	}
	doc(fmt.Sprintf(`%s is the %s encoder of a row to %s:

	for i := range n {
		dst[i] = %s
	}

bit for bit. %s n >= 0; dst and src do not overlap.`, name, e.x.Doc, conv, want, notes))
}

// convert returns the encoded lanes of the float32 vector f (f is
// clobbered): for binary16 f itself (store converts it), otherwise the
// pattern of each lane in its low bits.
func (e *enc) convert(f VecVirtual) VecVirtual {
	switch e.dst {
	case outF16:
		return f
	case outBF16:
		return e.bf16(f)
	}
	return e.fp8(f, e.dst.fp8())
}

// bf16 rounds the float32 lanes of u to bfloat16 as
// fp16.BFloat16FromFloat32 does.
func (e *enc) bf16(u VecVirtual) VecVirtual {
	x := e.x
	r, t, a := x.Vec(), x.Vec(), x.Vec()
	VPSRLD(U8(16), u, t)
	if x.IsAVX512() {
		VPANDD(constAt(cAbs), u, a)
		nan := K()
		VPCMPGTD(constAt(cExp), a, nan)
		VPANDD(constAt(cOne), t, r)
		VPADDD(constAt(cRound), r, r)
		VPADDD(u, r, r)
		VPSRLD(U8(16), r, r)
		VPORD(constAt(cQuiet16), t, nan, r) // NaN lanes: the high half, quiet
		return r
	}
	VPAND(constAt(cAbs), u, a)
	VPCMPGTD(constAt(cExp), a, a) // all ones on NaN lanes
	VPAND(constAt(cOne), t, r)
	VPADDD(constAt(cRound), r, r)
	VPADDD(u, r, r)
	VPSRLD(U8(16), r, r)
	VPOR(constAt(cQuiet16), t, t)
	VPBLENDVB(a, t, r, r)
	return r
}

// fp8 divides the float32 lanes of v by the scale and encodes them in f.
func (e *enc) fp8(v VecVirtual, f *fp8) VecVirtual {
	x := e.x
	VDIVPS(e.sc, v, v)
	sign, a, s, t := x.Vec(), x.Vec(), x.Vec(), x.Vec()
	VPSRLD(U8(24), v, sign)
	drop := U8(f.drop())
	if x.IsAVX512() {
		VPANDD(constAt(cAbs), v, a)
		nan, norm := K(), K()
		VPCMPGTD(constAt(cExp), a, nan)
		VPCMPGTD(f.slot(fMinNorm), a, norm)
		// Below the smallest normal: |v| + 2^k rounds |v| to a multiple
		// of the smallest subnormal, whose count is the pattern.
		VADDPS(f.slot(fMagic), a, s)
		VPSUBD(f.slot(fMagic), s, s)
		// Normal: round the mantissa to nearest even and move the
		// exponent to the format's bias (both in fHalf: the bias is a
		// multiple of the dropped bits' weight), then drop the bits.
		VPSRLD(drop, a, t)
		VPANDD(constAt(cOne), t, t)
		VPADDD(a, t, t)
		VPADDD(f.slot(fHalf), t, t)
		VPSRLD(drop, t, norm, s)
		VPMINUD(f.slot(fMax), s, s)
		VMOVDQU32(f.slot(fNaN), nan, s)
		VPTERNLOGD(U8(0xf8), constAt(cSign8), sign, s) // s | sign&0x80
		return s
	}
	nan, norm := x.Vec(), x.Vec()
	VPAND(constAt(cSign8), sign, sign)
	VPAND(constAt(cAbs), v, a)
	VPCMPGTD(constAt(cExp), a, nan)
	VPCMPGTD(f.slot(fMinNorm), a, norm)
	VADDPS(f.slot(fMagic), a, s)
	VPSUBD(f.slot(fMagic), s, s)
	VPSRLD(drop, a, t)
	VPAND(constAt(cOne), t, t)
	VPADDD(a, t, t)
	VPADDD(f.slot(fHalf), t, t)
	VPSRLD(drop, t, t)
	VPBLENDVB(norm, t, s, s)
	VPMINUD(f.slot(fMax), s, s)
	VPBLENDVB(nan, f.slot(fNaN), s, s)
	VPOR(sign, s, s)
	return s
}

// store writes the lanes of r (convert's result) to m: all of them, or
// with AVX-512 those of the opmask k.
func (e *enc) store(r VecVirtual, m Mem, k Register) {
	x := e.x
	if x.IsAVX512() {
		switch {
		case e.dst == outF16 && k == nil:
			VCVTPS2PH(U8(0), r, m)
		case e.dst == outF16:
			VCVTPS2PH(U8(0), r, k, m)
		case e.dst == outBF16 && k == nil:
			VPMOVDW(r, m)
		case e.dst == outBF16:
			VPMOVDW(r, k, m)
		case k == nil:
			VPMOVDB(r, m)
		default:
			VPMOVDB(r, k, m)
		}
		return
	}
	if e.dst == outF16 {
		VCVTPS2PH(U8(0), r, m)
		return
	}
	h := XMM()
	VEXTRACTI128(U8(1), r, h)
	VPACKUSDW(h, r.AsX(), h) // the 8 patterns as words
	if e.dst == outBF16 {
		VMOVDQU(h, m)
		return
	}
	VPACKUSWB(h, h, h)
	VMOVQ(h, m)
}

// genQ8 writes the Q8 quantiser of src's type.
func genQ8(x *asmkit.ISA, et asmkit.Elem) {
	name := "QuantizeQ8From" + et.Name() + x.Name
	TEXT(name, NOSPLIT, fmt.Sprintf("func(dst *int8, scales *float32, src %s, blocks int) int", et.GoType()))
	Pragma("noescape")
	doc(fmt.Sprintf(`%s is the %s quantiser of blocks blocks of Q8Block values to Q8,
as QuantizeQ8's Go loop quantises them (src[i] being %s), bit for bit:
per block the largest magnitude amax, the scale d = amax/127 stored in scales, and each
value v stored as clamp(round half away from zero(v·(1/d)), −127, 127) (a block with a
NaN or ±Inf: scale NaN, values 0; a zero block: scale 0, values 0). It stops at the
first block whose d is subnormal or whose 127·d overflows, QuantizeQ8's rare branches,
and returns the number of blocks it quantised; the caller quantises that block and calls
again from the next. blocks >= 0; dst, scales and src do not overlap.`, name, x.Doc, srcText(et)))

	dst := Load(Param("dst"), GP64())
	scales := Load(Param("scales"), GP64())
	src := Load(Param("src"), GP64())
	blocks := Load(Param("blocks"), GP64())
	done := GP64()
	XORQ(done, done)
	lanes := x.Lanes()
	nv := 32 / lanes // vectors a block
	one := XMM()
	VMOVSS(constAt(cOneF), one)
	zero := YMM()
	VPXOR(zero, zero, zero)
	var perm VecVirtual
	if !x.IsAVX512() {
		perm = YMM()
		VMOVDQU(constAt(cPerm), perm)
	}

	Label("block")
	CMPQ(done, blocks)
	JE(LabelRef("return"))
	f := make([]VecVirtual, nv)
	var m VecVirtual
	for i := range f {
		f[i] = x.Vec()
		et.Widen(Mem{Base: src}.Offset(i*lanes*et.Size()), f[i])
		a := x.Vec()
		if x.IsAVX512() {
			VPANDD(constAt(cAbs), f[i], a)
		} else {
			VPAND(constAt(cAbs), f[i], a)
		}
		if m == nil {
			m = a
		} else {
			VPMAXUD(a, m, m)
		}
	}
	// The largest magnitude's bits in every lane of h.
	h := XMM()
	if x.IsAVX512() {
		y := YMM()
		VEXTRACTI64X4(U8(1), m, y)
		VPMAXUD(y, m.AsY(), y)
		VEXTRACTI128(U8(1), y, h)
		VPMAXUD(h, y.AsX(), h)
	} else {
		VEXTRACTI128(U8(1), m, h)
		VPMAXUD(h, m.AsX(), h)
	}
	for _, imm := range []uint8{0x4e, 0xb1} {
		s := XMM()
		VPSHUFD(U8(imm), h, s)
		VPMAXUD(s, h, h)
	}
	amax := GP32()
	VMOVD(h, amax)
	CMPL(amax, U32(0x7f800000))
	JAE(LabelRef("nonfinite"))
	TESTL(amax, amax)
	JE(LabelRef("zero"))
	d, t, g := XMM(), XMM(), GP32()
	VDIVSS(constAt(c127), h, d)
	VMOVD(d, g)
	CMPL(g, U32(0x00800000))
	JB(LabelRef("return")) // a subnormal scale: the caller's
	VMULSS(constAt(c127), d, t)
	VMOVD(t, g)
	CMPL(g, U32(0x7f800000))
	JE(LabelRef("return")) // 127·d overflows: the caller's
	VMOVSS(d, Mem{Base: scales})
	VDIVSS(d, one, t) // 1/d
	id := x.Vec()
	VBROADCASTSS(t, id)
	q := make([]VecVirtual, nv)
	for i := range f {
		p, r, fr := x.Vec(), x.Vec(), x.Vec()
		VMULPS(id, f[i], p)
		trunc := func(a, b VecVirtual) {
			if x.IsAVX512() {
				VRNDSCALEPS(U8(0x0b), a, b)
			} else {
				VROUNDPS(U8(0x0b), a, b)
			}
		}
		trunc(p, r)
		VSUBPS(r, p, fr) // p − trunc(p), exact
		VADDPS(fr, fr, fr)
		trunc(fr, fr) // ±1 where |p − trunc(p)| >= 1/2, else 0
		VADDPS(fr, r, r)
		q[i] = x.Vec()
		VCVTTPS2DQ(r, q[i])
		VPMAXSD(constAt(cMinus127), q[i], q[i])
		if x.IsAVX512() {
			VPMOVSDB(q[i], Mem{Base: dst}.Offset(16*i)) // saturates at 127
		}
	}
	if !x.IsAVX512() {
		p0, p1 := YMM(), YMM()
		VPACKSSDW(q[1], q[0], p0)
		VPACKSSDW(q[3], q[2], p1)
		VPACKSSWB(p1, p0, p0) // saturates at 127
		VPERMD(p0, perm, p0)
		VMOVDQU(p0, Mem{Base: dst})
	}
	Label("next")
	ADDQ(U32(32*et.Size()), src)
	ADDQ(U32(32), dst)
	ADDQ(U32(4), scales)
	INCQ(done)
	JMP(LabelRef("block"))

	Label("zero")
	MOVL(U32(0), Mem{Base: scales})
	VMOVDQU(zero, Mem{Base: dst})
	JMP(LabelRef("next"))

	Label("nonfinite")
	MOVL(U32(0x7fc00000), Mem{Base: scales}) // float32(math.NaN())
	VMOVDQU(zero, Mem{Base: dst})
	JMP(LabelRef("next"))

	Label("return")
	Store(done, ReturnIndex(0))
	asmkit.Ret()
}

func main() {
	ConstraintExpr("amd64,!purego") // avo v0.5.0 takes +build syntax; it writes "amd64 && !purego"
	genData()
	srcs := []asmkit.Elem{asmkit.F32, asmkit.F16, asmkit.BF16}
	for _, x := range []*asmkit.ISA{asmkit.AVX512, asmkit.AVX2} {
		for _, o := range []out{outF16, outBF16, outE4M3, outE5M2} {
			for _, s := range srcs {
				if (o == outF16 && s == asmkit.F16) || (o == outBF16 && s == asmkit.BF16) {
					continue // a copy
				}
				(&enc{x: x, src: s, dst: o}).gen()
			}
		}
		for _, s := range srcs {
			genQ8(x, s)
		}
	}
	Generate()
}
