package attention_test

import (
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/attention"
)

// BenchmarkPagedKVWrite times a serving step's write of new keys and
// values into fp16, bf16, q8, fp8 and f32 pools (Llama-3-8B's K/V heads:
// 8 of dim 128, blocks of 16) for a decode step of 64 sequences and a
// prefill chunk of 512 tokens, from float32 rows in the projection's
// layout, at slots scattered over the pool. The bytes are those stored
// (keys and values, Q8 scales included), so GB/s is the pool's write
// bandwidth.
func BenchmarkPagedKVWrite(b *testing.B) {
	const hkv, d, bs, blocks = 8, 128, 16, 1024
	for _, tokens := range []int{64, 512} {
		for _, st := range storageTypes {
			ks, vs := st.kScale, st.vScale
			if ks != nil {
				ks, vs = make([]float32, hkv), make([]float32, hkv)
				for h := range ks {
					ks[h], vs[h] = 0.01, 0.01
				}
				if st.dt == attention.FP8E5M2 {
					ks, vs = ks[:1], vs[:1]
				}
			}
			b.Run(st.dt.String()+"/"+itoa(tokens), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				pl := attention.BSHD(blocks, bs, hkv, d)
				kv := attention.PagedKV{K: zeroStorage(st.dt, pl, ks), V: zeroStorage(st.dt, pl, vs)}
				rows := attention.BSHD(1, tokens, hkv, d)
				k := attention.F32Tensor(randn(rng, rows.Span()), rows)
				v := attention.F32Tensor(randn(rng, rows.Span()), rows)
				slots := make([]int32, tokens)
				for i, s := range rng.Perm(blocks * bs)[:tokens] {
					slots[i] = int32(s)
				}
				elem := float64(st.dt.Size())
				if st.dt == attention.Q8 {
					elem += 4.0 / attention.Q8Block
				}
				b.SetBytes(int64(2 * float64(tokens*hkv*d) * elem))
				b.ReportAllocs()
				for b.Loop() {
					if err := kv.Write(k, v, slots); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func itoa(n int) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}
