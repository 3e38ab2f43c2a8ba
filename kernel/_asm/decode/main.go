// Command decode generates the amd64 assembly of flashgo's decode kernels,
// which read K and V rows where they lie in a cache, converting binary16,
// bfloat16 and Q8 elements to float32 in registers on the way:
//
//	QKRows: s[i·ldS+j] = scale · Σ_c q[i·ldQ+c] · K_j[c]   (K_j = row j of k)
//	PVRows: o[i·ldO+c] += Σ_j p[i·ldP+j] · V_j[c]           (V_j = row j of v)
//
// for rows 1..MR query (or probability) rows at a time. Nothing is packed:
// decoding a token reads each cached K and V row once, so a transposing
// pack (what the prefill kernels need) would cost as much as the product.
// Every kernel comes in an AVX-512 and an AVX2+FMA+F16C variant and in
// six element types (fp8.go: E5M2 and E4M3FN). Run it from kernel/_asm:
//
//	go run ./decode -out ../internal/x86/rows_amd64.s -stubs ../internal/x86/rows_amd64.go -pkg x86
//
// The QKRows kernels handle the first dv components of every row, dv a
// multiple of the vector width (of 32 for Q8); the Go wrappers add the
// rest. The AVX-512 PVRows kernels take any dv: the columns after the last
// whole vector go in one more vector, read and written through an opmask,
// so that a column's sum is the same chain of FMAs whether it falls in a
// whole vector or in that one (V given as a view of K's first Dv
// components gives the bits of V = K on those columns). The AVX2 kernels
// take whole vectors, and the Go wrappers add the other columns with the
// same FMAs (kernel.pvRowsTail: the PV kernel on the widened columns).
//
// QKRows keeps an MR × 4 block of vector accumulators: row i's partial dot
// products with keys j..j+3. Each step converts one vector of each of the
// four keys and issues MR·4 FMAs with the query vectors; at the end of the
// row the four accumulators of a query row are reduced together (two
// unpack-and-add rounds leave key u's partial sums in element u of every
// 128-bit lane, then the lanes are added), scaled and stored as four
// scores. Keys left over after the groups of four go one at a time.
//
// PVRows keeps an MR × NV block of the output in accumulators (NV vectors
// of columns) and, for every key j, converts the NV vectors of V_j once and
// issues MR·NV FMAs with the broadcast probabilities. Every column's
// accumulator starts from o and adds the keys' products in key order, one
// FMA each, whichever block (or masked last vector) holds the column.
//
// Q8 rows hold int8 values with a float32 scale per block of 32 (the scale
// of element e of the tensor is scales[e/32]); a vector is widened with
// VPMOVSXBD, converted with VCVTDQ2PS and multiplied by its block's scale.
package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
)

type elemType = asmkit.Elem

const (
	f32  = asmkit.F32
	f16  = asmkit.F16
	bf16 = asmkit.BF16
	q8   = asmkit.Q8
	e5m2 = asmkit.E5M2
	e4m3 = asmkit.E4M3
)

// While the kernels read a K or V row they prefetch the row ahead bytes
// further on into the L2 with PREFETCHT2 (the Go wrappers pass 64 rows:
// 16 KB of binary16 rows of 128, or where a paged cache's block table says
// the key 64 positions on lies), and the Q8 scales of those rows into the
// L1. On the device Xeon a cold decode on one core ran 20–25 % faster this
// way than with PREFETCHT0 16 keys ahead, which ties up the L1 fill
// buffers that demand loads need (docs/benchmarks.md).

// isa is one instruction-set variant with its register blocks.
type isa struct {
	*asmkit.ISA
	mr int // rows of a register block
	nv int // PVRows: vectors of a register block
}

var (
	avx512 = &isa{ISA: asmkit.AVX512, mr: 4, nv: 4}
	avx2   = &isa{ISA: asmkit.AVX2, mr: 2, nv: 4}
)

