package asmkit

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The register-blocked product C (+)= A·B of the matrix kernels (the
// float32 ones of _asm/gemm and the bfloat16 ones of _asm/bf16). A is read
// one element a step and broadcast, B a row of vectors a step, and C is
// the block in memory:
//
//	QKT: C = s (rows × cols), A = q (rows × d),    B = the key panel (d × cols),   K = d
//	PV:  C = o (rows × d),    A = p (rows × cols), B = the value rows (cols × d), K = cols
//
// (for bfloat16 a step is a pair of the reduction side and B a panel of
// pairs). [Product.Function] walks the columns in blocks of the register
// block's width, the last one narrower, and within each the rows in
// blocks of MR then one block of the 1..MR−1 rows left; every (rows,
// vectors, masked) shape is its own unrolled micro-kernel, whose body the
// generator gives ([Product.Body]) from the pieces here: [Product.KLoop]
// for the product over k, and the loads, stores and arithmetic of the
// accumulators.

// Register roles of the product kernels. Everything is a physical
// register: the kernels are hand-blocked and the roles are easier to read
// (and to check) fixed than allocated. R13 is not used by the driver: a
// body may use it.
var (
	LdA  = R8  // A's leading dimension in bytes
	LdB  = R9  // B's leading dimension in bytes
	LdC  = R10 // C's leading dimension in bytes
	LdB3 = R11 // 3·LdB
	A0   = RSI // A row 0 of the block, at the current k
	A3   = RDI // A row 3 of the block, at the current k
	BPtr = RBX // B row k, at the block's first column
	KC   = RCX // k steps left (in the current chunk); scratch between micro-kernels
	KRem = RDX // k steps left after the current chunk (a body's own); scratch: the mask index
	C0   = RAX // C row 0 of the block
	C3   = R12 // C row 3 of the block
	ARow = R14 // A row 0 of the block, at k = 0
	BCol = R15 // B row 0 at the column block's first column
)

// aStep is the bytes A advances a k step: one float32, or one pair of
// bfloat16. A column of B (a float32, or a pair) takes as many.
const aStep = 4

// RegBlock is a register block: MR rows × NV vectors of accumulators.
type RegBlock struct {
	*ISA
	MR, NV int // rows and vectors; MR is 6
	// Acc returns the accumulator of row r, vector v.
	Acc func(r, v int) VecPhysical
	// B returns the register holding B's vector v at the current k.
	B func(v int) VecPhysical
	// A returns the register A's element of row r is broadcast into.
	A func(r int) VecPhysical
	// Mask is the register of the AVX2 tail mask (VMASKMOVPS); AVX-512
	// blocks use the opmask K1.
	Mask VecPhysical
}

// Width is the number of columns of a full register block.
func (x *RegBlock) Width() int { return x.NV * x.Lanes() }

// Block is one register-block shape: NV vectors, the last one loaded and
// stored under the mask when Masked.
type Block struct {
	NV     int
	Masked bool
}

// IsMasked says whether vector v of the block goes through the mask.
func (b Block) IsMasked(v int) bool { return b.Masked && v == b.NV-1 }

// ProductArgs names the arguments of a product kernel's Go signature that
// the driver loads: the rows of C, A and B with their leading dimensions
// (in elements), and N, C's columns (the columns walked); the row count is
// always named rows.
type ProductArgs struct {
	C, LdC, A, LdA, B, LdB, N string
}

// Product generates one product kernel, between the generator's TEXT and
// its next function.
type Product struct {
	*RegBlock
	Name      string      // the function's name, prefix of its labels
	Args      ProductArgs // the argument names
	ElemShift uint8       // log2 of the bytes of an element of A and of B, the unit of LdA and LdB
	// Scale, if not nil, receives the float32 argument scale broadcast in
	// the prologue (an AVX-512 QKT kernel).
	Scale VecPhysical
	// Mask16 is an Opmask16 table from 1 lane (AVX-512); Mask8 a Mask8
	// table (AVX2).
	Mask16, Mask8 operand.Mem
	// Broadcast broadcasts A's element at m into dst; MulAdd adds the
	// products of b and the broadcast a into acc.
	Broadcast func(m operand.Mem, dst VecPhysical)
	MulAdd    func(acc, b, a VecPhysical)
	// Body emits a micro-kernel of rows rows and shape b once A0, A3
	// (rows > 3), BPtr, C0 and C3 (rows > 3) point at the block: typically
	// load or clear the accumulators, load KC and run KLoop, store.
	Body func(p *Product, rows int, b Block)

	seq int
}

// Label returns the label format names in the function.
func (p *Product) Label(format string, a ...any) string {
	return p.Name + "_" + fmt.Sprintf(format, a...)
}

// NextID returns a number not yet used in the function's labels.
func (p *Product) NextID() int {
	id := p.seq
	p.seq++
	return id
}

// rowAddr is the element at byte offset disp of block row r of a matrix
// whose rows 0 and 3 are at r0 and r3 and whose leading dimension is ld.
func rowAddr(r0, r3, ld Register, r, disp int) operand.Mem {
	base := r0
	if r >= 3 {
		base = r3
	}
	m := operand.Mem{Base: base, Disp: disp}
	switch r % 3 {
	case 1:
		m = m.Idx(ld, 1)
	case 2:
		m = m.Idx(ld, 2)
	}
	return m
}

// aAddr is A's element of row r at k offset u (steps) from the current k.
func (p *Product) aAddr(r, u int) operand.Mem { return rowAddr(A0, A3, LdA, r, aStep*u) }

// bAddr is B's vector v of row u (0..3) counted from the current k.
func (p *Product) bAddr(u, v int) operand.Mem {
	m := operand.Mem{Base: BPtr, Disp: p.VecBytes * v}
	switch u {
	case 1:
		m = m.Idx(LdB, 1)
	case 2:
		m = m.Idx(LdB, 2)
	case 3:
		m = m.Idx(LdB3, 1)
	}
	return m
}

// CAddr is C's vector v of block row r.
func (p *Product) CAddr(r, v int) operand.Mem { return rowAddr(C0, C3, LdC, r, p.VecBytes*v) }

// LoadVec loads a vector into dst, through the mask when masked.
func (p *Product) LoadVec(m operand.Mem, dst VecPhysical, masked bool) {
	switch {
	case !masked:
		VMOVUPS(m, dst)
	case p.IsAVX512():
		VMOVUPS_Z(m, K1, dst)
	default:
		VMASKMOVPS(m, p.Mask, dst)
	}
}

// StoreVec stores the vector src, through the mask when masked.
func (p *Product) StoreVec(src VecPhysical, m operand.Mem, masked bool) {
	switch {
	case !masked:
		VMOVUPS(src, m)
	case p.IsAVX512():
		VMOVUPS(src, K1, m)
	default:
		VMASKMOVPS(src, p.Mask, m)
	}
}

// step emits the products of one k, whose B row is u (0..3) rows and whose
// A elements are u steps from the current k.
func (p *Product) step(rows int, b Block, u int) {
	for v := 0; v < b.NV; v++ {
		p.LoadVec(p.bAddr(u, v), p.B(v), b.IsMasked(v))
	}
	for r := 0; r < rows; r++ {
		t := p.A(r)
		p.Broadcast(p.aAddr(r, u), t)
		for v := 0; v < b.NV; v++ {
			p.MulAdd(p.Acc(r, v), p.B(v), t)
		}
	}
}

// KLoop emits the product over KC >= 1 values of k, four at a time, then
// one at a time, advancing the A and B pointers.
func (p *Product) KLoop(rows int, b Block) {
	id := p.NextID()
	l4, l4done, l1, done := p.Label("k4_%d", id), p.Label("k4done_%d", id), p.Label("k1_%d", id), p.Label("kdone_%d", id)
	SUBQ(operand.U8(4), KC)
	JB(operand.LabelRef(l4done))
	Label(l4)
	for u := 0; u < 4; u++ {
		p.step(rows, b, u)
	}
	ADDQ(operand.U8(4*aStep), A0)
	if rows > 3 {
		ADDQ(operand.U8(4*aStep), A3)
	}
	LEAQ(operand.Mem{Base: BPtr, Index: LdB, Scale: 4}, BPtr)
	SUBQ(operand.U8(4), KC)
	JAE(operand.LabelRef(l4))
	Label(l4done)
	ADDQ(operand.U8(4), KC)
	JZ(operand.LabelRef(done))
	Label(l1)
	p.step(rows, b, 0)
	ADDQ(operand.U8(aStep), A0)
	if rows > 3 {
		ADDQ(operand.U8(aStep), A3)
	}
	ADDQ(LdB, BPtr)
	DECQ(KC)
	JNZ(operand.LabelRef(l1))
	Label(done)
}

// ForAcc calls f for each accumulator of a block of rows rows and shape b,
// row by row, with whether its vector is masked.
func (p *Product) ForAcc(rows int, b Block, f func(r, v int, acc VecPhysical, masked bool)) {
	for r := 0; r < rows; r++ {
		for v := 0; v < b.NV; v++ {
			f(r, v, p.Acc(r, v), b.IsMasked(v))
		}
	}
}

// ZeroAcc clears the accumulators (the zeroing idiom, which reads
// nothing: ZeroIdiom).
func (p *Product) ZeroAcc(rows int, b Block) {
	p.ForAcc(rows, b, func(_, _ int, acc VecPhysical, _ bool) { p.ZeroIdiom(acc) })
}

// LoadC loads C's block into the accumulators.
func (p *Product) LoadC(rows int, b Block) {
	p.ForAcc(rows, b, func(r, v int, acc VecPhysical, masked bool) {
		p.LoadVec(p.CAddr(r, v), acc, masked)
	})
}

// StoreC stores the accumulators into C's block.
func (p *Product) StoreC(rows int, b Block) {
	p.ForAcc(rows, b, func(r, v int, acc VecPhysical, masked bool) {
		p.StoreVec(acc, p.CAddr(r, v), masked)
	})
}

// AddC adds C's block into the accumulators (AVX2's masked vectors through
// B's register 0).
func (p *Product) AddC(rows int, b Block) {
	p.ForAcc(rows, b, func(r, v int, acc VecPhysical, masked bool) {
		m := p.CAddr(r, v)
		switch {
		case !masked:
			VADDPS(m, acc, acc)
		case p.IsAVX512():
			VADDPS_Z(m, acc, K1, acc)
		default:
			VMASKMOVPS(m, p.Mask, p.B(0))
			VADDPS(p.B(0), acc, acc)
		}
	})
}

// ScaleAcc multiplies the accumulators by the argument scale: by the
// Scale register, or, without one, broadcast first into A's register of
// row 0.
func (p *Product) ScaleAcc(rows int, b Block) {
	s := p.Scale
	if s == nil {
		s = p.A(0)
		VBROADCASTSS(ParamAddr("scale"), s)
	}
	p.ForAcc(rows, b, func(_, _ int, acc VecPhysical, _ bool) {
		VMULPS(s, acc, acc)
	})
}

// micro emits the register block of rows rows at A row ARow, C block C0
// and B column BCol.
func (p *Product) micro(rows int, b Block) {
	Commentf("%d×%d block", rows, b.NV)
	MOVQ(ARow, A0)
	MOVQ(BCol, BPtr)
	if rows > 3 {
		LEAQ(operand.Mem{Base: A0, Index: LdA, Scale: 2}, A3)
		ADDQ(LdA, A3)
		LEAQ(operand.Mem{Base: C0, Index: LdC, Scale: 2}, C3)
		ADDQ(LdC, C3)
	}
	p.Body(p, rows, b)
}

// Micro emits the register block of rows rows and shape b at A row ARow,
// C block C0 and B column BCol: the block's pointers, then Body. A kernel
// with its own walk over the blocks (the fused tile fold) calls it.
func (p *Product) Micro(rows int, b Block) { p.micro(rows, b) }

// ChunkedQKT returns the micro-kernel body of a score product S = scale·A·B
// with qktGeneric's order of operations on every score: the k steps in
// chunks of chunk into zeroed accumulators; the first chunk stores them
// into C, later ones add C to them and store, and the last one also
// multiplies by the scale. flag (a register the driver leaves free: R13)
// is 0 during the first chunk, 1 after; KRem counts the k steps after the
// current chunk, from the argument d.
func ChunkedQKT(chunk int, flag GPPhysical) func(p *Product, rows int, b Block) {
	return func(p *Product, rows int, b Block) {
		kc, krem := KC, KRem
		id := p.NextID()
		lChunk, lStore, lFinal, lMul := p.Label("chunk_%d", id), p.Label("store_%d", id),
			p.Label("final_%d", id), p.Label("mul_%d", id)
		Load(Param("d"), krem)
		XORL(flag.As32(), flag.As32()) // XORL is avo's zeroing idiom: it reads nothing
		Label(lChunk)
		p.ZeroAcc(rows, b)
		MOVL(operand.U32(chunk), kc.As32())
		CMPQ(krem, kc)
		CMOVQLT(krem, kc)
		SUBQ(kc, krem)
		p.KLoop(rows, b)
		TESTQ(krem, krem)
		JZ(operand.LabelRef(lFinal))
		TESTQ(flag, flag)
		JZ(operand.LabelRef(lStore))
		p.AddC(rows, b)
		Label(lStore)
		p.StoreC(rows, b)
		MOVL(operand.U32(1), flag.As32())
		JMP(operand.LabelRef(lChunk))
		Label(lFinal)
		TESTQ(flag, flag)
		JZ(operand.LabelRef(lMul))
		p.AddC(rows, b)
		Label(lMul)
		p.ScaleAcc(rows, b)
		p.StoreC(rows, b)
	}
}

// rowLoop emits the loop over the row blocks of one column block and jumps
// to next when done. The row count left lives in the local irem.
func (p *Product) rowLoop(b Block, irem, cCol operand.Mem, next string) {
	id := p.NextID()
	lLoop, lTail := p.Label("rows_%d", id), p.Label("rowtail_%d", id)
	Load(Param(p.Args.A), ARow)
	MOVQ(cCol, C0)
	Load(Param("rows"), KC)
	MOVQ(KC, irem)
	Label(lLoop)
	CMPQ(irem, operand.U8(p.MR))
	JB(operand.LabelRef(lTail))
	p.micro(p.MR, b)
	// ARow += 6·LdA, C0 += 6·LdC
	LEAQ(operand.Mem{Base: LdA, Index: LdA, Scale: 2}, KC) // 3·LdA
	LEAQ(operand.Mem{Base: ARow, Index: KC, Scale: 2}, ARow)
	LEAQ(operand.Mem{Base: LdC, Index: LdC, Scale: 2}, KC) // 3·LdC
	LEAQ(operand.Mem{Base: C0, Index: KC, Scale: 2}, C0)
	SUBQ(operand.U8(p.MR), irem)
	JMP(operand.LabelRef(lLoop))
	Label(lTail)
	MOVQ(irem, KC)
	var rl []string
	for r := 1; r < p.MR; r++ {
		rl = append(rl, p.Label("rows%d_%d", r, id))
		CMPQ(KC, operand.U8(r))
		JE(operand.LabelRef(rl[r-1]))
	}
	JMP(operand.LabelRef(next))
	for r := 1; r < p.MR; r++ {
		Label(rl[r-1])
		p.micro(r, b)
		JMP(operand.LabelRef(next))
	}
}

func (p *Product) blockLabel(b Block) string {
	if b.Masked {
		return p.Label("nv%dm", b.NV)
	}
	return p.Label("nv%d", b.NV)
}

// Function emits the whole kernel: the prologue, the walk over the column
// and row blocks, and RET.
func (p *Product) Function() {
	if p.MR != 6 {
		panic(fmt.Sprintf("asmkit: %s: register blocks of %d rows; the row walk steps 6", p.Name, p.MR))
	}
	Load(Param(p.Args.LdA), LdA)
	Load(Param(p.Args.LdB), LdB)
	Load(Param(p.Args.LdC), LdC)
	SHLQ(operand.U8(p.ElemShift), LdA)
	SHLQ(operand.U8(p.ElemShift), LdB)
	SHLQ(operand.U8(2), LdC)
	LEAQ(operand.Mem{Base: LdB, Index: LdB, Scale: 2}, LdB3)
	if p.Scale != nil {
		VBROADCASTSS(ParamAddr("scale"), p.Scale)
	}
	irem := AllocLocal(8)
	cCol := AllocLocal(8)
	nrem := AllocLocal(8)
	Load(Param(p.Args.B), BCol)
	Load(Param(p.Args.C), KC)
	MOVQ(KC, cCol)
	Load(Param(p.Args.N), KC)
	MOVQ(KC, nrem)

	w := p.Width()
	lCol, lNext := p.Label("cols"), p.Label("next")
	Label(lCol)
	// KC = min(columns left, width)
	MOVQ(nrem, KC)
	MOVL(operand.U32(w), KRem.As32())
	CMPQ(KC, KRem)
	CMOVQGT(KRem, KC)
	DECQ(KC) // KC = n−1
	var blocks []Block
	if p.IsAVX512() {
		// nv−1 = (n−1)/16 vectors; when n is not a multiple of 16, K1 is
		// the mask of the last vector, 1 + (n−1)%16 lanes. Blocks of whole
		// vectors load without a mask, which is measurably faster.
		MOVQ(KC, KRem)
		ANDQ(operand.U8(15), KRem)
		LEAQ(p.Mask16, C3)
		KMOVW(operand.Mem{Base: C3, Index: KRem, Scale: 2}, K1)
		SHRQ(operand.U8(4), KC)
		CMPQ(KRem, operand.U8(15))
		JNE(operand.LabelRef(p.Label("masked")))
		for nv := 1; nv <= p.NV; nv++ {
			blocks = append(blocks, Block{NV: nv})
		}
		for nv := 1; nv <= p.NV; nv++ {
			blocks = append(blocks, Block{NV: nv, Masked: true})
		}
		for i, b := range blocks {
			if i == p.NV {
				Label(p.Label("masked"))
			}
			if b.NV < p.NV {
				CMPQ(KC, operand.U8(b.NV-1))
				JE(operand.LabelRef(p.blockLabel(b)))
			} else {
				JMP(operand.LabelRef(p.blockLabel(b)))
			}
		}
	} else {
		// Blocks of one or two whole vectors need no mask; otherwise Mask
		// holds the mask of the last vector, 1 + (n−1)%8 lanes: the 8
		// dwords of Mask8 from 7 − (n−1)%8 on.
		if p.NV != 2 {
			panic(fmt.Sprintf("asmkit: %s: AVX2 register blocks of %d vectors; the column walk takes 2", p.Name, p.NV))
		}
		blocks = []Block{{NV: 2}, {NV: 1}, {NV: 1, Masked: true}, {NV: 2, Masked: true}}
		CMPQ(KC, operand.U8(w-1))
		JE(operand.LabelRef(p.blockLabel(blocks[0])))
		CMPQ(KC, operand.U8(p.Lanes()-1))
		JE(operand.LabelRef(p.blockLabel(blocks[1])))
		MOVQ(KC, KRem)
		ANDQ(operand.U8(7), KRem)
		NEGQ(KRem)
		LEAQ(p.Mask8.Offset(28), C3)
		VMOVDQU(operand.Mem{Base: C3, Index: KRem, Scale: 4}, p.Mask)
		CMPQ(KC, operand.U8(p.Lanes()))
		JB(operand.LabelRef(p.blockLabel(blocks[2])))
		JMP(operand.LabelRef(p.blockLabel(blocks[3])))
	}
	for _, b := range blocks {
		Label(p.blockLabel(b))
		p.rowLoop(b, irem, cCol, lNext)
	}
	Label(lNext)
	ADDQ(operand.U32(w*aStep), BCol)
	ADDQ(operand.U32(w*4), cCol) // float32
	SUBQ(operand.U32(w), nrem)
	JG(operand.LabelRef(lCol))
	Ret()
}
