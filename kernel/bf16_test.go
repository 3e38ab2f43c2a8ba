package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/internal/impltest"
)

// randBF16 returns a standard normal value from rng rounded to bfloat16.
func randBF16(rng *rand.Rand) fp16.BFloat16 { return RoundBF16(float32(rng.NormFloat64())) }

// randnBF16 returns n normal values from rng of standard deviation scale,
// rounded to bfloat16.
func randnBF16(rng *rand.Rand, n int, scale float64) []fp16.BFloat16 {
	x := make([]fp16.BFloat16, n)
	for i := range x {
		x[i] = RoundBF16(float32(scale * rng.NormFloat64()))
	}
	return x
}

func TestRoundBF16(t *testing.T) {
	for _, c := range []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // tie, even stays
		{0x3f818000, 0x3f82}, // tie, odd rounds up
		{0x3f808001, 0x3f81}, // above the tie
		{0x00400000, 0x0000}, // subnormal: flushed
		{0x80000001, 0x8000}, // negative subnormal: −0
		{0x00800000, 0x0080}, // smallest normal stays
		{0x7f7fffff, 0x7f80}, // rounds up to +Inf
		{0xff800000, 0xff80}, // −Inf
		{0x7f800001, 0x7fc0}, // NaN with payload only in the low half stays NaN
		{0xffc00000, 0xffc0}, // negative quiet NaN
		{math.Float32bits(-2.5), 0xc020},
	} {
		assert.Equal(t, c.want, uint16(RoundBF16(math.Float32frombits(c.in))), "%#08x", c.in)
	}
	// Away from the subnormals it is fp16's conversion.
	rng := rand.New(rand.NewPCG(3, 3))
	for range 10000 {
		x := math.Float32frombits(rng.Uint32())
		if math.Float32bits(x)&0x7f800000 == 0 || x != x {
			continue
		}
		require.Equal(t, fp16.BFloat16FromFloat32(x), RoundBF16(x), "%v", x)
	}
}

func TestPackPairs(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, n := range []int{1, 2, 3, 16, 17, 33, 64} {
		for _, d := range []int{1, 2, 3, 8, 31, 64, 65} {
			testPackPairs[float32](t, rng, n, d)
			testPackPairs[fp16.Float16](t, rng, n, d)
			testPackPairs[fp16.BFloat16](t, rng, n, d)
			testPackPairs[int8](t, rng, n, d)
			testPackPairs[fp16.Float8E4M3](t, rng, n, d)
			testPackPairs[fp16.Float8E5M2](t, rng, n, d)
		}
	}
}

func testPackPairs[T RowElem](t *testing.T, rng *rand.Rand, n, d int) {
	for _, ld := range rowLds[T](d) {
		x := makeRows[T](rng, n, ld, d)
		want := make([]float32, n*d)
		for j := range n {
			for k := range d {
				want[j*d+k] = float32(x.val[j*ld+k]) // exact: each value is a float32
			}
		}
		ldK := 2*n + 3
		kBuf, kp := guardedBF16(((d+1)/2-1)*ldK + 2*n)
		require.NoError(t, PackKPairs(kp, ldK, x.x, x.scales, ld, n, d))
		checkGuardsBF16(t, kBuf, "PackKPairs")
		for j := range n {
			for k := range d + d%2 {
				got := kp[(k/2)*ldK+2*j+k%2]
				w := fp16.BFloat16(0)
				if k < d {
					w = RoundBF16(want[j*d+k])
				}
				require.Equal(t, w, got, "PackKPairs n %d d %d key %d comp %d", n, d, j, k)
			}
		}
		ldV := 2*d + 1
		vBuf, vp := guardedBF16(((n+1)/2-1)*ldV + 2*d)
		finite, err := PackVPairs(vp, ldV, x.x, x.scales, ld, n, d)
		require.NoError(t, err)
		assert.True(t, finite)
		checkGuardsBF16(t, vBuf, "PackVPairs")
		for j := range n + n%2 {
			for c := range d {
				got := vp[(j/2)*ldV+2*c+j%2]
				w := fp16.BFloat16(0)
				if j < n {
					w = RoundBF16(want[j*d+c])
				}
				require.Equal(t, w, got, "PackVPairs n %d d %d key %d comp %d", n, d, j, c)
			}
		}
	}
}

