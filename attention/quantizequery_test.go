package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/internal/tier"
)

// quantizeRows returns x (rows of d values, d a multiple of Q8Block) with
// every row quantised to Q8 and back: the queries Options.QuantizeQuery
// computes with.
func quantizeRows(t testing.TB, x []float32, d int) []float32 {
	t.Helper()
	y := make([]float32, len(x))
	data, scales := make([]int8, d), make([]float32, d/attention.Q8Block)
	for r := 0; r < len(x); r += d {
		require.NoError(t, attention.QuantizeQ8(data, scales, x[r:r+d]))
		require.NoError(t, attention.DequantizeQ8(y[r:r+d], data, scales))
	}
	return y
}

// scoreRoundingBound returns the largest change the query's rounding can
// make to a scaled score of p: scale·Σ_c |k_c|·(step of q_c)/2 over every
// query row and key.
func scoreRoundingBound(p reference.Params, q, k []float32) float64 {
	scale := p.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(p.Dim))
	}
	d, g := p.Dim, p.HeadsQ/p.HeadsKV
	var worst float64
	for b := range p.Batch {
		for h := range p.HeadsQ {
			for i := range p.SeqQ {
				qi := q[((b*p.HeadsQ+h)*p.SeqQ+i)*d:][:d]
				halfStep := make([]float64, d/attention.Q8Block)
				for blk := range halfStep {
					var amax float64
					for _, x := range qi[blk*attention.Q8Block:][:attention.Q8Block] {
						amax = max(amax, math.Abs(float64(x)))
					}
					halfStep[blk] = amax / 127 / 2
				}
				for j := range p.SeqKV {
					kj := k[((b*p.HeadsKV+h/g)*p.SeqKV+j)*d:][:d]
					var s float64
					for c, x := range kj {
						s += math.Abs(float64(x)) * halfStep[c/attention.Q8Block]
					}
					worst = max(worst, scale*s)
				}
			}
		}
	}
	return worst
}

