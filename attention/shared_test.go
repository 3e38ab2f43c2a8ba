package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/internal/impltest"
	"github.com/flashgo/flashgo/internal/tier"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sharedFixture is a pool holding a prefix of np positions and B suffixes,
// with the SharedPrefixKV that reads it and each sequence's keys and
// values (prefix then suffix) canonical, [Hkv, n, d].
type sharedFixture struct {
	kv     attention.SharedPrefixKV
	seqK   [][]float32
	seqV   [][]float32
	lens   []int // whole sequences: prefix + suffix
	kf, vf []float32
}

func newSharedFixture(t testing.TB, rng *rand.Rand, dt attention.DType, hkv, d, bs, np int, suffix []int) *sharedFixture {
	t.Helper()
	blocks := func(n int) int { return (n + bs - 1) / bs }
	nBlocks, maxS := blocks(np)+2, 0
	for _, n := range suffix {
		nBlocks += blocks(n)
		maxS = max(maxS, blocks(n))
	}
	l := attention.BSHD(nBlocks, bs, hkv, d)
	fx := &sharedFixture{kf: randn(rng, l.Span()), vf: randn(rng, l.Span())}
	roundKV(dt, fx.kf)
	roundKV(dt, fx.vf)
	ids := rng.Perm(nBlocks)
	next := 0
	take := func(n int) []int32 {
		t := make([]int32, blocks(n))
		for i := range t {
			t[i] = int32(ids[next])
			next++
		}
		return t
	}
	pt := take(np)
	st := make([]int32, len(suffix)*maxS)
	lens := make([]int32, len(suffix))
	for b, n := range suffix {
		copy(st[b*maxS:], take(n))
		lens[b] = int32(n)
	}
	K, V := typedTensor(t, dt, fx.kf, l), typedTensor(t, dt, fx.vf, l)
	fx.kv = attention.SharedPrefixKV{
		Prefix: attention.PagedKV{K: K, V: V, BlockTable: pt, MaxBlocks: len(pt), SeqLens: []int32{int32(np)}},
		Suffix: attention.PagedKV{K: K, V: V, BlockTable: st, MaxBlocks: maxS, SeqLens: lens},
	}
	for b, ns := range suffix {
		n := np + ns
		sk, sv := make([]float32, hkv*n*d), make([]float32, hkv*n*d)
		for pos := range n {
			var blk int32
			var slot int
			if pos < np {
				blk, slot = pt[pos/bs], pos%bs
			} else {
				blk, slot = st[b*maxS+(pos-np)/bs], (pos-np)%bs
			}
			for h := range hkv {
				copy(sk[(h*n+pos)*d:][:d], fx.kf[l.Offset(int(blk), h, slot):][:d])
				copy(sv[(h*n+pos)*d:][:d], fx.vf[l.Offset(int(blk), h, slot):][:d])
			}
		}
		fx.seqK, fx.seqV, fx.lens = append(fx.seqK, sk), append(fx.seqV, sv), append(fx.lens, n)
	}
	return fx
}

// TestSharedPrefixOracle checks ForwardSharedPrefix against the float64
// oracle of each whole sequence (prefix then suffix), for every K/V type,
// implementation and precision, with empty prefixes and suffixes, grouped
// heads, draft tokens, soft-capping and sinks.
func TestSharedPrefixOracle(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			t.Run(prec.String(), inPrecision(prec, testSharedPrefixOracle))
		}
	})
}

func testSharedPrefixOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(151, 152))
	const hkv, d, bs = 2, 32, 16
	suffix := []int{0, 1, 17, 40}
	lseTol := 1e-4
	if precisionUnderTest == attention.PrecisionBFloat16 {
		lseTol = 2e-2 // the prefix's part may be computed with rounded Q and K
	}
	for _, dt := range kvTypesQ8 {
		for _, np := range []int{0, 1, 50, 300} {
			fx := newSharedFixture(t, rng, dt, hkv, d, bs, np, suffix)
			for _, g := range []int{1, 3} {
				for _, nq := range []int{1, 3} {
					for _, opt := range []string{"causal", "softcap", "sinks"} {
						hq, B := g*hkv, len(suffix)
						opts := attention.Options{Causal: true, Precision: precisionUnderTest}
						var sinks []float64
						switch opt {
						case "softcap":
							opts.SoftCap = 3
						case "sinks":
							sinks = randSinks(rng, hq)
							opts.Sinks = float32s(sinks)
						}
						q := randn(rng, B*hq*nq*d)
						l := attention.BHSD(B, hq, nq, d)
						out, lse := make([]float32, len(q)), make([]float32, B*hq*nq)
						e := mustEngine(t, attention.Config{Threads: 1 + rng.IntN(3)})
						if !tier.Keep(t, fmt.Sprintf("%v prefix %d g %d nq %d %s", dt, np, g, nq, opt), 4) {
							continue // drawn first: a cell has the same inputs in both tiers
						}
						require.NoError(t, e.ForwardSharedPrefixLSE(attention.F32Tensor(out, l), lse, attention.F32Tensor(q, l), fx.kv, opts))
						for b, n := range fx.lens {
							if nq > n-np && opts.Causal {
								continue // draft tokens reaching into the prefix: not a shape the call is for
							}
							p := reference.Params{Batch: 1, HeadsQ: hq, HeadsKV: hkv, SeqQ: nq, SeqKV: n, Dim: d, Causal: true,
								SoftCap: float64(opts.SoftCap), Sinks: sinks}
							what := fmt.Sprintf("%v prefix %d suffix %d g %d nq %d %s", dt, np, n-np, g, nq, opt)
							checkPrecisionError(t, what, p, q[b*hq*nq*d:][:hq*nq*d], fx.seqK[b], fx.seqV[b],
								out[b*hq*nq*d:][:hq*nq*d], lse[b*hq*nq:][:hq*nq], 2e-5, lseTol)
						}
					}
				}
			}
		}
	}
}