// load converts the vector of t elements at m into dst; sc is the address
// of the Q8 block scale that applies to it.
func (x *isa) load(t elemType, m Mem, sc Mem, dst VecVirtual) {
	if t.IsFP8() {
		x.widenFP8(t, m, dst)
		return
	}
	t.Widen(m, dst)
	if t == q8 {
		if x.IsAVX512() {
			VMULPS_BCST(sc, dst, dst)
		} else {
			s := YMM()
			VBROADCASTSS(sc, s)
			VMULPS(s, dst, dst)
		}
	}
}

// loadTail is load for the partial vector at the end of a row: only the
// lanes of the opmask k are read (none past them, so nothing past the row
// end), the others are zero.
func (x *isa) loadTail(t elemType, m Mem, sc Mem, k Register, dst VecVirtual) {
	switch t {
	case f32:
		VMOVUPS_Z(m, k, dst)
		return
	case f16, bf16:
		h := YMM()
		VMOVDQU16_Z(m, k, h)
		t.Widen(h, dst)
	case q8:
		h := XMM()
		VMOVDQU8_Z(m, k, h)
		t.Widen(h, dst)
		VMULPS_BCST(sc, dst, dst)
	case e5m2, e4m3:
		h := XMM()
		VMOVDQU8_Z(m, k, h)
		x.widenFP8(t, h, dst)
	}
}

// tailMask is the table of the AVX-512 PVRows kernels' opmasks: entry i
// (i in 0..16) selects the first i lanes.
var tailMask Mem

// pvTailMask returns the opmask of the dv mod 16 columns of a row's last,
// partial, vector.
func pvTailMask() Register {
	rem := Load(Param("dv"), GP64())
	ANDQ(U8(15), rem)
	return asmkit.LoadOpmask(tailMask, rem)
}

// pvDvDoc returns the lines of a PVRows kernel's doc comment that name the
// columns of o it computes and say what dv may be, to the end of their
// parenthesis (for a gathering kernel, after its "into the first dv").
func (x *isa) pvDvDoc(t elemType, gather bool) []string {
	switch {
	case x.IsAVX512() && gather:
		return []string{
			"columns of o (any dv >= 1: the columns past the last whole vector go in",
			"one more, read and written through an opmask; ldO and ldP in elements):",
		}
	case x.IsAVX512():
		return []string{
			"the first dv columns of o (any dv >= 1: the columns past the last whole",
			"vector go in one more, read and written through an opmask; leading",
			"dimensions in elements):",
		}
	case gather:
		return []string{fmt.Sprintf("columns of o (dv a multiple of %d, ldO and ldP in elements):", x.dvMultiple(t))}
	}
	return []string{
		fmt.Sprintf("the first dv columns of o (dv a multiple of %d, leading dimensions in", x.dvMultiple(t)),
		"elements):",
	}
}

// hsum4 reduces four accumulators to one xmm holding the sum of each.
func (x *isa) hsum4(a [4]VecVirtual) Register {
	t0, t1, t2, t3 := x.Vec(), x.Vec(), x.Vec(), x.Vec()
	VUNPCKLPS(a[1], a[0], t0)
	VUNPCKHPS(a[1], a[0], t1)
	VADDPS(t1, t0, t0)
	VUNPCKLPS(a[3], a[2], t2)
	VUNPCKHPS(a[3], a[2], t3)
	VADDPS(t3, t2, t2)
	VUNPCKLPD(t2, t0, t1)
	VUNPCKHPD(t2, t0, t3)
	VADDPS(t3, t1, t1)
	return x.lanesum(t1)
}

// lanesum adds the 128-bit lanes of v into one xmm.
func (x *isa) lanesum(v VecVirtual) Register {
	xl := XMM()
	if x.IsAVX512() {
		h := YMM()
		VEXTRACTF64X4(Imm(1), v, h)
		VADDPS(h, v.AsY(), h)
		VEXTRACTF32X4(Imm(1), h, xl)
		VADDPS(xl, h.AsX(), xl)
	} else {
		VEXTRACTF128(Imm(1), v, xl)
		VADDPS(xl, v.AsX(), xl)
	}
	return xl
}

