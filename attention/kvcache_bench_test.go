package attention_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/attention"
)

// BenchmarkKVCacheDecode measures one decode step (Nq = 1, Llama-3-8B
// heads: Hq 32, Hkv 8, d 128) over a cache of n positions. The bytes are
// those of the cached K and V that the step reads, so MB/s is the cache
// read bandwidth. splits=8 is split-KV decoding (Config.KVSplits): with
// one sequence of 8 K/V heads, only 8 threads have work without it;
// splits=0 is the automatic choice, splits=1 none.
//
// The loops use b.N rather than b.Loop: a b.Loop benchmark runs its whole
// loop in the first, probing call, which the testing package makes before
// it sets GOMAXPROCS for the first -cpu value, so `-cpu 1,16` would time
// the first row with the default GOMAXPROCS.
func BenchmarkKVCacheDecode(b *testing.B) {
	const hq, hkv, d = 32, 8, 128
	for _, dt := range []attention.DType{attention.F16, attention.F32, attention.Q8} {
		for _, n := range []int{1024, 8192} {
			for _, cf := range []struct {
				paged  bool
				splits int
			}{{false, 1}, {true, 1}, {false, 0}, {true, 0}, {false, 8}} {
				paged := cf.paged
				b.Run(fmt.Sprintf("%v/n%d/paged=%v/splits=%d", dt, n, paged, cf.splits), func(b *testing.B) {
					rng := rand.New(rand.NewPCG(81, 82))
					k, v := randChunk(rng, dt, hkv, n, d)
					e := mustEngine(b, attention.Config{KVSplits: cf.splits})
					q := attention.F32Tensor(randn(rng, hq*d), attention.BHSD(1, hq, 1, d))
					out := attention.F32Tensor(make([]float32, hq*d), q.Layout)
					opts := attention.Options{Causal: true}
					b.SetBytes(int64(2 * hkv * n * d * dt.Size()))
					if paged {
						pc, err := attention.NewPagedCache(dt, hkv, d, 16, n/16+1)
						if err != nil {
							b.Fatal(err)
						}
						id := pc.NewSequence()
						if err := pc.Append(id, chunkTensor(k, hkv, n, d), chunkTensor(v, hkv, n, d)); err != nil {
							b.Fatal(err)
						}
						ids := []attention.SeqID{id}
						b.ResetTimer()
						for range b.N {
							if err := e.ForwardPaged(out, q, pc, ids, opts); err != nil {
								b.Fatal(err)
							}
						}
						return
					}
					c, err := attention.NewKVCache(dt, hkv, n, d)
					if err != nil {
						b.Fatal(err)
					}
					if err := c.Append(chunkTensor(k, hkv, n, d), chunkTensor(v, hkv, n, d)); err != nil {
						b.Fatal(err)
					}
					b.ResetTimer()
					for range b.N {
						if err := e.Forward(out, q, c.K(), c.V(), opts); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
