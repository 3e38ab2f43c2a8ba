package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/internal/impltest"
	"github.com/flashgo/flashgo/internal/tier"
)

// TestDimV checks attention with a V (and output) head dim other than
// Q's and K's against the float64 oracle: the pairs of DeepSeek's
// multi-head latent attention (192/128, and 576/512 of its absorbed
// decode), odd ones on both sides, and equal dims for comparison; prefill
// and decode (with split keys), causal, window, ALiBi, soft-capping and
// sinks, log-sum-exps, f32/f16/bf16 (and q8 where the dims allow) K/V,
// both precisions, 1 and 3 threads, every implementation.
func TestDimV(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			t.Run(prec.String(), inPrecision(prec, testDimV))
		}
	})
}

func testDimV(t *testing.T) {
	rng := rand.New(rand.NewPCG(111, 112))
	type shape struct{ d, dv, nq, nkv int }
	shapes := []shape{
		{192, 128, 9, 70}, {576, 512, 1, 37}, {5, 3, 13, 37}, {3, 7, 1, 300}, {1, 2, 5, 5},
		{17, 33, 33, 17}, {64, 64, 3, 65}, {64, 32, 70, 70}, {32, 96, 1, 100},
	}
	const hq, hkv = 6, 2
	for _, sh := range shapes {
		types := []attention.DType{attention.F32, attention.F16, attention.BF16}
		if sh.d%attention.Q8Block == 0 && sh.dv%attention.Q8Block == 0 {
			types = append(types, attention.Q8)
		}
		for _, dt := range types {
			for _, threads := range []int{1, 3} {
				for _, opt := range []string{"causal", "window+alibi", "softcap+sinks", "none"} {
					p := reference.Params{Batch: 2, HeadsQ: hq, HeadsKV: hkv, SeqQ: sh.nq, SeqKV: sh.nkv, Dim: sh.d, DimV: sh.dv, Causal: opt != "none"}
					opts := attention.Options{Causal: p.Causal, Precision: precisionUnderTest}
					switch opt {
					case "window+alibi":
						opts.Window = &attention.Window{Left: 11, Right: 0}
						p.Window, p.WindowLeft, p.WindowRight = true, 11, 0
						opts.Slopes, _ = attention.ALiBiSlopes(hq)
						p.Slopes = reference.Float64s(opts.Slopes)
					case "softcap+sinks":
						opts.SoftCap = 3
						p.SoftCap = 3
						opts.Sinks = randn(rng, hq)
						p.Sinks = reference.Float64s(opts.Sinks)
					}
					q, k, v := randn(rng, p.QLen()), randn(rng, p.KVLen()), randn(rng, p.VLen())
					roundKV(dt, k)
					roundKV(dt, v)
					what := fmt.Sprintf("d %d dv %d nq %d nkv %d %v threads %d %s", sh.d, sh.dv, sh.nq, sh.nkv, dt, threads, opt)
					if !tier.Keep(t, what, 8) {
						continue // drawn first: a cell has the same inputs in both tiers
					}
					out, lse := make([]float32, p.OutLen()), make([]float32, p.LSELen())
					e := mustEngine(t, attention.Config{Threads: threads, KVSplits: 3})
					err := e.ForwardLSE(attention.F32Tensor(out, attention.BHSD(2, hq, sh.nq, sh.dv)), lse, attention.F32Tensor(q, attention.BHSD(2, hq, sh.nq, sh.d)),
						typedTensor(t, dt, k, attention.BHSD(2, hkv, sh.nkv, sh.d)), typedTensor(t, dt, v, attention.BHSD(2, hkv, sh.nkv, sh.dv)), opts)
					require.NoError(t, err)
					tol := 2e-5
					if opt == "softcap+sinks" {
						tol = 5e-5
					}
					checkPrecisionError(t, what, p, q, k, v, out, lse, tol, 1e-4)
				}
			}
		}
	}
}

