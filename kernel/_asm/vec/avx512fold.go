package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
)

const foldChunkAVX512Doc = `FoldChunkBF16AVX512 folds a tile of cols keys into the online
softmax of rows query rows in bf16 precision, in one call, with AVX-512
and AVX512-BF16: for rows i < rows,

	S = Q·Kᵀ                      (VDPBF16PS, unscaled)
	S[i][:lo[i]] = S[i][vis[i]:] = −Inf   (only with lo != nil)
	SoftmaxBF16AVX512 of S's row i into P's row, m[i], z[i], alpha[i]
	O[i] *= alpha[i]
	O += P·V                      (VDPBF16PS)

the bits of QKTBF16 (scale 1), the −Inf edges, OnlineSoftmaxBF16,
ScaleRows and PVBF16 at the avx512bf16 level. Sizes: rows >= 1, cols, d
and dv multiples of 32, leading dimensions in elements; lo and vis (int
slices of rows elements, or both nil) as FoldChunkBF16 says.

q is rows × d bfloat16 (the queries), kp the K pair panel (d/2 pair rows
of 2·cols), vp the V pair panel (cols/2 pair rows of 2·dv), o the rows ×
dv float32 accumulators; only rows rows of q and o are touched. The rows
are taken 12 at a time (a row tile); s holds two tiles of scores (24 rows
× cols, ldS; as many rows as the call has when it has fewer), p one tile
of probabilities (12 rows × cols, ldP; fewer likewise).

The products are those of QKTBF16AVX512 and PVBF16AVX512: register
blocks of 6 rows × 4 zmm (64 columns) or 2 zmm, each element's pairs
added in order from zero (Q·Kᵀ) or from O times alpha (P·V, the rescale
folded into its load: the same product as ScaleRows'). The scores of row
tile t+1 are computed a key block (64 columns, or a last 32) at a time,
and after each block piece rows of tile t go through the softmax, so that
the out-of-order core runs the next products beside the current
exponentials; then tile t's P·V. The products take every vector register
but two, so the softmax loads its constants again for each row.`

// rowsLeft is the rows of a row tile a product has still to take: the
// products use every other general register.
var rowsLeft = R13

// avx512Fold is FoldChunkBF16AVX512's part of genFoldChunk: the products
// on the vector registers, the rows' rescale in P·V.
type avx512Fold struct {
	qkP, pvP      *asmkit.Product
	aRow          Mem // alpha at the current register block's first row
	pvO, pvV, pvN Mem // P·V: O and V at the column block, column blocks left
}

func genFoldChunkBF16AVX512() {
	f := &avx512Fold{}
	f.qkP = asmkit.BF16Product("fcq", asmkit.ProductArgs{}, Mem{}, func(p *asmkit.Product, rows int, b asmkit.Block) {
		p.ZeroAcc(rows, b)
		Load(Param("d"), asmkit.KC)
		SHRQ(U8(1), asmkit.KC)
		p.KLoop(rows, b)
		p.StoreC(rows, b)
	})
	f.pvP = asmkit.BF16Product("fcv", asmkit.ProductArgs{}, Mem{}, func(p *asmkit.Product, rows int, b asmkit.Block) {
		p.LoadC(rows, b)
		MOVQ(f.aRow, asmkit.KRem)
		for r := range rows {
			a := p.A(0)
			VBROADCASTSS(Mem{Base: asmkit.KRem, Disp: 4 * r}, a)
			for v := range b.NV {
				VMULPS(a, p.Acc(r, v), p.Acc(r, v))
			}
		}
		Load(Param("cols"), asmkit.KC)
		SHRQ(U8(1), asmkit.KC)
		p.KLoop(rows, b)
		p.StoreC(rows, b)
	})
	genFoldChunk(chunkSpec{name: "FoldChunkBF16AVX512", doc: foldChunkAVX512Doc, tileRows: 12, perRow: true,
		signature: "func(q *uint16, ldQ int, kp *uint16, ldK int, vp *uint16, ldV int, o *float32, ldO int, s *float32, ldS int, p *uint16, ldP int, rows, cols, d, dv, piece int, scale float32, m, z, alpha *float32, lo, vis *int)"},
		f)
}

func (f *avx512Fold) begin() {
	f.aRow, f.pvO, f.pvV, f.pvN = AllocLocal(8), AllocLocal(8), AllocLocal(8), AllocLocal(8)
}

func (f *avx512Fold) end() {}

func (f *avx512Fold) rescale(*chunkGen, Register, VecVirtual) {}

