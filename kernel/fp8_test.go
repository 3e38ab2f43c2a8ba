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