func TestPackVPairsFinite(t *testing.T) {
	v := []float32{1, 2, 3, float32(math.Inf(1)), 5, 6}
	vp := make([]fp16.BFloat16, 2*3*2)
	finite, err := PackVPairs(vp, 6, v, nil, 3, 2, 3)
	require.NoError(t, err)
	assert.False(t, finite)
	v[3] = math.MaxFloat32 // rounds to +Inf in bfloat16
	finite, err = PackVPairs(vp, 6, v, nil, 3, 2, 3)
	require.NoError(t, err)
	assert.False(t, finite)
	v[3] = 4
	finite, err = PackVPairs(vp, 6, v, nil, 3, 2, 3)
	require.NoError(t, err)
	assert.True(t, finite)
}

// bf16Rows, bf16Cols and bf16Dims straddle AMX's 16-row and 16-column
// tiles and 32-element pair blocks, and the 16-lane vectors.
var bf16Rows = []int{1, 2, 3, 5, 15, 16, 17, 33, 65}
var bf16Cols = []int{1, 2, 3, 15, 16, 17, 31, 32, 33, 64, 65}
var bf16Dims = []int{2, 4, 30, 32, 34, 64, 128, 130}

func TestQKTBF16(t *testing.T) { testAllImpls(t, testQKTBF16) }

func testQKTBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, rows := range bf16Rows {
		for _, cols := range bf16Cols {
			for _, d := range bf16Dims {
				ldS, ldQ, ldK := cols+3, d+2, 2*cols+4
				sBuf, s := guarded((rows-1)*ldS + cols)
				_, q := guardedBF16((rows-1)*ldQ + d)
				_, kp := guardedBF16((d/2-1)*ldK + 2*cols)
				for i := range rows {
					for k := range d {
						q[i*ldQ+k] = randBF16(rng)
					}
				}
				for tt := range d / 2 {
					for j := range 2 * cols {
						kp[tt*ldK+j] = randBF16(rng)
					}
				}
				const scale = 0.3
				require.NoError(t, QKTBF16(s, ldS, q, ldQ, kp, ldK, rows, cols, d, scale))
				checkGuards(t, sBuf, "QKTBF16")
				for i := range rows {
					for j := range cols {
						var want, mag float64
						for k := range d {
							p := float64(q[i*ldQ+k].Float32()) * float64(kp[(k/2)*ldK+2*j+k%2].Float32())
							want += p
							mag += math.Abs(p)
						}
						got := s[i*ldS+j]
						require.True(t, near(got, scale*want, scale*mag, d), "rows %d cols %d d %d: s[%d,%d] = %v, want %v", rows, cols, d, i, j, got, scale*want)
					}
				}
			}
		}
	}
}

func TestPVBF16(t *testing.T) { testAllImpls(t, testPVBF16) }

func testPVBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for _, rows := range bf16Rows {
		for _, cols := range []int{2, 4, 16, 30, 32, 34, 64, 66} {
			for _, d := range []int{1, 2, 3, 15, 16, 17, 33, 64, 128, 129} {
				ldO, ldP, ldV := d+1, cols+2, 2*d+6
				oBuf, o := guarded((rows-1)*ldO + d)
				_, p := guardedBF16((rows-1)*ldP + cols)
				_, vp := guardedBF16((cols/2-1)*ldV + 2*d)
				o0 := make([]float32, len(o))
				for i := range rows {
					for c := range d {
						o[i*ldO+c] = float32(rng.NormFloat64())
						o0[i*ldO+c] = o[i*ldO+c]
					}
					for j := range cols {
						p[i*ldP+j] = RoundBF16(rng.Float32())
					}
				}
				for tt := range cols / 2 {
					for c := range 2 * d {
						vp[tt*ldV+c] = randBF16(rng)
					}
				}
				require.NoError(t, PVBF16(o, ldO, p, ldP, vp, ldV, rows, cols, d))
				checkGuards(t, oBuf, "PVBF16")
				for i := range rows {
					for c := range d {
						want, mag := float64(o0[i*ldO+c]), math.Abs(float64(o0[i*ldO+c]))
						for j := range cols {
							x := float64(p[i*ldP+j].Float32()) * float64(vp[(j/2)*ldV+2*c+j%2].Float32())
							want += x
							mag += math.Abs(x)
						}
						got := o[i*ldO+c]
						require.True(t, near(got, want, mag, cols+1), "rows %d cols %d d %d: o[%d,%d] = %v, want %v", rows, cols, d, i, c, got, want)
					}
				}
			}
		}
	}
}

