package reference

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/internal/impltest"
)

// ---------------------------------------------------------------------------
// Helpers

// randNormal and randNormal32 return n standard normal values (the
// module's shared test helpers, internal/impltest).
var (
	randNormal   = impltest.RandnF64
	randNormal32 = impltest.Randn
)

// direct is an independent triple-loop implementation of the spec, written
// without gonum and without using Params helpers other than the sizes, so the
// oracle is checked against something that shares no code with it.
func direct(p Params, q, k, v []float64) (out, lse []float64) {
	scale := p.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(p.Dim))
	}
	d := p.Dim
	out = make([]float64, p.Batch*p.HeadsQ*p.SeqQ*d)
	lse = make([]float64, p.Batch*p.HeadsQ*p.SeqQ)
	for b := 0; b < p.Batch; b++ {
		for h := 0; h < p.HeadsQ; h++ {
			hk := h * p.HeadsKV / p.HeadsQ // == h / (HeadsQ/HeadsKV)
			for i := 0; i < p.SeqQ; i++ {
				qi := q[((b*p.HeadsQ+h)*p.SeqQ+i)*d:][:d]
				var vis []int
				var sc []float64
				for j := 0; j < p.SeqKV; j++ {
					if p.Causal && j-i > p.SeqKV-p.SeqQ {
						continue
					}
					kj := k[((b*p.HeadsKV+hk)*p.SeqKV+j)*d:][:d]
					var dot float64
					for c := 0; c < d; c++ {
						dot += qi[c] * kj[c]
					}
					vis = append(vis, j)
					sc = append(sc, scale*dot)
				}
				r := (b*p.HeadsQ+h)*p.SeqQ + i
				if len(vis) == 0 {
					lse[r] = math.Inf(-1)
					continue
				}
				m := sc[0]
				for _, x := range sc {
					m = math.Max(m, x)
				}
				var sum float64
				for _, x := range sc {
					sum += math.Exp(x - m)
				}
				lse[r] = m + math.Log(sum)
				for c := 0; c < d; c++ {
					var acc float64
					for t, j := range vis {
						acc += math.Exp(sc[t]-m) * v[((b*p.HeadsKV+hk)*p.SeqKV+j)*d+c]
					}
					out[r*d+c] = acc / sum
				}
			}
		}
	}
	return out, lse
}

func assertClose(t *testing.T, want, got []float64, tol float64, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		if math.IsInf(want[i], 0) {
			require.Equal(t, want[i], got[i], "%s: element %d", msg, i)
			continue
		}
		require.InDelta(t, want[i], got[i], tol*(1+math.Abs(want[i])), "%s: element %d", msg, i)
	}
}

