package main

import (
	"fmt"

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
)

// conv is the reference loop's conversion of an element of t.
func conv(t elemType) string {
	switch t {
	case f16:
		return "f16→f32(src[j*ldSrc+k]) (binary16 widened exactly, as VCVTPH2PS does)"
	case bf16:
		return "bf16→f32(src[j*ldSrc+k]) (the bfloat16 bits shifted left by 16)"
	}
	return "src[j*ldSrc+k]"
}

// packName is t's part of a pack kernel's name: none for float32.
func packName(t elemType) string {
	if t == f32 {
		return ""
	}
	return t.Name()
}

// Transposing packs. The panel is produced in blocks of kb keys (16 for
// AVX-512, 8 for AVX2) by cg components (4, or 8 for bfloat16). A block is
// read as 128-bit (64-bit for binary16) row chunks, each inserted into the
// 128-bit lane of a register that belongs to its key: register i holds, in
// lane a, the chunk of key 4a+i. A 4×4 transpose within every 128-bit lane
// (VUNPCKLPS/VUNPCKHPS, then VUNPCKLPD/VUNPCKHPD) then leaves in register c
// the component c of keys 0..kb−1 in order, which is one row of the panel.
// So the cross-lane part of the transpose is done by the loads, and only
// the eight in-lane shuffles per four panel rows use the shuffle port.
//
// binary16 rows are gathered 64 bits at a time into a ymm (xmm for AVX2)
// whose quarter a belongs to key 4a+i and widened with VCVTPH2PS, which puts
// quarter a into lane a. bfloat16 rows are read 8 components at a time:
// shifting each dword left by 16 gives the even components as float32, and
// masking off its low half gives the odd ones, so one load feeds two
// transposes without any conversion shuffle.
//
// Edges: the last block of keys starts at n−kb and the last group of
// components at d−cg, overlapping the one before, which rewrites some panel
// elements with the same values instead of reading or writing past the
// edge. With fewer than kb keys, the one block reads its rows through a
// table of row addresses in which the missing keys repeat the last one,
// and stores under a mask of the keys that exist. A pack with d < cg is
// done element by element.

// transpose4 transposes the 4×4 float32 matrix in each 128-bit lane of
// x[0..3] (lane a of x[i] is row i) and returns the columns.
func transpose4(x [4]Register) [4]Register {
	var t, y [4]Register
	for i := range t {
		t[i] = newVec(x[0])
		y[i] = newVec(x[0])
	}
	VUNPCKLPS(x[1], x[0], t[0])
	VUNPCKHPS(x[1], x[0], t[1])
	VUNPCKLPS(x[3], x[2], t[2])
	VUNPCKHPS(x[3], x[2], t[3])
	VUNPCKLPD(t[2], t[0], y[0])
	VUNPCKHPD(t[2], t[0], y[1])
	VUNPCKLPD(t[3], t[1], y[2])
	VUNPCKHPD(t[3], t[1], y[3])
	return y
}

// newVec returns a new virtual vector register of the size of like.
func newVec(like Register) Register {
	if like.Size() == 64 {
		return ZMM()
	}
	return YMM()
}

// strides holds a row stride in bytes and the multiples that, with the
// scales of an x86 address, reach rows 0..7 from one base register.
type strides struct{ ld, ld3, ld5, ld7 Register }

func newStrides(ld Register, upTo int) strides {
	s := strides{ld: ld}
	s.ld3 = GP64()
	LEAQ(Mem{Base: ld, Index: ld, Scale: 2}, s.ld3)
	if upTo > 4 {
		s.ld5 = GP64()
		LEAQ(Mem{Base: ld, Index: ld, Scale: 4}, s.ld5)
		s.ld7 = GP64()
		LEAQ(Mem{Base: s.ld3, Index: ld, Scale: 4}, s.ld7)
	}
	return s
}

// row returns the address of row r (0..7) from base.
func (s strides) row(base Register, r int) Mem {
	m := Mem{Base: base}
	switch r {
	case 0:
		return m
	case 1, 2, 4:
		return m.Idx(s.ld, uint8(r))
	case 3:
		return m.Idx(s.ld3, 1)
	case 5:
		return m.Idx(s.ld5, 1)
	case 6:
		return m.Idx(s.ld3, 2)
	case 7:
		return m.Idx(s.ld7, 1)
	}
	panic("row out of range")
}

