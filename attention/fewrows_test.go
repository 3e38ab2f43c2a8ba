package attention_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/internal/tier"
	"github.com/stretchr/testify/require"
)

// TestBF16FewRowsIsFloat32 checks Precision's promise for calls of few
// query rows: where ComputedPrecision says float32, a call in
// PrecisionBFloat16 returns the output and log-sum-exp of the same call in
// PrecisionFloat32, bit for bit, through Forward, ForwardKVCaches and
// ForwardPagedKV, for every K/V type and implementation; where it says
// bfloat16 (more rows), the two differ.
func TestBF16FewRowsIsFloat32(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(131, 132))
		shapes := []struct{ hq, hkv, nq int }{
			{1, 1, 1}, {4, 1, 4}, {8, 2, 3}, {32, 8, 1}, {16, 1, 1}, // few rows
			{4, 1, 5}, {17, 1, 1}, {2, 2, 40}, // more
		}
		const d, bs = 96, 16 // a multiple of Q8Block, for the q8 caches
		lens := []int{1, 37, 300}
		for _, sh := range shapes {
			few := attention.ComputedPrecision(attention.Options{Precision: attention.PrecisionBFloat16}, sh.hq, sh.hkv, sh.nq) == attention.PrecisionFloat32
			for _, dt := range kvTypesQ8 {
				name := fmt.Sprintf("Hq %d Hkv %d Nq %d %v", sh.hq, sh.hkv, sh.nq, dt)
				B := len(lens)
				q := randn(rng, B*sh.hq*sh.nq*d)
				l := attention.BHSD(B, sh.hq, sh.nq, d)
				pool := newVLLMPool(t, rng, dt, false, sh.hkv, d, bs, lens)
				caches, _, _ := fillCaches(t, rng, dt, sh.hkv, d, lens)
				if !tier.Keep(t, name, 4) {
					continue // drawn first: a cell has the same inputs in both tiers
				}
				calls := map[string]func(prec attention.Precision) ([]float32, []float32){
					"Forward": func(prec attention.Precision) ([]float32, []float32) {
						// The last sequence alone, its K and V as one view.
						n, last := lens[B-1], (B-1)*sh.hq*sh.nq*d
						kv, l1 := attention.BHSD(1, sh.hkv, n, d), attention.BHSD(1, sh.hq, sh.nq, d)
						kt, vt := typedTensor(t, dt, pool.seqK[B-1], kv), typedTensor(t, dt, pool.seqV[B-1], kv)
						out, lse := make([]float32, sh.hq*sh.nq*d), make([]float32, sh.hq*sh.nq)
						require.NoError(t, mustEngine(t, attention.Config{}).ForwardLSE(attention.F32Tensor(out, l1), lse,
							attention.F32Tensor(q[last:][:len(out)], l1), kt, vt, attention.Options{Causal: true, Precision: prec}))
						return out, lse
					},
					"ForwardKVCaches": func(prec attention.Precision) ([]float32, []float32) {
						out, lse := make([]float32, len(q)), make([]float32, B*sh.hq*sh.nq)
						require.NoError(t, mustEngine(t, attention.Config{}).ForwardKVCachesLSE(attention.F32Tensor(out, l), lse,
							attention.F32Tensor(q, l), caches, attention.Options{Causal: true, Precision: prec}))
						return out, lse
					},
					"ForwardPagedKV": func(prec attention.Precision) ([]float32, []float32) {
						out, lse := make([]float32, len(q)), make([]float32, B*sh.hq*sh.nq)
						require.NoError(t, mustEngine(t, attention.Config{}).ForwardPagedKVLSE(attention.F32Tensor(out, l), lse,
							attention.F32Tensor(q, l), pool.kv, attention.Options{Causal: true, Precision: prec}))
						return out, lse
					},
				}
				for entry, call := range calls {
					o32, l32 := call(attention.PrecisionFloat32)
					o16, l16 := call(attention.PrecisionBFloat16)
					same := sameBits(o32, o16) && sameBits(l32, l16)
					if few {
						require.True(t, same, "%s %s: bf16 precision differs from float32 on a call of few rows", entry, name)
					} else {
						require.False(t, same, "%s %s: bf16 precision equals float32 on a call of many rows", entry, name)
					}
				}
			}
		}
	})
}
