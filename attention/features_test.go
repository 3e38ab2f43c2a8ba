package attention_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/fp16"
)

// featureConfigs are the tile sizes the feature tests run under: tiny tiles
// make every block cross many window and sequence edges.
var featureConfigs = []attention.Config{{BlockQ: 8, BlockKV: 8}, {BlockQ: 24, BlockKV: 16}, {}}

func randSlopes(rng *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = float64(float32(rng.Float64() * 0.5))
	}
	return s
}

func randSinks(rng *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = float64(float32(rng.NormFloat64() * 2))
	}
	if n > 1 {
		s[n-1] = math.Inf(-1) // no sink for the last head
	}
	return s
}

// TestWindow checks sliding windows of many widths, one- and two-sided,
// with and without causal masking of either alignment, against the oracle,
// including Nq != Nkv in both orders and windows at the sequence edges.
func TestWindow(t *testing.T) { forEachImpl(t, testWindow) }

func testWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	wins := [][2]int{{0, 0}, {3, 0}, {16, -1}, {-1, 5}, {7, 9}, {40, 40}, {0, -1}, {-1, -1}, {1000, 2}}
	seqs := [][2]int{{50, 50}, {37, 90}, {90, 37}, {1, 70}, {70, 1}}
	if raceEnabled {
		seqs = seqs[:3]
	}
	n := 0
	for _, sq := range seqs {
		for _, w := range wins {
			for _, mode := range []int{0, 1, 2} { // no causal, bottom-right, top-left
				p := reference.Params{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: sq[0], SeqKV: sq[1], Dim: 16,
					Window: true, WindowLeft: w[0], WindowRight: w[1], Causal: mode == 1, CausalTopLeft: mode == 2}
				cfg := featureConfigs[n%len(featureConfigs)]
				dt := kvTypes[n%len(kvTypes)]
				kind := layouts[(n/3)%len(layouts)]
				n++
				checkAgainstOracle(t, mustEngine(t, cfg), newProblem(rng, p, dt, kind))
			}
		}
	}
}

// TestCausalAlignment compares top-left and bottom-right causal masks with
// the oracle for Nq < Nkv, Nq > Nkv and Nq = Nkv, and checks that the two
// differ exactly when Nq != Nkv.
func TestCausalAlignment(t *testing.T) { forEachImpl(t, testCausalAlignment) }

func testCausalAlignment(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	for _, sq := range [][2]int{{20, 75}, {75, 20}, {33, 33}} {
		p := reference.Params{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: sq[0], SeqKV: sq[1], Dim: 32, Causal: true}
		pr := newProblem(rng, p, attention.F32, bshd)
		e := mustEngine(t, attention.Config{BlockQ: 16, BlockKV: 16})
		checkAgainstOracle(t, e, pr)
		br, _ := pr.run(t, e)
		pr.p.Causal, pr.p.CausalTopLeft = false, true
		pr.build()
		checkAgainstOracle(t, e, pr)
		tl, _ := pr.run(t, e)
		assert.Equal(t, sq[0] == sq[1], assert.ObjectsAreEqual(br, tl), "Nq %d Nkv %d", sq[0], sq[1])
	}
}

// TestSoftCapALiBiSinks checks each logit modifier alone and together,
// with causal masks of both alignments and Nq != Nkv.
func TestSoftCapALiBiSinks(t *testing.T) { forEachImpl(t, testSoftCapALiBiSinks) }

