package attention_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/internal/impltest"
	"github.com/flashgo/flashgo/internal/tier"
)

// mixedCase is a batch of sequences with their own query counts over a
// caller's pool: query counts nqs, key counts in the pool.
type mixedCase struct {
	nqs, lens []int
}

// offsets returns the cumulative query offsets of nqs (Options.CuSeqQ).
func offsets(nqs []int) []int {
	cu := make([]int, len(nqs)+1)
	for s, n := range nqs {
		cu[s+1] = cu[s] + n
	}
	return cu
}

// seqView returns the view of the rows [q0, q0+nq) of a packed [1, Hq,
// totalQ, d] tensor laid out l (BSHD or BHSD): the tensor of one
// sequence's queries or outputs, batch 1.
func seqView(l attention.Layout, q0, nq int) (off int, v attention.Layout) {
	v = l
	v.Seq = nq
	return l.Offset(0, 0, q0), v
}

// checkMixedPerSequence computes each sequence of the mixed call alone, with
// ForwardPagedKVLSE of batch 1 and its own query count on engine e, and
// checks out and lse bitwise.
func checkMixedPerSequence(t *testing.T, what string, e *attention.Engine, pool *vllmPool, nqs []int, ql, ol attention.Layout, q, out, lse []float32, opts attention.Options) {
	t.Helper()
	cu := offsets(nqs)
	hq := ql.Heads
	totalQ := cu[len(nqs)]
	kv := pool.kv
	for s, nq := range nqs {
		if nq == 0 {
			continue
		}
		one := attention.PagedKV{K: kv.K, V: kv.V, BlockTable: kv.BlockTable[s*kv.MaxBlocks:][:kv.MaxBlocks], MaxBlocks: kv.MaxBlocks, SeqLens: kv.SeqLens[s : s+1]}
		qo, qv := seqView(ql, cu[s], nq)
		ov1 := attention.BHSD(1, hq, nq, ol.Dim)
		o1, l1 := make([]float32, ov1.Span()), make([]float32, hq*nq)
		require.NoError(t, e.ForwardPagedKVLSE(attention.F32Tensor(o1, ov1), l1, attention.F32Tensor(q[qo:], qv), one, opts), "%s seq %d", what, s)
		for h := range hq {
			for i := range nq {
				got := out[ol.Offset(0, h, cu[s]+i):][:ol.Dim]
				requireSameBits(t, got, o1[ov1.Offset(0, h, i):][:ol.Dim], "%s seq %d (nq %d, keys %d) head %d row %d out", what, s, nq, pool.lens[s], h, i)
			}
			requireSameBits(t, lse[h*totalQ+cu[s]:][:nq], l1[h*nq:][:nq], "%s seq %d head %d lse", what, s, h)
		}
	}
}

// TestPagedKVMixedMatchesPerSequence runs batches that mix decoding
// sequences and prefill chunks (Options.CuSeqQ) from a caller's pool and
// checks every output row and log-sum-exp bitwise against a call per
// sequence (batch 1, its own query count) on the same engine, for every
// implementation, both precisions, every K/V type, grouped-query
// attention, causal or not, one or three threads, with the automatic or a
// fixed split of long sequences.
func TestPagedKVMixedMatchesPerSequence(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			t.Run(prec.String(), inPrecision(prec, testPagedKVMixedMatchesPerSequence))
		}
	})
}

