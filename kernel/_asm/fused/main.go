// Command fused generates the amd64 assembly of the kernel package's fused
// float32 tile fold, FoldTile, with AVX-512:
//
//	go run ./fused -out ../internal/x86/fused_amd64.s -stubs ../internal/x86/fused_amd64.go -pkg x86
//
// FoldTile is, row for row, the chain of four kernel calls that folds a
// tile of at most 64 keys into a block of query rows (kernel/fold.go has
// the Go twin): QKT into a score tile, OnlineSoftmax over it, ScaleRows of
// the output accumulators by the rescale factors, PV. The chain writes
// the scores of every row of the block (256 rows × 64 keys: 64 KiB) and
// reads them back in each of the later calls; the fold takes the rows a
// group of groupRows (48) at a time and keeps the group's scores in a
// scratch of 64-float rows (12 KiB) that stays in L1 from the product that
// writes them to the product that reads them as probabilities.
//
// Per group of rows:
//
//  1. Scores. The group's rows go six at a time through QKT's micro-kernel
//     (asmkit.Product with asmkit.ChunkedQKT, the gemm generator's): 6
//     rows × 4 zmm of keys in Z0–Z23, the key panel's row in Z24–Z27, the
//     query broadcasts in Z28–Z29, the scale in Z31; the components in
//     chunks of 32 into fresh partials, added to the scores in the scratch,
//     the scale last. Every score is QKT's, bit for bit.
//  2. Softmax, from the scratch, 16 rows at a time (fold.softmax): the
//     maximum of each row's (visible) scores, m' = max(m, rowmax), the
//     exponentials exp(s − m') with ExpSum's exponential (asmkit.Exp512),
//     written back over the scores as the probabilities, and their sum in
//     ExpSum's order (four vectors added in pairs for a row of 64, one
//     after another for a shorter row, then asmkit.HSum512's tree). The
//     reductions across a vector's lanes, the maxima and the sums, are
//     done for 16 rows at once by a transposed network that pairs the
//     lanes as HSum512 does (reduce16): about 3 instructions a row where
//     HSum512 takes 8. The rescale factors' exponentials of m − m' are
//     taken for the 16 rows in one vector, lane by lane the same as
//     OnlineSoftmax's ExpSum call over them. VMAXPS may drop a NaN score;
//     a row with one is made NaN, as the chain makes it (its m, its
//     factor, its sum).
//  3. Rescale: each output row whose factor is not exactly 1 is
//     multiplied by it, as ScaleRows does.
//  4. P·V: the output rows six at a time in column blocks of 64 through
//     PV's micro-kernel (the same register plan as the scores), the
//     probabilities broadcast from the scratch, the value rows streamed:
//     every output element adds the products key after key with an FMA,
//     as PV does.
//
// The new sums z = alpha·z + sum are left to the caller (kernel.FoldTile),
// which computes them with the very Go expression OnlineSoftmax uses, so
// that both round them the same way whatever the compiler fuses.
//
// With vis, row i sees only keys [0, vis[i]) of the tile, as a tile that
// the causal diagonal crosses: its softmax runs over those keys alone
// (their count decides the order of the sum, as in the chain's call over
// the row's own range), its other probabilities are 0, and the products
// of each six rows stop after the last key any of them sees (subMax: the
// chain's later keys add 0·v, which changes no accumulator when v is
// finite, and the caller passes vis only for finite values). On a causal
// diagonal six consecutive rows see about as many keys, so the products
// there cost about what the visible keys need, rounded up to a vector.
//
// A software prefetch of the next tile's K panel and V rows into L2, a
// share each group, measured no faster (Ice Lake VM, 2026-12-07,
// BenchmarkFoldTile and BenchmarkFoldTileWalk, three interleaved rounds:
// 0.5–1.5 points of the peak slower with 1024 keys, within ±0.6 with
// 4096): the hardware's prefetchers follow the tiles.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
)

const (
	// chunk is qktChunk of the Go code: QKT sums at most this many
	// components into a fresh partial before adding the partial to the
	// score.
	chunk = 32
	// maxCols is the widest tile the fold takes: one register block of
	// scores, 4 zmm.
	maxCols = 64
	// ldScr is the leading dimension of the scratch in bytes: rows of 64
	// float32, each a whole number of cache lines.
	ldScr = 4 * maxCols
	// subRows is the rows of a micro-kernel; groupRows the rows of a
	// group, whose scores stay in the scratch between the products.
	subRows   = 6
	groupRows = 8 * subRows
)

// flag is ChunkedQKT's; the other registers of the products have the roles
// of the product driver (asmkit.Product).
var flag = R13

var zmm = asmkit.AVX512.Reg

// The register block of both products: 6 rows × 4 zmm of accumulators in
// Z0–Z23, B's row in Z24–Z27, A's broadcasts alternating Z28 and Z29, the
// scale in Z31.
var block = &asmkit.RegBlock{
	ISA: asmkit.AVX512, MR: subRows, NV: 4,
	Acc: func(r, v int) VecPhysical { return zmm(r*4 + v) },
	B:   func(v int) VecPhysical { return zmm(24 + v) },
	A:   func(r int) VecPhysical { return zmm(28 + r%2) },
}

var (
	mask16  Mem // uint16 opmasks, entry i = 2^(i+1) − 1: the last vector of a block
	lanes16 Mem // uint16 opmasks, entry i = 2^i − 1: the first i lanes
	rowMask Mem // entry c (0..64): the four uint16 opmasks of the first c lanes of a row
	consts  Mem // float32 constants, 4 bytes each (cXxx)
)