// TestBF16AsmMatchesGeneric checks every bf16 implementation against the
// generic twins on the same operands: the products are exact, so only the
// order of the float32 additions may differ.
func TestBF16AsmMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	testAllImpls(t, func(t *testing.T) {
		for _, rows := range bf16Rows {
			for _, cols := range []int{2, 16, 34, 64} {
				for _, d := range []int{2, 32, 34, 64, 128} {
					q := make([]fp16.BFloat16, rows*d)
					kp := make([]fp16.BFloat16, d/2*2*cols)
					for i := range q {
						q[i] = randBF16(rng)
					}
					for i := range kp {
						kp[i] = randBF16(rng)
					}
					s, want := make([]float32, rows*cols), make([]float32, rows*cols)
					require.NoError(t, QKTBF16(s, cols, q, d, kp, 2*cols, rows, cols, d, 0.125))
					qktBF16Generic(want, cols, q, d, kp, 2*cols, rows, cols, d, 0.125)
					for i := range s {
						require.InDelta(t, want[i], s[i], 1e-5*float64(d), "QKTBF16 rows %d cols %d d %d element %d", rows, cols, d, i)
					}
					p := make([]fp16.BFloat16, rows*cols)
					for i := range p {
						p[i] = RoundBF16(rng.Float32())
					}
					vp := make([]fp16.BFloat16, cols/2*2*d)
					for i := range vp {
						vp[i] = randBF16(rng)
					}
					o, wantO := make([]float32, rows*d), make([]float32, rows*d)
					require.NoError(t, PVBF16(o, d, p, cols, vp, 2*d, rows, cols, d))
					pvBF16Generic(wantO, d, p, cols, vp, 2*d, rows, cols, d)
					for i := range o {
						require.InDelta(t, wantO[i], o[i], 1e-5*float64(cols), "PVBF16 rows %d cols %d d %d element %d", rows, cols, d, i)
					}
				}
			}
		}
	})
}

func TestOnlineSoftmaxBF16(t *testing.T) { testAllImpls(t, testOnlineSoftmaxBF16) }

func testOnlineSoftmaxBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, rows := range []int{1, 2, 3, 5, 16, 17} {
		for _, cols := range testSizes {
			ldS, ldP := cols+1, cols+3
			s := make([]float32, rows*ldS)
			fill(rng, s)
			pBuf, p := guardedBF16(max(0, (rows-1)*ldP+cols))
			m, z, alpha := make([]float32, rows), make([]float32, rows), make([]float32, rows)
			for i := range rows {
				m[i], z[i] = float32(rng.NormFloat64()), rng.Float32()*3
			}
			if rows > 1 {
				m[1] = negInf // a row that has seen nothing yet
				z[1] = 0
			}
			m0, z0 := append([]float32(nil), m...), append([]float32(nil), z...)
			s0 := append([]float32(nil), s...)
			const scale = 1.7
			require.NoError(t, OnlineSoftmaxBF16(s, ldS, p, ldP, rows, cols, scale, m, z, alpha))
			checkGuardsBF16(t, pBuf, "OnlineSoftmaxBF16")
			require.Equal(t, s0, s, "s must not change")
			for i := range rows {
				mx := float64(m0[i])
				for j := range cols {
					mx = math.Max(mx, scale*float64(s0[i*ldS+j]))
				}
				if math.IsInf(mx, -1) {
					assert.Equal(t, float32(1), alpha[i])
					continue
				}
				require.InDelta(t, mx, float64(m[i]), 1e-6*math.Abs(mx)+1e-30, "rows %d cols %d row %d: m", rows, cols, i)
				// The exact exponentials of the arguments the level forms:
				// e^(m0 − m) and e^(scale·x − m), or with the fused kernel
				// 2^((m0 − m)·log2e) and 2^((scale·x − m)·log2e), the
				// arguments rounded to float32 as softmaxBF16Base2 rounds
				// them (alpha's wholly: an ulp of an argument near 10 is
				// 4·10⁻⁷ of the result).
				exp := func(x float32) float64 { return math.Exp(float64(scale*x) - float64(m[i])) }
				a := math.Exp(float64(m0[i]) - float64(m[i]))
				if cur.bf16.softmax != nil && cols > 0 {
					exp = func(x float32) float64 { return math.Exp2(float64(float32(float32(scale*x)-m[i]) * expLog2e)) }
					a = math.Exp2(float64(float32(m0[i]-m[i]) * expLog2e))
				}
				require.InDelta(t, a, float64(alpha[i]), 4e-7*a+1e-30, "alpha")
				sum := a * float64(z0[i])
				for j := range cols {
					e := exp(s0[i*ldS+j])
					sum += e
					got := float64(p[i*ldP+j].Float32())
					require.InDelta(t, e, got, 1.0/256*e+1e-30, "rows %d cols %d: p[%d,%d]", rows, cols, i, j)
				}
				require.InDelta(t, sum, float64(z[i]), 1e-6*sum*float64(cols+2), "rows %d cols %d row %d: z", rows, cols, i)
			}
		}
	}
}

