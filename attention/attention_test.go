package attention_test

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/internal/impltest"
	"github.com/flashgo/flashgo/internal/tier"
)

var (
	gridSeqs = []int{1, 2, 3, 17, 63, 64, 65, 127, 129, 1000}
	gridDims = []int{8, 16, 40, 64, 80, 96, 128, 256}
	kvTypes  = []attention.DType{attention.F32, attention.F16, attention.BF16}
	layouts  = []layoutKind{bhsd, bshd, padded}
)

// checkAgainstOracle runs pr through e and applies the project's pass rule
// (docs/math.md, Section 5): the error may be at most twice that of the
// naive baseline plus 1e-6, plus twice the condition term of the
// precision (E_κ of reference.LogitCondition in float32, E_b of
// reference.WeightCondition in bfloat16); and with float32 K/V of head dim <= 128 at most
// 1e-5 + E_κ absolute.
func checkAgainstOracle(t *testing.T, e *attention.Engine, pr *problem) reference.Errors {
	t.Helper()
	got, lse := pr.run(t, e)
	want, wantLSE := pr.oracle(t)
	errs := reference.Compare(got, want)
	bf16 := pr.opts.Precision == attention.PrecisionBFloat16
	if bf16 {
		checkRuleBF16(t, pr.String(), errs, pr.naiveError(t, want), func() float64 { return pr.weightCondition(t) })
	} else {
		checkRule(t, pr.String(), errs, pr.naiveError(t, want), func() float64 { return pr.logitCondition(t) })
	}
	if !bf16 && pr.kvType == attention.F32 && pr.p.Dim <= 128 && errs.MaxAbs > 1e-5 {
		if kc := pr.logitCondition(t); errs.MaxAbs > 1e-5+kc {
			t.Errorf("%v: f32 max abs error %.3g exceeds 1e-5 + E_κ %.3g", pr, errs.MaxAbs, kc)
		}
	}
	if computedInBF16(pr.opts.Precision, pr.p) {
		// The log-sum-exp sums unrounded probabilities of the scores of
		// rounded Q and K: compare with the oracle of those.
		_, wantLSE = pr.oracleBF16QK(t)
	}
	le := lseErrors(lse, wantLSE)
	if le.MaxAbs > 1e-5*(1+math.Log(float64(pr.p.SeqKV+1))) {
		t.Errorf("%v: lse max abs error %.3g", pr, le.MaxAbs)
	}
	return errs
}

// worst collects the largest errors seen per K/V type, for the log.
type worst map[attention.DType]*reference.Errors

func (w worst) add(t attention.DType, e reference.Errors) {
	cur, ok := w[t]
	if !ok {
		cur = &reference.Errors{}
		w[t] = cur
	}
	cur.MaxAbs = max(cur.MaxAbs, e.MaxAbs)
	cur.MaxRel = max(cur.MaxRel, e.MaxRel)
	cur.RMS = max(cur.RMS, e.RMS)
	cur.N += e.N
}

func (w worst) log(t *testing.T) {
	for _, dt := range kvTypes {
		if e, ok := w[dt]; ok {
			t.Logf("worst over the grid, K/V %v: max abs %.3g, max rel %.3g, RMS %.3g (%d values)", dt, e.MaxAbs, e.MaxRel, e.RMS, e.N)
		}
	}
}

// TestGrid runs every (Nq, Nkv) pair of the grid in both orders and with
// causal masking on and off, cycling through head dims, K/V types and
// layouts so that each value of each axis meets many of the others.
func TestGrid(t *testing.T) { forEachImpl(t, testGrid) }

func testGrid(t *testing.T) {
	e, err := attention.NewEngine(attention.Config{})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	w := worst{}
	n := 0
	for _, nq := range gridSeqs {
		for _, nkv := range gridSeqs {
			if raceEnabled && (nq == 1000 || nkv == 1000) && nq != nkv {
				continue
			}
			for _, causal := range []bool{false, true} {
				d := gridDims[n%len(gridDims)]
				dt := kvTypes[(n/len(gridDims))%len(kvTypes)]
				kind := layouts[n%len(layouts)]
				n++
				heads, kvHeads := 2, 1
				if n%3 == 0 {
					heads, kvHeads = 2, 2
				}
				if nq*nkv*d > 1<<20 {
					heads, kvHeads = 1, 1
				}
				p := reference.Params{Batch: 1 + n%2, HeadsQ: heads, HeadsKV: kvHeads, SeqQ: nq, SeqKV: nkv, Dim: d, Causal: causal}
				if p.Batch*heads*nq*nkv*d > 1<<22 {
					p.Batch = 1
				}
				// The problem is drawn before the sample is taken, so a
				// cell has the same inputs in both tiers.
				if pr := newProblem(rng, p, dt, kind); tier.Keep(t, pr.String(), 8) {
					w.add(dt, checkAgainstOracle(t, e, pr))
				}
			}
		}
	}
	w.log(t)
}

