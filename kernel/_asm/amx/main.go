// Command amx generates the amd64 assembly of the kernel package's AMX
// kernel, the tile product behind QKTBF16 and PVBF16 at the amx level, the
// loop that measures the tile unit's peak, and the helpers that read XCR0
// and the tile configuration:
//
//	go run ./amx -out ../internal/x86/amx_amd64.s -stubs ../internal/x86/amx_amd64.go -pkg x86
//
// Neither Go's assembler nor avo knows the tile instructions: x86enc
// encodes them and they are emitted as BYTE directives after a comment
// naming the instruction (Intel operand order).
//
// amxTiles computes C (+)= A·B over a grid of mt × nt tiles of C that all
// have one shape, m rows × n columns (m, n <= 16), summing kt steps of kp
// pairs of the reduction side (kp <= 16) with TDPBF16PS:
//
//	C: float32, m × n a tile, rows ldC apart  (the scores s, or the output o)
//	A: bfloat16, m × 2kp a tile, rows ldA apart (the queries q, or the probabilities p)
//	B: a pair panel, kp pair rows × n columns a tile, pair rows ldB apart
//	   (the keys kp, or the values vp): exactly AMX's B-tile layout, row t
//	   of the tile holding pairs t of its n columns (4n bytes)
//
// Every tile instruction reads or writes exactly the bytes of its tile
// (rows × colsb, rows ldX apart), so a grid whose tiles are partial reads
// and writes no element outside its blocks. The Go wrapper (amx_asm.go)
// cuts an operation into at most 2 × 2 × 2 such grids: whole tiles and
// the partial tile of the rows, of the columns and of the reduction side,
// one call and one tile configuration each. It builds the 64-byte
// configuration (palette 1); each call loads it first (LDTILECFG) and
// releases the tiles (TILERELEASE) before it returns, so no tile state
// outlives a call.
//
// The tiles are blocked 2 × 2: C's block of two row tiles by two column
// tiles in tmm0–3 (row r, column c in tmm 2r+c), the A tiles of its two
// row tiles in tmm4–5 and the B tiles of its two column tiles in tmm6–7.
// A k step loads 2 A and 2 B tiles (4 KiB) for 4 products (16 cycles
// each); a block starts from zero or from C (flagLoadC) and is stored back
// to C after the last k step. The grid is walked by row pairs, each row
// pair by column pairs, a last odd row or column tile in a 1-wide block.
// With flagScale, the rows of a row pair are multiplied by the scale with
// AVX-512 once all its blocks are stored (QKTBF16's scale, applied to the
// finished sums as qktBF16Generic applies it).
//
// Tdpbf16psPeakAMX is the bf16 product peak of the amx level (kernel's
// bf16Peak): four independent TDPBF16PS an iteration on tiles that stay in
// the tile registers, the 2 × 2 block of amxTiles with its loads taken out
// of the loop. All eight tiles are 16 rows × 64 bytes; the sources hold
// one 64-byte row of bfloat16 pairs near 1 (loaded with a zero stride), so
// that the products are of normal numbers and the sums stay far from
// overflow.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
)

// Flags of amxTiles; amx_asm.go has the same constants.
const (
	flagLoadC = 1 // start each block from C rather than from zero
	flagScale = 2 // multiply C by scale once stored
)

// Register roles of amxTiles. Everything is a physical register, as in the
// gemm generator: the roles are fixed by hand.
var (
	ldA   = R8  // A's leading dimension in bytes
	ldB   = R9  // B's leading dimension in bytes
	ldC   = R10 // C's leading dimension in bytes
	aStep = R11 // m·ldA: from a row tile of A to the next
	cStep = R12 // m·ldC: from a row tile of C to the next
	nStep = R13 // 4·n: from a column tile of B or C to the next
	aRow  = R14 // A at the row pair, k = 0
	cRow  = R15 // C at the row pair
	bCol  = RBX // B at the column pair, k = 0
	cBlk  = RDX // C at the block
	aK    = RSI // A at the block's first row tile, current k step
	bK    = RDI // B at the block's first column tile, current k step
	kc    = RCX // k steps left; rows left to scale
	tmp   = RAX // the address of a block's other tiles; scratch
)

// Vector registers of the scaling: the scale in Z31, the row being scaled
// in Z0, the mask of the row's partial vector in K1.
var (
	zScale = Z31
	zRow   = Z0
)

// Tile registers of the 2 × 2 block.
func tileC(r, c int) int { return 2*r + c }
func tileA(r int) int    { return 4 + r }
func tileB(c int) int    { return 6 + c }

