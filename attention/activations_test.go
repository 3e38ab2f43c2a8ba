package attention_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/fp16"
)

// TestReducedPrecisionActivations runs queries and outputs stored as
// binary16 and bfloat16: the engine widens the queries as it
// gathers them and rounds each output row as it writes it, so the output is
// bitwise the float32 output of the same (exactly widened) queries,
// rounded to nearest even, and the log-sum-exps are bitwise the same.
// Prefill and decode, causal windows, GQA, both compute precisions, 1 and
// 3 threads, Forward and ForwardPaged, odd head dims.
func TestReducedPrecisionActivations(t *testing.T) {
	rng := rand.New(rand.NewPCG(151, 152))
	type shape struct{ b, hq, hkv, nq, nk, d int }
	for _, sh := range []shape{{2, 4, 2, 37, 37, 8}, {1, 6, 2, 1, 300, 33}, {1, 2, 1, 130, 200, 64}} {
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			for _, threads := range []int{1, 3} {
				qf := randn(rng, sh.b*sh.hq*sh.nq*sh.d)
				k, v := randn(rng, sh.b*sh.hkv*sh.nk*sh.d), randn(rng, sh.b*sh.hkv*sh.nk*sh.d)
				ql := attention.BSHD(sh.b, sh.nq, sh.hq, sh.d)
				kvl := attention.BHSD(sh.b, sh.hkv, sh.nk, sh.d)
				kT, vT := attention.F32Tensor(k, kvl), attention.F32Tensor(v, kvl)
				opts := attention.Options{Causal: true, Window: &attention.Window{Left: 50, Right: -1}, Precision: prec}
				e := mustEngine(t, attention.Config{Threads: threads, BlockQ: 32, BlockKV: 48})
				for _, qt := range []attention.DType{attention.F16, attention.BF16} {
					// The queries as stored, and their exact float32 values.
					var q attention.Tensor
					wide := make([]float32, len(qf))
					switch qt {
					case attention.F16:
						h := fp16.Float16s(qf)
						q = attention.F16Tensor(h, ql)
						for i, x := range h {
							wide[i] = x.Float32()
						}
					default:
						h := make([]fp16.BFloat16, len(qf))
						for i, x := range qf {
							h[i] = fp16.BFloat16FromFloat32(x)
							wide[i] = h[i].Float32()
						}
						q = attention.BF16Tensor(h, ql)
					}
					want := make([]float32, len(qf))
					wantLSE := make([]float32, sh.b*sh.hq*sh.nq)
					require.NoError(t, e.ForwardLSE(attention.F32Tensor(want, ql), wantLSE, attention.F32Tensor(wide, ql), kT, vT, opts))
					for _, ot := range []attention.DType{attention.F32, attention.F16, attention.BF16} {
						lse := make([]float32, len(wantLSE))
						var out attention.Tensor
						o16 := make([]fp16.Float16, len(qf))
						ob16 := make([]fp16.BFloat16, len(qf))
						o32 := make([]float32, len(qf))
						switch ot {
						case attention.F16:
							out = attention.F16Tensor(o16, ql)
						case attention.BF16:
							out = attention.BF16Tensor(ob16, ql)
						default:
							out = attention.F32Tensor(o32, ql)
						}
						require.NoError(t, e.ForwardLSE(out, lse, q, kT, vT, opts))
						for i, w := range want {
							var g, r uint32
							switch ot {
							case attention.F16:
								g, r = uint32(o16[i]), uint32(fp16.FromFloat32(w))
							case attention.BF16:
								g, r = uint32(ob16[i]), uint32(fp16.BFloat16FromFloat32(w))
							default:
								g, r = math.Float32bits(o32[i]), math.Float32bits(w)
							}
							require.Equal(t, r, g, "%+v %v threads %d q %v out %v: out[%d]", sh, prec, threads, qt, ot, i)
						}
						for i := range lse {
							require.Equal(t, math.Float32bits(wantLSE[i]), math.Float32bits(lse[i]), "lse[%d]", i)
						}
					}
				}
			}
		}
	}
}

// TestReducedPrecisionPaged checks ForwardPaged with bfloat16 queries and
// binary16 outputs against Forward over the same keys with float32 ones.
func TestReducedPrecisionPaged(t *testing.T) {
	rng := rand.New(rand.NewPCG(153, 154))
	const hq, hkv, nq, nk, d = 4, 2, 5, 70, 16
	c, err := attention.NewPagedCache(attention.F32, hkv, d, 16, 8)
	require.NoError(t, err)
	seq := c.NewSequence()
	k, v := randn(rng, nk*hkv*d), randn(rng, nk*hkv*d)
	kvl := attention.BSHD(1, nk, hkv, d)
	require.NoError(t, c.Append(seq, attention.F32Tensor(k, kvl), attention.F32Tensor(v, kvl)))
	ql := attention.BSHD(1, nq, hq, d)
	qb := make([]fp16.BFloat16, nq*hq*d)
	wide := make([]float32, len(qb))
	for i, x := range randn(rng, len(qb)) {
		qb[i] = fp16.BFloat16FromFloat32(x)
		wide[i] = qb[i].Float32()
	}
	e := mustEngine(t, attention.Config{Threads: 2})
	opts := attention.Options{Causal: true}
	want := make([]float32, len(qb))
	require.NoError(t, e.ForwardPaged(attention.F32Tensor(want, ql), attention.F32Tensor(wide, ql), c, []attention.SeqID{seq}, opts))
	got := make([]fp16.Float16, len(qb))
	require.NoError(t, e.ForwardPaged(attention.F16Tensor(got, ql), attention.BF16Tensor(qb, ql), c, []attention.SeqID{seq}, opts))
	for i, w := range want {
		require.Equal(t, fp16.FromFloat32(w), got[i], "out[%d]", i)
	}
}

// TestActivationTypeErrors checks that Q8 queries or outputs are refused,
// naming the argument, and that nothing is written.
func TestActivationTypeErrors(t *testing.T) {
	const d = 32
	l := attention.BHSD(1, 1, 2, d)
	f := attention.F32Tensor(make([]float32, 2*d), l)
	q8 := attention.Q8Tensor(make([]int8, 2*d), make([]float32, 2), l)
	e := mustEngine(t, attention.Config{})
	err := e.Forward(f, q8, f, f, attention.Options{})
	require.ErrorContains(t, err, "attention: q has element type q8; want f32, f16 or bf16")
	out := make([]int8, 2*d)
	for i := range out {
		out[i] = 7
	}
	err = e.Forward(attention.Q8Tensor(out, make([]float32, 2), l), f, f, f, attention.Options{})
	require.ErrorContains(t, err, "attention: out has element type q8; want f32, f16 or bf16")
	for _, x := range out {
		require.Equal(t, int8(7), x)
	}
}
