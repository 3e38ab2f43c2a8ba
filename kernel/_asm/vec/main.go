// Command vec generates the amd64 assembly of flashgo's vector kernels:
// the fused exponential-and-sum of a score row, the row maximum, the row
// rescale, the packing of K and V tiles into float32 panels (transposed
// for K, converting binary16 and bfloat16 on the way), and the bfloat16
// conversions of the levels without bf16 instructions (widening rows and
// rows of pairs to float32, rounding a row to bfloat16); and, with the
// AVX512-BF16 softmax (SoftmaxBF16AVX512), the bf16 folds of a tile that
// embed its row code (foldchunk.go): on the AMX tiles (FoldChunkAMX,
// amxfold.go) and with VDPBF16PS (FoldChunkBF16AVX512, avx512fold.go).
//
// Every other kernel comes in an AVX-512 variant (zmm registers, opmask tails)
// and an AVX2 variant (ymm registers, FMA, F16C, VMASKMOVPS tails, or an
// overlapping last vector where no masked instruction fits). Run it from
// kernel/_asm:
//
//	go run ./vec -out ../internal/x86/vec_amd64.s -stubs ../internal/x86/vec_amd64.go -pkg x86
package main

import (
	"math"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
)

// The base-2 exponential's coefficients (kernel/exp.go), as float32 bit
// patterns. The constants of the exponential are asmkit's (ExpLog2e, ...),
// which the fused tile fold shares.
const (
	exp2C1 = 0x3f317215
	exp2C2 = 0x3e75fcde
	exp2C3 = 0x3d635ba9
	exp2C4 = 0x3c1e7544
	exp2C5 = 0x3aaddd07
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
	cTwo
	cAbsMask // int32 0x7fffffff: clears the sign bit
	cTanhSplit
	cTanhClamp
	cTanh0
	cTanh1
	cTanh2
	cTanh3
	cTanh4
	cTanh5
	cExpMask   // int32 0x7f800000: the exponent field, and +Inf
	cSignMask  // int32 0x80000000
	cHi16      // int32 0xffff0000
	cRoundBias // int32 0x7fff
	cOneBit    // int32 1
	cQuietBit  // int32 0x00400000: the quiet bit of a float32 NaN
	cExp2Min   // −126: below it 2^t is below the smallest normal float32
	cExp2C1    // exp2C1..exp2C5: 2^f ≈ 1 + f·(C1 + f·(C2 + …)) on |f| <= 1/2
	cExp2C2
	cExp2C3
	cExp2C4
	cExp2C5
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
		cLog2e:     f32bits(asmkit.ExpLog2e),
		cLn2Hi:     f32bits(asmkit.ExpLn2Hi),
		cLn2Lo:     f32bits(asmkit.ExpLn2Lo),
		cP0:        f32bits(asmkit.ExpP0),
		cP1:        f32bits(asmkit.ExpP1),
		cP2:        f32bits(asmkit.ExpP2),
		cP3:        f32bits(asmkit.ExpP3),
		cP4:        f32bits(asmkit.ExpP4),
		cP5:        f32bits(asmkit.ExpP5),
		cOne:       f32bits(1),
		cExpMin:    f32bits(asmkit.ExpMin),
		cClamp:     f32bits(asmkit.ExpClamp),
		cNegInf:    U32(0xff800000),
		cBias:      U32(127 << 23),
		cTwo:       f32bits(2),
		cAbsMask:   U32(0x7fffffff),
		cTanhSplit: f32bits(tanhSplit),
		cTanhClamp: f32bits(20),
		cTanh0:     f32bits(tanhC0),
		cTanh1:     f32bits(tanhC1),
		cTanh2:     f32bits(tanhC2),
		cTanh3:     f32bits(tanhC3),
		cTanh4:     f32bits(tanhC4),
		cTanh5:     f32bits(tanhC5),
		cExpMask:   U32(0x7f800000),
		cSignMask:  U32(0x80000000),
		cHi16:      U32(0xffff0000),
		cRoundBias: U32(0x7fff),
		cOneBit:    U32(1),
		cQuietBit:  U32(0x00400000),
		cExp2Min:   f32bits(-126),
		cExp2C1:    U32(exp2C1),
		cExp2C2:    U32(exp2C2),
		cExp2C3:    U32(exp2C3),
		cExp2C4:    U32(exp2C4),
		cExp2C5:    U32(exp2C5),
	}
	for i, v := range vals {
		for j := 0; j < 8; j++ {
			DATA(32*i+4*j, v)
		}
	}

	tailMask16 = asmkit.Opmask16("vectail16", 0)
	tailMask8 = asmkit.Mask8("vectail8")
}

