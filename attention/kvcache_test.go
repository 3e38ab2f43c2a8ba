package attention_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/fp16"
)

// kvRange is a view [1, hkv, to−from, d] of positions [from, to) of
// canonical K or V data x laid out [hkv, n, d], without a copy.
func kvRange(x []float32, hkv, n, d, from, to int) attention.Tensor {
	l := attention.Layout{Batch: 1, Heads: hkv, Seq: to - from, Dim: d,
		BatchStride: hkv * n * d, HeadStride: n * d, SeqStride: d}
	return attention.F32Tensor(x[from*d:], l)
}

// cacheOracle returns the oracle's output for nq queries q [1, hq, nq, d]
// against canonical keys and values [hkv, n, d] under bottom-right causal
// masking, along with its lse.
func cacheOracle(t testing.TB, q, k, v []float32, hq, hkv, nq, n, d int) ([]float64, []float64) {
	t.Helper()
	p := reference.Params{Batch: 1, HeadsQ: hq, HeadsKV: hkv, SeqQ: nq, SeqKV: n, Dim: d, Causal: true}
	out, lse, err := reference.Attention(p, reference.Float64s(q), reference.Float64s(k), reference.Float64s(v))
	require.NoError(t, err)
	return out, lse
}

// kvTypesAll are the K/V types of any head dim (the fp8 ones with scale
// 1, a cache's default).
var kvTypesAll = []attention.DType{attention.F32, attention.F16, attention.BF16, attention.FP8E4M3, attention.FP8E5M2}

// kvTypesQ8 adds Q8 for the tests whose head dim is a multiple of 32.
var kvTypesQ8 = []attention.DType{attention.F32, attention.F16, attention.BF16, attention.Q8, attention.FP8E4M3, attention.FP8E5M2}

// roundKV rounds canonical K or V data (rows of d, d a multiple of 32 for
// Q8) to the values that storage type dt holds.
func roundKV(dt attention.DType, x []float32) {
	if dt != attention.Q8 {
		roundTo(dt, x)
		return
	}
	q := make([]int8, len(x))
	s := make([]float32, len(x)/attention.Q8Block)
	if err := attention.QuantizeQ8(q, s, x); err != nil {
		panic(err)
	}
	if err := attention.DequantizeQ8(x, q, s); err != nil {
		panic(err)
	}
}

// TestKVCacheDecode appends a prompt in chunks, then decodes Nq = 1..16
// new tokens (times the GQA group) with one Forward call over the cache's
// views, against the float64 oracle.
func TestKVCacheDecode(t *testing.T) { forEachImpl(t, testKVCacheDecode) }

func testKVCacheDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	e := mustEngine(t, attention.Config{BlockKV: 32})
	const hkv, d = 2, 32
	for _, dt := range kvTypesQ8 {
		for _, g := range []int{1, 4} {
			for _, nq := range []int{1, 2, 7, 16} {
				for _, prompt := range []int{0, 1, 63, 100} {
					hq, n := hkv*g, prompt+nq
					k, v := randn(rng, hkv*n*d), randn(rng, hkv*n*d)
					roundKV(dt, k)
					roundKV(dt, v)
					c, err := attention.NewKVCache(dt, hkv, n+5, d)
					require.NoError(t, err)
					// The prompt in uneven chunks, then the new tokens.
					for from := 0; from < prompt; {
						to := min(prompt, from+1+rng.IntN(40))
						require.NoError(t, c.Append(kvRange(k, hkv, n, d, from, to), kvRange(v, hkv, n, d, from, to)))
						from = to
					}
					require.NoError(t, c.Append(kvRange(k, hkv, n, d, prompt, n), kvRange(v, hkv, n, d, prompt, n)))
					require.Equal(t, n, c.Len())
					q := randn(rng, hq*nq*d)
					out := make([]float32, len(q))
					lse := make([]float32, hq*nq)
					require.NoError(t, e.ForwardLSE(attention.F32Tensor(out, attention.BHSD(1, hq, nq, d)), lse,
						attention.F32Tensor(q, attention.BHSD(1, hq, nq, d)), c.K(), c.V(), attention.Options{Causal: true}))
					want, wantLSE := cacheOracle(t, q, k, v, hq, hkv, nq, n, d)
					if errs := reference.Compare(out, want); errs.MaxAbs > 2e-5 {
						t.Errorf("%v g%d nq%d prompt%d: %v", dt, g, nq, prompt, errs)
					}
					if errs := lseErrors(lse, wantLSE); errs.MaxAbs > 1e-4 {
						t.Errorf("%v g%d nq%d prompt%d: lse %v", dt, g, nq, prompt, errs)
					}
				}
			}
		}
	}
}