// TestDimVMatchesEqualDims checks that V of another head dim gives, on the
// columns it shares with a V of Q's head dim, the bits of that call: the
// scores and softmax do not depend on V's width.
func TestDimVMatchesEqualDims(t *testing.T) {
	rng := rand.New(rand.NewPCG(113, 114))
	const hq, hkv, d, dv, nq, nkv = 4, 2, 32, 16, 9, 40
	q, k, v := randn(rng, hq*nq*d), randn(rng, hkv*nkv*d), randn(rng, hkv*nkv*d)
	e := mustEngine(t, attention.Config{Threads: 2})
	full := make([]float32, hq*nq*d)
	require.NoError(t, e.Forward(attention.F32Tensor(full, attention.BHSD(1, hq, nq, d)), attention.F32Tensor(q, attention.BHSD(1, hq, nq, d)),
		attention.F32Tensor(k, attention.BHSD(1, hkv, nkv, d)), attention.F32Tensor(v, attention.BHSD(1, hkv, nkv, d)), attention.Options{Causal: true}))
	// The first dv components of every V row, as a strided view.
	vl := attention.Layout{Batch: 1, Heads: hkv, Seq: nkv, Dim: dv, BatchStride: hkv * nkv * d, HeadStride: nkv * d, SeqStride: d}
	half := make([]float32, hq*nq*dv)
	require.NoError(t, e.Forward(attention.F32Tensor(half, attention.BHSD(1, hq, nq, dv)), attention.F32Tensor(q, attention.BHSD(1, hq, nq, d)),
		attention.F32Tensor(k, attention.BHSD(1, hkv, nkv, d)), attention.F32Tensor(v, vl), attention.Options{Causal: true}))
	for r := range hq * nq {
		for c := range dv {
			if math.Float32bits(half[r*dv+c]) != math.Float32bits(full[r*d+c]) {
				t.Fatalf("row %d column %d: %v with V of dim %d, %v with dim %d", r, c, half[r*dv+c], dv, full[r*d+c], d)
			}
		}
	}
}

// TestDimVErrors checks the errors of mismatched head dims, with nothing
// written.
func TestDimVErrors(t *testing.T) {
	const hq, hkv, nq, nkv = 2, 1, 3, 5
	e := mustEngine(t, attention.Config{})
	q := attention.F32Tensor(make([]float32, hq*nq*8), attention.BHSD(1, hq, nq, 8))
	k8 := attention.F32Tensor(make([]float32, hkv*nkv*8), attention.BHSD(1, hkv, nkv, 8))
	k4 := attention.F32Tensor(make([]float32, hkv*nkv*4), attention.BHSD(1, hkv, nkv, 4))
	v4 := attention.F32Tensor(make([]float32, hkv*nkv*4), attention.BHSD(1, hkv, nkv, 4))
	for _, c := range []struct {
		name   string
		k, v   attention.Tensor
		outDim int
		want   string
	}{
		{"k dim", k4, v4, 4, "head dims are q 8 and k 4; want them equal"},
		{"out dim", k8, v4, 8, "want q's shape with v's head dim, [1 2 3 4]"},
	} {
		buf := impltest.Filled(hq*nq*c.outDim, float32(math.NaN()))
		err := e.Forward(attention.F32Tensor(buf, attention.BHSD(1, hq, nq, c.outDim)), q, c.k, c.v, attention.Options{})
		require.ErrorContains(t, err, c.want, c.name)
		for i, x := range buf {
			require.True(t, math.IsNaN(float64(x)), "%s: out[%d] written", c.name, i)
		}
	}
}

// TestDimVAllocs checks that calls with V of another head dim allocate
// nothing once warm, prefill and decode.
func TestDimVAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("SKIP: the race detector allocates")
	}
	rng := rand.New(rand.NewPCG(115, 116))
	for _, nq := range []int{1, 200} {
		const hq, hkv, d, dv, nkv = 8, 2, 192, 128, 300
		q := attention.F32Tensor(randn(rng, hq*nq*d), attention.BSHD(1, nq, hq, d))
		kk := typedTensor(t, attention.BF16, randn(rng, hkv*nkv*d), attention.BSHD(1, nkv, hkv, d))
		vv := typedTensor(t, attention.BF16, randn(rng, hkv*nkv*dv), attention.BSHD(1, nkv, hkv, dv))
		out := attention.F32Tensor(make([]float32, hq*nq*dv), attention.BSHD(1, nq, hq, dv))
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			e := mustEngine(t, attention.Config{Threads: 3})
			call := func() {
				if err := e.Forward(out, q, kk, vv, attention.Options{Causal: true, Precision: prec}); err != nil {
					t.Fatal(err)
				}
			}
			call()
			if n := testing.AllocsPerRun(10, call); n != 0 {
				t.Fatalf("nq %d %v: %v allocations a call; want 0", nq, prec, n)
			}
		}
	}
}
