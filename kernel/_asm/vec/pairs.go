package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
)

// The pair-panel packs of bfloat16 rows (PackKPairs and PackVPairs of
// bfloat16 sources), with AVX-512: bfloat16 values are their own rounding
// to bfloat16 but for canonBF16 (a subnormal becomes a zero of its sign, a
// NaN is quieted), applied to 32 values at a time in registers; the
// panels are then a transpose of 4-byte pairs (K) and an interleave of
// rows (V).

// pairConsts holds, as dwords of two bfloat16 fields: the exponent mask
// (0x7f80), the sign (0x8000), the significand (0x007f) and the quiet bit
// (0x0040); then the two VPERMI2W index vectors of the V interleave.
var pairConsts Mem

const (
	pcExp = 4 * iota
	pcSign
	pcMant
	pcQuiet
	pcIdx = 64 // two vectors of 32 word indexes
)

func pairData() {
	pairConsts = GLOBL("pairconst", RODATA|NOPTR)
	for i, v := range []uint32{0x7f807f80, 0x80008000, 0x007f007f, 0x00400040} {
		DATA(4*i, U32(v))
	}
	// out0 = (r0[0], r1[0], r0[1], r1[1], …, r0[15], r1[15]), out1 the same
	// from column 16: word 2i of outh is r0[16h+i] (index 16h+i of the
	// first table), word 2i+1 is r1[16h+i] (index 32+16h+i, the second).
	for h := range 2 {
		for i := range 16 {
			DATA(pcIdx+64*h+4*i, U16(16*h+i))
			DATA(pcIdx+64*h+4*i+2, U16(32+16*h+i))
		}
	}
}

// canonPairs holds the canonicalisation's constants in registers.
type canonPairs struct {
	exp, sign, mant, quiet, zero VecVirtual
}

func newCanonPairs() *canonPairs {
	c := &canonPairs{exp: ZMM(), sign: ZMM(), mant: ZMM(), quiet: ZMM(), zero: ZMM()}
	VPBROADCASTD(pairConsts.Offset(pcExp), c.exp)
	VPBROADCASTD(pairConsts.Offset(pcSign), c.sign)
	VPBROADCASTD(pairConsts.Offset(pcMant), c.mant)
	VPBROADCASTD(pairConsts.Offset(pcQuiet), c.quiet)
	asmkit.AVX512.ZeroIdiom(c.zero)
	return c
}

// of canonicalises the 32 bfloat16 values of x in place (canonBF16) and
// returns the opmask of those whose exponent is all ones (infinite or
// NaN).
func (c *canonPairs) of(x VecVirtual) Register {
	e := ZMM()
	VPANDD(c.exp, x, e)
	kz, kn, knan := K(), K(), K()
	VPCMPEQW(c.zero, e, kz)       // exponent 0: zero or subnormal
	VPCMPEQW(c.exp, e, kn)        // exponent all ones: infinite or NaN
	VPTESTMW(c.mant, x, kn, knan) // … with a significand: NaN
	t := ZMM()
	VPANDD(c.sign, x, t)
	VMOVDQU16(t, kz, x) // a zero of its sign
	u := ZMM()
	VPORD(c.quiet, x, u)
	VMOVDQU16(u, knan, x) // quieted
	return kn
}

// pairPack begins the pack kernel name: its signature (dst, ldDst, src,
// ldSrc, then rest), its doc (name followed by doc), the four arguments
// loaded, the leading dimensions in bytes, and the canonicalisation's
// constants.
func pairPack(name, rest string, doc ...string) (dst, ldD, src, ldS Register, c *canonPairs) {
	TEXT(name, NOSPLIT, "func(dst *uint16, ldDst int, src *uint16, ldSrc int, "+rest)
	Pragma("noescape")
	doc[0] = name + doc[0]
	Doc(doc...)
	dst = Load(Param("dst"), GP64())
	ldD = Load(Param("ldDst"), GP64())
	src = Load(Param("src"), GP64())
	ldS = Load(Param("ldSrc"), GP64())
	SHLQ(U8(1), ldD)
	SHLQ(U8(1), ldS)
	return dst, ldD, src, ldS, newCanonPairs()
}

