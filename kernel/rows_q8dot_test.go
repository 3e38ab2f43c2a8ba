package kernel

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	registry "github.com/flashgo/flashgo/internal/impl"
	"github.com/flashgo/flashgo/internal/impltest"
)

// q8DotKeys is n int8 rows of ld elements (d used) with a scale per block,
// the gaps holding values that would spoil any score that read them.
func q8DotKeys(rng *rand.Rand, n, ld, d int) ([]int8, []float32) {
	size := max(0, (n-1)*ld+d)
	x := make([]int8, size)
	for e := range x {
		if e%ld >= d {
			x[e] = -128
			continue
		}
		x[e] = int8(rng.IntN(256) - 128) // -128 too: keys may hold any int8
	}
	sc := make([]float32, (size+Q8Block-1)/Q8Block)
	for i := range sc {
		sc[i] = float32(0.001 + 0.01*rng.Float64())
		if i*Q8Block%ld >= d {
			sc[i] = float32(math.NaN())
		}
	}
	return x, sc
}

// q8DotQuery returns a Q8Query of rows random rows of d values, ldX apart
// in the float32 rows it was set from (returned too).
func q8DotQuery(t testing.TB, rng *rand.Rand, rows, d, ldX int) (*Q8Query, []float32) {
	x := make([]float32, max(0, (rows-1)*ldX+d))
	for i := range x {
		x[i] = float32(rng.NormFloat64()) * 3
	}
	var q Q8Query
	require.NoError(t, q.Set(x, ldX, rows, d))
	return &q, x
}

func TestQ8QuerySet(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	for _, d := range []int{1, 5, 31, 32, 33, 64, 100, 128} {
		q, x := q8DotQuery(t, rng, 3, d, d+7)
		vals, scales, ld := q.Values()
		require.Equal(t, 3, q.Rows())
		require.Equal(t, d, q.Dim())
		require.Equal(t, (d+31)/32*32, ld)
		for i := range 3 {
			// Whole blocks as QuantizeQ8; the short last block as one
			// padded with zeros.
			src := make([]float32, ld)
			copy(src, x[i*(d+7):i*(d+7)+d])
			want := make([]int8, ld)
			wantS := make([]float32, ld/32)
			require.NoError(t, QuantizeQ8(want, wantS, src))
			require.Equal(t, want, vals[i*ld:(i+1)*ld], "d %d row %d", d, i)
			require.Equal(t, wantS, scales[i*ld/32:(i+1)*ld/32], "d %d row %d", d, i)
			for c := range d {
				step := float64(scales[(i*ld+c)/32])
				require.InDelta(t, x[i*(d+7)+c], float64(vals[i*ld+c])*step, step/2*(1+1e-6), "d %d row %d value %d", d, i, c)
			}
		}
	}
	var q Q8Query
	require.Error(t, q.Set(make([]float32, 10), 5, 3, 5), "short x")
	require.Error(t, q.Set(nil, 1, -1, 1), "negative rows")
	require.Error(t, q.Set(nil, 1, 1, -1), "negative d")
	require.Zero(t, q.Rows(), "nothing set on error")
}

// testDotKernels runs f under every implementation, as a subtest named
// after the QKRowsQ8Dot kernel it runs, and where the level has integer
// kernels once more under each other integer kernel this machine can run
// (selected as a row of the int8dot axis), so that every kernel runs.
func testDotKernels(t *testing.T, f func(t *testing.T)) {
	testAllImpls(t, func(t *testing.T) {
		def := int8DotImplementation()
		t.Run(def, f)
		if def == Generic {
			return
		}
		for _, name := range registry.List(registry.Int8Dot) {
			if name == def || name == Generic {
				continue
			}
			t.Run(name, func(t *testing.T) {
				impltest.Select(t, registry.Int8Dot, name)
				require.Equal(t, name, int8DotImplementation())
				f(t)
			})
		}
	})
}

