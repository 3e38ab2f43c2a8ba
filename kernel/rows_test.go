package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/fp16"
)

// rowData is n rows of ld elements of one RowElem type, filled from random
// normals, with what they stand for in float64.
type rowData[T RowElem] struct {
	x      []T
	scales []float32
	val    []float64 // the dequantised value of every element
}

// makeRows returns n·ld elements (the gaps between rows included: they
// hold NaN, or for int8 a NaN scale when a whole block is gap).
func makeRows[T RowElem](rng *rand.Rand, n, ld, d int) rowData[T] {
	size := max(0, (n-1)*ld+d)
	r := rowData[T]{x: make([]T, size), val: make([]float64, size)}
	r.scales = make([]float32, max(1, (size+Q8Block-1)/Q8Block))
	for i := range r.scales {
		r.scales[i] = float32(0.5 + rng.Float64())
	}
	for e := range size {
		gap := e%ld >= d
		f := float32(rng.NormFloat64())
		if gap {
			f = float32(math.NaN())
		}
		switch x := any(r.x).(type) {
		case []float32:
			x[e] = f
			r.val[e] = float64(f)
		case []fp16.Float16:
			x[e] = fp16.FromFloat32(f)
			r.val[e] = float64(x[e].Float32())
		case []fp16.BFloat16:
			x[e] = fp16.BFloat16FromFloat32(f)
			r.val[e] = float64(x[e].Float32())
		case []int8:
			v := int8(rng.IntN(255) - 127)
			x[e] = v
			r.val[e] = float64(float32(v) * r.scales[e/Q8Block])
		case []fp16.Float8E4M3:
			// Mostly normals around 1, an eighth subnormals (exponent field
			// 0); the gaps hold NaN.
			b := fp16.Float8E4M3FromFloat32(f)
			if rng.IntN(8) == 0 {
				b = fp16.Float8E4M3(rng.IntN(256) & 0x87)
			}
			if gap {
				b = 0x7f
			}
			x[e] = b
			r.val[e] = float64(b.Float32() * r.scales[0])
		case []fp16.Float8E5M2:
			b := fp16.Float8E5M2FromFloat32(f)
			if rng.IntN(8) == 0 {
				b = fp16.Float8E5M2(rng.IntN(256) & 0x83)
			}
			if gap {
				b = 0x7e
			}
			x[e] = b
			r.val[e] = float64(b.Float32() * r.scales[0])
		}
	}
	return r
}

// rowLds returns the leading dimensions to test for rows of d elements:
// tight, and with a gap; int8 rows start Q8 blocks.
func rowLds[T RowElem](d int) []int {
	if _, ok := any([]T(nil)).([]int8); ok {
		ld := (d + Q8Block - 1) / Q8Block * Q8Block
		return []int{max(ld, Q8Block), ld + Q8Block}
	}
	return []int{max(d, 1), d + 3}
}

var rowDims = []int{1, 3, 7, 8, 9, 16, 17, 31, 32, 33, 64, 100, 128, 129, 256}

func TestQKRows(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		t.Run("f32", testQKRows[float32])
		t.Run("f16", testQKRows[fp16.Float16])
		t.Run("bf16", testQKRows[fp16.BFloat16])
		t.Run("q8", testQKRows[int8])
		t.Run("e4m3", testQKRows[fp16.Float8E4M3])
		t.Run("e5m2", testQKRows[fp16.Float8E5M2])
	})
}

