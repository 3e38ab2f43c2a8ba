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
// group of groupRows at a time and keeps the group's scores in a scratch
// of 64-float rows (6 KiB for 24 rows) that stays in L1 from the product
// that writes them to the product that reads them as probabilities.
//
// Per group of rows:
//
//  1. Scores. The group's rows go six at a time through QKT's micro-kernel
//     (asmkit.Product with asmkit.ChunkedQKT, the gemm generator's): 6
//     rows × 4 zmm of keys in Z0–Z23, the key panel's row in Z24–Z27, the
//     query broadcasts in Z28–Z29, the scale in Z31; the components in
//     chunks of 32 into fresh partials, added to the scores in the scratch,
//     the scale last. Every score is QKT's, bit for bit.
//  2. Softmax, row by row, from the scratch: the maximum of the row's
//     (visible) scores, m' = max(m, rowmax), the exponentials exp(s − m')
//     with ExpSum's exponential (asmkit.Exp512), written back over the
//     scores as the probabilities, and their sum in ExpSum's order (four
//     vectors added in pairs for a row of 64, one after another for a
//     shorter row, then asmkit.HSum512's tree). The rescale factors'
//     exponentials of m − m' are taken together for up to 16 rows in one
//     vector, lane by lane the same as OnlineSoftmax's ExpSum call over
//     them. VMAXPS may drop a NaN score; a row whose sum comes out NaN is
//     checked for NaN scores, and a row that has one is made NaN, as the
//     chain makes it (its m, its factor, its sum, its probabilities).
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
// the row's own range), its other probabilities are 0, and a group's
// products stop after the last key any of its rows sees (the chain's
// later keys add 0·v, which changes no accumulator when v is finite: the
// caller passes vis only for finite values).
package main