// hsum1 reduces one accumulator to the sum of its elements, in element 0
// of the returned xmm. It adds in the order hsum4 does, (e0+e2)+(e1+e3)
// within each 128-bit lane and then across the lanes, so that a score does
// not depend on whether its key went through a group of four or alone.
func (x *isa) hsum1(a VecVirtual) Register {
	t := x.Vec()
	VPERMILPS(Imm(0x4e), a, t) // e2 e3 e0 e1 in every lane
	VADDPS(t, a, a)
	VPERMILPS(Imm(0xb1), a, t) // swap neighbours
	VADDPS(t, a, a)
	return x.lanesum(a)
}

var elemDoc = map[elemType]string{f32: "float32", f16: "binary16", bf16: "bfloat16", q8: "Q8", e5m2: "E5M2", e4m3: "E4M3FN"}

// dvMultiple is what the kernels of t need dv to be a multiple of: the
// vector width, or a Q8 block.
func (x *isa) dvMultiple(t elemType) int {
	if t == q8 {
		return 32
	}
	return x.Lanes()
}

// rowsDoc is the end of a decode kernel's doc comment: what the element
// function f of the reference loop is for t (x the rows, xs the Q8
// scales), the prefetch, and order, how the sums differ from the loop.
func rowsDoc(f, x, xs string, t elemType, order string) []string {
	lines := append(elemDocLines(f, x, xs, t), "While it reads element e of "+x+" it prefetches element e+ahead into the")
	return append(lines, strings.Split("L2 cache; ahead changes the speed, never the result. "+order, "\n")...)
}

// elemDocLines says what the element function f of a reference loop is
// for t (x the rows, xs the scales).
func elemDocLines(f, x, xs string, t elemType) []string {
	var e string
	switch t {
	case f32:
		e = fmt.Sprintf("%s(e) is %s[e]", f, x)
	case f16:
		e = fmt.Sprintf("%s(e) is %s[e] widened exactly from binary16 (VCVTPH2PS)", f, x)
	case bf16:
		e = fmt.Sprintf("%s(e) is %s[e] shifted left by 16 (bfloat16 to float32)", f, x)
	case q8:
		e = fmt.Sprintf("%s(e) is float32(%s[e])·%s[e/32]", f, x, xs)
	case e5m2:
		if f == "K" {
			e = fmt.Sprintf("%s(e) is %s[e] widened exactly from E5M2 and scale is taken as\nscale·*%s (rounded once)", f, x, xs)
		} else {
			e = fmt.Sprintf("%s(e) is %s[e] widened exactly from E5M2 (%s is not read: the caller\nmultiplies p by the values' scale)", f, x, xs)
		}
	case e4m3:
		if f == "K" {
			e = fmt.Sprintf("%s(e) is %s[e] widened exactly from E4M3FN times 2^−8 and scale is\ntaken as scale·(*%s·2^8) (rounded once)", f, x, xs)
		} else {
			e = fmt.Sprintf("%s(e) is %s[e] widened exactly from E4M3FN times 2^−8 (%s is not\nread: the caller multiplies p by the values' scale times 2^8)", f, x, xs)
		}
	}
	return strings.Split("where "+e+".", "\n")
}

// dispatchRows jumps to the code for the rows argument's block of
// 1..x.mr rows (label name_rN) and returns for any other count.
func dispatchRows(x *isa, name string) {
	rows := Load(Param("rows"), GP64())
	for rb := x.mr; rb >= 1; rb-- {
		CMPQ(rows, U8(rb))
		JEQ(LabelRef(fmt.Sprintf("%s_r%d", name, rb)))
	}
	asmkit.Ret()
}

// floatStride loads the leading dimension param of a float32 matrix and
// returns it in bytes, with three times it (for rowAddr).
func floatStride(param string) (ld, ld3 Register) {
	ld = Load(Param(param), GP64())
	SHLQ(U8(2), ld)
	ld3 = GP64()
	LEAQ(Mem{Base: ld, Index: ld, Scale: 2}, ld3)
	return ld, ld3
}

