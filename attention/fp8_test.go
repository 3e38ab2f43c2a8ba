package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/fp16"
)

var fp8Types = []attention.DType{attention.FP8E4M3, attention.FP8E5M2}

// TestFP8Forward checks fp8 K/V views with per-head scales against the
// float64 oracle over the dequantised values (the fp8 value times the
// head's scale, rounded to float32 as the engine reads it), under the
// project's accuracy rule: sizes that are not multiples of the tiles
// (1 included), GQA, causal or not, every layout, both precisions, every
// implementation.
func TestFP8Forward(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			t.Run(prec.String(), inPrecision(prec, testFP8Forward))
		}
	})
}

func testFP8Forward(t *testing.T) {
	rng := rand.New(rand.NewPCG(201, 202))
	e := mustEngine(t, attention.Config{BlockQ: 16, BlockKV: 16})
	shapes := []struct{ b, hq, hkv, nq, nkv, d int }{
		{1, 1, 1, 1, 1, 8}, {1, 4, 2, 1, 37, 64}, {2, 8, 2, 1, 130, 128}, {1, 6, 3, 3, 65, 40},
		{1, 2, 1, 17, 17, 96}, {2, 4, 4, 33, 70, 80}, {1, 4, 1, 65, 1, 16},
	}
	n := 0
	for _, sh := range shapes {
		for _, dt := range fp8Types {
			for _, causal := range []bool{false, true} {
				p := reference.Params{Batch: sh.b, HeadsQ: sh.hq, HeadsKV: sh.hkv, SeqQ: sh.nq, SeqKV: sh.nkv, Dim: sh.d, Causal: causal}
				checkAgainstOracle(t, e, newProblem(rng, p, dt, layouts[n%len(layouts)]))
				n++
			}
		}
	}
}

// fp8Codes quantises canonical rows x [hkv, n, d] with per-head scales sc
// as Append does (x / scale, rounded to nearest even, saturating) and
// returns the codes and the values they stand for.
func fp8Codes(dt attention.DType, x, sc []float32, n, d int) (codes []uint8, vals []float32) {
	codes, vals = make([]uint8, len(x)), make([]float32, len(x))
	for i, v := range x {
		s := sc[i/(n*d)%len(sc)]
		if dt == attention.FP8E4M3 {
			c := fp16.Float8E4M3FromFloat32(v / s)
			codes[i], vals[i] = uint8(c), c.Float32()*s
		} else {
			c := fp16.Float8E5M2FromFloat32(v / s)
			codes[i], vals[i] = uint8(c), c.Float32()*s
		}
	}
	return codes, vals
}

// fp8View returns an fp8 tensor of type dt holding codes, with scales sc.
func fp8View(dt attention.DType, codes []uint8, sc []float32, l attention.Layout) attention.Tensor {
	if dt == attention.FP8E4M3 {
		x := make([]fp16.Float8E4M3, len(codes))
		for i, c := range codes {
			x[i] = fp16.Float8E4M3(c)
		}
		return attention.FP8E4M3Tensor(x, sc, l)
	}
	x := make([]fp16.Float8E5M2, len(codes))
	for i, c := range codes {
		x[i] = fp16.Float8E5M2(c)
	}
	return attention.FP8E5M2Tensor(x, sc, l)
}

// TestFP8Sources fills every K/V source with the same rows, quantised with
// per-head scales (and per-cache ones), and decodes: a KVCache appended
// from float32, binary16 and bfloat16 in chunks, a PagedCache, a caller's
// PagedKV pool in vLLM's layout and per head, and a [batch, seq, heads,
// dim] view of interleaved heads (the fused decode). Each must give the
// bits of Forward over an fp8 view of the expected codes, and that must
// pass the oracle over the dequantised values.
func TestFP8Sources(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			t.Run(prec.String(), inPrecision(prec, testFP8Sources))
		}
	})
}