func testPagedKVMixedMatchesPerSequence(t *testing.T) {
	rng := rand.New(rand.NewPCG(201, 202))
	const hkv, d, bs = 2, 32, 16
	// Query counts 0, 1, 3, 17, 64 and more, keys not multiples of the
	// block or tile sizes; a long decode the automatic split cuts, an
	// empty sequence, one whose queries are all its keys.
	cases := []mixedCase{
		{nqs: []int{1, 0, 3, 17, 1, 64, 130, 1, 0}, lens: []int{37, 20, 3, 100, 1300, 71, 300, 1, 0}},
		{nqs: []int{1, 1, 1, 1, 1, 1, 512, 200}, lens: []int{90, 1025, 7, 2100, 33, 600, 700, 250}},
	}
	dts := kvTypesQ8
	if raceEnabled {
		// The race detector slows the grid tenfold: one batch, two types.
		cases, dts = cases[:1], []attention.DType{attention.F16, attention.Q8}
	}
	for ci, mc := range cases {
		for _, dt := range dts {
			perHead := dt == attention.F16 // vLLM's layout (heads interleaved, fused decode) but for one type
			pool := newVLLMPool(t, rng, dt, perHead, hkv, d, bs, mc.lens)
			for _, g := range []int{1, 3} {
				hq := g * hkv
				cu := offsets(mc.nqs)
				totalQ := cu[len(mc.nqs)]
				ql := attention.BSHD(1, totalQ, hq, d)
				q := randn(rng, ql.Span())
				for _, causal := range []bool{true, false} {
					for _, cfg := range []attention.Config{{Threads: 1}, {Threads: 3}, {Threads: 3, KVSplits: 3, BlockKV: 48}} {
						what := fmt.Sprintf("case %d %v g %d causal %v %+v", ci, dt, g, causal, cfg)
						if !tier.Keep(t, what, 48) {
							continue
						}
						e := mustEngine(t, cfg)
						opts := attention.Options{Causal: causal, Precision: precisionUnderTest, CuSeqQ: cu}
						out, lse := make([]float32, ql.Span()), make([]float32, hq*totalQ)
						require.NoError(t, e.ForwardPagedKVLSE(attention.F32Tensor(out, ql), lse, attention.F32Tensor(q, ql), pool.kv, opts))
						opts.CuSeqQ = nil
						checkMixedPerSequence(t, what, e, pool, mc.nqs, ql, ql, q, out, lse, opts)
					}
				}
			}
		}
	}
}

// TestPagedKVMixedAllocs checks that a serving step of decoding sequences
// and prefill chunks in one call allocates nothing once the engine has
// seen the shape, in both precisions, through every entry point that
// takes per-sequence query counts.
func TestPagedKVMixedAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("SKIP: the race detector allocates")
	}
	rng := rand.New(rand.NewPCG(203, 204))
	const hkv, hq, d, bs = 2, 8, 64, 16
	nqs, lens := []int{1, 1, 0, 40, 1, 3}, []int{100, 2000, 9, 333, 1, 50}
	pool := newVLLMPool(t, rng, attention.BF16, false, hkv, d, bs, lens)
	cu := offsets(nqs)
	totalQ := cu[len(nqs)]
	ql := attention.BSHD(1, totalQ, hq, d)
	q := randn(rng, ql.Span())
	out, lse := make([]float32, ql.Span()), make([]float32, hq*totalQ)
	pc, err := attention.NewPagedCache(attention.BF16, hkv, d, bs, 400)
	require.NoError(t, err)
	var seqs []attention.SeqID
	var caches []*attention.KVCache
	for s, n := range lens {
		seqs = append(seqs, pc.NewSequence())
		kc, err := attention.NewKVCache(attention.BF16, hkv, n, d)
		require.NoError(t, err)
		if n > 0 {
			k, v := chunkTensor(pool.seqK[s], hkv, n, d), chunkTensor(pool.seqV[s], hkv, n, d)
			require.NoError(t, pc.Append(seqs[s], k, v))
			require.NoError(t, kc.Append(k, v))
		}
		caches = append(caches, kc)
	}
	for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
		e := mustEngine(t, attention.Config{Threads: 3})
		opts := attention.Options{Causal: true, CuSeqQ: cu, Precision: prec}
		o, qt := attention.F32Tensor(out, ql), attention.F32Tensor(q, ql)
		for name, step := range map[string]func() error{
			"ForwardPagedKVLSE":  func() error { return e.ForwardPagedKVLSE(o, lse, qt, pool.kv, opts) },
			"ForwardPagedLSE":    func() error { return e.ForwardPagedLSE(o, lse, qt, pc, seqs, opts) },
			"ForwardKVCachesLSE": func() error { return e.ForwardKVCachesLSE(o, lse, qt, caches, opts) },
		} {
			require.NoError(t, step())
			if n := testing.AllocsPerRun(20, func() {
				if err := step(); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Fatalf("%s %v with Options.CuSeqQ allocates %v times a step; want 0", name, prec, n)
			}
		}
	}
}

