package kernel

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/flashgo/flashgo/fp16"
	"github.com/stretchr/testify/require"
)

// TestPackPairsRounded checks the pair packs of values that need rounding
// (float32 and binary16 of random bits: zeros, subnormals, infinities and
// NaNs among them; Q8 of random codes and scales), which run the level's
// widening and rounding kernels, against the element loops
// (packKPairsGeneric, packVPairsGeneric) bit for bit, on every
// implementation: strips of keys and chunks of components cut anywhere,
// odd head dims, unaligned panels (which take the element loops).
func TestPackPairsRounded(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 7))
		for _, n := range []int{1, 2, 3, 15, 16, 17, 33} {
			for _, d := range []int{1, 2, 3, 31, 64, 127, 128, 129, 255, 257, 300} {
				testPackPairsRounded(t, rng, n, d, func() float32 { return math.Float32frombits(rng.Uint32()) })
				testPackPairsRounded(t, rng, n, d, func() fp16.Float16 { return fp16.Float16(rng.Uint32()) })
				testPackPairsRounded(t, rng, n, d, func() int8 { return int8(rng.Uint32()) })
				// Finite values, whose panels report finite.
				testPackPairsRounded(t, rng, n, d, func() float32 { return float32(rng.NormFloat64()) })
				testPackPairsRounded(t, rng, n, d, func() fp16.Float16 { return fp16.FromFloat32(float32(rng.NormFloat64())) })
			}
		}
	})
}

func testPackPairsRounded[T RowElem](t *testing.T, rng *rand.Rand, n, d int, draw func() T) {
	for _, ld := range rowLds[T](d) {
		src := make([]T, (n-1)*ld+d)
		for i := range src {
			src[i] = draw()
		}
		scales := make([]float32, (len(src)+Q8Block-1)/Q8Block)
		for i := range scales {
			scales[i] = float32(rng.NormFloat64())
			if i%7 == 3 && n%2 == 1 {
				scales[i] = math.Float32frombits(rng.Uint32()) // any bits, NaN and ±Inf included
			}
		}
		for _, pad := range []int{0, 1, 2} { // ldDst odd with pad 1: the element loops
			for _, off := range []int{0, 1} { // a panel off a 4-byte boundary: the element loops
				ldK := 2*n + pad
				sizeK := off + ((d+1)/2-1)*ldK + 2*n
				got, want := make([]fp16.BFloat16, sizeK), make([]fp16.BFloat16, sizeK)
				for i := range got {
					got[i], want[i] = 0x7fc1, 0x7fc1
				}
				require.NoError(t, PackKPairs(got[off:], ldK, src, scales, ld, n, d))
				packKPairsGeneric(want[off:], ldK, src, scales, ld, n, d)
				require.Equal(t, want, got, "PackKPairs %T n %d d %d ld %d ldDst %d off %d", src, n, d, ld, ldK, off)

				ldV := 2*d + pad
				sizeV := off + ((n+1)/2-1)*ldV + 2*d
				got, want = make([]fp16.BFloat16, sizeV), make([]fp16.BFloat16, sizeV)
				for i := range got {
					got[i], want[i] = 0x7fc1, 0x7fc1
				}
				finite, err := PackVPairs(got[off:], ldV, src, scales, ld, n, d)
				require.NoError(t, err)
				wantFinite := packVPairsGeneric(want[off:], ldV, src, scales, ld, n, d)
				require.Equal(t, want, got, "PackVPairs %T n %d d %d ld %d ldDst %d off %d", src, n, d, ld, ldV, off)
				require.Equal(t, wantFinite, finite, "PackVPairs %T n %d d %d: finite", src, n, d)
			}
		}
	}
}

// BenchmarkPackPairs packs the K and V of a 1024-key call at d = 128 of
// each element type into pair panels with the engine's padded strides
// (attention's prepack) and reports nanoseconds per element.
func BenchmarkPackPairs(b *testing.B) {
	const n, d = 1024, 128
	rng := rand.New(rand.NewPCG(1, 1))
	f32 := make([]float32, n*d)
	f16 := make([]fp16.Float16, n*d)
	q8 := make([]int8, n*d)
	scales := make([]float32, n*d/Q8Block)
	for i := range f32 {
		f32[i] = float32(rng.NormFloat64())
		f16[i] = fp16.FromFloat32(f32[i])
		q8[i] = int8(rng.IntN(255) - 127)
	}
	for i := range scales {
		scales[i] = float32(rng.Float64())
	}
	b.Run("bf16", func(b *testing.B) { benchPackPairs(b, randomBF16(n*d, 1), nil, n, d) })
	b.Run("f32", func(b *testing.B) { benchPackPairs(b, f32, nil, n, d) })
	b.Run("f16", func(b *testing.B) { benchPackPairs(b, f16, nil, n, d) })
	b.Run("q8", func(b *testing.B) { benchPackPairs(b, q8, scales, n, d) })
}