func testFP8Sources(t *testing.T) {
	rng := rand.New(rand.NewPCG(203, 204))
	const hkv, d, bs = 4, 72, 16
	e := mustEngine(t, attention.Config{})
	for _, dt := range fp8Types {
		for _, perHead := range []bool{true, false} {
			for _, shape := range []struct{ g, nq, n int }{{1, 1, 1}, {2, 1, 77}, {4, 3, 200}, {1, 16, 40}} {
				name := fmt.Sprintf("%v perHead=%v g%d nq%d n%d", dt, perHead, shape.g, shape.nq, shape.n)
				hq, nq, n := hkv*shape.g, shape.nq, shape.n
				ks, vs := []float32{0.021}, []float32{0.013}
				if perHead {
					ks, vs = []float32{0.02, 0.011, 0.035, 0.007}, []float32{0.013, 0.05, 0.009, 0.021}
				}
				k, v := randn(rng, hkv*n*d), randn(rng, hkv*n*d)
				for i := range k {
					k[i] *= 3 // some values past 448·scale: saturated
				}
				kc, kvals := fp8Codes(dt, k, ks, n, d)
				vc, vvals := fp8Codes(dt, v, vs, n, d)
				q := randn(rng, hq*nq*d)
				ql := attention.BHSD(1, hq, nq, d)
				opts := attention.Options{Causal: true, Precision: precisionUnderTest}
				want := make([]float32, len(q))
				kvl := attention.BHSD(1, hkv, n, d)
				require.NoError(t, e.Forward(attention.F32Tensor(want, ql), attention.F32Tensor(q, ql),
					fp8View(dt, kc, ks, kvl), fp8View(dt, vc, vs, kvl), opts), name)
				if !computedInBF16(precisionUnderTest, reference.Params{HeadsQ: hq, HeadsKV: hkv, SeqQ: nq}) {
					w64, _ := cacheOracle(t, q, kvals, vvals, hq, hkv, nq, n, d)
					if errs := reference.Compare(want, w64); errs.MaxAbs > 2e-5 {
						t.Errorf("%s: %v against the oracle", name, errs)
					}
				}
				check := func(what string, got []float32) {
					t.Helper()
					requireSameBits(t, got, want, "%s: %s", name, what)
				}

				// A KVCache, appended in chunks of each activation type.
				c, err := attention.NewKVCacheFP8(dt, hkv, n+2, d, ks, vs)
				require.NoError(t, err)
				for from, i := 0, 0; from < n; i++ {
					to := min(n, from+1+rng.IntN(60))
					at := []attention.DType{attention.F32, attention.F16, attention.BF16}[i%3]
					kt, rk := rangeAs(at, k, hkv, n, d, from, to)
					vt, rv := rangeAs(at, v, hkv, n, d, from, to)
					if at != attention.F32 {
						// Rounded inputs quantise to other codes in a few
						// places: compare against what the cache holds.
						kc2, _ := fp8Codes(dt, rk, ks, to-from, d)
						vc2, _ := fp8Codes(dt, rv, vs, to-from, d)
						for h := range hkv {
							copy(kc[(h*n+from)*d:(h*n+to)*d], kc2[h*(to-from)*d:(h+1)*(to-from)*d])
							copy(vc[(h*n+from)*d:(h*n+to)*d], vc2[h*(to-from)*d:(h+1)*(to-from)*d])
						}
					}
					require.NoError(t, c.Append(kt, vt), name)
					from = to
				}
				require.NoError(t, e.Forward(attention.F32Tensor(want, ql), attention.F32Tensor(q, ql),
					fp8View(dt, kc, ks, kvl), fp8View(dt, vc, vs, kvl), opts), name)
				got := make([]float32, len(q))
				require.NoError(t, e.Forward(attention.F32Tensor(got, ql), attention.F32Tensor(q, ql), c.K(), c.V(), opts))
				check("KVCache", got)
				require.Equal(t, ks, c.K().FP8Scales())

				// A PagedCache, the rows appended as fp8 views of the codes
				// (copied: the scales are the cache's).
				pc, err := attention.NewPagedCacheFP8(dt, hkv, d, bs, (n+bs-1)/bs+1, ks, vs)
				require.NoError(t, err)
				id := pc.NewSequence()
				require.NoError(t, pc.Append(id, fp8View(dt, kc, ks, kvl), fp8View(dt, vc, vs, kvl)))
				clear(got)
				require.NoError(t, e.ForwardPaged(attention.F32Tensor(got, ql), attention.F32Tensor(q, ql), pc, []attention.SeqID{id}, opts))
				check("PagedCache", got)

				// A caller's pool in vLLM's layout and per head, blocks in
				// reverse order.
				for _, vllm := range []bool{true, false} {
					nb := (n + bs - 1) / bs
					pl := attention.BSHD(nb+1, bs, hkv, d)
					if !vllm {
						pl = attention.BHSD(nb+1, hkv, bs, d)
					}
					pk, pv := make([]uint8, pl.Span()), make([]uint8, pl.Span())
					table := make([]int32, nb)
					for i := range table {
						table[i] = int32(nb - i)
					}
					for pos := range n {
						for h := range hkv {
							off := pl.Offset(int(table[pos/bs]), h, pos%bs)
							copy(pk[off:off+d], kc[(h*n+pos)*d:][:d])
							copy(pv[off:off+d], vc[(h*n+pos)*d:][:d])
						}
					}
					kv := attention.PagedKV{K: fp8View(dt, pk, ks, pl), V: fp8View(dt, pv, vs, pl),
						BlockTable: table, MaxBlocks: nb, SeqLens: []int32{int32(n)}}
					clear(got)
					require.NoError(t, e.ForwardPagedKV(attention.F32Tensor(got, ql), attention.F32Tensor(q, ql), kv, opts))
					check(fmt.Sprintf("PagedKV vllm=%v", vllm), got)
				}

				// Interleaved heads: a [1, n, hkv, d] view of the same rows.
				sl := attention.BSHD(1, n, hkv, d)
				sk, sv := make([]uint8, sl.Span()), make([]uint8, sl.Span())
				for pos := range n {
					for h := range hkv {
						copy(sk[sl.Offset(0, h, pos):][:d], kc[(h*n+pos)*d:][:d])
						copy(sv[sl.Offset(0, h, pos):][:d], vc[(h*n+pos)*d:][:d])
					}
				}
				clear(got)
				require.NoError(t, e.Forward(attention.F32Tensor(got, ql), attention.F32Tensor(q, ql),
					fp8View(dt, sk, ks, sl), fp8View(dt, sv, vs, sl), opts))
				check("BSHD view", got)
			}
		}
	}
}