import (
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
	groupRows = 4 * subRows
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
	nConsts = 13
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
24·64 + 16 float32s, rows of the group's scores.`

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
		MOVQ(f.nmax, asmkit.KC)
		p.KLoop(rows, b)
		p.StoreC(rows, b)
	})

	for _, s := range []*Mem{&f.q, &f.o, &f.m, &f.alpha, &f.sum, &f.vis, &f.rowsLeft, &f.gRows, &f.nmax, &f.scr, &f.sub, &f.col, &f.colsLeft, &f.subRows} {
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
	MOVQ(f.nmax, asmkit.KC)
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

// softmax emits step 2 for every row of the group, then the factors'
// exponentials.
func (f *fold) softmax() {
	Comment("Softmax of each row of the group, in the scratch.")
	e := asmkit.NewExp512(ZMM(), expConsts(), true)
	negInf := ZMM()
	VBROADCASTSS(constAt(cNegInf), negInf)
	i := GP64()     // the row
	row := GP64()   // its scores in the scratch
	MOVQ(U32(0), i) // not XOR: avo would take i as read, and live since the entry
	MOVQ(f.scr, row)

	Label(f.label("row"))
	cnt := GP64() // the keys the row sees
	vis := GP64()
	MOVQ(f.vis, vis)
	TESTQ(vis, vis)
	JZ(LabelRef(f.label("allcols")))
	MOVQ(Mem{Base: vis, Index: i, Scale: 8}, cnt)
	JMP(LabelRef(f.label("havecnt")))
	Label(f.label("allcols"))
	Load(Param("cols"), cnt)
	Label(f.label("havecnt"))
	mp, ap, sp := GP64(), GP64(), GP64()
	MOVQ(f.m, mp)
	LEAQ(Mem{Base: mp, Index: i, Scale: 4}, mp)
	MOVQ(f.alpha, ap)
	LEAQ(Mem{Base: ap, Index: i, Scale: 4}, ap)
	MOVQ(f.sum, sp)
	LEAQ(Mem{Base: sp, Index: i, Scale: 4}, sp)
	TESTQ(cnt, cnt)
	JZ(LabelRef(f.label("unseen")))
	CMPQ(cnt, U8(maxCols))
	JNE(LabelRef(f.label("part")))
	f.softmaxRow(e, negInf, row, cnt, mp, ap, sp, true)
	f.softmaxRow(e, negInf, row, cnt, mp, ap, sp, false)

	// A row that sees no key of the tile: factor 1, sum 0, probabilities 0.
	Label(f.label("unseen"))
	MOVL(U32(0), Mem{Base: ap}) // exp(0) = 1 below
	MOVL(U32(0), Mem{Base: sp})
	zero := ZMM()
	asmkit.AVX512.ZeroIdiom(zero)
	for v := 0; v < 4; v++ {
		VMOVUPS(zero, Mem{Base: row, Disp: 64 * v})
	}

	Label(f.label("rowdone"))
	ADDQ(U32(ldScr), row)
	INCQ(i)
	CMPQ(i, f.gRows)
	JL(LabelRef(f.label("row")))

	Comment("alpha = exp(m − m'), up to 16 rows a vector, as ExpSum(alpha, alpha, 0).")
	asmkit.AVX512.ZeroIdiom(e.Max)
	ap = GP64()
	n := GP64()
	MOVQ(f.alpha, ap)
	MOVQ(f.gRows, n)
	Label(f.label("alphas"))
	lanes := GP64()
	MOVL(U32(16), lanes.As32())
	CMPQ(n, lanes)
	CMOVQLT(n, lanes)
	tbl := GP64()
	LEAQ(lanes16, tbl)
	km := K()
	KMOVW(Mem{Base: tbl, Index: lanes, Scale: 2}, km)
	a := ZMM()
	VMOVUPS_Z(Mem{Base: ap}, km, a)
	y := e.Exp(a, km)
	VMOVUPS(y, km, Mem{Base: ap})
	ADDQ(U32(64), ap)
	SUBQ(U8(16), n)
	JG(LabelRef(f.label("alphas")))
}

// softmaxRow emits the softmax of one row of the scratch (row) that sees
// cnt keys (1..64): full, all 64 (the label "full", falling through from
// the caller), else fewer (the label "part"). mp, ap and sp point to the
// row's m, alpha and sum. It ends with a jump to rowdone.
func (f *fold) softmaxRow(e *asmkit.Exp512, negInf VecVirtual, row, cnt, mp, ap, sp Register, full bool) {
	pre := "full_"
	if !full {
		pre = "part_"
		Label(f.label("part"))
	}
	L := func(s string) string { return f.label(pre + s) }

	// The row's scores; lanes past cnt are −Inf for the maximum.
	var s [4]VecVirtual
	var k [4]Register
	if full {
		for v := range s {
			s[v] = ZMM()
			VMOVUPS(Mem{Base: row, Disp: 64 * v}, s[v])
		}
	} else {
		tbl := GP64()
		LEAQ(rowMask, tbl)
		LEAQ(Mem{Base: tbl, Index: cnt, Scale: 8}, tbl)
		for v := range s {
			k[v] = K()
			KMOVW(Mem{Base: tbl, Disp: 2 * v}, k[v])
			s[v] = ZMM()
			VMOVAPS(negInf, s[v])
			VMOVUPS(Mem{Base: row, Disp: 64 * v}, k[v], s[v])
		}
	}
	// The maximum, in every lane: a tree of VMAXPS (the order does not
	// matter: only the sign of a zero maximum could, and it never reaches
	// a result, since exp(±0) = 1).
	m01, m23 := ZMM(), ZMM()
	VMAXPS(s[1], s[0], m01)
	VMAXPS(s[3], s[2], m23)
	VMAXPS(m23, m01, m01)
	t := ZMM()
	VSHUFF32X4(U8(0x4e), m01, m01, t)
	VMAXPS(t, m01, m01)
	VSHUFF32X4(U8(0xb1), m01, m01, t)
	VMAXPS(t, m01, m01)
	VPERMILPS(U8(0x4e), m01, t)
	VMAXPS(t, m01, m01)
	VPERMILPS(U8(0xb1), m01, t)
	VMAXPS(t, m01, m01)
	// m' = max(rowmax, m): VMAXPS returns its second source, the old m,
	// when either is NaN, so a NaN m stays NaN.
	mNew := e.Max
	VMAXPS_BCST(Mem{Base: mp}, m01, mNew)
	mOld := XMM()
	VMOVSS(Mem{Base: mp}, mOld)
	VUCOMISS(negInf.AsX(), mNew.AsX())
	JNE(LabelRef(L("live")))
	JPS(LabelRef(L("live")))

	// m' = −Inf: the row has seen nothing but −Inf (the chain's
	// "nothing seen yet": probabilities 0, factor 1, m and z unchanged),
	// unless a score is NaN, which VMAXPS dropped.
	f.nanCheck(s, k, full, L("nan"))
	MOVL(U32(0), Mem{Base: ap})
	MOVL(U32(0), Mem{Base: sp})
	zero := ZMM()
	asmkit.AVX512.ZeroIdiom(zero)
	for v := 0; v < 4; v++ {
		VMOVUPS(zero, Mem{Base: row, Disp: 64 * v})
	}
	JMP(LabelRef(f.label("rowdone")))

	Label(L("live"))
	arg := XMM()
	VSUBSS(mNew.AsX(), mOld, arg)
	VMOVSS(arg, Mem{Base: ap})
	VMOVSS(mNew.AsX(), Mem{Base: mp})
	var y [4]VecVirtual
	for v := range y {
		if full {
			y[v] = e.Exp(s[v], nil)
		} else {
			y[v] = e.Exp(s[v], k[v])
		}
		VMOVUPS(y[v], Mem{Base: row, Disp: 64 * v})
	}
	// ExpSum's order: for 64 keys (y0+y1) + (y2+y3); for fewer, one vector
	// after another (the vectors past cnt are 0, which adds nothing).
	acc := ZMM()
	if full {
		VADDPS(y[0], y[1], y[0])
		VADDPS(y[2], y[3], y[2])
		VADDPS(y[2], y[0], acc)
	} else {
		VADDPS(y[1], y[0], acc)
		VADDPS(y[2], acc, acc)
		VADDPS(y[3], acc, acc)
	}
	h := asmkit.HSum512(acc)
	VMOVSS(h, Mem{Base: sp})
	VUCOMISS(h, h)
	JPS(LabelRef(L("nansum")))
	JMP(LabelRef(f.label("rowdone")))

	// A NaN sum: a NaN score (which VMAXPS may have dropped, leaving the
	// rest of the row finite), or an infinite one (+Inf − +Inf), which the
	// chain computes as above. A NaN score makes the row NaN, as in the
	// chain: m' NaN, so every probability, the factor and the sum NaN.
	Label(L("nansum"))
	f.nanCheck(s, k, full, L("nan"))
	JMP(LabelRef(f.label("rowdone")))
	Label(L("nan"))
	VBROADCASTSS(constAt(cNaN), mNew)
	VSUBSS(mNew.AsX(), mOld, arg)
	VMOVSS(arg, Mem{Base: ap})
	VMOVSS(mNew.AsX(), Mem{Base: mp})
	VMOVSS(mNew.AsX(), Mem{Base: sp})
	for v := range y {
		if full {
			y[v] = e.Exp(s[v], nil)
		} else {
			y[v] = e.Exp(s[v], k[v])
		}
		VMOVUPS(y[v], Mem{Base: row, Disp: 64 * v})
	}
	JMP(LabelRef(f.label("rowdone")))
}

// nanCheck jumps to nan if a score of the row (in s, the lanes of k where
// not full) is NaN.
func (f *fold) nanCheck(s [4]VecVirtual, k [4]Register, full bool, nan string) {
	knan := K()
	for v := range s {
		kv := K()
		if full {
			VCMPPS(U8(3), s[v], s[v], kv)
		} else {
			VCMPPS(U8(3), s[v], s[v], k[v], kv)
		}
		if v == 0 {
			KMOVW(kv, knan)
		} else {
			KORW(kv, knan, knan)
		}
	}
	KORTESTW(knan, knan)
	JNZ(LabelRef(nan))
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