// TestPagedKVMixedErrors checks the misuses of per-sequence query counts
// with a caller's pool: each is an error that names the argument, and
// nothing is written.
func TestPagedKVMixedErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(205, 206))
	const hkv, hq, d, bs = 2, 4, 32, 4
	pool := newVLLMPool(t, rng, attention.F16, false, hkv, d, bs, []int{5, 9, 2})
	e := mustEngine(t, attention.Config{})
	const totalQ = 6
	ql := attention.BHSD(1, hq, totalQ, d)
	q := randn(rng, ql.Span())
	for _, c := range []struct {
		name string
		q    attention.Layout
		opts attention.Options
		want string
	}{
		{"empty", ql, attention.Options{CuSeqQ: []int{}}, "attention: ForwardPagedKV: Options.CuSeqQ is empty; want number of sequences + 1 offsets starting at 0"},
		{"start", ql, attention.Options{CuSeqQ: []int{1, 2, 4, 6}}, "Options.CuSeqQ[0] is 1; want 0"},
		{"decreasing", ql, attention.Options{CuSeqQ: []int{0, 3, 2, 6}}, "Options.CuSeqQ[2] is 2, less than CuSeqQ[1] = 3; want non-decreasing offsets"},
		{"short", ql, attention.Options{CuSeqQ: []int{0, 1, 2, 5}}, "Options.CuSeqQ[3] is 5; want Nq = 6 (the packed length)"},
		{"long", ql, attention.Options{CuSeqQ: []int{0, 1, 2, 7}}, "Options.CuSeqQ[3] is 7; want Nq = 6"},
		{"too few sequences", ql, attention.Options{CuSeqQ: []int{0, 1, 6}}, "kv.SeqLens has 3 lengths and Options.CuSeqQ 3 offsets (2 sequences); want one length per sequence"},
		{"too many sequences", ql, attention.Options{CuSeqQ: []int{0, 1, 2, 3, 6}}, "kv.SeqLens has 3 lengths and Options.CuSeqQ 5 offsets (4 sequences)"},
		{"key offsets", ql, attention.Options{CuSeqQ: []int{0, 1, 2, 6}, CuSeqKV: []int{0, 5, 14, 16}}, "Options.CuSeqKV is not supported"},
		{"batch", attention.BHSD(2, hq, totalQ/2, d), attention.Options{CuSeqQ: []int{0, 1, 2, 3}}, "q has batch 2 with Options.CuSeqQ set; want 1"},
	} {
		out, lse := impltest.Filled(len(q), outGuard), impltest.Filled(hq*totalQ, outGuard)
		err := e.ForwardPagedKVLSE(attention.F32Tensor(out, c.q), lse, attention.F32Tensor(q, c.q), pool.kv, c.opts)
		require.ErrorContains(t, err, c.want, c.name)
		require.ErrorContains(t, err, "attention: ForwardPagedKV: ", c.name)
		require.True(t, sameBits(out, impltest.Filled(len(q), outGuard)), "%s: out written on error", c.name)
		require.True(t, sameBits(lse, impltest.Filled(hq*totalQ, outGuard)), "%s: lse written on error", c.name)
	}
	// As many queries as keys, and sequences of no queries, are fine.
	out := make([]float32, len(q))
	require.NoError(t, e.ForwardPagedKV(attention.F32Tensor(out, ql), attention.F32Tensor(q, ql), pool.kv, attention.Options{Causal: true, CuSeqQ: []int{0, 0, 4, 6}}))
}

// TestPagedMixedMatchesPerSequence checks ForwardPagedKV, ForwardPaged and
// ForwardKVCaches with per-sequence query counts bitwise against the same
// entry point called for each sequence alone, with every option that
// applies per sequence (window, soft-capping, sinks, ALiBi, Q8 queries),
// engines of small query blocks and wide tiles, for every
// implementation, both precisions and every K/V type.
func TestPagedMixedMatchesPerSequence(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			t.Run(prec.String(), inPrecision(prec, testPagedMixedMatchesPerSequence))
		}
	})
}

