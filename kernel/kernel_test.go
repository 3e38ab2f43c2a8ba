package kernel

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/fp16"
)

// Sizes that straddle every vector width (4, 8, 16) and register block.
var testSizes = []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 127, 128, 129}

// near reports whether got is within a float32 dot-product rounding bound
// of the float64 value want, given the sum of the magnitudes of its terms.
func near(got float32, want, mag float64, n int) bool {
	return math.Abs(float64(got)-want) <= 2*float64(n+1)*0x1p-24*mag+1e-30
}

func TestQKT(t *testing.T) { testAllImpls(t, testQKT) }

func testQKT(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, rows := range []int{1, 2, 3, 4, 5, 8, 13} {
		for _, cols := range testSizes {
			for _, d := range []int{1, 3, 8, 17, 64, 129} {
				ldS, ldQ, ldK := cols+3, d+1, cols+2
				sBuf, s := guarded(max(0, (rows-1)*ldS+cols))
				_, q := guarded(max(0, (rows-1)*ldQ+d))
				_, kt := guarded(max(0, (d-1)*ldK+cols))
				fill(rng, q)
				fill(rng, kt)
				// Gaps between rows are NaN so that reading them shows up.
				for i := range rows {
					for k := d; k < ldQ && i*ldQ+k < len(q); k++ {
						q[i*ldQ+k] = float32(math.NaN())
					}
				}
				for k := range d {
					for j := cols; j < ldK && k*ldK+j < len(kt); j++ {
						kt[k*ldK+j] = float32(math.NaN())
					}
				}
				const scale = 0.3
				require.NoError(t, QKT(s, ldS, q, ldQ, kt, ldK, rows, cols, d, scale))
				checkGuards(t, sBuf, "QKT")
				for i := range rows {
					for j := range cols {
						var want, mag float64
						for k := range d {
							p := float64(q[i*ldQ+k]) * float64(kt[k*ldK+j])
							want += p
							mag += math.Abs(p)
						}
						if !near(s[i*ldS+j], scale*want, scale*mag, d) {
							t.Fatalf("QKT rows %d cols %d d %d: s[%d][%d] = %v, want %v", rows, cols, d, i, j, s[i*ldS+j], scale*want)
						}
					}
					for j := cols; j < ldS && i*ldS+j < len(s); j++ {
						require.True(t, math.IsNaN(float64(s[i*ldS+j])), "QKT wrote the gap after row %d", i)
					}
				}
			}
		}
	}
}

func TestPV(t *testing.T) { testAllImpls(t, testPV) }

func testPV(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, rows := range []int{1, 2, 3, 4, 5, 9} {
		for _, cols := range []int{1, 2, 3, 16, 17, 64, 65} {
			for _, d := range testSizes {
				ldO, ldP, ldV := d+2, cols+1, d+3
				oBuf, o := guarded(max(0, (rows-1)*ldO+d))
				_, p := guarded(max(0, (rows-1)*ldP+cols))
				_, v := guarded(max(0, (cols-1)*ldV+d))
				fill(rng, o)
				fill(rng, p)
				fill(rng, v)
				o0 := append([]float32(nil), o...)
				require.NoError(t, PV(o, ldO, p, ldP, v, ldV, rows, cols, d))
				checkGuards(t, oBuf, "PV")
				for i := range rows {
					for k := range d {
						want, mag := float64(o0[i*ldO+k]), math.Abs(float64(o0[i*ldO+k]))
						for j := range cols {
							x := float64(p[i*ldP+j]) * float64(v[j*ldV+k])
							want += x
							mag += math.Abs(x)
						}
						if !near(o[i*ldO+k], want, mag, cols) {
							t.Fatalf("PV rows %d cols %d d %d: o[%d][%d] = %v, want %v", rows, cols, d, i, k, o[i*ldO+k], want)
						}
					}
				}
			}
		}
	}
}

