package attention_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
)

func TestALiBiSlopesHandComputed(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []float32
	}{
		// Powers of two: 2^(−8/n), 2^(−16/n), …, 2^(−8).
		{1, []float32{1.0 / 256}},
		{2, []float32{1.0 / 16, 1.0 / 256}},
		{8, []float32{1.0 / 2, 1.0 / 4, 1.0 / 8, 1.0 / 16, 1.0 / 32, 1.0 / 64, 1.0 / 128, 1.0 / 256}},
		// n = 3: the 2-head slopes, then the first odd slope of the 4-head
		// schedule (2^(−2), 2^(−4), 2^(−6), 2^(−8)): 2^(−2).
		{3, []float32{1.0 / 16, 1.0 / 256, 1.0 / 4}},
		// n = 5: the 4-head slopes, then 2^(−1) from the 8-head schedule.
		{5, []float32{1.0 / 4, 1.0 / 16, 1.0 / 64, 1.0 / 256, 1.0 / 2}},
		// n = 12: the 8-head slopes, then the odd ones of the 16-head
		// schedule 2^(−k/2): 2^(−0.5), 2^(−1.5), 2^(−2.5), 2^(−3.5).
		{12, []float32{1.0 / 2, 1.0 / 4, 1.0 / 8, 1.0 / 16, 1.0 / 32, 1.0 / 64, 1.0 / 128, 1.0 / 256,
			0.70710678118654752, 0.35355339059327376, 0.17677669529663688, 0.088388347648318441}},
	} {
		got, err := attention.ALiBiSlopes(tc.n)
		require.NoError(t, err, "n = %d", tc.n)
		assert.Equal(t, tc.want, got, "n = %d", tc.n)
	}
}

// The Press et al. reference recursion, written out independently: for a
// power of two n the slopes are start·start^i with start = 2^(−8/n);
// otherwise the closest power of two's slopes followed by every other slope
// of twice that many heads.
func TestALiBiSlopesMatchRecursion(t *testing.T) {
	var slopes func(n int) []float64
	slopes = func(n int) []float64 {
		pow2 := func(n int) []float64 {
			start := math.Pow(2, -math.Pow(2, -(math.Log2(float64(n))-3)))
			s := make([]float64, n)
			for i := range s {
				s[i] = start * math.Pow(start, float64(i))
			}
			return s
		}
		if l := math.Log2(float64(n)); l == math.Floor(l) {
			return pow2(n)
		}
		c := 1 << int(math.Floor(math.Log2(float64(n))))
		var odd []float64
		for i, s := range slopes(2 * c) {
			if i%2 == 0 {
				odd = append(odd, s)
			}
		}
		return append(pow2(c), odd[:n-c]...)
	}
	for n := 1; n <= 100; n++ {
		got, err := attention.ALiBiSlopes(n)
		require.NoError(t, err)
		want := slopes(n)
		require.Len(t, got, n)
		for h := range n {
			assert.InEpsilon(t, want[h], float64(got[h]), 1e-6, "n = %d head %d", n, h)
			assert.True(t, got[h] > 0 && got[h] < 1, "n = %d head %d: %v", n, h, got[h])
		}
	}
}

func TestALiBiSlopesErrors(t *testing.T) {
	// Too many heads is an error too, not an allocation that takes the
	// process down.
	for _, n := range []int{0, -1, math.MinInt, attention.MaxALiBiHeads + 1, 1 << 40, math.MaxInt} {
		s, err := attention.ALiBiSlopes(n)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "attention: ALiBiSlopes: n is")
		assert.Contains(t, err.Error(), "heads; want 1 to MaxALiBiHeads (1048576)")
		assert.Nil(t, s)
	}
	s, err := attention.ALiBiSlopes(attention.MaxALiBiHeads)
	require.NoError(t, err)
	assert.Len(t, s, attention.MaxALiBiHeads)
}
