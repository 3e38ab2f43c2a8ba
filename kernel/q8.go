package kernel

import (
	"fmt"
	"math"
)

// QuantizeQ8 quantises src to Q8 as llama.cpp's Q8_0 does, block by block
// of Q8Block values (attention.QuantizeQ8 documents the rounding, which is
// this function's): the scale of a block is its largest |x| over 127, and
// each value becomes its quotient rounded half away from zero, at most
// 127 in magnitude. A binary16 or bfloat16 src is widened exactly to
// float32 first. len(src) must be a multiple of Q8Block, dst at least as
// long and scales at least len(src)/Q8Block long, or it returns an error
// and writes nothing. The avx512 and avx2 levels quantise with vector
// kernels, bit for bit as the Go loop; it does not allocate, and its
// arguments do not escape.
func QuantizeQ8[S EncodeElem](dst []int8, scales []float32, src []S) error {
	n := len(src)
	switch {
	case n%Q8Block != 0:
		return fmt.Errorf("kernel.QuantizeQ8: src has %d values; want a multiple of Q8Block (%d)", n, Q8Block)
	case len(dst) < n:
		return fmt.Errorf("kernel.QuantizeQ8: dst has room for %d values; want >= %d", len(dst), n)
	case len(scales) < n/Q8Block:
		return fmt.Errorf("kernel.QuantizeQ8: %d scales; want >= %d, one per %d values", len(scales), n/Q8Block, Q8Block)
	}
	quantizeQ8(dst[:n], scales[:n/Q8Block], src)
	return nil
}

// quantizeQ8F32 is QuantizeQ8's Go loop, the twin of the vector kernels.
func quantizeQ8F32(dst []int8, scales []float32, src []float32) {
	for g := range scales {
		x := src[g*Q8Block : (g+1)*Q8Block]
		q := dst[g*Q8Block : (g+1)*Q8Block]
		var amax float32
		finite := true
		for _, v := range x {
			if v != v || math.IsInf(float64(v), 0) {
				finite = false
			}
			amax = max(amax, abs32(v))
		}
		switch {
		case !finite:
			scales[g] = float32(math.NaN())
			clear(q)
			continue
		case amax == 0:
			scales[g] = 0
			clear(q)
			continue
		}
		d := amax / 127
		if d < 0x1p-126 { // subnormal (or 0): see QuantizeQ8
			for float64(amax) > 127.5*float64(d) {
				d = math.Nextafter32(d, float32(math.Inf(1)))
			}
			scales[g] = d
			for i, v := range x {
				q[i] = clampQ8(math.Round(float64(v) / float64(d)))
			}
			continue
		}
		if math.IsInf(float64(127*d), 1) { // the largest would dequantise to ±Inf
			d = math.Nextafter32(d, 0)
		}
		id := 1 / d
		scales[g] = d
		for i, v := range x {
			q[i] = clampQ8(math.Round(float64(v * id)))
		}
	}
}

// clampQ8 converts a rounded quotient to int8, at most 127 in magnitude.
func clampQ8(x float64) int8 {
	return int8(max(-127, min(127, x)))
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}
