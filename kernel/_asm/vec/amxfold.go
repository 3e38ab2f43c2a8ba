package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
)

const foldChunkDoc = `FoldChunkAMX folds a tile of cols keys into the online softmax of rows
query rows in bf16 precision, in one call: for rows i < rows,

	S = Q·Kᵀ                      (TDPBF16PS, unscaled)
	S[i][:lo[i]] = S[i][vis[i]:] = −Inf   (only with lo != nil)
	SoftmaxBF16AVX512 of S's row i into P's row, m[i], z[i], alpha[i]
	O[i] *= alpha[i] unless alpha[i] == 1
	O += P·V                      (TDPBF16PS)

the bits of QKTBF16 (scale 1), the −Inf edges, OnlineSoftmaxBF16,
ScaleRows and PVBF16 at the amx level. Sizes: rows >= 1, cols, d and
dv multiples of 32, leading dimensions in elements; lo and vis (int
slices of rows elements, or both nil) as FoldChunkBF16 says.

q is rows × d bfloat16 (the queries), kp the K pair panel (d/2 pair rows
of 2·cols), vp the V pair panel (cols/2 pair rows of 2·dv), o the rows ×
dv float32 accumulators. The rows are taken 16 at a time (a row tile);
the last tile reads q's rows and reads and writes o's rows up to the
next multiple of 16, whose values are scratch. s is two tiles of scores
(32 rows × cols, ldS; 16 rows when rows <= 16), p one tile of
probabilities (16 rows × cols, ldP).

Every tile is 16 rows × 64 bytes (one configuration, loaded once): C in
tmm0–3, A in tmm4, B in tmm5–7 in turn. The scores of row tile t+1 are
computed a block of 4 (or 2) key tiles at a time, and after each block
piece rows of tile t go through the softmax, so that the tile unit
computes the next products while the vector units take the exponentials
of the current ones; then tile t's P·V adds to its accumulators, each C
tile of o loaded once and stored once.`

// amxFoldConfig is the tile configuration of FoldChunkAMX: palette 1,
// every tile 16 rows × 64 bytes.
var amxFoldConfig Mem

func amxFoldData() {
	amxFoldConfig = GLOBL("amxfoldcfg", RODATA|NOPTR)
	DATA(0, U8(1))
	for t := range 8 {
		DATA(16+2*t, U16(64))
	}
	for t := range 8 {
		DATA(48+t, U8(16))
	}
	DATA(56, U64(0))
}

// Physical registers of the tile instructions' operands, written just
// before each one (the register allocator cannot see inside their bytes).
var (
	tBase   = R10
	tStride = R11
)

// Tile registers: C tiles 0–3, the A tile 4, the B tiles 5–7 in turn.
const tileAChunk = 4

func tileBChunk(i int) int { return 5 + i%3 }

// tileAt emits a tile instruction on the tile at base+disp, stride in the
// frame slot ld.
func tileAt(base Register, disp int, ld Mem, op func(base, index GPPhysical)) {
	LEAQ(Mem{Base: base, Disp: disp}, tBase)
	MOVQ(ld, tStride)
	op(tBase, tStride)
}

// qkBlock emits the scores of n key tiles (n = 4 or 2) of the next row
// tile: C from zero, d/32 k steps, C stored into S at sCol.
func (amxFold) qkBlock(g *chunkGen, n int) {
	Commentf("scores of %d key tiles of the next row tile", n)
	for i := range n {
		asmkit.TileZero(i)
	}
	qa, kb, kc := GP64(), GP64(), GP64()
	MOVQ(g.qNext, qa)
	MOVQ(g.kCol, kb)
	MOVQ(g.dTiles, kc)
	lK := g.label("qk")
	Label(lK)
	tileAt(qa, 0, g.ldQ, func(b, i GPPhysical) { asmkit.TileLoad(tileAChunk, b, i) })
	for i := range n {
		tileAt(kb, 64*i, g.ldK, func(b, x GPPhysical) { asmkit.TileLoad(tileBChunk(i), b, x) })
		asmkit.TDPBF16PS(i, tileAChunk, tileBChunk(i))
	}
	ADDQ(U8(64), qa)
	ADDQ(g.kStep, kb)
	DECQ(kc)
	JNZ(LabelRef(lK))
	sc := GP64()
	MOVQ(g.sCol, sc)
	for i := range n {
		tileAt(sc, 64*i, g.ldS, func(b, x GPPhysical) { asmkit.TileStore(b, x, i) })
	}
	ADDQ(U32(64*n), g.kCol) // n key tiles of 16 pairs' columns: 64n bytes of a pair row
	ADDQ(U32(64*n), g.sCol)
}