// Slots of the constant table.
const (
	cLog2e  = 0
	cLn2Hi  = 1
	cLn2Lo  = 2
	cP0     = 3 // P0..P5 in 3..8
	cOne    = 9
	cExpMin = 10
	cNegInf = 11
	cNaN    = 12
	cInf    = 13
	nConsts = 14
)

func constAt(i int) Mem { return consts.Offset(4 * i) }

func genData() {
	mask16 = asmkit.Opmask16("foldMask16", 1)
	lanes16 = asmkit.Opmask16("foldLanes16", 0)
	rowMask = GLOBL("foldRowMask", RODATA|NOPTR)
	for c := 0; c <= maxCols; c++ {
		for v := 0; v < 4; v++ {
			n := min(max(c-16*v, 0), 16)
			DATA(8*c+2*v, U16(uint16(1<<n-1)))
		}
	}
	consts = GLOBL("foldConst", RODATA|NOPTR)
	vals := [nConsts]U32{
		cLog2e:  asmkit.F32Bits(asmkit.ExpLog2e),
		cLn2Hi:  asmkit.F32Bits(asmkit.ExpLn2Hi),
		cLn2Lo:  asmkit.F32Bits(asmkit.ExpLn2Lo),
		cOne:    asmkit.F32Bits(1),
		cExpMin: asmkit.F32Bits(asmkit.ExpMin),
		cNegInf: U32(0xff800000),
		cNaN:    U32(0x7fc00000),
		cInf:    U32(0x7f800000),
	}
	for i, p := range []float64{asmkit.ExpP0, asmkit.ExpP1, asmkit.ExpP2, asmkit.ExpP3, asmkit.ExpP4, asmkit.ExpP5} {
		vals[cP0+i] = asmkit.F32Bits(p)
	}
	for i, v := range vals {
		DATA(4*i, v)
	}
}

func expConsts() asmkit.ExpConsts {
	c := asmkit.ExpConsts{Log2e: constAt(cLog2e), Ln2Hi: constAt(cLn2Hi), Ln2Lo: constAt(cLn2Lo),
		One: constAt(cOne), Min: constAt(cExpMin)}
	for i := range c.P {
		c.P[i] = constAt(cP0 + i)
	}
	return c
}

// fold is the state of the generator of one kernel: its name, the
// products' drivers and the stack slots of the walk.
type fold struct {
	name   string
	qk, pv *asmkit.Product

	// Stack slots: the group's query rows and output rows, its m, alpha,
	// sum and vis entries, the rows left, the group's rows and its last
	// visible key, the scratch (64-byte aligned), a sub-strip counter and
	// the PV column block's byte offset and columns left.
	q, o, m, alpha, sum, vis    Mem
	rowsLeft, gRows, nmax, scr  Mem
	sub, col, colsLeft, subRows Mem
	nsub                        Mem // the keys the sub-strip's rows see

	subMaxes int // subMax's emitted, for its labels
}

func (f *fold) label(s string) string { return f.name + "_" + s }

func main() {
	ConstraintExpr("amd64,!purego")
	genData()
	genFoldTile()
	Generate()
}

const foldDoc = `FoldTileAVX512 folds a tile of cols <= 64 keys into rows query rows with
AVX-512 (sizes >= 1, leading dimensions in elements): row for row what

	QKT(s, ldS, q, ldQ, kt, ldK, rows, cols, d, scale)
	OnlineSoftmax(s, ldS, rows, cols, m, z, alpha)
	ScaleRows(o, ldO, alpha, rows, dv)
	PV(o, ldO, s, ldS, v, ldV, rows, cols, dv)

compute with the AVX-512 kernels, except that it writes each row's sum
of exponentials into sum[i] and leaves z to the caller (z[i] =
alpha[i]·z[i] + sum[i] where m[i] != −Inf), and that a row's NaN may
have another payload. With vis != nil row i sees keys [0, vis[i])
only (0 <= vis[i] <= cols): its softmax runs over them, its other
probabilities are 0, and v's rows must be finite. scratch holds
48·64 + 17·16 + 16 float32s: the group's scores and the reductions of a
batch of its rows.`

