package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/internal/tier"
)

// bshdOf returns x, [B, H, S, D], as a tensor of type dt in the [B, S, H,
// D] layout (every head of a position together), and the same values in
// the [B, H, S, D] layout.
func bshdOf(t *testing.T, x []float32, dt attention.DType, b, h, s, d int) (bshd, bhsd attention.Tensor) {
	t.Helper()
	y := make([]float32, len(x))
	for bi := range b {
		for hi := range h {
			for si := range s {
				copy(y[((bi*s+si)*h+hi)*d:][:d], x[((bi*h+hi)*s+si)*d:][:d])
			}
		}
	}
	lS, lH := attention.BSHD(b, s, h, d), attention.BHSD(b, h, s, d)
	switch dt {
	case attention.F16:
		return attention.F16Tensor(fp16.Float16s(y), lS), attention.F16Tensor(fp16.Float16s(x), lH)
	case attention.BF16:
		return attention.BF16Tensor(fp16.BFloat16s(y), lS), attention.BF16Tensor(fp16.BFloat16s(x), lH)
	case attention.Q8:
		// Q8 blocks lie within a row of d, so quantising either order
		// gives the same rows.
		return q8Of(t, y, lS), q8Of(t, x, lH)
	}
	return attention.F32Tensor(y, lS), attention.F32Tensor(x, lH)
}

// TestFusedHeadsMatchPerHead checks that decoding over K/V laid out
// [B, S, H, D], where workers fold several K/V heads together, gives the
// bits of the same values laid out [B, H, S, D], head by head: every
// implementation, element type, precision, feature and thread count.
func TestFusedHeadsMatchPerHead(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(131, 132))
		shapes := []struct{ b, hq, hkv, nq, nkv, d int }{
			{1, 8, 2, 1, 100, 64}, {2, 6, 3, 2, 777, 32}, {3, 4, 4, 3, 65, 160}, {1, 32, 8, 1, 2000, 128}, {1, 16, 16, 1, 3000, 96},
		}
		threadCounts := []int{1, 3, 16}
		if raceEnabled {
			shapes, threadCounts = shapes[:3], []int{1, 3} // the race detector slows every load
		}
		for _, sh := range shapes {
			q := randn(rng, sh.b*sh.hq*sh.nq*sh.d)
			k, v := randn(rng, sh.b*sh.hkv*sh.nkv*sh.d), randn(rng, sh.b*sh.hkv*sh.nkv*sh.d)
			ql := attention.BHSD(sh.b, sh.hq, sh.nq, sh.d)
			for _, dt := range []attention.DType{attention.F32, attention.F16, attention.BF16, attention.Q8} {
				kS, kH := bshdOf(t, k, dt, sh.b, sh.hkv, sh.nkv, sh.d)
				vS, vH := bshdOf(t, v, dt, sh.b, sh.hkv, sh.nkv, sh.d)
				slopes := make([]float32, sh.hq)
				for h := range slopes {
					slopes[h] = float32(math.Exp2(-float64(h + 1)))
				}
				for oi, opts := range []attention.Options{
					{},
					{Causal: true, SoftCap: 20, Slopes: slopes},
					{Causal: true, Window: &attention.Window{Left: 50, Right: 0}},
					{Precision: attention.PrecisionBFloat16},
					{QuantizeQuery: dt == attention.Q8},
				} {
					for _, threads := range threadCounts {
						what := fmt.Sprintf("%+v %v options %d threads %d", sh, dt, oi, threads)
						if !tier.Keep(t, what, 16) {
							continue
						}
						e := mustEngine(t, attention.Config{Threads: threads})
						want, got := make([]float32, len(q)), make([]float32, len(q))
						wantL, gotL := make([]float32, sh.b*sh.hq*sh.nq), make([]float32, sh.b*sh.hq*sh.nq)
						require.NoError(t, e.ForwardLSE(attention.F32Tensor(want, ql), wantL, attention.F32Tensor(q, ql), kH, vH, opts), what)
						require.NoError(t, e.ForwardLSE(attention.F32Tensor(got, ql), gotL, attention.F32Tensor(q, ql), kS, vS, opts), what)
						require.Equal(t, want, got, "%s: outputs", what)
						require.Equal(t, wantL, gotL, "%s: log-sum-exps", what)
					}
				}
			}
		}
	})
}

// TestFusedHeadsNoAllocations checks that a decode step over [B, S, H, D]
// K/V allocates nothing once the engine has run one.
func TestFusedHeadsNoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("SKIP: the race detector allocates")
	}
	rng := rand.New(rand.NewPCG(133, 134))
	const hq, hkv, n, d = 16, 8, 3000, 64
	q := randn(rng, hq*d)
	kS, _ := bshdOf(t, randn(rng, hkv*n*d), attention.F16, 1, hkv, n, d)
	vS, _ := bshdOf(t, randn(rng, hkv*n*d), attention.F16, 1, hkv, n, d)
	ql := attention.BHSD(1, hq, 1, d)
	out := make([]float32, len(q))
	for _, threads := range []int{1, 4} {
		e := mustEngine(t, attention.Config{Threads: threads})
		step := func() {
			if err := e.Forward(attention.F32Tensor(out, ql), attention.F32Tensor(q, ql), kS, vS, attention.Options{Causal: true}); err != nil {
				t.Fatal(err)
			}
		}
		step()
		if a := testing.AllocsPerRun(20, step); a != 0 {
			t.Fatalf("%d threads: %v allocations a step; want 0", threads, a)
		}
	}
}