func testQKRows[T RowElem](t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, rows := range []int{1, 2, 3, 4, 5, 8, 9} {
		for _, cols := range []int{1, 2, 3, 4, 5, 7, 8, 17, 64, 65} {
			for _, d := range rowDims {
				for _, ldK := range rowLds[T](d) {
					ldS, ldQ := cols+3, d+1
					sBuf, s := guarded((rows-1)*ldS + cols)
					_, q := guarded((rows-1)*ldQ + d)
					fill(rng, q)
					for i := range rows {
						for c := d; c < ldQ && i*ldQ+c < len(q); c++ {
							q[i*ldQ+c] = float32(math.NaN())
						}
					}
					k := makeRows[T](rng, cols, ldK, d)
					const scale = 0.3
					require.NoError(t, QKRows(s, ldS, q, ldQ, k.x, k.scales, ldK, rows, cols, d, scale))
					checkGuards(t, sBuf, "QKRows")
					for i := range rows {
						for j := range cols {
							var want, mag float64
							for c := range d {
								p := float64(q[i*ldQ+c]) * k.val[j*ldK+c]
								want += p
								mag += math.Abs(p)
							}
							if !near(s[i*ldS+j], scale*want, scale*mag, d) {
								t.Fatalf("rows %d cols %d d %d ldK %d: s[%d][%d] = %v, want %v", rows, cols, d, ldK, i, j, s[i*ldS+j], scale*want)
							}
						}
						for j := cols; j < ldS && i*ldS+j < len(s); j++ {
							require.True(t, math.IsNaN(float64(s[i*ldS+j])), "QKRows wrote the gap after row %d", i)
						}
					}
				}
			}
		}
	}
}

func TestPVRows(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		t.Run("f32", testPVRows[float32])
		t.Run("f16", testPVRows[fp16.Float16])
		t.Run("bf16", testPVRows[fp16.BFloat16])
		t.Run("q8", testPVRows[int8])
		t.Run("e4m3", testPVRows[fp16.Float8E4M3])
		t.Run("e5m2", testPVRows[fp16.Float8E5M2])
	})
}

func testPVRows[T RowElem](t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, rows := range []int{1, 2, 3, 4, 5, 9} {
		for _, cols := range []int{1, 2, 3, 16, 17, 64, 65} {
			for _, d := range rowDims {
				for _, ldV := range rowLds[T](d) {
					ldO, ldP := d+2, cols+1
					oBuf, o := guarded((rows-1)*ldO + d)
					_, p := guarded((rows-1)*ldP + cols)
					fill(rng, o)
					fill(rng, p)
					v := makeRows[T](rng, cols, ldV, d)
					o0 := append([]float32(nil), o...)
					require.NoError(t, PVRows(o, ldO, p, ldP, v.x, v.scales, ldV, rows, cols, d))
					checkGuards(t, oBuf, "PVRows")
					for i := range rows {
						for c := range d {
							want, mag := float64(o0[i*ldO+c]), math.Abs(float64(o0[i*ldO+c]))
							for j := range cols {
								x := float64(p[i*ldP+j]) * v.val[j*ldV+c]
								want += x
								mag += math.Abs(x)
							}
							if !near(o[i*ldO+c], want, mag, cols+1) {
								t.Fatalf("rows %d cols %d d %d ldV %d: o[%d][%d] = %v, want %v", rows, cols, d, ldV, i, c, o[i*ldO+c], want)
							}
						}
						for c := d; c < ldO && i*ldO+c < len(o); c++ {
							require.Equal(t, o0[i*ldO+c], o[i*ldO+c], "PVRows wrote the gap after row %d", i)
						}
					}
				}
			}
		}
	}
}

// TestRowsAsmMatchesGeneric runs the assembly of every implementation that
// has it and the generic Go code on the same unaligned inputs (slices
// starting one element into an allocation), for every element type, and
// compares them within rounding.
func TestRowsAsmMatchesGeneric(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		if !Current().RowKernels {
			t.Skipf("QKRows and PVRows have no assembly in %s", Implementation())
		}
		t.Run("f32", testRowsAsmMatchesGeneric[float32])
		t.Run("f16", testRowsAsmMatchesGeneric[fp16.Float16])
		t.Run("bf16", testRowsAsmMatchesGeneric[fp16.BFloat16])
		t.Run("q8", testRowsAsmMatchesGeneric[int8])
		t.Run("e4m3", testRowsAsmMatchesGeneric[fp16.Float8E4M3])
		t.Run("e5m2", testRowsAsmMatchesGeneric[fp16.Float8E5M2])
	})
}

