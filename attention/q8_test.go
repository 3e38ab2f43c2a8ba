package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/internal/impltest"
	"github.com/flashgo/flashgo/internal/tier"
)

func TestQuantizeQ8(t *testing.T) {
	rng := rand.New(rand.NewPCG(101, 102))
	x := randn(rng, 4*attention.Q8Block)
	for i := range attention.Q8Block {
		x[attention.Q8Block+i] = 0 // a block of zeros
	}
	x[2*attention.Q8Block+5] = -1e30 // a huge value: the rest round to 0
	q := make([]int8, len(x))
	s := make([]float32, 4)
	require.NoError(t, attention.QuantizeQ8(q, s, x))
	for g := range 4 {
		blk := x[g*attention.Q8Block:][:attention.Q8Block]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		require.Equal(t, amax/127, s[g], "block %d scale", g)
		for i, v := range blk {
			got := float32(q[g*attention.Q8Block+i]) * s[g]
			require.LessOrEqual(t, math.Abs(float64(got-v)), float64(amax)/254*1.0001, "block %d value %d", g, i)
			if math.Abs(float64(v)) == float64(amax) && amax != 0 {
				require.Equal(t, int8(127), max(q[g*attention.Q8Block+i], -q[g*attention.Q8Block+i]))
			}
		}
	}
	q2, s2 := make([]int8, len(x)), make([]float32, 4)
	for _, c := range []struct {
		err  error
		want string
	}{
		{attention.QuantizeQ8(q2, s2, x[:31]), "QuantizeQ8: src has 31 values; want a multiple of Q8Block (32)"},
		{attention.QuantizeQ8(q2[:10], s2, x), "QuantizeQ8: dst has room for 10 values; want >= 128, the length of src"},
		{attention.QuantizeQ8(q2, s2[:3], x), "QuantizeQ8: 3 scales; want >= 4, one per 32 values of src"},
	} {
		require.ErrorContains(t, c.err, c.want)
	}
	require.Equal(t, make([]int8, len(x)), q2, "nothing written on bad input")
	require.Equal(t, make([]float32, 4), s2, "nothing written on bad input")
	x[3] = float32(math.NaN())
	require.NoError(t, attention.QuantizeQ8(q, s, x))
	require.True(t, math.IsNaN(float64(s[0])), "a NaN makes its block NaN")
}

func TestDequantizeQ8(t *testing.T) {
	rng := rand.New(rand.NewPCG(103, 104))
	x := randn(rng, 3*attention.Q8Block)
	q := make([]int8, len(x))
	s := make([]float32, 3)
	require.NoError(t, attention.QuantizeQ8(q, s, x))
	got := make([]float32, len(x)+1)
	got[len(x)] = 7 // past the values: untouched
	require.NoError(t, attention.DequantizeQ8(got, q, s))
	for i, v := range q {
		require.Equal(t, float32(v)*s[i/attention.Q8Block], got[i], "value %d", i)
		require.InDelta(t, x[i], got[i], float64(s[i/attention.Q8Block])/2*1.0001, "value %d", i)
	}
	require.Equal(t, float32(7), got[len(x)])

	clear(got)
	require.ErrorContains(t, attention.DequantizeQ8(got, q[:31], s), "DequantizeQ8: src has 31 values; want a multiple of Q8Block")
	require.ErrorContains(t, attention.DequantizeQ8(got[:10], q, s), "DequantizeQ8: dst has room for 10 values; want >= 96")
	require.ErrorContains(t, attention.DequantizeQ8(got, q, s[:2]), "DequantizeQ8: 2 scales; want >= 3")
	for _, v := range got {
		require.Zero(t, v, "nothing written on bad input")
	}
}

func ExampleDequantizeQ8() {
	x := make([]float32, attention.Q8Block)
	for i := range x {
		x[i] = float32(i) / 4 // 0 .. 7.75
	}
	q := make([]int8, len(x))
	scales := make([]float32, 1)
	if err := attention.QuantizeQ8(q, scales, x); err != nil {
		panic(err)
	}
	back := make([]float32, len(x))
	if err := attention.DequantizeQ8(back, q, scales); err != nil {
		panic(err)
	}
	fmt.Printf("scale %.4f; x[31] %.2f -> %d -> %.2f; x[5] %.2f -> %d -> %.4f\n",
		scales[0], x[31], q[31], back[31], x[5], q[5], back[5])
	// Output: scale 0.0610; x[31] 7.75 -> 127 -> 7.75; x[5] 1.25 -> 20 -> 1.2205
}

