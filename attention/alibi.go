package attention

import (
	"fmt"
	"math"
	"math/bits"
)

// MaxALiBiHeads is the most heads ALiBiSlopes gives slopes for (4 MiB of
// them), far more than any model has: a larger n is an error rather than
// an allocation that would take the process down.
const MaxALiBiHeads = 1 << 20

// ALiBiSlopes returns the per-head slopes of ALiBi (Press, Smith and Lewis,
// "Train Short, Test Long: Attention with Linear Biases Enables Input Length
// Extrapolation", 2022) for n heads, in the schedule of the paper's code, of
// Hugging Face's models and of llama.cpp (max_bias 8). With m the largest
// power of two not above n,
//
//	slope[h]     = 2^(−8·(h+1)/m)       for h = 0 .. m−1
//	slope[m+k]   = 2^(−4·(2k+1)/m)      for k = 0 .. n−m−1
//
// so a power of two n gets the geometric sequence 2^(−8/n), 2^(−16/n), …,
// 2^(−8), and any other n takes the m-head sequence followed by every other
// slope (the odd ones) of the 2m-head sequence. For example n = 8 gives 1/2,
// 1/4, …, 1/256, and n = 12 adds 2^(−0.5), 2^(−1.5), 2^(−2.5), 2^(−3.5).
// Each slope is the float32 nearest the exact power of two.
//
// Query head h adds −slope[h]·|i' − j| to the logit of key j, where i' is
// the query's position on the diagonal (i + Nkv − Nq with the bottom-right
// alignment); for the keys a causal row sees that is slope[h]·(j − i') <= 0.
//
// It returns an error for n < 1 and for n > MaxALiBiHeads.
func ALiBiSlopes(n int) ([]float32, error) {
	if n < 1 || n > MaxALiBiHeads {
		return nil, fmt.Errorf("attention: ALiBiSlopes: n is %d heads; want 1 to MaxALiBiHeads (%d)", n, MaxALiBiHeads)
	}
	m := 1 << (bits.Len(uint(n)) - 1)
	s := make([]float32, n)
	for h := range m {
		s[h] = float32(math.Exp2(-8 * float64(h+1) / float64(m)))
	}
	for k := range n - m {
		s[m+k] = float32(math.Exp2(-4 * float64(2*k+1) / float64(m)))
	}
	return s, nil
}
