package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/internal/impltest"
	"github.com/flashgo/flashgo/internal/tier"
)

// typedTensor stores the float32 values x as element type dt in a tensor
// of layout l, rounding (or quantising) as KVCache.Append does.
func typedTensor(t testing.TB, dt attention.DType, x []float32, l attention.Layout) attention.Tensor {
	t.Helper()
	switch dt {
	case attention.F16:
		return attention.F16Tensor(fp16.Float16s(x), l)
	case attention.BF16:
		return attention.BF16Tensor(fp16.BFloat16s(x), l)
	case attention.Q8:
		q, sc := make([]int8, len(x)), make([]float32, len(x)/attention.Q8Block)
		require.NoError(t, attention.QuantizeQ8(q, sc, x))
		return attention.Q8Tensor(q, sc, l)
	case attention.FP8E4M3:
		return attention.FP8E4M3Tensor(fp16.Float8E4M3s(x), []float32{1}, l)
	case attention.FP8E5M2:
		return attention.FP8E5M2Tensor(fp16.Float8E5M2s(x), []float32{1}, l)
	}
	return attention.F32Tensor(x, l)
}

// vllmPool is a caller-owned paged store for tests: float32 pools in a
// layout (vLLM's [blocks, blockSize, Hkv, d] or per head), block tables
// and lengths, and the sequences' rows in order, [hkv][n][d] float32.
type vllmPool struct {
	kv     attention.PagedKV
	k, v   []float32 // the pools' float32 values
	seqK   [][]float32
	seqV   [][]float32
	lens   []int
	layout attention.Layout
}

// newVLLMPool lays out sequences of the given lengths in a pool of blocks
// of bs positions listed in shuffled order; the first two sequences share
// their first block (a common prefix) when both have one.
func newVLLMPool(t testing.TB, rng *rand.Rand, dt attention.DType, perHead bool, hkv, d, bs int, lens []int) *vllmPool {
	t.Helper()
	maxBlocks := 0
	total := 0
	for _, n := range lens {
		maxBlocks = max(maxBlocks, (n+bs-1)/bs)
		total += (n + bs - 1) / bs
	}
	nBlocks := total + 3 // a few unused
	l := attention.BSHD(nBlocks, bs, hkv, d)
	if perHead {
		l = attention.BHSD(nBlocks, hkv, bs, d)
	}
	p := &vllmPool{lens: lens, layout: l}
	p.k, p.v = randn(rng, l.Span()), randn(rng, l.Span())
	roundKV(dt, p.k)
	roundKV(dt, p.v)
	ids := rng.Perm(nBlocks)
	table := make([]int32, len(lens)*(maxBlocks+1)) // one spare column of garbage
	for i := range table {
		table[i] = -7
	}
	next := 0
	for b, n := range lens {
		for i := range (n + bs - 1) / bs {
			if b == 1 && i == 0 && lens[0] >= bs && n > 0 {
				table[b*(maxBlocks+1)] = table[0] // shared prefix block
				continue
			}
			table[b*(maxBlocks+1)+i] = int32(ids[next])
			next++
		}
	}
	seqLens := make([]int32, len(lens))
	for b, n := range lens {
		seqLens[b] = int32(n)
		sk, sv := make([]float32, hkv*n*d), make([]float32, hkv*n*d)
		for pos := range n {
			blk := int(table[b*(maxBlocks+1)+pos/bs])
			for h := range hkv {
				off := l.Offset(blk, h, pos%bs)
				copy(sk[(h*n+pos)*d:][:d], p.k[off:][:d])
				copy(sv[(h*n+pos)*d:][:d], p.v[off:][:d])
			}
		}
		p.seqK, p.seqV = append(p.seqK, sk), append(p.seqV, sv)
	}
	p.kv = attention.PagedKV{K: typedTensor(t, dt, p.k, l), V: typedTensor(t, dt, p.v, l),
		BlockTable: table, MaxBlocks: maxBlocks + 1, SeqLens: seqLens}
	return p
}

// TestPagedKVMatchesForward decodes a batch of sequences from a
// caller-owned pool, in vLLM's layout and per head, and checks every
// output and log-sum-exp bitwise against Forward over a KVCache holding
// the sequence, for every implementation and both precisions.
func TestPagedKVMatchesForward(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			t.Run(prec.String(), inPrecision(prec, testPagedKVMatchesForward))
		}
	})
}