func benchPackPairs[T RowElem](b *testing.B, src []T, scales []float32, n, d int) {
	b.Run("K", func(b *testing.B) {
		dst := make([]fp16.BFloat16, d/2*(2*n+32))
		for b.Loop() {
			if err := PackKPairs(dst, 2*n+32, src, scales, d, n, d); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/float64(n*d), "ns/elem")
	})
	b.Run("V", func(b *testing.B) {
		dst := make([]fp16.BFloat16, n/2*(2*d+32))
		for b.Loop() {
			if _, err := PackVPairs(dst, 2*d+32, src, scales, d, n, d); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/float64(n*d), "ns/elem")
	})
}

// TestPackPairsBF16 checks the pair packs of bfloat16 rows, which run the
// level's vector kernels on blocks of 16 keys × 16 pairs (K) and pairs of
// rows × 32 columns (V) and the Go loops on the rest, against loops written
// here from PackKPairs' and PackVPairs' docs, bit for bit, on every
// implementation: values of random bits (zeros, subnormals, infinities and
// quiet and signalling NaNs among them, canonicalised) and normal ones,
// sizes on and off the blocks, odd strides; nothing outside the panel is
// written, and PackVPairs reports whether every value is finite.
func TestPackPairsBF16(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(8, 8))
		for _, n := range []int{1, 2, 15, 16, 17, 32, 33, 50} {
			for _, d := range []int{2, 3, 30, 32, 34, 63, 64, 96, 128, 130} {
				for _, special := range []bool{false, true} {
					draw := func() fp16.BFloat16 { return RoundBF16(float32(rng.NormFloat64())) }
					if special {
						draw = func() fp16.BFloat16 {
							if rng.IntN(4) == 0 {
								return fp16.BFloat16(rng.Uint32())
							}
							return RoundBF16(float32(rng.NormFloat64()))
						}
					}
					testPackPairsBF16(t, rng, n, d, draw)
				}
			}
		}
	})
}

func testPackPairsBF16(t *testing.T, rng *rand.Rand, n, d int, draw func() fp16.BFloat16) {
	const sentinel = fp16.BFloat16(0x5a5a)
	ldSrc := d + 1 + rng.IntN(3)
	src := make([]fp16.BFloat16, (n-1)*ldSrc+d)
	finite := true
	for i := range src {
		src[i] = draw()
		if i%ldSrc < d && src[i]&0x7f80 == 0x7f80 {
			finite = false
		}
	}
	pairs := (d + 1) / 2
	// K: dst[(k/2)*ldK + 2j + k%2] = canon(K[j][k]), a zero partner for odd d.
	ldK := 2*n + 1 + rng.IntN(5)
	want := make([]fp16.BFloat16, pairs*ldK)
	for i := range want {
		want[i] = sentinel
	}
	got := slices.Clone(want)
	for j := range n {
		for k := range 2 * pairs {
			v := fp16.BFloat16(0)
			if k < d {
				v = canonBF16(src[j*ldSrc+k])
			}
			want[(k/2)*ldK+2*j+k%2] = v
		}
	}
	require.NoError(t, PackKPairs(got, ldK, src, nil, ldSrc, n, d))
	require.Equal(t, want, got, "PackKPairs n %d d %d ldSrc %d ldDst %d", n, d, ldSrc, ldK)
	// V: dst[(j/2)*ldV + 2c + j%2] = canon(V[j][c]), a zero partner for odd n.
	ldV := 2*d + 1 + rng.IntN(5)
	want = make([]fp16.BFloat16, (n+1)/2*ldV)
	for i := range want {
		want[i] = sentinel
	}
	got = slices.Clone(want)
	for j := range 2 * ((n + 1) / 2) {
		for c := range d {
			v := fp16.BFloat16(0)
			if j < n {
				v = canonBF16(src[j*ldSrc+c])
			}
			want[(j/2)*ldV+2*c+j%2] = v
		}
	}
	fin, err := PackVPairs(got, ldV, src, nil, ldSrc, n, d)
	require.NoError(t, err)
	require.Equal(t, want, got, "PackVPairs n %d d %d ldSrc %d ldDst %d", n, d, ldSrc, ldV)
	require.Equal(t, finite, fin, "PackVPairs n %d d %d: finite", n, d)
}