func TestBF16Errors(t *testing.T) {
	s := make([]float32, 64)
	b := make([]fp16.BFloat16, 64)
	assert.ErrorContains(t, QKTBF16(s, 4, b, 4, b, 8, 2, 4, 3, 1), "d is 3; want an even number")
	assert.ErrorContains(t, QKTBF16(s, 4, b, 4, b, 7, 2, 4, 4, 1), "leading dimension of kp is 7; want >= 8")
	assert.ErrorContains(t, PVBF16(s, 4, b, 4, b, 8, 2, 3, 4), "cols is 3; want an even number")
	assert.ErrorContains(t, PVBF16(s, 4, b, 4, b[:10], 8, 2, 4, 4), "vp has 10 elements; want >= 16")
	_, err := PackVPairs(b, 3, s, nil, 4, 2, 4)
	assert.ErrorContains(t, err, "leading dimension of dst is 3; want >= 8")
	assert.ErrorContains(t, PackKPairs(b, 8, s, nil, 2, 2, 4), "leading dimension of src is 2; want >= 4")
	assert.ErrorContains(t, OnlineSoftmaxBF16(s, 4, b, 4, 2, 4, 1, s[:1], s, s), "m, z and alpha have 1, 64 and 64 elements; want >= 2")
	assert.ErrorContains(t, RoundRowsBF16(b, 4, s, 4, -1, 4), "negative size")
}

// TestRoundRowsBF16 checks the row rounding of every implementation
// (VCVTNEPS2BF16 where the level has AVX512-BF16) bit for bit against
// RoundBF16, on random bit patterns (NaNs, infinities and subnormals
// included) and on every tail length, with guards around each row.
func TestRoundRowsBF16(t *testing.T) { testAllImpls(t, testRoundRowsBF16) }

func testRoundRowsBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	specials := []uint32{0, 0x80000000, 0x00000001, 0x807fffff, 0x00800000, 0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000,
		0x7f800001, 0xffc00001, 0x3f808000, 0x3f818000, 0x3f7fffff, 0x477fe000}
	for _, rows := range []int{1, 3} {
		for d := 1; d <= 70; d++ {
			ldS, ldD := d+2, d+3
			src := make([]float32, (rows-1)*ldS+d)
			for i := range src {
				if rng.IntN(4) == 0 {
					src[i] = math.Float32frombits(specials[rng.IntN(len(specials))])
				} else {
					src[i] = math.Float32frombits(rng.Uint32())
				}
			}
			buf, dst := guardedBF16((rows-1)*ldD + d)
			require.NoError(t, RoundRowsBF16(dst, ldD, src, ldS, rows, d))
			checkGuardsBF16(t, buf, "RoundRowsBF16")
			for i := range rows {
				for k := range d {
					x := src[i*ldS+k]
					require.Equal(t, RoundBF16(x), dst[i*ldD+k], "rows %d d %d [%d,%d] %#08x", rows, d, i, k, math.Float32bits(x))
				}
				for k := d; k < ldD && i < rows-1; k++ {
					require.Equal(t, fp16.BFloat16(0x7fc0), dst[i*ldD+k], "gap between rows written")
				}
			}
		}
	}
}