func hasNaN(x []float64) bool {
	for _, f := range x {
		if math.IsNaN(f) {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------
// Params helpers

func TestParamsHelpers(t *testing.T) {
	p := Params{Batch: 2, HeadsQ: 6, HeadsKV: 3, SeqQ: 5, SeqKV: 7, Dim: 16}
	require.NoError(t, p.Validate())
	assert.Equal(t, 2*6*5*16, p.QLen())
	assert.Equal(t, 2*3*7*16, p.KVLen())
	assert.Equal(t, 2*6*5, p.LSELen())
	assert.Equal(t, 0.25, p.EffectiveScale())
	p.Scale = -0.5
	assert.Equal(t, -0.5, p.EffectiveScale())
	assert.Equal(t, 4.0*2*6*5*7*16, p.FLOPs())
	p.Causal = true
	assert.Equal(t, 2.0*2*6*5*7*16, p.FLOPs())

	// Bottom-right alignment, SeqKV − SeqQ = 2: query 0 sees keys 0..2 and
	// the last query sees all keys.
	assert.True(t, p.Visible(0, 2))
	assert.False(t, p.Visible(0, 3))
	assert.True(t, p.Visible(4, 6))
	assert.False(t, p.Visible(4, 7), "out-of-range key")
	assert.False(t, p.Visible(-1, 0), "out-of-range query")
	// SeqQ > SeqKV: the first SeqQ − SeqKV queries see nothing.
	w := Params{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 5, SeqKV: 2, Dim: 1, Causal: true}
	for i := 0; i < 5; i++ {
		n := 0
		for j := 0; j < 2; j++ {
			if w.Visible(i, j) {
				n++
			}
		}
		assert.Equal(t, []int{0, 0, 0, 1, 2}[i], n, "row %d", i)
		lo, hi := w.keyRange(i)
		assert.Equal(t, n, hi-lo, "keyRange row %d", i)
	}
	w.Causal = false
	assert.True(t, w.Visible(0, 1))
}

// ---------------------------------------------------------------------------
// Oracle against the direct implementation

func TestAttentionMatchesDirect(t *testing.T) {
	shapes := []Params{
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 4, SeqKV: 4, Dim: 8},
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 3, SeqKV: 7, Dim: 5},                 // Nq < Nkv
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 7, SeqKV: 3, Dim: 5},                 // Nq > Nkv
		{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 6, SeqKV: 9, Dim: 8},                 // GQA
		{Batch: 2, HeadsQ: 4, HeadsKV: 1, SeqQ: 9, SeqKV: 6, Dim: 3, Scale: 0.7},     // MQA, explicit scale
		{Batch: 1, HeadsQ: 2, HeadsKV: 2, SeqQ: 5, SeqKV: 5, Dim: 1},                 // Dim 1
		{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 1, SeqKV: 11, Dim: 8},                // decode
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 6, SeqKV: 1, Dim: 4},                 // one key
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqKV: 1, Dim: 1, Scale: -2},      // scalar
		{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 0, SeqKV: 5, Dim: 4},                 // no queries
		{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 3, SeqKV: 0, Dim: 4},                 // no keys
		{Batch: 1, HeadsQ: 3, HeadsKV: 3, SeqQ: 70, SeqKV: 140, Dim: 16, Scale: 0.3}, // parallel Gemm path
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, base := range shapes {
		for _, causal := range []bool{false, true} {
			p := base
			p.Causal = causal
			t.Run(fmt.Sprintf("%+v", p), func(t *testing.T) {
				q := randNormal(r, p.QLen())
				k := randNormal(r, p.KVLen())
				v := randNormal(r, p.KVLen())
				out, lse, err := Attention(p, q, k, v)
				require.NoError(t, err)
				wantOut, wantLSE := direct(p, q, k, v)
				assertClose(t, wantOut, out, 1e-12, "out")
				assertClose(t, wantLSE, lse, 1e-12, "lse")
				if p.SeqKV == 0 {
					for i := range out {
						require.Zero(t, out[i])
					}
					for i := range lse {
						require.True(t, math.IsInf(lse[i], -1))
					}
				}
			})
		}
	}
}

func TestAttentionLongerSlicesIgnoreTail(t *testing.T) {
	p := Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 3, SeqKV: 4, Dim: 2, Causal: true}
	r := rand.New(rand.NewPCG(3, 4))
	q := randNormal(r, p.QLen())
	k := randNormal(r, p.KVLen())
	v := randNormal(r, p.KVLen())
	out, lse, err := Attention(p, q, k, v)
	require.NoError(t, err)
	nan := math.NaN()
	out2, lse2, err := Attention(p, append(q, nan), append(k, nan, nan), append(v, nan))
	require.NoError(t, err)
	assert.Equal(t, out, out2)
	assert.Equal(t, lse, lse2)
	assert.Len(t, out2, p.QLen())
	assert.Len(t, lse2, p.LSELen())
}

// ---------------------------------------------------------------------------
// Properties

// With V all ones every output of a row with a visible key is exactly the
// sum of its softmax weights, which must be 1.
func TestWeightsSumToOne(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, causal := range []bool{false, true} {
		p := Params{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 9, SeqKV: 5, Dim: 3, Causal: causal}
		q := randNormal(r, p.QLen())
		k := randNormal(r, p.KVLen())
		v := make([]float64, p.KVLen())
		for i := range v {
			v[i] = 1
		}
		out, _, err := Attention(p, q, k, v)
		require.NoError(t, err)
		for row := 0; row < p.LSELen(); row++ {
			want := 1.0
			if !p.Visible(row%p.SeqQ, 0) {
				want = 0
			}
			for c := 0; c < p.Dim; c++ {
				require.InDelta(t, want, out[row*p.Dim+c], 1e-14, "causal=%v row %d", causal, row)
			}
		}
	}
}