func TestQKRowsQ8Dot(t *testing.T) {
	testDotKernels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(41, 42))
		for _, rows := range []int{1, 2, 3, 4, 5, 8, 9} {
			for _, cols := range []int{1, 2, 3, 4, 5, 7, 17, 65} {
				for _, d := range []int{1, 31, 32, 33, 63, 64, 65, 100, 128, 129, 192, 256, 576} {
					ld := (d + Q8Block - 1) / Q8Block * Q8Block
					for _, ldK := range []int{ld, ld + Q8Block} {
						ldS := cols + 3
						q, _ := q8DotQuery(t, rng, rows, d, d+1)
						vals, qs, ldQ := q.Values()
						k, ks := q8DotKeys(rng, cols, ldK, d)
						k0 := append([]int8(nil), k...)
						sBuf, s := guarded((rows-1)*ldS + cols)
						const scale = 0.7
						require.NoError(t, QKRowsQ8Dot(s, ldS, q, k, ks, ldK, cols, scale))
						checkGuards(t, sBuf, "QKRowsQ8Dot")
						checkOutside(t, sBuf, ldS, rows, cols, "QKRowsQ8Dot")
						require.Equal(t, k0, k, "QKRowsQ8Dot modified k")
						for i := range rows {
							for j := range cols {
								var want, mag float64
								for c := range d {
									x := float64(vals[i*ldQ+c]) * float64(qs[(i*ldQ+c)/Q8Block]) *
										float64(k[j*ldK+c]) * float64(ks[(j*ldK+c)/Q8Block])
									want += x
									mag += math.Abs(x)
								}
								// Exact block sums: rounding only in the
								// scaling and the sum over blocks.
								if !near(s[i*ldS+j], scale*want, scale*mag, d/Q8Block+4) {
									t.Fatalf("rows %d cols %d d %d ldK %d: s[%d][%d] = %v, want %v", rows, cols, d, ldK, i, j, s[i*ldS+j], scale*want)
								}
							}
						}
					}
				}
			}
		}
	})
}

// TestQKRowsQ8DotAsmMatchesGeneric checks the integer kernels (VNNI,
// AVX-VNNI, AVX2) against their Go twin.
func TestQKRowsQ8DotAsmMatchesGeneric(t *testing.T) {
	testDotKernels(t, func(t *testing.T) {
		if !Current().Int8Dot {
			t.Skipf("QKRowsQ8Dot is the Go loop in %s: nothing to compare", Implementation())
		}
		rng := rand.New(rand.NewPCG(43, 44))
		for _, d := range []int{64, 96, 128, 160, 1024, 1088} {
			const rows, cols = 7, 67
			q, _ := q8DotQuery(t, rng, rows, d, d)
			k, ks := q8DotKeys(rng, cols, d, d)
			s1, s2 := make([]float32, rows*cols), make([]float32, rows*cols)
			require.NoError(t, QKRowsQ8Dot(s1, cols, q, k, ks, d, cols, 0.125))
			qkRowsQ8DotGeneric(s2, cols, q, k, ks, d, cols, 0, 0.125)
			for i := range s1 {
				require.InDelta(t, s2[i], s1[i], 1e-5*(1+math.Abs(float64(s2[i]))), "d %d score %d", d, i)
			}
		}
	})
}

func TestQKRowsQ8DotErrors(t *testing.T) {
	q, _ := q8DotQuery(t, rand.New(rand.NewPCG(1, 1)), 1, 32, 32)
	k := make([]int8, 64)
	ks := make([]float32, 2)
	s := []float32{42, 42}
	for _, c := range []struct {
		name string
		err  error
	}{
		{"nil query", QKRowsQ8Dot(s, 2, nil, k, ks, 32, 2, 1)},
		{"ldK not a block multiple", QKRowsQ8Dot(s, 2, q, k, ks, 33, 2, 1)},
		{"too few key scales", QKRowsQ8Dot(s, 2, q, k, ks[:1], 32, 2, 1)},
		{"short s", QKRowsQ8Dot(s[:1], 2, q, k, ks, 32, 2, 1)},
		{"short k", QKRowsQ8Dot(s, 2, q, k[:40], ks, 32, 2, 1)},
		{"negative cols", QKRowsQ8Dot(s, 2, q, k, ks, 32, -1, 1)},
	} {
		require.Error(t, c.err, c.name)
		require.Contains(t, c.err.Error(), "QKRowsQ8Dot", c.name)
	}
	require.Equal(t, []float32{42, 42}, s, "nothing written on error")
}

func TestQKRowsQ8DotNoAllocations(t *testing.T) {
	testDotKernels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		q, x := q8DotQuery(t, rng, 4, 128, 128)
		k, ks := q8DotKeys(rng, 64, 128, 128)
		s := make([]float32, 4*64)
		n := testing.AllocsPerRun(20, func() {
			_ = q.Set(x, 128, 4, 128)
			_ = QKRowsQ8Dot(s, 64, q, k, ks, 128, 64, 1)
		})
		require.Zero(t, n)
	})
}