// softmaxTwin returns the Go twin of the current level's OnlineSoftmaxBF16
// for scale sc: softmaxBF16Base2 where the fused kernel computes it,
// otherwise softmaxBF16Generic.
func softmaxTwin(sc float32) func(s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols int, scale float32, m, z, alpha []float32) {
	if cur.bf16.softmax != nil && sc > 0 && sc <= math.MaxFloat32 {
		return softmaxBF16Base2
	}
	return softmaxBF16Generic
}

// TestSoftmaxBF16MatchesGeneric checks the implementations' fused softmax
// against its Go twin (softmaxTwin) on the same tile: maxima equal, rescale factors
// within a float32 ulp, probabilities within one bfloat16 ulp (the vector exponential may
// differ from the scalar one by a float32 ulp), sums within float32
// rounding; and the non-positive scales that go to the twin.
func TestSoftmaxBF16MatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	testAllImpls(t, func(t *testing.T) {
		for _, cols := range []int{1, 15, 16, 17, 64, 255, 256, 257, 600} {
			for _, sc := range []float32{0.125, 1, -0.5} {
				rows := 5
				s := make([]float32, rows*cols)
				fill(rng, s)
				s[0] = negInf
				if cols > 3 {
					s[cols+2] = 40 // a large score in row 1
				}
				m0 := []float32{negInf, 0.5, negInf, 3, -1}
				z0 := []float32{0, 2, 0, 1.5, 0.25}
				p, pw := make([]fp16.BFloat16, rows*cols), make([]fp16.BFloat16, rows*cols)
				m, z, a := append([]float32(nil), m0...), append([]float32(nil), z0...), make([]float32, rows)
				mw, zw, aw := append([]float32(nil), m0...), append([]float32(nil), z0...), make([]float32, rows)
				require.NoError(t, OnlineSoftmaxBF16(s, cols, p, cols, rows, cols, sc, m, z, a))
				softmaxTwin(sc)(s, cols, pw, cols, rows, cols, sc, mw, zw, aw)
				assert.Equal(t, mw, m, "cols %d scale %v: m", cols, sc)
				for i := range a {
					// One vector exponential for all rows: within an ulp.
					assert.LessOrEqual(t, ulps(aw[i], a[i]), int64(1), "cols %d scale %v: alpha[%d] %v, want %v", cols, sc, i, a[i], aw[i])
				}
				for i := range z {
					assert.InDelta(t, zw[i], z[i], 1e-6*float64(cols)*float64(zw[i]), "cols %d scale %v: z[%d]", cols, sc, i)
				}
				for i := range p {
					d := int(p[i]) - int(pw[i])
					require.True(t, d >= -1 && d <= 1, "cols %d scale %v: p[%d] %#04x, want %#04x", cols, sc, i, p[i], pw[i])
				}
			}
		}
	})
}

// bf16SoftmaxFunc is the signature of OnlineSoftmaxBF16's loops.
type bf16SoftmaxFunc func(s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols int, scale float32, m, z, alpha []float32)

// TestSoftmaxBF16HugeLogits checks that the maximum of a row gets the
// weight 1 exactly, and the row's sum and rescale factor are what the
// scores say, whatever their magnitude (the doc's promise: logits of any
// finite magnitude are safe): scaled maxima from 10³ to float32's largest,
// of both signs, under several scales, in the fused kernel's Go twin
// (softmaxBF16Base2, which the levels with the fused kernel are checked
// against) and in every implementation's OnlineSoftmaxBF16. Each row holds
// its maximum twice and keys below it, and the tile is folded twice, so
// that the second fold meets its maximum as the running one (alpha 1).
func TestSoftmaxBF16HugeLogits(t *testing.T) {
	checkHugeLogits(t, "softmaxBF16Base2", softmaxBF16Base2)
	testAllImpls(t, func(t *testing.T) {
		checkHugeLogits(t, "OnlineSoftmaxBF16", func(s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols int, scale float32, m, z, alpha []float32) {
			require.NoError(t, OnlineSoftmaxBF16(s, ldS, p, ldP, rows, cols, scale, m, z, alpha))
		})
	})
}