// Outputs are convex combinations of visible V rows, so each coordinate lies
// within the range of V over the visible keys.
func TestOutputIsConvexCombination(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	p := Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 6, SeqKV: 6, Dim: 4, Causal: true}
	q := randNormal(r, p.QLen())
	k := randNormal(r, p.KVLen())
	v := randNormal(r, p.KVLen())
	out, _, err := Attention(p, q, k, v)
	require.NoError(t, err)
	for h := 0; h < p.HeadsQ; h++ {
		for i := 0; i < p.SeqQ; i++ {
			for c := 0; c < p.Dim; c++ {
				lo, hi := math.Inf(1), math.Inf(-1)
				for j := 0; p.Visible(i, j); j++ {
					lo = math.Min(lo, v[j*p.Dim+c])
					hi = math.Max(hi, v[j*p.Dim+c])
				}
				o := out[((h*p.SeqQ)+i)*p.Dim+c]
				require.True(t, o >= lo-1e-15 && o <= hi+1e-15, "h%d i%d c%d: %v not in [%v, %v]", h, i, c, o, lo, hi)
			}
		}
	}
}

func TestFullyMaskedRows(t *testing.T) {
	// Causal with SeqQ > SeqKV: rows 0..2 see nothing, rows 3 and 4 see 1 and
	// 2 keys. K/V hold large values so a leak would be visible.
	p := Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 5, SeqKV: 2, Dim: 3, Causal: true}
	r := rand.New(rand.NewPCG(9, 10))
	q := randNormal(r, p.QLen())
	k := randNormal(r, p.KVLen())
	v := randNormal(r, p.KVLen())
	for i := range v {
		v[i] += 100
	}
	out, lse, err := Attention(p, q, k, v)
	require.NoError(t, err)
	for h := 0; h < p.HeadsQ; h++ {
		for i := 0; i < p.SeqQ; i++ {
			row := h*p.SeqQ + i
			o := out[row*p.Dim : (row+1)*p.Dim]
			if i < 3 {
				assert.Equal(t, []float64{0, 0, 0}, o, "row %d", row)
				assert.True(t, math.IsInf(lse[row], -1), "lse row %d = %v", row, lse[row])
			} else {
				assert.False(t, hasNaN(o))
				assert.False(t, math.IsInf(lse[row], 0) || math.IsNaN(lse[row]))
				assert.Greater(t, o[0], 90.0, "row %d should average V", row)
			}
		}
	}
	// Row 3 sees only key 0, so it copies V row 0 and lse is its score.
	assert.Equal(t, v[0:3], out[3*3:4*3])
	var dot float64
	for c := 0; c < 3; c++ {
		dot += q[3*3+c] * k[c]
	}
	assert.InDelta(t, dot/math.Sqrt(3), lse[3], 1e-14)
}

func TestLargeLogitsDoNotOverflow(t *testing.T) {
	// Scores are 1e4·(±1, ±0.5, ∓1) for one query over three keys: exp would
	// overflow without max subtraction, and the result must be exactly the V
	// row of the argmax key (exp(−5000) underflows to 0).
	p := Params{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqKV: 3, Dim: 2, Scale: 1}
	k := []float64{1, 0, 0, 1, -1, 0}
	v := []float64{1, 2, 3, 4, 5, 6}
	for _, tc := range []struct {
		q      []float64
		argmax int
		lse    float64
	}{
		{[]float64{1e4, 5e3}, 0, 1e4},
		{[]float64{-1e4, 5e3}, 2, 1e4},
		{[]float64{1e3, 1e4}, 1, 1e4},
	} {
		out, lse, err := Attention(p, tc.q, k, v)
		require.NoError(t, err)
		assert.Equal(t, v[2*tc.argmax:2*tc.argmax+2], out, "q=%v", tc.q)
		assert.Equal(t, tc.lse, lse[0], "q=%v", tc.q)

		// The float32 baseline must survive the same logits.
		var n Naive
		o32 := make([]float32, 2)
		require.NoError(t, n.Attention(p, o32, []float32{float32(tc.q[0]), float32(tc.q[1])},
			[]float32{1, 0, 0, 1, -1, 0}, []float32{1, 2, 3, 4, 5, 6}))
		assert.Equal(t, []float32{float32(v[2*tc.argmax]), float32(v[2*tc.argmax+1])}, o32, "naive q=%v", tc.q)
	}
}

