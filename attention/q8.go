package attention

import (
	"fmt"

	"github.com/flashgo/flashgo/kernel"
)

// QuantizeQ8 quantises src to Q8 as llama.cpp's Q8_0 does, block by block
// of Q8Block values: with a the largest |x| of the block, the scale is d =
// a/127 rounded to float32 and each value becomes round(x·(1/d)) (half away
// from zero; 1/d and the product in float32, as Q8_0). So every value is
// within half a step, d/2, of the original (up to the rounding of that
// product), and the largest becomes ±127, which dequantises to 127·d,
// within one float32 ulp of a: never ±Inf, since where 127·d would round
// past MaxFloat32 (a = MaxFloat32) d is the next float32 below a/127.
// Blocks so small that a/127 is subnormal (a < 127·2^−126, about 1.5e−36)
// have a scale of less precision: there d is a/127 rounded up far enough
// that no value exceeds 127.5 steps, each value becomes round(x/d) in
// float64 (at most 127 in magnitude), and each is within d/2 of the
// original. A block of zeros gets scale 0. A NaN or ±Inf in a block makes
// the whole block NaN. It writes len(src) values to dst and
// len(src)/Q8Block scales; len(src) must be a multiple of Q8Block and dst
// and scales at least that long, or it returns an error and writes
// nothing.
func QuantizeQ8(dst []int8, scales []float32, src []float32) error {
	if err := checkQ8Lens("QuantizeQ8", "src", len(src), "dst", len(dst), len(scales)); err != nil {
		return err
	}
	_ = kernel.QuantizeQ8(dst[:len(src)], scales[:len(src)/Q8Block], src) // lengths checked above
	return nil
}

// DequantizeQ8 is QuantizeQ8's inverse: it writes the value each Q8 element
// of src stands for, float32(src[i])·scales[i/Q8Block], to dst[i], exactly
// as the decode kernels dequantise in registers. len(src) must be a
// multiple of Q8Block, dst at least as long and scales at least
// len(src)/Q8Block long, or it returns an error and writes nothing.
func DequantizeQ8(dst []float32, src []int8, scales []float32) error {
	if err := checkQ8Lens("DequantizeQ8", "src", len(src), "dst", len(dst), len(scales)); err != nil {
		return err
	}
	for g, s := range scales[:len(src)/Q8Block] {
		out := dst[g*Q8Block : (g+1)*Q8Block]
		for i, v := range src[g*Q8Block : (g+1)*Q8Block] {
			out[i] = float32(v) * s
		}
	}
	return nil
}

// checkQ8Lens checks the lengths of a conversion of n values between
// float32 and Q8: n whole blocks, an output of at least n and at least
// n/Q8Block scales.
func checkQ8Lens(fn, in string, n int, out string, nOut, nScales int) error {
	switch {
	case n%Q8Block != 0:
		return fmt.Errorf("attention: %s: %s has %d values; want a multiple of Q8Block (%d)", fn, in, n, Q8Block)
	case nOut < n:
		return fmt.Errorf("attention: %s: %s has room for %d values; want >= %d, the length of %s", fn, out, nOut, n, in)
	case nScales < n/Q8Block:
		return fmt.Errorf("attention: %s: %d scales; want >= %d, one per %d values of %s", fn, nScales, n/Q8Block, Q8Block, in)
	}
	return nil
}
