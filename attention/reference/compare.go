package reference

import (
	"fmt"
	"math"
)

// Errors summarises how far a result is from the oracle.
//
// Every element contributes an absolute difference d = |got − want|, with
// special values handled first: NaN against NaN and an infinity against the
// same-signed infinity count as exact (d = 0), because the oracle defines
// those outcomes (a NaN row, say) and a kernel that reproduces them is right.
// Any other pairing involving NaN or ±Inf is a mismatch with d = +Inf, so it
// can never hide inside a tolerance.
type Errors struct {
	// MaxAbs is the largest d.
	MaxAbs float64
	// MaxRel is the largest d / max(|want|, floor), where floor is 1e-3 times
	// the largest finite |want| of the compared elements. Without the floor,
	// elements whose true value is close to 0 (common: attention outputs are
	// averages of signed values) would turn harmless rounding into huge
	// relative errors. When no finite want is nonzero the floor is 0: an exact element
	// then scores 0 and any difference +Inf.
	MaxRel float64
	// RMS is sqrt(mean d²) over the compared elements (0 when N is 0).
	RMS float64
	// N is the number of elements compared.
	N int
}

// String formats e compactly for test failure messages and logs.
func (e Errors) String() string {
	return fmt.Sprintf("max abs %.3g, max rel %.3g, rms %.3g over %d elements", e.MaxAbs, e.MaxRel, e.RMS, e.N)
}

// Compare measures a float32 result against the float64 oracle.
//
// It never panics: when the lengths differ, only the common prefix is
// compared and N says how many elements that was, so callers that care
// about the length should check N (or the lengths) themselves.
func Compare(got []float32, want []float64) Errors { return compare(got, want) }

// CompareF64 is Compare for float64 results, such as log-sum-exp vectors or
// a second oracle run; the same prefix, floor and NaN/Inf rules apply.
func CompareF64(got, want []float64) Errors { return compare(got, want) }

func compare[T float32 | float64](got []T, want []float64) Errors {
	n := min(len(got), len(want))
	want = want[:n]

	var maxWant float64
	for _, w := range want {
		if a := math.Abs(w); a > maxWant && !math.IsInf(a, 0) { // NaN fails a > maxWant
			maxWant = a
		}
	}
	floor := 1e-3 * maxWant

	e := Errors{N: n}
	var sumSq float64
	for i, w := range want {
		g := float64(got[i])
		var d float64
		switch gNaN, wNaN := math.IsNaN(g), math.IsNaN(w); {
		case gNaN && wNaN:
			d = 0
		case gNaN || wNaN:
			d = math.Inf(1)
		case math.IsInf(g, 0) || math.IsInf(w, 0):
			if g != w {
				d = math.Inf(1)
			}
		default:
			d = math.Abs(g - w)
		}

		var rel float64
		switch {
		case d == 0:
			rel = 0
		case math.IsInf(d, 1):
			rel = d // avoids Inf/Inf = NaN when want itself is infinite
		default:
			// denom is 0 only if every want is 0; a nonzero difference is
			// then infinitely wrong in relative terms.
			if denom := math.Max(math.Abs(w), floor); denom > 0 {
				rel = d / denom
			} else {
				rel = math.Inf(1)
			}
		}

		e.MaxAbs = math.Max(e.MaxAbs, d)
		e.MaxRel = math.Max(e.MaxRel, rel)
		sumSq += d * d
	}
	if n > 0 {
		e.RMS = math.Sqrt(sumSq / float64(n))
	}
	return e
}