func TestMaskedNaNDoesNotLeak(t *testing.T) {
	// GQA: 4 query heads share 2 KV heads. Poison K and V of KV head 0 at the
	// last key (visible only to the last query row) and KV head 1 at key 2
	// (visible to rows 2 and 3); every other row must be bit-identical to a
	// clean run and every poisoned-visible row must be NaN.
	p := Params{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 4, SeqKV: 4, Dim: 3, Causal: true}
	r := rand.New(rand.NewPCG(11, 12))
	q := randNormal(r, p.QLen())
	k := randNormal(r, p.KVLen())
	v := randNormal(r, p.KVLen())
	clean, cleanLSE, err := Attention(p, q, k, v)
	require.NoError(t, err)

	poison := func(x []float64, kvHead, key int) []float64 {
		y := append([]float64(nil), x...)
		for c := 0; c < p.Dim; c++ {
			y[(kvHead*p.SeqKV+key)*p.Dim+c] = math.NaN()
		}
		return y
	}
	for _, which := range []string{"K", "V", "KV"} {
		kp, vp := k, v
		if which != "V" {
			kp = poison(poison(k, 0, 3), 1, 2)
		}
		if which != "K" {
			vp = poison(poison(v, 0, 3), 1, 2)
		}
		out, lse, err := Attention(p, q, kp, vp)
		require.NoError(t, err)
		for h := 0; h < p.HeadsQ; h++ {
			firstNaN := 3 // KV head 0: key 3 seen by row 3 only
			if h/2 == 1 {
				firstNaN = 2 // KV head 1: key 2 seen by rows 2, 3
			}
			for i := 0; i < p.SeqQ; i++ {
				row := h*p.SeqQ + i
				o := out[row*p.Dim : (row+1)*p.Dim]
				if i < firstNaN {
					assert.Equal(t, clean[row*p.Dim:(row+1)*p.Dim], o, "%s: head %d row %d leaked", which, h, i)
					assert.Equal(t, cleanLSE[row], lse[row], "%s: head %d row %d lse", which, h, i)
				} else {
					for c := range o {
						assert.True(t, math.IsNaN(o[c]), "%s: head %d row %d should be NaN", which, h, i)
					}
					if which != "V" {
						assert.True(t, math.IsNaN(lse[row]), "%s: head %d row %d lse should be NaN", which, h, i)
					}
				}
			}
		}
	}
}

// A NaN in a visible V row must reach the output even when its softmax
// weight underflows to exactly 0 (natural arithmetic: 0·NaN = NaN). This
// guards against P·V kernels that skip zero weights.
func TestVisibleNaNWithZeroWeightPropagates(t *testing.T) {
	p := Params{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqKV: 2, Dim: 1, Scale: 1}
	out, lse, err := Attention(p, []float64{1}, []float64{0, -1e4}, []float64{1, math.NaN()})
	require.NoError(t, err)
	assert.True(t, math.IsNaN(out[0]), "out = %v", out[0])
	assert.Equal(t, 0.0, lse[0], "lse depends on K only")
}

