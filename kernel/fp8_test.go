package kernel

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/fp16"
)

// sameFloat reports whether a and b are the same float32 bits, or both NaN.
func sameFloat(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// TestPackFloat8AllCodes packs rows holding every pattern of each 8-bit
// format (as keys and as values, at an odd stride) and checks each element
// against Float32 times the scale, and the row kernels' widening (widen)
// against the same.
func TestPackFloat8AllCodes(t *testing.T) {
	t.Run("e4m3", testPackFloat8AllCodes[fp16.Float8E4M3])
	t.Run("e5m2", testPackFloat8AllCodes[fp16.Float8E5M2])
}

func testPackFloat8AllCodes[T Float8](t *testing.T) {
	const n, d, ld = 16, 16, 19 // 256 codes in 16 rows of 16
	src := make([]T, (n-1)*ld+d)
	for i := range src {
		src[i] = 0x55
	}
	for c := range 256 {
		src[c/d*ld+c%d] = T(c)
	}
	const sc = 0.375
	want := func(x T) float32 {
		switch v := any(x).(type) {
		case fp16.Float8E4M3:
			return v.Float32() * sc
		case fp16.Float8E5M2:
			return v.Float32() * sc
		}
		panic("type")
	}
	kt := make([]float32, d*n)
	require.NoError(t, PackKTFloat8(kt, n, src, sc, ld, n, d))
	v := make([]float32, n*(d+1))
	require.NoError(t, PackFloat8(v, d+1, src, sc, ld, n, d))
	wide := make([]float32, d)
	for j := range n {
		widen(wide, src, []float32{sc}, j*ld)
		for k := range d {
			w := want(src[j*ld+k])
			if !sameFloat(kt[k*n+j], w) || !sameFloat(v[j*(d+1)+k], w) || !sameFloat(wide[k], w) {
				t.Fatalf("code %#02x: PackKTFloat8 %v, PackFloat8 %v, widen %v; want %v", uint8(src[j*ld+k]), kt[k*n+j], v[j*(d+1)+k], wide[k], w)
			}
		}
	}
	// Errors say what was wrong; nothing is written.
	dst := make([]float32, 8)
	require.ErrorContains(t, PackKTFloat8(dst, 2, src, sc, ld, 4, 4), "leading dimension of dst is 2; want >= 4")
	require.ErrorContains(t, PackFloat8(dst, 4, src[:3], sc, 4, 1, 4), "src has 3 elements; want >= 4")
	require.ErrorContains(t, PackFloat8(dst, 4, src, sc, 4, -1, 4), "negative size")
	for _, x := range dst {
		require.Zero(t, x)
	}
}

// TestRowsFP8AllCodes runs the row kernels of every implementation on
// rows holding all 256 patterns of each 8-bit format (NaN, ±Inf and
// subnormals included) against the generic twins, bit for bit, for every
// length 1..70 (whole vectors and not) and rows starting at several
// offsets, with the gaps between rows holding NaN (a kernel that read past
// a row would show it). Each score sees one non-zero key component and
// each output column one value, so every result is a single rounding of
// one code's value times the (folded) scale and must agree exactly.
func TestRowsFP8AllCodes(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		t.Run("e4m3", testRowsFP8AllCodes[fp16.Float8E4M3])
		t.Run("e5m2", testRowsFP8AllCodes[fp16.Float8E5M2])
	})
}

func testRowsFP8AllCodes[T Float8](t *testing.T) {
	const rows, gap = 3, 3
	var nan T = 0x7f // E4M3 NaN; E5M2 +Inf... both poison a sum
	for _, sc := range []float32{0.3, 1, 3e35, 2e36} {
		scales := []float32{sc}
		for d := 1; d <= 70; d++ {
			for _, start := range []int{0, 1, 5} {
				ld := d + gap
				q := make([]float32, rows*d)
				for i := range q {
					q[i] = float32(i%7) - 2.5
				}
				// QK: key j holds code j at component j mod d, zeros elsewhere.
				const cols = 256
				buf := make([]T, start+(cols-1)*ld+d+gap)
				for i := range buf {
					buf[i] = nan
				}
				k := buf[start:]
				for j := range cols {
					row := k[j*ld:][:d]
					clear(row)
					row[j%d] = T(j)
				}
				s1, s2 := make([]float32, rows*cols), make([]float32, rows*cols)
				if err := QKRows(s1, cols, q, d, k, scales, ld, rows, cols, d, 0.125); err != nil {
					t.Fatal(err)
				}
				qkRowsGeneric(s2, cols, q, d, k, scales, ld, rows, cols, 0, d, 0.125)
				off := make([]int, cols)
				for j := range off {
					off[j] = (cols - 1 - j) * ld
				}
				s3, s4 := make([]float32, rows*cols), make([]float32, rows*cols)
				if err := QKRowsGather(s3, cols, q, d, k, scales, off, rows, cols, d, 0.125); err != nil {
					t.Fatal(err)
				}
				qkRowsGatherGeneric(s4, cols, q, d, k, scales, off, rows, cols, 0, d, 0.125)
				for i := range s1 {
					if !sameFloat(s1[i], s2[i]) || !sameFloat(s3[i], s4[i]) {
						t.Fatalf("scale %v d %d start %d: score %d (code %#02x): QKRows %v, generic %v; gather %v, generic %v",
							sc, d, start, i, i%cols, s1[i], s2[i], s3[i], s4[i])
					}
				}
				// PV: one value row at a time, holding codes from j·d on,
				// against the twin given the probabilities times the scale
				// (PVRows's definition for 8-bit floats).
				p := []float32{1, 0.5, -2}
				ps := []float32{p[0] * sc, p[1] * sc, p[2] * sc}
				for j := 0; j*d < 256; j++ {
					row := k[:d]
					for c := range row {
						row[c] = T(j*d + c)
					}
					o1, o2 := make([]float32, rows*d), make([]float32, rows*d)
					if err := PVRows(o1, d, p, 1, row, scales, ld, rows, 1, d); err != nil {
						t.Fatal(err)
					}
					pvRowsGeneric(o2, d, ps, 1, row, unitScale, ld, rows, 1, 0, d)
					o3, o4 := make([]float32, rows*d), make([]float32, rows*d)
					if err := PVRowsGather(o3, d, p, 1, k, scales, []int{0}, rows, 1, d); err != nil {
						t.Fatal(err)
					}
					pvRowsGatherGeneric(o4, d, ps, 1, k, unitScale, []int{0}, rows, 1, 0, d)
					for i := range o1 {
						if !sameFloat(o1[i], o2[i]) || !sameFloat(o3[i], o4[i]) {
							t.Fatalf("scale %v d %d start %d: output %d (code %#02x): PVRows %v, generic %v; gather %v, generic %v",
								sc, d, start, i, j*d+i%d, o1[i], o2[i], o3[i], o4[i])
						}
					}
				}
			}
		}
	}
}
