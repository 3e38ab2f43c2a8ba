package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/fp16"
)

// detCase is a call whose result must not depend on the thread count:
// shape [batch, hq, nq, d] queries over [batch, hkv, nkv, d] keys.
type detCase struct {
	name                   string
	batch, hq, hkv, nq, nk int
	d                      int
	opts                   attention.Options
	cfg                    attention.Config
}

// run computes the case's output and lse with t threads: over tensors, or
// over a paged cache of 16-position blocks when paged is set.
func (dc detCase) run(tb testing.TB, q, k, v []float32, threads int, paged bool) ([]float32, []float32) {
	tb.Helper()
	cfg := dc.cfg
	cfg.Threads = threads
	e, err := attention.NewEngine(cfg)
	require.NoError(tb, err)
	ql := attention.BHSD(dc.batch, dc.hq, dc.nq, dc.d)
	out := make([]float32, len(q))
	lse := make([]float32, dc.batch*dc.hq*dc.nq)
	qt := attention.F32Tensor(q, ql)
	ot := attention.F32Tensor(out, ql)
	if !paged {
		kl := attention.BHSD(dc.batch, dc.hkv, dc.nk, dc.d)
		kt := attention.BF16Tensor(fp16.BFloat16s(k), kl)
		vt := attention.BF16Tensor(fp16.BFloat16s(v), kl)
		require.NoError(tb, e.ForwardLSE(ot, lse, qt, kt, vt, dc.opts))
		return out, lse
	}
	per := dc.hkv * dc.nk * dc.d
	cache, err := attention.NewPagedCache(attention.BF16, dc.hkv, dc.d, 16, dc.batch*((dc.nk+15)/16+1))
	require.NoError(tb, err)
	seqs := make([]attention.SeqID, dc.batch)
	kl := attention.BHSD(1, dc.hkv, dc.nk, dc.d)
	for b := range seqs {
		seqs[b] = cache.NewSequence()
		kb := attention.BF16Tensor(fp16.BFloat16s(k[b*per:(b+1)*per]), kl)
		vb := attention.BF16Tensor(fp16.BFloat16s(v[b*per:(b+1)*per]), kl)
		require.NoError(tb, cache.Append(seqs[b], kb, vb))
	}
	require.NoError(tb, e.ForwardPagedLSE(ot, lse, qt, cache, seqs, dc.opts))
	return out, lse
}

func firstDiff(a, b []float32) (int, int) {
	n, first := 0, -1
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	return n, first
}

// TestThreadsBitwiseFeatures checks Config.Threads' promise, bitwise the
// same output and lse for every thread count, on the features where it
// is easiest to lose: a window with a left bound (query blocks shrink as
// threads grow, so a tile must not start at its block's first visible
// key), split-KV (which must not depend on whether the queries fit one
// block, since that depends on the thread count), varlen batches, paged
// caches, decode and chunked prefill; in both precisions, with the default Config and with small
// blocks. It also checks ForwardPaged against Forward over the same data.
func TestThreadsBitwiseFeatures(t *testing.T) {
	win := func(l, r int) *attention.Window { return &attention.Window{Left: l, Right: r} }
	cases := []detCase{
		{name: "window-left", batch: 1, hq: 1, hkv: 1, nq: 600, nk: 600, d: 64, opts: attention.Options{Causal: true, Window: win(20, 0)}},
		{name: "split-kv", batch: 4, hq: 2, hkv: 2, nq: 33, nk: 4096, d: 16, opts: attention.Options{Causal: true}},
		{name: "decode", batch: 2, hq: 4, hkv: 2, nq: 1, nk: 3000, d: 32},
		{name: "decode-window", batch: 1, hq: 4, hkv: 1, nq: 1, nk: 2500, d: 32, opts: attention.Options{Causal: true, Window: win(700, 0)}},
		{name: "chunked-prefill", batch: 2, hq: 6, hkv: 2, nq: 40, nk: 700, d: 24, opts: attention.Options{Causal: true, Window: win(300, 0)}},
		{name: "chunked-prefill-splits", batch: 1, hq: 2, hkv: 1, nq: 33, nk: 900, d: 16, opts: attention.Options{Causal: true}, cfg: attention.Config{KVSplits: 3}},
		{name: "small-blocks", batch: 1, hq: 4, hkv: 2, nq: 300, nk: 300, d: 16, opts: attention.Options{Causal: true, Window: win(37, 5)}, cfg: attention.Config{BlockQ: 32, BlockKV: 24}},
	}
	for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
		for _, dc := range cases {
			dc.opts.Precision = prec
			t.Run(fmt.Sprintf("%s/%v", dc.name, prec), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(dc.nq), uint64(dc.nk)))
				q := randn(rng, dc.batch*dc.hq*dc.nq*dc.d)
				k := randn(rng, dc.batch*dc.hkv*dc.nk*dc.d)
				v := randn(rng, dc.batch*dc.hkv*dc.nk*dc.d)
				wantOut, wantLSE := dc.run(t, q, k, v, 1, false)
				for _, threads := range []int{2, 3, 8, 16} {
					out, lse := dc.run(t, q, k, v, threads, false)
					n, i := firstDiff(wantOut, out)
					require.Zero(t, n, "%d threads: %d outputs differ from 1 thread's, first at %d", threads, n, i)
					n, i = firstDiff(wantLSE, lse)
					require.Zero(t, n, "%d threads: %d lse differ from 1 thread's, first at %d", threads, n, i)
				}
				for _, threads := range []int{1, 3} {
					out, lse := dc.run(t, q, k, v, threads, true)
					n, i := firstDiff(wantOut, out)
					require.Zero(t, n, "ForwardPaged, %d threads: %d outputs differ from Forward's, first at %d", threads, n, i)
					n, i = firstDiff(wantLSE, lse)
					require.Zero(t, n, "ForwardPaged, %d threads: %d lse differ from Forward's, first at %d", threads, n, i)
				}
			})
		}
	}
	// Varlen: three sequences of different lengths in one call.
	for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
		t.Run(fmt.Sprintf("varlen/%v", prec), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			const hq, hkv, d = 4, 2, 16
			cuQ, cuKV := []int{0, 1, 130, 400}, []int{0, 900, 1100, 1400}
			nq, nk := cuQ[len(cuQ)-1], cuKV[len(cuKV)-1]
			q := attention.F32Tensor(randn(rng, nq*hq*d), attention.BSHD(1, nq, hq, d))
			k := attention.F32Tensor(randn(rng, nk*hkv*d), attention.BSHD(1, nk, hkv, d))
			v := attention.F32Tensor(randn(rng, nk*hkv*d), attention.BSHD(1, nk, hkv, d))
			opts := attention.Options{Causal: true, Window: win(90, 0), CuSeqQ: cuQ, CuSeqKV: cuKV, Precision: prec}
			var want []float32
			for _, threads := range []int{1, 2, 3, 8, 16} {
				e, err := attention.NewEngine(attention.Config{Threads: threads})
				require.NoError(t, err)
				buf := make([]float32, nq*hq*d)
				require.NoError(t, e.Forward(attention.F32Tensor(buf, q.Layout), q, k, v, opts))
				if want == nil {
					want = buf
					continue
				}
				n, i := firstDiff(want, buf)
				require.Zero(t, n, "%d threads: %d outputs differ from 1 thread's, first at %d", threads, n, i)
			}
		})
	}
}