// TestSharedPrefixErrors checks that a misuse returns an error that says
// what was wrong and writes nothing: options the stacked product cannot
// have, a prefix of two sequences, V head dims that differ, errors of
// either part, and outputs placed on the prefix's buffers.
func TestSharedPrefixErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(153, 154))
	const hkv, d, bs, hq, nq = 1, 8, 4, 2, 1
	fx := newSharedFixture(t, rng, attention.F32, hkv, d, bs, 9, []int{3, 5})
	B := 2
	q := randn(rng, B*hq*nq*d)
	l := attention.BHSD(B, hq, nq, d)
	e := mustEngine(t, attention.Config{})
	edit := func(f func(kv *attention.SharedPrefixKV)) attention.SharedPrefixKV {
		kv := fx.kv
		kv.Prefix.SeqLens = append([]int32(nil), kv.Prefix.SeqLens...)
		f(&kv)
		return kv
	}
	// out as a view of the pool's memory that holds the prefix's K.
	onPool := attention.F32Tensor(fx.kf, l)
	// A prefix in pools of its own, and an out on them: only the prefix's
	// check can see it. And an lse on the prefix's block table.
	own := append([]float32(nil), fx.kf...)
	ownKV := edit(func(kv *attention.SharedPrefixKV) {
		kv.Prefix.K = attention.F32Tensor(own, kv.Prefix.K.Layout)
		kv.Prefix.V = attention.F32Tensor(append([]float32(nil), fx.vf...), kv.Prefix.V.Layout)
	})
	onOwn := attention.F32Tensor(own, l)
	for _, c := range []struct {
		name string
		out  attention.Tensor
		kv   attention.SharedPrefixKV
		opts attention.Options
		want string
	}{
		{"window", attention.Tensor{}, fx.kv, attention.Options{Window: &attention.Window{Left: 2}}, "Options.Window is set"},
		{"alibi", attention.Tensor{}, fx.kv, attention.Options{Slopes: []float32{1, 2}}, "Options.Slopes is set"},
		{"varlen", attention.Tensor{}, fx.kv, attention.Options{CuSeqQ: []int{0, 1}, CuSeqKV: []int{0, 1}}, "Options.CuSeqKV is set"},
		{"two prefixes", attention.Tensor{}, edit(func(kv *attention.SharedPrefixKV) { kv.Prefix.SeqLens = []int32{9, 9} }), attention.Options{}, "kv.Prefix.SeqLens has 2 lengths"},
		{"dv", attention.Tensor{}, edit(func(kv *attention.SharedPrefixKV) { kv.Prefix.V.Dim = 4 }), attention.Options{}, "kv.Prefix.V has head dim 4 and kv.Suffix.V 8"},
		{"prefix block", attention.Tensor{}, edit(func(kv *attention.SharedPrefixKV) {
			kv.Prefix.BlockTable = append([]int32(nil), kv.Prefix.BlockTable...)
			kv.Prefix.BlockTable[0] = 1000
		}), attention.Options{}, "prefix: kv.BlockTable[0][0] is block 1000"},
		{"suffix length", attention.Tensor{}, edit(func(kv *attention.SharedPrefixKV) { kv.Suffix.SeqLens = []int32{3} }), attention.Options{}, "suffixes: kv.SeqLens has 1 lengths"},
		{"out on the pool", onPool, fx.kv, attention.Options{}, "overlaps kv.K"},
		{"out on the prefix's own pool", onOwn, ownKV, attention.Options{}, "prefix: out overlaps kv.K"},
	} {
		outBuf := impltest.Filled(len(q), float32(math.NaN()))
		out := c.out
		if out.DType() == 0 {
			out = attention.F32Tensor(outBuf, l)
		}
		before, beforeOwn := append([]float32(nil), fx.kf...), append([]float32(nil), own...)
		err := e.ForwardSharedPrefix(out, attention.F32Tensor(q, l), c.kv, c.opts)
		require.ErrorContains(t, err, c.want, c.name)
		require.ErrorContains(t, err, "attention: ForwardSharedPrefix: ", c.name)
		for i, x := range outBuf {
			require.True(t, math.IsNaN(float64(x)), "%s: out[%d] written on error", c.name, i)
		}
		requireSameBits(t, fx.kf, before, "%s: the pool", c.name)
		requireSameBits(t, own, beforeOwn, "%s: the prefix's own pool", c.name)
	}
}

// TestSharedPrefixNoAllocations checks that a warm call allocates nothing.
func TestSharedPrefixNoAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(155, 156))
	const hkv, d, bs, hq, nq = 2, 32, 16, 8, 1
	fx := newSharedFixture(t, rng, attention.F16, hkv, d, bs, 200, []int{5, 30, 0})
	B := 3
	q := randn(rng, B*hq*nq*d)
	l := attention.BHSD(B, hq, nq, d)
	out, lse := make([]float32, len(q)), make([]float32, B*hq*nq)
	e := mustEngine(t, attention.Config{Threads: 1})
	call := func() {
		if err := e.ForwardSharedPrefixLSE(attention.F32Tensor(out, l), lse, attention.F32Tensor(q, l), fx.kv, attention.Options{Causal: true}); err != nil {
			panic(err)
		}
	}
	for range 20 {
		call()
	}
	assert.Zero(t, testing.AllocsPerRun(20, call))
}

