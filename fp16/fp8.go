package fp16

import "math"

// Float8E4M3 is an OCP 8-bit floating-point value of the E4M3 "FN" variant
// (float8_e4m3fn in PyTorch and vLLM), stored as its bit pattern.
//
// It has 1 sign bit, 4 exponent bits (bias 7) and 3 mantissa bits, and no
// infinities: S.1111.111 is NaN (two patterns, one per sign), every other
// pattern is finite. Normal values are (−1)^s · 2^(e−7) · (1 + m/8) for
// exponent fields e of 1..15, subnormals (−1)^s · 2^−6 · m/8, so the range
// is ±448 and the smallest positive value 2^−9.
type Float8E4M3 uint8

// Float8E5M2 is an OCP 8-bit floating-point value of the E5M2 variant
// (float8_e5m2), stored as its bit pattern.
//
// It has 1 sign bit, 5 exponent bits (bias 15) and 2 mantissa bits and
// follows IEEE 754: an all-ones exponent is ±Inf (mantissa 0) or NaN.
// It is the top byte of a binary16 value, so the range is ±57344 and the
// smallest positive value 2^−16.
type Float8E5M2 uint8

// Largest finite magnitudes of the two formats.
const (
	MaxFloat8E4M3 = 448
	MaxFloat8E5M2 = 57344
)

// f8 describes an 8-bit format for the shared encoder.
type f8 struct {
	mant   uint32 // mantissa bits
	bias   int    // exponent bias
	maxEnc uint32 // bit pattern of the largest finite magnitude
	nan    uint32 // bit pattern of the positive NaN the encoder gives
}

var (
	e4m3 = f8{mant: 3, bias: 7, maxEnc: 0x7e, nan: 0x7f}
	e5m2 = f8{mant: 2, bias: 15, maxEnc: 0x7b, nan: 0x7e}
)

// encode narrows f to the format, rounding to nearest with ties to even
// and saturating: see Float8E4M3FromFloat32.
func (p f8) encode(f float32) uint32 {
	u := math.Float32bits(f)
	sign := u >> 24 & 0x80
	u &= 0x7fffffff
	if u > 0x7f800000 {
		return sign | p.nan
	}
	drop := 23 - p.mant
	// minNorm is the float32 bits of the format's smallest normal value,
	// 2^(1−bias).
	minNorm := uint32(127+1-p.bias) << 23
	var r uint32
	if u < minNorm {
		// Subnormal range: the value in units of the smallest subnormal,
		// 2^(1−bias−mant), rounded to an integer. Scaling by a power of
		// two is exact in float64, and RoundToEven makes the one
		// rounding; a result of 1<<mant is the smallest normal, whose
		// pattern it already is.
		q := math.Ldexp(float64(math.Float32frombits(u)), p.bias-1+int(p.mant))
		r = uint32(math.RoundToEven(q))
	} else {
		// Normal range: round the float32 mantissa to mant bits (adding
		// half an ulp less one, plus the kept LSB, rounds ties to even,
		// and a carry out of the mantissa steps the exponent as it
		// should), then move the exponent to the format's bias. Inf
		// gives a pattern past the largest and saturates below.
		u += 1<<(drop-1) - 1 + (u>>drop)&1
		r = u>>drop - uint32(127-p.bias)<<p.mant
	}
	return sign | min(r, p.maxEnc)
}

// Float8E4M3FromFloat32 converts f to E4M3FN, rounding to nearest with ties
// to even, and saturating: a value whose rounded magnitude would exceed
// 448 (including ±Inf) becomes ±448, as vLLM's fp8 cache writes do
// (CUDA's __NV_SATFINITE conversion, or clamping to ±448 before the
// cast). The rounding is decided with an unbounded exponent first, so
// 464 (the midpoint between 448 and the next value the exponent would
// allow, 480) and everything above it give 448 too. Values below the
// smallest subnormal round through the subnormal range to a zero of f's
// sign. NaN gives NaN with f's sign (S.1111.111). PyTorch's plain cast
// differs only beyond the range: it gives NaN for magnitudes of 480 and
// more.
func Float8E4M3FromFloat32(f float32) Float8E4M3 { return Float8E4M3(e4m3.encode(f)) }

// Float8E5M2FromFloat32 converts f to E5M2, rounding to nearest with ties
// to even, and saturating as Float8E4M3FromFloat32 does: a value whose
// rounded magnitude would exceed 57344 (61440 and above, and ±Inf) becomes
// ±57344 (CUDA's __NV_SATFINITE, as vLLM's fp8 cache writes). NaN gives a
// quiet NaN (S.11111.10) with f's sign. An IEEE cast (PyTorch's) instead
// gives ±Inf beyond the range.
func Float8E5M2FromFloat32(f float32) Float8E5M2 { return Float8E5M2(e5m2.encode(f)) }

