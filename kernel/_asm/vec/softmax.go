package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
	"github.com/flashgo/flashgo/kernel/_asm/x86enc"
)

const softmaxBF16Doc = `SoftmaxBF16AVX512 is OnlineSoftmaxBF16 in one call for a
whole tile, with AVX-512 and AVX512-BF16, its exponentials base 2
(rows, cols >= 1, finite scale > 0, leading dimensions in elements, p
bfloat16):

	for i := 0; i < rows; i++ {
		row := s[i*ldS : i*ldS+cols]
		mNew := max(m[i], scale*Max(row))   // NaN if any score is NaN
		if mNew == −Inf {
			p[i*ldP : i*ldP+cols] = 0
			alpha[i] = 1
			continue
		}
		alpha[i] = Exp2((m[i] − mNew)·log2e)
		var sum float32
		for j, x := range row {
			e := Exp2((scale·x − mNew)·log2e)
			sum += e
			p[i*ldP+j] = RoundBF16(e)
		}
		z[i] = alpha[i]*z[i] + sum
		m[i] = mNew
	}

(every operation rounded to float32, none fused: scale·x is rounded as
the maximum was, so that the maximum's exponent is 0 exactly whatever
its magnitude; Exp2 is the kernel package's exp2Softmax, and the loop
its softmaxBF16Base2). Each row takes two
passes over its scores: their maximum, then the exponentials. The first
pass is VMAXPS of the unscaled scores alone, scaled once at the end (the
same value as the maximum of the scaled scores: rounding is monotonic and
scale > 0). VMAXPS may drop a NaN, so a row whose maximum or whose sum
comes out NaN (a NaN score, or +Inf ones) is redone from its old m[i] by
the exact path: a maximum pass of the scaled scores with an unordered
compare ORed into a NaN flag, as in maxAVX512, a NaN sending the row to a
scalar scan for the first NaN, which scaled is the row's new maximum.
The second pass takes the exponentials, their sum, and their rounding to
bfloat16 (VCVTNEPS2BF16, emitted as bytes: Go's assembler has no mnemonic
for it) stored straight into p. alpha's exponential is the same vector
exponential of (m[i] − mNew)·log2e broadcast. The last partial vector of a
row is read and written through an opmask, so nothing past cols is
touched. The order of the additions of the sum differs from the loop.`

// genSoftmaxBF16AVX512 emits SoftmaxBF16AVX512 (softmaxBF16Doc). The
// conversion to bfloat16 goes through Z30 (VCVTNEPS2BF16 Y30, Z30): a
// physical register written by a VMOVAPS and read by the store after the
// instruction's bytes, so that the register allocator, which cannot see
// inside the bytes, keeps it live across them.
func genSoftmaxBF16AVX512() {
	TEXT("SoftmaxBF16AVX512", NOSPLIT, "func(s *float32, ldS int, p *uint16, ldP int, rows, cols int, scale float32, m, z, alpha *float32)")
	Pragma("noescape")
	doc(softmaxBF16Doc)
	s := Load(Param("s"), GP64())
	ldS := Load(Param("ldS"), GP64())
	p := Load(Param("p"), GP64())
	ldP := Load(Param("ldP"), GP64())
	rows := Load(Param("rows"), GP64())
	cols := Load(Param("cols"), GP64())
	m := Load(Param("m"), GP64())
	z := Load(Param("z"), GP64())
	alpha := Load(Param("alpha"), GP64())
	scx := Load(Param("scale"), XMM())
	SHLQ(U8(2), ldS)
	SHLQ(U8(1), ldP)

	sc := ZMM()
	VBROADCASTSS(scx, sc)
	negInf := broadcast512(cNegInf)
	// The exponentials are base 2 (exp2t512) of (scale·x − mNew)·log2e,
	// mNew broadcast into vm per row.
	log2e := broadcast512(cLog2e)
	vm := ZMM()
	e := newExp2t512(sc, vm, log2e)

	// The opmask of the last partial vector of a row, the same for every
	// row: cols mod 16 lanes (none when cols is a multiple of 16).
	rem := GP64()
	MOVQ(cols, rem)
	ANDQ(U8(15), rem)
	tail := mask16(rem)
	full := GP64() // cols rounded down to a multiple of 16
	MOVQ(cols, full)
	ANDQ(I32(-16), full)

	r := &softmaxRowBF16{s: s, p: p, m: m, z: z, alpha: alpha, scx: scx, sc: sc, negInf: negInf, log2e: log2e, vm: vm, e: e,
		rem: rem, tail: tail, full: full, x: GP64(), pp: GP64(), j: GP64()}
	Label("row")
	r.code(true)
	Label("slow_row")
	r.code(false)
	Label("next")
	ADDQ(ldS, s)
	ADDQ(ldP, p)
	ADDQ(U32(4), m)
	ADDQ(U32(4), z)
	ADDQ(U32(4), alpha)
	DECQ(rows)
	JNE(LabelRef("row"))
	VZEROUPPER()
	RET()
}

