package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/internal/impltest"
	"github.com/flashgo/flashgo/internal/tier"
)

// fillCaches returns one KVCache of type dt per length, filled with
// random rows, and the canonical [hkv, n, d] float32 values each holds.
func fillCaches(t testing.TB, rng *rand.Rand, dt attention.DType, hkv, d int, lens []int) (caches []*attention.KVCache, ks, vs [][]float32) {
	t.Helper()
	for _, n := range lens {
		kc, err := attention.NewKVCache(dt, hkv, n+3, d)
		require.NoError(t, err)
		k, v := randChunk(rng, dt, hkv, n, d)
		if n > 0 {
			require.NoError(t, kc.Append(chunkTensor(k, hkv, n, d), chunkTensor(v, hkv, n, d)))
		}
		caches, ks, vs = append(caches, kc), append(ks, k), append(vs, v)
	}
	return caches, ks, vs
}

// TestKVCachesMatchesForward decodes a batch of caches of different
// lengths (one of them empty, one listed twice) in one call and checks
// that every output and log-sum-exp is bitwise the one of ForwardLSE over
// that cache's K() and V(), for every implementation, both precisions,
// several thread counts and options, with the keys not split (KVSplits 1)
// and split into 3 runs.
func TestKVCachesMatchesForward(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			t.Run(prec.String(), inPrecision(prec, testKVCachesMatchesForward))
		}
	})
}

func testKVCachesMatchesForward(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	const hkv, d = 2, 32
	lens := []int{1, 37, 0, 130, 200, 3}
	for _, dt := range kvTypesQ8 {
		caches, _, _ := fillCaches(t, rng, dt, hkv, d, lens)
		caches = append(caches, caches[1]) // the same cache twice
		B := len(caches)
		for _, g := range []int{1, 3} {
			for _, nq := range []int{1, 3} {
				for _, threads := range []int{1, 3} {
					for _, splits := range []int{1, 3} {
						for _, opt := range []string{"causal", "window", "softcap+alibi", "sinks"} {
							hq := g * hkv
							e := mustEngine(t, attention.Config{BlockKV: 32, Threads: threads, KVSplits: splits})
							opts := attention.Options{Causal: true, Precision: precisionUnderTest}
							switch opt {
							case "window":
								opts.Window = &attention.Window{Left: 40, Right: 0}
							case "softcap+alibi":
								opts.SoftCap = 3
								opts.Slopes, _ = attention.ALiBiSlopes(hq)
							case "sinks":
								opts.Sinks = randn(rng, hq)
							}
							q := randn(rng, B*hq*nq*d)
							if !tier.Keep(t, fmt.Sprintf("%v g%d nq%d threads%d splits%d %s", dt, g, nq, threads, splits, opt), 6) {
								continue // drawn first: a cell has the same inputs in both tiers
							}
							l := attention.BSHD(B, nq, hq, d)
							out, lse := make([]float32, len(q)), make([]float32, B*hq*nq)
							require.NoError(t, e.ForwardKVCachesLSE(attention.F32Tensor(out, l), lse, attention.F32Tensor(q, l), caches, opts))
							for s, kc := range caches {
								if kc.Len() < nq && opts.Window == nil {
									// Fewer keys than queries: Forward over the
									// cache's K and V is the same problem.
								}
								l1 := attention.BSHD(1, nq, hq, d)
								o1, s1 := make([]float32, hq*nq*d), make([]float32, hq*nq)
								require.NoError(t, e.ForwardLSE(attention.F32Tensor(o1, l1), s1,
									attention.F32Tensor(q[s*nq*hq*d:], l1), kc.K(), kc.V(), opts))
								what := fmt.Sprintf("%v g%d nq%d threads%d splits%d %s cache%d", dt, g, nq, threads, splits, opt, s)
								requireSameBits(t, out[s*nq*hq*d:][:nq*hq*d], o1, "%s out", what)
								requireSameBits(t, lse[s*hq*nq:][:hq*nq], s1, "%s lse", what)
							}
						}
					}
				}
			}
		}
	}
}

// TestKVCachesOracle checks ForwardKVCaches against the float64 oracle,
// cache by cache, with the engine's default configuration (automatic
// split of the keys) and odd sizes.
func TestKVCachesOracle(t *testing.T) {
	for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
		t.Run(prec.String(), inPrecision(prec, testKVCachesOracle))
	}
}

func testKVCachesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(83, 84))
	const hkv, hq, d = 3, 6, 64
	lens := []int{1, 5, 600, 0, 1500}
	for _, dt := range kvTypesQ8 {
		caches, ks, vs := fillCaches(t, rng, dt, hkv, d, lens)
		for _, nq := range []int{1, 4} {
			for _, opt := range []string{"causal", "window", "softcap", "alibi", "sinks"} {
				opts := attention.Options{Causal: true, Precision: precisionUnderTest}
				var slopes, sinks []float32
				switch opt {
				case "window":
					opts.Window = &attention.Window{Left: 100, Right: 0}
				case "softcap":
					opts.SoftCap = 2
				case "alibi":
					slopes, _ = attention.ALiBiSlopes(hq)
					opts.Slopes = slopes
				case "sinks":
					sinks = randn(rng, hq)
					opts.Sinks = sinks
				}
				B := len(caches)
				q := randn(rng, B*hq*nq*d)
				if !tier.Keep(t, fmt.Sprintf("%v nq %d %s", dt, nq, opt), 4) {
					continue // drawn first: a cell has the same inputs in both tiers
				}
				l := attention.BHSD(B, hq, nq, d)
				out, lse := make([]float32, len(q)), make([]float32, B*hq*nq)
				require.NoError(t, mustEngine(t, attention.Config{}).ForwardKVCachesLSE(attention.F32Tensor(out, l), lse, attention.F32Tensor(q, l), caches, opts))
				for s, n := range lens {
					p := reference.Params{Batch: 1, HeadsQ: hq, HeadsKV: hkv, SeqQ: nq, SeqKV: n, Dim: d, Causal: true, SoftCap: float64(opts.SoftCap)}
					if opts.Window != nil {
						p.Window, p.WindowLeft, p.WindowRight = true, opts.Window.Left, opts.Window.Right
					}
					if slopes != nil {
						p.Slopes = reference.Float64s(slopes)
					}
					if sinks != nil {
						p.Sinks = reference.Float64s(sinks)
					}
					what := fmt.Sprintf("%v nq %d %s cache %d (len %d)", dt, nq, opt, s, n)
					checkPrecisionError(t, what, p, q[s*hq*nq*d:][:hq*nq*d], ks[s], vs[s], out[s*hq*nq*d:][:hq*nq*d], lse[s*hq*nq:][:hq*nq], 2e-5, 1e-4)
				}
			}
		}
	}
}

// TestKVCachesErrors checks that every misuse of ForwardKVCaches returns
// an error naming what is wrong and writes nothing.
func TestKVCachesErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(85, 86))
	const hkv, hq, d, nq = 2, 4, 32, 1
	caches, _, _ := fillCaches(t, rng, attention.F16, hkv, d, []int{3, 9})
	other, _, _ := fillCaches(t, rng, attention.BF16, hkv, d, []int{4})
	wide, _, _ := fillCaches(t, rng, attention.F16, 4, d, []int{4})
	e := mustEngine(t, attention.Config{})
	q := randn(rng, 2*hq*nq*d)
	l := attention.BHSD(2, hq, nq, d)
	mask := attention.F32Tensor(make([]float32, 9), attention.BHSD(1, 1, 1, 9))
	for _, c := range []struct {
		name   string
		caches []*attention.KVCache
		q      attention.Tensor
		opts   attention.Options
		lse    []float32
		want   string
	}{
		{"nil cache", []*attention.KVCache{caches[0], nil}, attention.F32Tensor(q, l), attention.Options{}, nil, "caches[1] is nil"},
		{"zero cache", []*attention.KVCache{caches[0], {}}, attention.F32Tensor(q, l), attention.Options{}, nil, "caches[1] is a zero KVCache"},
		{"mixed types", []*attention.KVCache{caches[0], other[0]}, attention.F32Tensor(q, l), attention.Options{}, nil, "want every cache the same"},
		{"mixed heads", []*attention.KVCache{caches[0], wide[0]}, attention.F32Tensor(q, l), attention.Options{}, nil, "want every cache the same"},
		{"batch", caches[:1], attention.F32Tensor(q, l), attention.Options{}, nil, "q has batch 2 and caches has 1"},
		{"dim", caches, attention.F32Tensor(q, attention.BHSD(2, hq, 2*nq, d/2)), attention.Options{}, nil, "head dim 16 and the caches 32"},
		{"heads", caches, attention.F32Tensor(q, attention.BHSD(2, 3, nq, d)), attention.Options{}, nil, "q has 3 heads and the caches 2"},
		{"mask", caches, attention.F32Tensor(q, l), attention.Options{Mask: mask}, nil, "Options.Mask and Options.BoolMask are not supported"},
		{"varlen batch", caches, attention.F32Tensor(q, l), attention.Options{CuSeqQ: []int{0, 1}}, nil, "q has batch 2 with Options.CuSeqQ set; want 1"},
		{"key offsets", caches, attention.F32Tensor(q, l), attention.Options{CuSeqQ: []int{0, 1}, CuSeqKV: []int{0, 1}}, nil, "Options.CuSeqKV is not supported"},
		{"window", caches, attention.F32Tensor(q, l), attention.Options{Window: &attention.Window{Left: -2}}, nil, "Window"},
		{"lse", caches, attention.F32Tensor(q, l), attention.Options{}, make([]float32, 3), "lse"},
	} {
		out := impltest.Filled(2*hq*nq*d, float32(math.NaN()))
		var err error
		if c.lse != nil {
			err = e.ForwardKVCachesLSE(attention.F32Tensor(out, l), c.lse, c.q, c.caches, c.opts)
		} else {
			err = e.ForwardKVCaches(attention.F32Tensor(out, l), c.q, c.caches, c.opts)
		}
		require.ErrorContains(t, err, c.want, c.name)
		require.ErrorContains(t, err, "attention: ", c.name)
		for i, x := range out {
			require.True(t, math.IsNaN(float64(x)), "%s: out[%d] written on error", c.name, i)
		}
	}
	require.ErrorContains(t, e.ForwardKVCachesLSE(attention.F32Tensor(make([]float32, len(q)), l), nil, attention.F32Tensor(q, l), caches, attention.Options{}), "lse is nil")
	// No caches and no queries is an empty batch, not an error.
	require.NoError(t, e.ForwardKVCaches(attention.F32Tensor(nil, attention.BHSD(0, hq, nq, d)), attention.F32Tensor(nil, attention.BHSD(0, hq, nq, d)), nil, attention.Options{}))
}