func testPagedMixedMatchesPerSequence(t *testing.T) {
	rng := rand.New(rand.NewPCG(207, 208))
	const hkv, hq, d, bs = 4, 8, 32, 16
	nqs, lens := []int{1, 0, 17, 3, 1, 64, 1, 2}, []int{37, 5, 100, 3, 1300, 71, 1, 600}
	cu := offsets(nqs)
	totalQ := cu[len(nqs)]
	ql := attention.BHSD(1, hq, totalQ, d)
	q := randn(rng, ql.Span())
	dts, optNames := kvTypesQ8, []string{"causal", "none", "window", "softcap", "sinks", "alibi", "q8 queries"}
	if raceEnabled {
		// The race detector slows the grid tenfold.
		dts, optNames = []attention.DType{attention.BF16, attention.Q8}, []string{"causal", "sinks", "q8 queries"}
	}
	for _, dt := range dts {
		pool := newVLLMPool(t, rng, dt, false, hkv, d, bs, lens)
		pc, err := attention.NewPagedCache(dt, hkv, d, bs, 200)
		require.NoError(t, err)
		var seqs []attention.SeqID
		var caches []*attention.KVCache
		for s, n := range lens {
			k, v := chunkTensor(pool.seqK[s], hkv, n, d), chunkTensor(pool.seqV[s], hkv, n, d)
			id := pc.NewSequence()
			require.NoError(t, pc.Append(id, k, v))
			kc, err := attention.NewKVCache(dt, hkv, n, d)
			require.NoError(t, err)
			require.NoError(t, kc.Append(k, v))
			seqs, caches = append(seqs, id), append(caches, kc)
		}
		for _, opt := range optNames {
			opts := attention.Options{Causal: opt != "none", Precision: precisionUnderTest, CuSeqQ: cu}
			switch opt {
			case "window":
				opts.Window = &attention.Window{Left: 10, Right: 0}
			case "softcap":
				opts.SoftCap = 2
			case "sinks":
				opts.Sinks = randn(rng, hq)
			case "alibi":
				opts.Slopes, _ = attention.ALiBiSlopes(hq)
			case "q8 queries":
				if dt != attention.Q8 || precisionUnderTest != attention.PrecisionFloat32 {
					continue
				}
				opts.QuantizeQuery = true
			}
			one := opts
			one.CuSeqQ = nil
			// Threads 8: the decoding sequences' heads fused in groups of 2.
			for _, cfg := range []attention.Config{{Threads: 1}, {Threads: 8}, {Threads: 2, BlockQ: 4, BlockKV: 512}, {Threads: 3, KVSplits: 5, BlockKV: 512}} {
				if !tier.Keep(t, fmt.Sprintf("%v %s %+v", dt, opt, cfg), 32) {
					continue
				}
				e := mustEngine(t, cfg)
				for _, ep := range []struct {
					name  string
					mixed func(o attention.Tensor, lse []float32) error
					alone func(s int, o, q attention.Tensor, lse []float32) error
				}{
					{"ForwardPagedKV", func(o attention.Tensor, lse []float32) error {
						return e.ForwardPagedKVLSE(o, lse, attention.F32Tensor(q, ql), pool.kv, opts)
					}, func(s int, o, q attention.Tensor, lse []float32) error {
						kv := pool.kv
						kv.BlockTable, kv.SeqLens = kv.BlockTable[s*kv.MaxBlocks:][:kv.MaxBlocks], kv.SeqLens[s:s+1]
						return e.ForwardPagedKVLSE(o, lse, q, kv, one)
					}},
					{"ForwardPaged", func(o attention.Tensor, lse []float32) error {
						return e.ForwardPagedLSE(o, lse, attention.F32Tensor(q, ql), pc, seqs, opts)
					}, func(s int, o, q attention.Tensor, lse []float32) error {
						return e.ForwardPagedLSE(o, lse, q, pc, seqs[s:s+1], one)
					}},
					{"ForwardKVCaches", func(o attention.Tensor, lse []float32) error {
						return e.ForwardKVCachesLSE(o, lse, attention.F32Tensor(q, ql), caches, opts)
					}, func(s int, o, q attention.Tensor, lse []float32) error {
						return e.ForwardKVCachesLSE(o, lse, q, caches[s:s+1], one)
					}},
				} {
					out, lse := make([]float32, ql.Span()), make([]float32, hq*totalQ)
					require.NoError(t, ep.mixed(attention.F32Tensor(out, ql), lse))
					for s, nq := range nqs {
						if nq == 0 {
							continue
						}
						qo, qv := seqView(ql, cu[s], nq)
						l1 := attention.BHSD(1, hq, nq, d)
						o1, s1 := make([]float32, l1.Span()), make([]float32, hq*nq)
						require.NoError(t, ep.alone(s, attention.F32Tensor(o1, l1), attention.F32Tensor(q[qo:], qv), s1))
						for h := range hq {
							what := fmt.Sprintf("%s %v %s %+v seq %d head %d", ep.name, dt, opt, cfg, s, h)
							requireSameBits(t, out[ql.Offset(0, h, cu[s]):][:nq*d], o1[l1.Offset(0, h, 0):][:nq*d], "%s out", what)
							requireSameBits(t, lse[h*totalQ+cu[s]:][:nq], s1[h*nq:][:nq], "%s lse", what)
						}
					}
				}
			}
		}
	}
}