// rowAddr returns base + r·ld (r in 0..3), with ld3 = 3·ld.
func rowAddr(base, ld, ld3 Register, r, disp int) Mem {
	m := Mem{Base: base, Disp: disp}
	switch r {
	case 1:
		m = m.Idx(ld, 1)
	case 2:
		m = m.Idx(ld, 2)
	case 3:
		m = m.Idx(ld3, 1)
	}
	return m
}

func genQK(x *isa, t elemType) {
	name := asmkit.Export("qkRows" + t.Name() + x.Name)
	TEXT(name, NOSPLIT, fmt.Sprintf("func(s *float32, ldS int, q *float32, ldQ int, k %s, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int)", t.GoType()))
	Pragma("noescape")
	Doc(append([]string{
		fmt.Sprintf("%s is the %s kernel of QKRows for %s keys:", name, x.Doc, elemDoc[t]),
		fmt.Sprintf("the scaled dot products of rows (1..%d) query rows with cols key rows over", x.mr),
		fmt.Sprintf("their first dv components (dv a multiple of %d, leading dimensions in", x.dvMultiple(t)),
		"elements):",
		"",
		"	for i := 0; i < rows; i++ {",
		"		for j := 0; j < cols; j++ {",
		"			var acc float32",
		"			for c := 0; c < dv; c++ {",
		"				acc += q[i*ldQ+c] * K(j*ldK + c)",
		"			}",
		"			s[i*ldS+j] = scale * acc",
		"		}",
		"	}",
		"",
	}, rowsDoc("K", "k", "ks", t, "The order of the\nadditions differs from the loop.")...)...)
	step := x.Lanes() // components per inner iteration
	if t == q8 {
		step = 32
	}
	sub := step / x.Lanes()
	zs := x.Vec()
	sx := Load(Param("scale"), XMM())
	if t.IsFP8() {
		foldFP8Scale(t, sx)
	}
	VBROADCASTSS(sx, zs)

	dispatchRows(x, name)
	for rb := x.mr; rb >= 1; rb-- {
		lbl := func(s string) string { return fmt.Sprintf("%s_r%d_%s", name, rb, s) }
		Label(fmt.Sprintf("%s_r%d", name, rb))
		kg := Load(Param("k"), GP64())
		sp := Load(Param("s"), GP64())
		jleft := Load(Param("cols"), GP64())
		var ksg Register
		if t == q8 {
			ksg = Load(Param("ks"), GP64())
		}
		for _, nk := range []int{4, 1} {
			loop, done := lbl(fmt.Sprintf("k%d", nk)), lbl(fmt.Sprintf("k%d_done", nk))
			Label(loop)
			CMPQ(jleft, U8(nk))
			JL(LabelRef(done))
			acc := zeroAcc(x, rb, nk)
			qc := Load(Param("q"), GP64())
			ldQ, ldQ3 := floatStride("ldQ")
			ldK := Load(Param("ldK"), GP64())
			ldK3 := GP64()
			if t == q8 {
				// The scale of int8 element e is at byte 4·(e/32); rows are a
				// multiple of 32 elements apart, so a row's scales are ldK/8
				// bytes apart.
				SHRQ(U8(3), ldK)
			} else if t.Shift() > 0 {
				SHLQ(U8(t.Shift()), ldK)
			}
			LEAQ(Mem{Base: ldK, Index: ldK, Scale: 2}, ldK3)
			kc := GP64()
			MOVQ(kg, kc)
			var ksc Register
			if t == q8 {
				ksc = GP64()
				MOVQ(ksg, ksc)
			}
			if t == q8 {
				// The scales of the rows ahead, ahead/8 bytes on (4 bytes
				// a block of 32): a stream of a few bytes a key that the
				// hardware prefetcher is slow to follow, into the L1.
				ps := Load(Param("ahead"), GP64())
				SARQ(U8(3), ps)
				ADDQ(ksc, ps)
				PREFETCHT0(Mem{Base: ps})
			}
			cnt := Load(Param("dv"), GP64())
			SHRQ(U8(map[int]uint64{8: 3, 16: 4, 32: 5}[step]), cnt)
			// For Q8 the key rows are ldK·8 bytes apart: the int8 rows are
			// addressed through a second index.
			var ldKb, ldKb3 Register
			if t == q8 {
				ldKb = GP64()
				ldKb3 = GP64()
				MOVQ(ldK, ldKb)
				SHLQ(U8(3), ldKb)
				LEAQ(Mem{Base: ldKb, Index: ldKb, Scale: 2}, ldKb3)
			} else {
				ldKb, ldKb3 = ldK, ldK3
			}
			// pf runs ahead bytes ahead of kc: the hardware prefetcher
			// alone leaves a single core well short of its read bandwidth
			// when there is this much arithmetic per byte.
			pf := Load(Param("ahead"), GP64())
			ADDQ(kc, pf)
			inner := lbl(fmt.Sprintf("k%d_inner", nk))
			Label(inner)
			for u := 0; u < nk; u++ {
				PREFETCHT2(rowAddr(pf, ldKb, ldKb3, u, 0))
			}
			qkStep(x, t, acc, sub, qc, ldQ, ldQ3, func(u, si int) (m, sc Mem) {
				if t == q8 {
					sc = rowAddr(ksc, ldK, ldK3, u, 0)
				}
				return rowAddr(kc, ldKb, ldKb3, u, si*x.Lanes()*t.Size()), sc
			})
			ADDQ(U32(step*4), qc)
			ADDQ(U32(step*t.Size()), kc)
			ADDQ(U32(step*t.Size()), pf)
			if t == q8 {
				ADDQ(U8(4), ksc)
			}
			DECQ(cnt)
			JNZ(LabelRef(inner))

			storeScores(x, acc, sp, zs)
			// Next group of keys.
			ldK = Load(Param("ldK"), GP64())
			if t == q8 {
				MOVQ(ldK, kc)
				SHRQ(U8(3), kc)
				if nk == 4 {
					SHLQ(U8(2), kc)
				}
				ADDQ(kc, ksg)
			}
			if t.Shift() > 0 {
				SHLQ(U8(t.Shift()), ldK)
			}
			if nk == 4 {
				SHLQ(U8(2), ldK)
			}
			ADDQ(ldK, kg)
			ADDQ(U8(4*nk), sp)
			SUBQ(U8(nk), jleft)
			JMP(LabelRef(loop))
			Label(done)
		}
		asmkit.Ret()
	}
}