func genFoldTile() {
	f := &fold{name: "FoldTileAVX512"}
	TEXT(f.name, NOSPLIT, "func(o *float32, ldO int, q *float32, ldQ int, kt *float32, ldK int, v *float32, ldV int, rows, cols, d, dv int, scale float32, m, alpha, sum *float32, vis *int, scratch *float32)")
	Pragma("noescape")
	Doc(splitLines(foldDoc)...)

	product := func(name string, body func(p *asmkit.Product, rows int, b asmkit.Block)) *asmkit.Product {
		return &asmkit.Product{
			RegBlock: block, Name: f.name + "_" + name, ElemShift: 2, Mask16: mask16,
			Broadcast: func(m Mem, dst VecPhysical) { VBROADCASTSS(m, dst) },
			MulAdd:    func(acc, b, a VecPhysical) { VFMADD231PS(b, a, acc) },
			Scale:     Z31,
			Body:      body,
		}
	}
	f.qk = product("qk", asmkit.ChunkedQKT(chunk, flag))
	f.pv = product("pv", func(p *asmkit.Product, rows int, b asmkit.Block) {
		p.LoadC(rows, b)
		MOVQ(f.nsub, asmkit.KC)
		p.KLoop(rows, b)
		p.StoreC(rows, b)
	})

	for _, s := range []*Mem{&f.q, &f.o, &f.m, &f.alpha, &f.sum, &f.vis, &f.rowsLeft, &f.gRows, &f.nmax, &f.scr, &f.sub, &f.col, &f.colsLeft, &f.subRows, &f.nsub} {
		*s = AllocLocal(8)
	}

	Comment("Prologue: the scale, the aligned scratch, the walk's pointers.")
	VBROADCASTSS(asmkit.ParamAddr("scale"), Z31)
	Load(Param("scratch"), RAX)
	ADDQ(U8(63), RAX)
	ANDQ(I8(-64), RAX)
	MOVQ(RAX, f.scr)
	for _, p := range []struct {
		name string
		slot Mem
	}{{"q", f.q}, {"o", f.o}, {"m", f.m}, {"alpha", f.alpha}, {"sum", f.sum}, {"vis", f.vis}, {"rows", f.rowsLeft}} {
		Load(Param(p.name), RAX)
		MOVQ(RAX, p.slot)
	}

	Label(f.label("group"))
	Comment("The group's rows, and the keys its rows see: nmax.")
	MOVQ(f.rowsLeft, RCX)
	MOVL(U32(groupRows), EDX)
	CMPQ(RCX, RDX)
	CMOVQLT(RCX, RDX)
	MOVQ(RDX, f.gRows)
	MOVQ(f.vis, RSI)
	TESTQ(RSI, RSI)
	JNZ(LabelRef(f.label("visible")))
	Load(Param("cols"), RAX)
	JMP(LabelRef(f.label("havemax")))
	Label(f.label("visible"))
	XORL(EAX, EAX)
	Label(f.label("maxvis"))
	MOVQ(Mem{Base: RSI}, RBX)
	CMPQ(RBX, RAX)
	CMOVQGT(RBX, RAX)
	ADDQ(U8(8), RSI)
	DECQ(RDX)
	JNZ(LabelRef(f.label("maxvis")))
	Label(f.label("havemax"))
	MOVQ(RAX, f.nmax)
	TESTQ(RAX, RAX)
	JZ(LabelRef(f.label("hidden")))

	f.scores()
	f.softmax()
	f.rescale()
	f.values()

	Label(f.label("next"))
	Comment("The next group.")
	Load(Param("ldQ"), RAX)
	IMUL3Q(U32(4*groupRows), RAX, RAX)
	ADDQ(RAX, f.q)
	Load(Param("ldO"), RAX)
	IMUL3Q(U32(4*groupRows), RAX, RAX)
	ADDQ(RAX, f.o)
	ADDQ(U32(4*groupRows), f.m)
	ADDQ(U32(4*groupRows), f.alpha)
	ADDQ(U32(4*groupRows), f.sum)
	CMPQ(f.vis, U8(0))
	JE(LabelRef(f.label("novis")))
	ADDQ(U32(8*groupRows), f.vis)
	Label(f.label("novis"))
	SUBQ(U32(groupRows), f.rowsLeft)
	JG(LabelRef(f.label("group")))
	asmkit.Ret()

	f.hidden()
}

// hidden emits the group whose rows see no key of the tile: each factor 1
// and each sum 0 (the caller's z stays), m and the outputs as they were.
func (f *fold) hidden() {
	Label(f.label("hidden"))
	MOVQ(f.alpha, RSI)
	MOVQ(f.sum, RDI)
	MOVQ(f.gRows, RCX)
	Label(f.label("hiddenrow"))
	MOVL(U32(0x3f800000), Mem{Base: RSI})
	MOVL(U32(0), Mem{Base: RDI})
	ADDQ(U8(4), RSI)
	ADDQ(U8(4), RDI)
	DECQ(RCX)
	JNZ(LabelRef(f.label("hiddenrow")))
	JMP(LabelRef(f.label("next")))
}

// dispatch emits the jump from a block's shape to its micro-kernels: the
// vectors (KC = their number − 1) and whether the last is masked (KRem =
// lanes − 1 of the last, 15: whole), then the rows in rows (1..6). Each
// micro-kernel of p is emitted here, followed by a jump to done.
func (f *fold) dispatch(p *asmkit.Product, rows Mem, done string) {
	kc, krem := asmkit.KC, asmkit.KRem
	var blocks []asmkit.Block
	for nv := 1; nv <= 4; nv++ {
		blocks = append(blocks, asmkit.Block{NV: nv})
	}
	for nv := 1; nv <= 4; nv++ {
		blocks = append(blocks, asmkit.Block{NV: nv, Masked: true})
	}
	blockLabel := func(b asmkit.Block) string {
		if b.Masked {
			return p.Label("nv%dm", b.NV)
		}
		return p.Label("nv%d", b.NV)
	}
	CMPQ(krem, U8(15))
	JNE(LabelRef(p.Label("masked")))
	for i, b := range blocks {
		if i == 4 {
			Label(p.Label("masked"))
		}
		if b.NV < 4 {
			CMPQ(kc, U8(b.NV-1))
			JE(LabelRef(blockLabel(b)))
		} else {
			JMP(LabelRef(blockLabel(b)))
		}
	}
	for _, b := range blocks {
		Label(blockLabel(b))
		MOVQ(rows, kc)
		for r := 1; r < subRows; r++ {
			CMPQ(kc, U8(r))
			JE(LabelRef(p.Label("nv%d%v_r%d", b.NV, b.Masked, r)))
		}
		for r := subRows; r >= 1; r-- {
			if r < subRows {
				Label(p.Label("nv%d%v_r%d", b.NV, b.Masked, r))
			}
			p.Micro(r, b)
			JMP(LabelRef(done))
		}
	}
}

