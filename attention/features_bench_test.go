package attention_test

import (
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
)

// benchCall times one call shape; flops is the work the GFLOP/s figure
// counts.
func benchCall(b *testing.B, p reference.Params, opts attention.Options, flops float64) {
	rng := rand.New(rand.NewPCG(1, 1))
	q := attention.F32Tensor(randn(rng, p.QLen()), attention.BHSD(p.Batch, p.HeadsQ, p.SeqQ, p.Dim))
	kvl := attention.BHSD(p.Batch, p.HeadsKV, p.SeqKV, p.Dim)
	k := attention.F32Tensor(randn(rng, p.KVLen()), kvl)
	v := attention.F32Tensor(randn(rng, p.KVLen()), kvl)
	out := attention.F32Tensor(make([]float32, p.QLen()), q.Layout)
	timeForward(b, mustEngine(b, attention.Config{}), out, q, k, v, opts, flops)
}

// BenchmarkWindow runs P3 (Hq 32, Hkv 8, d 128, Nq = Nkv = 4096) with a
// causal sliding window of 512 keys (Mistral) and, for comparison, with the
// full causal mask. GFLOP/s counts only the visible (query, key) pairs:
// 4·Hq·d per pair.
func BenchmarkWindow(b *testing.B) {
	p := benchShapes[2].p
	const w = 512
	pairs := 0.0
	for i := range p.SeqQ {
		pairs += float64(min(i+1, w))
	}
	flops := 4 * float64(p.HeadsQ*p.Dim) * pairs
	b.Run("P3/window=512", func(b *testing.B) {
		benchCall(b, p, attention.Options{Causal: true, Window: &attention.Window{Left: w - 1, Right: 0}}, flops)
	})
	b.Run("P3/causal", func(b *testing.B) {
		full := 4 * float64(p.HeadsQ*p.Dim) * float64(p.SeqQ) * float64(p.SeqQ+1) / 2
		benchCall(b, p, attention.Options{Causal: true}, full)
	})
}

// BenchmarkGQA runs P1 (Hq 32 sharing Hkv 8) against the same problem as
// 32 independent heads (K/V repeated, Hkv 32): sharing each K/V tile among
// a group's 4 heads must not be slower.
func BenchmarkGQA(b *testing.B) {
	p := benchShapes[0].p
	b.Run("P1/gqa", func(b *testing.B) { benchCall(b, p, attention.Options{Causal: true}, p.FLOPs()) })
	p.HeadsKV = p.HeadsQ
	b.Run("P1/mha", func(b *testing.B) { benchCall(b, p, attention.Options{Causal: true}, p.FLOPs()) })
}

// BenchmarkFeatures times P1 with the logit modifiers and a mask on, and
// plain P1 beside them, to show what the per-element pass costs.
func BenchmarkFeatures(b *testing.B) {
	p := benchShapes[0].p
	slopes, _ := attention.ALiBiSlopes(p.HeadsQ)
	sinks := make([]float32, p.HeadsQ)
	b.Run("P1/plain", func(b *testing.B) { benchCall(b, p, attention.Options{Causal: true}, p.FLOPs()) })
	b.Run("P1/softcap", func(b *testing.B) { benchCall(b, p, attention.Options{Causal: true, SoftCap: 50}, p.FLOPs()) })
	// A cap of 2 puts a fifth of the unit-normal scaled scores past the
	// tanh kernel's branch point, so nearly every vector takes its
	// exponential: the kernel's worst case.
	b.Run("P1/softcap=2", func(b *testing.B) { benchCall(b, p, attention.Options{Causal: true, SoftCap: 2}, p.FLOPs()) })
	b.Run("P1/alibi+sinks", func(b *testing.B) {
		benchCall(b, p, attention.Options{Causal: true, Slopes: slopes, Sinks: sinks}, p.FLOPs())
	})
	mask := attention.F32Tensor(make([]float32, p.SeqQ*p.SeqKV), attention.BHSD(1, 1, p.SeqQ, p.SeqKV))
	b.Run("P1/mask", func(b *testing.B) { benchCall(b, p, attention.Options{Causal: true, Mask: mask}, p.FLOPs()) })
}
