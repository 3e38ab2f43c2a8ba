// Command bf16 generates the amd64 assembly of the kernel package's two
// bfloat16 products, QKTBF16 and PVBF16, with AVX512-BF16:
//
//	go run ./bf16 -out ../bf16_amd64.s -stubs ../bf16_amd64.go -pkg kernel
//
// Both kernels are the register-blocked product C (+)= A·B of the float32
// gemm kernels (see ../gemm), with bfloat16 operands taken a pair of the
// reduction side at a time. B is a pair panel: its row t holds, for each
// column n, the two bfloat16 of k = 2t and 2t+1 side by side, a dword per
// column, so that one 64-byte vector of it holds the pairs of 16 columns.
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
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
	"github.com/flashgo/flashgo/kernel/_asm/x86enc"
)

// Register roles. Everything is a physical register, as in the gemm
// generator: the kernels are hand-blocked and the roles are easier to read
// (and to check) fixed than allocated.
var (
	lda  = R8  // A's leading dimension in bytes (2 a bfloat16)
	ldb  = R9  // B's leading dimension in bytes: one row of pairs
	ldc  = R10 // C's leading dimension in bytes (4 a float32)
	ldb3 = R11 // 3·ldb
	a0   = RSI // A row 0 of the block, at the current pair
	a3   = RDI // A row 3 of the block, at the current pair
	bp   = RBX // B row of the current pair, at the block's first column
	kc   = RCX // pairs left; scratch between micro-kernels
	tmp  = RDX // scratch: the mask index
	c0   = RAX // C row 0 of the block
	c3   = R12 // C row 3 of the block
	aRow = R14 // A row 0 of the block, at pair 0
	bCol = R15 // B row 0 at the column block's first column
)

const (
	mr     = 6  // rows of the register block
	nv     = 4  // vectors of the register block
	lanes  = 16 // float32 lanes (columns) of a vector
	width  = nv * lanes
	vecB   = 64 // bytes in a vector
	pairB  = 4  // bytes in a pair of bfloat16 (a lane of B)
	bcast0 = 28 // index in zmm of the first of the two broadcast registers
	zScale = 31 // index in zmm of QKTBF16's scale
)

var zmm = asmkit.AVX512.Reg

// acc is the accumulator of row r, vector v; bReg the register holding
// B's vector v at the current pair.
func acc(r, v int) VecPhysical { return zmm(r*nv + v) }
func bReg(v int) VecPhysical   { return zmm(24 + v) }

var (
	mask16       Mem // uint16 masks, entry i = 2^(i+1) − 1
	peakOperands Mem // the two bfloat16 pairs of the VDPBF16PS peak loop
)

// kind is which kernel is being generated.
type kind int

const (
	qkt kind = iota
	pv
)

// block is one register-block shape: nv vectors, the last one loaded and
// stored under K1 when masked.
type block struct {
	nv     int
	masked bool
}

func (b block) isMasked(v int) bool { return b.masked && v == b.nv-1 }

// gen holds the state of the function being generated.
type gen struct {
	k    kind
	name string
	seq  int
}

func (g *gen) label(format string, a ...any) string {
	return g.name + "_" + fmt.Sprintf(format, a...)
}

// aAddr is the pair of A's row r, u pairs from the current one.
func aAddr(r, u int) Mem {
	base := a0
	if r >= 3 {
		base = a3
	}
	m := Mem{Base: base, Disp: pairB * u}
	switch r % 3 {
	case 1:
		m = m.Idx(lda, 1)
	case 2:
		m = m.Idx(lda, 2)
	}
	return m
}

// bAddr is B's vector v of the row u (0..3) pairs from the current one.
func bAddr(u, v int) Mem {
	m := Mem{Base: bp, Disp: vecB * v}
	switch u {
	case 1:
		m = m.Idx(ldb, 1)
	case 2:
		m = m.Idx(ldb, 2)
	case 3:
		m = m.Idx(ldb3, 1)
	}
	return m
}

// cAddr is C's vector v of block row r.
func cAddr(r, v int) Mem {
	base := c0
	if r >= 3 {
		base = c3
	}
	m := Mem{Base: base, Disp: vecB * v}
	switch r % 3 {
	case 1:
		m = m.Idx(ldc, 1)
	case 2:
		m = m.Idx(ldc, 2)
	}
	return m
}

func loadVec(m Mem, dst VecPhysical, masked bool) {
	if masked {
		VMOVUPS_Z(m, K1, dst)
	} else {
		VMOVUPS(m, dst)
	}
}

func storeVec(src VecPhysical, m Mem, masked bool) {
	if masked {
		VMOVUPS(src, K1, m)
	} else {
		VMOVUPS(src, m)
	}
}