// amxPVBlock emits P·V into n column tiles (n = 4 or 2) of the current row
// tile's accumulators at oc: C loaded from O, cols/32 k steps, C stored.
func amxPVBlock(g *chunkGen, n int, oc, vc Register) {
	Commentf("P·V into %d column tiles of the current row tile", n)
	for i := range n {
		tileAt(oc, 64*i, g.ldO, func(b, x GPPhysical) { asmkit.TileLoad(i, b, x) })
	}
	pa, vb, kc := GP64(), GP64(), GP64()
	Load(Param("p"), pa)
	MOVQ(vc, vb)
	MOVQ(g.kvSteps, kc)
	lK := g.label("pv")
	Label(lK)
	tileAt(pa, 0, g.ldP, func(b, x GPPhysical) { asmkit.TileLoad(tileAChunk, b, x) })
	for i := range n {
		tileAt(vb, 64*i, g.ldV, func(b, x GPPhysical) { asmkit.TileLoad(tileBChunk(i), b, x) })
		asmkit.TDPBF16PS(i, tileAChunk, tileBChunk(i))
	}
	ADDQ(U8(64), pa)
	ADDQ(g.vStep, vb)
	DECQ(kc)
	JNZ(LabelRef(lK))
	for i := range n {
		tileAt(oc, 64*i, g.ldO, func(b, x GPPhysical) { asmkit.TileStore(b, x, i) })
	}
}

// pv emits the current row tile's P·V over every column block of dv.
func (amxFold) pv(g *chunkGen) {
	oc, vc, n := GP64(), GP64(), GP64()
	MOVQ(g.oCur, oc)
	Load(Param("vp"), vc)
	for _, blk := range []struct {
		n     int
		count Mem
	}{{4, g.dv4}, {2, g.dv2}} {
		lLoop, lDone := g.label("pvcols"), g.label("pvcolsdone")
		MOVQ(blk.count, n)
		Label(lLoop)
		TESTQ(n, n)
		JZ(LabelRef(lDone))
		amxPVBlock(g, blk.n, oc, vc)
		ADDQ(U32(64*blk.n), oc)
		ADDQ(U32(64*blk.n), vc)
		DECQ(n)
		JMP(LabelRef(lLoop))
		Label(lDone)
	}
}

// amxFold is FoldChunkAMX's part of genFoldChunk: the products on the
// tiles, each row rescaled after its softmax.
type amxFold struct{}

func genFoldChunkAMX() {
	genFoldChunk(chunkSpec{name: "FoldChunkAMX", doc: foldChunkDoc, tileRows: 16,
		signature: "func(q *uint16, ldQ int, kp *uint16, ldK int, vp *uint16, ldV int, o *float32, ldO int, s *float32, ldS int, p *uint16, ldP int, rows, cols, d, dv, piece int, scale float32, m, z, alpha *float32, lo, vis *int)"},
		amxFold{})
}

func (amxFold) begin() {
	Comment("One tile configuration for the call: every tile 16 rows × 64 bytes.")
	LEAQ(amxFoldConfig, tBase)
	asmkit.LdTileCfg(tBase)
}

func (amxFold) end() { asmkit.TileRelease() }

func (amxFold) rescale(g *chunkGen, ar Register, one VecVirtual) {
	Comment("The row's accumulators times alpha, unless it is 1 (ScaleRows).")
	av := XMM()
	VMOVSS(Mem{Base: ar}, av)
	VUCOMISS(one.AsX(), av)
	JNE(LabelRef("fc_rescale"))
	JPS(LabelRef("fc_rescale"))
	JMP(LabelRef("fc_rowend"))
	Label("fc_rescale")
	za, or, n := ZMM(), GP64(), GP64()
	VBROADCASTSS(av, za)
	MOVQ(g.done, or)
	IMULQ(g.ldO, or)
	ADDQ(g.oCur, or)
	Load(Param("dv"), n)
	SHRQ(U8(4), n)
	Label("fc_rescale_vec")
	zt := ZMM()
	VMULPS(Mem{Base: or}, za, zt)
	VMOVUPS(zt, Mem{Base: or})
	ADDQ(U8(64), or)
	DECQ(n)
	JNZ(LabelRef("fc_rescale_vec"))
}