// e4m3Values and e5m2Values are the float32 values of every pattern,
// computed once from the bit fields (each exactly representable), so that
// widening is one table lookup: 2 KiB in all, against the branches a
// subnormal or NaN would otherwise cost in the kernels' inner loops.
var e4m3Values, e5m2Values = func() (a, b [256]float32) {
	for i := range 256 {
		s := uint32(i&0x80) << 24
		// E4M3: exponent field 4 bits, mantissa 3.
		e, m := i>>3&0xf, i&7
		switch {
		case e == 0xf && m == 7:
			a[i] = math.Float32frombits(s | 0x7fc00000)
		case e == 0:
			a[i] = math.Float32frombits(s | math.Float32bits(float32(m)*0x1p-9))
		default:
			a[i] = math.Float32frombits(s | uint32(e+120)<<23 | uint32(m)<<20)
		}
		// E5M2: the top byte of a binary16.
		b[i] = Float16(uint16(i) << 8).Float32()
	}
	return a, b
}()

// Float32 returns x widened to float32, which is exact. NaN comes back as
// a quiet float32 NaN of x's sign.
func (x Float8E4M3) Float32() float32 { return e4m3Values[x] }

// Float32 returns x widened to float32, which is exact. ±Inf stays ±Inf;
// NaN comes back as a quiet float32 NaN of x's sign, as binary16's does.
func (x Float8E5M2) Float32() float32 { return e5m2Values[x] }

// Bits returns the bit pattern of x.
func (x Float8E4M3) Bits() uint8 { return uint8(x) }

// Bits returns the bit pattern of x.
func (x Float8E5M2) Bits() uint8 { return uint8(x) }

// IsNaN reports whether x is NaN (S.1111.111).
func (x Float8E4M3) IsNaN() bool { return x&0x7f == 0x7f }

// IsNaN reports whether x is NaN (all-ones exponent, non-zero mantissa).
func (x Float8E5M2) IsNaN() bool { return x&0x7f > 0x7c }

// Float8E4M3Table returns the float32 value of every E4M3FN pattern,
// indexed by the pattern: what Float32 gives, for kernels that widen
// through a lookup.
func Float8E4M3Table() *[256]float32 { return &e4m3Values }

// Float8E5M2Table returns the float32 value of every E5M2 pattern, indexed
// by the pattern, as Float8E4M3Table.
func Float8E5M2Table() *[256]float32 { return &e5m2Values }

// EncodeFloat8E4M3 converts min(len(dst), len(src)) values from src to
// E4M3FN in dst, as [Float8E4M3FromFloat32] does (saturating), and returns
// that count. Like copy, it leaves the rest of dst untouched and never
// allocates.
func EncodeFloat8E4M3(dst []Float8E4M3, src []float32) int {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, f := range src {
		dst[i] = Float8E4M3(e4m3.encode(f))
	}
	return n
}

// EncodeFloat8E5M2 converts min(len(dst), len(src)) values from src to
// E5M2 in dst, as [Float8E5M2FromFloat32] does (saturating), and returns
// that count, as EncodeFloat8E4M3.
func EncodeFloat8E5M2(dst []Float8E5M2, src []float32) int {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, f := range src {
		dst[i] = Float8E5M2(e5m2.encode(f))
	}
	return n
}

// DecodeFloat8E4M3 widens min(len(dst), len(src)) E4M3FN values from src
// into dst, as [Float8E4M3.Float32] does, and returns that count. Like
// copy, it leaves the rest of dst untouched and never allocates.
func DecodeFloat8E4M3(dst []float32, src []Float8E4M3) int {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, x := range src {
		dst[i] = e4m3Values[x]
	}
	return n
}

// DecodeFloat8E5M2 widens min(len(dst), len(src)) E5M2 values from src
// into dst, as [Float8E5M2.Float32] does, and returns that count, as
// DecodeFloat8E4M3.
func DecodeFloat8E5M2(dst []float32, src []Float8E5M2) int {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, x := range src {
		dst[i] = e5m2Values[x]
	}
	return n
}

// Float8E4M3s returns a newly allocated slice holding src converted to
// E4M3FN. It is a convenience for tests and setup code; hot paths should
// reuse a buffer with [EncodeFloat8E4M3].
func Float8E4M3s(src []float32) []Float8E4M3 {
	dst := make([]Float8E4M3, len(src))
	EncodeFloat8E4M3(dst, src)
	return dst
}

// Float8E5M2s returns a newly allocated slice holding src converted to
// E5M2, as Float8E4M3s.
func Float8E5M2s(src []float32) []Float8E5M2 {
	dst := make([]Float8E5M2, len(src))
	EncodeFloat8E5M2(dst, src)
	return dst
}