// BenchmarkPagedKVMixed measures one continuous-batching step from a
// caller's pool in vLLM's layout (Hq 32, Hkv 8, d 128, f16 blocks of 16)
// over eight sequences of 512 to 4096 positions. step=mixed: six decode a
// token each while two prefill a chunk of 512 (one from position 0, one
// after 1,024 cached positions); step=decode: all eight decode a token.
// cuseqq=true is one ForwardPagedKV call with Options.CuSeqQ; cuseqq=false
// is the calls that step needs without it: one for the decoding sequences
// (a batch of one query each) and one per prefill chunk.
func BenchmarkPagedKVMixed(b *testing.B) {
	const hkv, hq, d, bs = 8, 32, 128, 16
	lens := []int{700, 4096, 1500, 2048, 3000, 1024, 512, 1536}
	rng := rand.New(rand.NewPCG(209, 210))
	pool := newVLLMPool(b, rng, attention.F16, false, hkv, d, bs, lens)
	kv := pool.kv
	for _, sc := range []struct {
		name    string
		decodes int // the first decodes sequences decode; the others prefill 512
	}{{"mixed", 6}, {"decode", 8}} {
		nqs := make([]int, len(lens))
		for s := range nqs {
			nqs[s] = 1
			if s >= sc.decodes {
				nqs[s] = 512
			}
		}
		cu := offsets(nqs)
		totalQ := cu[len(nqs)]
		ql := attention.BSHD(1, totalQ, hq, d)
		q := randn(rng, ql.Span())
		out := make([]float32, ql.Span())
		dkv := kv
		dkv.BlockTable, dkv.SeqLens = kv.BlockTable[:sc.decodes*kv.MaxBlocks], kv.SeqLens[:sc.decodes]
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			for _, packed := range []bool{true, false} {
				b.Run(fmt.Sprintf("step=%s/%v/cuseqq=%v", sc.name, prec, packed), func(b *testing.B) {
					e := mustEngine(b, attention.Config{})
					opts := attention.Options{Causal: true, Precision: prec}
					step := func() {
						if packed {
							o := opts
							o.CuSeqQ = cu
							if err := e.ForwardPagedKV(attention.F32Tensor(out, ql), attention.F32Tensor(q, ql), kv, o); err != nil {
								b.Fatal(err)
							}
							return
						}
						// The decodes as a batch of one query each: the first
						// rows of the packed tensor, batch entry s at token s.
						dl := attention.BSHD(sc.decodes, 1, hq, d)
						if err := e.ForwardPagedKV(attention.F32Tensor(out, dl), attention.F32Tensor(q, dl), dkv, opts); err != nil {
							b.Fatal(err)
						}
						for s := sc.decodes; s < len(nqs); s++ {
							one := kv
							one.BlockTable, one.SeqLens = kv.BlockTable[s*kv.MaxBlocks:][:kv.MaxBlocks], kv.SeqLens[s:s+1]
							off, l := seqView(ql, cu[s], nqs[s])
							if err := e.ForwardPagedKV(attention.F32Tensor(out[off:], l), attention.F32Tensor(q[off:], l), one, opts); err != nil {
								b.Fatal(err)
							}
						}
					}
					step()
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						step()
					}
				})
			}
		}
	}
}