func testRowsAsmMatchesGeneric[T RowElem](t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	_, isQ8 := any([]T(nil)).([]int8)
	for _, d := range []int{32, 64, 96, 128, 160, 256} {
		const rows, cols = 7, 67
		q := make([]float32, rows*d+1)[1:]
		fill(rng, q)
		p := make([]float32, rows*cols+1)[1:]
		fill(rng, p)
		x := makeRows[T](rng, cols+1, d, d)
		if !isQ8 { // unaligned; Q8 rows must start their blocks
			x.x = x.x[1:]
		}
		s1, s2 := make([]float32, rows*cols), make([]float32, rows*cols)
		require.NoError(t, QKRows(s1, cols, q, d, x.x, x.scales, d, rows, cols, d, 0.125))
		qkRowsGeneric(s2, cols, q, d, x.x, x.scales, d, rows, cols, 0, d, 0.125)
		for i := range s1 {
			assert.InDelta(t, s2[i], s1[i], 1e-4*(1+math.Abs(float64(s2[i]))), "QK d %d score %d", d, i)
		}
		o1, o2 := make([]float32, rows*d), make([]float32, rows*d)
		fill(rng, o1)
		copy(o2, o1)
		require.NoError(t, PVRows(o1, d, p, cols, x.x, x.scales, d, rows, cols, d))
		pvRowsGeneric(o2, d, p, cols, x.x, x.scales, d, rows, cols, 0, d)
		for i := range o1 {
			assert.InDelta(t, o2[i], o1[i], 1e-4*(1+math.Abs(float64(o2[i]))), "PV d %d output %d", d, i)
		}
	}
}

func TestRowsErrors(t *testing.T) {
	s, q := make([]float32, 256), make([]float32, 256)
	k8 := make([]int8, 64)
	k16 := make([]fp16.Float16, 64)
	for _, c := range []struct {
		err  error
		want string
	}{
		{QKRows(s, 64, q, 64, k16, nil, 8, 1, 8, 9, 1), "leading dimension of k is 8; want >= 9"},
		{QKRows(s, 64, q, 64, k16, nil, 8, 2, 9, 8, 1), "k has 64 elements; want >= 72"},
		{QKRows(s, 4, q, 64, k16, nil, 8, 2, 8, 8, 1), "leading dimension of s is 4; want >= 8"},
		{QKRows(s, 64, q, 64, k8, make([]float32, 2), 16, 1, 2, 16, 1), "leading dimension of int8 k is 16; want a multiple of 32"},
		{QKRows(s, 64, q, 64, k8, make([]float32, 1), 32, 1, 2, 32, 1), "k has 1 scales; want >= 2"},
		{QKRows(s, 64, q, 64, k16, nil, 8, -1, 8, 8, 1), "negative size"},
		{PVRows(s, 64, q, 64, k16, nil, 8, 1, 9, 8), "v has 64 elements; want >= 72"},
		{PVRows(s, 64, q, 64, k8, nil, 32, 1, 2, 32), "v has 0 scales; want >= 2"},
		{QKRows(s, 64, q, 64, make([]fp16.Float8E4M3, 64), nil, 8, 1, 2, 8, 1), "8-bit float k has no scale"},
		{PVRows(s, 64, q, 64, make([]fp16.Float8E5M2, 64), []float32{}, 8, 1, 2, 8), "8-bit float v has no scale"},
		{QKRowsGather(s, 64, q, 64, make([]fp16.Float8E5M2, 64), nil, []int{0, 8}, 1, 2, 8, 1), "8-bit float k has no scale"},
	} {
		require.Error(t, c.err)
		assert.Contains(t, c.err.Error(), c.want)
	}
	// Nothing is written on error.
	for _, x := range s {
		require.Zero(t, x)
	}
}