func testSoftCapALiBiSinks(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	n := 0
	for _, feat := range []string{"softcap", "alibi", "sinks", "all"} {
		for _, sq := range [][2]int{{40, 40}, {23, 71}, {71, 23}} {
			for _, mode := range []int{0, 1, 2} {
				p := reference.Params{Batch: 2, HeadsQ: 6, HeadsKV: 2, SeqQ: sq[0], SeqKV: sq[1], Dim: 24,
					Causal: mode == 1, CausalTopLeft: mode == 2, Scale: 0.6}
				if feat == "softcap" || feat == "all" {
					p.SoftCap = 2.5 // small, so that it bends the scores
				}
				if feat == "alibi" || feat == "all" {
					p.Slopes = randSlopes(rng, 6)
				}
				if feat == "sinks" || feat == "all" {
					p.Sinks = randSinks(rng, 6)
				}
				cfg := featureConfigs[n%len(featureConfigs)]
				dt := kvTypes[n%len(kvTypes)]
				n++
				checkAgainstOracle(t, mustEngine(t, cfg), newProblem(rng, p, dt, layouts[n%3]))
			}
		}
	}
}

// TestALiBiSlopesSchedule runs the engine with ALiBiSlopes' schedule.
func TestALiBiSlopesSchedule(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 48))
	s, err := attention.ALiBiSlopes(12)
	require.NoError(t, err)
	sl := make([]float64, len(s))
	for i, x := range s {
		sl[i] = float64(x)
	}
	p := reference.Params{Batch: 1, HeadsQ: 12, HeadsKV: 4, SeqQ: 50, SeqKV: 80, Dim: 16, Causal: true, Slopes: sl}
	checkAgainstOracle(t, mustEngine(t, attention.Config{}), newProblem(rng, p, attention.F32, bhsd))
}

// randMask returns a float mask of the given shape, with about one entry
// in eight −Inf; f16 rounds the values to binary16.
func randMask(rng *rand.Rand, shape [4]int, f16 bool) []float64 {
	m := make([]float64, shape[0]*shape[1]*shape[2]*shape[3])
	for i := range m {
		x := float32(rng.NormFloat64())
		if f16 {
			x = fp16.FromFloat32(x).Float32()
		}
		m[i] = float64(x)
		if rng.IntN(8) == 0 {
			m[i] = math.Inf(-1)
		}
	}
	return m
}

func randBoolMask(rng *rand.Rand, shape [4]int) []bool {
	m := make([]bool, shape[0]*shape[1]*shape[2]*shape[3])
	for i := range m {
		m[i] = rng.IntN(4) != 0
	}
	return m
}

// TestMasks checks additive (f32, f16, bf16) and boolean masks under every
// broadcast pattern of the batch, head and query axes, alone and with the
// causal mask, a window and ALiBi.
func TestMasks(t *testing.T) { forEachImpl(t, testMasks) }

func testMasks(t *testing.T) {
	rng := rand.New(rand.NewPCG(49, 50))
	const b, hq, nq, nkv = 2, 4, 29, 45
	n := 0
	for pat := range 8 {
		shape := [4]int{b, hq, nq, nkv}
		for d := range 3 {
			if pat&(1<<d) != 0 {
				shape[d] = 1
			}
		}
		for _, kind := range []string{"f32", "f16", "bf16", "bool"} {
			p := reference.Params{Batch: b, HeadsQ: hq, HeadsKV: 2, SeqQ: nq, SeqKV: nkv, Dim: 16, Causal: n%2 == 0}
			if n%3 == 0 {
				p.Window, p.WindowLeft, p.WindowRight = true, 20, 3
			}
			if n%5 == 0 {
				p.Slopes = randSlopes(rng, hq)
			}
			mt := attention.F32
			switch kind {
			case "bool":
				p.BoolMask, p.BoolMaskShape = randBoolMask(rng, shape), shape
			case "f16":
				mt = attention.F16
				p.Mask, p.MaskShape = randMask(rng, shape, true), shape
			case "bf16":
				mt = attention.BF16
				p.Mask, p.MaskShape = randMask(rng, shape, false), shape
				for i, x := range p.Mask {
					p.Mask[i] = float64(fp16.BFloat16FromFloat32(float32(x)).Float32())
				}
			default:
				p.Mask, p.MaskShape = randMask(rng, shape, false), shape
			}
			pr := newProblem(rng, p, kvTypes[n%3], layouts[n%3])
			pr.maskType = mt
			pr.build()
			checkAgainstOracle(t, mustEngine(t, featureConfigs[n%len(featureConfigs)]), pr)
			n++
		}
	}
	// Both masks at once.
	shape := [4]int{1, hq, nq, nkv}
	p := reference.Params{Batch: b, HeadsQ: hq, HeadsKV: 1, SeqQ: nq, SeqKV: nkv, Dim: 8, Causal: true,
		Mask: randMask(rng, shape, false), MaskShape: shape, BoolMask: randBoolMask(rng, [4]int{b, 1, nq, nkv}), BoolMaskShape: [4]int{b, 1, nq, nkv}}
	checkAgainstOracle(t, mustEngine(t, attention.Config{BlockQ: 8, BlockKV: 8}), newProblem(rng, p, attention.F16, padded))
}