// TestKVCachesAllocs checks that a decode step over five caches allocates
// nothing once the engine has seen the shape.
func TestKVCachesAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("SKIP: the race detector allocates")
	}
	rng := rand.New(rand.NewPCG(87, 88))
	const hkv, hq, d = 2, 8, 64
	caches, _, _ := fillCaches(t, rng, attention.F16, hkv, d, []int{100, 7, 1000, 0, 333})
	e := mustEngine(t, attention.Config{Threads: 3})
	B := len(caches)
	q := randn(rng, B*hq*d)
	out, lse := make([]float32, len(q)), make([]float32, B*hq)
	l := attention.BSHD(B, 1, hq, d)
	step := func() {
		if err := e.ForwardKVCachesLSE(attention.F32Tensor(out, l), lse, attention.F32Tensor(q, l), caches, attention.Options{Causal: true}); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if n := testing.AllocsPerRun(20, step); n != 0 {
		t.Fatalf("ForwardKVCaches allocates %v times a step; want 0", n)
	}
}

// TestKVCachesConcurrent decodes different sets of caches from several
// goroutines with one engine and checks each result against a call made
// alone (run it with -race).
func TestKVCachesConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(89, 90))
	const hkv, hq, d = 2, 4, 32
	caches, _, _ := fillCaches(t, rng, attention.BF16, hkv, d, []int{50, 3, 400, 77, 1})
	e := mustEngine(t, attention.Config{Threads: 2})
	sets := [][]*attention.KVCache{caches[:2], caches[1:4], {caches[4], caches[0], caches[4]}, caches}
	qs := make([][]float32, len(sets))
	wants := make([][]float32, len(sets))
	for i, set := range sets {
		qs[i] = randn(rng, len(set)*hq*d)
		wants[i] = make([]float32, len(qs[i]))
		l := attention.BHSD(len(set), hq, 1, d)
		require.NoError(t, e.ForwardKVCaches(attention.F32Tensor(wants[i], l), attention.F32Tensor(qs[i], l), set, attention.Options{Causal: true}))
	}
	var wg sync.WaitGroup
	errs := make([]error, 4*len(sets))
	outs := make([][]float32, len(errs))
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := w % len(sets)
			outs[w] = make([]float32, len(qs[i]))
			l := attention.BHSD(len(sets[i]), hq, 1, d)
			for range 5 {
				if errs[w] = e.ForwardKVCaches(attention.F32Tensor(outs[w], l), attention.F32Tensor(qs[i], l), sets[i], attention.Options{Causal: true}); errs[w] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	for w, err := range errs {
		require.NoError(t, err)
		requireSameBits(t, outs[w], wants[w%len(sets)], "goroutine %d", w)
	}
}
