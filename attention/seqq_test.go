package attention_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
)

// TestCuSeqQMoreQueriesThanKeys checks Options.CuSeqQ's rule for a
// sequence of more queries than keys (0 keys included): its rows and
// log-sum-exps are bitwise those of the uniform call for it alone, which
// gives the queries before its first position zeros and −Inf under the
// causal mask, with and without it, in both precisions.
func TestCuSeqQMoreQueriesThanKeys(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		const hq, hkv, d = 4, 2, 16
		rng := rand.New(rand.NewPCG(1, 1))
		pool := newVLLMPool(t, rng, attention.F16, false, hkv, d, 4, []int{0, 2, 9, 40})
		kv := pool.kv
		for _, c := range []struct {
			causal bool
			prec   attention.Precision
		}{{true, attention.PrecisionFloat32}, {false, attention.PrecisionFloat32}, {true, attention.PrecisionBFloat16}} {
			causal, prec := c.causal, c.prec
			for _, cu := range [][]int{{0, 3, 8, 9, 30}, {0, 1, 1, 20, 21}} {
				total := cu[4]
				ql := attention.BSHD(1, total, hq, d)
				q := randn(rng, ql.Span())
				out, lse := make([]float32, ql.Span()), make([]float32, hq*total)
				opts := attention.Options{Causal: causal, CuSeqQ: cu, Precision: prec}
				require.NoError(t, mustEngine(t, attention.Config{Threads: 2}).ForwardPagedKVLSE(attention.F32Tensor(out, ql), lse, attention.F32Tensor(q, ql), kv, opts))
				for s := range 4 {
					nq := cu[s+1] - cu[s]
					if nq == 0 {
						continue
					}
					one := attention.PagedKV{K: kv.K, V: kv.V, BlockTable: kv.BlockTable[s*kv.MaxBlocks:][:kv.MaxBlocks], MaxBlocks: kv.MaxBlocks, SeqLens: kv.SeqLens[s : s+1]}
					qv, ov := ql, attention.BHSD(1, hq, nq, d)
					qv.Seq = nq
					o1, l1 := make([]float32, ov.Span()), make([]float32, hq*nq)
					require.NoError(t, mustEngine(t, attention.Config{Threads: 2}).ForwardPagedKVLSE(attention.F32Tensor(o1, ov), l1, attention.F32Tensor(q[ql.Offset(0, 0, cu[s]):], qv), one, attention.Options{Causal: causal, Precision: prec}))
					for h := range hq {
						for i := range nq {
							requireSameBits(t, out[ql.Offset(0, h, cu[s]+i):][:d], o1[ov.Offset(0, h, i):][:d], "causal %v cu %v seq %d head %d row %d", causal, cu, s, h, i)
							requireSameBits(t, lse[h*total+cu[s]+i:][:1], l1[h*nq+i:][:1], "lse causal %v cu %v seq %d head %d row %d", causal, cu, s, h, i)
						}
					}
				}
			}
		}
	})
}
