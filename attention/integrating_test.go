package attention_test

// This file backs docs/integrating.md: it does what the document shows, a
// small decoder loop in the style of llama2.c that keeps its own flat
// float32 KV cache and calls the engine on views of it.

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/internal/impltest"
)

// tinyDecoder is the attention of one decoder layer as a Go runtime writes
// it: projections x·W into [tokens][heads·headDim] rows, and a cache
// [maxSeq][kvHeads·headDim] per tensor into which the K and V projections
// of new tokens are written directly.
type tinyDecoder struct {
	dim, heads, kvHeads, headDim, maxSeq int

	wq, wk, wv, wo []float32 // [dim][heads·headDim], [dim][kvDim] twice, [heads·headDim][dim]

	keyCache, valueCache []float32 // [maxSeq][kvHeads·headDim]
	pos                  int       // positions cached

	eng *attention.Engine
}

func newTinyDecoder(r *rand.Rand, dim, heads, kvHeads, headDim, maxSeq int) *tinyDecoder {
	kvDim := kvHeads * headDim
	w := func(n, scale float64) []float32 {
		x := make([]float32, int(n))
		for i := range x {
			x[i] = float32(r.NormFloat64() * scale)
		}
		return x
	}
	s := 1 / math.Sqrt(float64(dim))
	eng, err := attention.NewEngine(attention.Config{}) // one per process, reused for every call
	if err != nil {
		panic(err)
	}
	return &tinyDecoder{
		dim: dim, heads: heads, kvHeads: kvHeads, headDim: headDim, maxSeq: maxSeq,
		wq: w(float64(dim*heads*headDim), s), wk: w(float64(dim*kvDim), s),
		wv: w(float64(dim*kvDim), s), wo: w(float64(heads*headDim*dim), s),
		keyCache: make([]float32, maxSeq*kvDim), valueCache: make([]float32, maxSeq*kvDim),
		eng: eng,
	}
}

// matmul writes y[m][n] = x[m][k]·w[k][n].
func matmul(y, x, w []float32, m, k, n int) {
	for i := range m {
		for j := range n {
			var s float32
			for l := range k {
				s += x[i*k+l] * w[l*n+j]
			}
			y[i*n+j] = s
		}
	}
}

// forward runs the attention of m new tokens x [m][dim] at positions
// pos..pos+m−1: it projects them, appends their K and V to the cache, and
// writes the attention output [m][heads·headDim] to out and the queries to
// q. opts is Options{Causal: true} for prefill, chunked prefill and decode
// alike; with the bottom-right alignment query i sees the keys up to its
// own position.
func (d *tinyDecoder) forward(out, q, x []float32, m int, opts attention.Options) error {
	kvDim := d.kvHeads * d.headDim
	matmul(q, x, d.wq, m, d.dim, d.heads*d.headDim)
	matmul(d.keyCache[d.pos*kvDim:], x, d.wk, m, d.dim, kvDim) // append in place
	matmul(d.valueCache[d.pos*kvDim:], x, d.wv, m, d.dim, kvDim)
	d.pos += m

	qLay := attention.BSHD(1, m, d.heads, d.headDim)        // [tokens][heads·headDim]
	kvLay := attention.BSHD(1, d.pos, d.kvHeads, d.headDim) // the first pos rows of the flat cache
	return d.eng.Forward(
		attention.F32Tensor(out, qLay),
		attention.F32Tensor(q, qLay),
		attention.F32Tensor(d.keyCache, kvLay),
		attention.F32Tensor(d.valueCache, kvLay),
		opts)
}

// next returns the input of the next token: a bounded function of the last
// token's input and attention output, so that the loop feeds back.
func (d *tinyDecoder) next(x, out []float32) []float32 {
	y := make([]float32, d.dim)
	matmul(y, out, d.wo, 1, d.heads*d.headDim, d.dim)
	for i := range y {
		y[i] = float32(math.Tanh(float64(x[i] + y[i])))
	}
	return y
}