// vdpbf16ps emits VDPBF16PS dst, src1, src2 (Intel order): dst += the
// products of the bfloat16 pairs of src1 and src2, lane by lane.
func vdpbf16ps(dst, src1, src2 VecPhysical) {
	x86enc.Emit(fmt.Sprintf("VDPBF16PS %s, %s, %s", dst.Asm(), src1.Asm(), src2.Asm()),
		x86enc.VDPBF16PS(x86enc.Num(dst), x86enc.Num(src1), x86enc.Num(src2)))
}

// step emits the products of one pair: B's row u (0..3) pairs on, A's pairs
// u on.
func step(rows int, b block, u int) {
	for v := 0; v < b.nv; v++ {
		loadVec(bAddr(u, v), bReg(v), b.isMasked(v))
	}
	for r := 0; r < rows; r++ {
		t := zmm(bcast0 + r%2)
		VPBROADCASTD(aAddr(r, u), t)
		for v := 0; v < b.nv; v++ {
			vdpbf16ps(acc(r, v), bReg(v), t)
		}
	}
}

// kloop emits the product over kc >= 1 pairs, four at a time, then one at
// a time, advancing the A and B pointers.
func (g *gen) kloop(rows int, b block) {
	id := g.seq
	g.seq++
	l4, l4done, l1, done := g.label("k4_%d", id), g.label("k4done_%d", id), g.label("k1_%d", id), g.label("kdone_%d", id)
	SUBQ(U8(4), kc)
	JB(LabelRef(l4done))
	Label(l4)
	for u := 0; u < 4; u++ {
		step(rows, b, u)
	}
	ADDQ(U8(4*pairB), a0)
	if rows > 3 {
		ADDQ(U8(4*pairB), a3)
	}
	LEAQ(Mem{Base: bp, Index: ldb, Scale: 4}, bp)
	SUBQ(U8(4), kc)
	JAE(LabelRef(l4))
	Label(l4done)
	ADDQ(U8(4), kc)
	JZ(LabelRef(done))
	Label(l1)
	step(rows, b, 0)
	ADDQ(U8(pairB), a0)
	if rows > 3 {
		ADDQ(U8(pairB), a3)
	}
	ADDQ(ldb, bp)
	DECQ(kc)
	JNZ(LabelRef(l1))
	Label(done)
}

func forAcc(rows int, b block, f func(r, v int, acc VecPhysical, masked bool)) {
	for r := 0; r < rows; r++ {
		for v := 0; v < b.nv; v++ {
			f(r, v, acc(r, v), b.isMasked(v))
		}
	}
}

// pairs loads the number of pairs of the reduction side into kc.
func (g *gen) pairs() {
	n := "d"
	if g.k == pv {
		n = "cols"
	}
	Load(Param(n), kc)
	SHRQ(U8(1), kc)
}

// micro emits the register block of rows rows at A row aRow, C block c0
// and B column bCol.
func (g *gen) micro(rows int, b block) {
	Commentf("%d×%d block", rows, b.nv)
	MOVQ(aRow, a0)
	MOVQ(bCol, bp)
	if rows > 3 {
		LEAQ(Mem{Base: a0, Index: lda, Scale: 2}, a3)
		ADDQ(lda, a3)
		LEAQ(Mem{Base: c0, Index: ldc, Scale: 2}, c3)
		ADDQ(ldc, c3)
	}
	if g.k == pv {
		forAcc(rows, b, func(r, v int, acc VecPhysical, masked bool) { loadVec(cAddr(r, v), acc, masked) })
	} else {
		forAcc(rows, b, func(_, _ int, acc VecPhysical, _ bool) { VPXORD(acc, acc, acc) })
	}
	g.pairs()
	g.kloop(rows, b)
	if g.k == qkt {
		forAcc(rows, b, func(_, _ int, acc VecPhysical, _ bool) { VMULPS(zmm(zScale), acc, acc) })
	}
	forAcc(rows, b, func(r, v int, acc VecPhysical, masked bool) { storeVec(acc, cAddr(r, v), masked) })
}

// rowLoop emits the loop over the row blocks of one column block and jumps
// to next when done. The row count left lives in the local irem.
func (g *gen) rowLoop(b block, irem, cCol Mem, next string) {
	id := g.seq
	g.seq++
	lLoop, lTail := g.label("rows_%d", id), g.label("rowtail_%d", id)
	Load(Param(g.aName()), aRow)
	MOVQ(cCol, c0)
	Load(Param("rows"), kc)
	MOVQ(kc, irem)
	Label(lLoop)
	CMPQ(irem, U8(mr))
	JB(LabelRef(lTail))
	g.micro(mr, b)
	// aRow += 6·lda, c0 += 6·ldc
	LEAQ(Mem{Base: lda, Index: lda, Scale: 2}, kc) // 3·lda
	LEAQ(Mem{Base: aRow, Index: kc, Scale: 2}, aRow)
	LEAQ(Mem{Base: ldc, Index: ldc, Scale: 2}, kc) // 3·ldc
	LEAQ(Mem{Base: c0, Index: kc, Scale: 2}, c0)
	SUBQ(U8(mr), irem)
	JMP(LabelRef(lLoop))
	Label(lTail)
	MOVQ(irem, kc)
	var rl []string
	for r := 1; r < mr; r++ {
		rl = append(rl, g.label("rows%d_%d", r, id))
		CMPQ(kc, U8(r))
		JE(LabelRef(rl[r-1]))
	}
	JMP(LabelRef(next))
	for r := 1; r < mr; r++ {
		Label(rl[r-1])
		g.micro(r, b)
		JMP(LabelRef(next))
	}
}