// subMax sets nsub to the keys the rows [sub, sub+subRows) of the group
// see: the tile's cols, or with vis the most any of them sees. Each
// sub-strip's products stop there: on a causal diagonal its six rows see
// about as many keys, where the group's 48 rows span up to the whole tile.
// It uses RAX, RDX and RSI.
func (f *fold) subMax() {
	MOVQ(f.vis, RSI)
	TESTQ(RSI, RSI)
	JNZ(LabelRef(f.label(f.subMaxLabel("vis"))))
	MOVQ(f.nmax, RAX)
	JMP(LabelRef(f.label(f.subMaxLabel("done"))))
	Label(f.label(f.subMaxLabel("vis")))
	MOVQ(f.sub, RAX)
	LEAQ(Mem{Base: RSI, Index: RAX, Scale: 8}, RSI)
	MOVQ(f.subRows, RDX)
	XORL(EAX, EAX)
	Label(f.label(f.subMaxLabel("loop")))
	CMPQ(Mem{Base: RSI}, RAX)
	CMOVQGT(Mem{Base: RSI}, RAX)
	ADDQ(U8(8), RSI)
	DECQ(RDX)
	JNZ(LabelRef(f.label(f.subMaxLabel("loop"))))
	Label(f.label(f.subMaxLabel("done")))
	MOVQ(RAX, f.nsub)
	f.subMaxes++
}

func (f *fold) subMaxLabel(s string) string { return fmt.Sprintf("submax%d_%s", f.subMaxes, s) }

// shape sets KC and KRem for dispatch from a block of KC columns (1 to
// 64), and K1 to the mask of its last vector; it uses RBX.
func shape() {
	kc, krem := asmkit.KC, asmkit.KRem
	DECQ(kc)
	MOVQ(kc, krem)
	ANDQ(U8(15), krem)
	LEAQ(mask16, RBX)
	KMOVW(Mem{Base: RBX, Index: krem, Scale: 2}, K1)
	SHRQ(U8(4), kc)
}

// scores emits step 1: the group's scores into the scratch, 6 rows at a
// time, keys [0, nmax).
func (f *fold) scores() {
	Comment("Scores: S = scale·Q·Kᵀ of the group's rows, 6 at a time, into the scratch.")
	Load(Param("ldQ"), asmkit.LdA)
	SHLQ(U8(2), asmkit.LdA)
	Load(Param("ldK"), asmkit.LdB)
	SHLQ(U8(2), asmkit.LdB)
	LEAQ(Mem{Base: asmkit.LdB, Index: asmkit.LdB, Scale: 2}, asmkit.LdB3)
	MOVQ(U32(ldScr), asmkit.LdC)
	MOVQ(U32(0), f.sub)
	Label(f.label("qksub"))
	// Rows of this sub-strip: min(6, gRows − sub).
	MOVQ(f.gRows, RAX)
	SUBQ(f.sub, RAX)
	MOVL(U32(subRows), EDX)
	CMPQ(RAX, RDX)
	CMOVQLT(RAX, RDX)
	MOVQ(RDX, f.subRows)
	f.subMax()
	MOVQ(f.nsub, asmkit.KC)
	TESTQ(asmkit.KC, asmkit.KC)
	JZ(LabelRef(f.label("qkdone")))
	shape()
	// ARow = q + sub·ldQ, C0 = scratch + sub·ldScr, BCol = kt.
	MOVQ(f.sub, asmkit.ARow)
	IMULQ(asmkit.LdA, asmkit.ARow)
	ADDQ(f.q, asmkit.ARow)
	MOVQ(f.sub, asmkit.C0)
	IMUL3Q(U32(ldScr), asmkit.C0, asmkit.C0)
	ADDQ(f.scr, asmkit.C0)
	Load(Param("kt"), asmkit.BCol)
	f.dispatch(f.qk, f.subRows, f.label("qkdone"))
	Label(f.label("qkdone"))
	ADDQ(U8(subRows), f.sub)
	MOVQ(f.sub, RAX)
	CMPQ(RAX, f.gRows)
	JL(LabelRef(f.label("qksub")))
}

// The scratch past the group's scores: the 16 vectors of a batch's row
// reductions (auxRows, 1 KiB), and the batch's new maxima (one vector).
const (
	auxOff  = groupRows * ldScr
	mNewOff = auxOff + 16*64
	// scratchBytes is the scratch the kernel uses from its aligned start.
	scratchBytes = mNewOff + 64
)

// sigma is the row whose reduction the transposed network takes in slot
// s: the network leaves slot ℓ + 4k in lane 4ℓ + k, so slot s takes row
// 4·(s mod 4) + s/4 and lane r comes out holding row r's.
func sigma(s int) int { return 4*(s%4) + s/4 }

