package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The fp8 kernels. An 8-bit float row (E5M2 or E4M3FN) comes with one
// float32 scale for the call (a tensor's or a K/V head's); each vector is
// widened to float32 and multiplied by it, rounded once, as Q8's by its
// block's scale.
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
// 2^8 goes into the scale, once per call: (v·2^−8)·(s·2^8) is the same
// real number as v·s, so the one rounding of the product is the same (the
// Go wrappers leave a scale whose 2^8 multiple would overflow to the
// generic code).

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

// fp8Scale is the vector of the scale of the fp8 kernel being generated
// (times 2^8 for E4M3), set at its start by setupFP8Scale.
var fp8Scale VecVirtual

// setupFP8Scale broadcasts the scale at the pointer argument param into
// fp8Scale.
func (x *isa) setupFP8Scale(t elemType, param string) {
	p := Load(Param(param), GP64())
	s := XMM()
	VMOVSS(Mem{Base: p}, s)
	if t == e4m3 {
		c := GP32()
		MOVL(U32(0x43800000), c) // 256
		f := XMM()
		VMOVD(c, f)
		VMULSS(f, s, s)
	}
	fp8Scale = x.Vec()
	VBROADCASTSS(s, fp8Scale)
}

// widenFP8 converts the vector of t elements at src (memory, or an xmm
// holding them) to float32 lanes in dst, times the scale.
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
	VMULPS(fp8Scale, dst, dst)
}