// rangeAs returns positions [from, to) of canonical rows x [hkv, n, d] as
// a [1, hkv, to−from, d] tensor of activation type dt (a copy) and the
// values it holds, [hkv, to−from, d].
func rangeAs(dt attention.DType, x []float32, hkv, n, d, from, to int) (attention.Tensor, []float32) {
	m := to - from
	r := make([]float32, 0, hkv*m*d)
	for h := range hkv {
		r = append(r, x[(h*n+from)*d:(h*n+to)*d]...)
	}
	l := attention.BHSD(1, hkv, m, d)
	switch dt {
	case attention.F16:
		h := fp16.Float16s(r)
		for i, v := range h {
			r[i] = v.Float32()
		}
		return attention.F16Tensor(h, l), r
	case attention.BF16:
		b := fp16.BFloat16s(r)
		for i, v := range b {
			r[i] = v.Float32()
		}
		return attention.BF16Tensor(b, l), r
	}
	return attention.F32Tensor(r, l), r
}

// TestFP8Errors checks the errors of fp8 views, caches and appends, and
// that a refused call writes nothing.
func TestFP8Errors(t *testing.T) {
	e := mustEngine(t, attention.Config{})
	l := attention.BHSD(1, 2, 4, 8)
	ql := attention.BHSD(1, 2, 1, 8)
	q := attention.F32Tensor(make([]float32, 16), ql)
	outBuf := make([]float32, 16)
	for i := range outBuf {
		outBuf[i] = 7
	}
	out := attention.F32Tensor(outBuf, ql)
	data := make([]fp16.Float8E4M3, l.Span())
	good := attention.FP8E4M3Tensor(data, []float32{0.5, 2}, l)
	require.NoError(t, e.Forward(attention.F32Tensor(make([]float32, 16), ql), q, good, good, attention.Options{}))
	// K and V may differ in type, fp8 ones too.
	e5 := attention.FP8E5M2Tensor(make([]fp16.Float8E5M2, 64), []float32{3}, l)
	require.NoError(t, e.Forward(attention.F32Tensor(make([]float32, 16), ql), q, good, e5, attention.Options{}))
	for i := range outBuf {
		outBuf[i] = 7
	}
	nan := float32(math.NaN())
	for _, c := range []struct {
		err  error
		want string
	}{
		{e.Forward(out, q, attention.FP8E4M3Tensor(data, []float32{1, 2, 3}, l), good, attention.Options{}), "fp8e4m3 view has 3 scales; want 1 (per tensor) or 2 (per head)"},
		{e.Forward(out, q, good, attention.FP8E5M2Tensor(make([]fp16.Float8E5M2, 64), nil, l), attention.Options{}), "has 0 scales"},
		{e.Forward(out, q, attention.FP8E4M3Tensor(data, []float32{0}, l), good, attention.Options{}), "scale 0 is 0; want a positive finite number"},
		{e.Forward(out, q, attention.FP8E4M3Tensor(data, []float32{1, nan}, l), good, attention.Options{}), "scale 1 is NaN"},
		{e.Forward(out, q, attention.FP8E4M3Tensor(data[:60], []float32{1}, l), good, attention.Options{}), "slice has 60 elements; want >= 64"},
		{e.Forward(out, attention.FP8E4M3Tensor(data, []float32{1}, ql), good, good, attention.Options{}), "q has element type fp8e4m3; want f32, f16 or bf16"},
		{e.Forward(attention.FP8E4M3Tensor(data, []float32{1}, ql), q, good, good, attention.Options{}), "out has element type fp8e4m3; want f32, f16 or bf16"},
		{e.Forward(out, q, good, good, attention.Options{Mask: attention.FP8E4M3Tensor(data, []float32{1}, attention.BHSD(1, 1, 1, 4))}), "Options.Mask has element type fp8e4m3"},
	} {
		require.Error(t, c.err)
		require.ErrorContains(t, c.err, c.want)
	}
	// An output over the scales of an fp8 input.
	scales := make([]float32, 16)
	scales[0], scales[1] = 1, 1
	over := attention.FP8E4M3Tensor(data, scales[:2], l)
	require.ErrorContains(t, e.Forward(attention.F32Tensor(scales, ql), q, over, good, attention.Options{}), "out overlaps k scales")
	require.ErrorContains(t, e.ForwardLSE(out, scales[:2], q, good, over, attention.Options{}), "lse overlaps v scales")
	for _, x := range outBuf {
		require.Equal(t, float32(7), x, "a refused call wrote out")
	}

	// Caches.
	_, err := attention.NewKVCacheFP8(attention.F16, 2, 4, 8, []float32{1}, []float32{1})
	require.ErrorContains(t, err, "NewKVCacheFP8: element type f16; want fp8e4m3 or fp8e5m2")
	_, err = attention.NewKVCacheFP8(attention.FP8E4M3, 2, 4, 8, []float32{1, 2, 3}, []float32{1})
	require.ErrorContains(t, err, "kScales has 3 scales; want 1 (per cache) or 2 (per head)")
	_, err = attention.NewPagedCacheFP8(attention.FP8E5M2, 2, 8, 4, 4, []float32{1}, []float32{-1})
	require.ErrorContains(t, err, "vScales[0] is -1; want a positive finite number")
	_, err = attention.NewPagedCacheFP8(attention.Q8, 2, 32, 4, 4, nil, nil)
	require.ErrorContains(t, err, "want fp8e4m3 or fp8e5m2")
	_, err = attention.NewKVCacheFP8(attention.FP8E4M3, 2, 4, 8, nil, nil)
	require.ErrorContains(t, err, "NewKVCacheFP8: kScales is nil; want 1 scale (per cache) or 2 (per head), []float32{1} for scale 1")
	_, err = attention.NewPagedCacheFP8(attention.FP8E5M2, 2, 8, 4, 4, []float32{1}, nil)
	require.ErrorContains(t, err, "NewPagedCacheFP8: vScales is nil")
	c, err := attention.NewKVCacheFP8(attention.FP8E4M3, 2, 4, 8, []float32{1}, []float32{1})
	require.NoError(t, err)
	q8 := attention.Q8Tensor(make([]int8, 64), make([]float32, 2), attention.BHSD(1, 2, 1, 32))
	require.ErrorContains(t, c.Append(q8, q8), "k has element type q8; want f32, f16, bf16 or the cache's fp8e4m3")
	e5 = attention.FP8E5M2Tensor(make([]fp16.Float8E5M2, 16), []float32{1}, attention.BHSD(1, 2, 1, 8))
	require.ErrorContains(t, c.Append(e5, e5), "want f32, f16, bf16 or the cache's fp8e4m3")
	require.Zero(t, c.Len(), "a refused Append changed the cache")
	pc, err := attention.NewPagedCache(attention.FP8E5M2, 2, 8, 4, 1)
	require.NoError(t, err)
	id := pc.NewSequence()
	big := attention.F32Tensor(make([]float32, 2*5*8), attention.BHSD(1, 2, 5, 8))
	require.Error(t, pc.Append(id, big, big), "5 positions into one block of 4")
	n, err := pc.Len(id)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, "fp8e4m3", attention.FP8E4M3.String())
	require.Equal(t, "fp8e5m2", attention.FP8E5M2.String())
	require.Equal(t, 1, attention.FP8E5M2.Size())
}

// TestFP8AppendSaturates checks Append's quantisation: float32(x / scale)
// rounded to nearest even, beyond the range the largest finite value of the sign,
// ±Inf too, and NaN kept.
func TestFP8AppendSaturates(t *testing.T) {
	e := mustEngine(t, attention.Config{})
	inf := float32(math.Inf(1))
	x := []float32{1e5, -1e5, inf, -inf, 0.3, -0.3, 1e-6, 0}
	const sc = 0.5
	for _, dt := range fp8Types {
		c, err := attention.NewKVCacheFP8(dt, 1, 1, len(x), []float32{sc}, []float32{sc})
		require.NoError(t, err)
		row := attention.F32Tensor(x, attention.BHSD(1, 1, 1, len(x)))
		require.NoError(t, c.Append(row, row))
		// Read the values back through attention: one key, so the output
		// is V's row (times the weight 1, exactly).
		out := make([]float32, len(x))
		ql := attention.BHSD(1, 1, 1, len(x))
		require.NoError(t, e.Forward(attention.F32Tensor(out, ql), attention.F32Tensor(make([]float32, len(x)), ql), c.K(), c.V(), attention.Options{}))
		maxv := float32(fp16.MaxFloat8E4M3)
		if dt == attention.FP8E5M2 {
			maxv = fp16.MaxFloat8E5M2
		}
		want := []float32{maxv * sc, -maxv * sc, maxv * sc, -maxv * sc, fp8Round(dt, 0.3, sc), fp8Round(dt, -0.3, sc), fp8Round(dt, 1e-6, sc), 0}
		require.Equal(t, want, out, "%v", dt)
	}
}