// bshdToBHSD reorders [seq][heads][dim] rows to the canonical [heads][seq][dim]
// of the oracle, in float64.
func bshdToBHSD(x []float32, seq, heads, dim int) []float64 {
	y := make([]float64, seq*heads*dim)
	for s := range seq {
		for h := range heads {
			for c := range dim {
				y[(h*seq+s)*dim+c] = float64(x[(s*heads+h)*dim+c])
			}
		}
	}
	return y
}

// checkStep compares the output of one call of m queries (q and out in
// [m][heads·headDim] rows) over the decoder's cache with the float64
// oracle, under the project's accuracy rule (docs/math.md, Section 5): max
// abs and RMS error at most 2 × those of naive float32 attention + 1e-6 +
// E_κ, and, since K/V are float32 with a head dim <= 128, max abs error at
// most 1e-5 + E_κ, as checkAgainstOracle applies it.
func (d *tinyDecoder) checkStep(t *testing.T, what string, out, q []float32, m int, p reference.Params) {
	t.Helper()
	p.Batch, p.HeadsQ, p.HeadsKV, p.SeqQ, p.SeqKV, p.Dim = 1, d.heads, d.kvHeads, m, d.pos, d.headDim
	kvDim := d.kvHeads * d.headDim
	q64 := bshdToBHSD(q, m, d.heads, d.headDim)
	k64 := bshdToBHSD(d.keyCache[:d.pos*kvDim], d.pos, d.kvHeads, d.headDim)
	v64 := bshdToBHSD(d.valueCache[:d.pos*kvDim], d.pos, d.kvHeads, d.headDim)
	want, _, err := reference.Attention(p, q64, k64, v64)
	require.NoError(t, err, what)
	got := f32s(bshdToBHSD(out, m, d.heads, d.headDim))
	errs := reference.Compare(got, want)
	require.Equal(t, len(want), errs.N, what)

	naive := make([]float32, len(got))
	var n reference.Naive
	require.NoError(t, n.Attention(p, naive, f32s(q64), f32s(k64), f32s(v64)), what)
	cond := func() float64 {
		kc, err := reference.LogitCondition(p, q64, k64, v64)
		require.NoError(t, err, what)
		return kc
	}
	checkRule(t, what, errs, reference.Compare(naive, want), cond)
	if errs.MaxAbs > 1e-5 {
		if kc := cond(); errs.MaxAbs > 1e-5+kc {
			t.Errorf("%s: max abs error %.3g exceeds 1e-5 + E_κ %.3g", what, errs.MaxAbs, kc)
		}
	}
}