func TestExpAccuracy(t *testing.T) {
	var worst int64
	check := func(x float32) {
		want := float32(math.Exp(float64(x)))
		got := Exp(x)
		if u := ulps(got, want); u > worst {
			worst = u
		}
	}
	// Every float32 in [-1, 0] at a stride, and a dense sweep of [-87.3, 0].
	for x := float32(-87.3); x <= 0; x += 1.0 / 4096 {
		check(x)
	}
	for b := math.Float32bits(-1); b >= math.Float32bits(-0x1p-30); b -= 97 {
		check(math.Float32frombits(b))
	}
	for b := uint32(0); b < 1<<20; b++ {
		check(-math.Float32frombits(b)) // tiny negatives, subnormals included
	}
	check(-87.3)
	t.Logf("Exp: worst error %d ulp on [-87.3, 0]", worst)
	assert.LessOrEqual(t, worst, int64(2))

	assert.Equal(t, float32(1), Exp(0))
	assert.Equal(t, float32(1), Exp(float32(math.Copysign(0, -1))))
	assert.Zero(t, Exp(-87.34))
	assert.Zero(t, Exp(-1000))
	assert.Zero(t, Exp(float32(math.Inf(-1))))
	assert.True(t, math.IsNaN(float64(Exp(float32(math.NaN())))))
	assert.True(t, math.IsInf(float64(Exp(89)), 1))
	assert.True(t, math.IsInf(float64(Exp(float32(math.Inf(1)))), 1))
	assert.InEpsilon(t, math.Exp(float64(float32(88.7))), float64(Exp(88.7)), 1e-6)
	assert.InEpsilon(t, math.Exp(3.5), float64(Exp(3.5)), 1e-6)
	assert.InEpsilon(t, math.Exp(float64(float32(-87.3))), float64(Exp(-87.3)), 1e-6)
}

// TestExp2SoftmaxAccuracy sweeps the arguments of the fused bf16
// softmax's base-2 exponential, [−126, 0] and a few ulp above 0, against
// math.Exp2 rounded to float32 (at most 3 ulp), and its special cases.
func TestExp2SoftmaxAccuracy(t *testing.T) {
	var worst int64
	check := func(x float32) {
		if u := ulps(exp2Softmax(x), float32(math.Exp2(float64(x)))); u > worst {
			worst = u
		}
	}
	for x := float32(-126); x <= 0; x += 1.0 / 4096 {
		check(x)
	}
	for b := math.Float32bits(-1); b >= math.Float32bits(-0x1p-30); b -= 97 {
		check(math.Float32frombits(b))
	}
	for b := uint32(0); b < 1<<16; b++ {
		check(math.Float32frombits(b))  // tiny positives
		check(-math.Float32frombits(b)) // and negatives, subnormals included
	}
	for x := float32(-125.5); x < -125; x += 1.0 / 65536 {
		check(x) // the results near the smallest normal
	}
	t.Logf("exp2Softmax: worst error %d ulp", worst)
	assert.LessOrEqual(t, worst, int64(3))

	assert.Equal(t, float32(1), exp2Softmax(0))
	assert.Equal(t, float32(0.5), exp2Softmax(-1))
	assert.Zero(t, exp2Softmax(-126.0001))
	assert.Zero(t, exp2Softmax(float32(math.Inf(-1))))
	assert.True(t, math.IsNaN(float64(exp2Softmax(float32(math.NaN())))))
}

func TestExpSum(t *testing.T) { testAllImpls(t, testExpSum) }

func testExpSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, n := range testSizes {
		srcBuf, src := guarded(n)
		dstBuf, dst := guarded(n)
		fill(rng, src)
		if n > 2 {
			src[1] = float32(math.Inf(-1))
		}
		const m = 2.5
		sum := ExpSum(dst, src, m)
		checkGuards(t, dstBuf, "ExpSum")
		checkGuards(t, srcBuf, "ExpSum src")
		var want float64
		for i := range n {
			// Implementations may differ from the scalar Exp by 1 ulp
			// (fused multiply-adds in the polynomial).
			require.LessOrEqual(t, ulps(Exp(src[i]-m), dst[i]), int64(1), "element %d of %d", i, n)
			want += float64(dst[i])
		}
		assert.InDelta(t, want, float64(sum), 1e-6*float64(n+1))
		// In place.
		cp := make([]float32, n)
		copy(cp, src)
		sum2 := ExpSum(cp, cp, m)
		assert.Equal(t, dst, cp)
		assert.InDelta(t, float64(sum), float64(sum2), 1e-6*float64(n+1))
	}
	assert.Zero(t, ExpSum(nil, []float32{1}, 0))
	assert.True(t, math.IsNaN(float64(ExpSum(make([]float32, 3), []float32{0, float32(math.NaN()), 0}, 0))))
}