// varlenParams packs sequences of the given (nq, nkv) lengths.
func varlenParams(lens [][2]int, hq, hkv, d int) reference.Params {
	p := reference.Params{Batch: 1, HeadsQ: hq, HeadsKV: hkv, Dim: d, CuSeqQ: []int{0}, CuSeqKV: []int{0}}
	for _, l := range lens {
		p.SeqQ += l[0]
		p.SeqKV += l[1]
		p.CuSeqQ = append(p.CuSeqQ, p.SeqQ)
		p.CuSeqKV = append(p.CuSeqKV, p.SeqKV)
	}
	return p
}

// TestVarlen checks variable-length batches, with empty sequences, Nq !=
// Nkv per sequence in both orders, both causal alignments, ALiBi, windows
// and masks.
func TestVarlen(t *testing.T) { forEachImpl(t, testVarlen) }

func testVarlen(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	lens := [][][2]int{
		{{5, 5}, {0, 0}, {30, 30}, {1, 1}, {17, 17}},
		{{3, 40}, {20, 7}, {0, 9}, {9, 0}, {33, 60}},
		{{70, 70}},
		{{1, 100}, {1, 3}, {1, 1}, {1, 50}}, // batched decoding
	}
	n := 0
	for _, l := range lens {
		for _, mode := range []int{0, 1, 2} {
			for _, extra := range []string{"", "alibi", "window", "mask", "all"} {
				if raceEnabled && extra != "all" {
					continue
				}
				p := varlenParams(l, 4, 2, 16)
				p.Causal, p.CausalTopLeft = mode == 1, mode == 2
				if extra == "alibi" || extra == "all" {
					p.Slopes = randSlopes(rng, 4)
				}
				if extra == "window" || extra == "all" {
					p.Window, p.WindowLeft, p.WindowRight = true, 6, 2
				}
				if extra == "mask" || extra == "all" {
					shape := [4]int{1, 1, p.SeqQ, p.SeqKV}
					p.Mask, p.MaskShape = randMask(rng, shape, false), shape
				}
				if extra == "all" {
					p.Sinks = randSinks(rng, 4)
					p.SoftCap = 3
				}
				cfg := featureConfigs[n%len(featureConfigs)]
				n++
				checkAgainstOracle(t, mustEngine(t, cfg), newProblem(rng, p, kvTypes[n%3], layouts[n%3]))
			}
		}
	}
}

// TestFeatureCombination runs the gpt-oss and Gemma 2 style combination:
// GQA, a causal sliding window, soft-capping and sinks, at sizes that give
// several blocks per head.
func TestFeatureCombination(t *testing.T) { forEachImpl(t, testFeatureCombination) }

func testFeatureCombination(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 54))
	seq := 300
	if raceEnabled {
		seq = 100
	}
	for i, w := range []int{0, 31, 64, 127} {
		p := reference.Params{Batch: 1, HeadsQ: 8, HeadsKV: 2, SeqQ: seq, SeqKV: seq, Dim: 64, Causal: true,
			Window: true, WindowLeft: w, WindowRight: 0, SoftCap: 30, Sinks: randSinks(rng, 8)}
		if i%2 == 1 {
			p.SeqQ = seq / 3 // a chunk of prefill against a longer cache
		}
		checkAgainstOracle(t, mustEngine(t, featureConfigs[i%len(featureConfigs)]), newProblem(rng, p, kvTypes[i%3], bshd))
	}
}