// TestKVCacheChunkedPrefill fills a cache chunk by chunk, each chunk's
// queries attending to everything cached so far plus the chunk (one call),
// and checks that the concatenated outputs equal full causal attention.
func TestKVCacheChunkedPrefill(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 54))
	e := mustEngine(t, attention.Config{BlockQ: 32, BlockKV: 16})
	const hq, hkv, n, d = 6, 2, 150, 16
	for _, dt := range kvTypesAll {
		k, v, q := randn(rng, hkv*n*d), randn(rng, hkv*n*d), randn(rng, hq*n*d)
		roundTo(dt, k)
		roundTo(dt, v)
		c, err := attention.NewKVCache(dt, hkv, n, d)
		require.NoError(t, err)
		got := make([]float32, hq*n*d)
		for from := 0; from < n; {
			to := min(n, from+1+rng.IntN(50))
			require.NoError(t, c.Append(kvRange(k, hkv, n, d, from, to), kvRange(v, hkv, n, d, from, to)))
			// Queries and outputs of the chunk are views of the full arrays.
			ql := attention.Layout{Batch: 1, Heads: hq, Seq: to - from, Dim: d, BatchStride: hq * n * d, HeadStride: n * d, SeqStride: d}
			require.NoError(t, e.Forward(attention.F32Tensor(got[from*d:], ql), attention.F32Tensor(q[from*d:], ql),
				c.K(), c.V(), attention.Options{Causal: true}))
			from = to
		}
		want, _ := cacheOracle(t, q, k, v, hq, hkv, n, n, d)
		if errs := reference.Compare(got, want); errs.MaxAbs > 2e-5 {
			t.Errorf("%v: %v", dt, errs)
		}
	}
}

// TestKVCacheRollback checks that Truncate followed by new appends gives
// exactly what a cache that never saw the rejected tokens gives.
func TestKVCacheRollback(t *testing.T) {
	rng := rand.New(rand.NewPCG(55, 56))
	e := mustEngine(t, attention.Config{})
	const hq, hkv, d, n = 4, 2, 16, 40
	for _, dt := range kvTypesAll {
		k, v := randn(rng, hkv*n*d), randn(rng, hkv*n*d)
		junk := randn(rng, hkv*5*d)
		a, err := attention.NewKVCache(dt, hkv, n, d)
		require.NoError(t, err)
		b, err := attention.NewKVCache(dt, hkv, n, d)
		require.NoError(t, err)
		require.NoError(t, a.Append(kvRange(k, hkv, n, d, 0, 30), kvRange(v, hkv, n, d, 0, 30)))
		// Speculative drafts, rejected.
		require.NoError(t, a.Append(kvRange(junk, hkv, 5, d, 0, 5), kvRange(junk, hkv, 5, d, 0, 5)))
		require.NoError(t, a.Truncate(30))
		require.NoError(t, a.Append(kvRange(k, hkv, n, d, 30, n), kvRange(v, hkv, n, d, 30, n)))
		require.NoError(t, b.Append(kvRange(k, hkv, n, d, 0, n), kvRange(v, hkv, n, d, 0, n)))
		require.Equal(t, n, a.Len())
		q := randn(rng, hq*3*d)
		qt := attention.F32Tensor(q, attention.BHSD(1, hq, 3, d))
		oa, ob := make([]float32, len(q)), make([]float32, len(q))
		require.NoError(t, e.Forward(attention.F32Tensor(oa, qt.Layout), qt, a.K(), a.V(), attention.Options{Causal: true}))
		require.NoError(t, e.Forward(attention.F32Tensor(ob, qt.Layout), qt, b.K(), b.V(), attention.Options{Causal: true}))
		for i := range oa {
			if math.Float32bits(oa[i]) != math.Float32bits(ob[i]) {
				t.Fatalf("%v: out[%d] = %v after rollback, %v without drafts", dt, i, oa[i], ob[i])
			}
		}
	}
}

