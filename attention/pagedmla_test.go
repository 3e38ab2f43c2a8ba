package attention_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/internal/tier"
	"github.com/stretchr/testify/require"
)

// TestPagedKVMLA reads an MLA cache from a paged pool as vLLM stores one:
// a single pool of latent rows of head dim D whose first Dv values are the
// values, passed as K and as a view of K of head dim Dv. Every output and
// log-sum-exp must be bitwise Forward's over the same sequence held
// contiguously (K of dim D and V the view of it), for every K/V type,
// implementation and precision, decode and a few draft tokens, with and
// without the keys split.
func TestPagedKVMLA(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			t.Run(prec.String(), inPrecision(prec, testPagedKVMLA))
		}
	})
}

func testPagedKVMLA(t *testing.T) {
	rng := rand.New(rand.NewPCG(141, 142))
	lens := []int{37, 1, 0, 300}
	for _, dims := range []struct{ d, dv int }{{96, 64}, {576, 512}} {
		d, dv := dims.d, dims.dv
		for _, dt := range kvTypesQ8 {
			const hkv, bs = 1, 16
			pool := newVLLMPool(t, rng, dt, false, hkv, d, bs, lens)
			kv := pool.kv
			kv.V = kv.K
			kv.V.Dim = dv // the first dv values of each latent row
			for _, hq := range []int{4, 16} {
				for _, nq := range []int{1, 3} {
					for _, splits := range []int{1, 0} {
						e := mustEngine(t, attention.Config{KVSplits: splits})
						opts := attention.Options{Causal: true, Precision: precisionUnderTest}
						B := len(lens)
						q := randn(rng, B*hq*nq*d)
						if !tier.Keep(t, fmt.Sprintf("%v d %d dv %d hq %d nq %d splits %d", dt, d, dv, hq, nq, splits), 6) {
							continue // drawn first: a cell has the same inputs in both tiers
						}
						ql, ol := attention.BHSD(B, hq, nq, d), attention.BHSD(B, hq, nq, dv)
						out, lse := make([]float32, B*hq*nq*dv), make([]float32, B*hq*nq)
						require.NoError(t, e.ForwardPagedKVLSE(attention.F32Tensor(out, ol), lse, attention.F32Tensor(q, ql), kv, opts))
						for b, n := range lens {
							k := typedTensor(t, dt, pool.seqK[b], attention.BHSD(1, hkv, n, d))
							v := k
							v.Dim = dv
							l1, o1l := attention.BHSD(1, hq, nq, d), attention.BHSD(1, hq, nq, dv)
							o1, s1 := make([]float32, hq*nq*dv), make([]float32, hq*nq)
							require.NoError(t, e.ForwardLSE(attention.F32Tensor(o1, o1l), s1, attention.F32Tensor(q[b*hq*nq*d:][:hq*nq*d], l1), k, v, opts))
							what := fmt.Sprintf("%v d %d dv %d hq %d nq %d splits %d seq %d", dt, d, dv, hq, nq, splits, b)
							requireSameBits(t, out[b*hq*nq*dv:][:hq*nq*dv], o1, "%s out", what)
							requireSameBits(t, lse[b*hq*nq:][:hq*nq], s1, "%s lse", what)
						}
					}
				}
			}
		}
	}
}