// TestQuantizeQuery checks Options.QuantizeQuery on every implementation
// and feature, decode and prefill: against the float64 oracle of the
// quantised queries under the project's rule, and against the oracle of
// the queries as given within what their rounding can change (first
// order: the softmax moves by at most twice the largest score change, so
// an output by at most that times the largest |v|), beside the default
// path's error.
func TestQuantizeQuery(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(121, 122))
		e := mustEngine(t, attention.Config{Threads: 3, BlockQ: 24, BlockKV: 40})
		type tc struct {
			b, hq, hkv, nq, nkv, d int
			mod                    func(*reference.Params)
			name                   string
		}
		var cases []tc
		shapes := [][6]int{
			{1, 1, 1, 1, 1, 32}, {1, 4, 1, 1, 37, 64}, {1, 6, 3, 3, 129, 96}, {1, 4, 2, 70, 70, 64},
			{2, 8, 2, 1, 300, 128}, {2, 2, 1, 33, 100, 160}, {1, 2, 2, 5, 1000, 256},
		}
		if raceEnabled {
			shapes = shapes[:4] // the race detector slows the oracle most
		}
		for _, sh := range shapes {
			for _, f := range []struct {
				name string
				mod  func(*reference.Params)
			}{
				{"plain", func(*reference.Params) {}},
				{"causal", func(p *reference.Params) { p.Causal = true }},
				{"window+softcap", func(p *reference.Params) {
					p.Causal, p.Window, p.WindowLeft, p.WindowRight, p.SoftCap = true, true, 17, 0, 5
				}},
				{"alibi+sinks", func(p *reference.Params) {
					p.Slopes = make([]float64, p.HeadsQ)
					p.Sinks = make([]float64, p.HeadsQ)
					for h := range p.HeadsQ {
						p.Slopes[h] = math.Exp2(-float64(h + 1))
						p.Sinks[h] = 0.5
					}
				}},
			} {
				cases = append(cases, tc{sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], f.mod, f.name})
			}
		}
		for _, c := range cases {
			p := reference.Params{Batch: c.b, HeadsQ: c.hq, HeadsKV: c.hkv, SeqQ: c.nq, SeqKV: c.nkv, Dim: c.d}
			c.mod(&p)
			what := fmt.Sprintf("B%d Hq%d Hkv%d Nq%d Nkv%d d%d %s", c.b, c.hq, c.hkv, c.nq, c.nkv, c.d, c.name)
			q, k, v := randn(rng, p.QLen()), randn(rng, p.KVLen()), randn(rng, p.VLen())
			for i := range q {
				q[i] *= 2 // logits of a few units: the rounding shows
			}
			if !tier.Keep(t, what, 4) {
				continue // drawn first: a cell has the same inputs in both tiers
			}
			ql := attention.BHSD(c.b, c.hq, c.nq, c.d)
			kl := attention.BHSD(c.b, c.hkv, c.nkv, c.d)
			kT, vT := q8RoundTrip(t, k, kl), q8RoundTrip(t, v, kl)
			opts := optionsFor(p, 0)
			opts.QuantizeQuery = true
			got := make([]float32, len(q))
			q0 := append([]float32(nil), q...)
			require.NoError(t, e.Forward(attention.F32Tensor(got, ql), attention.F32Tensor(q, ql), kT, vT, opts), what)
			require.Equal(t, q0, q, "%s: the queries were modified", what)

			// The oracle of the queries the engine computed with.
			qq := quantizeRows(t, q, c.d)
			want, _, err := reference.Attention(p, reference.Float64s(qq), reference.Float64s(k), reference.Float64s(v))
			require.NoError(t, err)
			naiveOut := make([]float32, len(q))
			var n reference.Naive
			require.NoError(t, n.Attention(p, naiveOut, qq, k, v))
			errs := reference.Compare(got, want)
			checkRule(t, what, errs, reference.Compare(naiveOut, want), func() float64 {
				kc, err := reference.LogitCondition(p, reference.Float64s(qq), reference.Float64s(k), reference.Float64s(v))
				require.NoError(t, err)
				return kc
			})

			// Against the queries as given, beside the default path.
			orig, _, err := reference.Attention(p, reference.Float64s(q), reference.Float64s(k), reference.Float64s(v))
			require.NoError(t, err)
			def := make([]float32, len(q))
			opts.QuantizeQuery = false
			require.NoError(t, e.Forward(attention.F32Tensor(def, ql), attention.F32Tensor(q, ql), kT, vT, opts), what)
			var vmax float64
			for _, x := range v {
				vmax = max(vmax, math.Abs(float64(x)))
			}
			bound := 2*scoreRoundingBound(p, q, k)*vmax + 1e-5
			qErr, defErr := reference.Compare(got, orig), reference.Compare(def, orig)
			require.LessOrEqual(t, qErr.MaxAbs, bound, "%s: QuantizeQuery's error against the given queries", what)
			require.Less(t, defErr.MaxAbs, qErr.MaxAbs+1e-6, "%s: the default path should be the more accurate", what)
		}
	})
}

