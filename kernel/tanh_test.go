package kernel

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/internal/tier"
)

// TestTanh checks the scalar Tanh, the specification of the SoftCap
// kernels, against math.Tanh rounded to float32: within 1 ulp for every
// 41st non-negative float32 in the fast tier, every fifth in the long
// tier (every one with FLASHGO_TEST_EXHAUSTIVE=1, a minute of one core),
// and odd, so the negative half follows; the special values exactly.
func TestTanh(t *testing.T) {
	step := uint32(41)
	switch {
	case os.Getenv("FLASHGO_TEST_EXHAUSTIVE") == "1":
		step = 1
	case tier.Long():
		step = 5
	}
	var worst int64
	var at float32
	for u := uint32(0); u < 0x7f800000; u += step {
		x := math.Float32frombits(u)
		want := float32(math.Tanh(float64(x)))
		got := Tanh(x)
		if d := ulps(got, want); d > worst {
			worst, at = d, x
		}
		if got != -Tanh(-x) {
			t.Fatalf("Tanh(%v) = %v but Tanh(%v) = %v: want odd", x, got, -x, Tanh(-x))
		}
	}
	t.Logf("worst error %d ulp, at %v (every %d float32s)", worst, at, step)
	require.LessOrEqual(t, worst, int64(1), "at %v", at)

	inf := float32(math.Inf(1))
	assert.Equal(t, float32(1), Tanh(inf))
	assert.Equal(t, float32(-1), Tanh(-inf))
	assert.Equal(t, math.Float32bits(0), math.Float32bits(Tanh(0)))
	assert.Equal(t, math.Float32bits(float32(math.Copysign(0, -1))), math.Float32bits(Tanh(float32(math.Copysign(0, -1)))))
	assert.True(t, math.IsNaN(float64(Tanh(float32(math.NaN())))))
	assert.Equal(t, float32(1), Tanh(math.MaxFloat32))
	assert.Equal(t, float32(0.625), float32(tanhSplit)) // the branch point is a float32
}

func TestSoftCap(t *testing.T) { testAllImpls(t, testSoftCap) }

// testSoftCap checks SoftCap against the scalar twin, element by element,
// on every size of testSizes with guards, in place and not, for caps that
// put the scaled scores on both sides of the branch point, and the special
// values.
func testSoftCap(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range []float32{50, 30, 1, 0.37} {
		inv := 1 / c
		// Spread 2: most vectors have lanes on both sides of the branch
		// point; 0.1: most have every lane below it (the kernels skip the
		// exponential for those).
		for _, spread := range []float64{2, 0.1} {
			for _, n := range testSizes {
				srcBuf, src := guarded(n)
				dstBuf, dst := guarded(n)
				for i := range src {
					src[i] = float32(rng.NormFloat64()*spread) * c
				}
				specials := []float32{0, float32(math.Copysign(0, -1)), inf, -inf, nan, 0.625 * c, -0.625 * c, 1e-30, -1e-30, math.MaxFloat32, -math.MaxFloat32, 9 * c, 44 * c}
				for i := 0; i < n && i < len(specials); i++ {
					src[(i*7)%n] = specials[i]
				}
				orig := append([]float32{}, src...)
				require.Equal(t, n, SoftCap(dst, src, c))
				checkGuards(t, dstBuf, "SoftCap")
				checkGuards(t, srcBuf, "SoftCap src")
				for i := range src {
					require.Equal(t, math.Float32bits(orig[i]), math.Float32bits(src[i]), "src modified at %d", i)
				}
				for i, x := range src {
					want := c * Tanh(x*inv)
					if x != x {
						require.True(t, math.IsNaN(float64(dst[i])), "element %d: SoftCap(NaN) = %v", i, dst[i])
						continue
					}
					// A multiply-add rounded once in hardware may differ by
					// an ulp from the twin's, and the product with c by one
					// more.
					require.LessOrEqual(t, ulps(want, dst[i]), int64(2), "c %v, element %d of %d: SoftCap(%v) = %v, want %v", c, i, n, x, dst[i], want)
					// Against float64.
					w64 := float64(c) * math.Tanh(float64(x)*float64(inv))
					require.InDelta(t, w64, float64(dst[i]), 4e-7*float64(c)+1e-37, "c %v: SoftCap(%v)", c, x)
				}
				// In place.
				cp := append([]float32(nil), src...)
				SoftCap(cp, cp, c)
				for i := range cp {
					if cp[i] != dst[i] && !(cp[i] != cp[i] && dst[i] != dst[i]) {
						t.Fatalf("in place: element %d is %v, want %v", i, cp[i], dst[i])
					}
				}
			}
		}
	}
	assert.Equal(t, 2, SoftCap(make([]float32, 2), make([]float32, 5), 1))
	assert.Zero(t, SoftCap(nil, []float32{1}, 1))
}