// reduce16 emits the transposed reduction of 16 vectors by op: load(s)
// returns the vector of slot s (row sigma(s)), and lane r of the result
// is the reduction of row r's 16 lanes, paired as HSum512 pairs them:
// lane i with lane i+8, then i+4, then i+2, then i+1 (45 instructions
// for 16 rows, against 8 a row for HSum512's, and ExpSum's bits: each
// sum adds the same pairs).
func reduce16(load func(s int) VecVirtual, op func(a, b, dst VecVirtual)) VecVirtual {
	combine := func(p, q VecVirtual, lo, hi U8, shuf func(imm U8, q, p, dst VecVirtual)) VecVirtual {
		x, y := ZMM(), ZMM()
		shuf(lo, q, p, x)
		shuf(hi, q, p, y)
		op(x, y, x)
		return x
	}
	f32x4 := func(imm U8, q, p, dst VecVirtual) { VSHUFF32X4(imm, q, p, dst) }
	shufps := func(imm U8, q, p, dst VecVirtual) { VSHUFPS(imm, q, p, dst) }
	// Lane i with i+8: [a.lo | b.lo] with [a.hi | b.hi], two rows a vector.
	var t [8]VecVirtual
	for k := range t {
		t[k] = combine(load(2*k), load(2*k+1), 0x44, 0xee, f32x4)
	}
	// i with i+4: the 128-bit lanes 0 and 2 with 1 and 3, four rows.
	var u [4]VecVirtual
	for k := range u {
		u[k] = combine(t[2*k], t[2*k+1], 0x88, 0xdd, f32x4)
	}
	// i with i+2, and i with i+1, within each 128-bit lane.
	v0 := combine(u[0], u[1], 0x44, 0xee, shufps)
	v1 := combine(u[2], u[3], 0x44, 0xee, shufps)
	return combine(v0, v1, 0x88, 0xdd, shufps)
}