func TestNaNInQueryReachesOnlyItsRow(t *testing.T) {
	p := Params{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 4, SeqKV: 5, Dim: 3, Causal: true}
	r := rand.New(rand.NewPCG(13, 14))
	q := randNormal(r, p.QLen())
	k := randNormal(r, p.KVLen())
	v := randNormal(r, p.KVLen())
	clean, cleanLSE, err := Attention(p, q, k, v)
	require.NoError(t, err)
	const bad = 6 // batch 0, head 1, query 2
	q[bad*p.Dim+1] = math.NaN()
	out, lse, err := Attention(p, q, k, v)
	require.NoError(t, err)
	for row := 0; row < p.LSELen(); row++ {
		o := out[row*p.Dim : (row+1)*p.Dim]
		if row == bad {
			for _, x := range o {
				assert.True(t, math.IsNaN(x))
			}
			assert.True(t, math.IsNaN(lse[row]))
			continue
		}
		assert.Equal(t, clean[row*p.Dim:(row+1)*p.Dim], o, "row %d", row)
		assert.Equal(t, cleanLSE[row], lse[row], "row %d", row)
	}
}

func TestLSEMatchesDirectLogSumExp(t *testing.T) {
	// Small values: log(Σ exp(s_j)) can be evaluated without max subtraction.
	p := Params{Batch: 1, HeadsQ: 2, HeadsKV: 2, SeqQ: 3, SeqKV: 4, Dim: 2, Scale: 0.5, Causal: true}
	r := rand.New(rand.NewPCG(15, 16))
	q := randNormal(r, p.QLen())
	k := randNormal(r, p.KVLen())
	v := randNormal(r, p.KVLen())
	_, lse, err := Attention(p, q, k, v)
	require.NoError(t, err)
	for h := 0; h < p.HeadsQ; h++ {
		for i := 0; i < p.SeqQ; i++ {
			var sum float64
			for j := 0; j < p.SeqKV; j++ {
				if !p.Visible(i, j) {
					continue
				}
				var dot float64
				for c := 0; c < p.Dim; c++ {
					dot += q[(h*p.SeqQ+i)*p.Dim+c] * k[(h*p.SeqKV+j)*p.Dim+c]
				}
				sum += math.Exp(0.5 * dot)
			}
			assert.InDelta(t, math.Log(sum), lse[h*p.SeqQ+i], 1e-14, "head %d row %d", h, i)
		}
	}
}

func TestFloat64s(t *testing.T) {
	x := []float32{1.5, -2, float32(math.Inf(1)), 1e-30}
	assert.Equal(t, []float64{1.5, -2, math.Inf(1), float64(float32(1e-30))}, Float64s(x))
	assert.Empty(t, Float64s(nil))
}

// ---------------------------------------------------------------------------
// Naive baseline

func TestNaiveMatchesOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	var n Naive // one value for all shapes: exercises scratch growth and reuse
	for _, base := range []Params{
		{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 48, SeqKV: 64, Dim: 64},
		{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 40, SeqKV: 24, Dim: 64}, // fully masked rows when causal
		{Batch: 1, HeadsQ: 2, HeadsKV: 2, SeqQ: 8, SeqKV: 8, Dim: 64},   // smaller than before
		{Batch: 1, HeadsQ: 3, HeadsKV: 1, SeqQ: 1, SeqKV: 33, Dim: 16, Scale: 0.2},
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 3, SeqKV: 0, Dim: 4},
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 0, SeqKV: 3, Dim: 4},
	} {
		for _, causal := range []bool{false, true} {
			p := base
			p.Causal = causal
			q := randNormal32(r, p.QLen())
			k := randNormal32(r, p.KVLen())
			v := randNormal32(r, p.KVLen())
			out := make([]float32, p.QLen())
			for i := range out {
				out[i] = float32(math.NaN()) // must be overwritten everywhere
			}
			require.NoError(t, n.Attention(p, out, q, k, v))
			want, _, err := Attention(p, Float64s(q), Float64s(k), Float64s(v))
			require.NoError(t, err)
			e := Compare(out, want)
			assert.Equal(t, p.QLen(), e.N)
			assert.Less(t, e.MaxAbs, 1e-5, "%+v: %v", p, e)
		}
	}
}