// gen holds the state of the function being generated.
type gen struct {
	name string
	seq  int

	mrem, nrem     Mem // row and column tiles left
	akStep, bkStep Mem // bytes from a k step of A (4·kp) and of B (kp·ldB) to the next
	nvec           Mem // whole 16-float vectors in a row of the grid
}

func (g *gen) label(format string, a ...any) string {
	g.seq++
	return fmt.Sprintf("%s_%s_%d", g.name, fmt.Sprintf(format, a...), g.seq)
}

// cTile returns the register holding the address of C tile (r, c) of the
// block, computing it into tmp unless it is the block's first.
func cTile(r, c int) GPPhysical {
	switch {
	case r == 0 && c == 0:
		return cBlk
	case r == 0:
		LEAQ(Mem{Base: cBlk, Index: nStep, Scale: 1}, tmp)
	case c == 0:
		LEAQ(Mem{Base: cBlk, Index: cStep, Scale: 1}, tmp)
	default:
		LEAQ(Mem{Base: cBlk, Index: cStep, Scale: 1}, tmp)
		ADDQ(nStep, tmp)
	}
	return tmp
}

// block emits the product of one mr × nr block of C tiles (mr, nr = 1 or
// 2): C from zero or from memory, kt k steps, C stored.
func (g *gen) block(mr, nr int) {
	Commentf("%d×%d block of C tiles", mr, nr)
	lZero, lInit, lK := g.label("zero%d%d", mr, nr), g.label("init%d%d", mr, nr), g.label("k%d%d", mr, nr)
	TESTB(U8(flagLoadC), asmkit.ParamAddr("flags"))
	JZ(LabelRef(lZero))
	for r := range mr {
		for c := range nr {
			asmkit.TileLoad(tileC(r, c), cTile(r, c), ldC)
		}
	}
	JMP(LabelRef(lInit))
	Label(lZero)
	for r := range mr {
		for c := range nr {
			asmkit.TileZero(tileC(r, c))
		}
	}
	Label(lInit)

	MOVQ(aRow, aK)
	MOVQ(bCol, bK)
	Load(Param("kt"), kc)
	Label(lK)
	// The products are issued as soon as their operands are loaded.
	asmkit.TileLoad(tileA(0), aK, ldA)
	asmkit.TileLoad(tileB(0), bK, ldB)
	asmkit.TDPBF16PS(tileC(0, 0), tileA(0), tileB(0))
	if nr == 2 {
		LEAQ(Mem{Base: bK, Index: nStep, Scale: 1}, tmp)
		asmkit.TileLoad(tileB(1), tmp, ldB)
		asmkit.TDPBF16PS(tileC(0, 1), tileA(0), tileB(1))
	}
	if mr == 2 {
		LEAQ(Mem{Base: aK, Index: aStep, Scale: 1}, tmp)
		asmkit.TileLoad(tileA(1), tmp, ldA)
		asmkit.TDPBF16PS(tileC(1, 0), tileA(1), tileB(0))
		if nr == 2 {
			asmkit.TDPBF16PS(tileC(1, 1), tileA(1), tileB(1))
		}
	}
	ADDQ(g.akStep, aK)
	ADDQ(g.bkStep, bK)
	DECQ(kc)
	JNZ(LabelRef(lK))

	for r := range mr {
		for c := range nr {
			asmkit.TileStore(cTile(r, c), ldC, tileC(r, c))
		}
	}
}

// scaleRows emits, under flagScale, the multiplication by the scale of the
// mr·m rows of the row pair at cRow, nvec whole vectors and a partial one
// under K1 (no lanes when the row is a whole number of vectors) a row.
func (g *gen) scaleRows(mr int) {
	lSkip, lRow, lVec, lTail := g.label("noscale%d", mr), g.label("srow%d", mr), g.label("svec%d", mr), g.label("stail%d", mr)
	TESTB(U8(flagScale), asmkit.ParamAddr("flags"))
	JZ(LabelRef(lSkip))
	Commentf("scale the %d row tile(s) of the row pair", mr)
	MOVQ(cRow, tmp)
	Load(Param("m"), kc)
	if mr == 2 {
		SHLQ(U8(1), kc)
	}
	Label(lRow)
	MOVQ(tmp, bK)
	MOVQ(g.nvec, aK)
	TESTQ(aK, aK)
	JZ(LabelRef(lTail))
	Label(lVec)
	VMULPS(Mem{Base: bK}, zScale, zRow)
	VMOVUPS(zRow, Mem{Base: bK})
	ADDQ(U8(64), bK)
	DECQ(aK)
	JNZ(LabelRef(lVec))
	Label(lTail)
	VMOVUPS_Z(Mem{Base: bK}, K1, zRow)
	VMULPS(zRow, zScale, zRow)
	VMOVUPS(zRow, K1, Mem{Base: bK})
	ADDQ(ldC, tmp)
	DECQ(kc)
	JNZ(LabelRef(lRow))
	Label(lSkip)
}