// softmax emits step 2: the group's rows a batch of 16 at a time.
//
//	A. Each row's four vectors of scores reduced to one by VMAXPS (lanes
//	   past its count −Inf), into the scratch's aux rows.
//	B. The batch's row maxima in one vector (reduce16); m' = max(rowmax,
//	   m), VMAXPS returning the old m where either is NaN; the factors
//	   exp(m − m') of the batch in one exponential; m' and the factors
//	   stored. A row with m' = −Inf has seen nothing yet (as the chain's
//	   "nothing seen": factor 1, probabilities 0, m and z unchanged),
//	   unless a score is NaN, which VMAXPS dropped: the rows whose m' is
//	   infinite are checked for NaN scores (rarely).
//	C. Each row's exponentials exp(s − m'), written over its scores as
//	   the probabilities, and added in ExpSum's order up to one vector
//	   (four vectors in pairs for a row of 64, one after another for
//	   fewer), into the aux rows.
//	D. The batch's sums in one vector (reduce16, HSum512's tree). A NaN
//	   sum with a finite m' comes from a NaN score: the row is made NaN
//	   (m, factor and sum), as the chain makes it (with m' = +Inf it is
//	   the chain's own +Inf − +Inf, unless phase B found a NaN score).
func (f *fold) softmax() {
	Comment("Softmax of the group's rows, 16 at a time, in the scratch.")
	e := asmkit.NewExp512(ZMM(), expConsts(), true)
	negInf := ZMM()
	VBROADCASTSS(constAt(cNegInf), negInf)
	b0 := GP64() // the batch's first row in the group
	MOVQ(U32(0), b0)

	Label(f.label("batch"))
	nb := GP64() // rows in the batch
	MOVQ(f.gRows, nb)
	SUBQ(b0, nb)
	lanes := GP64()
	MOVL(U32(16), lanes.As32())
	CMPQ(nb, lanes)
	CMOVQLT(nb, lanes)
	MOVQ(lanes, nb)
	aux := GP64()
	MOVQ(f.scr, aux)
	ADDQ(U32(auxOff), aux)
	row := GP64() // the batch's scores
	IMUL3Q(U32(ldScr), b0, row)
	ADDQ(f.scr, row)
	unseen := GP64() // bit r: row r sees no key (or is past nb)
	MOVQ(U32(0), unseen)

	// cnt returns the keys row r of the batch sees, and jumps to unseenL
	// for r >= nb and for a count of 0.
	cnt := GP64()
	loadCnt := func(r Register, unseenL string) {
		CMPQ(r, nb)
		JGE(LabelRef(unseenL))
		vis := GP64()
		MOVQ(f.vis, vis)
		TESTQ(vis, vis)
		JZ(LabelRef(unseenL + "_all"))
		t := GP64()
		LEAQ(Mem{Base: r, Index: b0, Scale: 1}, t)
		MOVQ(Mem{Base: vis, Index: t, Scale: 8}, cnt)
		TESTQ(cnt, cnt)
		JZ(LabelRef(unseenL))
		JMP(LabelRef(unseenL + "_have"))
		Label(unseenL + "_all")
		Load(Param("cols"), cnt)
		Label(unseenL + "_have")
	}
	rowMasks := func() [4]Register {
		tbl := GP64()
		LEAQ(rowMask, tbl)
		LEAQ(Mem{Base: tbl, Index: cnt, Scale: 8}, tbl)
		var k [4]Register
		for v := range k {
			k[v] = K()
			KMOVW(Mem{Base: tbl, Disp: 2 * v}, k[v])
		}
		return k
	}

	Comment("A: each row's scores reduced by VMAXPS to one vector.")
	r := GP64()
	p := GP64() // row r's scores
	MOVQ(U32(0), r)
	MOVQ(row, p)
	Label(f.label("maxrow"))
	loadCnt(r, f.label("maxunseen"))
	out := GP64()
	MOVQ(r, out)
	SHLQ(U8(6), out)
	ADDQ(aux, out)
	CMPQ(cnt, U8(maxCols))
	JNE(LabelRef(f.label("maxpart")))
	{
		var sv [4]VecVirtual
		for v := range sv {
			sv[v] = ZMM()
			VMOVUPS(Mem{Base: p, Disp: 64 * v}, sv[v])
		}
		VMAXPS(sv[1], sv[0], sv[0])
		VMAXPS(sv[3], sv[2], sv[2])
		VMAXPS(sv[2], sv[0], sv[0])
		VMOVUPS(sv[0], Mem{Base: out})
		JMP(LabelRef(f.label("maxnext")))
	}
	Label(f.label("maxpart"))
	{
		k := rowMasks()
		var sv [4]VecVirtual
		for v := range sv {
			sv[v] = ZMM()
			VMOVAPS(negInf, sv[v])
			VMOVUPS(Mem{Base: p, Disp: 64 * v}, k[v], sv[v])
		}
		VMAXPS(sv[1], sv[0], sv[0])
		VMAXPS(sv[3], sv[2], sv[2])
		VMAXPS(sv[2], sv[0], sv[0])
		VMOVUPS(sv[0], Mem{Base: out})
		JMP(LabelRef(f.label("maxnext")))
	}
	Label(f.label("maxunseen"))
	BTSQ(r, unseen)
	t := GP64()
	MOVQ(r, t)
	SHLQ(U8(6), t)
	VMOVUPS(negInf, Mem{Base: aux, Index: t, Scale: 1})
	Label(f.label("maxnext"))
	ADDQ(U32(ldScr), p)
	INCQ(r)
	CMPQ(r, U8(16))
	JL(LabelRef(f.label("maxrow")))

	Comment("B: the batch's maxima, m' = max(rowmax, m), the factors exp(m − m').")
	maxv := reduce16(func(s int) VecVirtual {
		z := ZMM()
		VMOVUPS(Mem{Base: aux, Disp: 64 * sigma(s)}, z)
		return z
	}, func(a, b, dst VecVirtual) { VMAXPS(b, a, dst) })
	tbl := GP64()
	LEAQ(lanes16, tbl)
	kValid := K()
	KMOVW(Mem{Base: tbl, Index: nb, Scale: 2}, kValid)
	mp, ap := GP64(), GP64()
	MOVQ(f.m, mp)
	LEAQ(Mem{Base: mp, Index: b0, Scale: 4}, mp)
	MOVQ(f.alpha, ap)
	LEAQ(Mem{Base: ap, Index: b0, Scale: 4}, ap)
	mOld, mNew := ZMM(), ZMM()
	VMOVUPS_Z(Mem{Base: mp}, kValid, mOld)
	VMAXPS(mOld, maxv, mNew) // the second source, the old m, where either is NaN
	kUnseen := K()
	KMOVW(unseen.As32(), kUnseen)
	// Rows that see keys and whose m' is infinite: −Inf, nothing but −Inf
	// or a NaN that VMAXPS dropped; +Inf, an infinite score, with or
	// without a NaN that VMAXPS dropped (their sums are NaN either way).
	kSpecial, kPos := K(), K()
	inf := ZMM()
	VBROADCASTSS(constAt(cInf), inf)
	VCMPPS(U8(0), negInf, mNew, kValid, kSpecial) // ordered equal
	VCMPPS(U8(0), inf, mNew, kValid, kPos)
	KORW(kPos, kSpecial, kSpecial)
	KANDNW(kSpecial, kUnseen, kSpecial) // and not unseen
	nanFix := GP64()                    // bit r: a row that a NaN makes NaN
	MOVQ(U32(0), nanFix)
	mslot := GP64()
	MOVQ(f.scr, mslot)
	VMOVUPS(mNew, Mem{Base: mslot, Disp: mNewOff})
	KORTESTW(kSpecial, kSpecial)
	JNZ(LabelRef(f.label("special")))
	Label(f.label("specialdone"))
	KMOVW(unseen.As32(), kUnseen)
	kLive := K()
	KANDNW(kValid, kUnseen, kLive) // valid and seeing keys
	arg := ZMM()
	VSUBPS_Z(mNew, mOld, kLive, arg) // m − m', 0 where not live: exp(0) = 1
	asmkit.AVX512.ZeroIdiom(e.Max)
	alpha := e.Exp(arg, kValid)
	VMOVUPS(alpha, kValid, Mem{Base: ap})
	VMOVUPS(mNew, kValid, Mem{Base: mp})

	Comment("C: each row's exponentials, written over its scores, and their sum up to one vector.")
	MOVQ(U32(0), r)
	MOVQ(row, p)
	Label(f.label("exprow"))
	BTQ(r, unseen)
	JC(LabelRef(f.label("expunseen")))
	loadCnt(r, f.label("expunseen"))
	MOVQ(r, out)
	SHLQ(U8(6), out)
	ADDQ(aux, out)
	VBROADCASTSS(Mem{Base: mslot, Index: r, Scale: 4, Disp: mNewOff}, e.Max)
	CMPQ(cnt, U8(maxCols))
	JNE(LabelRef(f.label("exppart")))
	{
		var y [4]VecVirtual
		for v := range y {
			sv := ZMM()
			VMOVUPS(Mem{Base: p, Disp: 64 * v}, sv)
			y[v] = e.Exp(sv, nil)
			VMOVUPS(y[v], Mem{Base: p, Disp: 64 * v})
		}
		// ExpSum's order for 64: (y0+y1) + (y2+y3).
		VADDPS(y[0], y[1], y[0])
		VADDPS(y[2], y[3], y[2])
		VADDPS(y[2], y[0], y[0])
		VMOVUPS(y[0], Mem{Base: out})
		JMP(LabelRef(f.label("expnext")))
	}
	Label(f.label("exppart"))
	{
		k := rowMasks()
		var y [4]VecVirtual
		for v := range y {
			sv := ZMM()
			VMOVUPS_Z(Mem{Base: p, Disp: 64 * v}, k[v], sv)
			y[v] = e.Exp(sv, k[v])
			VMOVUPS(y[v], Mem{Base: p, Disp: 64 * v})
		}
		// ExpSum's order for fewer: one vector after another (those past
		// the count are 0, which adds nothing).
		VADDPS(y[1], y[0], y[0])
		VADDPS(y[2], y[0], y[0])
		VADDPS(y[3], y[0], y[0])
		VMOVUPS(y[0], Mem{Base: out})
		JMP(LabelRef(f.label("expnext")))
	}
	Label(f.label("expunseen"))
	// Probabilities 0 (a row of the batch; past nb only the aux row).
	zero := ZMM()
	asmkit.AVX512.ZeroIdiom(zero)
	MOVQ(r, t)
	SHLQ(U8(6), t)
	VMOVUPS(zero, Mem{Base: aux, Index: t, Scale: 1})
	CMPQ(r, nb)
	JGE(LabelRef(f.label("expnext")))
	for v := 0; v < 4; v++ {
		VMOVUPS(zero, Mem{Base: p, Disp: 64 * v})
	}
	Label(f.label("expnext"))
	ADDQ(U32(ldScr), p)
	INCQ(r)
	CMPQ(r, U8(16))
	JL(LabelRef(f.label("exprow")))

	Comment("D: the batch's sums, HSum512's tree for each row.")
	sums := reduce16(func(s int) VecVirtual {
		z := ZMM()
		VMOVUPS(Mem{Base: aux, Disp: 64 * sigma(s)}, z)
		return z
	}, func(a, b, dst VecVirtual) { VADDPS(b, a, dst) })
	sp := GP64()
	MOVQ(f.sum, sp)
	LEAQ(Mem{Base: sp, Index: b0, Scale: 4}, sp)
	VMOVUPS(sums, kValid, Mem{Base: sp})
	// A NaN sum where m' is finite: a NaN score (phase B checked the
	// rows whose m' is infinite), to add to those of phase B.
	kNaN := K()
	VCMPPS(U8(3), sums, sums, kValid, kNaN) // unordered
	KANDNW(kNaN, kPos, kNaN)
	KMOVW(kNaN, t.As32())
	ORQ(t, nanFix)
	JNZ(LabelRef(f.label("nanfix")))
	Label(f.label("batchdone"))
	ADDQ(U8(16), b0)
	CMPQ(b0, f.gRows)
	JL(LabelRef(f.label("batch")))
	JMP(LabelRef(f.label("softmaxdone")))

	// Phase B's rare rows: m' = −Inf for a row that sees keys. A NaN
	// score among them makes the row NaN (nanFix); otherwise it has seen
	// nothing but −Inf, as one that sees no key (unseen).
	Label(f.label("special"))
	sr := GP64()
	KMOVW(kSpecial, sr.As32())
	Label(f.label("specialrow"))
	i := GP64()
	BSFQ(sr, i)
	BTRQ(i, sr)
	loadCnt(i, f.label("specialnone")) // never unseen here
	{
		k := rowMasks()
		q := GP64()
		MOVQ(i, q)
		IMUL3Q(U32(ldScr), q, q)
		ADDQ(row, q)
		knan := K()
		for v := range k {
			sv := ZMM()
			VMOVUPS_Z(Mem{Base: q, Disp: 64 * v}, k[v], sv)
			kv := K()
			VCMPPS(U8(3), sv, sv, k[v], kv)
			if v == 0 {
				KMOVW(kv, knan)
			} else {
				KORW(kv, knan, knan)
			}
		}
		KORTESTW(knan, knan)
		JNZ(LabelRef(f.label("specialnan")))
		// No NaN: with m' = −Inf a row that has seen nothing; with +Inf
		// a live one.
		mi := XMM()
		VMOVSS(Mem{Base: mslot, Index: i, Scale: 4, Disp: mNewOff}, mi)
		VUCOMISS(negInf.AsX(), mi)
		JNE(LabelRef(f.label("specialnext")))
		BTSQ(i, unseen)
		JMP(LabelRef(f.label("specialnext")))
		Label(f.label("specialnan"))
		BTSQ(i, nanFix)
	}
	Label(f.label("specialnone"))
	Label(f.label("specialnext"))
	TESTQ(sr, sr)
	JNZ(LabelRef(f.label("specialrow")))
	JMP(LabelRef(f.label("specialdone")))

	// Rows made NaN: m, the factor and the sum NaN.
	Label(f.label("nanfix"))
	Label(f.label("nanrow"))
	BSFQ(nanFix, i)
	BTRQ(i, nanFix)
	MOVL(U32(0x7fc00000), Mem{Base: mp, Index: i, Scale: 4})
	MOVL(U32(0x7fc00000), Mem{Base: ap, Index: i, Scale: 4})
	MOVL(U32(0x7fc00000), Mem{Base: sp, Index: i, Scale: 4})
	TESTQ(nanFix, nanFix)
	JNZ(LabelRef(f.label("nanrow")))
	JMP(LabelRef(f.label("batchdone")))
	Label(f.label("softmaxdone"))
}