// TestSharedPrefixThreadsAndPacked checks that ForwardSharedPrefix gives
// bitwise the same output and log-sum-exps for every thread count, and
// the same again with the prefix packed once (SharedPrefixKV.Packed),
// for every K/V type, both precisions, block sizes even and odd (runs of
// V rows that start at odd keys) and a prefix split over several parts;
// and that the packed panels are what a bfloat16 call reads.
func TestSharedPrefixThreadsAndPacked(t *testing.T) {
	rng := rand.New(rand.NewPCG(157, 158))
	const hkv, d, g, nq = 2, 32, 4, 1
	suffix := []int{3, 0, 40, 17, 9}
	B, hq := len(suffix), g*hkv
	q := randn(rng, B*hq*nq*d)
	l := attention.BHSD(B, hq, nq, d)
	for _, dt := range kvTypesQ8 {
		for _, bs := range []int{16, 5} {
			fx := newSharedFixture(t, rng, dt, hkv, d, bs, 1500, suffix)
			for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
				var packed attention.PackedPrefix
				require.NoError(t, packed.Pack(fx.kv.Prefix, prec))
				what := fmt.Sprintf("%v bs %d %v", dt, bs, prec)
				opts := attention.Options{Causal: true, Precision: prec}
				var want, wantLSE []float32
				for _, threads := range []int{1, 2, 3, 7} {
					for _, withPacked := range []bool{false, true} {
						kv := fx.kv
						if withPacked {
							kv.Packed = &packed
						}
						e := mustEngine(t, attention.Config{Threads: threads})
						out, lse := make([]float32, len(q)), make([]float32, B*hq*nq)
						require.NoError(t, e.ForwardSharedPrefixLSE(attention.F32Tensor(out, l), lse, attention.F32Tensor(q, l), kv, opts))
						if want == nil {
							want, wantLSE = out, lse
							continue
						}
						requireSameBits(t, out, want, "%s threads %d packed %v: out", what, threads, withPacked)
						requireSameBits(t, lse, wantLSE, "%s threads %d packed %v: lse", what, threads, withPacked)
					}
				}
			}
		}
	}
	// The panels are what a call in their precision reads: after the
	// pool's prefix values change (which the caller promises they do
	// not), a call with the old panels gives the old result, one in the
	// other precision the new.
	for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
		other := attention.PrecisionBFloat16 - prec
		fx := newSharedFixture(t, rng, attention.F32, hkv, d, 16, 700, suffix)
		var packed attention.PackedPrefix
		require.NoError(t, packed.Pack(fx.kv.Prefix, prec))
		e := mustEngine(t, attention.Config{})
		run := func(kv attention.SharedPrefixKV, p attention.Precision) []float32 {
			out := make([]float32, len(q))
			require.NoError(t, e.ForwardSharedPrefix(attention.F32Tensor(out, l), attention.F32Tensor(q, l), kv, attention.Options{Causal: true, Precision: p}))
			return out
		}
		before := run(fx.kv, prec)
		span := fx.kv.Prefix.V.BatchStride
		for _, blk := range fx.kv.Prefix.BlockTable {
			for i := range fx.vf[int(blk)*span:][:span] {
				fx.vf[int(blk)*span+i] *= 2
			}
			for i := range fx.kf[int(blk)*span:][:span] {
				fx.kf[int(blk)*span+i] *= 0.5
			}
		}
		kv := fx.kv
		kv.Packed = &packed
		requireSameBits(t, run(kv, prec), before, "%v: the packed panels", prec)
		assert.NotEqual(t, before, run(fx.kv, prec), "%v: a call without the panels reads the pools", prec)
		requireSameBits(t, run(kv, other), run(fx.kv, other), "%v panels in a call in %v: not read", prec, other)
	}
}