func checkHugeLogits(t *testing.T, name string, softmax bf16SoftmaxFunc) {
	t.Helper()
	const cols = 37 // two vectors and a tail
	for _, mag := range []float32{1e3, 5.7e4, 3e5, 1e6, 1.5e9, 2e9, 3e9, 1e10, 1e20, math.MaxFloat32} {
		for _, sign := range []float32{1, -1} {
			for _, scale := range []float32{1, 0.125, 0.3} {
				x := sign * mag
				s := make([]float32, cols)
				want := 2.0 // the two maxima; the others below
				mx := float64(scale * x)
				for j := range s {
					// Keys below x by j·2⁻¹² of its magnitude: their weights
					// are 0 but for the smallest magnitudes.
					s[j] = x - float32(j)*mag/4096
					want += math.Exp(float64(scale*s[j]) - mx)
				}
				want -= 1 // s[0] = x, counted in the two
				s[cols-1] = x
				want -= math.Exp(float64(scale*(x-float32(cols-1)*mag/4096)) - mx)
				p := make([]fp16.BFloat16, cols)
				m, z, alpha := []float32{negInf}, []float32{0}, []float32{0}
				what := fmt.Sprintf("%s: logit %v (score %v, scale %v)", name, scale*x, x, scale)
				for fold := 1; fold <= 2; fold++ {
					softmax(s, cols, p, cols, 1, cols, scale, m, z, alpha)
					require.Equal(t, scale*x, m[0], "%s, fold %d: m", what, fold)
					require.Equal(t, fp16.BFloat16(0x3f80), p[0], "%s, fold %d: the maximum's probability is %v; want 1", what, fold, p[0].Float32())
					require.Equal(t, fp16.BFloat16(0x3f80), p[cols-1], "%s, fold %d: the maximum's probability", what, fold)
					if fold == 1 {
						require.Zero(t, alpha[0], "%s: alpha of a row that had seen nothing", what)
					} else {
						require.Equal(t, float32(1), alpha[0], "%s: alpha under the same maximum", what)
					}
					require.InDelta(t, float64(fold)*want, float64(z[0]), 4e-6*want*float64(fold), "%s, fold %d: z", what, fold)
				}
			}
		}
	}
}

// TestSoftmaxBF16NaN checks the special rows of the fused softmax of every
// implementation: a NaN score (at every position of rows of several widths,
// and one that only the scale makes: +Inf times 0) makes the row's maximum,
// rescale factor, sum and every probability NaN, as in the loop; a NaN
// running maximum does the same; a row whose scores and maximum are all −Inf
// gets zero probabilities and alpha 1 and keeps its m and z; and the other
// rows are those of the generic twin.
func TestSoftmaxBF16NaN(t *testing.T) {
	nan := float32(math.NaN())
	isNaN := func(b fp16.BFloat16) bool { return b&0x7f80 == 0x7f80 && b&0x7f != 0 }
	testAllImpls(t, func(t *testing.T) {
		for _, cols := range []int{1, 16, 17, 64, 65, 100} {
			for pos := 0; pos < cols; pos += 1 + cols/7 {
				for _, sc := range []float32{0.5, float32(math.Inf(1))} {
					const rows = 4
					s := make([]float32, rows*cols)
					for i := range s {
						s[i] = float32(i%13) - 6
					}
					if sc > 1 {
						s[pos] = 0 // +Inf · 0 = NaN
						for i := range cols {
							s[3*cols+i] = negInf
						}
					} else {
						s[pos] = nan
						for i := range cols {
							s[3*cols+i] = negInf
						}
					}
					m := []float32{0.5, 1, nan, negInf}
					z := []float32{1, 2, 3, 4}
					a := make([]float32, rows)
					p := make([]fp16.BFloat16, rows*cols)
					for i := range p {
						p[i] = 0x1234
					}
					require.NoError(t, OnlineSoftmaxBF16(s, cols, p, cols, rows, cols, sc, m, z, a))
					for _, i := range []int{0, 2} {
						assert.True(t, m[i] != m[i] && a[i] != a[i] && z[i] != z[i], "cols %d pos %d scale %v row %d: m %v alpha %v z %v, want NaN", cols, pos, sc, i, m[i], a[i], z[i])
						for j := range cols {
							require.True(t, isNaN(p[i*cols+j]), "cols %d pos %d row %d: p[%d] %#04x, want NaN", cols, pos, i, j, p[i*cols+j])
						}
					}
					if sc > 1 {
						continue // row 1's scaled scores are ±Inf
					}
					mw, zw, aw := []float32{1}, []float32{2}, []float32{0}
					pw := make([]fp16.BFloat16, cols)
					softmaxTwin(sc)(s[cols:], cols, pw, cols, 1, cols, sc, mw, zw, aw)
					assert.Equal(t, mw[0], m[1])
					assert.LessOrEqual(t, ulps(aw[0], a[1]), int64(1))
					assert.InDelta(t, zw[0], z[1], 1e-6*float64(cols)*float64(zw[0]))
					for j := range cols {
						d := int(p[cols+j]) - int(pw[j])
						require.True(t, d >= -1 && d <= 1, "cols %d row 1: p[%d] %#04x, want %#04x", cols, j, p[cols+j], pw[j])
					}
					assert.Equal(t, []float32{negInf, 4, 1}, []float32{m[3], z[3], a[3]}, "row 3: m, z, alpha")
					assert.Equal(t, make([]fp16.BFloat16, cols), p[3*cols:], "row 3: p")
				}
			}
		}
	})
}

