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
// splits=0 is the automatic choice, splits=1 none. paged=true reads a
// PagedCache of 16-position blocks filled by one Append (its blocks are
// neighbours in the pool, and the kernels read them in runs of a tile);
// paged=frag one whose blocks are not (every block is a run of its own).
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
				paged  string
				splits int
			}{{"false", 1}, {"true", 1}, {"frag", 1}, {"false", 0}, {"true", 0}, {"frag", 0}, {"false", 8}} {
				paged := cf.paged != "false"
				b.Run(fmt.Sprintf("%v/n%d/paged=%s/splits=%d", dt, n, cf.paged, cf.splits), func(b *testing.B) {
					rng := rand.New(rand.NewPCG(81, 82))
					k, v := randChunk(rng, dt, hkv, n, d)
					e := mustEngine(b, attention.Config{KVSplits: cf.splits})
					q := attention.F32Tensor(randn(rng, hq*d), attention.BHSD(1, hq, 1, d))
					out := attention.F32Tensor(make([]float32, hq*d), q.Layout)
					opts := attention.Options{Causal: true}
					b.SetBytes(int64(2 * hkv * n * d * dt.Size()))
					if paged {
						pc, err := attention.NewPagedCache(dt, hkv, d, 16, 2*(n/16+1))
						if err != nil {
							b.Fatal(err)
						}
						id := pc.NewSequence()
						if cf.paged == "true" {
							// One Append: the sequence's blocks are neighbours in the pool.
							if err := pc.Append(id, chunkTensor(k, hkv, n, d), chunkTensor(v, hkv, n, d)); err != nil {
								b.Fatal(err)
							}
						} else {
							// A block at a time beside another sequence, freed at
							// the end: no two of its blocks are neighbours.
							other := pc.NewSequence()
							for p0 := 0; p0 < n; p0 += 16 {
								m := min(16, n-p0)
								kc, vc := headRows(k, hkv, n, d, p0, m), headRows(v, hkv, n, d, p0, m)
								for _, s := range []attention.SeqID{id, other} {
									if err := pc.Append(s, chunkTensor(kc, hkv, m, d), chunkTensor(vc, hkv, m, d)); err != nil {
										b.Fatal(err)
									}
								}
							}
							if err := pc.Free(other); err != nil {
								b.Fatal(err)
							}
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

// headRows copies positions [p0, p0+m) of every head of x ([hkv, n, d]) as
// [hkv, m, d].
func headRows(x []float32, hkv, n, d, p0, m int) []float32 {
	out := make([]float32, 0, hkv*m*d)
	for h := range hkv {
		out = append(out, x[(h*n+p0)*d:(h*n+p0+m)*d]...)
	}
	return out
}

// BenchmarkKVCachesBatch measures one decode step of 8 requests (Hq 32,
// Hkv 8, d 128, f16 caches of 512 to 4096 positions): batch=true is one
// ForwardKVCaches call over the 8 caches, batch=false one Forward call a
// cache. MB/s is the cached K and V read.
func BenchmarkKVCachesBatch(b *testing.B) {
	const hq, hkv, d = 32, 8, 128
	lens := []int{512, 4096, 1024, 2048, 700, 3000, 1500, 2500}
	rng := rand.New(rand.NewPCG(91, 92))
	caches := make([]*attention.KVCache, len(lens))
	bytes := 0
	for i, n := range lens {
		kc, err := attention.NewKVCache(attention.F16, hkv, n, d)
		if err != nil {
			b.Fatal(err)
		}
		k, v := randChunk(rng, attention.F16, hkv, n, d)
		if err := kc.Append(chunkTensor(k, hkv, n, d), chunkTensor(v, hkv, n, d)); err != nil {
			b.Fatal(err)
		}
		caches[i] = kc
		bytes += 2 * hkv * n * d * 2
	}
	B := len(caches)
	q := randn(rng, B*hq*d)
	out := make([]float32, len(q))
	for _, batch := range []bool{true, false} {
		b.Run(fmt.Sprintf("batch=%v", batch), func(b *testing.B) {
			e := mustEngine(b, attention.Config{})
			step := func() {
				if batch {
					l := attention.BSHD(B, 1, hq, d)
					if err := e.ForwardKVCaches(attention.F32Tensor(out, l), attention.F32Tensor(q, l), caches, attention.Options{Causal: true}); err != nil {
						b.Fatal(err)
					}
					return
				}
				l := attention.BSHD(1, 1, hq, d)
				for i, kc := range caches {
					if err := e.Forward(attention.F32Tensor(out[i*hq*d:], l), attention.F32Tensor(q[i*hq*d:], l), kc.K(), kc.V(), attention.Options{Causal: true}); err != nil {
						b.Fatal(err)
					}
				}
			}
			step()
			b.SetBytes(int64(bytes))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				step()
			}
		})
	}
}