type packKT struct {
	avx512 bool
	t      elemType
	kb, cg int
	kq     [4]Register // AVX-512 binary16: opmasks of qword lane a
	hi     Register    // bfloat16: 0xffff0000 in every dword
	src    strides     // source row stride (bytes) and multiples
	dst    strides     // panel row stride (bytes) and its triple
}

// newX returns the four registers a block is loaded into.
func (p *packKT) newX() [4]Register {
	var x [4]Register
	for i := range x {
		if p.avx512 {
			x[i] = ZMM()
		} else {
			x[i] = YMM()
		}
	}
	return x
}

// load reads a kb×cg block into x: lane a of x[i] receives the chunk of
// key 4a+i, whose address is row(4a+i).
func (p *packKT) load(x [4]Register, row func(r int) Mem) {
	lanes := p.kb / 4
	for a := 0; a < lanes; a++ {
		for i := range x {
			addr := row(4*a + i)
			switch {
			case p.t == f16 && a == 0:
				VMOVQ(addr, x[i].(VecVirtual).AsX())
			case p.t == f16 && p.avx512:
				VPBROADCASTQ(addr, p.kq[a], x[i].(VecVirtual).AsY())
			case p.t == f16:
				q := XMM()
				VPBROADCASTQ(addr, q)
				VPBLENDD(U8(0x0c), q, x[i].(VecVirtual).AsX(), x[i].(VecVirtual).AsX())
			case a == 0:
				VMOVUPS(addr, x[i].(VecVirtual).AsX())
			case p.avx512:
				VINSERTF32X4(U8(a), addr, x[i], x[i])
			default:
				VINSERTF128(U8(a), addr, x[i], x[i])
			}
		}
	}
}

// transform converts and transposes a loaded block (clobbering x) and
// returns its cg panel rows.
func (p *packKT) transform(x [4]Register) []Register {
	var y []Register
	switch p.t {
	case f32:
		t := transpose4(x)
		y = t[:]
	case f16:
		var w [4]Register
		for i := range x {
			w[i] = newVec(x[i])
			if p.avx512 {
				VCVTPH2PS(x[i].(VecVirtual).AsY(), w[i])
			} else {
				VCVTPH2PS(x[i].(VecVirtual).AsX(), w[i])
			}
		}
		t := transpose4(w)
		y = t[:]
	case bf16:
		var odd [4]Register
		for i := range x {
			odd[i] = newVec(x[i])
			if p.avx512 {
				VPANDD(p.hi, x[i], odd[i])
			} else {
				VPAND(p.hi, x[i], odd[i])
			}
			VPSLLD(U8(16), x[i], x[i])
		}
		ye := transpose4(x)
		yo := transpose4(odd)
		for i := range ye {
			y = append(y, ye[i], yo[i])
		}
	}
	return y
}

// store writes panel rows y to consecutive rows from d; mask, when not
// nil, limits the stores to the keys that exist (an opmask for AVX-512, a
// VMASKMOVPS mask for AVX2).
func (p *packKT) store(y []Register, d, mask Register) {
	base := d
	for r := range y {
		if r == 4 {
			base = GP64()
			LEAQ(Mem{Base: d, Index: p.dst.ld, Scale: 4}, base)
		}
		switch {
		case mask == nil:
			VMOVUPS(y[r], p.dst.row(base, r%4))
		case p.avx512:
			VMOVUPS(y[r], mask, p.dst.row(base, r%4))
		default:
			VMASKMOVPS(y[r], mask, p.dst.row(base, r%4))
		}
	}
}

// mainRow returns the row addresser of the main loop: rows 0..7 from rp,
// rows 8..15 from rq.
func (p *packKT) mainRow(rp, rq Register) func(r int) Mem {
	return func(r int) Mem {
		if r >= 8 {
			return p.src.row(rq, r-8)
		}
		return p.src.row(rp, r)
	}
}

