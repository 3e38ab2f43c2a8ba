// Command gemm generates the amd64 assembly of the kernel package's two
// matrix kernels, QKT and PV, in AVX-512 and AVX2+FMA variants, and the FMA
// peak loops the benchmarks measure them against:
//
//	go run ./gemm -out ../gemm_amd64.s -stubs ../gemm_amd64.go -pkg kernel
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

// Register roles shared by all the matrix kernels. Everything is a physical
// register: the kernels are hand-blocked and the roles are easier to read
// (and to check) fixed than allocated.
var (
	lda  = R8  // A's leading dimension in bytes
	ldb  = R9  // B's leading dimension in bytes
	ldc  = R10 // C's leading dimension in bytes
	ldb3 = R11 // 3·ldb
	a0   = RSI // A row 0 of the block, at the current k
	a3   = RDI // A row 3 of the block, at the current k
	bp   = RBX // B row k, at the block's first column
	kc   = RCX // k iterations left in the current chunk
	krem = RDX // k iterations left after the current chunk (QKT)
	c0   = RAX // C row 0 of the block
	c3   = R12 // C row 3 of the block
	flag = R13 // QKT: 0 during the first chunk of a block, 1 after
	aRow = R14 // A row 0 of the block, at k = 0
	bCol = R15 // B row 0 at the column block's first column
)

// isa is one instruction-set variant with its register block.
type isa struct {
	*asmkit.ISA
	doc string // name in documentation
	mr  int    // rows of the register block
	nv  int    // vectors of the register block
	// acc returns the accumulator of row r, vector v.
	acc func(r, v int) VecPhysical
	// b returns the register holding B's vector v at the current k.
	b func(v int) VecPhysical
}

// width is the number of columns of a full register block.
func (x *isa) width() int { return x.nv * x.Lanes() }

var (
	zmm = asmkit.AVX512.Reg
	ymm = asmkit.AVX2.Reg
)

// AVX-512: 6 rows × 4 zmm (64 columns) = 24 accumulators Z0–Z23, the B row
// in Z24–Z27, the A broadcasts alternating between Z28 and Z29, the QKT
// scale in Z31; the last vector of a partial block is loaded and stored
// through the opmask K1.
var avx512 = &isa{
	ISA: asmkit.AVX512, doc: "AVX-512", mr: 6, nv: 4,
	acc: func(r, v int) VecPhysical { return zmm(r*4 + v) },
	b:   func(v int) VecPhysical { return zmm(24 + v) },
}

// AVX2: 6 rows × 2 ymm (16 columns) = 12 accumulators Y0–Y11, the B row in
// Y12–Y13, the A broadcast in Y14, the tail mask in Y15 (VMASKMOVPS).
var avx2 = &isa{
	ISA: asmkit.AVX2, doc: "AVX2 and FMA", mr: 6, nv: 2,
	acc: func(r, v int) VecPhysical { return ymm(r*2 + v) },
	b:   func(v int) VecPhysical { return ymm(12 + v) },
}

const (
	zBcast    = 28 // index in zmm of the first of the two broadcast registers
	zScale    = 31 // index in zmm of the QKT scale
	avx2Bcast = 14 // index in ymm of the broadcast register
	avx2Mask  = 15 // index in ymm of the tail mask
)

var (
	mask16 Mem // AVX-512: uint16 masks, entry i = 2^(i+1) − 1
	mask8  Mem // AVX2: 8 × −1 then 8 × 0 (int32)

	peakOperands Mem // the two float32 factors of the FMA peak loops
)

// kind is which kernel is being generated.
type kind int

const (
	qkt kind = iota
	pv
)

// block is one register-block shape: nv vectors, the last one loaded and
// stored under a mask when masked.
type block struct {
	nv     int
	masked bool
}

// gen holds the state of the function being generated.
type gen struct {
	x    *isa
	k    kind
	name string
	seq  int
}

func (g *gen) label(format string, a ...any) string {
	return g.name + "_" + fmt.Sprintf(format, a...)
}

// aAddr is A's element of row r at k offset u (elements) from the current k.
func (g *gen) aAddr(r, u int) Mem {
	base := a0
	if r >= 3 {
		base = a3
	}
	m := Mem{Base: base, Disp: 4 * u}
	switch r % 3 {
	case 1:
		m = m.Idx(lda, 1)
	case 2:
		m = m.Idx(lda, 2)
	}
	return m
}