// softmaxRowBF16 emits the code of one row of SoftmaxBF16AVX512
// (softmaxBF16Doc) for a kernel whose row loop it sits in: s and p point
// at the row's scores and probabilities, m, z and alpha at its state. The
// code falls through, or jumps to prefix+"next", when the row is done; the
// fast path jumps to prefix+"slow_row" to redo a row whose maximum or sum
// came out NaN, where the kernel places the exact path (code(false)). Its
// own labels start with prefix too.
type softmaxRowBF16 struct {
	prefix            string
	s, p, m, z, alpha Register
	scx               Register   // the scale, in an xmm
	sc, negInf, log2e VecVirtual // the scale, −Inf and log2e broadcast
	vm                VecVirtual // the row's new maximum, broadcast
	e                 *exp2t512
	rem, full         Register // cols mod 16, and cols rounded down to 16
	tail              Register // the opmask of rem lanes
	x, pp, j          Register // scratch: scores, probabilities, lanes left
}

// code emits the row: fast, the maximum pass without the scale or the NaN
// flag (the common case), or the exact path that the fast one falls back
// to when a NaN shows.
func (r *softmaxRowBF16) code(fast bool) {
	pre := "slow_"
	if fast {
		pre = "fast_"
	}
	L := func(name string) string { return r.prefix + pre + name }
	s, p, m, z, alpha := r.s, r.p, r.m, r.z, r.alpha
	scx, sc, negInf, log2e, vm, e := r.scx, r.sc, r.negInf, r.log2e, r.vm, r.e
	rem, tail, full, x, pp, j := r.rem, r.tail, r.full, r.x, r.pp, r.j
	// Pass 1: the maximum of the scaled scores, and a NaN flag.
	var acc [4]VecVirtual
	for i := range acc {
		acc[i] = ZMM()
		VMOVAPS(negInf, acc[i])
	}
	knan := K()
	KXORW(knan, knan, knan)
	MOVQ(s, x)
	MOVQ(full, j)
	Label(L("max4"))
	CMPQ(j, U32(64))
	JL(LabelRef(L("max1")))
	for i := range acc {
		if fast {
			VMAXPS(Mem{Base: x}.Offset(64*i), acc[i], acc[i])
			continue
		}
		v := ZMM()
		VMULPS(Mem{Base: x}.Offset(64*i), sc, v)
		VMAXPS(v, acc[i], acc[i])
		k := K()
		VCMPPS(U8(3), v, v, k) // unordered: NaN
		KORW(k, knan, knan)
	}
	ADDQ(U32(256), x)
	SUBQ(U32(64), j)
	JMP(LabelRef(L("max4")))
	Label(L("max1"))
	TESTQ(j, j)
	JE(LabelRef(L("maxtail")))
	if fast {
		VMAXPS(Mem{Base: x}, acc[0], acc[0])
	} else {
		v := ZMM()
		VMULPS(Mem{Base: x}, sc, v)
		VMAXPS(v, acc[0], acc[0])
		k := K()
		VCMPPS(U8(3), v, v, k)
		KORW(k, knan, knan)
	}
	ADDQ(U32(64), x)
	SUBQ(U32(16), j)
	JMP(LabelRef(L("max1")))
	Label(L("maxtail"))
	TESTQ(rem, rem)
	JE(LabelRef(L("maxreduce")))
	v := ZMM()
	VMOVAPS(negInf, v)
	VMOVUPS(Mem{Base: x}, tail, v) // lanes past cols stay −Inf
	if !fast {
		VMULPS(v, sc, v)
	}
	VMAXPS(v, acc[1], acc[1])
	if !fast {
		k := K()
		VCMPPS(U8(3), v, v, k)
		KORW(k, knan, knan)
	}

	Label(L("maxreduce"))
	rmax := XMM()
	if fast {
		// The maximum of the unscaled scores, scaled: the same as the
		// maximum of the scaled ones (rounding is monotonic and scale >
		// 0). A NaN that VMAXPS kept sends the row to the exact path.
		hmax512(acc, rmax)
		VUCOMISS(rmax, rmax)
		JPS(LabelRef(r.prefix + "slow_row"))
		VMULSS(scx, rmax, rmax)
	} else {
		KORTESTW(knan, knan)
		JNE(LabelRef(L("nan")))
		hmax512(acc, rmax)
	}
	JMP(LabelRef(L("newmax")))

	// A NaN score: the row's maximum is the first one, scaled (the loop's
	// mNew, since max(m, NaN) is NaN).
	Label(L("nan"))
	MOVQ(s, x)
	Label(L("scan"))
	VMOVSS(Mem{Base: x}, rmax)
	VMULSS(scx, rmax, rmax) // scaled: the flag came from scaled scores
	VUCOMISS(rmax, rmax)
	JPS(LabelRef(L("nanfound")))
	ADDQ(U32(4), x)
	JMP(LabelRef(L("scan")))

	Label(L("newmax"))
	// mNew = max(m[i], rmax): VMAXSS returns its second source, m[i], when
	// either is NaN, so a NaN m[i] stays NaN (rmax is not NaN here).
	mOld := XMM()
	VMOVSS(Mem{Base: m}, mOld)
	mNew := rmax
	VMAXSS(mOld, rmax, mNew)
	JMP(LabelRef(L("special")))
	Label(L("nanfound"))
	VMOVSS(Mem{Base: m}, mOld) // mNew is the scaled NaN
	Label(L("special"))
	VUCOMISS(negInf.AsX(), mNew) // equal: mNew is −Inf (ZF), unordered sets ZF and PF
	JNE(LabelRef(L("live")))
	JPS(LabelRef(L("live")))

	// A row that has seen no key yet: p = 0, alpha = 1, m and z unchanged.
	MOVQ(p, pp)
	MOVQ(full, j)
	zero := ZMM()
	asmkit.AVX512.ZeroIdiom(zero)
	Label(L("clear"))
	TESTQ(j, j)
	JE(LabelRef(L("cleartail")))
	VMOVDQU16(zero.AsY(), Mem{Base: pp})
	ADDQ(U32(32), pp)
	SUBQ(U32(16), j)
	JMP(LabelRef(L("clear")))
	Label(L("cleartail"))
	TESTQ(rem, rem)
	JE(LabelRef(L("clearone")))
	VMOVDQU16(zero.AsY(), tail, Mem{Base: pp})
	Label(L("clearone"))
	VMOVSS(e.one.AsX(), Mem{Base: alpha})
	JMP(LabelRef(r.prefix + "next"))

	Label(L("live"))
	VMOVSS(mNew, Mem{Base: m})
	VBROADCASTSS(mNew, vm)
	// alpha = 2^((m[i] − mNew)·log2e), of m[i] broadcast.
	vo := ZMM()
	VBROADCASTSS(mOld, vo)
	VSUBPS(vm, vo, vo)
	VMULPS(log2e, vo, vo)
	VMOVSS(e.exp2(vo, nil).AsX(), Mem{Base: alpha})

	// Pass 2: exponentials, their sum, and their rounding into p.
	sum := ZMM()
	asmkit.AVX512.ZeroIdiom(sum)
	MOVQ(s, x)
	MOVQ(p, pp)
	MOVQ(full, j)
	store := func(y VecVirtual, off int, mask Register) {
		VMOVAPS(y, Z30)
		x86enc.Emit("VCVTNEPS2BF16 Y30, Z30", x86enc.VCVTNEPS2BF16(30, 30))
		if mask != nil {
			VMOVDQU16(Y30, mask, Mem{Base: pp})
		} else {
			VMOVDQU16(Y30, Mem{Base: pp}.Offset(off))
		}
	}
	const unroll = 4
	Label(L("exp4"))
	CMPQ(j, U32(16*unroll))
	JL(LabelRef(L("exp1")))
	var ys [unroll]VecVirtual
	for i := range ys {
		ys[i] = e.of(Mem{Base: x}.Offset(64*i), nil)
	}
	for i, y := range ys {
		store(y, 32*i, nil)
	}
	VADDPS(ys[0], ys[1], ys[0])
	VADDPS(ys[2], ys[3], ys[2])
	VADDPS(ys[0], sum, sum)
	VADDPS(ys[2], sum, sum)
	ADDQ(U32(64*unroll), x)
	ADDQ(U32(32*unroll), pp)
	SUBQ(U32(16*unroll), j)
	JMP(LabelRef(L("exp4")))
	Label(L("exp1"))
	TESTQ(j, j)
	JE(LabelRef(L("exptail")))
	y := e.of(Mem{Base: x}, nil)
	store(y, 0, nil)
	VADDPS(y, sum, sum)
	ADDQ(U32(64), x)
	ADDQ(U32(32), pp)
	SUBQ(U32(16), j)
	JMP(LabelRef(L("exp1")))
	Label(L("exptail"))
	TESTQ(rem, rem)
	JE(LabelRef(L("rowsum")))
	w := ZMM()
	VMOVUPS_Z(Mem{Base: x}, tail, w)
	y = e.of(w, tail)
	store(y, 0, tail)
	VADDPS(y, sum, sum)

	Label(L("rowsum"))
	// z[i] = alpha[i]·z[i] + sum, rounded after each operation as in Go.
	h := asmkit.HSum512(sum)
	if fast {
		// A NaN sum: a NaN score that VMAXPS dropped (or an infinite
		// one). The exact path redoes the row from m[i] as it was.
		VUCOMISS(h, h)
		JPS(LabelRef(L("redo")))
	}
	zi := XMM()
	VMOVSS(Mem{Base: z}, zi)
	VMULSS(Mem{Base: alpha}, zi, zi)
	VADDSS(h, zi, zi)
	VMOVSS(zi, Mem{Base: z})
	JMP(LabelRef(r.prefix + "next"))
	if fast {
		Label(L("redo"))
		VMOVSS(mOld, Mem{Base: m})
		JMP(LabelRef(r.prefix + "slow_row"))
	}

}