// groupLoop emits the loop over the component groups of one block of
// keys, software-pipelined: the loads of the next group are issued before
// the stores of the current one, so that no load waits behind a store to an
// address that matches it in the low 12 bits (4K aliasing). Group i reads
// its chunks through row (from the registers srcs) and stores its panel
// rows from o. Between groups, srcs advance by one group of source bytes
// and o by one group of panel rows; before the last of total groups they
// also step back by backS and backD bytes (0 unless d is not a multiple of
// cg, when the last group overlaps the one before).
func (p *packKT) groupLoop(prefix string, srcs []Register, o Register, total, backS, backD Mem, row func(r int) Mem, mask Register) {
	cnt := GP64()
	MOVQ(total, cnt)
	x := p.newX()
	p.load(x, row)
	Label(prefix + "group")
	y := p.transform(x)
	DECQ(cnt)
	JZ(LabelRef(prefix + "last"))
	for _, r := range srcs {
		ADDQ(U32(p.cg*p.t.Size()), r)
	}
	next := GP64()
	LEAQ(Mem{Base: o, Index: p.dst.ld, Scale: uint8(p.cg)}, next)
	CMPQ(cnt, U32(1))
	JNE(LabelRef(prefix + "load"))
	for _, r := range srcs {
		SUBQ(backS, r)
	}
	SUBQ(backD, next)
	Label(prefix + "load")
	p.load(x, row)
	p.store(y, o, mask)
	MOVQ(next, o)
	JMP(LabelRef(prefix + "group"))
	Label(prefix + "last")
	p.store(y, o, mask)
}

