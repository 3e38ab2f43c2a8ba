package fp16_test

import (
	"math"
	"testing"

	"github.com/x448/float16"

	"github.com/flashgo/flashgo/fp16"
)

// bf16Nearest is the bfloat16 bit pattern nearest to the finite float32
// x, ties to the even pattern, found by measuring both neighbours in
// float64: an oracle independent of the bit trick BFloat16FromFloat32 uses.
// Past the largest finite bfloat16 the upper neighbour is +Inf, which
// stands at 2^128 for the purpose of rounding (IEEE 754 overflow).
func bf16Nearest(x float32) uint16 {
	u := math.Float32bits(x)
	lo := u &^ 0xffff
	hi := lo + 0x10000
	if lo == u {
		return uint16(u >> 16)
	}
	sign := 1.0
	if math.Signbit(float64(x)) {
		sign = -1
	}
	loV := math.Abs(float64(math.Float32frombits(lo)))
	hiV := math.Abs(float64(math.Float32frombits(hi)))
	if hi&0x7fffffff == 0x7f800000 {
		hiV = math.Ldexp(1, 128)
	}
	xv := sign * float64(x)
	dLo, dHi := xv-loV, hiV-xv
	switch {
	case dLo < dHi:
		return uint16(lo >> 16)
	case dHi < dLo:
		return uint16(hi >> 16)
	case (lo>>16)&1 == 0:
		return uint16(lo >> 16)
	}
	return uint16(hi >> 16)
}