func (g *gen) blockLabel(b block) string {
	if b.masked {
		return g.label("nv%dm", b.nv)
	}
	return g.label("nv%d", b.nv)
}

func (g *gen) aName() string {
	if g.k == qkt {
		return "q"
	}
	return "p"
}

func (g *gen) names() (c, ldC, ldA, b, ldB, n string) {
	if g.k == qkt {
		return "s", "ldS", "ldQ", "kp", "ldK", "cols"
	}
	return "o", "ldO", "ldP", "vp", "ldV", "d"
}

// function emits a whole kernel.
func (g *gen) function() {
	cN, ldcN, ldaN, bN, ldbN, nN := g.names()
	Load(Param(ldaN), lda)
	Load(Param(ldbN), ldb)
	Load(Param(ldcN), ldc)
	SHLQ(U8(1), lda)
	SHLQ(U8(1), ldb)
	SHLQ(U8(2), ldc)
	LEAQ(Mem{Base: ldb, Index: ldb, Scale: 2}, ldb3)
	if g.k == qkt {
		VBROADCASTSS(asmkit.ParamAddr("scale"), zmm(zScale))
	}
	irem := AllocLocal(8)
	cCol := AllocLocal(8)
	nrem := AllocLocal(8)
	Load(Param(bN), bCol)
	Load(Param(cN), kc)
	MOVQ(kc, cCol)
	Load(Param(nN), kc)
	MOVQ(kc, nrem)

	lCol, lNext := g.label("cols"), g.label("next")
	Label(lCol)
	// kc = min(columns left, width) − 1
	MOVQ(nrem, kc)
	MOVL(U32(width), tmp.As32())
	CMPQ(kc, tmp)
	CMOVQGT(tmp, kc)
	DECQ(kc)
	// nv−1 = (n−1)/16 vectors; when n is not a multiple of 16, K1 is the
	// mask of the last vector, 1 + (n−1)%16 lanes. Blocks of whole vectors
	// load without a mask.
	MOVQ(kc, tmp)
	ANDQ(U8(lanes-1), tmp)
	LEAQ(mask16, c3)
	KMOVW(Mem{Base: c3, Index: tmp, Scale: 2}, K1)
	SHRQ(U8(4), kc)
	CMPQ(tmp, U8(lanes-1))
	JNE(LabelRef(g.label("masked")))
	var blocks []block
	for n := 1; n <= nv; n++ {
		blocks = append(blocks, block{nv: n})
	}
	for n := 1; n <= nv; n++ {
		blocks = append(blocks, block{nv: n, masked: true})
	}
	for i, b := range blocks {
		if i == nv {
			Label(g.label("masked"))
		}
		if b.nv < nv {
			CMPQ(kc, U8(b.nv-1))
			JE(LabelRef(g.blockLabel(b)))
		} else {
			JMP(LabelRef(g.blockLabel(b)))
		}
	}
	for _, b := range blocks {
		Label(g.blockLabel(b))
		g.rowLoop(b, irem, cCol, lNext)
	}
	Label(lNext)
	ADDQ(U32(width*pairB), bCol) // 64 columns of pairs
	ADDQ(U32(width*4), cCol)     // 64 float32
	SUBQ(U32(width), nrem)
	JG(LabelRef(lCol))
	asmkit.Ret()
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
	name := "roundBF16AVX512"
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
	name := "qktBF16AVX512"
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
	g := &gen{k: qkt, name: name}
	g.function()
}

func pvFunc() {
	name := "pvBF16AVX512"
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
	g := &gen{k: pv, name: name}
	g.function()
}

// peakFunc emits a loop of 24 independent VDPBF16PS (24 · 16 lanes · 2
// pairs · 2 = 1536 flops an iteration), the rate the kernels are measured
// against.
func peakFunc() {
	name := "vdpbf16psPeakAVX512"
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
		vdpbf16ps(zmm(i), zmm(24), zmm(25))
	}
	DECQ(RCX)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	asmkit.Ret()
}
