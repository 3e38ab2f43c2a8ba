package attention_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
)

// TestNoAllocationsEveryEntryPoint checks the promise that a call
// allocates nothing after the first of its shape, for every entry point
// (with and without Options.CuSeqQ where it is accepted, with and without
// a packed prefix), every K/V element type and both precisions, on every
// implementation; and that PackedPrefix.Pack and Engine.PackPrefix (6
// strips on 2 threads) allocate nothing when they reuse their memory.
// ForwardSharedPrefix is called uniform and with CuSeqQ, with one prefix
// and with two (Groups, one of them packed). The shapes are small: two sequences of 40 and 70
// positions, 2 query heads on 1 K/V head of dim 32, one query each (the
// row kernels), or 1 and 9 (the packed tiles) with CuSeqQ.
func TestNoAllocationsEveryEntryPoint(t *testing.T) {
	if raceEnabled {
		t.Skip("SKIP: the race detector allocates")
	}
	forEachImpl(t, func(t *testing.T) {
		for _, dt := range kvTypesQ8 {
			t.Run(dt.String(), func(t *testing.T) { testNoAllocationsEveryEntryPoint(t, dt) })
		}
	})
}

func testNoAllocationsEveryEntryPoint(t *testing.T, dt attention.DType) {
	rng := rand.New(rand.NewPCG(301, 302))
	const hkv, hq, d, bs = 1, 2, 32, 16
	lens := []int{40, 70}
	B := len(lens)
	caches, ks, vs := fillCaches(t, rng, dt, hkv, d, lens)
	pc, err := attention.NewPagedCache(dt, hkv, d, bs, 16)
	require.NoError(t, err)
	seqs := make([]attention.SeqID, B)
	for s, n := range lens {
		seqs[s] = pc.NewSequence()
		require.NoError(t, pc.Append(seqs[s], chunkTensor(ks[s], hkv, n, d), chunkTensor(vs[s], hkv, n, d)))
	}
	pool := newVLLMPool(t, rng, dt, false, hkv, d, bs, lens)
	shared := newSharedFixture(t, rng, dt, hkv, d, bs, 40, []int{3, 0})
	// Two prefixes (the first 40 and 17 positions of the same blocks), a
	// sequence each; and a prefix of 6 strips for Engine.PackPrefix.
	grouped := shared.kv
	grouped.Prefix.BlockTable = append(slices.Clone(shared.kv.Prefix.BlockTable), shared.kv.Prefix.BlockTable...)
	grouped.Prefix.SeqLens, grouped.Groups = []int32{40, 17}, []int{0, 1, 2}
	long := newSharedFixture(t, rng, dt, 2, d, bs, 600, []int{1})

	// One query a sequence, batched; and 1 and 9 packed with CuSeqQ.
	bl := attention.BHSD(B, hq, 1, d)
	q, out, lse := randn(rng, bl.Span()), make([]float32, bl.Span()), make([]float32, B*hq)
	cu := offsets([]int{1, 9})
	ml := attention.BSHD(1, cu[B], hq, d)
	mq, mout, mlse := randn(rng, ml.Span()), make([]float32, ml.Span()), make([]float32, hq*cu[B])
	fl := attention.BHSD(1, hq, 1, d)

	for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
		e := mustEngine(t, attention.Config{Threads: 2})
		opts := attention.Options{Causal: true, Precision: prec}
		mopts := opts
		mopts.CuSeqQ = cu
		o, qt := attention.F32Tensor(out, bl), attention.F32Tensor(q, bl)
		mo, mqt := attention.F32Tensor(mout, ml), attention.F32Tensor(mq, ml)
		fo, fq := attention.F32Tensor(out[:fl.Span()], fl), attention.F32Tensor(q[:fl.Span()], fl)
		packed := shared.kv
		packed.Packed = new(attention.PackedPrefix)
		require.NoError(t, packed.Packed.Pack(packed.Prefix, prec))
		groupedPacked := grouped
		groupedPacked.PackedGroups = []*attention.PackedPrefix{new(attention.PackedPrefix), nil}
		require.NoError(t, e.PackPrefix(groupedPacked.PackedGroups[0], grouped.Prefix.Sequence(0), prec))
		longPacked := new(attention.PackedPrefix)
		calls := []struct {
			name string
			call func() error
		}{
			{"Forward", func() error { return e.Forward(fo, fq, caches[0].K(), caches[0].V(), opts) }},
			{"ForwardLSE", func() error { return e.ForwardLSE(fo, lse, fq, caches[0].K(), caches[0].V(), opts) }},
			{"ForwardKVCaches", func() error { return e.ForwardKVCaches(o, qt, caches, opts) }},
			{"ForwardKVCachesLSE", func() error { return e.ForwardKVCachesLSE(o, lse, qt, caches, opts) }},
			{"ForwardKVCaches+CuSeqQ", func() error { return e.ForwardKVCaches(mo, mqt, caches, mopts) }},
			{"ForwardKVCachesLSE+CuSeqQ", func() error { return e.ForwardKVCachesLSE(mo, mlse, mqt, caches, mopts) }},
			{"ForwardPaged", func() error { return e.ForwardPaged(o, qt, pc, seqs, opts) }},
			{"ForwardPagedLSE", func() error { return e.ForwardPagedLSE(o, lse, qt, pc, seqs, opts) }},
			{"ForwardPaged+CuSeqQ", func() error { return e.ForwardPaged(mo, mqt, pc, seqs, mopts) }},
			{"ForwardPagedLSE+CuSeqQ", func() error { return e.ForwardPagedLSE(mo, mlse, mqt, pc, seqs, mopts) }},
			{"ForwardPagedKV", func() error { return e.ForwardPagedKV(o, qt, pool.kv, opts) }},
			{"ForwardPagedKVLSE", func() error { return e.ForwardPagedKVLSE(o, lse, qt, pool.kv, opts) }},
			{"ForwardPagedKV+CuSeqQ", func() error { return e.ForwardPagedKV(mo, mqt, pool.kv, mopts) }},
			{"ForwardPagedKVLSE+CuSeqQ", func() error { return e.ForwardPagedKVLSE(mo, mlse, mqt, pool.kv, mopts) }},
			{"ForwardSharedPrefix", func() error { return e.ForwardSharedPrefix(o, qt, shared.kv, opts) }},
			{"ForwardSharedPrefixLSE", func() error { return e.ForwardSharedPrefixLSE(o, lse, qt, shared.kv, opts) }},
			{"ForwardSharedPrefix+Packed", func() error { return e.ForwardSharedPrefix(o, qt, packed, opts) }},
			{"ForwardSharedPrefixLSE+Packed", func() error { return e.ForwardSharedPrefixLSE(o, lse, qt, packed, opts) }},
			{"ForwardSharedPrefix+CuSeqQ", func() error { return e.ForwardSharedPrefix(mo, mqt, shared.kv, mopts) }},
			{"ForwardSharedPrefixLSE+CuSeqQ", func() error { return e.ForwardSharedPrefixLSE(mo, mlse, mqt, shared.kv, mopts) }},
			{"ForwardSharedPrefix+Groups", func() error { return e.ForwardSharedPrefix(o, qt, grouped, opts) }},
			{"ForwardSharedPrefixLSE+CuSeqQ+Groups", func() error { return e.ForwardSharedPrefixLSE(mo, mlse, mqt, grouped, mopts) }},
			{"ForwardSharedPrefixLSE+CuSeqQ+PackedGroups", func() error { return e.ForwardSharedPrefixLSE(mo, mlse, mqt, groupedPacked, mopts) }},
			{"PackedPrefix.Pack", func() error { return packed.Packed.Pack(packed.Prefix, prec) }},
			{"Engine.PackPrefix", func() error { return e.PackPrefix(longPacked, long.kv.Prefix, prec) }},
		}
		for _, c := range calls {
			require.NoError(t, c.call(), "%v %s", prec, c.name)
			n := testing.AllocsPerRun(5, func() {
				if err := c.call(); err != nil {
					t.Fatal(err)
				}
			})
			if n != 0 {
				t.Errorf("%v %s allocates %v times a call after the first; want 0", prec, c.name, n)
			}
		}
	}
}

// TestOverlapNamesScales checks that an output on the scales of a Q8 pool
// is refused with the scales named, now that the name is put together
// only for the error.
func TestOverlapNamesScales(t *testing.T) {
	rng := rand.New(rand.NewPCG(303, 304))
	const hkv, hq, d, bs = 1, 2, 32, 16
	pool := newVLLMPool(t, rng, attention.Q8, false, hkv, d, bs, []int{40, 70})
	l := attention.BHSD(2, hq, 1, d)
	q, out := randn(rng, l.Span()), make([]float32, l.Span())
	e := mustEngine(t, attention.Config{})
	kv := pool.kv
	data, scales := make([]int8, len(pool.k)), make([]float32, len(pool.k)/attention.Q8Block)
	require.NoError(t, attention.QuantizeQ8(data, scales, pool.k))
	kv.K = attention.Q8Tensor(data, scales, pool.layout)
	err := e.ForwardPagedKVLSE(attention.F32Tensor(out, l), scales[:4], attention.F32Tensor(q, l), kv, attention.Options{})
	require.ErrorContains(t, err, "lse overlaps kv.K scales in memory")
}
