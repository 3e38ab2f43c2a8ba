package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The fp8 kernels. An 8-bit float row (E5M2 or E4M3FN) comes with one
// float32 scale for the call (a tensor's or a K/V head's), which never
// costs an instruction per vector: the QK kernels fold the keys' scale
// into the score scale, applied once per sum, and the PV kernels are
// given probabilities already multiplied by the values' scale (the Go
// wrapper, kernel.PVRows, does it once per call). On a decode step the
// FMA units are the bottleneck, and a multiply per vector would take
// their cycles.
//
// E5M2 is the top byte of a binary16: VPMOVZXBW, a shift left by 8 and
// VCVTPH2PS widen it exactly, ±Inf and NaN included.
//
// E4M3FN's exponent and mantissa (bias 7, 3 mantissa bits) line up with a
// binary16's (bias 15, 10 bits) when the magnitude is shifted left by 7:
// that binary16 is the E4M3 value times 2^−8, subnormals included (both
// formats' subnormals step at 2^−bias−mantissa bits, 2^−9 and 2^−17...
// 2^−24·2^7). VPMOVSXBW copies the sign into the high bits, so the shift
// leaves it in bit 15 (and in bit 14, which an AND clears). The pattern
// S.1111.111, NaN in E4M3FN, would come out as ±1.875·2^−8: its words are
// found by comparing the magnitude bits with 0x7f and moved to the
// binary16 quiet NaN of their sign (0x3f80 + 0x3e80 = 0x7e00). The factor
// 2^8 goes into the folded scale: every product and partial sum is 2^−8
// times the exact one's, so the roundings are those of the unscaled sum
// (the Go wrappers leave scales whose 2^8 multiple would leave the normal
// float32 range to the generic code). The PV kernels take E4M3 values
// only through the Go wrapper, which multiplies the probabilities by 2^8
// as well.

// fp8Consts is the table of the E4M3 words: 16 × 0x007f (the magnitude
// bits), 16 × 0x3e80 (what turns 0x3f80 into the NaN 0x7e00), 16 × 0xbfff
// (clearing the sign's copy in bit 14).
var fp8Consts Mem

func fp8Table() Mem {
	m := GLOBL("fp8Words", RODATA|NOPTR)
	for i, w := range []uint16{0x007f, 0x3e80, 0xbfff} {
		for j := range 16 {
			DATA(32*i+2*j, U16(w))
		}
	}
	return m
}

// foldFP8Scale multiplies the score scale in sx by the keys' scale (the
// pointer argument ks), and for E4M3 by 2^8: the QK kernels apply the
// product once to each sum, as the generic code does.
func foldFP8Scale(t elemType, sx Register) {
	p := Load(Param("ks"), GP64())
	ks := XMM()
	VMOVSS(Mem{Base: p}, ks)
	if t == e4m3 {
		c := GP32()
		MOVL(U32(0x43800000), c) // 256
		f := XMM()
		VMOVD(c, f)
		VMULSS(f, ks, ks)
	}
	VMULSS(ks, sx, sx)
}

// widenFP8 converts the vector of t elements at src (memory, or an xmm
// holding them) to float32 lanes in dst: exactly for E5M2, times 2^−8 for
// E4M3.
func (x *isa) widenFP8(t elemType, src Op, dst VecVirtual) {
	var h, n VecVirtual // binary16 words; E4M3's NaN words
	if x.IsAVX512() {
		h, n = YMM(), YMM()
	} else {
		h, n = XMM(), XMM()
	}
	switch t {
	case e5m2:
		VPMOVZXBW(src, h)
		VPSLLW(U8(8), h, h)
	case e4m3:
		c7f, c3e80, cbfff := fp8Consts, fp8Consts.Offset(32), fp8Consts.Offset(64)
		VPMOVSXBW(src, h)
		if x.IsAVX512() {
			VPANDD(c7f, h, n)
			k := K()
			VPCMPEQW(c7f, n, k)
			VPSLLW(U8(7), h, h)
			VPANDD(cbfff, h, h)
			VPADDW(c3e80, h, k, h)
		} else {
			VPAND(c7f, h, n)
			VPCMPEQW(c7f, n, n)
			VPAND(c3e80, n, n)
			VPSLLW(U8(7), h, h)
			VPAND(cbfff, h, h)
			VPADDW(n, h, h)
		}
	}
	VCVTPH2PS(h, dst)
}