// TestFP8AppendRoundsFloat32Quotient checks the rounding NewKVCacheFP8
// documents: Append stores the fp8 value nearest float32(x / scale), the
// quotient rounded to float32 first, as vLLM's cache writes do. At the
// two quotients below the float32 rounding lands on a midpoint of the
// format (1.0625 for E4M3, 1.125 for E5M2) that the exact quotient lies
// just above, so the stored value is 1 (the tie to even), not the fp8
// value nearest the exact quotient (1.125, 1.25). Both caches' Append,
// and a row of random values and scales, are checked against
// fp16's conversion of the float32 quotient.
func TestFP8AppendRoundsFloat32Quotient(t *testing.T) {
	e := mustEngine(t, attention.Config{})
	rng := rand.New(rand.NewPCG(207, 208))
	const d = 64
	for _, c := range []struct {
		dt    attention.DType
		x, sc float32
	}{
		{attention.FP8E4M3, 0.018381251, 0.0173},
		{attention.FP8E5M2, 0.0562500022, 0.05},
	} {
		x := make([]float32, d)
		x[0] = c.x
		for i := 1; i < d; i++ {
			x[i] = float32(rng.NormFloat64()) * c.sc * 8
		}
		want := make([]float32, d)
		for i, xi := range x {
			want[i] = fp8Round(c.dt, xi, c.sc)
		}
		require.Equal(t, c.sc, want[0], "%v: the test's quotient does not round to 1", c.dt)
		row := attention.F32Tensor(x, attention.BHSD(1, 1, 1, d))
		ql := attention.BHSD(1, 1, 1, d)
		q := attention.F32Tensor(make([]float32, d), ql)
		// Read the values back through attention: one key, so the output
		// is V's row (times the weight 1, exactly).
		kc, err := attention.NewKVCacheFP8(c.dt, 1, 1, d, []float32{c.sc}, []float32{c.sc})
		require.NoError(t, err)
		require.NoError(t, kc.Append(row, row))
		out := make([]float32, d)
		require.NoError(t, e.Forward(attention.F32Tensor(out, ql), q, kc.K(), kc.V(), attention.Options{}))
		require.Equal(t, want, out, "%v: KVCache.Append", c.dt)
		pc, err := attention.NewPagedCacheFP8(c.dt, 1, d, 4, 1, []float32{c.sc}, []float32{c.sc})
		require.NoError(t, err)
		id := pc.NewSequence()
		require.NoError(t, pc.Append(id, row, row))
		clear(out)
		require.NoError(t, e.ForwardPaged(attention.F32Tensor(out, ql), q, pc, []attention.SeqID{id}, attention.Options{}))
		require.Equal(t, want, out, "%v: PagedCache.Append", c.dt)
	}
}