// TestQKRowsQ8DotGather checks the gathering form of every QKRowsQ8Dot
// kernel: each score has the bits of QKRowsQ8Dot on the same key row where
// it lies, for keys scattered over a pool in blocks of 1, 3 and 16, with
// prefetch targets or without; keys and the query are not modified.
func TestQKRowsQ8DotGather(t *testing.T) {
	testDotKernels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(45, 46))
		for _, rows := range []int{1, 2, 3, 4, 5, 9} {
			for _, cols := range []int{1, 3, 4, 5, 17, 65} {
				for _, d := range []int{1, 31, 33, 64, 65, 128, 129, 192} {
					for _, bs := range []int{1, 3, 16} {
						ld := (d+Q8Block-1)/Q8Block*Q8Block + Q8Block
						const poolRows = 40
						q, _ := q8DotQuery(t, rng, rows, d, d+1)
						k, ks := q8DotKeys(rng, poolRows, ld, d)
						k0 := append([]int8(nil), k...)
						off := gatherOffsets(rng, poolRows, ld, cols+8, bs)
						ldS := cols + 3
						sBuf, s := guarded((rows-1)*ldS + cols)
						require.NoError(t, qkRowsQ8DotGather(s, ldS, q, k, ks, off, cols, 0.7, 8))
						checkGuards(t, sBuf, "QKRowsQ8DotGather")
						checkOutside(t, sBuf, ldS, rows, cols, "QKRowsQ8DotGather")
						require.Equal(t, k0, k, "QKRowsQ8DotGather modified k")
						one := make([]float32, rows)
						for j, e := range off[:cols] {
							require.NoError(t, QKRowsQ8Dot(one, 1, q, k[e:], ks[e/Q8Block:], ld, 1, 0.7))
							for i := range rows {
								if math.Float32bits(s[i*ldS+j]) != math.Float32bits(one[i]) {
									t.Fatalf("rows %d cols %d d %d bs %d: s[%d][%d] = %v, QKRowsQ8Dot where the key lies gives %v", rows, cols, d, bs, i, j, s[i*ldS+j], one[i])
								}
							}
						}
					}
				}
			}
		}
	})
}

func TestQKRowsQ8DotGatherErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 48))
	q, _ := q8DotQuery(t, rng, 2, 64, 64)
	k, ks := q8DotKeys(rng, 4, 64, 64)
	s := make([]float32, 64)
	for _, c := range []struct {
		err  error
		want string
	}{
		{qkRowsQ8DotGather(s, 8, nil, k, ks, []int{0}, 1, 1, 0), "nil query"},
		{qkRowsQ8DotGather(s, 8, q, k, ks, []int{0}, 2, 1, 0), "off has 1 offsets; want >= 2"},
		{qkRowsQ8DotGather(s, 8, q, k, ks, []int{0, 200}, 2, 1, 0), "off[1] is 200; want 0 to len(k)-d = 192"},
		{qkRowsQ8DotGather(s, 8, q, k, ks, []int{0, 16}, 2, 1, 0), "off[1] is 16; want a multiple of 32"},
		{qkRowsQ8DotGather(s, 8, q, k, ks[:3], []int{0, 128}, 2, 1, 0), "k has 3 scales; want >= 6"},
		{qkRowsQ8DotGather(s, 1, q, k, ks, []int{0, 64}, 2, 1, 0), "leading dimension of s is 1; want >= 2"},
	} {
		require.Error(t, c.err)
		require.Contains(t, c.err.Error(), c.want)
	}
	for _, x := range s {
		require.Zero(t, x)
	}
	// A head dimension of 0: every score is 0, whatever the offsets (up to
	// the end of k) and however few scales there are.
	var q0 Q8Query
	require.NoError(t, q0.Set(nil, 0, 2, 0))
	require.NoError(t, qkRowsQ8DotGather(s, 8, &q0, k, nil, []int{len(k), 0, 64}, 3, 1, 0))
}

func TestQKRowsQ8DotGatherNoAllocations(t *testing.T) {
	testDotKernels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(49, 50))
		q, _ := q8DotQuery(t, rng, 4, 128, 128)
		k, ks := q8DotKeys(rng, 64, 128, 128)
		off := gatherOffsets(rng, 64, 128, 80, 16)
		s := make([]float32, 4*64)
		n := testing.AllocsPerRun(20, func() {
			if err := qkRowsQ8DotGather(s, 64, q, k, ks, off, 64, 0.1, 16); err != nil {
				panic(err)
			}
		})
		require.Zero(t, n)
	})
}
