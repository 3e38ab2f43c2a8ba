// Command vec generates the amd64 assembly of flashgo's vector kernels:
// the fused exponential-and-sum of a score row, the row maximum, the row
// rescale, and the packing of K and V tiles into float32 panels (transposed
// for K, converting binary16 and bfloat16 on the way).
//
// Every kernel comes in an AVX-512 variant (zmm registers, opmask tails)
// and an AVX2 variant (ymm registers, FMA, F16C, VMASKMOVPS tails). Run it
// from kernel/_asm:
//
//	go run ./vec -out ../vec_amd64.s -stubs ../vec_amd64.go -pkg kernel
package main

import (
	"math"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The constants of kernel/exp.go, spelled the same way so that float32()
// rounds them to the same values the scalar Exp uses.
const (
	expLog2e = 1.44269504088896341
	expLn2Hi = 0.693359375
	expLn2Lo = -2.12194440e-4
	expMin   = -87.33654475
	expMax   = 88.72283905

	expP0 = 1.9875691500e-4
	expP1 = 1.3981999507e-3
	expP2 = 8.3334519073e-3
	expP3 = 4.1665795894e-2
	expP4 = 1.6666665459e-1
	expP5 = 5.0000001201e-1

	// expClamp bounds the argument from above before the reduction. Every
	// x in (expMax, expClamp] overflows to +Inf on its own (n = 128 and
	// p > 1), and the clamp keeps +Inf and huge arguments from turning into
	// Inf − Inf = NaN in the reduction. VMINPS returns its second source
	// operand when one is NaN, which is how a NaN argument gets through.
	expClamp = 89.0
)

// Slots of the constant table: each holds one float32 (or int32) repeated
// eight times, so that AVX2 code can use a slot as a 256-bit memory operand
// and AVX-512 code can broadcast its first element.
const (
	cLog2e = iota
	cLn2Hi
	cLn2Lo
	cP0
	cP1
	cP2
	cP3
	cP4
	cP5
	cOne
	cExpMin
	cClamp
	cNegInf
	cBias // int32 127<<23: the float32 exponent bias in position
	nConsts
)

var (
	consts     Mem // nConsts slots of 32 bytes
	tailMask16 Mem // uint16 (1<<i)-1 for i = 0..16: opmask of the first i lanes
	tailMask8  Mem // eight int32 -1 then eight 0: 32 bytes at 4*(8-i) select i lanes
)

// doc sets the doc comment of the current function from text, one Doc line
// per line of text.
func doc(text string) { Doc(strings.Split(text, "\n")...) }

func f32bits(x float64) U32 { return U32(math.Float32bits(float32(x))) }

func genData() {
	consts = GLOBL("vecconst", RODATA|NOPTR)
	vals := [nConsts]U32{
		cLog2e:  f32bits(expLog2e),
		cLn2Hi:  f32bits(expLn2Hi),
		cLn2Lo:  f32bits(expLn2Lo),
		cP0:     f32bits(expP0),
		cP1:     f32bits(expP1),
		cP2:     f32bits(expP2),
		cP3:     f32bits(expP3),
		cP4:     f32bits(expP4),
		cP5:     f32bits(expP5),
		cOne:    f32bits(1),
		cExpMin: f32bits(expMin),
		cClamp:  f32bits(expClamp),
		cNegInf: U32(0xff800000),
		cBias:   U32(127 << 23),
	}
	for i, v := range vals {
		for j := 0; j < 8; j++ {
			DATA(32*i+4*j, v)
		}
	}

	tailMask16 = GLOBL("vectail16", RODATA|NOPTR)
	for i := 0; i <= 16; i++ {
		DATA(2*i, U16(1<<i-1))
	}

	tailMask8 = GLOBL("vectail8", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		v := U32(0)
		if i < 8 {
			v = 0xffffffff
		}
		DATA(4*i, v)
	}
}

// constAt returns the 32-byte slot i of the constant table.
func constAt(i int) Mem { return consts.Offset(32 * i) }

// broadcast512 loads constant slot i into every lane of a new zmm register.
func broadcast512(i int) VecVirtual {
	z := ZMM()
	VBROADCASTSS(constAt(i), z)
	return z
}

// mask16 returns an opmask selecting the first rem lanes (rem in 0..16).
func mask16(rem Register) Register {
	tbl := GP64()
	LEAQ(tailMask16, tbl)
	k := K()
	KMOVW(Mem{Base: tbl, Index: rem, Scale: 2}, k)
	return k
}

// mask8 returns a ymm whose first rem int32 lanes are all ones (rem in
// 0..8), the mask operand of VMASKMOVPS.
func mask8(rem Register) VecVirtual {
	off := GP64()
	MOVQ(U32(8), off)
	SUBQ(rem, off)
	tbl := GP64()
	LEAQ(tailMask8, tbl)
	m := YMM()
	VMOVDQU(Mem{Base: tbl, Index: off, Scale: 4}, m)
	return m
}

func main() {
	ConstraintExpr("amd64,!purego") // avo v0.5.0 takes +build syntax; it writes "amd64 && !purego"
	genData()

	genExpSumAVX512()
	genExpSumAVX2()
	genMaxAVX512()
	genMaxAVX2()
	genScaleAVX512()
	genScaleAVX2()
	genSoftmaxBF16AVX512()

	for _, t := range []elemType{f32, f16, bf16} {
		genPackKT(true, t)
	}
	for _, t := range []elemType{f32, f16, bf16} {
		genPackKT(false, t)
	}
	genPackRows(true, f16)
	genPackRows(true, bf16)
	genPackRows(false, f16)
	genPackRows(false, bf16)

	Generate()
}