func genPackKT(x *asmkit.ISA, t elemType) {
	avx512 := x.IsAVX512()
	name := asmkit.Export("packKT" + packName(t) + x.Name)
	TEXT(name, NOSPLIT, fmt.Sprintf("func(dst *float32, ldDst int, src %s, ldSrc int, n, d int)", t.GoType()))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s is the %s kernel of PackKT%s: it packs n key rows of d components into a transposed panel,", name, x.Doc,
		map[elemType]string{f32: "", f16: "Float16", bf16: "BFloat16"}[t]),
		"",
		"	for j := 0; j < n; j++ {",
		"		for k := 0; k < d; k++ {",
		"			dst[k*ldDst+j] = "+conv(t),
		"		}",
		"	}",
		"",
		"writing nothing else. ldDst >= n and ldSrc >= d are in elements.")

	p := &packKT{avx512: avx512, t: t, kb: 8, cg: 4}
	if avx512 {
		p.kb = 16
	}
	if t == bf16 {
		p.cg = 8
	}
	es := t.Size()

	dst := Load(Param("dst"), GP64())
	ldD := Load(Param("ldDst"), GP64())
	src := Load(Param("src"), GP64())
	ldS := Load(Param("ldSrc"), GP64())
	n := Load(Param("n"), GP64())
	d := Load(Param("d"), GP64())
	SHLQ(U8(2), ldD)
	SHLQ(U8(t.Shift()), ldS)
	TESTQ(n, n)
	JLE(LabelRef("done"))
	TESTQ(d, d)
	JLE(LabelRef("done"))
	CMPQ(d, U32(p.cg))
	JL(LabelRef("scalar"))

	// Per-call values kept on the stack, to leave the registers to the
	// loops: the start of the last key block, the number of component
	// groups, ceil(d/cg), and how far to step back (in source and panel
	// bytes) for the overlapping last group, 0 if d is a multiple of cg.
	local := AllocLocal(32 + 8*p.kb)
	lastBlock, groups, backS, backD := local.Offset(0), local.Offset(8), local.Offset(16), local.Offset(24)
	rowTable := local.Offset(32) // small n: the address of each key's row
	last := GP64()
	MOVQ(n, last)
	SUBQ(U32(p.kb), last)
	MOVQ(last, lastBlock)
	g := GP64()
	LEAQ(Mem{Base: d, Disp: p.cg - 1}, g)
	SHRQ(U8(log2(p.cg)), g)
	MOVQ(g, groups) // ceil(d/cg), the overlapping last group included
	back := GP64()
	XORQ(back, back)
	ANDQ(U32(p.cg-1), d)
	JE(LabelRef("even"))
	MOVQ(U32(p.cg), back)
	SUBQ(d, back) // cg − d%cg elements
	Label("even")
	bd := GP64()
	MOVQ(back, bd)
	IMULQ(ldD, bd)
	MOVQ(bd, backD)
	SHLQ(U8(t.Shift()), back)
	MOVQ(back, backS)

	if t == f16 && avx512 {
		for a := 1; a < 4; a++ {
			r := GP32()
			MOVL(U32(1<<a), r)
			p.kq[a] = K()
			KMOVW(r, p.kq[a])
		}
	}
	if t == bf16 {
		if avx512 {
			p.hi = ZMM()
			VPTERNLOGD(U8(0xff), p.hi, p.hi, p.hi)
		} else {
			p.hi = YMM()
			VPCMPEQD(p.hi, p.hi, p.hi)
		}
		VPSLLD(U8(16), p.hi, p.hi)
	}
	p.src = newStrides(ldS, 8)
	p.dst = newStrides(ldD, 4)

	CMPQ(n, U32(p.kb))
	JL(LabelRef("small"))

	j := GP64()
	XORQ(j, j)
	Label("block")
	jj := GP64()
	MOVQ(lastBlock, jj)
	CMPQ(j, jj)
	CMOVQLT(j, jj) // jj = min(j, last block)
	rp := GP64()
	MOVQ(jj, rp)
	IMULQ(ldS, rp)
	ADDQ(asmkit.ParamAddr("src"), rp)
	srcs := []Register{rp}
	var rq Register
	if avx512 {
		rq = GP64()
		LEAQ(Mem{Base: rp, Index: ldS, Scale: 8}, rq)
		srcs = append(srcs, rq)
	}
	o := GP64()
	MOVQ(asmkit.ParamAddr("dst"), o)
	LEAQ(Mem{Base: o, Index: jj, Scale: 4}, o)
	p.groupLoop("", srcs, o, groups, backS, backD, p.mainRow(rp, rq), nil)
	CMPQ(j, lastBlock)
	JGE(LabelRef("done"))
	ADDQ(U32(p.kb), j)
	JMP(LabelRef("block"))

	// Fewer than kb keys: one block whose missing keys repeat the last
	// one, read through a table of row addresses, with masked stores.
	Label("small")
	var mask Register
	if avx512 {
		mask = mask16(n)
	} else {
		mask = mask8(n)
	}
	rowp := GP64()
	MOVQ(asmkit.ParamAddr("src"), rowp)
	for r := 0; r < p.kb; r++ {
		MOVQ(rowp, rowTable.Offset(8*r))
		if r < p.kb-1 {
			next := GP64()
			LEAQ(Mem{Base: rowp, Index: ldS, Scale: 1}, next)
			CMPQ(n, U32(r+1))
			CMOVQGT(next, rowp) // advance while row r+1 exists
		}
	}
	off := GP64()
	XORQ(off, off)
	o = GP64()
	MOVQ(asmkit.ParamAddr("dst"), o)
	p.groupLoop("small", []Register{off}, o, groups, backS, backD, func(r int) Mem {
		b := GP64()
		MOVQ(rowTable.Offset(8*r), b)
		return Mem{Base: b, Index: off, Scale: 1}
	}, mask)
	JMP(LabelRef("done"))

	Label("scalar")
	Label("srow")
	s := GP64()
	MOVQ(src, s)
	o = GP64()
	MOVQ(dst, o)
	c := GP64()
	MOVQ(d, c)
	Label("selem")
	t.WidenScalar(s, o)
	ADDQ(U32(es), s)
	ADDQ(ldD, o)
	DECQ(c)
	JNZ(LabelRef("selem"))
	ADDQ(ldS, src)
	ADDQ(U32(4), dst)
	DECQ(n)
	JNZ(LabelRef("srow"))

	Label("done")
	VZEROUPPER()
	RET()
}

func log2(x int) uint8 {
	var l uint8
	for 1<<l < x {
		l++
	}
	return l
}