func TestNaiveDoesNotAllocateOnRepeat(t *testing.T) {
	// Small enough that gonum's Sgemm stays serial (fewer than four 64×64
	// output blocks); larger products make gonum itself spawn goroutines.
	p := Params{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 64, SeqKV: 64, Dim: 64, Causal: true}
	r := rand.New(rand.NewPCG(19, 20))
	q := randNormal32(r, p.QLen())
	k := randNormal32(r, p.KVLen())
	v := randNormal32(r, p.KVLen())
	out := make([]float32, p.QLen())
	var n Naive
	require.NoError(t, n.Attention(p, out, q, k, v))
	allocs := testing.AllocsPerRun(5, func() {
		if err := n.Attention(p, out, q, k, v); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, allocs)
}

func TestNaiveWritesNothingOnError(t *testing.T) {
	p := Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 3, SeqKV: 3, Dim: 2}
	q := make([]float32, p.QLen())
	k := make([]float32, p.KVLen())
	v := make([]float32, p.KVLen())
	out := make([]float32, p.QLen())
	for i := range out {
		out[i] = 7
	}
	var n Naive
	for _, tc := range []struct {
		name          string
		p             Params
		out, q, k, v  []float32
		wantSubstring string
	}{
		{"bad params", Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 3, SeqKV: 3}, out, q, k, v, "Dim"},
		{"short out", p, out[:5], q, k, v, "out has 5"},
		{"short q", p, out, q[:11], k, v, "q has 11"},
		{"short k", p, out, q, k[:1], v, "k has 1"},
		{"short v", p, out, q, k, nil, "v has 0"},
	} {
		err := n.Attention(tc.p, tc.out, tc.q, tc.k, tc.v)
		require.Error(t, err, tc.name)
		assert.Contains(t, err.Error(), tc.wantSubstring, tc.name)
		for i := range out {
			require.Equal(t, float32(7), out[i], "%s: out[%d] written", tc.name, i)
		}
	}
}

// ---------------------------------------------------------------------------
// Compare

func TestCompareHandChecked(t *testing.T) {
	// d = (0.5, 0, 0, 0.25); floor = 1e-3·2 = 0.002.
	// rel = (0.5/1, 0, 0, 0.25/0.002 = 125); rms = sqrt((0.25+0.0625)/4).
	e := Compare([]float32{1.5, -2, 0.5, 0.25}, []float64{1, -2, 0.5, 0})
	assert.Equal(t, 0.5, e.MaxAbs)
	assert.InDelta(t, 125, e.MaxRel, 1e-12)
	assert.InDelta(t, math.Sqrt(0.3125/4), e.RMS, 1e-15)
	assert.Equal(t, 4, e.N)

	// Relative error uses |want| when it exceeds the floor.
	e = Compare([]float32{-3}, []float64{-4})
	assert.Equal(t, Errors{MaxAbs: 1, MaxRel: 0.25, RMS: 1, N: 1}, e)

	// float32 rounding of the got value is part of the measured error.
	e = Compare([]float32{0.1}, []float64{0.1})
	assert.Equal(t, math.Abs(float64(float32(0.1))-0.1), e.MaxAbs)

	assert.Equal(t, Errors{}, Compare(nil, nil))
	assert.Equal(t, "max abs 0.5, max rel 0.25, rms 0.25 over 4 elements",
		Errors{MaxAbs: 0.5, MaxRel: 0.25, RMS: 0.25, N: 4}.String())
}

func TestCompareFloor(t *testing.T) {
	// want = 0 next to want = 1000: the floor (1) keeps rel finite.
	e := Compare([]float32{1000, 0.5}, []float64{1000, 0})
	assert.Equal(t, 0.5, e.MaxAbs)
	assert.Equal(t, 0.5, e.MaxRel)
	// The floor ignores infinite and NaN wants: with a lone finite want 0 it
	// is 0 and a nonzero difference is infinitely wrong, an exact one is 0.
	e = Compare([]float32{float32(math.Inf(1)), 1e-3}, []float64{math.Inf(1), 0})
	assert.Equal(t, math.Inf(1), e.MaxRel)
	assert.InDelta(t, 1e-3, e.MaxAbs, 1e-10)
	e = Compare([]float32{0, 0}, []float64{0, 0})
	assert.Equal(t, Errors{N: 2}, e)
}