// TestFullProduct covers every head dim × K/V type × layout × causal for a
// handful of sequence pairs that straddle vector and tile widths.
func TestFullProduct(t *testing.T) { forEachImpl(t, testFullProduct) }

func testFullProduct(t *testing.T) {
	e, err := attention.NewEngine(attention.Config{BlockQ: 16, BlockKV: 16})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 4))
	seqs := []int{1, 3, 17, 65}
	if raceEnabled {
		seqs = []int{1, 17}
	}
	w := worst{}
	for _, nq := range seqs {
		for _, nkv := range seqs {
			for _, d := range gridDims {
				for _, dt := range kvTypes {
					for _, kind := range layouts {
						for _, causal := range []bool{false, true} {
							p := reference.Params{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: nq, SeqKV: nkv, Dim: d, Causal: causal}
							if pr := newProblem(rng, p, dt, kind); tier.Keep(t, pr.String(), 12) {
								w.add(dt, checkAgainstOracle(t, e, pr))
							}
						}
					}
				}
			}
		}
	}
	w.log(t)
}

func TestGroupedQuery(t *testing.T) { forEachImpl(t, testGroupedQuery) }

func testGroupedQuery(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	e, err := attention.NewEngine(attention.Config{BlockQ: 24, BlockKV: 32})
	require.NoError(t, err)
	for _, hq := range []int{1, 2, 3, 6, 12} {
		for _, causal := range []bool{false, true} {
			p := reference.Params{Batch: 2, HeadsQ: hq * 2, HeadsKV: 2, SeqQ: 37, SeqKV: 70, Dim: 24, Causal: causal}
			checkAgainstOracle(t, e, newProblem(rng, p, attention.F16, bshd))
		}
	}
}

// TestTileSizeIndependence checks that the tile sizes change the result
// only by rounding.
func TestTileSizeIndependence(t *testing.T) { forEachImpl(t, testTileSizeIndependence) }

func testTileSizeIndependence(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	configs := []attention.Config{{BlockQ: 1, BlockKV: 1}, {BlockQ: 7, BlockKV: 5}, {BlockQ: 16, BlockKV: 48}, {}, {BlockQ: 128, BlockKV: 256}}
	for _, causal := range []bool{false, true} {
		for _, seqs := range [][2]int{{65, 129}, {129, 65}, {100, 100}} {
			p := reference.Params{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: seqs[0], SeqKV: seqs[1], Dim: 40, Causal: causal}
			pr := newProblem(rng, p, attention.F32, bhsd)
			var first []float32
			for _, cfg := range configs {
				e, err := attention.NewEngine(cfg)
				require.NoError(t, err)
				got, _ := pr.run(t, e)
				if first == nil {
					first = got
					continue
				}
				for i := range got {
					diff := math.Abs(float64(got[i] - first[i]))
					if diff > 1e-6*max(1, math.Abs(float64(first[i]))) {
						t.Fatalf("%v with %+v: element %d is %v, with 1×1 tiles %v", pr, cfg, i, got[i], first[i])
					}
				}
			}
		}
	}
}

// TestNoVisibleKey checks rows that see no key: causal with Nq > Nkv, and
// Nkv = 0. They must be zero with lse −Inf, never NaN.
func TestNoVisibleKey(t *testing.T) { forEachImpl(t, testNoVisibleKey) }

func testNoVisibleKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, seqs := range [][2]int{{5, 2}, {70, 3}, {3, 0}, {1, 0}} {
		for _, causal := range []bool{true, false} {
			p := reference.Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: seqs[0], SeqKV: seqs[1], Dim: 8, Causal: causal}
			pr := newProblem(rng, p, attention.F32, padded)
			got, lse := pr.run(t, mustEngine(t, attention.Config{BlockQ: 4, BlockKV: 2}))
			for h := range 2 {
				for i := range p.SeqQ {
					blind := p.SeqKV == 0 || (causal && i < p.SeqQ-p.SeqKV)
					row := got[(h*p.SeqQ+i)*8:][:8]
					if blind {
						assert.Equal(t, make([]float32, 8), row, "%v: row %d head %d", pr, i, h)
						assert.True(t, math.IsInf(float64(lse[h*p.SeqQ+i]), -1), "%v: lse of row %d is %v", pr, i, lse[h*p.SeqQ+i])
					} else {
						for _, x := range row {
							assert.False(t, math.IsNaN(float64(x)), "%v: NaN in row %d", pr, i)
						}
					}
				}
			}
			if seqs[1] > 0 {
				checkAgainstOracle(t, mustEngine(t, attention.Config{}), pr)
			}
		}
	}
}