// zeroAcc returns rb × nk fresh accumulators, zeroed.
func zeroAcc(x *isa, rb, nk int) [][]VecVirtual {
	acc := make([][]VecVirtual, rb)
	for r := range acc {
		acc[r] = make([]VecVirtual, nk)
		for u := range acc[r] {
			acc[r][u] = x.Vec()
			VXORPS(acc[r][u], acc[r][u], acc[r][u])
		}
	}
	return acc
}

// qkStep emits one step of the QK kernels' inner loop: for each of sub
// vectors of components, the vector of each key of the group (key gives
// its address and, for Q8, its block scale's) converted once, and its
// products with every query row's vector (rows ldQ bytes apart from qc)
// added to acc.
func qkStep(x *isa, t elemType, acc [][]VecVirtual, sub int, qc, ldQ, ldQ3 Register, key func(u, si int) (m, sc Mem)) {
	for si := 0; si < sub; si++ {
		kv := make([]VecVirtual, len(acc[0]))
		for u := range kv {
			kv[u] = x.Vec()
			m, sc := key(u, si)
			x.load(t, m, sc, kv[u])
		}
		for r := range acc {
			qv := x.Vec()
			VMOVUPS(rowAddr(qc, ldQ, ldQ3, r, si*x.Lanes()*4), qv)
			for u := range kv {
				VFMADD231PS(qv, kv[u], acc[r][u])
			}
		}
	}
}