// columns emits the walk over the column tiles of a row pair of mr row
// tiles, then its scaling.
func (g *gen) columns(mr int) {
	lCols, lOdd, lDone := g.label("cols%d", mr), g.label("colodd%d", mr), g.label("colsdone%d", mr)
	Load(Param("b"), bCol)
	MOVQ(cRow, cBlk)
	Load(Param("nt"), tmp)
	MOVQ(tmp, g.nrem)
	Label(lCols)
	MOVQ(g.nrem, tmp)
	CMPQ(tmp, U8(2))
	JB(LabelRef(lOdd))
	g.block(mr, 2)
	LEAQ(Mem{Base: bCol, Index: nStep, Scale: 2}, bCol)
	LEAQ(Mem{Base: cBlk, Index: nStep, Scale: 2}, cBlk)
	SUBQ(U8(2), g.nrem)
	JMP(LabelRef(lCols))
	Label(lOdd)
	TESTQ(tmp, tmp)
	JZ(LabelRef(lDone))
	g.block(mr, 1)
	Label(lDone)
	g.scaleRows(mr)
}

func amxTiles() {
	g := &gen{name: "AmxTiles"}
	TEXT(g.name, NOSPLIT, "func(cfg *[64]byte, c *float32, ldC int, a *uint16, ldA int, b *uint16, ldB int, mt, nt, kt, m, n, kp int, flags uint8, scale float32)")
	Pragma("noescape")
	Doc(
		"AmxTiles computes C (+)= A·B over mt × nt tiles of C of m rows × n columns",
		"each, summing kt k steps of kp bfloat16 pairs with TDPBF16PS (all counts",
		">= 1, m, n, kp <= 16, leading dimensions in elements):",
		"",
		"	for i := 0; i < mt*m; i++ {",
		"		for j := 0; j < nt*n; j++ {",
		"			acc := 0, or c[i*ldC+j] with flags&amxLoadC",
		"			for t := 0; t < kt*kp; t++ {",
		"				acc += a[i*ldA+2t] * b[t*ldB+2j] + a[i*ldA+2t+1] * b[t*ldB+2j+1]",
		"			}",
		"			c[i*ldC+j] = acc, times scale with flags&amxScale",
		"		}",
		"	}",
		"",
		"cfg is the tile configuration of that shape (amxConfig); it is loaded",
		"first and the tiles are released before the function returns.",
	)
	g.mrem, g.nrem = AllocLocal(8), AllocLocal(8)
	g.akStep, g.bkStep, g.nvec = AllocLocal(8), AllocLocal(8), AllocLocal(8)

	Load(Param("cfg"), tmp)
	asmkit.LdTileCfg(tmp)
	Load(Param("ldA"), ldA)
	Load(Param("ldB"), ldB)
	Load(Param("ldC"), ldC)
	SHLQ(U8(1), ldA)
	SHLQ(U8(1), ldB)
	SHLQ(U8(2), ldC)
	Load(Param("m"), aStep)
	MOVQ(aStep, cStep)
	IMULQ(ldA, aStep)
	IMULQ(ldC, cStep)
	Load(Param("n"), nStep)
	SHLQ(U8(2), nStep)
	Load(Param("kp"), tmp)
	MOVQ(tmp, kc)
	SHLQ(U8(2), tmp)
	MOVQ(tmp, g.akStep)
	IMULQ(ldB, kc)
	MOVQ(kc, g.bkStep)

	Comment("The scaling: a row of the grid is nt·4n bytes, nvec whole vectors and a partial one of K1's lanes.")
	VBROADCASTSS(asmkit.ParamAddr("scale"), zScale)
	Load(Param("nt"), tmp)
	IMULQ(nStep, tmp)
	MOVQ(tmp, kc)
	SHRQ(U8(6), kc)
	MOVQ(kc, g.nvec)
	ANDL(U8(63), tmp.As32())
	SHRL(U8(2), tmp.As32())
	MOVL(tmp.As32(), kc.As32())
	MOVL(U32(1), tmp.As32())
	SHLL(CL, tmp.As32())
	DECL(tmp.As32())
	KMOVW(tmp.As32(), K1)

	Load(Param("a"), aRow)
	Load(Param("c"), cRow)
	Load(Param("mt"), tmp)
	MOVQ(tmp, g.mrem)
	lRows, lOdd, lDone := g.label("rows"), g.label("rowodd"), g.label("done")
	Label(lRows)
	MOVQ(g.mrem, tmp)
	CMPQ(tmp, U8(2))
	JB(LabelRef(lOdd))
	g.columns(2)
	LEAQ(Mem{Base: aRow, Index: aStep, Scale: 2}, aRow)
	LEAQ(Mem{Base: cRow, Index: cStep, Scale: 2}, cRow)
	SUBQ(U8(2), g.mrem)
	JMP(LabelRef(lRows))
	Label(lOdd)
	TESTQ(tmp, tmp)
	JZ(LabelRef(lDone))
	g.columns(1)
	Label(lDone)
	asmkit.TileRelease()
	VZEROUPPER()
	RET()
}