// bAddr is B's vector v of row u (0..3) counted from the current k.
func (g *gen) bAddr(u, v int) Mem {
	m := Mem{Base: bp, Disp: g.x.VecBytes * v}
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
func (g *gen) cAddr(r, v int) Mem {
	base := c0
	if r >= 3 {
		base = c3
	}
	m := Mem{Base: base, Disp: g.x.VecBytes * v}
	switch r % 3 {
	case 1:
		m = m.Idx(ldc, 1)
	case 2:
		m = m.Idx(ldc, 2)
	}
	return m
}

func (g *gen) isMasked(b block, v int) bool { return b.masked && v == b.nv-1 }

// loadVec loads a vector of B or C into dst, masked when it is the block's
// last and the block is masked.
func (g *gen) loadVec(m Mem, dst VecPhysical, masked bool) {
	switch {
	case !masked:
		VMOVUPS(m, dst)
	case g.x.IsAVX512():
		VMOVUPS_Z(m, K1, dst)
	default:
		VMASKMOVPS(m, ymm(avx2Mask), dst)
	}
}

func (g *gen) storeVec(src VecPhysical, m Mem, masked bool) {
	switch {
	case !masked:
		VMOVUPS(src, m)
	case g.x.IsAVX512():
		VMOVUPS(src, K1, m)
	default:
		VMASKMOVPS(src, ymm(avx2Mask), m)
	}
}

// step emits the FMAs of one k, whose B row is u (0..3) rows and whose A
// elements are u elements from the current k.
func (g *gen) step(mr int, b block, u int) {
	x := g.x
	for v := 0; v < b.nv; v++ {
		g.loadVec(g.bAddr(u, v), x.b(v), g.isMasked(b, v))
	}
	for r := 0; r < mr; r++ {
		t := ymm(avx2Bcast)
		if x.IsAVX512() {
			t = zmm(zBcast + r%2)
		}
		VBROADCASTSS(g.aAddr(r, u), t)
		for v := 0; v < b.nv; v++ {
			VFMADD231PS(x.b(v), t, x.acc(r, v))
		}
	}
}

// kloop emits the product over kc >= 1 values of k, four at a time, then
// one at a time, advancing the A and B pointers.
func (g *gen) kloop(mr int, b block) {
	id := g.seq
	g.seq++
	l4, l4done, l1, done := g.label("k4_%d", id), g.label("k4done_%d", id), g.label("k1_%d", id), g.label("kdone_%d", id)
	SUBQ(U8(4), kc)
	JB(LabelRef(l4done))
	Label(l4)
	for u := 0; u < 4; u++ {
		g.step(mr, b, u)
	}
	ADDQ(U8(16), a0)
	if mr > 3 {
		ADDQ(U8(16), a3)
	}
	LEAQ(Mem{Base: bp, Index: ldb, Scale: 4}, bp)
	SUBQ(U8(4), kc)
	JAE(LabelRef(l4))
	Label(l4done)
	ADDQ(U8(4), kc)
	JZ(LabelRef(done))
	Label(l1)
	g.step(mr, b, 0)
	ADDQ(U8(4), a0)
	if mr > 3 {
		ADDQ(U8(4), a3)
	}
	ADDQ(ldb, bp)
	DECQ(kc)
	JNZ(LabelRef(l1))
	Label(done)
}

func (g *gen) forAcc(mr int, b block, f func(r, v int, acc VecPhysical, masked bool)) {
	for r := 0; r < mr; r++ {
		for v := 0; v < b.nv; v++ {
			f(r, v, g.x.acc(r, v), g.isMasked(b, v))
		}
	}
}

func (g *gen) zeroAcc(mr int, b block) {
	g.forAcc(mr, b, func(_, _ int, acc VecPhysical, _ bool) { g.x.Zero(acc) })
}

// addC adds C's block into the accumulators.
func (g *gen) addC(mr int, b block) {
	g.forAcc(mr, b, func(r, v int, acc VecPhysical, masked bool) {
		m := g.cAddr(r, v)
		switch {
		case !masked:
			VADDPS(m, acc, acc)
		case g.x.IsAVX512():
			VADDPS_Z(m, acc, K1, acc)
		default:
			VMASKMOVPS(m, ymm(avx2Mask), g.x.b(0))
			VADDPS(g.x.b(0), acc, acc)
		}
	})
}

func (g *gen) loadC(mr int, b block) {
	g.forAcc(mr, b, func(r, v int, acc VecPhysical, masked bool) {
		g.loadVec(g.cAddr(r, v), acc, masked)
	})
}

func (g *gen) storeC(mr int, b block) {
	g.forAcc(mr, b, func(r, v int, acc VecPhysical, masked bool) {
		g.storeVec(acc, g.cAddr(r, v), masked)
	})
}

func (g *gen) scaleAcc(mr int, b block) {
	s := zmm(zScale)
	if !g.x.IsAVX512() {
		s = ymm(avx2Bcast)
		VBROADCASTSS(asmkit.ParamAddr("scale"), s)
	}
	g.forAcc(mr, b, func(_, _ int, acc VecPhysical, _ bool) {
		VMULPS(s, acc, acc)
	})
}

// micro emits the register block of mr rows at A row aRow, C block c0 and
// B column bCol.
func (g *gen) micro(mr int, b block) {
	Commentf("%d×%d block", mr, b.nv)
	MOVQ(aRow, a0)
	MOVQ(bCol, bp)
	if mr > 3 {
		LEAQ(Mem{Base: a0, Index: lda, Scale: 2}, a3)
		ADDQ(lda, a3)
		LEAQ(Mem{Base: c0, Index: ldc, Scale: 2}, c3)
		ADDQ(ldc, c3)
	}
	if g.k == pv {
		g.loadC(mr, b)
		Load(Param("cols"), kc)
		g.kloop(mr, b)
		g.storeC(mr, b)
		return
	}
	id := g.seq
	g.seq++
	lChunk, lStore, lFinal, lMul := g.label("chunk_%d", id), g.label("store_%d", id),
		g.label("final_%d", id), g.label("mul_%d", id)
	Load(Param("d"), krem)
	XORL(flag.As32(), flag.As32())
	Label(lChunk)
	g.zeroAcc(mr, b)
	MOVL(U32(chunk), kc.As32())
	CMPQ(krem, kc)
	CMOVQLT(krem, kc)
	SUBQ(kc, krem)
	g.kloop(mr, b)
	TESTQ(krem, krem)
	JZ(LabelRef(lFinal))
	TESTQ(flag, flag)
	JZ(LabelRef(lStore))
	g.addC(mr, b)
	Label(lStore)
	g.storeC(mr, b)
	MOVL(U32(1), flag.As32())
	JMP(LabelRef(lChunk))
	Label(lFinal)
	TESTQ(flag, flag)
	JZ(LabelRef(lMul))
	g.addC(mr, b)
	Label(lMul)
	g.scaleAcc(mr, b)
	g.storeC(mr, b)
}

// rowLoop emits the loop over the row blocks of one column block and jumps
// to next when done. The row count left lives in the local irem.
func (g *gen) rowLoop(b block, irem Mem, cCol Mem, next string) {
	x := g.x
	id := g.seq
	g.seq++
	lLoop, lTail := g.label("rows_%d", id), g.label("rowtail_%d", id)
	Load(Param(g.aName()), aRow)
	MOVQ(cCol, c0)
	Load(Param("rows"), kc)
	MOVQ(kc, irem)
	Label(lLoop)
	CMPQ(irem, U8(x.mr))
	JB(LabelRef(lTail))
	g.micro(x.mr, b)
	// aRow += mr·lda, c0 += mr·ldc (mr = 6)
	LEAQ(Mem{Base: lda, Index: lda, Scale: 2}, kc) // 3·lda
	LEAQ(Mem{Base: aRow, Index: kc, Scale: 2}, aRow)
	LEAQ(Mem{Base: ldc, Index: ldc, Scale: 2}, kc) // 3·ldc
	LEAQ(Mem{Base: c0, Index: kc, Scale: 2}, c0)
	SUBQ(U8(x.mr), irem)
	JMP(LabelRef(lLoop))
	Label(lTail)
	MOVQ(irem, kc)
	var rl []string
	for r := 1; r < x.mr; r++ {
		rl = append(rl, g.label("rows%d_%d", r, id))
		CMPQ(kc, U8(r))
		JE(LabelRef(rl[r-1]))
	}
	JMP(LabelRef(next))
	for r := 1; r < x.mr; r++ {
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

func (g *gen) names() (c, ldC, a, ldA, b, ldB, n string) {
	if g.k == qkt {
		return "s", "ldS", "q", "ldQ", "kt", "ldK", "cols"
	}
	return "o", "ldO", "p", "ldP", "v", "ldV", "d"
}

// function emits a whole kernel.
func (g *gen) function() {
	x := g.x
	cN, ldcN, _, ldaN, bN, ldbN, nN := g.names()
	Load(Param(ldaN), lda)
	Load(Param(ldbN), ldb)
	Load(Param(ldcN), ldc)
	SHLQ(U8(2), lda)
	SHLQ(U8(2), ldb)
	SHLQ(U8(2), ldc)
	LEAQ(Mem{Base: ldb, Index: ldb, Scale: 2}, ldb3)
	if g.k == qkt && x.IsAVX512() {
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

	w := x.width()
	lCol, lNext := g.label("cols"), g.label("next")
	Label(lCol)
	// kc = min(columns left, width)
	MOVQ(nrem, kc)
	MOVL(U32(w), krem.As32())
	CMPQ(kc, krem)
	CMOVQGT(krem, kc)
	DECQ(kc) // kc = n−1
	var blocks []block
	if x.IsAVX512() {
		// nv−1 = (n−1)/16 vectors; when n is not a multiple of 16, K1 is
		// the mask of the last vector, 1 + (n−1)%16 lanes. Blocks of whole
		// vectors load without a mask, which is measurably faster.
		MOVQ(kc, krem)
		ANDQ(U8(15), krem)
		LEAQ(mask16, c3)
		KMOVW(Mem{Base: c3, Index: krem, Scale: 2}, K1)
		SHRQ(U8(4), kc)
		CMPQ(krem, U8(15))
		JNE(LabelRef(g.label("masked")))
		for nv := 1; nv <= x.nv; nv++ {
			blocks = append(blocks, block{nv: nv})
		}
		for nv := 1; nv <= x.nv; nv++ {
			blocks = append(blocks, block{nv: nv, masked: true})
		}
		for i, b := range blocks {
			if i == x.nv {
				Label(g.label("masked"))
			}
			if b.nv < x.nv {
				CMPQ(kc, U8(b.nv-1))
				JE(LabelRef(g.blockLabel(b)))
			} else {
				JMP(LabelRef(g.blockLabel(b)))
			}
		}
	} else {
		// Blocks of one or two whole vectors need no mask; otherwise Y15
		// holds the mask of the last vector, 1 + (n−1)%8 lanes: the 8
		// dwords of mask8 from 7 − (n−1)%8 on.
		blocks = []block{{nv: 2}, {nv: 1}, {nv: 1, masked: true}, {nv: 2, masked: true}}
		CMPQ(kc, U8(w-1))
		JE(LabelRef(g.blockLabel(blocks[0])))
		CMPQ(kc, U8(x.Lanes()-1))
		JE(LabelRef(g.blockLabel(blocks[1])))
		MOVQ(kc, krem)
		ANDQ(U8(7), krem)
		NEGQ(krem)
		LEAQ(mask8.Offset(28), c3)
		VMOVDQU(Mem{Base: c3, Index: krem, Scale: 4}, ymm(avx2Mask))
		CMPQ(kc, U8(x.Lanes()))
		JB(LabelRef(g.blockLabel(blocks[2])))
		JMP(LabelRef(g.blockLabel(blocks[3])))
	}
	for _, b := range blocks {
		Label(g.blockLabel(b))
		g.rowLoop(b, irem, cCol, lNext)
	}
	Label(lNext)
	ADDQ(U32(w*4), bCol)
	ADDQ(U32(w*4), cCol)
	SUBQ(U32(w), nrem)
	JG(LabelRef(lCol))
	asmkit.Ret()
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
		x.mr, x.width(), rows, x.mr, x.nv, cols, x.mr*x.nv)
}

func qktFunc(x *isa) {
	name := "qkt" + x.Name
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
	g := &gen{x: x, k: qkt, name: name}
	g.function()
}

func pvFunc(x *isa) {
	name := "pv" + x.Name
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
	g := &gen{x: x, k: pv, name: name}
	g.function()
}

// peakFunc emits a loop of independent FMAs that saturates the FMA ports:
// AVX-512 24 zmm chains (768 flops an iteration), AVX2 12 ymm chains (192).
func peakFunc(x *isa) {
	name := "fmaPeak" + x.Name
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
