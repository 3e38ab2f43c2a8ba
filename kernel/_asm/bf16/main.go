// Command bf16 generates the amd64 assembly of the kernel package's two
// bfloat16 products, QKTBF16 and PVBF16, with AVX512-BF16:
//
//	go run ./bf16 -out ../internal/x86/bf16_amd64.s -stubs ../internal/x86/bf16_amd64.go -pkg x86
//
// Both kernels are the register-blocked product C (+)= A·B of the float32
// gemm kernels (see ../gemm; the driver is asmkit.Product), with bfloat16
// operands taken a pair of the reduction side at a time. B is a pair
// panel: its row t holds, for each column n, the two bfloat16 of k = 2t
// and 2t+1 side by side, a dword per column, so that one 64-byte vector of
// it holds the pairs of 16 columns.
// A is read a pair at a time, the dword (A[i][2t], A[i][2t+1]) broadcast
// to every lane. VDPBF16PS then adds both products of the pair into the 16
// float32 accumulators of one row and 16 columns:
//
//	QKTBF16: C = s (rows × cols), A = q (rows × d),    B = kp (d/2 × cols pairs), T = d/2
//	PVBF16:  C = o (rows × d),    A = p (rows × cols), B = vp (cols/2 × d pairs), T = cols/2
//
// The micro-kernel keeps 6 rows × 4 zmm (64 columns) of C in Z0–Z23. For
// each pair t it loads the 4 vectors of B's row t once into Z24–Z27,
// broadcasts each row's pair of A (VPBROADCASTD, alternating Z28 and Z29)
// and issues 24 VDPBF16PS: 10 loads for 24 products of 16 lanes × 2 pairs.
// Go's assembler has no VDPBF16PS: it is emitted as bytes (x86enc).
//
// Columns are walked in blocks of 64, the last one narrower, and within
// each the rows in blocks of 6 then one block of the 1–5 rows left; every
// (rows, vectors, masked) shape is its own unrolled micro-kernel, and the
// last vector of a block that ends in a partial one is loaded and stored
// through the opmask K1 (a lane is a column both in C and in B's pairs, so
// one mask serves both). QKTBF16 sums all d/2 pairs into zeroed
// accumulators and multiplies them by the scale (Z31) before storing them,
// as qktBF16Generic does; PVBF16 loads the o block into the accumulators,
// runs all cols/2 pairs and stores it back, as pvBF16Generic does. The
// pairs are added in increasing t in both, as in the generic twins; within
// a pair VDPBF16PS adds the odd element's product first, then the even
// one's, each rounded to float32 (the SDM's order, checked on the device
// Xeon by TestVDPBF16PSOrder), where the twins add the even one first.
//
// On the device Xeon (Sapphire Rapids class) VDPBF16PS zmm issues one every
// two cycles: 24 independent ones (vdpbf16psPeakAVX512) run at 78 GFLOP/s
// on one core, half the float32 FMA peak (about 150). Both kernels run at
// that ceiling on the 64×64×128 tile (77–78 GFLOP/s), so on that machine
// they halve the bytes of the operands but not the time of the products.
package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
	"github.com/flashgo/flashgo/kernel/_asm/x86enc"
)

// The registers have the roles of the product driver (asmkit.Product), as
// in the gemm generator; its leading dimensions are in bytes: 2 a bfloat16
// of A, one row of pairs of B, 4 a float32 of C.

const (
	lanes  = 16 // float32 lanes (columns) of a vector
	zScale = 31 // index in zmm of QKTBF16's scale
)

var zmm = asmkit.AVX512.Reg

var (
	mask16       Mem // uint16 masks, entry i = 2^(i+1) − 1
	peakOperands Mem // the two bfloat16 pairs of the VDPBF16PS peak loop
)

// product returns the driver of a kernel named name (asmkit.BF16Product),
// body the micro-kernel's.
func product(name string, args asmkit.ProductArgs, body func(p *asmkit.Product, rows int, b asmkit.Block)) *asmkit.Product {
	return asmkit.BF16Product(name, args, mask16, body)
}

// qktBody is QKTBF16's micro-kernel: all d/2 pairs into zeroed
// accumulators, multiplied by the scale before they are stored.
func qktBody(p *asmkit.Product, rows int, b asmkit.Block) {
	p.ZeroAcc(rows, b)
	Load(Param("d"), asmkit.KC)
	SHRQ(U8(1), asmkit.KC)
	p.KLoop(rows, b)
	p.ScaleAcc(rows, b)
	p.StoreC(rows, b)
}

// pvBody is PVBF16's micro-kernel: the o block is loaded into the
// accumulators, runs all cols/2 pairs and is stored back.
func pvBody(p *asmkit.Product, rows int, b asmkit.Block) {
	p.LoadC(rows, b)
	Load(Param("cols"), asmkit.KC)
	SHRQ(U8(1), asmkit.KC)
	p.KLoop(rows, b)
	p.StoreC(rows, b)
}

func main() {
	ConstraintExpr("amd64,!purego")

	mask16 = asmkit.Opmask16("bf16Mask16", 1)

	// (0.99609375, 1.0078125) and (1.0078125, 0.99609375) as bfloat16
	// pairs: ordinary numbers, as in the gemm generator's FMA peak.
	peakOperands = GLOBL("bf16PeakOperands", RODATA|NOPTR)
	DATA(0, U32(0x3f813f7f))
	DATA(4, U32(0x3f7f3f81))

	qktFunc()
	pvFunc()
	peakFunc()
	roundFunc()
	Generate()
}