// TestCanonBF16 checks the packs' shortcut for bfloat16 sources against
// RoundBF16 of every bfloat16 bit pattern, and the packs on a row of
// special values.
func TestCanonBF16(t *testing.T) {
	for b := range 1 << 16 {
		x := fp16.BFloat16(b)
		require.Equal(t, RoundBF16(x.Float32()), canonBF16(x), "%#04x", b)
	}
	row := []fp16.BFloat16{0x0001, 0x8040, 0x7f81, 0xff80, 0x3f80, 0x0000, 0x7f80}
	want := make([]fp16.BFloat16, len(row))
	for i, x := range row {
		want[i] = RoundBF16(x.Float32())
	}
	kp := make([]fp16.BFloat16, 4*2)
	require.NoError(t, PackKPairs(kp, 2, row, nil, len(row), 1, len(row)))
	assert.Equal(t, append(append([]fp16.BFloat16(nil), want...), 0), kp)
	vp := make([]fp16.BFloat16, 2*len(row))
	finite, err := PackVPairs(vp, 2*len(row), row, nil, len(row), 1, len(row))
	require.NoError(t, err)
	assert.False(t, finite)
	for c := range row {
		assert.Equal(t, want[c], vp[2*c])
		assert.Equal(t, fp16.BFloat16(0), vp[2*c+1])
	}
}

// guardedPanel returns a panel of size bfloat16 guards shift elements
// into the middle of a buffer of GuardedBF16's layout (size + 1 elements
// between Pad guards): shifts 0 and 1 put it on and off a 4-byte boundary.
func guardedPanel(size, shift int) *impltest.Block[fp16.BFloat16] {
	return impltest.NewBlock(1, size, size, pad+shift, pad+1-shift, impltest.GuardBF16)
}

// TestPackKPairsBF16Bits packs bfloat16 keys of random bits (zeros,
// subnormals, infinities, NaNs of both kinds among them) with even and odd
// strides and with the panel on and off 4-byte boundaries, so that both
// the pair-at-a-time path and the element path run, and checks every
// element against RoundBF16 of the key's value.
func TestPackKPairsBF16Bits(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	specials := []fp16.BFloat16{0, 0x8000, 0x0001, 0x807f, 0x7f80, 0xff80, 0x7f81, 0xffc1, 0x7fc0, 0x0080, 0x7f7f}
	for _, n := range []int{1, 15, 16, 17, 40} {
		for _, d := range []int{1, 2, 6, 64, 65} {
			for _, ldSrc := range []int{d, d + 1, d + 2} {
				for _, ldDst := range []int{2 * n, 2*n + 1, 2*n + 32} {
					for _, shift := range []int{0, 1} {
						src := make([]fp16.BFloat16, (n-1)*ldSrc+d)
						for i := range src {
							if rng.IntN(4) == 0 {
								src[i] = specials[rng.IntN(len(specials))]
							} else {
								src[i] = fp16.BFloat16(rng.Uint32())
							}
						}
						size := ((d+1)/2-1)*ldDst + 2*n
						panel := guardedPanel(size, shift)
						dst := panel.S()
						require.NoError(t, PackKPairs(dst, ldDst, src, nil, ldSrc, n, d))
						panel.CheckOutside(t, "PackKPairs panel")
						for j := range n {
							for k := range d + d%2 {
								want := fp16.BFloat16(0)
								if k < d {
									want = RoundBF16(src[j*ldSrc+k].Float32())
								}
								got := dst[(k/2)*ldDst+2*j+k%2]
								require.Equal(t, want, got, "n %d d %d ldSrc %d ldDst %d shift %d: key %d comp %d of %#04x", n, d, ldSrc, ldDst, shift, j, k, uint16(src[min(j*ldSrc+k, len(src)-1)]))
							}
						}
					}
				}
			}
		}
	}
}