func testPagedKVMatchesForward(t *testing.T) {
	rng := rand.New(rand.NewPCG(101, 102))
	const hkv, d = 2, 32
	lens := []int{37, 20, 1, 0, 130, 3}
	for _, dt := range kvTypesQ8 {
		for _, perHead := range []bool{false, true} {
			for _, bs := range []int{1, 3, 16} {
				pool := newVLLMPool(t, rng, dt, perHead, hkv, d, bs, lens)
				refs := make([]*attention.KVCache, len(lens))
				for b, n := range lens {
					kc, err := attention.NewKVCache(dt, hkv, n, d)
					require.NoError(t, err)
					if n > 0 {
						require.NoError(t, kc.Append(chunkTensor(pool.seqK[b], hkv, n, d), chunkTensor(pool.seqV[b], hkv, n, d)))
					}
					refs[b] = kc
				}
				for _, g := range []int{1, 3} {
					for _, nq := range []int{1, 3} {
						for _, threads := range []int{1, 3} {
							for _, opt := range []string{"causal", "window", "softcap", "sinks", "alibi"} {
								hq := g * hkv
								e := mustEngine(t, attention.Config{BlockKV: 32, Threads: threads})
								opts := attention.Options{Causal: true, Precision: precisionUnderTest}
								switch opt {
								case "window":
									opts.Window = &attention.Window{Left: 10, Right: 0}
								case "softcap":
									opts.SoftCap = 2
								case "sinks":
									opts.Sinks = randn(rng, hq)
								case "alibi":
									opts.Slopes, _ = attention.ALiBiSlopes(hq)
								}
								B := len(lens)
								q := randn(rng, B*hq*nq*d)
								if !tier.Keep(t, fmt.Sprintf("%v perHead %v bs %d g %d nq %d threads %d %s", dt, perHead, bs, g, nq, threads, opt), 6) {
									continue // drawn first: a cell has the same inputs in both tiers
								}
								l := attention.BHSD(B, hq, nq, d)
								out, lse := make([]float32, len(q)), make([]float32, B*hq*nq)
								require.NoError(t, e.ForwardPagedKVLSE(attention.F32Tensor(out, l), lse, attention.F32Tensor(q, l), pool.kv, opts))
								for b := range lens {
									l1 := attention.BHSD(1, hq, nq, d)
									o1, s1 := make([]float32, hq*nq*d), make([]float32, hq*nq)
									require.NoError(t, e.ForwardLSE(attention.F32Tensor(o1, l1), s1, attention.F32Tensor(q[b*hq*nq*d:], l1), refs[b].K(), refs[b].V(), opts))
									what := fmt.Sprintf("%v perHead %v bs %d g %d nq %d threads %d %s seq %d", dt, perHead, bs, g, nq, threads, opt, b)
									requireSameBits(t, out[b*hq*nq*d:][:hq*nq*d], o1, "%s out", what)
									requireSameBits(t, lse[b*hq*nq:][:hq*nq], s1, "%s lse", what)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestPagedKVOracle checks ForwardPagedKV against the float64 oracle with
// the default configuration (automatic split of long sequences).
func TestPagedKVOracle(t *testing.T) {
	for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
		t.Run(prec.String(), inPrecision(prec, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(103, 104))
			const hkv, hq, d, nq, bs = 2, 6, 64, 2, 16
			lens := []int{2, 700, 33, 1300}
			for _, dt := range kvTypesQ8 {
				pool := newVLLMPool(t, rng, dt, false, hkv, d, bs, lens)
				B := len(lens)
				q := randn(rng, B*hq*nq*d)
				l := attention.BHSD(B, hq, nq, d)
				out, lse := make([]float32, len(q)), make([]float32, B*hq*nq)
				require.NoError(t, mustEngine(t, attention.Config{}).ForwardPagedKVLSE(attention.F32Tensor(out, l), lse,
					attention.F32Tensor(q, l), pool.kv, attention.Options{Causal: true, Precision: precisionUnderTest}))
				for b, n := range lens {
					p := reference.Params{Batch: 1, HeadsQ: hq, HeadsKV: hkv, SeqQ: nq, SeqKV: n, Dim: d, Causal: true}
					checkPrecisionError(t, fmt.Sprintf("%v seq %d (len %d)", dt, b, n), p, q[b*hq*nq*d:][:hq*nq*d], pool.seqK[b], pool.seqV[b],
						out[b*hq*nq*d:][:hq*nq*d], lse[b*hq*nq:][:hq*nq], 2e-5, 1e-4)
				}
			}
		}))
	}
}

// TestPagedKVErrors checks that bad tables, lengths and pools are errors
// that name the entry, with nothing written.
func TestPagedKVErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(105, 106))
	const hkv, hq, d, bs = 2, 4, 32, 4
	lens := []int{5, 9}
	pool := newVLLMPool(t, rng, attention.F16, false, hkv, d, bs, lens)
	e := mustEngine(t, attention.Config{})
	B := len(lens)
	q := randn(rng, B*hq*d)
	l := attention.BHSD(B, hq, 1, d)
	edit := func(f func(kv *attention.PagedKV)) attention.PagedKV {
		kv := pool.kv
		kv.BlockTable = append([]int32(nil), kv.BlockTable...)
		kv.SeqLens = append([]int32(nil), kv.SeqLens...)
		f(&kv)
		return kv
	}
	nBlocks := pool.layout.Batch
	for _, c := range []struct {
		name string
		kv   attention.PagedKV
		opts attention.Options
		want string
	}{
		{"block id high", edit(func(kv *attention.PagedKV) { kv.BlockTable[kv.MaxBlocks+2] = int32(nBlocks) }), attention.Options{}, fmt.Sprintf("kv.BlockTable[1][2] is block %d; want 0 to %d", nBlocks, nBlocks-1)},
		{"block id negative", edit(func(kv *attention.PagedKV) { kv.BlockTable[0] = -1 }), attention.Options{}, "kv.BlockTable[0][0] is block -1"},
		{"length beyond the table", edit(func(kv *attention.PagedKV) { kv.SeqLens[1] = int32(kv.MaxBlocks*bs + 1) }), attention.Options{}, "kv.SeqLens[1] is"},
		{"negative length", edit(func(kv *attention.PagedKV) { kv.SeqLens[0] = -1 }), attention.Options{}, "kv.SeqLens[0] is -1"},
		{"short table", edit(func(kv *attention.PagedKV) { kv.BlockTable = kv.BlockTable[:kv.MaxBlocks] }), attention.Options{}, "kv.BlockTable has"},
		{"lengths", edit(func(kv *attention.PagedKV) { kv.SeqLens = kv.SeqLens[:1] }), attention.Options{}, "kv.SeqLens has 1 lengths"},
		{"negative MaxBlocks", edit(func(kv *attention.PagedKV) { kv.MaxBlocks = -1 }), attention.Options{}, "kv.MaxBlocks is -1"},
		{"types", edit(func(kv *attention.PagedKV) { kv.V = typedTensor(t, attention.BF16, pool.v, pool.layout) }), attention.Options{}, "want the same type, blocks, positions and heads"},
		{"heads", edit(func(kv *attention.PagedKV) {
			kv.K = attention.F16Tensor(fp16.Float16s(pool.k), attention.BSHD(nBlocks, bs, 1, 2*d))
		}), attention.Options{}, "want the same type, blocks, positions and heads"},
		{"overlapping rows", edit(func(kv *attention.PagedKV) { kv.K.SeqStride = 1; kv.V.SeqStride = 1 }), attention.Options{}, "SeqStride 1"},
		{"mask", pool.kv, attention.Options{BoolMask: attention.BoolMask{Data: []bool{true}, Layout: attention.BHSD(1, 1, 1, 1)}}, "not supported"},
	} {
		out := impltest.Filled(len(q), float32(math.NaN()))
		err := e.ForwardPagedKV(attention.F32Tensor(out, l), attention.F32Tensor(q, l), c.kv, c.opts)
		require.ErrorContains(t, err, c.want, c.name)
		require.ErrorContains(t, err, "attention: ", c.name)
		for i, x := range out {
			require.True(t, math.IsNaN(float64(x)), "%s: out[%d] written on error", c.name, i)
		}
	}
	// Garbage past a sequence's used entries is never read.
	require.NoError(t, e.ForwardPagedKV(attention.F32Tensor(make([]float32, len(q)), l), attention.F32Tensor(q, l), pool.kv, attention.Options{Causal: true}))
}

// TestPagedKVAllocs checks that a decode step from a caller's pool
// allocates nothing once the engine has seen the shape.
func TestPagedKVAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("SKIP: the race detector allocates")
	}
	rng := rand.New(rand.NewPCG(107, 108))
	const hkv, hq, d, bs = 2, 8, 64, 16
	pool := newVLLMPool(t, rng, attention.BF16, false, hkv, d, bs, []int{100, 7, 1000, 0, 333})
	e := mustEngine(t, attention.Config{Threads: 3})
	B := len(pool.lens)
	q := randn(rng, B*hq*d)
	out, lse := make([]float32, len(q)), make([]float32, B*hq)
	l := attention.BSHD(B, 1, hq, d)
	step := func() {
		if err := e.ForwardPagedKVLSE(attention.F32Tensor(out, l), lse, attention.F32Tensor(q, l), pool.kv, attention.Options{Causal: true}); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if n := testing.AllocsPerRun(20, step); n != 0 {
		t.Fatalf("ForwardPagedKV allocates %v times a step; want 0", n)
	}
}

// FuzzPagedKV decodes a caller-owned pool's geometry, block table and
// lengths from the input, hostile ones included (block ids out of range,
// lengths beyond the table or negative, tables too short), and runs
// ForwardPagedKV. An error must leave the output untouched; a success must
// give each sequence bitwise the output of Forward over its rows gathered
// into a contiguous tensor of the pool's element type (for Q8, within
// 1e-4 of the float64 oracle instead: re-quantising gathered rows may
// move a scale by an ulp). The rest of the input draws a hostile call of
// the same batch (pagedKVHostile): out and lse on q, the pools, their Q8
// scales, the block table, the lengths, sinks or slopes, on each other or
// next to one, q, out or the pools with a dimension or stride 0 or
// negative (head dim 0, 0 heads, block size 0), a negative MaxBlocks or
// length, which must fail, writing nothing, or succeed with the bits of
// the same call. Last, the same sequences get a query count each (0 to 3,
// possibly more than their keys) packed with Options.CuSeqQ, with now and
// then hostile offsets (fuzzMixedPagedKV): an error writes nothing, a
// success gives each sequence the bits of a call for it alone. Then the
// same sequences as the suffixes of a cascade of 1 to 3 prefixes drawn
// from the pool (ForwardSharedPrefixLSE with Groups, CuSeqQ, sinks,
// panels; fuzzSharedPagedKV): an error writes nothing, a success gives the
// bits of the separate calls its doc names. And last, the calls again
// through a view of the table at a drawn BlockStride and offset
// (fuzzTableView), which must fail where the compact table fails and
// otherwise give its bits.
func FuzzPagedKV(f *testing.F) {
	f.Add([]byte{})
	// Blocks of one position with a SeqStride below the head dim (0): the
	// stride is never stepped, so the call is valid and must compute as
	// with the dense stride (it once failed half-way in the kernels).
	f.Add([]byte("000000000000020020000100000000\x00000&"))
	f.Add([]byte("\x00\x01\x01\x07\x03\x05\x01\x02\x03\x02\x01\x04\x00\x05\x03\x02\x01\x00\x06\x02\x01"))
	f.Add([]byte("\x01\x00\x00\x02\x01\x02\x00\x01\x02\x06\x07\x00\x03\x09\x01"))
	f.Add([]byte("\x03\x01\x01\x00\x00\x03\x01\x02\x03\xff\xfe\x00\x01\x02\x03"))
	// Per-sequence query counts (fuzzMixedPagedKV): three sequences of 5,
	// 6 and 3 positions in blocks of 2, 1, 3 and 2 queries (f32, then
	// with V a view of K of head dim 3, one thread, 3 parts; then Q8).
	mixed := func(dt, engine, causal, mla, nqs string) []byte {
		return []byte("mixedkv." + dt + "\x01\x01\x03\x01\x05\x00\x02\x03\x00\x00" + "\x01\x02\x03\x04\x05\x06\x02\x03\x04" +
			"\x05\x00\x06\x00\x03\x00" + engine + causal + strings.Repeat("\x00", 11) + mla + nqs)
	}
	f.Add(mixed("\x00", "\x00\x02\x00", "\x01", "\x00", "\x01\x03\x02\x00"))
	f.Add(mixed("\x00", "\x03\x00\x03", "\x00", "\x01\x02", "\x03\x00\x02\x00"))
	f.Add(mixed("\x03", "\x06\x01\x00", "\x01", "", "\x02\x02\x03\x00"))
	// Hostile calls (pagedKVHostile): one sequence of 3 positions, head dim
	// 4, in blocks of 2 (f32, or q8 of head dim 32), then the plan.
	hostile := func(plan string) []byte {
		return []byte("hostile." + "\x00\x00\x00\x03\x01\x02\x00\x00\x02\x00\x00\x01\x02\x03\x00\x00\x00\x00\x00" + plan)
	}
	f.Add(hostile("\x02\x00\x00"))                                 // out on kv.K
	f.Add(hostile("\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x04")) // lse on the block table
	f.Add(hostile("\x05\x01\x80"))                                 // out on the lengths
	f.Add(hostile("\x04\x05\x00\x00\x00\x00\x00\x00\x00\x01"))     // out just after the block table: a near miss
	f.Add(hostile("\x00\x00\x00\x06\x00\x00\x00\x00\x00\x00\x05")) // sinks, lse on them
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x05\x03\x00"))         // pools of head dim 0
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x05\x01\x00"))         // pools of 0 heads
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x05\x02\x00"))         // pools of block size 0
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x01\x07\x02"))         // MaxBlocks -1
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x01\x07\x03"))         // a length -1
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x03\x04\x00"))         // kv.K BatchStride 0: every block the same
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x01\x03\x00"))         // q head dim 0
	// Q8 pools of head dim 32: out on kv.K's scales.
	f.Add([]byte("hostilq8\x03\x00\x00\x00\x01\x02\x01\x00\x02\x00\x00\x01\x02\x03\x00\x00\x00\x00\x00\x03\x01\x40"))
	// Cascades (fuzzSharedPagedKV) over the mixed seeds' three sequences:
	// two prefixes (2 and 3 positions), groups {0, 1, 3}, CuSeqQ, sinks,
	// bf16, the first prefix packed; three prefixes, one empty, groups
	// {0, 0, 2, 3} (one without sequences), a uniform Nq of 2, all packed;
	// one prefix without Groups, CuSeqQ, packed as kv.Packed; the panels
	// of the first prefix given for the second (an error).
	cascade := func(tail string) []byte {
		return append(mixed("\x00", "\x00\x02\x00", "\x01", "\x00", "\x01\x03\x02\x00"), tail...)
	}
	f.Add(cascade("\x01\x00\x02\x04\x03\x01\x01\x02\x03\x01\x01\x01\x01\x01\x00\x00"))
	f.Add(cascade("\x02\x01\x03\x00\x00\x02\x05\x00\x02\x00\x01\x00\x00\x01\x01\x01\x01\x00"))
	f.Add(cascade("\x00\x01\x05\x00\x01\x01\x01\x01\x00\x01\x01\x01\x01\x00"))
	f.Add(cascade("\x01\x00\x02\x01\x03\x01\x01\x01\x03\x02\x00\x00\x01\x01\x01\x09"))
	// The same calls through a view of the table (fuzzTableView): after
	// the mixed seeds' bytes, a stride of MaxBlocks+2 and an offset of 1
	// into a padded table, then MaxBlocks+3 and 2 unpadded, each with
	// query counts for CuSeqQ; a stride below MaxBlocks and a negative
	// one; and a table whose first entry is block −1 (a call that fails),
	// through a stride of MaxBlocks+2 and an offset of 1.
	f.Add(append(mixed("\x00", "\x00\x02\x00", "\x01", "\x00", "\x01\x03\x02\x00"), "\x02\x01\x00\x01\x01\x02\x00"...))
	f.Add(append(mixed("\x03", "\x06\x01\x00", "\x01", "", "\x02\x02\x03\x00"), "\x03\x02\x00\x00\x02\x00\x01"...))
	f.Add(append(mixed("\x00", "\x00\x02\x00", "\x01", "\x00", "\x01\x03\x02\x00"), "\x00\x00\x06\x00"...))
	f.Add(append(mixed("\x00", "\x00\x02\x00", "\x01", "\x00", "\x01\x03\x02\x00"), "\x00\x00\x07\x01"...))
	// Draft trees (fuzzTreeMask), after the first view seed's bytes: 3
	// queries with a tree (a root and two children) for the first
	// sequence, one without a mask for the second, 2 (a chain) for the
	// third; then the same with a padding bit set, and a byte short.
	view := append(mixed("\x00", "\x00\x02\x00", "\x01", "\x00", "\x01\x03\x02\x00"), "\x02\x01\x00\x01\x01\x02\x00"...)
	trees := "\x03\x01" + "\x01\x00\x00\x01\x01\x00\x01\x00\x01" + "\x01\x00" + "\x02\x01" + "\x01\x00\x01\x01"
	f.Add(append(view[:len(view):len(view)], trees+"\x00"...))
	f.Add(append(view[:len(view):len(view)], trees+"\x04"...))
	f.Add(append(view[:len(view):len(view)], trees+"\x05"...))
	badID := mixed("\x00", "\x00\x02\x00", "\x01", "\x00", "\x02\x01\x00\x01\x01\x01\x01")
	badID[19] = 0 // the table's first entry
	f.Add(badID)
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newFuzzReader(data)
		dt := fuzzKVType[r.intn(4)]
		hkv, group, d := 1+r.intn(2), 1+r.intn(2), 1+r.intn(8)
		if dt == attention.Q8 {
			d = attention.Q8Block
		}
		bs, nBlocks := 1+r.intn(4), 1+r.intn(6)
		l := attention.BSHD(nBlocks, bs, hkv, d)
		if r.bool() {
			l = attention.BHSD(nBlocks, hkv, bs, d)
		}
		B, maxBlocks, nq := 1+r.intn(3), r.intn(4), 1+r.intn(2)
		table := make([]int32, max(0, B*maxBlocks-r.intn(2)))
		for i := range table {
			table[i] = int32(r.intn(nBlocks+2)) - 1 // −1 and nBlocks are out of range
		}
		lens := make([]int32, B)
		for b := range lens {
			lens[b] = int32(r.intn(maxBlocks*bs+2)) - int32(r.intn(2)) // may be −1 or past the table
		}
		kf, vf := randn(r.rng, l.Span()), randn(r.rng, l.Span())
		roundKV(dt, kf)
		roundKV(dt, vf)
		kv := attention.PagedKV{K: typedTensor(t, dt, kf, l), V: typedTensor(t, dt, vf, l), BlockTable: table, MaxBlocks: maxBlocks, SeqLens: lens}
		hq := hkv * group
		e, err := attention.NewEngine(attention.Config{BlockKV: fuzzBlocks[r.intn(len(fuzzBlocks))], Threads: 1 + r.intn(3), KVSplits: r.intn(4)})
		if err != nil {
			t.Fatal(err)
		}
		opts := attention.Options{Causal: r.bool()}
		ql := attention.BHSD(B, hq, nq, d)
		q := randn(r.rng, ql.Span())
		pagedKVHostile(t, r, e, attention.F32Tensor(q, ql), kv, opts, ql)
		// Last, so that the seeds above keep their meaning: V as a view of
		// the first dv values of K's pool (an MLA cache).
		dv := d
		if dt != attention.Q8 && r.bool() {
			dv = 1 + r.intn(d)
			kv.V, vf = kv.K, kf
			kv.V.Dim = dv
		}
		ol := attention.BHSD(B, hq, nq, dv)
		out := impltest.Filled(ol.Span(), outGuard)
		if err := e.ForwardPagedKV(attention.F32Tensor(out, ol), attention.F32Tensor(q, ql), kv, opts); err != nil {
			for i, x := range out {
				if math.Float32bits(x) != math.Float32bits(outGuard) {
					t.Fatalf("error %v, but out[%d] was written", err, i)
				}
			}
			fuzzTableView(t, r, e, kv, attention.F32Tensor(q, ql), ol, opts)
			return
		}
		for b, n32 := range lens {
			n := int(n32)
			gk, gv := make([]float32, hkv*n*d), make([]float32, hkv*n*dv)
			for pos := range n {
				blk := int(table[b*maxBlocks+pos/bs])
				for h := range hkv {
					copy(gk[(h*n+pos)*d:][:d], kf[l.Offset(blk, h, pos%bs):][:d])
					copy(gv[(h*n+pos)*dv:][:dv], vf[l.Offset(blk, h, pos%bs):][:dv])
				}
			}
			got := out[b*hq*nq*dv:][:hq*nq*dv]
			qb := q[b*hq*nq*d:][:hq*nq*d]
			l1, o1 := attention.BHSD(1, hq, nq, d), attention.BHSD(1, hq, nq, dv)
			if dt == attention.Q8 {
				p := reference.Params{Batch: 1, HeadsQ: hq, HeadsKV: hkv, SeqQ: nq, SeqKV: n, Dim: d, Causal: opts.Causal}
				w, _, err := reference.Attention(p, reference.Float64s(qb), reference.Float64s(gk), reference.Float64s(gv))
				if err != nil {
					t.Fatal(err)
				}
				if errs := reference.Compare(got, w); errs.MaxAbs > 1e-4 {
					t.Fatalf("Q8 sequence %d (%d positions): %v", b, n, errs)
				}
				continue
			}
			kl, vl := attention.BHSD(1, hkv, n, d), attention.BHSD(1, hkv, n, dv)
			want := make([]float32, hq*nq*dv)
			if err := e.Forward(attention.F32Tensor(want, o1), attention.F32Tensor(qb, l1), typedTensor(t, dt, gk, kl), typedTensor(t, dt, gv, vl), opts); err != nil {
				t.Fatal(err)
			}
			if !sameBits(got, want) {
				t.Fatalf("%v bs %d layout %+v: sequence %d (%d positions, table %v) differs from Forward over its rows:\n%v\n%v", dt, bs, l, b, n, table, got, want)
			}
		}
		// Last too: the same sequences with per-sequence query counts.
		fuzzMixedPagedKV(t, r, e, kv, hq, d, dv, opts)
		// As the suffixes of a cascade; and last, the same calls through a
		// view of the table, then a step that verifies draft trees.
		fuzzSharedPagedKV(t, r, e, kv, hq, d, dv, opts)
		fuzzTableView(t, r, e, kv, attention.F32Tensor(q, ql), ol, opts)
		fuzzTreeMask(t, r, e, kv, kf, vf, l, dt, hq, d, dv, opts)
	})
}

// fuzzSharedPagedKV uses the sequences of kv, a valid pool, as the
// suffixes of ForwardSharedPrefixLSE, with 1 to 3 prefixes drawn from
// kv's own table rows (cut to any length, the empty one included), the
// sequences cut into groups (Groups, or nil for one prefix), per-sequence
// query counts (Options.CuSeqQ, 0 to 3 a sequence) or a uniform Nq of 1
// or 2, sinks or none, and some prefixes packed on the engine's threads
// (PackedGroups, or Packed for one prefix); now and then hostile: groups
// not from 0, past the sequences or missing, offsets of CuSeqQ short of
// the queries, panels of another prefix. An error must leave out and lse
// untouched; a success must give bitwise the separate calls of the doc
// (separateCalls).
func fuzzSharedPagedKV(t *testing.T, r *fuzzReader, e *attention.Engine, kv attention.PagedKV, hq, d, dv int, opts attention.Options) {
	t.Helper()
	B := len(kv.SeqLens)
	nPre := 1 + r.intn(3)
	prefix := attention.PagedKV{K: kv.K, V: kv.V, MaxBlocks: kv.MaxBlocks, BlockTable: make([]int32, nPre*kv.MaxBlocks), SeqLens: make([]int32, nPre)}
	for g := range nPre {
		s := r.intn(B)
		copy(prefix.BlockTable[g*kv.MaxBlocks:], kv.BlockTable[s*kv.MaxBlocks:][:kv.MaxBlocks])
		prefix.SeqLens[g] = int32(r.intn(int(kv.SeqLens[s]) + 1))
	}
	groups := []int{0, B}
	sk := attention.SharedPrefixKV{Prefix: prefix, Suffix: kv}
	if nPre > 1 || r.bool() {
		groups = make([]int, nPre+1)
		for g := 1; g < nPre; g++ {
			groups[g] = groups[g-1] + r.intn(B-groups[g-1]+1)
		}
		groups[nPre] = B
		sk.Groups = groups
	}
	var ql attention.Layout
	if r.bool() {
		nqs := make([]int, B)
		for s := range nqs {
			nqs[s] = r.intn(4)
		}
		opts.CuSeqQ = offsets(nqs)
		ql = attention.BSHD(1, opts.CuSeqQ[B], hq, d)
	} else {
		ql = attention.BHSD(B, hq, 1+r.intn(2), d)
	}
	if r.bool() {
		opts.Sinks = make([]float32, hq)
		for h := range opts.Sinks {
			opts.Sinks[h] = 0.5 - float32(h)
		}
	}
	prec := []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16}[r.intn(2)]
	opts.Precision = prec
	if r.bool() {
		packs := make([]*attention.PackedPrefix, nPre)
		for g := range packs {
			if r.bool() {
				packs[g] = new(attention.PackedPrefix)
				if err := e.PackPrefix(packs[g], prefix.Sequence(g), prec); err != nil {
					t.Fatal(err)
				}
			}
		}
		if nPre == 1 && r.bool() {
			sk.Packed = packs[0]
		} else {
			sk.PackedGroups = packs
		}
	}
	switch r.intn(10) {
	case 5:
		if sk.Groups != nil {
			sk.Groups = append([]int{1}, sk.Groups[1:]...)
		}
	case 6:
		if sk.Groups != nil {
			sk.Groups = append(slices.Clone(sk.Groups[:nPre]), B+1)
		}
	case 7:
		sk.Groups = nil
	case 8:
		if opts.CuSeqQ != nil && B > 1 {
			opts.CuSeqQ = opts.CuSeqQ[:B]
		}
	case 9:
		if sk.PackedGroups != nil && nPre > 1 && sk.PackedGroups[0] != nil {
			sk.PackedGroups[1] = sk.PackedGroups[0]
		}
	}
	qf := randn(r.rng, ql.Span())
	ol := ql
	ol.Dim, ol.SeqStride, ol.HeadStride, ol.BatchStride = dv, ql.SeqStride/d*dv, ql.HeadStride/d*dv, ql.BatchStride/d*dv
	rows := ql.Batch * hq * ql.Seq
	out, lse := impltest.Filled(ol.Span(), outGuard), impltest.Filled(rows, outGuard)
	if err := e.ForwardSharedPrefixLSE(attention.F32Tensor(out, ol), lse, attention.F32Tensor(qf, ql), sk, opts); err != nil {
		if !sameBits(out, impltest.Filled(ol.Span(), outGuard)) || !sameBits(lse, impltest.Filled(rows, outGuard)) {
			t.Fatalf("shared prefix: error %v, but out or lse was written", err)
		}
		return
	}
	want, wantLSE, err := separateCalls(e, sk, groups, attention.F32, qf, ql, dv, opts)
	if err != nil {
		t.Fatalf("shared prefix: the call succeeded, its separate calls fail: %v", err)
	}
	if got := outRows(attention.F32, out, ol); !sameBits(got, want) || !sameBits(lse, wantLSE) {
		t.Fatalf("shared prefix: groups %v CuSeqQ %v prefixes %v suffixes %v: out or lse differs from the separate calls", sk.Groups, opts.CuSeqQ, prefix.SeqLens, kv.SeqLens)
	}
}