func TestQ8TensorErrors(t *testing.T) {
	e := mustEngine(t, attention.Config{})
	q := attention.F32Tensor(make([]float32, 64), attention.BHSD(1, 1, 1, 64))
	out := attention.F32Tensor(make([]float32, 64), attention.BHSD(1, 1, 1, 64))
	good := attention.Q8Tensor(make([]int8, 128), make([]float32, 4), attention.BHSD(1, 1, 2, 64))
	require.NoError(t, e.Forward(out, q, good, good, attention.Options{}))
	shortScales := attention.Q8Tensor(make([]int8, 128), make([]float32, 3), attention.BHSD(1, 1, 2, 64))
	require.ErrorContains(t, e.Forward(out, q, shortScales, good, attention.Options{}), "scales")
	odd := attention.Q8Tensor(make([]int8, 96), make([]float32, 3), attention.BHSD(1, 1, 2, 48))
	q48 := attention.F32Tensor(make([]float32, 48), attention.BHSD(1, 1, 1, 48))
	out48 := attention.F32Tensor(make([]float32, 48), attention.BHSD(1, 1, 1, 48))
	require.ErrorContains(t, e.Forward(out48, q48, odd, odd, attention.Options{}), "multiples of 32")
	_, err := attention.NewKVCache(attention.Q8, 1, 8, 48)
	require.ErrorContains(t, err, "multiple of 32")
	_, err = attention.NewPagedCache(attention.Q8, 1, 48, 16, 4)
	require.ErrorContains(t, err, "multiple of 32")
	// An output over the scales of a Q8 input.
	buf := make([]float32, 64)
	over := attention.Q8Tensor(make([]int8, 128), buf, attention.BHSD(1, 1, 2, 64))
	require.ErrorContains(t, e.Forward(attention.F32Tensor(buf, attention.BHSD(1, 1, 1, 64)), q, over, good, attention.Options{}), "out overlaps k")
	require.ErrorContains(t, e.ForwardLSE(out, buf, q, good, over, attention.Options{}), "lse overlaps v")
	mask := attention.Q8Tensor(make([]int8, 64), make([]float32, 2), attention.BHSD(1, 1, 1, 64))
	require.Equal(t, "q8", attention.Q8.String())
	k := attention.F32Tensor(make([]float32, 64*64), attention.BHSD(1, 1, 64, 64))
	require.ErrorContains(t, e.Forward(out, q, k, k, attention.Options{Mask: mask}), "q8")
}

// TestQuantisationError measures what storing the cache in a smaller type
// costs: a decode step (Hq 8, Hkv 2, d 128, 4096 keys of standard normal
// K and V, Nq 1) over F16, BF16, Q8 and fp8 caches filled from float32, against
// the float64 oracle on the unrounded values. The figures (go test -v -run
// TestQuantisationError ./attention/) are quoted in docs/benchmarks.md; the
// bounds only catch a broken path, they are far above the errors seen.
func TestQuantisationError(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	const hq, hkv, d, n = 8, 2, 128, 4096
	k, v := randn(rng, hkv*n*d), randn(rng, hkv*n*d)
	q := randn(rng, hq*d)
	want, _ := cacheOracle(t, q, k, v, hq, hkv, 1, n, d)
	e := mustEngine(t, attention.Config{})
	for _, c := range []struct {
		dt    attention.DType
		bound float64
		scale float32 // fp8: the K and V scale, mapping about ±7 (E4M3) or ±14 (E5M2) to the largest value
	}{{attention.F32, 1e-5, 0}, {attention.F16, 1e-3, 0}, {attention.BF16, 1e-2, 0}, {attention.Q8, 1e-2, 0},
		{attention.FP8E4M3, 1e-2, 1.0 / 64}, {attention.FP8E5M2, 2e-2, 1.0 / 4096}} {
		cache, err := attention.NewKVCache(c.dt, hkv, n, d)
		if c.scale != 0 {
			cache, err = attention.NewKVCacheFP8(c.dt, hkv, n, d, []float32{c.scale}, []float32{c.scale})
		}
		require.NoError(t, err)
		require.NoError(t, cache.Append(kvRange(k, hkv, n, d, 0, n), kvRange(v, hkv, n, d, 0, n)))
		out := make([]float32, hq*d)
		require.NoError(t, e.Forward(attention.F32Tensor(out, attention.BHSD(1, hq, 1, d)),
			attention.F32Tensor(q, attention.BHSD(1, hq, 1, d)), cache.K(), cache.V(), attention.Options{}))
		errs := reference.Compare(out, want)
		t.Logf("%v cache: %v against the unrounded values", c.dt, errs)
		assert.Less(t, errs.MaxAbs, c.bound, "%v", c.dt)
	}
}