func TestKVCacheErrors(t *testing.T) {
	_, err := attention.NewKVCache(attention.DType(9), 2, 8, 4)
	require.ErrorContains(t, err, "element type")
	_, err = attention.NewKVCache(attention.F16, 0, 8, 4)
	require.ErrorContains(t, err, "heads")
	_, err = attention.NewKVCache(attention.F16, 2, -1, 4)
	require.ErrorContains(t, err, "capacity")
	_, err = attention.NewKVCache(attention.F16, 2, 8, 0)
	require.ErrorContains(t, err, "head dim")

	c, err := attention.NewKVCache(attention.F16, 2, 8, 4)
	require.NoError(t, err)
	x := make([]float32, 2*10*4)
	for i := range x {
		x[i] = float32(i)
	}
	require.NoError(t, c.Append(kvRange(x, 2, 10, 4, 0, 6), kvRange(x, 2, 10, 4, 0, 6)))
	before := cacheDigest(t, c.K(), c.V())

	err = c.Append(kvRange(x, 2, 10, 4, 0, 3), kvRange(x, 2, 10, 4, 0, 3))
	require.ErrorContains(t, err, "at most 2")
	err = c.Append(kvRange(x, 2, 10, 4, 0, 2), kvRange(x, 2, 10, 4, 0, 1))
	require.ErrorContains(t, err, "same")
	err = c.Append(attention.F32Tensor(x, attention.BHSD(1, 2, 1, 5)), attention.F32Tensor(x, attention.BHSD(1, 2, 1, 5)))
	require.ErrorContains(t, err, "shape")
	err = c.Append(attention.F32Tensor(x, attention.BHSD(1, 1, 1, 4)), attention.F32Tensor(x, attention.BHSD(1, 1, 1, 4)))
	require.ErrorContains(t, err, "shape")
	e4 := attention.FP8E4M3Tensor(make([]fp16.Float8E4M3, 8), []float32{1}, attention.BHSD(1, 2, 1, 4))
	err = c.Append(e4, e4)
	require.ErrorContains(t, err, "k has element type fp8e4m3; want f32, f16, bf16 or the cache's f16")
	err = c.Append(attention.F32Tensor(x[:3], attention.BHSD(1, 2, 1, 4)), attention.F32Tensor(x, attention.BHSD(1, 2, 1, 4)))
	require.ErrorContains(t, err, "slice")
	require.ErrorContains(t, c.Truncate(7), "0 <= n <= 6")
	require.ErrorContains(t, c.Truncate(-1), "0 <= n <= 6")

	require.Equal(t, 6, c.Len())
	require.Equal(t, 8, c.Cap())
	require.Equal(t, before, cacheDigest(t, c.K(), c.V()), "a failed call changed the cache")
}

// TestKVCacheDecodeNoAllocations checks that a steady-state decode step
// (append one token, one Forward over the cache) allocates nothing.
func TestKVCacheDecodeNoAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(57, 58))
	const hq, hkv, d, n = 8, 2, 64, 600
	e := mustEngine(t, attention.Config{Threads: 2})
	c, err := attention.NewKVCache(attention.F16, hkv, n, d)
	require.NoError(t, err)
	k, v := randn(rng, hkv*n*d), randn(rng, hkv*n*d)
	require.NoError(t, c.Append(kvRange(k, hkv, n, d, 0, 300), kvRange(v, hkv, n, d, 0, 300)))
	q := attention.F32Tensor(randn(rng, hq*d), attention.BHSD(1, hq, 1, d))
	out := attention.F32Tensor(make([]float32, hq*d), q.Layout)
	pos := 300
	step := func() {
		if pos == n {
			require.NoError(t, c.Truncate(300))
			pos = 300
		}
		require.NoError(t, c.Append(kvRange(k, hkv, n, d, pos, pos+1), kvRange(v, hkv, n, d, pos, pos+1)))
		pos++
		require.NoError(t, e.Forward(out, q, c.K(), c.V(), attention.Options{Causal: true}))
	}
	step()
	if allocs := testing.AllocsPerRun(100, step); allocs != 0 {
		t.Errorf("decode step allocates %v times", allocs)
	}
}

// cacheDigest returns the bits of attention by fixed queries (one head per
// K/V head, no mask) over k and v: any change of the data shows in it.
func cacheDigest(t testing.TB, k, v attention.Tensor) []uint32 {
	t.Helper()
	q := make([]float32, k.Heads*3*k.Dim)
	for i := range q {
		q[i] = float32(i%7) - 3
	}
	l := attention.BHSD(1, k.Heads, 3, k.Dim)
	out := make([]float32, len(q))
	require.NoError(t, attention.Forward(attention.F32Tensor(out, l), attention.F32Tensor(q, l), k, v, attention.Options{}))
	bits := make([]uint32, len(out))
	for i, x := range out {
		bits[i] = math.Float32bits(x)
	}
	return bits
}
