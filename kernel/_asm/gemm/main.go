// Command gemm generates the amd64 assembly of the kernel package's two
// matrix kernels, QKT and PV, in AVX-512 and AVX2+FMA variants, and the FMA
// peak loops the benchmarks measure them against:
//
//	go run ./gemm -out ../internal/x86/gemm_amd64.s -stubs ../internal/x86/gemm_amd64.go -pkg x86
//
// Both kernels are one register-blocked product C (+)= A·B of the same
// shape: A is read one element at a time and broadcast (the query rows for
// QKT, the probability rows for PV), B is read a row of vectors at a time
// (the transposed key panel for QKT, the value rows for PV), and C is the
// block in memory (the scores for QKT, the output rows for PV):
//
//	QKT: C = s (rows × cols), A = q (rows × d),    B = kt (d × cols), K = d
//	PV:  C = o (rows × d),    A = p (rows × cols), B = v (cols × d),  K = cols
//
// The micro-kernel keeps an MR × NV-vector block of C in accumulators: MR =
// 6 rows × 4 zmm (64 columns) with AVX-512, 6 rows × 2 ymm (16 columns) with
// AVX2. For each k it loads the NV vectors of B's row k once, broadcasts
// each row's A element into a register and issues the MR·NV FMAs: 24 FMAs
// for 10 loads with AVX-512, so the two FMA ports, not the load ports, set
// the pace. (A broadcast register measured about 3 % faster on Sapphire
// Rapids than FMAs with an embedded-broadcast memory operand, and plain
// loads of whole vectors about 2.5 % faster than opmask loads, so masks are
// kept to the blocks that end in a partial vector.)
//
// Columns are walked in blocks of 64 (AVX-512) or 16 (AVX2), the last one
// narrower, and within each the rows in blocks of 6 then one block of the
// 1–5 rows left; every (rows, vectors, masked) shape is its own unrolled
// micro-kernel. QKT sums k in chunks of 32 into zeroed accumulators: the
// first chunk stores them into s, later ones add s to them and store, and
// the last one also multiplies by the scale, which is qktGeneric's order of
// operations on every score. PV loads the o block into the accumulators,
// runs the whole k loop and stores it back.
//
// The walk over the blocks, the k loop and the register roles are
// asmkit.Product's, which the bfloat16 kernels (../bf16) share; this
// generator gives the register blocks, the FMA and the two kernels'
// micro-kernel bodies.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
)

// chunk is qktChunk of the Go code: QKT sums at most this many components
// into a fresh partial before adding the partial to the score.
const chunk = 32

// flag is QKT's: 0 during the first chunk of a block, 1 after. The other
// registers have the roles of the product driver (asmkit.Product), which
// leaves R13 to the kernel.
var flag = R13

// isa is one instruction-set variant with its register block.
type isa struct {
	*asmkit.RegBlock
	doc string // name in documentation
}

var (
	zmm = asmkit.AVX512.Reg
	ymm = asmkit.AVX2.Reg
)

const (
	zBcast    = 28 // index in zmm of the first of the two broadcast registers
	zScale    = 31 // index in zmm of the QKT scale
	avx2Bcast = 14 // index in ymm of the broadcast register
	avx2Mask  = 15 // index in ymm of the tail mask
)

// AVX-512: 6 rows × 4 zmm (64 columns) = 24 accumulators Z0–Z23, the B row
// in Z24–Z27, the A broadcasts alternating between Z28 and Z29, the QKT
// scale in Z31; the last vector of a partial block is loaded and stored
// through the opmask K1.
var avx512 = &isa{
	RegBlock: &asmkit.RegBlock{
		ISA: asmkit.AVX512, MR: 6, NV: 4,
		Acc: func(r, v int) VecPhysical { return zmm(r*4 + v) },
		B:   func(v int) VecPhysical { return zmm(24 + v) },
		A:   func(r int) VecPhysical { return zmm(zBcast + r%2) },
	},
	doc: "AVX-512",
}

// AVX2: 6 rows × 2 ymm (16 columns) = 12 accumulators Y0–Y11, the B row in
// Y12–Y13, the A broadcast in Y14, the tail mask in Y15 (VMASKMOVPS).
var avx2 = &isa{
	RegBlock: &asmkit.RegBlock{
		ISA: asmkit.AVX2, MR: 6, NV: 2,
		Acc:  func(r, v int) VecPhysical { return ymm(r*2 + v) },
		B:    func(v int) VecPhysical { return ymm(12 + v) },
		A:    func(int) VecPhysical { return ymm(avx2Bcast) },
		Mask: ymm(avx2Mask),
	},
	doc: "AVX2 and FMA",
}

var (
	mask16 Mem // AVX-512: uint16 masks, entry i = 2^(i+1) − 1
	mask8  Mem // AVX2: 8 × −1 then 8 × 0 (int32)

	peakOperands Mem // the two float32 factors of the FMA peak loops
)

// product returns the driver of a kernel of x named name: float32 A and B,
// each row's A element broadcast by VBROADCASTSS and multiplied in by
// VFMADD231PS, body the micro-kernel's.
func product(x *isa, name string, args asmkit.ProductArgs, body func(p *asmkit.Product, rows int, b asmkit.Block)) *asmkit.Product {
	return &asmkit.Product{
		RegBlock: x.RegBlock, Name: name, Args: args, ElemShift: 2,
		Mask16: mask16, Mask8: mask8,
		Broadcast: func(m Mem, dst VecPhysical) { VBROADCASTSS(m, dst) },
		MulAdd:    func(acc, b, a VecPhysical) { VFMADD231PS(b, a, acc) },
		Body:      body,
	}
}