// rescale emits step 3: each output row of the group whose factor is not
// exactly 1 multiplied by it.
func (f *fold) rescale() {
	Comment("Rescale: O row i *= alpha[i] where alpha[i] != 1 (ScaleRows).")
	orow, ap, i := GP64(), GP64(), GP64()
	ldO := Load(Param("ldO"), GP64())
	SHLQ(U8(2), ldO)
	dv := Load(Param("dv"), GP64())
	// The mask of the last vector of a row: 1 + (dv−1)%16 lanes.
	last := GP64()
	MOVQ(dv, last)
	DECQ(last)
	ANDQ(U8(15), last)
	tbl := GP64()
	LEAQ(mask16, tbl)
	kl := K()
	KMOVW(Mem{Base: tbl, Index: last, Scale: 2}, kl)
	one := XMM()
	VMOVSS(constAt(cOne), one)
	MOVQ(f.o, orow)
	MOVQ(f.alpha, ap)
	MOVQ(f.gRows, i)
	Label(f.label("scale"))
	VUCOMISS(Mem{Base: ap}, one)
	JNE(LabelRef(f.label("scalerow")))
	JPS(LabelRef(f.label("scalerow")))
	Label(f.label("scalenext"))
	ADDQ(ldO, orow)
	ADDQ(U8(4), ap)
	DECQ(i)
	JNZ(LabelRef(f.label("scale")))
	JMP(LabelRef(f.label("scaled")))

	Label(f.label("scalerow"))
	p, n := GP64(), GP64()
	MOVQ(orow, p)
	MOVQ(dv, n)
	Label(f.label("scalevec"))
	CMPQ(n, U8(16))
	JLE(LabelRef(f.label("scalelast")))
	x := ZMM()
	VMOVUPS(Mem{Base: p}, x)
	VMULPS_BCST(Mem{Base: ap}, x, x)
	VMOVUPS(x, Mem{Base: p})
	ADDQ(U8(64), p)
	SUBQ(U8(16), n)
	JMP(LabelRef(f.label("scalevec")))
	Label(f.label("scalelast"))
	x = ZMM()
	VMOVUPS_Z(Mem{Base: p}, kl, x)
	VMULPS_BCST(Mem{Base: ap}, x, x)
	VMOVUPS(x, kl, Mem{Base: p})
	JMP(LabelRef(f.label("scalenext")))
	Label(f.label("scaled"))
}