// genPackKPairsBF16 emits PackKPairsBF16AVX512: a transpose of 4-byte
// pairs, 16 keys × 16 pairs at a time (16 rows loaded, canonicalised,
// transposed by four rounds of 16 shuffles, 16 rows stored).
func genPackKPairsBF16() {
	dst, ldD, src, ldS, c := pairPack("PackKPairsBF16AVX512", "n, pairs int)",
		" is PackKPairs of bfloat16 keys with AVX-512, for n and pairs",
		"(d/2) positive multiples of 16 (leading dimensions in elements):",
		"",
		"	for j := 0; j < n; j++ {",
		"		for k := 0; k < 2*pairs; k++ {",
		"			dst[(k/2)*ldDst + 2*j + k%2] = canonBF16(src[j*ldSrc + k])",
		"		}",
		"	}",
	)
	n := Load(Param("n"), GP64())
	ld16 := GP64() // 16 source rows, in bytes
	MOVQ(ldS, ld16)
	SHLQ(U8(4), ld16)

	Label("pk_keys") // a block of 16 keys: src at its first row, dst at its first column
	t := Load(Param("pairs"), GP64())
	SHRQ(U8(4), t)
	sp, dp := GP64(), GP64()
	MOVQ(src, sp)
	MOVQ(dst, dp)
	Label("pk_pairs") // 16 pairs of those keys
	var r [16]VecVirtual
	p := GP64()
	MOVQ(sp, p)
	for i := range r {
		r[i] = ZMM()
		VMOVDQU32(Mem{Base: p}, r[i])
		if i < 15 {
			ADDQ(ldS, p)
		}
		c.of(r[i])
	}
	o := transpose16(r)
	MOVQ(dp, p)
	for i := range o {
		VMOVDQU32(o[i], Mem{Base: p})
		if i < 15 {
			ADDQ(ldD, p)
		}
	}
	ADDQ(U8(64), sp) // the next 16 pairs of the keys' rows
	MOVQ(ldD, p)
	SHLQ(U8(4), p)
	ADDQ(p, dp) // the next 16 pair rows
	DECQ(t)
	JNZ(LabelRef("pk_pairs"))
	ADDQ(ld16, src)
	ADDQ(U8(64), dst) // 16 keys' pairs: 64 bytes of a pair row
	SUBQ(U8(16), n)
	JNZ(LabelRef("pk_keys"))
	VZEROUPPER()
	RET()
}

// transpose16 returns the transpose of the 16 × 16 dword matrix whose row
// i is r[i]: unpacks of dwords and of qwords within the 128-bit lanes, then
// two rounds of lane shuffles.
func transpose16(r [16]VecVirtual) [16]VecVirtual {
	var a, b [16]VecVirtual
	for i := 0; i < 16; i += 2 {
		a[i], a[i+1] = ZMM(), ZMM()
		VPUNPCKLDQ(r[i+1], r[i], a[i])
		VPUNPCKHDQ(r[i+1], r[i], a[i+1])
	}
	// Group g (rows 4g..4g+3): b[4g+k] holds, in 128-bit lane L, column
	// 4L+k of the group's four rows.
	for g := range 4 {
		x0, x1, x2, x3 := a[4*g], a[4*g+1], a[4*g+2], a[4*g+3]
		for k, s := range [4][2]VecVirtual{{x0, x2}, {x0, x2}, {x1, x3}, {x1, x3}} {
			b[4*g+k] = ZMM()
			if k%2 == 0 {
				VPUNPCKLQDQ(s[1], s[0], b[4*g+k])
			} else {
				VPUNPCKHQDQ(s[1], s[0], b[4*g+k])
			}
		}
	}
	// Column 4L+k = lane L of b[k], b[4+k], b[8+k], b[12+k].
	var o [16]VecVirtual
	for k := range 4 {
		wlo, whi, xlo, xhi := ZMM(), ZMM(), ZMM(), ZMM()
		VSHUFI32X4(U8(0x88), b[4+k], b[k], wlo) // b[k].L0, b[k].L2, b[4+k].L0, b[4+k].L2
		VSHUFI32X4(U8(0xdd), b[4+k], b[k], whi) // lanes 1 and 3
		VSHUFI32X4(U8(0x88), b[12+k], b[8+k], xlo)
		VSHUFI32X4(U8(0xdd), b[12+k], b[8+k], xhi)
		for L, s := range [4][2]VecVirtual{{wlo, xlo}, {whi, xhi}, {wlo, xlo}, {whi, xhi}} {
			o[4*L+k] = ZMM()
			imm := U8(0x88)
			if L >= 2 {
				imm = U8(0xdd)
			}
			VSHUFI32X4(imm, s[1], s[0], o[4*L+k])
		}
	}
	return o
}