// fuzzMixedPagedKV draws a query count per sequence of kv (0 to 3, which
// may exceed its keys) and, now and then, offsets that are hostile (not
// from 0, short of or past the packed length, one too few), and runs
// ForwardPagedKVLSE over the packed queries with Options.CuSeqQ. An error
// must leave out and lse untouched; a success must give each sequence
// bitwise the rows of a call for it alone (batch 1, its own query count).
func fuzzMixedPagedKV(t *testing.T, r *fuzzReader, e *attention.Engine, kv attention.PagedKV, hq, d, dv int, opts attention.Options) {
	t.Helper()
	B := len(kv.SeqLens)
	cu := make([]int, B+1)
	for s := range B {
		cu[s+1] = cu[s] + r.intn(4)
	}
	total := cu[B]
	switch r.intn(8) {
	case 4:
		cu[0] = 1
	case 5:
		cu[B]++
	case 6:
		cu[B]--
	case 7:
		cu = cu[:B]
	}
	total = max(total, 0)
	ql, ol := attention.BSHD(1, total, hq, d), attention.BSHD(1, total, hq, dv)
	q := randn(r.rng, ql.Span())
	out, lse := impltest.Filled(ol.Span(), outGuard), impltest.Filled(hq*total, outGuard)
	opts.CuSeqQ = cu
	if err := e.ForwardPagedKVLSE(attention.F32Tensor(out, ol), lse, attention.F32Tensor(q, ql), kv, opts); err != nil {
		if !sameBits(out, impltest.Filled(ol.Span(), outGuard)) || !sameBits(lse, impltest.Filled(hq*total, outGuard)) {
			t.Fatalf("CuSeqQ %v: error %v, but out or lse was written", cu, err)
		}
		return
	}
	opts.CuSeqQ = nil
	for s := range B {
		nq := cu[s+1] - cu[s]
		if nq == 0 {
			continue
		}
		one := attention.PagedKV{K: kv.K, V: kv.V, BlockTable: kv.BlockTable[s*kv.MaxBlocks:][:kv.MaxBlocks], MaxBlocks: kv.MaxBlocks, SeqLens: kv.SeqLens[s : s+1]}
		qv, ov := ql, attention.BHSD(1, hq, nq, dv)
		qv.Seq = nq
		o1, l1 := make([]float32, ov.Span()), make([]float32, hq*nq)
		if err := e.ForwardPagedKVLSE(attention.F32Tensor(o1, ov), l1, attention.F32Tensor(q[ql.Offset(0, 0, cu[s]):], qv), one, opts); err != nil {
			t.Fatal(err)
		}
		for h := range hq {
			for i := range nq {
				if !sameBits(out[ol.Offset(0, h, cu[s]+i):][:dv], o1[ov.Offset(0, h, i):][:dv]) {
					t.Fatalf("CuSeqQ %v lens %v: sequence %d head %d row %d differs from its own call", cu, kv.SeqLens, s, h, i)
				}
			}
			if !sameBits(lse[h*total+cu[s]:][:nq], l1[h*nq:][:nq]) {
				t.Fatalf("CuSeqQ %v lens %v: sequence %d head %d lse differs from its own call", cu, kv.SeqLens, s, h)
			}
		}
	}
}