// rowBlocks emits p's micro-kernels over rowsLeft rows from ARow and C0
// (set, with the leading dimensions, by the caller): blocks of 6 rows,
// then one of the 1–5 left; next runs after each block of 6.
func rowBlocks(p *asmkit.Product, b asmkit.Block, next func()) {
	id := p.NextID()
	lLoop, lTail, lDone := p.Label("rows_%d", id), p.Label("tail_%d", id), p.Label("done_%d", id)
	Label(lLoop)
	CMPQ(rowsLeft, U8(6))
	JB(LabelRef(lTail))
	p.Micro(6, b)
	LEAQ(Mem{Base: asmkit.LdA, Index: asmkit.LdA, Scale: 2}, asmkit.KC) // 3·LdA
	LEAQ(Mem{Base: asmkit.ARow, Index: asmkit.KC, Scale: 2}, asmkit.ARow)
	LEAQ(Mem{Base: asmkit.LdC, Index: asmkit.LdC, Scale: 2}, asmkit.KC) // 3·LdC
	LEAQ(Mem{Base: asmkit.C0, Index: asmkit.KC, Scale: 2}, asmkit.C0)
	if next != nil {
		next()
	}
	SUBQ(U8(6), rowsLeft)
	JMP(LabelRef(lLoop))
	Label(lTail)
	var ls []string
	for r := 1; r < 6; r++ {
		ls = append(ls, p.Label("rows%d_%d", r, id))
		CMPQ(rowsLeft, U8(r))
		JE(LabelRef(ls[r-1]))
	}
	JMP(LabelRef(lDone))
	for r := 1; r < 6; r++ {
		Label(ls[r-1])
		p.Micro(r, b)
		JMP(LabelRef(lDone))
	}
	Label(lDone)
}

// setLd emits the product's leading dimensions in bytes (A, B, C).
func setLd(ldA, ldB, ldC Mem) {
	MOVQ(ldA, asmkit.LdA)
	MOVQ(ldB, asmkit.LdB)
	LEAQ(Mem{Base: asmkit.LdB, Index: asmkit.LdB, Scale: 2}, asmkit.LdB3)
	MOVQ(ldC, asmkit.LdC)
}

func (f *avx512Fold) qkBlock(g *chunkGen, n int) {
	Commentf("scores of %d key vectors of the next row tile", n)
	setLd(g.ldQ, g.ldK, g.ldS)
	MOVQ(g.qNext, asmkit.ARow)
	MOVQ(g.kCol, asmkit.BCol)
	MOVQ(g.sCol, asmkit.C0)
	MOVQ(g.nextRows, rowsLeft)
	rowBlocks(f.qkP, asmkit.Block{NV: n}, nil)
	ADDQ(U32(64*n), g.kCol) // 16n pairs' columns: 64n bytes of a pair row
	ADDQ(U32(64*n), g.sCol)
}

func (f *avx512Fold) pv(g *chunkGen) {
	t := GP64()
	MOVQ(g.oCur, t)
	MOVQ(t, f.pvO)
	Load(Param("vp"), t)
	MOVQ(t, f.pvV)
	for _, blk := range []struct {
		n     int
		count Mem
	}{{4, g.dv4}, {2, g.dv2}} {
		Commentf("P·V into %d column vectors of the current row tile", blk.n)
		lLoop, lDone := g.label("pvcols"), g.label("pvcolsdone")
		MOVQ(blk.count, t)
		MOVQ(t, f.pvN)
		Label(lLoop)
		CMPQ(f.pvN, U8(0))
		JE(LabelRef(lDone))
		setLd(g.ldP, g.ldV, g.ldO)
		Load(Param("p"), asmkit.ARow)
		MOVQ(f.pvV, asmkit.BCol)
		MOVQ(f.pvO, asmkit.C0)
		MOVQ(g.curRows, rowsLeft)
		Load(Param("alpha"), asmkit.KC)
		MOVQ(g.curRow0, asmkit.KRem)
		LEAQ(Mem{Base: asmkit.KC, Index: asmkit.KRem, Scale: 4}, asmkit.KC)
		MOVQ(asmkit.KC, f.aRow)
		rowBlocks(f.pvP, asmkit.Block{NV: blk.n}, func() { ADDQ(U8(24), f.aRow) })
		ADDQ(U32(64*blk.n), f.pvO)
		ADDQ(U32(64*blk.n), f.pvV)
		DECQ(f.pvN)
		JMP(LabelRef(lLoop))
		Label(lDone)
	}
}