func TestCompareSpecialValues(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	nan32, inf32 := float32(nan), float32(inf)
	exact := []struct {
		got  float32
		want float64
	}{{nan32, nan}, {inf32, inf}, {-inf32, -inf}}
	for _, c := range exact {
		assert.Equal(t, Errors{N: 1}, Compare([]float32{c.got}, []float64{c.want}), "%v vs %v", c.got, c.want)
	}
	wrong := []struct {
		got  float32
		want float64
	}{{nan32, 1}, {1, nan}, {inf32, -inf}, {inf32, 1e30}, {3, inf}, {nan32, inf}, {-inf32, nan}}
	for _, c := range wrong {
		e := Compare([]float32{1, c.got}, []float64{1, c.want})
		assert.True(t, math.IsInf(e.MaxAbs, 1), "%v vs %v: %v", c.got, c.want, e)
		assert.True(t, math.IsInf(e.MaxRel, 1), "%v vs %v: %v", c.got, c.want, e)
		assert.True(t, math.IsInf(e.RMS, 1), "%v vs %v: %v", c.got, c.want, e)
		assert.Equal(t, 2, e.N)
	}
}

func TestCompareLengthMismatch(t *testing.T) {
	e := Compare([]float32{1, 2, 99}, []float64{1, 2.5})
	assert.Equal(t, 2, e.N)
	assert.Equal(t, 0.5, e.MaxAbs)
	e = Compare([]float32{1}, []float64{1, 99, 99})
	assert.Equal(t, Errors{N: 1}, e)
	assert.Equal(t, Errors{}, Compare([]float32{1}, nil))
}

func TestCompareF64(t *testing.T) {
	inf := math.Inf(1)
	// lse vectors: −Inf rows compare exact, a finite/−Inf mismatch does not.
	e := CompareF64([]float64{-inf, 2, 3.25}, []float64{-inf, 2, 3})
	assert.Equal(t, Errors{MaxAbs: 0.25, MaxRel: 0.25 / 3, RMS: math.Sqrt(0.0625 / 3), N: 3}, e)
	e = CompareF64([]float64{-inf, 0}, []float64{0, 0})
	assert.True(t, math.IsInf(e.MaxAbs, 1))
	// No float32 rounding: 0.1 against 0.1 is exact.
	assert.Equal(t, Errors{N: 1}, CompareF64([]float64{0.1}, []float64{0.1}))
	assert.Equal(t, Errors{N: 1}, CompareF64([]float64{math.NaN()}, []float64{math.NaN()}))
}

// ---------------------------------------------------------------------------
// Errors

func TestValidateNamesField(t *testing.T) {
	ok := Params{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 3, SeqKV: 3, Dim: 8}
	require.NoError(t, ok.Validate())
	for _, tc := range []struct {
		mod  func(*Params)
		want string
	}{
		{func(p *Params) { p.Batch = 0 }, "Params.Batch = 0, want >= 1"},
		{func(p *Params) { p.HeadsQ = 0 }, "Params.HeadsQ = 0, want >= 1"},
		{func(p *Params) { p.HeadsKV = -1 }, "Params.HeadsKV = -1, want >= 1"},
		{func(p *Params) { p.Dim = 0 }, "Params.Dim = 0, want >= 1"},
		{func(p *Params) { p.SeqQ = -1 }, "Params.SeqQ = -1, want >= 0"},
		{func(p *Params) { p.SeqKV = -2 }, "Params.SeqKV = -2, want >= 0"},
		{func(p *Params) { p.HeadsKV = 3 }, "Params.HeadsQ = 4 is not a multiple of Params.HeadsKV = 3"},
		{func(p *Params) { p.Scale = math.NaN() }, "Params.Scale = NaN"},
		{func(p *Params) { p.Scale = math.Inf(-1) }, "Params.Scale = -Inf"},
		{func(p *Params) { p.SeqQ, p.Dim = math.MaxInt/2, 1<<20 }, "overflow int in QLen"},
		{func(p *Params) { p.SeqKV = math.MaxInt / 2 }, "overflow int in KVLen"},
	} {
		p := ok
		tc.mod(&p)
		err := p.Validate()
		require.Error(t, err, tc.want)
		assert.Contains(t, err.Error(), tc.want)

		_, _, err = Attention(p, nil, nil, nil)
		require.Error(t, err, tc.want)
		assert.Contains(t, err.Error(), tc.want)
	}
	// Valid edge cases.
	for _, p := range []Params{
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, Dim: 1},
		{Batch: 1, HeadsQ: 3, HeadsKV: 1, SeqQ: 1, SeqKV: 0, Dim: 1, Scale: -1},
	} {
		assert.NoError(t, p.Validate(), "%+v", p)
	}
}

