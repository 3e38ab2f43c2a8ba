package attention_test

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel"
)

// The bf16 compute precision must pass the same tests as float32, under
// its own rule (checkAgainstOracle): max abs and RMS error against the
// float64 oracle on the original inputs <= 2 × those of naive bfloat16
// attention (Q, K, V and P rounded at the same points, float32
// accumulation) + 1e-6, and the log-sum-exp within float32 accumulation
// error of the oracle of the rounded Q and K. Each test runs on every
// kernel implementation this machine has.

func inBF16(f func(t *testing.T)) func(t *testing.T) {
	return func(t *testing.T) { forEachImpl(t, inPrecision(attention.PrecisionBFloat16, f)) }
}

func TestBF16Grid(t *testing.T)                   { inBF16(testGrid)(t) }
func TestBF16FullProduct(t *testing.T)            { inBF16(testFullProduct)(t) }
func TestBF16GroupedQuery(t *testing.T)           { inBF16(testGroupedQuery)(t) }
func TestBF16Window(t *testing.T)                 { inBF16(testWindow)(t) }
func TestBF16CausalAlignment(t *testing.T)        { inBF16(testCausalAlignment)(t) }
func TestBF16SoftCapALiBiSinks(t *testing.T)      { inBF16(testSoftCapALiBiSinks)(t) }
func TestBF16Masks(t *testing.T)                  { inBF16(testMasks)(t) }
func TestBF16Varlen(t *testing.T)                 { inBF16(testVarlen)(t) }
func TestBF16FeatureCombination(t *testing.T)     { inBF16(testFeatureCombination)(t) }
func TestBF16BlindRows(t *testing.T)              { inBF16(testBlindRows)(t) }
func TestBF16WindowHidesNaN(t *testing.T)         { inBF16(testWindowHidesNaN)(t) }
func TestBF16ThreadsBitwise(t *testing.T)         { inBF16(testFeaturesThreadsBitwise)(t) }
func TestBF16NoAllocations(t *testing.T)          { inBF16(testFeaturesNoAllocations)(t) }
func TestBF16PagedMatchesContiguous(t *testing.T) { inBF16(testPagedMatchesContiguous)(t) }
func TestBF16PagedOracle(t *testing.T)            { inBF16(testPagedOracle)(t) }
func TestBF16SplitKVDecode(t *testing.T)          { inBF16(testSplitKVDecode)(t) }

// TestBF16NegativeScale checks a negative Options.Scale, which flips the
// order of the scores, in a tile that the causal mask crosses.
func TestBF16NegativeScale(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
		t.Run(prec.String(), inPrecision(prec, func(t *testing.T) {
			p := reference.Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 40, SeqKV: 70, Dim: 16, Causal: true, Scale: -0.3}
			checkAgainstOracle(t, mustEngine(t, attention.Config{BlockKV: 16}), newProblem(rng, p, attention.BF16, bhsd))
		}))
	}
}