// expConsts returns the slots of the exponential's constants (asmkit.Exp512).
func expConsts() asmkit.ExpConsts {
	c := asmkit.ExpConsts{Log2e: constAt(cLog2e), Ln2Hi: constAt(cLn2Hi), Ln2Lo: constAt(cLn2Lo),
		One: constAt(cOne), Min: constAt(cExpMin), Clamp: constAt(cClamp)}
	for i := range c.P {
		c.P[i] = constAt(cP0 + i)
	}
	return c
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
func mask16(rem Register) Register { return asmkit.LoadOpmask(tailMask16, rem) }

// mask8 returns a ymm whose first rem int32 lanes are all ones (rem in
// 0..8), the mask operand of VMASKMOVPS.
func mask8(rem Register) VecVirtual { return asmkit.LoadMask8(tailMask8, rem) }

// tail is the mask of the first n lanes of a vector, n < the vector's
// lanes: an opmask with AVX-512, a VMASKMOVPS mask with AVX2.
type tail struct {
	x *asmkit.ISA
	m Register
}

func newTail(x *asmkit.ISA, n Register) *tail {
	if x.IsAVX512() {
		return &tail{x, mask16(n)}
	}
	return &tail{x, mask8(n)}
}

// load reads the tail's lanes at m into dst, zeroing the others.
func (t *tail) load(m Mem, dst VecVirtual) {
	if t.x.IsAVX512() {
		VMOVUPS_Z(m, t.m, dst)
	} else {
		VMASKMOVPS(m, t.m, dst)
	}
}

// loadFill reads the tail's lanes at m into dst and sets the others to
// fill.
func (t *tail) loadFill(m Mem, fill, dst VecVirtual) {
	if t.x.IsAVX512() {
		VMOVAPS(fill, dst)
		VMOVUPS(m, t.m, dst)
	} else {
		VMASKMOVPS(m, t.m, dst)
		VBLENDVPS(t.m, dst, fill, dst)
	}
}

// store writes the tail's lanes of src to m.
func (t *tail) store(src VecVirtual, m Mem) {
	if t.x.IsAVX512() {
		VMOVUPS(src, t.m, m)
	} else {
		VMASKMOVPS(src, t.m, m)
	}
}

// constVec loads constant slot i into every lane of a new vector: a
// broadcast with AVX-512, the whole 32-byte slot with AVX2.
func constVec(x *asmkit.ISA, i int) VecVirtual {
	if x.IsAVX512() {
		return broadcast512(i)
	}
	y := YMM()
	VMOVUPS(constAt(i), y)
	return y
}

func main() {
	ConstraintExpr("amd64,!purego") // avo v0.5.0 takes +build syntax; it writes "amd64 && !purego"
	genData()

	isas := []*asmkit.ISA{asmkit.AVX512, asmkit.AVX2}
	for _, x := range isas {
		genExpSum(x)
	}
	for _, x := range isas {
		genMax(x)
	}
	for _, x := range isas {
		genScale(x)
	}
	for _, x := range isas {
		genSoftCap(x)
	}
	genSoftmaxBF16AVX512()
	amxFoldData()
	genFoldChunkAMX()
	genFoldChunkBF16AVX512()

	for _, x := range isas {
		genWidenBF16(x)
		genWidenPairsBF16(x)
		genRoundBF16Bits(x)
		genAddScale(x)
	}

	for _, x := range isas {
		for _, t := range []elemType{f32, f16, bf16} {
			genPackKT(x, t)
		}
	}
	for _, x := range isas {
		genPackRows(x, f16)
		genPackRows(x, bf16)
	}
	pairData()
	genPackKPairsBF16()
	genPackVPairsBF16()

	Generate()
}