// The loop of docs/integrating.md: a prompt prefilled in two chunks, then
// token-by-token decoding, then one round of speculative verification of a
// draft tree with a boolean mask, each call checked against the oracle.
func TestIntegratingDecoderLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(401, 1))
	const dim, heads, kvHeads, headDim, maxSeq = 32, 4, 2, 8, 64
	d := newTinyDecoder(r, dim, heads, kvHeads, headDim, maxSeq)
	qDim := heads * headDim
	causal := attention.Options{Causal: true}

	// Prefill: a prompt of 11 tokens in chunks of 7 and 4 (chunked prefill is
	// the same call with the earlier chunks already in the cache).
	prompt := randn(r, 11*dim)
	var out, q []float32
	for _, chunk := range [][2]int{{0, 7}, {7, 11}} {
		m := chunk[1] - chunk[0]
		out, q = make([]float32, m*qDim), make([]float32, m*qDim)
		require.NoError(t, d.forward(out, q, prompt[chunk[0]*dim:chunk[1]*dim], m, causal))
		d.checkStep(t, "prefill chunk", out, q, m, reference.Params{Causal: true})
	}

	// Decode, one token at a time.
	x := d.next(prompt[10*dim:], out[(len(out)-qDim):])
	out, q = make([]float32, qDim), make([]float32, qDim)
	for step := range 20 {
		require.NoError(t, d.forward(out, q, x, 1, causal))
		d.checkStep(t, "decode", out, q, 1, reference.Params{Causal: true})
		if step == 19 {
			// A decode step of a shape seen before allocates nothing.
			allocs := testing.AllocsPerRun(5, func() {
				kvLay := attention.BSHD(1, d.pos, kvHeads, headDim)
				qLay := attention.BSHD(1, 1, heads, headDim)
				if err := d.eng.Forward(attention.F32Tensor(out, qLay), attention.F32Tensor(q, qLay),
					attention.F32Tensor(d.keyCache, kvLay), attention.F32Tensor(d.valueCache, kvLay), causal); err != nil {
					panic(err)
				}
			})
			require.Zero(t, allocs, "decode step")
		}
		x = d.next(x, out)
	}

	// Speculative verification of a draft tree: node 0 follows the last
	// token, nodes 1 and 2 follow node 0, node 3 follows node 1. The nodes
	// are appended in that order, and each sees the whole cache before them
	// and its own ancestors (and itself) among the drafts.
	parent := []int{-1, 0, 0, 1}
	nd := len(parent)
	drafts := randn(r, nd*dim)
	base := d.pos
	nkv := base + nd
	mask := make([]bool, nd*nkv) // [drafts][keys]
	for i := range nd {
		for j := range base {
			mask[i*nkv+j] = true
		}
		for a := i; a >= 0; a = parent[a] {
			mask[i*nkv+base+a] = true
		}
	}
	opts := attention.Options{Causal: true, BoolMask: attention.BoolMask{
		Layout: attention.Layout{Batch: 1, Heads: 1, Seq: nd, Dim: nkv, SeqStride: nkv, HeadStride: nd * nkv, BatchStride: nd * nkv},
		Data:   mask,
	}}
	out, q = make([]float32, nd*qDim), make([]float32, nd*qDim)
	require.NoError(t, d.forward(out, q, drafts, nd, opts))
	d.checkStep(t, "tree verification", out, q, nd, reference.Params{Causal: true, BoolMask: mask, BoolMaskShape: [4]int{1, 1, nd, nkv}})

	// Accept nodes 0 and 1 (the first two positions): roll the cache back
	// to them and decode on; the rejected rows are overwritten later.
	d.pos = base + 2
	out, q = make([]float32, qDim), make([]float32, qDim)
	require.NoError(t, d.forward(out, q, d.next(drafts[dim:2*dim], make([]float32, qDim)), 1, causal))
	d.checkStep(t, "decode after verification", out, q, 1, reference.Params{Causal: true})
}

// A runtime with a paged cache of its own (pages of pageSize positions,
// [pageSize][kvHeads·headDim] each, anywhere in a pool) decodes without
// PagedCache: one ForwardLSE per page over a view of the page, then MergeN.
// Nq = 1 sees every cached key, so no page needs a mask.
func TestIntegratingOwnPages(t *testing.T) {
	r := rand.New(rand.NewPCG(402, 1))
	const heads, kvHeads, headDim, pageSize = 4, 2, 8, 16
	const kvDim = kvHeads * headDim
	pool := randn(r, 2*8*pageSize*kvDim) // 8 pages of K, then 8 of V
	kPages, vPages := []int{5, 0, 3}, []int{9, 14, 11}
	n := 2*pageSize + 7 // the last page is partly filled
	q := randn(r, heads*headDim)
	eng, err := attention.NewEngine(attention.Config{})
	require.NoError(t, err)

	qLay := attention.BSHD(1, 1, heads, headDim)
	parts := make([]attention.Tensor, len(kPages))
	lses := make([][]float32, len(kPages))
	for i := range kPages {
		m := min(pageSize, n-i*pageSize)
		lay := attention.BSHD(1, m, kvHeads, headDim)
		parts[i], lses[i] = attention.F32Tensor(make([]float32, heads*headDim), qLay), make([]float32, heads)
		require.NoError(t, eng.ForwardLSE(parts[i], lses[i], attention.F32Tensor(q, qLay),
			attention.F32Tensor(pool[kPages[i]*pageSize*kvDim:], lay),
			attention.F32Tensor(pool[vPages[i]*pageSize*kvDim:], lay), attention.Options{}))
	}
	out, lse := make([]float32, heads*headDim), make([]float32, heads)
	require.NoError(t, attention.MergeN(attention.F32Tensor(out, qLay), lse, parts, lses))

	// The oracle over the keys gathered in order.
	var k, v []float32
	for i := range kPages {
		m := min(pageSize, n-i*pageSize)
		k = append(k, pool[kPages[i]*pageSize*kvDim:][:m*kvDim]...)
		v = append(v, pool[vPages[i]*pageSize*kvDim:][:m*kvDim]...)
	}
	p := reference.Params{Batch: 1, HeadsQ: heads, HeadsKV: kvHeads, SeqQ: 1, SeqKV: n, Dim: headDim}
	want, wantLSE, err := reference.Attention(p, bshdToBHSD(q, 1, heads, headDim), bshdToBHSD(k, n, kvHeads, headDim), bshdToBHSD(v, n, kvHeads, headDim))
	require.NoError(t, err)
	errs := reference.Compare(f32s(bshdToBHSD(out, 1, heads, headDim)), want)
	require.Less(t, errs.MaxAbs, 1e-5, "%v", errs) // ForwardLSE's float32 rule; MergeN adds a rounding
	require.Less(t, lseErrors(lse, wantLSE).MaxAbs, 1e-5*(1+math.Log(float64(n+1))))
}