// roundFunc emits the conversion of float32 to bfloat16 with
// VCVTNEPS2BF16 (round to nearest even, subnormals flushed to zero, NaN
// kept NaN: RoundBF16), 16 values at a time, the last partial vector
// through the opmask K1 (bf16Mask16[n-1]), so that nothing past n is read
// or written.
func roundFunc() {
	name := asmkit.Export("roundBF16AVX512")
	TEXT(name, NOSPLIT, "func(dst *uint16, src *float32, n int)")
	Pragma("noescape")
	Doc(
		name+" rounds n >= 1 float32s to bfloat16 with AVX512-BF16:",
		"",
		"	for i := 0; i < n; i++ {",
		"		dst[i] = RoundBF16(src[i])",
		"	}",
	)
	Load(Param("dst"), RDI)
	Load(Param("src"), RSI)
	Load(Param("n"), RCX)
	cvt := func() {
		x86enc.Emit("VCVTNEPS2BF16 Y0, Z0", x86enc.VCVTNEPS2BF16(0, 0))
	}
	CMPQ(RCX, Imm(lanes))
	JL(LabelRef(name + "_tail"))
	Label(name + "_loop")
	VMOVUPS(Mem{Base: RSI}, Z0)
	cvt()
	VMOVDQU(Y0, Mem{Base: RDI})
	ADDQ(Imm(4*lanes), RSI)
	ADDQ(Imm(2*lanes), RDI)
	SUBQ(Imm(lanes), RCX)
	CMPQ(RCX, Imm(lanes))
	JGE(LabelRef(name + "_loop"))
	Label(name + "_tail")
	TESTQ(RCX, RCX)
	JE(LabelRef(name + "_done"))
	LEAQ(mask16, RAX) // RIP-relative operands take no index register
	KMOVW(Mem{Base: RAX, Index: RCX, Scale: 2, Disp: -2}, K1)
	VMOVUPS_Z(Mem{Base: RSI}, K1, Z0)
	cvt()
	VMOVDQU16(Y0, K1, Mem{Base: RDI})
	Label(name + "_done")
	asmkit.Ret()
}

func qktFunc() {
	name := asmkit.Export("qktBF16AVX512")
	TEXT(name, NOSPLIT, "func(s *float32, ldS int, q *uint16, ldQ int, kp *uint16, ldK int, rows, cols, d int, scale float32)")
	Pragma("noescape")
	Doc(
		name+" is QKTBF16 with AVX512-BF16 (sizes >= 1, d even, leading",
		"dimensions in elements, q and kp bfloat16):",
		"",
		"	for i := 0; i < rows; i++ {",
		"		for j := 0; j < cols; j++ {",
		"			var acc float32",
		"			for k := 0; k < d; k++ {",
		"				acc += q[i*ldQ+k] * kp[(k/2)*ldK + 2*j + k%2]",
		"			}",
		"			s[i*ldS+j] = scale * acc",
		"		}",
		"	}",
		"",
		"It adds the pairs of components in order (VDPBF16PS adds the two",
		"products of a pair) and applies the scale at the end. 6×64 (6 rows",
		"× 4 zmm) register blocks, 24 accumulators; the key pairs of one pair",
		"of components are loaded once for all the block's rows.",
	)
	p := product(name, asmkit.ProductArgs{C: "s", LdC: "ldS", A: "q", LdA: "ldQ", B: "kp", LdB: "ldK", N: "cols"}, qktBody)
	p.Scale = zmm(zScale)
	p.Function()
}

func pvFunc() {
	name := asmkit.Export("pvBF16AVX512")
	TEXT(name, NOSPLIT, "func(o *float32, ldO int, p *uint16, ldP int, vp *uint16, ldV int, rows, cols, d int)")
	Pragma("noescape")
	Doc(
		name+" is PVBF16 with AVX512-BF16 (sizes >= 1, cols even, leading",
		"dimensions in elements, p and vp bfloat16):",
		"",
		"	for i := 0; i < rows; i++ {",
		"		for c := 0; c < d; c++ {",
		"			acc := o[i*ldO+c]",
		"			for j := 0; j < cols; j++ {",
		"				acc += p[i*ldP+j] * vp[(j/2)*ldV + 2*c + j%2]",
		"			}",
		"			o[i*ldO+c] = acc",
		"		}",
		"	}",
		"",
		"It adds the pairs of keys in order (VDPBF16PS adds the two products",
		"of a pair). 6×64 (6 rows × 4 zmm) register blocks, 24 accumulators;",
		"the value pairs of one pair of keys are loaded once for all the",
		"block's rows.",
	)
	product(name, asmkit.ProductArgs{C: "o", LdC: "ldO", A: "p", LdA: "ldP", B: "vp", LdB: "ldV", N: "d"}, pvBody).Function()
}

// peakFunc emits a loop of 24 independent VDPBF16PS (24 · 16 lanes · 2
// pairs · 2 = 1536 flops an iteration), the rate the kernels are measured
// against.
func peakFunc() {
	name := asmkit.Export("vdpbf16psPeakAVX512")
	TEXT(name, NOSPLIT, "func(n int)")
	Doc(
		name+" runs n iterations of 24 independent VDPBF16PS (1536 flops an",
		"iteration); it computes nothing useful.",
	)
	Load(Param("n"), RCX)
	for i := 0; i < 24; i++ {
		VPXORD(zmm(i), zmm(i), zmm(i))
	}
	VPBROADCASTD(peakOperands, zmm(24))
	VPBROADCASTD(peakOperands.Offset(4), zmm(25))
	TESTQ(RCX, RCX)
	JLE(LabelRef(name + "_done"))
	Label(name + "_loop")
	for i := 0; i < 24; i++ {
		asmkit.Vdpbf16ps(zmm(i), zmm(24), zmm(25))
	}
	DECQ(RCX)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	asmkit.Ret()
}