func TestMax(t *testing.T) { testAllImpls(t, testMax) }

func testMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	assert.True(t, math.IsInf(float64(Max(nil)), -1))
	for _, n := range testSizes[1:] {
		_, x := guarded(n)
		fill(rng, x)
		want := x[0]
		for _, v := range x {
			want = max(want, v)
		}
		assert.Equal(t, want, Max(x))
		for _, at := range []int{0, n / 2, n - 1} {
			y := append([]float32(nil), x...)
			y[at] = float32(math.NaN())
			assert.True(t, math.IsNaN(float64(Max(y))), "NaN at %d of %d", at, n)
			y[at] = float32(math.Inf(1))
			assert.True(t, math.IsInf(float64(Max(y)), 1))
		}
		neg := make([]float32, n)
		for i := range neg {
			neg[i] = float32(math.Inf(-1))
		}
		assert.True(t, math.IsInf(float64(Max(neg)), -1))
	}
}

func TestScale(t *testing.T) { testAllImpls(t, testScale) }

func testScale(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, n := range testSizes {
		dstBuf, dst := guarded(n)
		_, src := guarded(n)
		fill(rng, src)
		assert.Equal(t, n, Scale(dst, src, 1.5))
		checkGuards(t, dstBuf, "Scale")
		for i := range n {
			require.Equal(t, 1.5*src[i], dst[i])
		}
		orig := make([]float32, n)
		copy(orig, src)
		Scale(src, src, 2)
		for i := range n {
			require.Equal(t, 2*orig[i], src[i])
		}
	}
	assert.Equal(t, 2, Scale(make([]float32, 2), make([]float32, 5), 1))
}

func TestPack(t *testing.T) { testAllImpls(t, testPack) }

func testPack(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for _, n := range []int{0, 1, 3, 16, 17, 64, 65} {
		for _, d := range testSizes {
			ldSrc, ldT, ldR := d+3, n+5, d+1
			_, src := guarded(max(0, (n-1)*ldSrc+d))
			fill(rng, src)
			h := fp16.Float16s(src)
			bh := fp16.BFloat16s(src)
			tBuf, dstT := guarded(max(0, (d-1)*ldT+n))
			rBuf, dstR := guarded(max(0, (n-1)*ldR+d))
			for _, fn := range []struct {
				name string
				run  func() error
				at   func(j, k int) float32
				rowM bool
			}{
				{"PackKT", func() error { return PackKT(dstT, ldT, src, ldSrc, n, d) }, func(j, k int) float32 { return src[j*ldSrc+k] }, false},
				{"PackKTFloat16", func() error { return PackKTFloat16(dstT, ldT, h, ldSrc, n, d) }, func(j, k int) float32 { return h[j*ldSrc+k].Float32() }, false},
				{"PackKTBFloat16", func() error { return PackKTBFloat16(dstT, ldT, bh, ldSrc, n, d) }, func(j, k int) float32 { return bh[j*ldSrc+k].Float32() }, false},
				{"PackFloat16", func() error { return PackFloat16(dstR, ldR, h, ldSrc, n, d) }, func(j, k int) float32 { return h[j*ldSrc+k].Float32() }, true},
				{"PackBFloat16", func() error { return PackBFloat16(dstR, ldR, bh, ldSrc, n, d) }, func(j, k int) float32 { return bh[j*ldSrc+k].Float32() }, true},
			} {
				require.NoError(t, fn.run(), fn.name)
				if fn.rowM {
					checkGuards(t, rBuf, fn.name)
				} else {
					checkGuards(t, tBuf, fn.name)
				}
				for j := range n {
					for k := range d {
						got := dstT[min(len(dstT)-1, k*ldT+j)]
						if fn.rowM {
							got = dstR[j*ldR+k]
						}
						if want := fn.at(j, k); math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("%s n %d d %d: element (%d, %d) = %v, want %v", fn.name, n, d, j, k, got, want)
						}
					}
				}
			}
		}
	}
}