// TestQuantizeQ8Extremes checks QuantizeQ8's promises at the ends of the
// float32 range: the largest magnitude of a block becomes ±127 and
// dequantises to within one ulp of itself (never ±Inf, as MaxFloat32 once
// did), and in blocks whose scale is subnormal every value stays within
// half a step.
func TestQuantizeQ8Extremes(t *testing.T) {
	const B = attention.Q8Block
	check := func(t *testing.T, x []float32) {
		t.Helper()
		q := make([]int8, len(x))
		s := make([]float32, len(x)/B)
		require.NoError(t, attention.QuantizeQ8(q, s, x))
		back := make([]float32, len(x))
		require.NoError(t, attention.DequantizeQ8(back, q, s))
		for g := range s {
			blk := x[g*B : (g+1)*B]
			var a float32
			for _, v := range blk {
				a = max(a, abs32(v))
			}
			d := s[g]
			require.False(t, math.IsInf(float64(d), 0) || d < 0 || d != d, "block %d (max %g): scale %v", g, a, d)
			for i, v := range blk {
				got := back[g*B+i]
				require.False(t, math.IsInf(float64(got), 0), "block %d value %d (%g): dequantised to %v", g, i, v, got)
				if abs32(v) == a && a >= 127*0x1p-126 {
					require.Equal(t, int8(127), max(q[g*B+i], -q[g*B+i]), "block %d: largest %g", g, v)
					require.LessOrEqual(t, impltest.ULPs(got, v), int64(1), "block %d: largest %g dequantised to %g", g, v, got)
				}
				tol := float64(d) * (0.5 + 1e-5)
				if a >= 127*0x1p-126 {
					tol += float64(a) * 0x1p-23 // the rounding of the dequantised value
				}
				require.LessOrEqual(t, math.Abs(float64(got)-float64(v)), tol, "block %d value %d: %g -> %d·%g", g, i, v, q[g*B+i], d)
			}
		}
	}
	maxF := float32(math.MaxFloat32)
	var x []float32
	block := func(vals ...float32) {
		b := make([]float32, B)
		copy(b, vals)
		x = append(x, b...)
	}
	block(maxF, -maxF, maxF/2, 1, -1e38)
	block(-maxF)
	block(math.Nextafter32(maxF, 0), 3e38)
	block(127*0x1p-126, -1e-37, 0x1p-149)
	block(0x1p-149)                      // the smallest subnormal: scale 2^-149, q 1
	block(-0x1p-149, 0x1p-149)           // ±1 step
	block(5e-45, 1e-45, -3e-45)          // a few subnormal steps
	block(1e-40, -7e-41, 3e-41, 1e-45)   // a subnormal scale
	block(1.4e-36, -1e-36, 1e-38, 1e-43) // just under 127·2^-126
	check(t, x)
	q := make([]int8, 2*B)
	s := make([]float32, 2)
	require.NoError(t, attention.QuantizeQ8(q, s, x[:2*B]))
	require.Equal(t, []int8{127, -127}, q[:2])
	require.Equal(t, int8(-127), q[B])
	require.NoError(t, attention.QuantizeQ8(q[:B], s[:1], x[4*B:5*B]))
	require.Equal(t, float32(0x1p-149), s[0])
	require.Equal(t, int8(1), q[0])

	// Random blocks over the whole finite range: a largest magnitude of
	// random bits, the rest fractions of it; the fast tier checks the
	// first 4000 of the long tier's 20000.
	rng := rand.New(rand.NewPCG(143, 144))
	x = x[:0]
	blocks := 20000
	if !tier.Long() {
		blocks = 4000
	}
	for range blocks {
		a := math.Float32frombits(rng.Uint32N(0x7f800000-1) + 1)
		b := make([]float32, B)
		for i := range b {
			b[i] = a * float32(rng.Float64()*2-1)
		}
		b[rng.IntN(B)] = a
		if rng.IntN(2) == 0 {
			b[rng.IntN(B)] = -a
		}
		x = append(x, b...)
	}
	check(t, x)
}

func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }
