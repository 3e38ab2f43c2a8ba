package attention_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/internal/tier"
)

// TestSplitKVDecode checks split-KV decoding against the oracle, for
// contiguous and paged caches, and that for a fixed split count every
// thread count and both cache kinds give bitwise the same result.
func TestSplitKVDecode(t *testing.T) { forEachImpl(t, testSplitKVDecode) }

func testSplitKVDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	const hkv, d = 2, 32
	lens := []int{0, 3, 64, 65, 300, 1000}
	dts, splitCounts, optNames := kvTypesQ8, []int{2, 3, 8}, []string{"causal", "window", "sinks"}
	if raceEnabled {
		// The race detector slows the oracle tenfold; the merges of the
		// parts are the same for every type and option.
		dts, splitCounts, optNames = []attention.DType{attention.F16, attention.Q8}, []int{3}, []string{"sinks"}
	}
	for _, dt := range dts {
		for _, splits := range splitCounts {
			for _, g := range []int{1, 4} {
				for _, nq := range []int{1, 5} {
					for _, opt := range optNames {
						hq := g * hkv
						B := len(lens)
						pc, err := attention.NewPagedCache(dt, hkv, d, 16, 200)
						require.NoError(t, err)
						ids := make([]attention.SeqID, B)
						models := make([]*modelSeq, B)
						for s, n := range lens {
							ids[s], models[s] = pc.NewSequence(), newModelSeq(hkv)
							k, v := randChunk(rng, dt, hkv, n, d)
							require.NoError(t, pc.Append(ids[s], chunkTensor(k, hkv, n, d), chunkTensor(v, hkv, n, d)))
							models[s].add(k, v, n, d)
						}
						opts := attention.Options{Causal: true, Precision: precisionUnderTest}
						p := reference.Params{Batch: 1, HeadsQ: hq, HeadsKV: hkv, SeqQ: nq, Dim: d, Causal: true}
						switch opt {
						case "window":
							opts.Window = &attention.Window{Left: 100, Right: 0}
							p.Window, p.WindowLeft, p.WindowRight = true, 100, 0
						case "sinks":
							opts.Sinks = randn(rng, hq)
							p.Sinks = reference.Float64s(opts.Sinks)
						}
						q := randn(rng, B*hq*nq*d)
						if !tier.Keep(t, fmt.Sprintf("%v splits%d g%d nq%d %s", dt, splits, g, nq, opt), 24) {
							continue // drawn first: a cell has the same inputs in both tiers
						}
						ql := attention.BHSD(B, hq, nq, d)
						var ref, refLSE []float32
						for _, threads := range []int{1, 2, 5} {
							e := mustEngine(t, attention.Config{KVSplits: splits, Threads: threads, BlockKV: 32})
							out, lse := make([]float32, len(q)), make([]float32, B*hq*nq)
							require.NoError(t, e.ForwardPagedLSE(attention.F32Tensor(out, ql), lse, attention.F32Tensor(q, ql), pc, ids, opts))
							what := fmt.Sprintf("%v splits%d g%d nq%d %s threads%d", dt, splits, g, nq, opt, threads)
							if ref == nil {
								ref, refLSE = out, lse
							} else {
								requireSameBits(t, out, ref, "%s out vs 1 thread", what)
								requireSameBits(t, lse, refLSE, "%s lse vs 1 thread", what)
							}
							for s, n := range lens {
								qs := q[s*hq*nq*d:][:hq*nq*d]
								os := out[s*hq*nq*d:][:hq*nq*d]
								k, v := models[s].canonical()
								// The same data as a contiguous Forward: bitwise equal.
								l1 := attention.BHSD(1, hq, nq, d)
								o1, lse1 := make([]float32, hq*nq*d), make([]float32, hq*nq)
								require.NoError(t, e.ForwardLSE(attention.F32Tensor(o1, l1), lse1, attention.F32Tensor(qs, l1),
									storedTensor(dt, k, hkv, n, d), storedTensor(dt, v, hkv, n, d), opts))
								requireSameBits(t, os, o1, "%s seq%d paged vs contiguous", what, s)
								requireSameBits(t, lse[s*hq*nq:][:hq*nq], lse1, "%s seq%d lse paged vs contiguous", what, s)
								if threads > 1 {
									continue
								}
								p.SeqKV = n
								checkPrecisionError(t, fmt.Sprintf("%s seq%d", what, s), p, qs, k, v, os, lse[s*hq*nq:][:hq*nq], 2e-5, 1e-4)
							}
						}
					}
				}
			}
		}
	}
}

func TestSplitKVConfig(t *testing.T) {
	_, err := attention.NewEngine(attention.Config{KVSplits: -1})
	require.ErrorContains(t, err, "KVSplits")
}

// TestSplitKVNoAllocations checks that split-KV decode steps allocate
// nothing once warm.
func TestSplitKVNoAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(93, 94))
	const hq, hkv, d, n = 8, 2, 64, 2000
	e := mustEngine(t, attention.Config{Threads: 4, KVSplits: 4})
	c, err := attention.NewKVCache(attention.F16, hkv, n, d)
	require.NoError(t, err)
	k, v := randChunk(rng, attention.F16, hkv, n, d)
	require.NoError(t, c.Append(chunkTensor(k, hkv, n, d), chunkTensor(v, hkv, n, d)))
	q := attention.F32Tensor(randn(rng, hq*d), attention.BHSD(1, hq, 1, d))
	out := attention.F32Tensor(make([]float32, hq*d), q.Layout)
	lse := make([]float32, hq)
	step := func() {
		require.NoError(t, e.ForwardLSE(out, lse, q, c.K(), c.V(), attention.Options{Causal: true}))
	}
	step()
	if allocs := testing.AllocsPerRun(50, step); allocs != 0 {
		t.Errorf("split-KV decode step allocates %v times", allocs)
	}
}
