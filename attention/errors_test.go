package attention_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
)

// TestErrors checks that each misuse returns an error naming the problem
// and leaves the output and lse untouched.
func TestErrors(t *testing.T) {
	const b, hq, hkv, nq, nkv, d = 1, 4, 2, 5, 6, 8
	qbuf := make([]float32, b*hq*nq*d)
	kbuf := make([]float32, b*hkv*nkv*d)
	vbuf := make([]float32, b*hkv*nkv*d)
	for i := range qbuf {
		qbuf[i] = float32(i%7) / 7
	}
	for i := range kbuf {
		kbuf[i] = float32(i%5) / 5
		vbuf[i] = float32(i%3) / 3
	}
	q := attention.F32Tensor(qbuf, attention.BHSD(b, hq, nq, d))
	k := attention.F32Tensor(kbuf, attention.BHSD(b, hkv, nkv, d))
	v := attention.F32Tensor(vbuf, attention.BHSD(b, hkv, nkv, d))
	outBuf := make([]float32, b*hq*nq*d+8)
	lseBuf := make([]float32, b*hq*nq+4)
	out := attention.F32Tensor(outBuf[:b*hq*nq*d], attention.BHSD(b, hq, nq, d))
	lse := lseBuf[:b*hq*nq]
	e := mustEngine(t, attention.Config{})

	sum := func(x ...[]float32) (s float64) {
		for _, xs := range x {
			for _, v := range xs {
				s += float64(v)
			}
		}
		return s
	}
	inputSum := sum(qbuf, kbuf, vbuf)

	cases := []struct {
		name    string
		out     attention.Tensor
		lse     []float32
		q, k, v attention.Tensor
		opts    attention.Options
		want    string
	}{
		{"zero q", out, lse, attention.Tensor{}, k, v, attention.Options{}, "q: no data"},
		{"zero out", attention.Tensor{}, lse, q, k, v, attention.Options{}, "out: no data"},
		{"head dim 0", attention.F32Tensor(outBuf, attention.BHSD(b, hq, nq, 0)), lse, attention.F32Tensor(qbuf, attention.BHSD(b, hq, nq, 0)), k, v, attention.Options{}, "head dim 0"},
		{"k head dim", out, lse, q, attention.F32Tensor(kbuf, attention.BHSD(b, hkv, nkv/2, 2*d)), v, attention.Options{}, "head dims are q 8 and k 16; want them equal"},
		{"heads not multiple", out, lse, q, attention.F32Tensor(kbuf, attention.BHSD(b, 3, 2, d)), attention.F32Tensor(vbuf, attention.BHSD(b, 3, 2, d)), attention.Options{}, "q has 4 heads and k has 3; want a multiple"},
		{"kv seq mismatch", out, lse, q, k, attention.F32Tensor(vbuf, attention.BHSD(b, hkv, nkv-1, d)), attention.Options{}, "v has 2 heads × 5 keys and k has 2 × 6"},
		{"batch mismatch", out, lse, q, attention.F32Tensor(kbuf, attention.BHSD(2, 1, nkv, d)), v, attention.Options{}, "batch sizes are q 1, k 2, v 1"},
		{"out shape", attention.F32Tensor(outBuf, attention.BHSD(b, hq, nq-1, d)), lse, q, k, v, attention.Options{}, "out has shape [1 4 4 8]; want q's shape [1 4 5 8]"},
		{"short q", out, lse, attention.F32Tensor(qbuf[:len(qbuf)-1], q.Layout), k, v, attention.Options{}, "q: slice has 159 elements; want >= 160"},
		{"short v", out, lse, q, k, attention.F32Tensor(vbuf[:10], v.Layout), attention.Options{}, "v: slice has 10 elements; want >= 96"},
		{"short strided k", out, lse, q, attention.F32Tensor(kbuf, attention.BSHD(b, nkv+1, hkv, d)), v, attention.Options{}, "k: slice has 96 elements; want >= 112"},
		{"negative stride", out, lse, q, attention.F32Tensor(kbuf, attention.Layout{Batch: 1, Heads: 2, Seq: 6, Dim: 8, HeadStride: 48, SeqStride: -8}), v, attention.Options{}, "k: SeqStride is -8; want >= 0"},
		{"self-overlapping out", attention.F32Tensor(outBuf, attention.Layout{Batch: 1, Heads: 4, Seq: 5, Dim: 8, HeadStride: 40, SeqStride: 4}), lse, q, k, v, attention.Options{}, "out has strides [0 40 4 1] under which elements"},
		{"out overlaps q", attention.F32Tensor(qbuf, q.Layout), lse, q, k, v, attention.Options{}, "out overlaps q"},
		{"out overlaps v", attention.F32Tensor(vbuf[:], attention.BHSD(1, 1, 12, 8)), lse, attention.F32Tensor(qbuf[:96], attention.BHSD(1, 1, 12, 8)), attention.F32Tensor(kbuf, attention.BHSD(1, 1, 12, 8)), attention.F32Tensor(vbuf, attention.BHSD(1, 1, 12, 8)), attention.Options{}, "out overlaps v"},
		{"lse short", out, lseBuf[:3], q, k, v, attention.Options{}, "lse has 3 elements; want >= B·Hq·Nq = 20"},
		{"lse overlaps out", out, outBuf[100:], q, k, v, attention.Options{}, "lse overlaps out"},
		{"lse overlaps k", out, kbuf, q, k, v, attention.Options{}, "lse overlaps k"},
		{"scale NaN", out, lse, q, k, v, attention.Options{Scale: float32(math.NaN())}, "Options.Scale is NaN"},
		{"scale Inf", out, lse, q, k, v, attention.Options{Scale: float32(math.Inf(1))}, "Options.Scale is +Inf"},
		{"huge layout", out, lse, q, attention.F32Tensor(kbuf, attention.Layout{Batch: 3, Heads: 2, Seq: 6, Dim: 8, BatchStride: math.MaxInt / 2, HeadStride: 48, SeqStride: 8}), v, attention.Options{}, "layout of shape [3 2 6 8] with strides [4611686018427387903 48 8 1] spans more elements than an int can index"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range outBuf {
				outBuf[i] = 42
			}
			for i := range lseBuf {
				lseBuf[i] = 42
			}
			err := e.ForwardLSE(c.out, c.lse, c.q, c.k, c.v, c.opts)
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
			for i, x := range outBuf {
				require.Equal(t, float32(42), x, "out element %d written", i)
			}
			for i, x := range lseBuf {
				require.Equal(t, float32(42), x, "lse element %d written", i)
			}
			require.Equal(t, inputSum, sum(qbuf, kbuf, vbuf), "an input was modified")
		})
	}

	t.Run("nil lse", func(t *testing.T) {
		err := e.ForwardLSE(out, nil, q, k, v, attention.Options{})
		require.ErrorContains(t, err, "lse is nil")
	})
	t.Run("bad config", func(t *testing.T) {
		_, err := attention.NewEngine(attention.Config{BlockQ: -1})
		require.ErrorContains(t, err, "Config.BlockQ is -1")
		_, err = attention.NewEngine(attention.Config{BlockKV: -2})
		require.ErrorContains(t, err, "Config.BlockKV is -2")
	})
	t.Run("no queries, several heads", func(t *testing.T) {
		empty := attention.F32Tensor(nil, attention.BHSD(1, 4, 0, 8))
		require.NoError(t, e.ForwardLSE(empty, []float32{}, empty, k, v, attention.Options{Causal: true}))
	})
	t.Run("valid call after errors", func(t *testing.T) {
		require.NoError(t, e.ForwardLSE(out, lse, q, k, v, attention.Options{Causal: true}))
	})
}