// peakTileConfig is the tile configuration of the peak loop (palette 1,
// every tile 16 rows × 64 bytes; see kernel's amxConfig for the layout),
// and peakTileRow the row of bfloat16 pairs its sources are loaded from.
var peakTileConfig, peakTileRow Mem

func peakData() {
	peakTileConfig = GLOBL("amxPeakConfig", RODATA|NOPTR)
	DATA(0, U8(1))
	for t := range 8 { // bytes a row (the assembler wants the offsets in order)
		DATA(16+2*t, U16(64))
	}
	for t := range 8 { // rows
		DATA(48+t, U8(16))
	}
	DATA(56, U64(0)) // LDTILECFG reads 64 bytes
	peakTileRow = GLOBL("amxPeakRow", RODATA|NOPTR)
	for i := range 16 {
		DATA(4*i, U32(0x3f813f7f)) // the pair (0.99609375, 1.0078125)
	}
}

func peakLoop() {
	name := "Tdpbf16psPeakAMX"
	TEXT(name, NOSPLIT, "func(n int)")
	Doc(
		name+" runs n iterations of 4 independent TDPBF16PS on 16 × 16 tiles",
		"(4 · 16·16·32 multiply-adds, 65536 flops an iteration); it computes",
		"nothing useful. It loads its own tile configuration and releases the",
		"tiles before it returns.",
	)
	LEAQ(peakTileConfig, RAX)
	asmkit.LdTileCfg(RAX)
	Comment("Accumulators tmm0–3 from zero, sources tmm4–7 the same row repeated (stride 0).")
	for t := range 4 {
		asmkit.TileZero(tileC(t/2, t%2))
	}
	LEAQ(peakTileRow, RAX)
	XORL(EDX, EDX)
	for t := 4; t < 8; t++ {
		asmkit.TileLoad(t, RAX, RDX)
	}
	Load(Param("n"), RCX)
	TESTQ(RCX, RCX)
	JLE(LabelRef(name + "_done"))
	Label(name + "_loop")
	for r := range 2 {
		for c := range 2 {
			asmkit.TDPBF16PS(tileC(r, c), tileA(r), tileB(c))
		}
	}
	DECQ(RCX)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	asmkit.TileRelease()
	RET()
}

func xcr0() {
	TEXT("AmxXCR0", NOSPLIT, "func() uint64")
	Doc("AmxXCR0 returns XCR0 (XGETBV with ECX = 0). The CPU must have OSXSAVE.")
	XORL(ECX, ECX)
	XGETBV()
	SHLQ(U8(32), RDX)
	ORQ(RDX, RAX)
	Store(RAX, ReturnIndex(0))
	RET()
}

func configRoundTrip() {
	TEXT("AmxConfigRoundTrip", NOSPLIT, "func(in, out *[64]byte)")
	Pragma("noescape")
	Doc(
		"AmxConfigRoundTrip loads the tile configuration in, stores the one in",
		"force into out (STTILECFG) and releases the tiles: it shows how the CPU",
		"reads a configuration.",
	)
	Load(Param("in"), RAX)
	Load(Param("out"), RCX)
	asmkit.LdTileCfg(RAX)
	asmkit.StTileCfg(RCX)
	asmkit.TileRelease()
	RET()
}

func storeConfig() {
	TEXT("AmxStoreConfig", NOSPLIT, "func(out *[64]byte)")
	Pragma("noescape")
	Doc(
		"AmxStoreConfig stores the tile configuration of this thread into out",
		"(STTILECFG): 64 zero bytes when the tiles are released.",
	)
	Load(Param("out"), RAX)
	asmkit.StTileCfg(RAX)
	RET()
}

func main() {
	ConstraintExpr("amd64,!purego")
	peakData()
	amxTiles()
	peakLoop()
	xcr0()
	configRoundTrip()
	storeConfig()
	Generate()
}