func TestErrors(t *testing.T) { testAllImpls(t, testErrors) }

func testErrors(t *testing.T) {
	x := make([]float32, 100)
	h := make([]fp16.Float16, 100)
	for _, c := range []struct {
		err  error
		want string
	}{
		{QKT(x, 10, x, 10, x, 10, -1, 1, 1, 1), "kernel.QKT: negative size"},
		{QKT(x[:5], 10, x, 10, x, 10, 2, 10, 4, 1), "kernel.QKT: s has 5 elements; want >= 20"},
		{QKT(x, 5, x, 10, x, 10, 2, 10, 4, 1), "kernel.QKT: leading dimension of s is 5; want >= 10"},
		{QKT(x, 10, x[:3], 10, x, 10, 2, 10, 4, 1), "kernel.QKT: q has 3 elements; want >= 14"},
		{QKT(x, 10, x, 10, x[:30], 10, 2, 10, 4, 1), "kernel.QKT: kt has 30 elements; want >= 40"},
		{PV(x[:10], 10, x, 10, x, 10, 2, 10, 10), "kernel.PV: o has 10 elements; want >= 20"},
		{PV(x, 10, x, 9, x, 10, 2, 10, 10), "kernel.PV: leading dimension of p is 9"},
		{PV(x, 10, x, 10, x[:50], 10, 2, 10, 10), "kernel.PV: v has 50 elements; want >= 100"},
		{PackKT(x[:10], 10, x, 10, 5, 5), "kernel.PackKT: dst has 10 elements; want >= 45"},
		{PackKTFloat16(x, 10, h[:3], 10, 5, 5), "kernel.PackKTFloat16: src has 3 elements; want >= 45"},
		{PackFloat16(x, 3, h, 10, 5, 5), "kernel.PackFloat16: leading dimension of dst is 3"},
		{PackBFloat16(x, 10, nil, 10, -1, 5), "kernel.PackBFloat16: negative size"},
	} {
		require.Error(t, c.err)
		assert.Contains(t, c.err.Error(), c.want)
	}
	require.NoError(t, QKT(nil, 0, nil, 0, nil, 0, 0, 0, 0, 1))
	require.NoError(t, PV(nil, 0, nil, 0, nil, 0, 3, 0, 0))
}

func TestOnlineSoftmax(t *testing.T) { testAllImpls(t, testOnlineSoftmax) }

func testOnlineSoftmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	inf := float32(math.Inf(-1))
	for _, cols := range []int{0, 1, 3, 16, 17, 64} {
		const rows, ldS = 5, 70
		sBuf, s := guarded((rows-1)*ldS + cols)
		fill(rng, s)
		m := []float32{inf, 0.5, 3, inf, float32(math.NaN())}
		z := []float32{0, 2, 1.5, 0, 1}
		if cols > 0 {
			for j := range cols {
				s[3*ldS+j] = inf // row 3 sees nothing yet
			}
		}
		s0 := append([]float32(nil), s...)
		m0, z0 := append([]float32(nil), m...), append([]float32(nil), z...)
		alpha := make([]float32, rows)
		require.NoError(t, OnlineSoftmax(s, ldS, rows, cols, m, z, alpha))
		checkGuards(t, sBuf, "OnlineSoftmax")
		for i := range rows {
			row0 := s0[i*ldS:][:cols]
			mNew := m0[i]
			if cols > 0 {
				mNew = max(m0[i], maxGeneric(row0))
			}
			if mNew == inf {
				assert.Equal(t, float32(1), alpha[i])
				assert.Equal(t, m0[i], m[i])
				assert.Equal(t, z0[i], z[i])
				for j := range cols {
					assert.Zero(t, s[i*ldS+j])
				}
				continue
			}
			if math.IsNaN(float64(mNew)) {
				assert.True(t, math.IsNaN(float64(z[i])), "row %d: z = %v", i, z[i])
				continue
			}
			a := Exp(m0[i] - mNew)
			assert.LessOrEqual(t, ulps(a, alpha[i]), int64(1), "row %d alpha %v, want %v", i, alpha[i], a)
			var sum float64
			for j := range cols {
				want := Exp(row0[j] - mNew)
				require.InDelta(t, want, s[i*ldS+j], 2e-7*float64(want)+1e-30)
				sum += float64(s[i*ldS+j])
			}
			assert.InDelta(t, float64(a)*float64(z0[i])+sum, float64(z[i]), 1e-5*(1+sum))
			assert.Equal(t, mNew, m[i])
		}
	}
	err := OnlineSoftmax(make([]float32, 10), 5, 2, 5, make([]float32, 1), make([]float32, 2), make([]float32, 2))
	assert.ErrorContains(t, err, "kernel.OnlineSoftmax: m, z and alpha have 1, 2 and 2 elements; want >= 2")
}