// storeScores reduces the accumulators of each query row (four keys, or
// one), scales the sums by zs and stores them at sp, rows ldS apart.
func storeScores(x *isa, acc [][]VecVirtual, sp Register, zs VecVirtual) {
	ldS := Load(Param("ldS"), GP64())
	SHLQ(U8(2), ldS)
	sr := GP64()
	MOVQ(sp, sr)
	for r := range acc {
		if len(acc[r]) == 4 {
			h := x.hsum4([4]VecVirtual{acc[r][0], acc[r][1], acc[r][2], acc[r][3]})
			VMULPS(zs.AsX(), h, h)
			VMOVUPS(h, Mem{Base: sr})
		} else {
			h := x.hsum1(acc[r][0])
			VMULSS(zs.AsX(), h, h)
			VMOVSS(h, Mem{Base: sr})
		}
		if r+1 < len(acc) {
			ADDQ(ldS, sr)
		}
	}
}

func genPV(x *isa, t elemType) {
	name := asmkit.Export("pvRows" + t.Name() + x.Name)
	TEXT(name, NOSPLIT, fmt.Sprintf("func(o *float32, ldO int, p *float32, ldP int, v %s, ldV int, vs *float32, rows, cols, dv, ahead int)", t.GoType()))
	Pragma("noescape")
	doc := append([]string{
		fmt.Sprintf("%s is the %s kernel of PVRows for %s values:", name, x.Doc, elemDoc[t]),
		fmt.Sprintf("it accumulates rows (1..%d) probability rows times cols value rows into", x.mr),
	}, x.pvDvDoc(t, false)...)
	Doc(append(append(doc,
		"",
		"	for i := 0; i < rows; i++ {",
		"		for c := 0; c < dv; c++ {",
		"			acc := o[i*ldO+c]",
		"			for j := 0; j < cols; j++ {",
		"				acc += p[i*ldP+j] * V(j*ldV + c)",
		"			}",
		"			o[i*ldO+c] = acc",
		"		}",
		"	}",
		"",
	), rowsDoc("V", "v", "vs", t, "Each product\nis added with an FMA, rounded once, in the order of the keys.")...)...)
	genPVBlocks(x, t, name, func(rb, nv int, tail bool, lbl string, oc, vc, sc Register) {
		pvBlock(x, t, rb, nv, tail, lbl, oc, vc, sc)
	})
}