// TestBF16PrepackMatchesTiles checks that packing K and V once per call
// (a prefill of several query blocks) gives bitwise the output of packing
// every tile,
// with windows whose tiles start on odd keys, odd tiles, and a NaN value
// row next to an odd tile that no row may see.
func TestBF16PrepackMatchesTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(73, 74))
	const hq, hkv, d, nq, nk = 4, 2, 16, 64, 77
	for _, w := range []*attention.Window{nil, {Left: 3, Right: 0}, {Left: 10, Right: 2}} {
		q := randn(rng, hq*nq*d)
		k, v := randn(rng, hkv*nk*d), randn(rng, hkv*nk*d)
		v[(nk-5)*d+3] = float32(math.NaN()) // key nk-5 of head 0
		// Key 21 of head 1: the partner row of the odd tile [16, 21) that
		// the causal first block (rows 0-7, keys < 21) ends with.
		v[(nk+21)*d+5] = float32(math.NaN())
		kv := attention.BHSD(1, hkv, nk, d)
		opts := attention.Options{Causal: true, Window: w, Precision: attention.PrecisionBFloat16}
		kT, vT := attention.F32Tensor(k, kv), attention.F32Tensor(v, kv)
		run := func(bkv int, pre bool) []float32 {
			defer attention.SetPrepack(pre)()
			out := make([]float32, hq*nq*d)
			e := mustEngine(t, attention.Config{BlockQ: 16, BlockKV: bkv, Threads: 2})
			require.NoError(t, e.Forward(attention.F32Tensor(out, attention.BHSD(1, hq, nq, d)), attention.F32Tensor(q, attention.BHSD(1, hq, nq, d)), kT, vT, opts))
			return out
		}
		for _, bkv := range []int{16, 22} {
			tiles, pre := run(bkv, false), run(bkv, true)
			nan := 0
			for i := range tiles {
				require.Equal(t, math.Float32bits(tiles[i]), math.Float32bits(pre[i]), "window %v BlockKV %d: out[%d] %v, want %v", w, bkv, i, pre[i], tiles[i])
				if math.IsNaN(float64(pre[i])) {
					nan++
				}
			}
			assert.NotZero(t, nan, "the NaN value reaches the rows that see it")
			assert.Less(t, nan, len(pre)/4, "and no others")
		}
	}
}

// TestBF16PrepackDimV is TestBF16PrepackMatchesTiles for V of another
// head dim than K: the prepacked panels must find a NaN in any of V's
// columns, those past K's head dim included.
func TestBF16PrepackDimV(t *testing.T) {
	rng := rand.New(rand.NewPCG(75, 76))
	const hq, hkv, d, nq, nk = 4, 2, 16, 64, 77
	for _, dv := range []int{40, 9} {
		q := randn(rng, hq*nq*d)
		k, v := randn(rng, hkv*nk*d), randn(rng, hkv*nk*dv)
		v[(nk-5)*dv+dv-1] = float32(math.NaN())  // key nk-5 of head 0, its last column
		v[(nk+21)*dv+dv-2] = float32(math.NaN()) // key 21 of head 1: the partner row of an odd tile
		kT, vT := attention.F32Tensor(k, attention.BHSD(1, hkv, nk, d)), attention.F32Tensor(v, attention.BHSD(1, hkv, nk, dv))
		opts := attention.Options{Causal: true, Precision: attention.PrecisionBFloat16}
		run := func(pre bool) []float32 {
			defer attention.SetPrepack(pre)()
			out := make([]float32, hq*nq*dv)
			e := mustEngine(t, attention.Config{BlockQ: 16, BlockKV: 16, Threads: 2})
			require.NoError(t, e.Forward(attention.F32Tensor(out, attention.BHSD(1, hq, nq, dv)), attention.F32Tensor(q, attention.BHSD(1, hq, nq, d)), kT, vT, opts))
			return out
		}
		tiles, pre := run(false), run(true)
		nan := 0
		for i := range tiles {
			require.Equal(t, math.Float32bits(tiles[i]), math.Float32bits(pre[i]), "dv %d: out[%d] %v, want %v", dv, i, pre[i], tiles[i])
			if math.IsNaN(float64(pre[i])) {
				nan++
			}
		}
		assert.NotZero(t, nan, "dv %d: the NaN values reach the rows that see them", dv)
		assert.Less(t, nan, len(pre)/4, "dv %d: and no others", dv)
	}
}