// TestQuantizeQueryDeterministic checks that QuantizeQuery's outputs are
// the same bits at every thread count and split, and through a paged cache
// and a KVCache as through Forward.
func TestQuantizeQueryDeterministic(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(123, 124))
		const hq, hkv, n, d = 8, 2, 333, 128
		k, v := randn(rng, hkv*n*d), randn(rng, hkv*n*d)
		kl := attention.BHSD(1, hkv, n, d)
		// Q8 tensors quantised from k and v as the paged cache's Append
		// quantises them.
		kT, vT := q8Of(t, k, kl), q8Of(t, v, kl)
		for _, nq := range []int{1, 4, 50} {
			q := randn(rng, hq*nq*d)
			ql := attention.BHSD(1, hq, nq, d)
			opts := attention.Options{Causal: true, QuantizeQuery: true}
			var first []float32
			for _, cfg := range []attention.Config{{Threads: 1}, {Threads: 3}, {Threads: 8}} {
				out := make([]float32, len(q))
				require.NoError(t, mustEngine(t, cfg).Forward(attention.F32Tensor(out, ql), attention.F32Tensor(q, ql), kT, vT, opts))
				if first == nil {
					first = out
					continue
				}
				require.Equal(t, first, out, "nq %d %+v", nq, cfg)
			}
			// A paged cache of scattered 16-position blocks holding the
			// same Q8 keys and values.
			pc, err := attention.NewPagedCache(attention.Q8, hkv, d, 16, 64)
			require.NoError(t, err)
			other, id := pc.NewSequence(), pc.NewSequence()
			for j := 0; j < n; j += 16 {
				m := min(16, n-j)
				part := func(x []float32) attention.Tensor {
					vals := make([]float32, hkv*m*d)
					for h := range hkv {
						copy(vals[h*m*d:(h+1)*m*d], x[(h*n+j)*d:(h*n+j+m)*d])
					}
					return attention.F32Tensor(vals, attention.BHSD(1, hkv, m, d))
				}
				require.NoError(t, pc.Append(id, part(k), part(v)))
				require.NoError(t, pc.Append(other, part(k), part(v)))
			}
			out := make([]float32, len(q))
			bl := attention.BSHD(1, nq, hq, d)
			qb := make([]float32, len(q))
			for h := range hq {
				for i := range nq {
					copy(qb[(i*hq+h)*d:(i*hq+h+1)*d], q[(h*nq+i)*d:(h*nq+i+1)*d])
				}
			}
			require.NoError(t, mustEngine(t, attention.Config{Threads: 2}).ForwardPaged(attention.F32Tensor(out, bl), attention.F32Tensor(qb, bl), pc, []attention.SeqID{id}, opts))
			for h := range hq {
				for i := range nq {
					require.Equal(t, first[(h*nq+i)*d:(h*nq+i+1)*d], out[(i*hq+h)*d:(i*hq+h+1)*d], "paged nq %d head %d row %d", nq, h, i)
				}
			}
		}
	})
}

// q8Of quantises x (layout l, tight) to a Q8 tensor, leaving x as it is.
func q8Of(t *testing.T, x []float32, l attention.Layout) attention.Tensor {
	t.Helper()
	data, scales := make([]int8, len(x)), make([]float32, len(x)/attention.Q8Block)
	require.NoError(t, attention.QuantizeQ8(data, scales, x))
	return attention.Q8Tensor(data, scales, l)
}

func TestQuantizeQueryErrors(t *testing.T) {
	e := mustEngine(t, attention.Config{})
	l := attention.BHSD(1, 1, 2, 32)
	f := make([]float32, 64)
	q8 := attention.Q8Tensor(make([]int8, 64), make([]float32, 2), l)
	out := []float32{7}
	out = append(out, make([]float32, 63)...)
	o := attention.F32Tensor(out, l)
	require.ErrorContains(t, e.Forward(o, attention.F32Tensor(f, l), attention.F32Tensor(f, l), attention.F32Tensor(f, l), attention.Options{QuantizeQuery: true}),
		"Options.QuantizeQuery needs Q8 keys; the keys are f32")
	require.ErrorContains(t, e.Forward(o, attention.F32Tensor(f, l), q8, q8, attention.Options{QuantizeQuery: true, Precision: attention.PrecisionBFloat16}),
		"Options.QuantizeQuery needs PrecisionFloat32; Options.Precision is bfloat16")
	require.Equal(t, float32(7), out[0], "nothing written on error")
}

func TestQuantizeQueryNoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("SKIP: the race detector allocates")
	}
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(125, 126))
		const hq, hkv, n, d = 8, 2, 500, 128
		k, v := randn(rng, hkv*n*d), randn(rng, hkv*n*d)
		kl := attention.BHSD(1, hkv, n, d)
		kT, vT := q8RoundTrip(t, k, kl), q8RoundTrip(t, v, kl)
		e := mustEngine(t, attention.Config{Threads: 2})
		for _, nq := range []int{1, 40} {
			q := randn(rng, hq*nq*d)
			ql := attention.BHSD(1, hq, nq, d)
			out := make([]float32, len(q))
			step := func() {
				if err := e.Forward(attention.F32Tensor(out, ql), attention.F32Tensor(q, ql), kT, vT, attention.Options{Causal: true, QuantizeQuery: true}); err != nil {
					t.Fatal(err)
				}
			}
			step()
			if a := testing.AllocsPerRun(10, step); a != 0 {
				t.Fatalf("nq %d: %v allocations a call; want 0", nq, a)
			}
		}
	})
}