// values emits step 4: O += P·V for the group, the output's columns in
// blocks of 64, each for the group's rows 6 at a time.
func (f *fold) values() {
	Comment("P·V: the output's columns 64 at a time, the group's rows 6 at a time.")
	MOVQ(U32(ldScr), asmkit.LdA)
	Load(Param("ldV"), asmkit.LdB)
	SHLQ(U8(2), asmkit.LdB)
	LEAQ(Mem{Base: asmkit.LdB, Index: asmkit.LdB, Scale: 2}, asmkit.LdB3)
	Load(Param("ldO"), asmkit.LdC)
	SHLQ(U8(2), asmkit.LdC)
	MOVQ(U32(0), f.col)
	Load(Param("dv"), RAX)
	MOVQ(RAX, f.colsLeft)
	Label(f.label("pvcol"))
	MOVQ(U32(0), f.sub)
	Label(f.label("pvsub"))
	MOVQ(f.gRows, RAX)
	SUBQ(f.sub, RAX)
	MOVL(U32(subRows), EDX)
	CMPQ(RAX, RDX)
	CMOVQLT(RAX, RDX)
	MOVQ(RDX, f.subRows)
	f.subMax()
	CMPQ(f.nsub, U8(0))
	JE(LabelRef(f.label("pvdone")))
	// The block's columns: min(64, colsLeft).
	MOVQ(f.colsLeft, asmkit.KC)
	MOVL(U32(64), asmkit.KRem.As32())
	CMPQ(asmkit.KC, asmkit.KRem)
	CMOVQGT(asmkit.KRem, asmkit.KC)
	shape()
	// ARow = scratch + sub·ldScr, C0 = o + sub·ldO + col, BCol = v + col.
	MOVQ(f.sub, asmkit.ARow)
	IMUL3Q(U32(ldScr), asmkit.ARow, asmkit.ARow)
	ADDQ(f.scr, asmkit.ARow)
	MOVQ(f.sub, asmkit.C0)
	IMULQ(asmkit.LdC, asmkit.C0)
	ADDQ(f.o, asmkit.C0)
	ADDQ(f.col, asmkit.C0)
	Load(Param("v"), asmkit.BCol)
	ADDQ(f.col, asmkit.BCol)
	f.dispatch(f.pv, f.subRows, f.label("pvdone"))
	Label(f.label("pvdone"))
	ADDQ(U8(subRows), f.sub)
	MOVQ(f.sub, RAX)
	CMPQ(RAX, f.gRows)
	JL(LabelRef(f.label("pvsub")))
	ADDQ(U32(256), f.col)
	SUBQ(U8(64), f.colsLeft)
	JG(LabelRef(f.label("pvcol")))
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