// genPVBlocks emits the body that the PVRows kernels (in place and
// gathering) share: dispatch on the rows, then blocks of x.nv vectors of
// output columns and one block of the 1..nv−1 left, each emitted by block
// (rb rows, nv vectors, its loop label; oc is o, vc v and sc the Q8 scales
// advanced to the block's columns). With AVX-512, where dv is not a
// multiple of 16, the last block has one vector more (tail), the columns
// past the whole vectors, masked: 0..nv−1 whole vectors and the partial
// one.
func genPVBlocks(x *isa, t elemType, name string, block func(rb, nv int, tail bool, lbl string, oc, vc, sc Register)) {
	dispatchRows(x, name)
	for rb := x.mr; rb >= 1; rb-- {
		lbl := func(s string) string { return fmt.Sprintf("%s_r%d_%s", name, rb, s) }
		Label(fmt.Sprintf("%s_r%d", name, rb))
		oc := Load(Param("o"), GP64())    // o at the column block
		vc := Load(Param("v"), GP64())    // v row 0 at the column block
		vecs := Load(Param("dv"), GP64()) // whole vectors of columns left
		SHRQ(U8(map[int]uint64{8: 3, 16: 4}[x.Lanes()]), vecs)
		var sc Register
		if t == q8 {
			sc = Load(Param("vs"), GP64())
		}
		// Full blocks of nv vectors, then one block of the 1..nv−1 left.
		Label(lbl("full"))
		CMPQ(vecs, U8(x.nv))
		JL(LabelRef(lbl("part")))
		block(rb, x.nv, false, lbl("full_b"), oc, vc, sc)
		ADDQ(U32(x.nv*x.Lanes()*4), oc)
		ADDQ(U32(x.nv*x.Lanes()*t.Size()), vc)
		if t == q8 {
			ADDQ(U8(x.nv*x.Lanes()/32*4), sc)
		}
		SUBQ(U8(x.nv), vecs)
		JMP(LabelRef(lbl("full")))
		Label(lbl("part"))
		if x.IsAVX512() {
			rem := Load(Param("dv"), GP64())
			TESTQ(U32(x.Lanes()-1), rem)
			JNZ(LabelRef(lbl("tail")))
		}
		for nv := x.nv - 1; nv >= 1; nv-- {
			CMPQ(vecs, U8(nv))
			JEQ(LabelRef(lbl(fmt.Sprintf("part%d", nv))))
		}
		asmkit.Ret()
		for nv := x.nv - 1; nv >= 1; nv-- {
			Label(lbl(fmt.Sprintf("part%d", nv)))
			block(rb, nv, false, lbl(fmt.Sprintf("part%d_b", nv)), oc, vc, sc)
			asmkit.Ret()
		}
		if !x.IsAVX512() {
			continue
		}
		// The partial vector after 0..nv−1 whole ones.
		Label(lbl("tail"))
		for nv := x.nv - 1; nv >= 1; nv-- {
			CMPQ(vecs, U8(nv))
			JEQ(LabelRef(lbl(fmt.Sprintf("tail%d", nv))))
		}
		for nv := 0; nv < x.nv; nv++ {
			Label(lbl(fmt.Sprintf("tail%d", nv)))
			block(rb, nv+1, true, lbl(fmt.Sprintf("tail%d_b", nv)), oc, vc, sc)
			asmkit.Ret()
		}
	}
}

// pvBlock emits the product of rb probability rows and every value row
// into nv vectors of output columns at oc (v at vc, Q8 scales at sc); with
// tail, the last vector holds the row's dv mod 16 last columns.
func pvBlock(x *isa, t elemType, rb, nv int, tail bool, lbl string, oc, vc, sc Register) {
	var k Register
	if tail {
		k = pvTailMask()
	}
	acc, ldO := loadOut(x, rb, nv, oc, k)
	pp := Load(Param("p"), GP64())
	ldP, ldP3 := floatStride("ldP")
	ldV := Load(Param("ldV"), GP64())
	var ldS Register
	if t == q8 {
		ldS = GP64()
		MOVQ(ldV, ldS)
		SHRQ(U8(3), ldS) // bytes between two rows' scales
	}
	if t.Shift() > 0 {
		SHLQ(U8(t.Shift()), ldV)
	}
	vp := GP64()
	MOVQ(vc, vp)
	var sp Register
	if t == q8 {
		sp = GP64()
		MOVQ(sc, sp)
	}
	// pf: the same columns ahead bytes further on.
	pf := Load(Param("ahead"), GP64())
	var ps Register // Q8: the scales of pf's row
	if t == q8 {
		ps = GP64()
		MOVQ(pf, ps)
		SARQ(U8(3), ps)
		ADDQ(sp, ps)
	}
	ADDQ(vp, pf)
	j := Load(Param("cols"), GP64())
	Label(lbl)
	for off := 0; off < nv*x.Lanes()*t.Size(); off += 64 {
		PREFETCHT2(Mem{Base: pf, Disp: off})
	}
	if t == q8 {
		PREFETCHT0(Mem{Base: ps})
	}
	vv := make([]VecVirtual, nv)
	for w := range vv {
		vv[w] = x.Vec()
		var m Mem
		if t == q8 {
			m = Mem{Base: sp, Disp: w * x.Lanes() / 32 * 4}
		}
		x.loadVec(t, Mem{Base: vp, Disp: w * x.Lanes() * t.Size()}, m, lastMask(k, w, nv), vv[w])
	}
	for r := 0; r < rb; r++ {
		b := x.Vec()
		VBROADCASTSS(rowAddr(pp, ldP, ldP3, r, 0), b)
		for w := range vv {
			VFMADD231PS(b, vv[w], acc[r][w])
		}
	}
	ADDQ(U8(4), pp)
	ADDQ(ldV, vp)
	ADDQ(ldV, pf)
	if t == q8 {
		ADDQ(ldS, sp)
		ADDQ(ldS, ps)
	}
	DECQ(j)
	JNZ(LabelRef(lbl))
	storeOut(x, acc, oc, ldO, k)
}