// Row-major conversion packs: each row is converted 16 (AVX-512) or 8
// (AVX2) elements at a time. AVX-512 finishes a row with an opmask; AVX2,
// which has no masked 16-bit load, converts the last 8 elements of the row
// again (overlapping) and falls back to single elements for d < 8.
func genPackRows(x *asmkit.ISA, t elemType) {
	avx512 := x.IsAVX512()
	name := asmkit.Export("pack" + packName(t) + x.Name)
	TEXT(name, NOSPLIT, "func(dst *float32, ldDst int, src *uint16, ldSrc int, n, d int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s is the %s kernel of Pack%s: it converts n rows of d elements into a row-major float32 panel,", name, x.Doc,
		map[elemType]string{f16: "Float16", bf16: "BFloat16"}[t]),
		"",
		"	for j := 0; j < n; j++ {",
		"		for k := 0; k < d; k++ {",
		"			dst[j*ldDst+k] = "+conv(t),
		"		}",
		"	}",
		"",
		"writing nothing else. ldDst >= d and ldSrc >= d are in elements.")

	dst := Load(Param("dst"), GP64())
	ldD := Load(Param("ldDst"), GP64())
	src := Load(Param("src"), GP64())
	ldS := Load(Param("ldSrc"), GP64())
	n := Load(Param("n"), GP64())
	d := Load(Param("d"), GP64())
	SHLQ(U8(2), ldD)
	SHLQ(U8(1), ldS)
	TESTQ(n, n)
	JLE(LabelRef("done"))
	TESTQ(d, d)
	JLE(LabelRef("done"))

	lanes := x.Lanes()

	var kt Register
	var tailS, tailD Register
	rem := GP64()
	MOVQ(d, rem)
	ANDQ(U32(lanes-1), rem)
	full := GP64()
	MOVQ(d, full)
	if avx512 {
		SHRQ(U8(4), full)
		kt = mask16(rem)
	} else {
		CMPQ(d, U32(8))
		JL(LabelRef("scalar"))
		SHRQ(U8(3), full)
		tailS = GP64()
		LEAQ(Mem{Base: d, Disp: -8}, tailS)
		tailD = GP64()
		MOVQ(tailS, tailD)
		SHLQ(U8(2), tailD)
		SHLQ(U8(1), tailS)
	}

	Label("row")
	s := GP64()
	MOVQ(src, s)
	o := GP64()
	MOVQ(dst, o)
	c := GP64()
	MOVQ(full, c)
	Label("pair")
	CMPQ(c, U32(2))
	JL(LabelRef("chunk"))
	for i := 0; i < 2; i++ {
		z := x.Vec()
		t.Widen(Mem{Base: s}.Offset(2*lanes*i), z)
		VMOVUPS(z, Mem{Base: o}.Offset(4*lanes*i))
	}
	ADDQ(U32(4*lanes), s)
	ADDQ(U32(8*lanes), o)
	SUBQ(U32(2), c)
	JMP(LabelRef("pair"))
	Label("chunk")
	TESTQ(c, c)
	JE(LabelRef("tail"))
	z := x.Vec()
	t.Widen(Mem{Base: s}, z)
	VMOVUPS(z, Mem{Base: o})
	ADDQ(U32(2*lanes), s)
	ADDQ(U32(4*lanes), o)
	Label("tail")
	TESTQ(rem, rem)
	JE(LabelRef("next"))
	if avx512 {
		h := ZMM()
		VMOVDQU16_Z(Mem{Base: s}, kt, h.AsY())
		z = ZMM()
		t.Widen(h.AsY(), z)
		VMOVUPS(z, kt, Mem{Base: o})
	} else {
		z = YMM()
		t.Widen(Mem{Base: src, Index: tailS, Scale: 1}, z)
		VMOVUPS(z, Mem{Base: dst, Index: tailD, Scale: 1})
	}
	Label("next")
	ADDQ(ldS, src)
	ADDQ(ldD, dst)
	DECQ(n)
	JNZ(LabelRef("row"))
	JMP(LabelRef("done"))

	if !avx512 {
		Label("scalar")
		Label("srow")
		s := GP64()
		MOVQ(src, s)
		o := GP64()
		MOVQ(dst, o)
		c := GP64()
		MOVQ(d, c)
		Label("selem")
		t.WidenScalar(s, o)
		ADDQ(U32(2), s)
		ADDQ(U32(4), o)
		DECQ(c)
		JNZ(LabelRef("selem"))
		ADDQ(ldS, src)
		ADDQ(ldD, dst)
		DECQ(n)
		JNZ(LabelRef("srow"))
	}

	Label("done")
	VZEROUPPER()
	RET()
}