func ExampleQKRows() {
	// Two query rows against three float16 keys of dimension 4, read where
	// they lie (row j of k is key j).
	q := []float32{1, 0, 0, 0, 0, 1, 1, 0}
	k := fp16.Float16s([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	s := make([]float32, 2*3)
	if err := QKRows(s, 3, q, 4, k, nil, 4, 2, 3, 4, 0.5); err != nil {
		panic(err)
	}
	fmt.Println(s)
	// Output: [0.5 2.5 4.5 2.5 6.5 10.5]
}

// TestQKRowsSplitInvariant checks that a score does not depend on how the
// keys are cut into calls (a paged cache cuts a tile at block boundaries):
// scoring keys in one call and one at a time agree bit for bit.
func TestQKRowsSplitInvariant(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(37, 38))
		for _, d := range []int{16, 32, 100, 128} {
			const rows, cols = 5, 23
			q := make([]float32, rows*d)
			fill(rng, q)
			k := makeRows[fp16.Float16](rng, cols, d, d)
			whole, one := make([]float32, rows*cols), make([]float32, rows*cols)
			require.NoError(t, QKRows(whole, cols, q, d, k.x, nil, d, rows, cols, d, 0.1))
			for j := range cols {
				require.NoError(t, QKRows(one[j:], cols, q, d, k.x[j*d:], nil, d, rows, 1, d, 0.1))
			}
			require.Equal(t, whole, one, "d %d", d)
		}
	})
}

// TestRowsPrefetchKeepsResults checks that the prefetch distance of
// qkRowsPrefetch and pvRowsPrefetch changes nothing but the speed: every
// distance, none, backwards or far past the rows, gives the bits of QKRows
// and PVRows.
func TestRowsPrefetchKeepsResults(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(39, 40))
		t.Run("f16", func(t *testing.T) { testRowsPrefetch[fp16.Float16](t, rng, 99) })
		t.Run("bf16", func(t *testing.T) { testRowsPrefetch[fp16.BFloat16](t, rng, 96) })
		t.Run("f32", func(t *testing.T) { testRowsPrefetch[float32](t, rng, 96) })
		t.Run("q8", func(t *testing.T) { testRowsPrefetch[int8](t, rng, 96+Q8Block) })
		t.Run("e4m3", func(t *testing.T) { testRowsPrefetch[fp16.Float8E4M3](t, rng, 96+3) })
		t.Run("e5m2", func(t *testing.T) { testRowsPrefetch[fp16.Float8E5M2](t, rng, 96+5) })
	})
}

// testRowsPrefetch runs TestRowsPrefetchKeepsResults on rows of type T,
// ld elements apart.
func testRowsPrefetch[T RowElem](t *testing.T, rng *rand.Rand, ld int) {
	const rows, cols, d = 5, 37, 96
	q := make([]float32, rows*d)
	fill(rng, q)
	p := make([]float32, rows*cols)
	fill(rng, p)
	x := makeRows[T](rng, cols, ld, d)
	want, wantO := make([]float32, rows*cols), make([]float32, rows*d)
	require.NoError(t, qkRowsPrefetch(want, cols, q, d, x.x, x.scales, ld, rows, cols, d, 0.3, prefetchRows*ld))
	require.NoError(t, pvRowsPrefetch(wantO, d, p, cols, x.x, x.scales, ld, rows, cols, d, prefetchRows*ld))
	for _, ahead := range []int{0, 1, -3 * ld, 7*ld + 5, 1000 * ld} {
		s, o := make([]float32, rows*cols), make([]float32, rows*d)
		require.NoError(t, qkRowsPrefetch(s, cols, q, d, x.x, x.scales, ld, rows, cols, d, 0.3, ahead))
		require.NoError(t, pvRowsPrefetch(o, d, p, cols, x.x, x.scales, ld, rows, cols, d, ahead))
		require.Equal(t, want, s, "QK ahead %d", ahead)
		require.Equal(t, wantO, o, "PV ahead %d", ahead)
	}
}