// genPackVPairsBF16 emits PackVPairsBF16AVX512: rows 2t and 2t+1
// interleaved into pair row t, 32 columns at a time (two VPERMI2W).
func genPackVPairsBF16() {
	dst, ldD, src, ldS, c := pairPack("PackVPairsBF16AVX512", "rowPairs, d int) bool",
		" is PackVPairs of bfloat16 values with AVX-512, for rowPairs",
		"(n/2) >= 1 pairs of rows of d columns, d a positive multiple of 32",
		"(leading dimensions in elements), reporting whether every value is",
		"finite:",
		"",
		"	for j := 0; j < 2*rowPairs; j++ {",
		"		for c := 0; c < d; c++ {",
		"			dst[(j/2)*ldDst + 2*c + j%2] = canonBF16(src[j*ldSrc + c])",
		"		}",
		"	}",
	)
	rp := Load(Param("rowPairs"), GP64())
	idx0, idx1 := ZMM(), ZMM()
	VMOVDQU16(pairConsts.Offset(pcIdx), idx0)
	VMOVDQU16(pairConsts.Offset(pcIdx+64), idx1)
	nonFinite := K()
	KXORD(nonFinite, nonFinite, nonFinite)

	Label("pv_rows")
	cols := Load(Param("d"), GP64())
	SHRQ(U8(5), cols)
	r0, r1, dp := GP64(), GP64(), GP64()
	MOVQ(src, r0)
	LEAQ(Mem{Base: src, Index: ldS, Scale: 1}, r1)
	MOVQ(dst, dp)
	Label("pv_cols")
	a, b := ZMM(), ZMM()
	VMOVDQU16(Mem{Base: r0}, a)
	VMOVDQU16(Mem{Base: r1}, b)
	for _, x := range []VecVirtual{a, b} {
		kn := c.of(x)
		KORD(kn, nonFinite, nonFinite)
	}
	for h, idx := range []VecVirtual{idx0, idx1} {
		o := ZMM()
		VMOVDQA64(idx, o)
		VPERMI2W(b, a, o) // index < 32: a (row 2t), else b (row 2t+1)
		VMOVDQU16(o, Mem{Base: dp, Disp: 64 * h})
	}
	ADDQ(U8(64), r0)
	ADDQ(U8(64), r1)
	SUBQ(I8(-128), dp)
	DECQ(cols)
	JNZ(LabelRef("pv_cols"))
	LEAQ(Mem{Base: src, Index: ldS, Scale: 2}, src)
	ADDQ(ldD, dst)
	DECQ(rp)
	JNZ(LabelRef("pv_rows"))
	ok := GP8()
	KORTESTD(nonFinite, nonFinite)
	SETEQ(ok)
	Store(ok, ReturnIndex(0))
	VZEROUPPER()
	RET()
}