// TestOnlineSoftmaxBF16TrailingMasked checks the property attention's
// trimmed tiles rely on: a row whose columns from some multiple of 64 on
// are all −Inf gives bitwise the same maxima, sums, factors and
// probabilities when those columns are left out, whatever the width of
// the untrimmed tile.
func TestOnlineSoftmaxBF16TrailingMasked(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(9, 9))
		const rows = 3
		for _, cols := range []int{64, 65, 100, 128, 191, 200, 256} {
			for short := 64; short < cols; short += 64 {
				s := make([]float32, rows*cols)
				fill(rng, s)
				for i := range rows {
					for j := short; j < cols; j++ {
						s[i*cols+j] = negInf
					}
				}
				run := func(w int) ([]fp16.BFloat16, []float32) {
					p := make([]fp16.BFloat16, rows*cols)
					m, z, alpha := []float32{0.5, negInf, 2}, []float32{1.5, 0, 0.25}, make([]float32, rows)
					require.NoError(t, OnlineSoftmaxBF16(s, cols, p, cols, rows, w, 0.7, m, z, alpha))
					for i := range rows {
						clear(p[i*cols+short : i*cols+cols])
					}
					return p, slices.Concat(m, z, alpha)
				}
				wantP, want := run(cols)
				gotP, got := run(short)
				require.Equal(t, wantP, gotP, "cols %d trimmed to %d: probabilities", cols, short)
				for i := range want {
					require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "cols %d trimmed to %d: m, z, alpha [%d] = %v, want %v", cols, short, i, got[i], want[i])
				}
			}
		}
	})
}

// TestPackVPairsBF16Bits is TestPackKPairsBF16Bits for the values: random
// bits with special values in some rows and all-normal rows in others, so
// that the pair-of-rows path runs and hands rows to the element path, with
// the finiteness it reports checked too.
func TestPackVPairsBF16Bits(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	specials := []fp16.BFloat16{0, 0x8000, 0x0001, 0x807f, 0x7f80, 0xff80, 0x7f81, 0xffc1, 0x7fc0}
	for _, n := range []int{1, 2, 5, 16, 33} {
		for _, d := range []int{1, 3, 16, 65} {
			for _, ldDst := range []int{2 * d, 2*d + 1, 2*d + 32} {
				for _, shift := range []int{0, 1} {
					for _, special := range []int{-1, 0, n / 2, n - 1} { // the row with special values, -1 for none
						ldSrc := d + 2
						src := make([]fp16.BFloat16, (n-1)*ldSrc+d)
						for i := range src {
							src[i] = RoundBF16(float32(rng.NormFloat64()) + 3) // normal
						}
						wantFinite := true
						if special >= 0 {
							for c := range d {
								if rng.IntN(2) == 0 {
									x := specials[rng.IntN(len(specials))]
									src[special*ldSrc+c] = x
									if x&0x7f80 == 0x7f80 {
										wantFinite = false
									}
								}
							}
						}
						size := ((n+1)/2-1)*ldDst + 2*d
						panel := guardedPanel(size, shift)
						dst := panel.S()
						finite, err := PackVPairs(dst, ldDst, src, nil, ldSrc, n, d)
						require.NoError(t, err)
						panel.CheckOutside(t, "PackVPairs panel")
						what := fmt.Sprintf("n %d d %d ldDst %d shift %d special row %d", n, d, ldDst, shift, special)
						require.Equal(t, wantFinite, finite, "%s: finite", what)
						for j := range n + n%2 {
							for c := range d {
								want := fp16.BFloat16(0)
								if j < n {
									want = RoundBF16(src[j*ldSrc+c].Float32())
								}
								require.Equal(t, want, dst[(j/2)*ldDst+2*c+j%2], "%s: key %d comp %d", what, j, c)
							}
						}
					}
				}
			}
		}
	}
}