// TestSharedPrefixPackedErrors checks that a PackedPrefix of another
// prefix, or an empty one, is refused with an error that says so, and
// that Pack refuses a prefix of several sequences and an unknown
// precision.
func TestSharedPrefixPackedErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(159, 160))
	const hkv, d, bs, hq, nq = 2, 32, 16, 8, 1
	fx := newSharedFixture(t, rng, attention.F16, hkv, d, bs, 100, []int{5, 7, 1, 3, 2})
	B := 5
	q := randn(rng, B*hq*nq*d)
	l := attention.BHSD(B, hq, nq, d)
	var packed, empty attention.PackedPrefix
	require.NoError(t, packed.Pack(fx.kv.Prefix, attention.PrecisionBFloat16))
	shorter := fx.kv.Prefix
	shorter.SeqLens = []int32{99}
	table := fx.kv.Prefix
	table.BlockTable = append([]int32(nil), table.BlockTable...)
	table.BlockTable[0], table.BlockTable[1] = table.BlockTable[1], table.BlockTable[0]
	other := fx.kv.Prefix
	other.K = typedTensor(t, attention.F16, fx.kf, other.K.Layout)
	e := mustEngine(t, attention.Config{})
	opts := attention.Options{Precision: attention.PrecisionBFloat16}
	for _, c := range []struct {
		name   string
		prefix attention.PagedKV
		packed *attention.PackedPrefix
		want   string
	}{
		{"empty", fx.kv.Prefix, &empty, "kv.Packed: holds no prefix"},
		{"length", shorter, &packed, "holds a prefix of 100 positions and kv.Prefix has 99"},
		{"table", table, &packed, "another block table"},
		{"pools", other, &packed, "other pools"},
	} {
		kv := fx.kv
		kv.Prefix, kv.Packed = c.prefix, c.packed
		out := impltest.Filled(len(q), float32(math.NaN()))
		err := e.ForwardSharedPrefix(attention.F32Tensor(out, l), attention.F32Tensor(q, l), kv, opts)
		require.ErrorContains(t, err, c.want, c.name)
		for i, x := range out {
			require.True(t, math.IsNaN(float64(x)), "%s: out[%d] written on error", c.name, i)
		}
	}
	two := fx.kv.Prefix
	two.SeqLens = []int32{100, 100}
	require.ErrorContains(t, new(attention.PackedPrefix).Pack(two, attention.PrecisionFloat32), "PackedPrefix.Pack: prefix.SeqLens has 2 lengths")
	require.ErrorContains(t, new(attention.PackedPrefix).Pack(fx.kv.Prefix, 7), "PackedPrefix.Pack: precision is Precision(7); want PrecisionFloat32 or PrecisionBFloat16")
}

// TestSharedPrefixPackedScales checks that panels packed from Q8 or fp8
// keys under one set of scales are refused for a prefix whose keys have
// other scales (another slice, or for fp8 the same slice holding another
// value), with stacked rows enough (5 sequences × 8 query heads) for the
// panels to be read; and that the prefix packed again under the new
// scales gives the bits of the call without panels.
func TestSharedPrefixPackedScales(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(165, 166))
		const hkv, d, bs, hq, B = 1, 32, 16, 8, 5
		q := randn(rng, B*hq*d)
		l := attention.BHSD(B, hq, 1, d)
		e := mustEngine(t, attention.Config{})
		for _, dt := range []attention.DType{attention.Q8, attention.FP8E4M3, attention.FP8E5M2} {
			fx := newSharedFixture(t, rng, dt, hkv, d, bs, 100, []int{5, 7, 1, 3, 2})
			pl := fx.kv.Prefix.K.Layout
			var keys func(scales []float32) attention.Tensor // the prefix's keys under scales
			scales := []float32{1}
			switch dt {
			case attention.Q8:
				data := make([]int8, len(fx.kf))
				scales = make([]float32, len(fx.kf)/attention.Q8Block)
				require.NoError(t, attention.QuantizeQ8(data, scales, fx.kf))
				keys = func(s []float32) attention.Tensor { return attention.Q8Tensor(data, s, pl) }
			case attention.FP8E4M3:
				data := fp16.Float8E4M3s(fx.kf)
				keys = func(s []float32) attention.Tensor { return attention.FP8E4M3Tensor(data, s, pl) }
			case attention.FP8E5M2:
				data := fp16.Float8E5M2s(fx.kf)
				keys = func(s []float32) attention.Tensor { return attention.FP8E5M2Tensor(data, s, pl) }
			}
			quarter := make([]float32, len(scales))
			for i, x := range scales {
				quarter[i] = x / 4
			}
			for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
				run := func(kv attention.SharedPrefixKV) ([]float32, error) {
					out := make([]float32, len(q))
					err := e.ForwardSharedPrefix(attention.F32Tensor(out, l), attention.F32Tensor(q, l), kv, attention.Options{Causal: true, Precision: prec})
					return out, err
				}
				kv := fx.kv
				kv.Prefix.K = keys(scales)
				kv.Packed = new(attention.PackedPrefix)
				require.NoError(t, kv.Packed.Pack(kv.Prefix, prec))
				stale := kv
				stale.Prefix.K = keys(quarter)
				_, err := run(stale)
				require.ErrorContains(t, err, "kv.Packed: was packed with other scales than kv.Prefix's", "%v %v: other scales", dt, prec)
				if len(scales) == 1 {
					scales[0] = 0.25
					_, err = run(kv)
					scales[0] = 1
					require.ErrorContains(t, err, "kv.Packed: was packed with other scales than kv.Prefix's", "%v %v: the scale changed in place", dt, prec)
				}
				require.NoError(t, stale.Packed.Pack(stale.Prefix, prec))
				got, err := run(stale)
				require.NoError(t, err)
				stale.Packed = nil
				want, err := run(stale)
				require.NoError(t, err)
				requireSameBits(t, got, want, "%v %v: packed again", dt, prec)
			}
		}
	})
}