// TestUnusableEngine checks that a nil Engine and a zero Engine return an
// error from every entry point instead of crashing.
func TestUnusableEngine(t *testing.T) {
	q := attention.F32Tensor(make([]float32, 8), attention.BHSD(1, 1, 1, 8))
	o := attention.F32Tensor(make([]float32, 8), attention.BHSD(1, 1, 1, 8))
	kc, err := attention.NewKVCache(attention.F32, 1, 4, 8)
	require.NoError(t, err)
	pc, err := attention.NewPagedCache(attention.F32, 1, 8, 4, 2)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		e    *attention.Engine
		want string
	}{{"nil", nil, "Engine is nil"}, {"zero", &attention.Engine{}, "zero Engine"}} {
		require.ErrorContains(t, c.e.Forward(o, q, q, q, attention.Options{}), c.want, c.name)
		require.ErrorContains(t, c.e.ForwardLSE(o, make([]float32, 1), q, q, q, attention.Options{}), c.want, c.name)
		require.ErrorContains(t, c.e.ForwardPaged(o, q, pc, []attention.SeqID{pc.NewSequence()}, attention.Options{}), c.want, c.name)
		require.ErrorContains(t, c.e.ForwardKVCaches(o, q, []*attention.KVCache{kc}, attention.Options{}), c.want, c.name)
		require.ErrorContains(t, c.e.ForwardPagedKV(o, q, attention.PagedKV{}, attention.Options{}), c.want, c.name)
	}
}