// FuzzConversions checks float32 → fp16 / bfloat16 → float32 for the bit
// patterns a and b (and their neighbours): fp16 against x448/float16 (round
// to nearest even), bfloat16 against a float64 nearest-even oracle, NaN
// staying NaN, exact widening of every fp16 and bfloat16 pattern in the low
// and high halves of a, monotonicity between a and b, and the slice
// encoders and decoders (which may use SIMD) agreeing with the scalar
// conversions on a vector long enough to have a tail.
func FuzzConversions(f *testing.F) {
	for _, s := range [][2]uint32{
		{0, 0x80000000},
		{0x3f800000, 0x3f800001},          // 1 and its successor
		{0x477fe000, 0x477ff000},          // fp16 max and the tie above it
		{0x7f7fffff, 0x7f7f8000},          // float32 max; bf16 overflow boundary
		{0x7fc00001, 0xff800000},          // NaN with payload; −Inf
		{0x33000000, 0x33000001},          // half the smallest fp16 subnormal (tie to 0) and above
		{0x38800000, 0x387fc000},          // fp16 min normal and the largest subnormal tie
		{0x3f808000, 0x3f818000},          // bf16 ties to even, down and up
		{0x7f800001, 0x00000001},          // signalling NaN; float32 min subnormal
		{0xc77fefff, 0x477ff000 ^ 0x8000}, // just under the negative fp16 overflow tie
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b uint32) {
		xs := []float32{math.Float32frombits(a), math.Float32frombits(b)}
		for _, u := range []uint32{a, b} {
			xs = append(xs, math.Float32frombits(u+1), math.Float32frombits(u-1), math.Float32frombits(u^0x80000000),
				math.Float32frombits(u&^0xfff), math.Float32frombits(u|0xfff), math.Float32frombits(u&^0xffff|0x8000))
		}
		for len(xs) < 37 {
			xs = append(xs, xs[len(xs)%13]*float32(len(xs)))
		}
		h := make([]fp16.Float16, len(xs))
		bf := make([]fp16.BFloat16, len(xs))
		fp16.EncodeFloat16(h, xs)
		fp16.EncodeBFloat16(bf, xs)
		for i, x := range xs {
			got := fp16.FromFloat32(x)
			if h[i] != got {
				t.Fatalf("EncodeFloat16(%#x)[%d] = %#x, FromFloat32 = %#x", math.Float32bits(x), i, h[i].Bits(), got.Bits())
			}
			want := float16.Fromfloat32(x)
			if x != x {
				if !got.IsNaN() || got.Float32() == got.Float32() {
					t.Fatalf("FromFloat32(NaN %#x) = %#x, not NaN", math.Float32bits(x), got.Bits())
				}
			} else if got.Bits() != want.Bits() {
				t.Fatalf("FromFloat32(%v = %#x) = %#x; x448/float16 gives %#x", x, math.Float32bits(x), got.Bits(), want.Bits())
			}
			gb := fp16.BFloat16FromFloat32(x)
			if bf[i] != gb {
				t.Fatalf("EncodeBFloat16(%#x)[%d] = %#x, BFloat16FromFloat32 = %#x", math.Float32bits(x), i, bf[i].Bits(), gb.Bits())
			}
			if x != x {
				if !gb.IsNaN() || gb.Float32() == gb.Float32() {
					t.Fatalf("BFloat16FromFloat32(NaN %#x) = %#x, not NaN", math.Float32bits(x), gb.Bits())
				}
			} else if w := bf16Nearest(x); gb.Bits() != w {
				t.Fatalf("BFloat16FromFloat32(%v = %#x) = %#x; nearest even is %#x", x, math.Float32bits(x), gb.Bits(), w)
			}
		}
		// Widening: every pattern in the halves of a and b, scalar and slice.
		var hs []fp16.Float16
		var bs []fp16.BFloat16
		for _, u := range []uint32{a, b} {
			for _, p := range []uint16{uint16(u), uint16(u >> 16)} {
				hs = append(hs, fp16.Float16(p))
				bs = append(bs, fp16.BFloat16(p))
			}
		}
		hs = append(hs, h...)
		bs = append(bs, bf...)
		wide := make([]float32, len(hs))
		fp16.DecodeFloat16(wide, hs)
		for i, p := range hs {
			got, want := p.Float32(), float16.Frombits(p.Bits()).Float32()
			if want != want {
				if got == got || !p.IsNaN() {
					t.Fatalf("Float16(%#x).Float32() = %v, want NaN", p.Bits(), got)
				}
			} else if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("Float16(%#x).Float32() = %v, want %v", p.Bits(), got, want)
			}
			if math.Float32bits(wide[i]) != math.Float32bits(got) && (got == got || wide[i] == wide[i]) {
				t.Fatalf("DecodeFloat16(%#x)[%d] = %v, Float32 = %v", p.Bits(), i, wide[i], got)
			}
			// Round trip: a non-NaN fp16 value converts back to itself.
			if got == got && fp16.FromFloat32(got) != p {
				t.Fatalf("Float16 %#x → %v → %#x", p.Bits(), got, fp16.FromFloat32(got).Bits())
			}
		}
		wide = make([]float32, len(bs))
		fp16.DecodeBFloat16(wide, bs)
		for i, p := range bs {
			got := p.Float32()
			if want := math.Float32frombits(uint32(p.Bits()) << 16); want != want {
				if got == got || !p.IsNaN() {
					t.Fatalf("BFloat16(%#x).Float32() = %v, want NaN", p.Bits(), got)
				}
			} else if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("BFloat16(%#x).Float32() = %v, want %v", p.Bits(), got, want)
			}
			if math.Float32bits(wide[i]) != math.Float32bits(got) && (got == got || wide[i] == wide[i]) {
				t.Fatalf("DecodeBFloat16(%#x)[%d] = %v, Float32 = %v", p.Bits(), i, wide[i], got)
			}
			if got == got && fp16.BFloat16FromFloat32(got) != p {
				t.Fatalf("BFloat16 %#x → %v → %#x", p.Bits(), got, fp16.BFloat16FromFloat32(got).Bits())
			}
		}
		// Monotonicity: rounding never reverses the order of two values.
		for i, x := range xs {
			for _, y := range xs[i+1:] {
				if x != x || y != y {
					continue
				}
				if x > y {
					x, y = y, x
				}
				if hx, hy := fp16.FromFloat32(x).Float32(), fp16.FromFloat32(y).Float32(); hx > hy {
					t.Fatalf("fp16 not monotone: %v <= %v but %v > %v", x, y, hx, hy)
				}
				if bx, by := fp16.BFloat16FromFloat32(x).Float32(), fp16.BFloat16FromFloat32(y).Float32(); bx > by {
					t.Fatalf("bfloat16 not monotone: %v <= %v but %v > %v", x, y, bx, by)
				}
			}
		}
	})
}