// TestBlindRows checks rows that see no key under each feature: they are
// zero with lse −Inf, or the head's sink, never NaN.
func TestBlindRows(t *testing.T) { forEachImpl(t, testBlindRows) }

func testBlindRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(55, 56))
	allFalse := func(n int) []bool { return make([]bool, n) }
	cases := []reference.Params{
		// A bottom-right window with Nq > Nkv: the first rows' windows end
		// before key 0.
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 30, SeqKV: 10, Dim: 8, Window: true, WindowLeft: 3, WindowRight: 0},
		// A right-only window past the keys: rows near the end see nothing
		// but the keys before; top-left with Nq > Nkv leaves late rows blind.
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 40, SeqKV: 10, Dim: 8, CausalTopLeft: true, Window: true, WindowLeft: 2, WindowRight: 0},
		// Bottom-right with Nq > Nkv, with sinks.
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 40, SeqKV: 10, Dim: 8, Causal: true, Sinks: []float64{0.5, math.Inf(-1)}},
		// A boolean mask that hides everything from every row.
		{Batch: 1, HeadsQ: 2, HeadsKV: 2, SeqQ: 9, SeqKV: 30, Dim: 8, BoolMask: allFalse(30), BoolMaskShape: [4]int{1, 1, 1, 30}, Sinks: []float64{-1, 2}},
		// Empty sequences in a varlen batch, with a sink.
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 12, SeqKV: 5, Dim: 8, Causal: true, CuSeqQ: []int{0, 4, 12}, CuSeqKV: []int{0, 0, 5}, Sinks: []float64{1, 1}},
	}
	for _, p := range cases {
		pr := newProblem(rng, p, attention.F32, bhsd)
		for _, cfg := range featureConfigs {
			got, lse := pr.run(t, mustEngine(t, cfg))
			want, wantLSE := pr.oracle(t)
			blind := 0
			for r := range wantLSE {
				if math.IsInf(wantLSE[r], -1) || (p.Sinks != nil && wantLSE[r] == p.Sinks[r/p.SeqQ] && isZero(want[r*8:r*8+8])) {
					blind++
					require.Equal(t, make([]float32, 8), got[r*8:r*8+8], "%v: row %d", pr, r)
					require.Equal(t, float32(wantLSE[r]), lse[r], "%v: lse of row %d", pr, r)
				}
			}
			require.Positive(t, blind, "%v: no blind row", pr)
			for _, x := range got {
				require.False(t, math.IsNaN(float64(x)), "%v", pr)
			}
			checkAgainstOracle(t, mustEngine(t, cfg), pr)
		}
	}
}

func isZero(x []float64) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}

// TestWindowHidesNaN puts NaN in K and V rows that a window or another
// sequence hides from every row that could read them through a whole tile:
// structural masks leave keys out of P·V, so no row may turn NaN.
func TestWindowHidesNaN(t *testing.T) { forEachImpl(t, testWindowHidesNaN) }

func testWindowHidesNaN(t *testing.T) {
	rng := rand.New(rand.NewPCG(57, 58))
	p := reference.Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 64, SeqKV: 64, Dim: 8, Causal: true, Window: true, WindowLeft: 10, WindowRight: 0}
	pr := newProblem(rng, p, attention.F32, bhsd)
	nan := float32(math.NaN())
	pr.k[5*8+1] = nan // key 5: seen by rows 5..15
	pr.v[40*8+3] = nan
	pr.build()
	for _, cfg := range featureConfigs {
		got, _ := pr.run(t, mustEngine(t, cfg))
		for h := range 2 {
			for i := range 64 {
				wantNaN := (i >= 5 && i <= 15) || (i >= 40 && i <= 50)
				anyNaN := false
				for _, x := range got[(h*64+i)*8:][:8] {
					anyNaN = anyNaN || math.IsNaN(float64(x))
				}
				require.Equal(t, wantNaN, anyNaN, "%+v: head %d row %d", cfg, h, i)
			}
		}
	}
}