// TestSharedPrefixPackedNoAllocations checks that a warm call with the
// prefix packed allocates nothing, in both precisions, with stacked rows
// enough (5 sequences × 4 query heads a K/V head) to read the panels.
func TestSharedPrefixPackedNoAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(161, 162))
	const hkv, d, bs, hq, nq = 2, 32, 16, 8, 1
	fx := newSharedFixture(t, rng, attention.F16, hkv, d, bs, 200, []int{5, 30, 0, 7, 9})
	B := 5
	q := randn(rng, B*hq*nq*d)
	l := attention.BHSD(B, hq, nq, d)
	out, lse := make([]float32, len(q)), make([]float32, B*hq*nq)
	for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
		kv := fx.kv
		kv.Packed = new(attention.PackedPrefix)
		require.NoError(t, kv.Packed.Pack(kv.Prefix, prec))
		e := mustEngine(t, attention.Config{Threads: 2})
		call := func() {
			if err := e.ForwardSharedPrefixLSE(attention.F32Tensor(out, l), lse, attention.F32Tensor(q, l), kv, attention.Options{Causal: true, Precision: prec}); err != nil {
				panic(err)
			}
		}
		for range 20 {
			call()
		}
		assert.Zero(t, testing.AllocsPerRun(20, call), "%v", prec)
	}
}

// TestSharedPrefixPackedShortPrefixes checks packed prefixes of 0, 1 and
// 17 positions (no block, part of one, a block and a part) against the
// same calls without the panels, bit for bit, in both precisions.
func TestSharedPrefixPackedShortPrefixes(t *testing.T) {
	rng := rand.New(rand.NewPCG(163, 164))
	const hkv, d, hq = 2, 32, 8
	suffix := []int{3, 0, 4, 5, 6}
	B := len(suffix)
	q := randn(rng, B*hq*d)
	l := attention.BHSD(B, hq, 1, d)
	e := mustEngine(t, attention.Config{})
	for _, np := range []int{0, 1, 17} {
		fx := newSharedFixture(t, rng, attention.F16, hkv, d, 16, np, suffix)
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			opts := attention.Options{Causal: true, Precision: prec}
			kv := fx.kv
			kv.Packed = new(attention.PackedPrefix)
			require.NoError(t, kv.Packed.Pack(kv.Prefix, prec))
			want, got := make([]float32, len(q)), make([]float32, len(q))
			require.NoError(t, e.ForwardSharedPrefix(attention.F32Tensor(want, l), attention.F32Tensor(q, l), fx.kv, opts))
			require.NoError(t, e.ForwardSharedPrefix(attention.F32Tensor(got, l), attention.F32Tensor(q, l), kv, opts))
			requireSameBits(t, got, want, "prefix %d %v", np, prec)
		}
	}
}