// Flat caches of several sequences side by side, [batch][maxSeq][kvDim],
// decode together in one Forward: Nkv is the longest length and a
// key-padding BoolMask (one row of keys per sequence) hides each shorter
// sequence's tail, which is never read (NaN here).
func TestIntegratingPaddedBatch(t *testing.T) {
	r := rand.New(rand.NewPCG(403, 1))
	const heads, kvHeads, headDim, maxSeq = 4, 2, 8, 12
	const kvDim = kvHeads * headDim
	lens := []int{5, 9}
	b, nkv := len(lens), 9
	keys, values := impltest.Filled(b*maxSeq*kvDim, guard), impltest.Filled(b*maxSeq*kvDim, guard)
	pad := make([]bool, b*nkv)
	for s, n := range lens {
		copy(keys[s*maxSeq*kvDim:], randn(r, n*kvDim))
		copy(values[s*maxSeq*kvDim:], randn(r, n*kvDim))
		for j := range n {
			pad[s*nkv+j] = true
		}
	}
	q := randn(r, b*heads*headDim)
	out := make([]float32, len(q))
	qLay := attention.BSHD(b, 1, heads, headDim)
	kvLay := attention.Layout{Batch: b, Heads: kvHeads, Seq: nkv, Dim: headDim, BatchStride: maxSeq * kvDim, HeadStride: headDim, SeqStride: kvDim}
	eng, err := attention.NewEngine(attention.Config{})
	require.NoError(t, err)
	require.NoError(t, eng.Forward(attention.F32Tensor(out, qLay), attention.F32Tensor(q, qLay),
		attention.F32Tensor(keys, kvLay), attention.F32Tensor(values, kvLay), attention.Options{
			Causal:   true,
			BoolMask: attention.BoolMask{Layout: attention.Layout{Batch: b, Heads: 1, Seq: 1, Dim: nkv, BatchStride: nkv}, Data: pad},
		}))
	for s, n := range lens {
		p := reference.Params{Batch: 1, HeadsQ: heads, HeadsKV: kvHeads, SeqQ: 1, SeqKV: n, Dim: headDim, Causal: true}
		one := func(x []float32) []float64 { return bshdToBHSD(x[s*maxSeq*kvDim:][:n*kvDim], n, kvHeads, headDim) }
		want, _, err := reference.Attention(p, bshdToBHSD(q[s*heads*headDim:][:heads*headDim], 1, heads, headDim), one(keys), one(values))
		require.NoError(t, err)
		errs := reference.Compare(f32s(bshdToBHSD(out[s*heads*headDim:][:heads*headDim], 1, heads, headDim)), want)
		require.Less(t, errs.MaxAbs, 1e-5, "sequence %d: %v", s, errs)
	}
}