// lastMask returns k for the last of nv vectors (w = nv−1) and nil for
// the others.
func lastMask(k Register, w, nv int) Register {
	if w == nv-1 {
		return k
	}
	return nil
}

// loadVec is load, or loadTail where k is not nil.
func (x *isa) loadVec(t elemType, m Mem, sc Mem, k Register, dst VecVirtual) {
	if k != nil {
		x.loadTail(t, m, sc, k, dst)
		return
	}
	x.load(t, m, sc, dst)
}

// loadOut loads rb rows of nv vectors of output at oc (rows ldO floats
// apart) into fresh accumulators, the last vector of each row through the
// opmask k if not nil (its other lanes zero); it returns them with ldO in
// bytes.
func loadOut(x *isa, rb, nv int, oc, k Register) ([][]VecVirtual, Register) {
	ldO := Load(Param("ldO"), GP64())
	SHLQ(U8(2), ldO)
	acc := make([][]VecVirtual, rb)
	or := GP64()
	MOVQ(oc, or)
	for r := range acc {
		acc[r] = make([]VecVirtual, nv)
		for w := range acc[r] {
			acc[r][w] = x.Vec()
			if m := lastMask(k, w, nv); m != nil {
				VMOVUPS_Z(Mem{Base: or, Disp: w * x.Lanes() * 4}, m, acc[r][w])
			} else {
				VMOVUPS(Mem{Base: or, Disp: w * x.Lanes() * 4}, acc[r][w])
			}
		}
		if r+1 < rb {
			ADDQ(ldO, or)
		}
	}
	return acc, ldO
}

// storeOut stores the accumulators back at oc, the last vector of each row
// through the opmask k if not nil; ldO is the row stride in bytes from
// loadOut, or nil to load it again (when keeping it live over the loop
// would take a register the loop needs).
func storeOut(x *isa, acc [][]VecVirtual, oc, ldO, k Register) {
	if ldO == nil {
		ldO = Load(Param("ldO"), GP64())
		SHLQ(U8(2), ldO)
	}
	or := GP64()
	MOVQ(oc, or)
	for r := range acc {
		for w := range acc[r] {
			if m := lastMask(k, w, len(acc[r])); m != nil {
				VMOVUPS(acc[r][w], m, Mem{Base: or, Disp: w * x.Lanes() * 4})
			} else {
				VMOVUPS(acc[r][w], Mem{Base: or, Disp: w * x.Lanes() * 4})
			}
		}
		if r+1 < len(acc) {
			ADDQ(ldO, or)
		}
	}
}

func main() {
	ConstraintExpr("amd64,!purego")
	tailMask = asmkit.Opmask16("rowsMask16", 0)
	fp8Consts = fp8Table()
	for _, x := range []*isa{avx512, avx2} {
		for _, t := range []elemType{f32, f16, bf16, q8, e5m2, e4m3} {
			genQK(x, t)
		}
		for _, t := range []elemType{f16, bf16, q8, e5m2, e4m3} {
			genPV(x, t)
		}
		for _, t := range []elemType{f32, f16, bf16, q8, e5m2, e4m3} {
			genQKGather(x, t)
			genPVGather(x, t)
		}
	}
	for _, gather := range []bool{false, true} {
		genQKDot(gather)
		genQKDotAVX2(gather)
		genQKDotAVXVNNI(gather)
	}
	Generate()
}