// qktBody is QKT's micro-kernel (asmkit.ChunkedQKT): the components in
// chunks of chunk into zeroed accumulators, added to the scores in s chunk
// after chunk, the scale applied last.
var qktBody = asmkit.ChunkedQKT(chunk, flag)

// pvBody is PV's micro-kernel: the o block is loaded into the
// accumulators, runs the whole k loop and is stored back.
func pvBody(p *asmkit.Product, rows int, b asmkit.Block) {
	p.LoadC(rows, b)
	Load(Param("cols"), asmkit.KC)
	p.KLoop(rows, b)
	p.StoreC(rows, b)
}

func main() {
	ConstraintExpr("amd64,!purego")

	mask16 = asmkit.Opmask16("gemmMask16", 1)
	mask8 = asmkit.Mask8("gemmMask8")

	peakOperands = GLOBL("gemmPeakOperands", RODATA|NOPTR)
	DATA(0, F32(0.999))
	DATA(4, F32(1.001))

	for _, x := range []*isa{avx512, avx2} {
		qktFunc(x)
	}
	for _, x := range []*isa{avx512, avx2} {
		pvFunc(x)
	}
	for _, x := range []*isa{avx512, avx2} {
		peakFunc(x)
	}
	Generate()
}

func blockDoc(x *isa, rows, cols string) string {
	return fmt.Sprintf("%d×%d %s (%d rows × %d %s) register blocks, %d accumulators;",
		x.MR, x.Width(), rows, x.MR, x.NV, cols, x.MR*x.NV)
}

func qktFunc(x *isa) {
	name := asmkit.Export("qkt" + x.Name)
	TEXT(name, NOSPLIT, "func(s *float32, ldS int, q *float32, ldQ int, kt *float32, ldK int, rows, cols, d int, scale float32)")
	Pragma("noescape")
	Doc(
		name+" is QKT with "+x.doc+" (sizes >= 1, leading dimensions in elements):",
		"",
		"	for i := 0; i < rows; i++ {",
		"		for j := 0; j < cols; j++ {",
		"			var acc float32",
		"			for k := 0; k < d; k++ {",
		"				acc += q[i*ldQ+k] * kt[k*ldK+j]",
		"			}",
		"			s[i*ldS+j] = scale * acc",
		"		}",
		"	}",
		"",
		"It sums the components in chunks of "+fmt.Sprint(chunk)+", each into a fresh partial that is",
		"then added to the score, and applies the scale at the end, as qktGeneric",
		"does. "+blockDoc(x, "score", "key vectors"),
		"the key vectors of one component are loaded once for all the block's rows.",
	)
	p := product(x, name, asmkit.ProductArgs{C: "s", LdC: "ldS", A: "q", LdA: "ldQ", B: "kt", LdB: "ldK", N: "cols"}, qktBody)
	if x.IsAVX512() {
		p.Scale = zmm(zScale)
	}
	p.Function()
}

func pvFunc(x *isa) {
	name := asmkit.Export("pv" + x.Name)
	TEXT(name, NOSPLIT, "func(o *float32, ldO int, p *float32, ldP int, v *float32, ldV int, rows, cols, d int)")
	Pragma("noescape")
	Doc(
		name+" is PV with "+x.doc+" (sizes >= 1, leading dimensions in elements):",
		"",
		"	for i := 0; i < rows; i++ {",
		"		for k := 0; k < d; k++ {",
		"			acc := o[i*ldO+k]",
		"			for j := 0; j < cols; j++ {",
		"				acc += p[i*ldP+j] * v[j*ldV+k]",
		"			}",
		"			o[i*ldO+k] = acc",
		"		}",
		"	}",
		"",
		blockDoc(x, "output", "vectors of d"),
		"the vectors of one value row are loaded once for all the block's rows.",
	)
	product(x, name, asmkit.ProductArgs{C: "o", LdC: "ldO", A: "p", LdA: "ldP", B: "v", LdB: "ldV", N: "d"}, pvBody).Function()
}

// peakFunc emits a loop of independent FMAs that saturates the FMA ports:
// AVX-512 24 zmm chains (768 flops an iteration), AVX2 12 ymm chains (192).
func peakFunc(x *isa) {
	name := asmkit.Export("fmaPeak" + x.Name)
	TEXT(name, NOSPLIT, "func(n int)")
	chains, regs := 24, x.Reg
	if !x.IsAVX512() {
		chains = 12
	}
	Doc(
		name+" runs n iterations of "+fmt.Sprint(chains)+" independent "+x.doc+" FMAs",
		fmt.Sprintf("(%d flops an iteration); it computes nothing useful.", chains*x.Lanes()*2),
	)
	Load(Param("n"), RCX)
	for i := 0; i < chains; i++ {
		x.Zero(regs(i))
	}
	// Multiply two ordinary numbers rather than zeros, whose FMAs can draw
	// less power and so run at a higher clock than real work does.
	VBROADCASTSS(peakOperands, regs(chains))
	VBROADCASTSS(peakOperands.Offset(4), regs(chains+1))
	TESTQ(RCX, RCX)
	JLE(LabelRef(name + "_done"))
	Label(name + "_loop")
	for i := 0; i < chains; i++ {
		VFMADD231PS(regs(chains), regs(chains+1), regs(i))
	}
	DECQ(RCX)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	asmkit.Ret()
}