func TestScaleRows(t *testing.T) { testAllImpls(t, testScaleRows) }

func testScaleRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, d := range testSizes {
		const rows = 4
		ld := d + 3
		oBuf, o := guarded(max(0, (rows-1)*ld+d))
		fill(rng, o)
		o0 := append([]float32(nil), o...)
		alpha := []float32{0.5, 1, 0, float32(math.NaN())}
		require.NoError(t, ScaleRows(o, ld, alpha, rows, d))
		checkGuards(t, oBuf, "ScaleRows")
		for i := range rows {
			for k := range d {
				want := o0[i*ld+k] * alpha[i]
				got := o[i*ld+k]
				if math.Float32bits(got) != math.Float32bits(want) && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
					t.Fatalf("d %d: o[%d][%d] = %v, want %v", d, i, k, got, want)
				}
			}
		}
	}
	assert.ErrorContains(t, ScaleRows(make([]float32, 8), 4, []float32{1}, 2, 4), "alpha has 1 elements; want >= 2")
}

func TestQKTEmptyDot(t *testing.T) {
	s := []float32{7, 7, 7, 7, 7, 7}
	require.NoError(t, QKT(s, 3, nil, 0, nil, 0, 2, 2, 0, 0.5))
	assert.Equal(t, []float32{0, 0, 7, 0, 0, 7}, s)
}

// TestMatMul checks MatMul against its reference loop on odd sizes, with
// strides, under every implementation, and that it is bitwise QKT with
// scale 1 (the kernel it runs on) and bitwise the same when cut into
// column slices of MatMulSlice's width.
func TestMatMul(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(21, 22))
		for _, m := range []int{1, 3, 7, 13} {
			for _, n := range []int{1, 17, 63, 130} {
				for _, k := range []int{0, 1, 5, 33} {
					ldA, ldB, ldC := k+1, n+3, n+2
					a, b := make([]float32, m*ldA), make([]float32, max(k, 1)*ldB)
					fill(rng, a)
					fill(rng, b)
					c := make([]float32, m*ldC)
					require.NoError(t, MatMul(c, ldC, a, ldA, b, ldB, m, n, k))
					for i := range m {
						for j := range n {
							var want float64
							var abs float64
							for t := range k {
								x := float64(a[i*ldA+t]) * float64(b[t*ldB+j])
								want += x
								abs += math.Abs(x)
							}
							require.InDelta(t, want, c[i*ldC+j], 1e-6*(1+abs), "m %d n %d k %d: c[%d][%d]", m, n, k, i, j)
						}
					}
					s := make([]float32, m*ldC)
					require.NoError(t, QKT(s, ldC, a, ldA, b, ldB, m, n, k, 1))
					require.Equal(t, s, c, "MatMul is QKT with scale 1")
					for _, parts := range []int{2, 3, 5} {
						cut := make([]float32, m*ldC)
						step := MatMulSlice(n, parts)
						for c0 := 0; c0 < n; c0 += step {
							require.NoError(t, MatMul(cut[c0:], ldC, a, ldA, b[c0:], ldB, m, min(step, n-c0), k))
						}
						require.Equal(t, c, cut, "MatMul cut into slices of %d columns (MatMulSlice(%d, %d))", step, n, parts)
					}
				}
			}
		}
		err := MatMul(make([]float32, 4), 2, make([]float32, 4), 2, make([]float32, 3), 2, 2, 2, 2)
		require.ErrorContains(t, err, "kernel.MatMul: b has 3 elements")
		require.ErrorContains(t, MatMul(nil, 0, nil, 0, nil, 0, -1, 0, 0), "negative size (m -1")
	})
}