// TestFP8NoAllocations checks that a warmed-up decode step over fp8
// caches allocates nothing, Append from binary16 included.
func TestFP8NoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("SKIP: the race detector allocates")
	}
	rng := rand.New(rand.NewPCG(205, 206))
	const hkv, hq, d, n = 2, 8, 128, 300
	for _, dt := range fp8Types {
		c, err := attention.NewKVCacheFP8(dt, hkv, n+40, d, []float32{0.01, 0.02}, []float32{0.03})
		require.NoError(t, err)
		k, v := randn(rng, hkv*n*d), randn(rng, hkv*n*d)
		require.NoError(t, c.Append(kvRange(k, hkv, n, d, 0, n), kvRange(v, hkv, n, d, 0, n)))
		row := attention.F16Tensor(fp16.Float16s(randn(rng, hkv*d)), attention.BHSD(1, hkv, 1, d))
		e := mustEngine(t, attention.Config{Threads: 2})
		q := randn(rng, hq*d)
		out := make([]float32, len(q))
		ql := attention.BHSD(1, hq, 1, d)
		step := func() {
			if err := c.Append(row, row); err != nil {
				t.Fatal(err)
			}
			if err := e.Forward(attention.F32Tensor(out, ql), attention.F32Tensor(q, ql), c.K(), c.V(), attention.Options{Causal: true}); err != nil {
				t.Fatal(err)
			}
			if err := c.Truncate(n); err != nil {
				t.Fatal(err)
			}
		}
		step()
		if a := testing.AllocsPerRun(20, step); a != 0 {
			t.Fatalf("%v: a decode step allocates %v times; want 0", dt, a)
		}
	}
}