// TestFeaturesThreadsBitwise checks a feature-heavy call for bitwise
// identical results across thread counts, plain and variable-length.
func TestFeaturesThreadsBitwise(t *testing.T) { forEachImpl(t, testFeaturesThreadsBitwise) }

func testFeaturesThreadsBitwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(59, 60))
	shape := [4]int{1, 8, 150, 150}
	heavy := reference.Params{Batch: 1, HeadsQ: 8, HeadsKV: 2, SeqQ: 150, SeqKV: 150, Dim: 32, Causal: true,
		Window: true, WindowLeft: 40, WindowRight: 0, SoftCap: 20, Slopes: randSlopes(rng, 8), Sinks: randSinks(rng, 8),
		Mask: randMask(rng, shape, false), MaskShape: shape}
	vl := varlenParams([][2]int{{40, 60}, {0, 3}, {70, 70}, {25, 10}}, 4, 2, 16)
	vl.Causal, vl.Slopes = true, randSlopes(rng, 4)
	for _, p := range []reference.Params{heavy, vl} {
		pr := newProblem(rng, p, attention.F16, bshd)
		var wantOut, wantLSE []float32
		for _, threads := range []int{1, 2, 3, 8} {
			out, lse := pr.run(t, mustEngine(t, attention.Config{Threads: threads, BlockQ: 16, BlockKV: 32}))
			if wantOut == nil {
				wantOut, wantLSE = out, lse
				continue
			}
			for i := range out {
				require.Equal(t, math.Float32bits(wantOut[i]), math.Float32bits(out[i]), "%v: %d threads, out[%d]", pr, threads, i)
			}
			for i := range lse {
				require.Equal(t, math.Float32bits(wantLSE[i]), math.Float32bits(lse[i]), "%v: %d threads, lse[%d]", pr, threads, i)
			}
		}
	}
}

// TestFeaturesNoAllocations checks that calls with every feature on
// allocate nothing once warm.
func TestFeaturesNoAllocations(t *testing.T) { forEachImpl(t, testFeaturesNoAllocations) }

func testFeaturesNoAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	shape := [4]int{1, 1, 90, 90}
	p := reference.Params{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 90, SeqKV: 90, Dim: 32, Causal: true,
		Window: true, WindowLeft: 30, WindowRight: 0, SoftCap: 20, Slopes: randSlopes(rng, 4), Sinks: randSinks(rng, 4),
		Mask: randMask(rng, shape, false), MaskShape: shape, BoolMask: randBoolMask(rng, shape), BoolMaskShape: shape,
		CuSeqQ: []int{0, 30, 30, 90}, CuSeqKV: []int{0, 40, 50, 90}}
	// One thread: the pool's own steady state, which is the same with or
	// without features, is TestThreadsNoAllocations' business, and it is
	// sensitive to load on a small machine.
	for _, threads := range []int{1} {
		pr := newProblem(rng, p, attention.F16, bshd)
		e := mustEngine(t, attention.Config{Threads: threads})
		out := attention.F32Tensor(make([]float32, p.QLen()), attention.BHSD(1, 4, 90, 32))
		lse := make([]float32, p.LSELen())
		// Warm up: the pool reaches its steady number of jobs and
		// workspaces in flight after a few calls, not one.
		warm, runs := 200, 100
		if raceEnabled {
			warm, runs = 40, 10
		}
		for range warm {
			require.NoError(t, e.ForwardLSE(out, lse, pr.qT, pr.kT, pr.vT, pr.opts))
		}
		allocs := testing.AllocsPerRun(runs, func() {
			if err := e.ForwardLSE(out, lse, pr.qT, pr.kT, pr.vT, pr.opts); err != nil {
				panic(err)
			}
		})
		assert.Zero(t, allocs, "%d threads", threads)
	}
}