func TestAttentionShortSlices(t *testing.T) {
	p := Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 2, SeqKV: 3, Dim: 2}
	q := make([]float64, p.QLen())
	kv := make([]float64, p.KVLen())
	for _, tc := range []struct {
		q, k, v []float64
		want    string
	}{
		{q[:7], kv, kv, "q has 7 elements, want at least 8"},
		{q, kv[:5], kv, "k has 5 elements, want at least 6"},
		{q, kv, nil, "v has 0 elements, want at least 6"},
	} {
		out, lse, err := Attention(p, tc.q, tc.k, tc.v)
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.want)
		assert.Nil(t, out)
		assert.Nil(t, lse)
	}
}

// ---------------------------------------------------------------------------
// Benchmark

// BenchmarkNaive times the user baseline on a GPT-2-small-like causal
// prefill: 12 heads, head dim 64, 512 queries over 512 keys.
func BenchmarkNaive(b *testing.B) {
	p := Params{Batch: 1, HeadsQ: 12, HeadsKV: 12, SeqQ: 512, SeqKV: 512, Dim: 64, Causal: true}
	r := rand.New(rand.NewPCG(21, 22))
	q := randNormal32(r, p.QLen())
	k := randNormal32(r, p.KVLen())
	v := randNormal32(r, p.KVLen())
	out := make([]float32, p.QLen())
	var n Naive
	if err := n.Attention(p, out, q, k, v); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := n.Attention(p, out, q, k, v); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(p.FLOPs()*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "GFLOP/s")
}

// TestDimV checks the oracle and the naive baseline with V (and the
// output) of another head dim than Q and K, on a case computed by hand.
func TestDimV(t *testing.T) {
	p := Params{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqKV: 2, Dim: 2, DimV: 3, Scale: 1}
	q := []float64{1, 0}
	k := []float64{1, 0, 0, 1}
	v := []float64{1, 2, 3, 4, 5, 6}
	out, lse, err := Attention(p, q, k, v)
	if err != nil {
		t.Fatal(err)
	}
	e := math.E
	p0, p1 := e/(e+1), 1/(e+1)
	want := []float64{p0*1 + p1*4, p0*2 + p1*5, p0*3 + p1*6}
	if len(out) != 3 {
		t.Fatalf("out has %d elements; want 3 (VDim)", len(out))
	}
	for i := range want {
		if math.Abs(out[i]-want[i]) > 1e-15 {
			t.Fatalf("out = %v; want %v", out, want)
		}
	}
	if math.Abs(lse[0]-math.Log(e+1)) > 1e-15 {
		t.Fatalf("lse = %v; want ln(e+1)", lse[0])
	}
	var n Naive
	out32 := make([]float32, 3)
	if err := n.Attention(p, out32, []float32{1, 0}, []float32{1, 0, 0, 1}, []float32{1, 2, 3, 4, 5, 6}); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Abs(float64(out32[i])-want[i]) > 1e-6 {
			t.Fatalf("naive out = %v; want %v", out32, want)
		}
	}
	if _, _, err := Attention(p, q, k, v[:5]); err == nil {
		t.Fatal("a V of 5 elements for VLen 6 was accepted")
	}
	if _, err := LogitCondition(p, q, k, v); err != nil {
		t.Fatal(err)
	}
}