// TestBF16FusedMatchesUnfused checks that folding a tile's rows a chunk at
// a time (product, softmax, P·V per chunk) gives bitwise the output of
// folding the whole tile at each step, with odd chunks, odd tiles, odd d,
// windows and a NaN value row, with and without the prepacked panels.
func TestBF16FusedMatchesUnfused(t *testing.T) {
	rng := rand.New(rand.NewPCG(77, 78))
	const hq, hkv, d, nq, nk = 6, 2, 33, 70, 91
	for _, w := range []*attention.Window{nil, {Left: 9, Right: 2}} {
		q := randn(rng, hq*nq*d)
		k, v := randn(rng, hkv*nk*d), randn(rng, hkv*nk*d)
		v[(nk-7)*d+3] = float32(math.NaN())
		kv := attention.BHSD(1, hkv, nk, d)
		opts := attention.Options{Causal: true, Window: w, Precision: attention.PrecisionBFloat16}
		kT, vT := attention.F32Tensor(k, kv), attention.F32Tensor(v, kv)
		for _, pre := range []bool{false, true} {
			run := func(rows int) []float32 {
				defer attention.SetFuseRows(rows)()
				defer attention.SetPrepack(pre)()
				out := make([]float32, hq*nq*d)
				e := mustEngine(t, attention.Config{BlockQ: 48, BlockKV: 22, Threads: 2})
				require.NoError(t, e.Forward(attention.F32Tensor(out, attention.BHSD(1, hq, nq, d)), attention.F32Tensor(q, attention.BHSD(1, hq, nq, d)), kT, vT, opts))
				return out
			}
			want := run(0)
			for _, rows := range []int{1, 5, 32} {
				got := run(rows)
				for i := range want {
					require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "window %v prepack %v chunks of %d rows: out[%d] %v, want %v", w, pre, rows, i, got[i], want[i])
				}
			}
		}
	}
}

// TestBF16ChunkKernelMatchesChain checks that the bf16 path computes the
// same bits with the level's fused tile kernel (kernel.FoldChunkBF16) as
// with the chain of calls it stands for: head dims and tiles multiples of
// 32, block rows that are not, causal and windowed (crossing tiles), a NaN
// value (its crossing tiles go through the chain), packed once per call and
// per tile, on 1 and 3 threads. It runs where a level fuses the chunk
// (amx, avx512bf16).
func TestBF16ChunkKernelMatchesChain(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		if !kernel.FusesChunkBF16(64, 64, 64) {
			t.Skip("this implementation has no fused bf16 tile kernel")
		}
		rng := rand.New(rand.NewPCG(79, 80))
		const hq, hkv, d, nq, nk = 6, 2, 64, 70, 301
		for _, w := range []*attention.Window{nil, {Left: 90, Right: 3}} {
			q := randn(rng, hq*nq*d)
			k, v := randn(rng, hkv*nk*d), randn(rng, hkv*nk*d)
			v[(nk-40)*d+3] = float32(math.NaN())
			kv := attention.BHSD(1, hkv, nk, d)
			opts := attention.Options{Causal: true, Window: w, Precision: attention.PrecisionBFloat16}
			kT, vT := attention.F32Tensor(k, kv), attention.F32Tensor(v, kv)
			for _, pre := range []bool{false, true} {
				for _, threads := range []int{1, 3} {
					run := func(fused bool) []float32 {
						defer attention.SetFuseChunks(fused)()
						defer attention.SetPrepack(pre)()
						out := make([]float32, hq*nq*d)
						e := mustEngine(t, attention.Config{BlockQ: 20, BlockKV: 64, Threads: threads})
						require.NoError(t, e.Forward(attention.F32Tensor(out, attention.BHSD(1, hq, nq, d)), attention.F32Tensor(q, attention.BHSD(1, hq, nq, d)), kT, vT, opts))
						return out
					}
					want, got := run(false), run(true)
					for i := range want {
						require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "window %v prepack %v threads %d: out[%d] %v, want %v", w, pre, threads, i, got[i], want[i])
					}
				}
			}
		}
	})
}

// TestBF16PrefillNoAllocations checks that a warm bf16 prefill, whose job
// packs K and V once per call, allocates nothing, on every implementation
// (the widening products of avx512, avx2 and neon keep their blocks on the
// stack).
func TestBF16PrefillNoAllocations(t *testing.T) {
	forEachImpl(t, testBF16PrefillNoAllocations)
}

