package attention_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
)

// TestMaskHiddenTileSkipped hides a whole tile of keys from every row with
// a mask and puts NaN in a value of that tile: a tile the mask covers is
// skipped like one outside a window, so the NaN must not reach any row
// (computed, it would, as 0·NaN), and the output must match the oracle.
func TestMaskHiddenTileSkipped(t *testing.T) { forEachImpl(t, testMaskHiddenTileSkipped) }

func testMaskHiddenTileSkipped(t *testing.T) {
	const hq, hkv, nq, nkv, d = 4, 2, 40, 96, 16
	rng := rand.New(rand.NewPCG(71, 72))
	q, k, v := randn(rng, hq*nq*d), randn(rng, hkv*nkv*d), randn(rng, hkv*nkv*d)
	v[(0*nkv+40)*d+3] = float32(math.NaN()) // K/V head 0, key 40: inside the hidden tile
	keep := make([]bool, nq*nkv)            // [1, 1, nq, nkv], broadcast over batch and heads
	for i := range nq {
		for j := range nkv {
			keep[i*nkv+j] = j < 32 || j >= 64
		}
	}
	for _, causal := range []bool{false, true} {
		e := mustEngine(t, attention.Config{BlockKV: 32})
		out := make([]float32, hq*nq*d)
		opts := attention.Options{
			Causal:   causal,
			BoolMask: attention.BoolMask{Layout: attention.BHSD(1, 1, nq, nkv), Data: keep},
		}
		require.NoError(t, e.Forward(
			attention.F32Tensor(out, attention.BHSD(1, hq, nq, d)),
			attention.F32Tensor(q, attention.BHSD(1, hq, nq, d)),
			attention.F32Tensor(k, attention.BHSD(1, hkv, nkv, d)),
			attention.F32Tensor(v, attention.BHSD(1, hkv, nkv, d)), opts))
		p := reference.Params{Batch: 1, HeadsQ: hq, HeadsKV: hkv, SeqQ: nq, SeqKV: nkv, Dim: d, Causal: causal,
			BoolMask: keep, BoolMaskShape: [4]int{1, 1, nq, nkv}}
		want, _, err := reference.Attention(p, reference.Float64s(q), reference.Float64s(k), reference.Float64s(v))
		require.NoError(t, err)
		for i, x := range out {
			require.False(t, math.IsNaN(float64(x)), "causal %v: element %d is NaN: the hidden tile was computed", causal, i)
		}
		assert.Less(t, reference.Compare(out, want).MaxAbs, 1e-5, "causal %v", causal)
	}
}