func mustEngine(t testing.TB, cfg attention.Config) *attention.Engine {
	t.Helper()
	e, err := attention.NewEngine(cfg)
	require.NoError(t, err)
	return e
}

// TestLargeLogits scales queries so that logits reach ±1e4: the running
// maximum must keep every exponent <= 0.
func TestLargeLogits(t *testing.T) { forEachImpl(t, testLargeLogits) }

func testLargeLogits(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, causal := range []bool{false, true} {
		p := reference.Params{Batch: 1, HeadsQ: 2, HeadsKV: 2, SeqQ: 33, SeqKV: 80, Dim: 16, Causal: causal}
		pr := newProblem(rng, p, attention.F32, bhsd)
		for i := range pr.q {
			pr.q[i] *= 2500 // |q·k|/4 reaches ~1e4
		}
		pr.build()
		got, lse := pr.run(t, mustEngine(t, attention.Config{BlockQ: 8, BlockKV: 16}))
		want, wantLSE := pr.oracle(t)
		for i, x := range got {
			require.False(t, math.IsNaN(float64(x)) || math.IsInf(float64(x), 0), "element %d is %v", i, x)
		}
		errs := reference.Compare(got, want)
		assert.Less(t, errs.MaxAbs, 1e-4, "%v: %v", pr, errs)
		le := lseErrors(lse, wantLSE)
		assert.Less(t, le.MaxRel, 1e-6, "%v: lse %v", pr, le)
		assert.Greater(t, math.Abs(wantLSE[0]), 100.0, "the logits are not large")
	}
}

// TestHugeLogits checks the package's promise that logits of any finite
// magnitude are safe, in both precisions at every level (the fused bf16
// softmax of AVX512-BF16 and AMX among them): 32 query rows of [1], enough
// for bf16 precision to compute in bfloat16, against one bfloat16 key of a
// magnitude from 5.7·10⁴ to 3·10³⁸ of either sign with the value [3], or
// two such keys with the values [3] and [5], under scales 1 and 0.3. The
// maximum's weight is 1 exactly, so the output is 3 (4) exactly and the
// log-sum-exp scale·k (plus ln 2).
func TestHugeLogits(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		const rows = 32
		ql := attention.BHSD(1, 1, rows, 1)
		q := attention.F32Tensor(impltest.Filled(rows, float32(1)), ql)
		e := mustEngine(t, attention.Config{})
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			require.Equal(t, prec, attention.ComputedPrecision(attention.Options{Precision: prec}, 1, 1, rows))
			for _, mag := range []float32{5.7e4, 1e6, 1.5e9, 3e9, 1e10, 1e20, 3e38} {
				for _, sign := range []float32{1, -1} {
					for _, scale := range []float32{1, 0.3} {
						for _, n := range []int{1, 2} {
							k := fp16.BFloat16FromFloat32(sign * mag)
							keys := []fp16.BFloat16{k, k}[:n]
							vals := []fp16.BFloat16{fp16.BFloat16FromFloat32(3), fp16.BFloat16FromFloat32(5)}[:n]
							kvl := attention.BHSD(1, 1, n, 1)
							out, lse := make([]float32, rows), make([]float32, rows)
							require.NoError(t, e.ForwardLSE(attention.F32Tensor(out, ql), lse, q, attention.BF16Tensor(keys, kvl), attention.BF16Tensor(vals, kvl),
								attention.Options{Scale: scale, Precision: prec}))
							logit := scale * k.Float32()
							wantOut, wantLSE := float32(3), float64(logit)
							if n == 2 {
								wantOut, wantLSE = 4, wantLSE+math.Ln2
							}
							ulp := float64(math.Nextafter32(float32(math.Abs(float64(logit))), float32(math.Inf(1)))) - math.Abs(float64(logit))
							for r := range rows {
								require.Equal(t, wantOut, out[r], "%v: %d key(s) of %v, scale %v: out[%d]", prec, n, k.Float32(), scale, r)
								require.InDelta(t, wantLSE, float64(lse[r]), ulp, "%v: %d key(s) of %v, scale %v: lse[%d]", prec, n, k.Float32(), scale, r)
							}
						}
					}
				}
			}
		}
	})
}

// TestNaNReachesOnlyItsRows puts a NaN in one query, one key and one value
// and checks that exactly the rows the oracle says are NaN are NaN.
func TestNaNReachesOnlyItsRows(t *testing.T) { forEachImpl(t, testNaNReachesOnlyItsRows) }

func testNaNReachesOnlyItsRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, causal := range []bool{false, true} {
		for _, dt := range kvTypes {
			p := reference.Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 40, SeqKV: 40, Dim: 8, Causal: causal}
			pr := newProblem(rng, p, dt, bshd)
			nan := float32(math.NaN())
			pr.q[(1*40+5)*8+3] = nan // head 1, query 5
			pr.k[20*8+2] = nan       // key 20
			pr.v[33*8+7] = nan       // value 33
			pr.build()
			got, _ := pr.run(t, mustEngine(t, attention.Config{BlockQ: 8, BlockKV: 16}))
			want, _ := pr.oracle(t)
			clean := 0
			for h := range 2 {
				for i := range 40 {
					wantNaN := math.IsNaN(want[(h*40+i)*8])
					for k := range 8 {
						x := got[(h*40+i)*8+k]
						require.Equal(t, wantNaN, math.IsNaN(float64(x)), "%v: head %d row %d elem %d = %v", pr, h, i, k, x)
					}
					if !wantNaN {
						clean++
					}
				}
			}
			if causal {
				require.Equal(t, 2*20-1, clean, "rows before key 20 stay clean, but for the NaN query")
			} else {
				require.Zero(t, clean)
			}
			errs := reference.Compare(got, want)
			assert.Less(t, errs.MaxAbs, 1e-2, "%v: %v", pr, errs)
		}
	}
}

func TestScaleOption(t *testing.T) { forEachImpl(t, testScaleOption) }

func testScaleOption(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	p := reference.Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 20, SeqKV: 30, Dim: 16, Scale: 0.37, Causal: true}
	checkAgainstOracle(t, mustEngine(t, attention.Config{}), newProblem(rng, p, attention.F32, bhsd))
	p.Scale = -1.5
	checkAgainstOracle(t, mustEngine(t, attention.Config{}), newProblem(rng, p, attention.BF16, bshd))
}

// TestNoAllocations checks that a warmed-up engine allocates nothing per call.
func TestNoAllocations(t *testing.T) { forEachImpl(t, testNoAllocations) }

func testNoAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	e := mustEngine(t, attention.Config{})
	for _, dt := range kvTypes {
		p := reference.Params{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 70, SeqKV: 90, Dim: 32, Causal: true}
		pr := newProblem(rng, p, dt, bshd)
		out := attention.F32Tensor(make([]float32, p.QLen()), attention.BHSD(1, 4, 70, 32))
		lse := make([]float32, p.LSELen())
		opts := attention.Options{Causal: true}
		require.NoError(t, e.ForwardLSE(out, lse, pr.qT, pr.kT, pr.vT, opts))
		allocs := testing.AllocsPerRun(20, func() {
			if err := e.ForwardLSE(out, lse, pr.qT, pr.kT, pr.vT, opts); err != nil {
				panic(err)
			}
		})
		assert.Zero(t, allocs, "K/V %v", dt)
	}
}

// TestConcurrentUse runs different problems on one engine from many
// goroutines and checks each against its sequential result.
func TestConcurrentUse(t *testing.T) { forEachImpl(t, testConcurrentUse) }

func testConcurrentUse(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	e := mustEngine(t, attention.Config{})
	var probs []*problem
	var wants [][]float32
	for i := range 8 {
		p := reference.Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 10 + 9*i, SeqKV: 100 - 7*i, Dim: 8 * (1 + i%4), Causal: i%2 == 0}
		pr := newProblem(rng, p, kvTypes[i%3], layouts[i%3])
		got, _ := pr.run(t, e)
		probs = append(probs, pr)
		wants = append(wants, got)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 16 {
		wg.Go(func() {
			for r := range 5 {
				i := (g + r) % len(probs)
				pr := probs[i]
				buf := make([]float32, pr.outView.size)
				out := attention.F32Tensor(buf[pr.outView.pre:], pr.outView.lay)
				if err := e.Forward(out, pr.qT, pr.kT, pr.vT, attention.Options{Causal: pr.p.Causal}); err != nil {
					errs <- err.Error()
					return
				}
				got := gather(pr.outView, buf)
				for j := range got {
					if got[j] != wants[i][j] {
						errs <- pr.String() + ": concurrent result differs"
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
}

func TestPackageForward(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	p := reference.Params{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 9, SeqKV: 9, Dim: 8, Causal: true}
	pr := newProblem(rng, p, attention.F32, bhsd)
	buf := make([]float32, pr.outView.size)
	out := attention.F32Tensor(buf[pr.outView.pre:], pr.outView.lay)
	require.NoError(t, attention.Forward(out, pr.qT, pr.kT, pr.vT, attention.Options{Causal: true}))
	want, _ := pr.oracle(t)
	assert.Less(t, reference.Compare(gather(pr.outView, buf), want).MaxAbs, 1e-6)
}