func testBF16PrefillNoAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(75, 76))
	const hq, hkv, d, nq, nk = 8, 2, 64, 100, 130
	q := attention.F32Tensor(randn(rng, hq*nq*d), attention.BHSD(1, hq, nq, d))
	kv := attention.BHSD(1, hkv, nk, d)
	k, v := attention.F32Tensor(randn(rng, hkv*nk*d), kv), attention.F32Tensor(randn(rng, hkv*nk*d), kv)
	out := attention.F32Tensor(make([]float32, hq*nq*d), q.Layout)
	e := mustEngine(t, attention.Config{Threads: 1, BlockQ: 64})
	opts := attention.Options{Causal: true, Precision: attention.PrecisionBFloat16}
	for range 3 {
		require.NoError(t, e.Forward(out, q, k, v, opts))
	}
	allocs := testing.AllocsPerRun(20, func() {
		if err := e.Forward(out, q, k, v, opts); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, allocs)
}

// TestBF16PrepackSlots checks that a prefill whose prepacked panels take
// turns in fewer slots than it has (batch, K/V head)s, its blocks handed
// out head by head, gives bitwise the output of packing every tile, for
// every slot count and several thread counts, with NaN value rows in the
// first and the last strip of the panels' packs.
func TestBF16PrepackSlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(79, 80))
	const b, hq, hkv, d, nq, nk = 2, 6, 3, 24, 70, 83
	q := attention.F32Tensor(randn(rng, b*hq*nq*d), attention.BHSD(b, hq, nq, d))
	kv := attention.BHSD(b, hkv, nk, d)
	vs := randn(rng, b*hkv*nk*d)
	vs[((1*hkv+2)*nk+40)*d+7] = float32(math.NaN()) // batch 1, head 2, key 40: the first strip
	vs[((0*hkv+1)*nk+70)*d+3] = float32(math.NaN()) // batch 0, head 1, key 70: the second
	k, v := attention.F32Tensor(randn(rng, b*hkv*nk*d), kv), attention.F32Tensor(vs, kv)
	opts := attention.Options{Causal: true, Precision: attention.PrecisionBFloat16}
	run := func(pre bool, slots, threads int) []float32 {
		defer attention.SetPrepack(pre)()
		defer attention.SetPrepackBytes(slots * attention.PrepackSlotBytes(nk, d, d))()
		out := make([]float32, b*hq*nq*d)
		e := mustEngine(t, attention.Config{BlockQ: 16, BlockKV: 16, Threads: threads})
		require.NoError(t, e.Forward(attention.F32Tensor(out, q.Layout), q, k, v, opts))
		return out
	}
	want := run(false, b*hkv, 1)
	for _, slots := range []int{1, 2, 4, b * hkv} {
		for _, threads := range []int{1, 2, 5} {
			got := run(true, slots, threads)
			for i := range want {
				require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "%d slots, %d threads: out[%d] %v, want %v", slots, threads, i, got[i], want[i])
			}
		}
	}
}

// TestBF16PrepackMemory checks that a bf16 prefill over 32768 keys (Hkv 8,
// head dim 128: 128 MiB of bf16 K and V) allocates at most 64 MiB of
// prepacked panels and a fixed amount per thread, measured around the
// first call of a fresh engine.
func TestBF16PrepackMemory(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("a prefill over 32768 keys: not in -short or under the race detector")
	}
	const hq, hkv, d, nq, nk, threads = 32, 8, 128, 128, 32768, 2
	q := attention.F32Tensor(make([]float32, hq*nq*d), attention.BHSD(1, hq, nq, d))
	kv := attention.BF16Tensor(make([]fp16.BFloat16, hkv*nk*d), attention.BHSD(1, hkv, nk, d))
	out := attention.F32Tensor(make([]float32, hq*nq*d), q.Layout)
	e := mustEngine(t, attention.Config{Threads: threads})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	require.NoError(t, e.Forward(out, q, kv, kv, attention.Options{Causal: true, Precision: attention.PrecisionBFloat16}))
	runtime.ReadMemStats(&after)
	const perThread = 4 << 20
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %.1f MiB", float64(got)/(1<<20))
	require.Less(t, got, uint64(64<<20+threads*perThread), "bytes allocated by the first bf16 prefill over %d keys", nk)
}
