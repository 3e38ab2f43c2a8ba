package attention_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/fp16"
)

// storageTypes are the K/V storage types with the scales of their pools
// and caches: fp8 with one scale per head (E4M3) and one per pool (E5M2),
// neither of them 1, so that a scale that is not applied shows.
var storageTypes = []struct {
	dt             attention.DType
	kScale, vScale []float32
}{
	{attention.F32, nil, nil},
	{attention.F16, nil, nil},
	{attention.BF16, nil, nil},
	{attention.Q8, nil, nil},
	{attention.FP8E4M3, []float32{0.02, 0.05}, []float32{0.03, 0.01}},
	{attention.FP8E5M2, []float32{0.5}, []float32{0.25}},
}

// zeroStorage returns a zeroed view of layout l of type dt with the fp8
// scales sc.
func zeroStorage(dt attention.DType, l attention.Layout, sc []float32) attention.Tensor {
	n := l.Span()
	switch dt {
	case attention.F16:
		return attention.F16Tensor(make([]fp16.Float16, n), l)
	case attention.BF16:
		return attention.BF16Tensor(make([]fp16.BFloat16, n), l)
	case attention.Q8:
		return attention.Q8Tensor(make([]int8, n), make([]float32, (n+attention.Q8Block-1)/attention.Q8Block), l)
	case attention.FP8E4M3:
		return attention.FP8E4M3Tensor(make([]fp16.Float8E4M3, n), sc, l)
	case attention.FP8E5M2:
		return attention.FP8E5M2Tensor(make([]fp16.Float8E5M2, n), sc, l)
	}
	return attention.F32Tensor(make([]float32, n), l)
}

// activation returns x as a view of type dt (F32, F16 or BF16).
func activation(dt attention.DType, x []float32, l attention.Layout) attention.Tensor {
	switch dt {
	case attention.F16:
		return attention.F16Tensor(fp16.Float16s(x), l)
	case attention.BF16:
		return attention.BF16Tensor(fp16.BFloat16s(x), l)
	}
	return attention.F32Tensor(x, l)
}

func newCache(t testing.TB, dt attention.DType, ks, vs []float32, heads, capacity, dim int) *attention.KVCache {
	t.Helper()
	var c *attention.KVCache
	var err error
	if ks != nil {
		c, err = attention.NewKVCacheFP8(dt, heads, capacity, dim, ks, vs)
	} else {
		c, err = attention.NewKVCache(dt, heads, capacity, dim)
	}
	require.NoError(t, err)
	return c
}

func newPaged(t testing.TB, dt attention.DType, ks, vs []float32, heads, dim, bs, blocks int) *attention.PagedCache {
	t.Helper()
	var c *attention.PagedCache
	var err error
	if ks != nil {
		c, err = attention.NewPagedCacheFP8(dt, heads, dim, bs, blocks, ks, vs)
	} else {
		c, err = attention.NewPagedCache(dt, heads, dim, bs, blocks)
	}
	require.NoError(t, err)
	return c
}

// TestPagedKVWriteMatchesAppend runs three serving steps (a prefill, a
// decode, a mixed chunk) into a caller's pools through SlotMapping and
// Write, and the same tokens into a PagedCache through Append, for every
// storage type and input type, in vLLM's layout and per head: every row of
// the pools holds the bits the cache stores (read back through
// PagedCache.Read), and ForwardPagedKV over the pools gives the bits of
// ForwardPaged over the cache.
func TestPagedKVWriteMatchesAppend(t *testing.T) {
	const hkv, hq, d, bs, blocks = 2, 4, 64, 4, 16
	steps := [][]int{{5, 3, 7}, {1, 1, 1}, {2, 0, 3}} // new tokens per sequence
	forEachImpl(t, func(t *testing.T) {
		for _, st := range storageTypes {
			for _, in := range []attention.DType{attention.F32, attention.F16, attention.BF16} {
				for _, perHead := range []bool{false, true} {
					t.Run(fmt.Sprintf("%v/from %v/perHead=%v", st.dt, in, perHead), func(t *testing.T) {
						rng := rand.New(rand.NewPCG(uint64(st.dt), uint64(in)))
						l := attention.BSHD(blocks, bs, hkv, d)
						if perHead {
							l = attention.BHSD(blocks, hkv, bs, d)
						}
						kv := attention.PagedKV{K: zeroStorage(st.dt, l, st.kScale), V: zeroStorage(st.dt, l, st.vScale), MaxBlocks: 5,
							BlockTable: make([]int32, 3*5), SeqLens: make([]int32, 3)}
						for i, b := range rng.Perm(blocks)[:15] {
							kv.BlockTable[i] = int32(b)
						}
						pc := newPaged(t, st.dt, st.kScale, st.vScale, hkv, d, bs, blocks)
						ids := []attention.SeqID{pc.NewSequence(), pc.NewSequence(), pc.NewSequence()}
						for _, counts := range steps {
							cu := []int{0}
							for s, n := range counts {
								cu = append(cu, cu[s]+n)
								kv.SeqLens[s] += int32(n)
							}
							total := cu[3]
							kl := attention.BSHD(1, total, hkv, d)
							kx, vx := randn(rng, kl.Span()), randn(rng, kl.Span())
							k, v := activation(in, kx, kl), activation(in, vx, kl)
							slots := make([]int32, total)
							require.NoError(t, kv.SlotMapping(slots, cu))
							require.NoError(t, kv.Write(k, v, slots))
							for s, id := range ids {
								sub := func(x attention.Tensor, xs []float32) attention.Tensor {
									sl := attention.Layout{Batch: 1, Heads: hkv, Seq: counts[s], Dim: d, BatchStride: total * hkv * d, HeadStride: d, SeqStride: hkv * d}
									return activation(in, xs[cu[s]*hkv*d:], sl)
								}
								require.NoError(t, pc.Append(id, sub(k, kx), sub(v, vx)))
							}
						}
						for s, id := range ids {
							n := int(kv.SeqLens[s])
							ck := attention.F32Tensor(make([]float32, hkv*n*d), attention.BHSD(1, hkv, n, d))
							cv := attention.F32Tensor(make([]float32, hkv*n*d), attention.BHSD(1, hkv, n, d))
							require.NoError(t, pc.Read(id, ck, cv, 0))
							for p := range n {
								blk := int(kv.BlockTable[s*kv.MaxBlocks+p/bs])
								for h := range hkv {
									requireSameBits(t, attention.PoolRow(kv.K, blk, h, p%bs), ck.Float32s()[ck.Offset(0, h, p):][:d], "sequence %d position %d head %d keys", s, p, h)
									requireSameBits(t, attention.PoolRow(kv.V, blk, h, p%bs), cv.Float32s()[cv.Offset(0, h, p):][:d], "sequence %d position %d head %d values", s, p, h)
								}
							}
						}
						e := mustEngine(t, attention.Config{Threads: 2})
						q := attention.F32Tensor(randn(rng, 3*hq*d), attention.BHSD(3, hq, 1, d))
						got := attention.F32Tensor(make([]float32, 3*hq*d), q.Layout)
						want := attention.F32Tensor(make([]float32, 3*hq*d), q.Layout)
						require.NoError(t, e.ForwardPagedKV(got, q, kv, attention.Options{Causal: true}))
						require.NoError(t, e.ForwardPaged(want, q, pc, ids, attention.Options{Causal: true}))
						requireSameBits(t, got.Float32s(), want.Float32s(), "ForwardPagedKV over the written pools against ForwardPaged")
					})
				}
			}
		}
	})
}

// TestPagedKVWriteLatent writes an MLA latent pool whose V is a view of
// K's first columns: v is the zero Tensor, and the values read are the
// keys' first columns.
func TestPagedKVWriteLatent(t *testing.T) {
	const d, dv, bs, blocks = 48, 32, 4, 3
	l := attention.BSHD(blocks, bs, 1, d)
	pool := make([]float32, l.Span())
	lv := l
	lv.Dim = dv
	kv := attention.PagedKV{K: attention.F32Tensor(pool, l), V: attention.F32Tensor(pool, lv)}
	k := attention.F32Tensor(randn(rand.New(rand.NewPCG(1, 2)), 2*d), attention.BSHD(1, 2, 1, d))
	require.NoError(t, kv.Write(k, attention.Tensor{}, []int32{9, 2}))
	require.Equal(t, k.Float32s()[:d], pool[9*d:][:d])
	require.Equal(t, k.Float32s()[d:], pool[2*d:][:d])
	require.ErrorContains(t, kv.Write(k, k, []int32{9, 2}), "want v the zero Tensor")
	sep := attention.PagedKV{K: attention.F32Tensor(make([]float32, l.Span()), l), V: attention.F32Tensor(make([]float32, l.Span()), l)}
	require.ErrorContains(t, sep.Write(k, attention.Tensor{}, []int32{9, 2}), "v is the zero Tensor")
}

// TestCacheReadRoundTrip appends rows to a KVCache and a PagedCache of
// every storage type and reads them back: in F32, the values as stored
// (the rounding of the type, exactly); in the cache's own type, elements
// that Append into a fresh cache of the same type stores bit for bit; in
// F16 and BF16, the F32 values rounded.
func TestCacheReadRoundTrip(t *testing.T) {
	const hkv, d, n, bs = 2, 64, 37, 8
	forEachImpl(t, func(t *testing.T) {
		for _, st := range storageTypes {
			t.Run(st.dt.String(), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(3, uint64(st.dt)))
				l := attention.BSHD(1, n, hkv, d)
				kx, vx := randn(rng, l.Span()), randn(rng, l.Span())
				kc := newCache(t, st.dt, st.kScale, st.vScale, hkv, n, d)
				require.NoError(t, kc.Append(attention.F32Tensor(kx, l), attention.F32Tensor(vx, l)))
				pc := newPaged(t, st.dt, st.kScale, st.vScale, hkv, d, bs, 8)
				id := pc.NewSequence()
				require.NoError(t, pc.Append(id, attention.F32Tensor(kx[:5*hkv*d], attention.BSHD(1, 5, hkv, d)), attention.F32Tensor(vx[:5*hkv*d], attention.BSHD(1, 5, hkv, d))))
				require.NoError(t, pc.Append(id, attention.F32Tensor(kx[5*hkv*d:], attention.BSHD(1, n-5, hkv, d)), attention.F32Tensor(vx[5*hkv*d:], attention.BSHD(1, n-5, hkv, d))))
				reads := map[string]func(k, v attention.Tensor, from int) error{
					"KVCache":    kc.Read,
					"PagedCache": func(k, v attention.Tensor, from int) error { return pc.Read(id, k, v, from) },
				}
				for name, read := range reads {
					// F32: the stored values, in a layout of its own.
					const from, m = 3, 30
					rl := attention.BHSD(1, hkv, m, d)
					gk, gv := attention.F32Tensor(make([]float32, rl.Span()), rl), attention.F32Tensor(make([]float32, rl.Span()), rl)
					require.NoError(t, read(gk, gv, from))
					for h := range hkv {
						for s := range m {
							for _, x := range []struct {
								name  string
								src   []float32
								got   attention.Tensor
								scale []float32
							}{{"k", kx, gk, st.kScale}, {"v", vx, gv, st.vScale}} {
								row := x.src[l.Offset(0, h, from+s):][:d]
								requireSameBits(t, x.got.Float32s()[rl.Offset(0, h, s):][:d], stored(t, st.dt, x.scale, h, row), "%s %s head %d position %d", name, x.name, h, from+s)
							}
						}
					}
					// The cache's own type, appended to a fresh cache.
					ol := attention.BSHD(1, n, hkv, d)
					ok, ov := zeroStorage(st.dt, ol, st.kScale), zeroStorage(st.dt, ol, st.vScale)
					require.NoError(t, read(ok, ov, 0))
					fresh := newCache(t, st.dt, st.kScale, st.vScale, hkv, n, d)
					require.NoError(t, fresh.Append(ok, ov))
					require.Equal(t, attention.CacheMemory(kc), attention.CacheMemory(fresh), "%s: Read in %v, Append into a fresh cache", name, st.dt)
					// F16 and BF16: the float32 values rounded.
					all := attention.BHSD(1, hkv, n, d)
					fk, fv := attention.F32Tensor(make([]float32, all.Span()), all), attention.F32Tensor(make([]float32, all.Span()), all)
					require.NoError(t, read(fk, fv, 0))
					hb, bb := make([]fp16.Float16, all.Span()), make([]fp16.BFloat16, all.Span())
					require.NoError(t, read(attention.F16Tensor(hb, all), attention.BF16Tensor(bb, all), 0))
					for i := range hb {
						require.Equal(t, fp16.FromFloat32(fk.Float32s()[i]), hb[i], "%s: keys read in f16, element %d", name, i)
						require.Equal(t, fp16.BFloat16FromFloat32(fv.Float32s()[i]), bb[i], "%s: values read in bf16, element %d", name, i)
					}
				}
			})
		}
	})
}

// stored returns row as a cache of type dt (with the fp8 scales sc) stores
// and reads it for head h.
func stored(t *testing.T, dt attention.DType, sc []float32, h int, row []float32) []float32 {
	out := make([]float32, len(row))
	switch dt {
	case attention.Q8:
		q, s := make([]int8, len(row)), make([]float32, len(row)/attention.Q8Block)
		require.NoError(t, attention.QuantizeQ8(q, s, row))
		require.NoError(t, attention.DequantizeQ8(out, q, s))
		return out
	case attention.F32:
		copy(out, row)
		return out
	}
	s := float32(1)
	if sc != nil {
		s = sc[min(h, len(sc)-1)]
	}
	for i, x := range row {
		switch dt {
		case attention.F16:
			out[i] = fp16.FromFloat32(x).Float32()
		case attention.BF16:
			out[i] = fp16.BFloat16FromFloat32(x).Float32()
		case attention.FP8E4M3:
			out[i] = fp16.Float8E4M3FromFloat32(x/s).Float32() * s
		case attention.FP8E5M2:
			out[i] = fp16.Float8E5M2FromFloat32(x/s).Float32() * s
		}
	}
	return out
}

// TestPromisesWriteRead is promiseTable's first two rows, and the
// promise of no allocation once warm, for PagedKV.Write,
// PagedKV.SlotMapping, KVCache.Read and PagedCache.Read (none computes in
// parallel: the thread row does not apply), on every implementation and
// storage type: each hostile call returns an error (no panic) naming what
// was wrong and changes no byte of any buffer; valid calls change no
// input.
func TestPromisesWriteRead(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, st := range storageTypes {
			t.Run(st.dt.String(), func(t *testing.T) { testPromisesWriteRead(t, st.dt, st.kScale, st.vScale) })
		}
	})
}

func testPromisesWriteRead(t *testing.T, dt attention.DType, ks, vs []float32) {
	const hkv, d, bs, blocks, n = 2, 32, 4, 6, 3
	rng := rand.New(rand.NewPCG(11, uint64(dt)))
	pl := attention.BSHD(blocks, bs, hkv, d)
	// An F32 pool of the same shape whose memory holds the slots and the
	// inputs in the hostile cases that place them on a pool.
	kv := attention.PagedKV{K: zeroStorage(dt, pl, ks), V: zeroStorage(dt, pl, vs),
		BlockTable: []int32{4, 1, 0, 5, 2, 3}, MaxBlocks: 3, SeqLens: []int32{6, 1}}
	il := attention.BSHD(1, n, hkv, d)
	k := attention.F32Tensor(randn(rng, il.Span()), il)
	v := attention.F32Tensor(randn(rng, il.Span()), il)
	slots := []int32{5, -1, 22}
	dst := make([]int32, n)
	cu := []int{0, 2, 3}
	kc := newCache(t, dt, ks, vs, hkv, 8, d)
	require.NoError(t, kc.Append(k, v))
	pc := newPaged(t, dt, ks, vs, hkv, d, bs, 4)
	id := pc.NewSequence()
	require.NoError(t, pc.Append(id, k, v))
	rl := attention.BHSD(1, hkv, 2, d)
	rk, rv := attention.F32Tensor(make([]float32, rl.Span()), rl), attention.F32Tensor(make([]float32, rl.Span()), rl)

	// Memory on a pool: the first floats of an F32 pool, or the bytes of
	// another type's elements.
	poolK := attention.TensorMemory(kv.K)[0]
	onPool := func(nfl int) []float32 { return unsafe.Slice((*float32)(unsafe.Pointer(&poolK[0])), nfl)[:nfl:nfl] }
	cacheK := attention.CacheMemory(kc)[0]
	onCache := func(nfl int) []float32 { return unsafe.Slice((*float32)(unsafe.Pointer(&cacheK[0])), nfl) }
	pagedK := attention.PagedCacheMemory(pc)[0]
	onPaged := func(nfl int) []float32 { return unsafe.Slice((*float32)(unsafe.Pointer(&pagedK[0])), nfl) }
	many := make([]int32, 40) // more than smallSlots: found by sorting
	for i := range many {
		many[i] = int32(i)
	}
	many[37] = 3
	kMany := attention.F32Tensor(make([]float32, 40*hkv*d), attention.BSHD(1, 40, hkv, d))
	bigPool := attention.BSHD(12, bs, hkv, d)
	bigKV := attention.PagedKV{K: zeroStorage(dt, bigPool, ks), V: zeroStorage(dt, bigPool, vs)}
	overlapRows := pl
	overlapRows.SeqStride = 0 // every position of a block on one row
	var q8 attention.Tensor
	if dt != attention.Q8 {
		q8 = attention.Q8Tensor(make([]int8, il.Span()), make([]float32, il.Span()/attention.Q8Block), il)
	} else {
		q8 = attention.FP8E4M3Tensor(make([]fp16.Float8E4M3, il.Span()), []float32{1}, il)
	}
	F := attention.F32Tensor
	type call struct {
		name, want string
		run        func() error
	}
	calls := []call{
		{"Write slot -2", "slots[1] is -2; want −1 (skip) or 0 to 23", func() error { return kv.Write(k, v, []int32{5, -2, 22}) }},
		{"Write slot past the pool", "slots[2] is 24; want −1 (skip) or 0 to 23", func() error { return kv.Write(k, v, []int32{5, 1, 24}) }},
		{"Write duplicate slot", "slots[0] and slots[2] are both slot 5", func() error { return kv.Write(k, v, []int32{5, 1, 5}) }},
		{"Write duplicate among many", "slots[3] and slots[37] are both slot 3", func() error { return bigKV.Write(kMany, kMany, many) }},
		{"Write slots short", "k has 3 tokens and slots 2 entries", func() error { return kv.Write(k, v, slots[:2]) }},
		{"Write k negative seq", "want >= 0", func() error { return kv.Write(withSeq(k, -1), v, slots) }},
		{"Write k of other heads", "k has shape [1 1 3 32]; want [1 2 n 32]", func() error { return kv.Write(withHeads(k, 1), v, slots) }},
		{"Write v of other dim", "v has shape [1 2 3 16]; want [1 2 n 32]", func() error { return kv.Write(k, withDim(v, 16), slots) }},
		{"Write k of other type", "k has element type " + q8.DType().String(), func() error { return kv.Write(q8, v, slots) }},
		{"Write zero v", "v is the zero Tensor", func() error { return kv.Write(k, attention.Tensor{}, slots) }},
		{"Write pools of other types", "want the same type, blocks", func() error {
			other := kv
			other.V = zeroStorage(attention.F32, pl, nil)
			if dt == attention.F32 {
				other.V = zeroStorage(attention.F16, pl, nil)
			}
			return other.Write(k, v, slots)
		}},
		{"Write pool rows overlapping", "which place two of its elements on one", func() error {
			other := kv
			other.K = zeroStorage(dt, overlapRows, ks)
			other.V = zeroStorage(dt, overlapRows, vs)
			return other.Write(k, v, slots)
		}},
		{"Write k on the pool", "k overlaps the pool kv.K", func() error { return kv.Write(F(onPool(il.Span()), il), v, slots) }},
		{"Write slots on the pool", "slots overlaps the pool kv.K", func() error {
			s := unsafe.Slice((*int32)(unsafe.Pointer(&poolK[0])), n)
			return kv.Write(k, v, s)
		}},
		{"SlotMapping MaxBlocks 0", "kv.SeqLens[0] is 6, more than kv.MaxBlocks·BlockSize = 0·4 = 0 positions; want kv.MaxBlocks >= 2", func() error {
			other := kv
			other.MaxBlocks = 0
			return other.SlotMapping(dst, cu)
		}},
		{"SlotMapping table short", "kv.BlockTable has 5 entries; want >= sequences·MaxBlocks = 2·3", func() error {
			other := kv
			other.BlockTable = other.BlockTable[:5]
			return other.SlotMapping(dst, cu)
		}},
		{"SlotMapping block out of range", "kv.BlockTable[1][0] is block 6; want 0 to 5", func() error {
			other := kv
			other.BlockTable = []int32{4, 1, 0, 6, 2, 3}
			return other.SlotMapping(dst, cu)
		}},
		{"SlotMapping negative length", "kv.SeqLens[1] is -1; want >= 0", func() error {
			other := kv
			other.SeqLens = []int32{6, -1}
			return other.SlotMapping(dst, cu)
		}},
		{"SlotMapping cuSeqQ offsets", "cuSeqQ has 2 offsets and kv.SeqLens 2 lengths", func() error { return kv.SlotMapping(dst, cu[:2]) }},
		{"SlotMapping more tokens than positions", "cuSeqQ gives sequence 1 2 new tokens and kv.SeqLens[1] is 1", func() error { return kv.SlotMapping(dst, []int{0, 1, 3}) }},
		{"SlotMapping decreasing", "cuSeqQ[2] is 1, less than cuSeqQ[1] = 2", func() error { return kv.SlotMapping(dst, []int{0, 2, 1}) }},
		{"SlotMapping dst short", "dst has 2 entries; want 3", func() error { return kv.SlotMapping(dst[:2], cu) }},
		{"SlotMapping dst on SeqLens", "dst overlaps kv.SeqLens", func() error {
			other := kv
			arena := []int32{0, 0, 6, 1}
			other.SeqLens = arena[2:]
			return other.SlotMapping(arena[1:3], nil)
		}},
		{"KVCache.Read past Len", "2 positions from 2 of 3; want from + n <= 3", func() error { return kc.Read(rk, rv, 2) }},
		{"KVCache.Read negative from", "2 positions from -1 of 3", func() error { return kc.Read(rk, rv, -1) }},
		{"KVCache.Read k on v", "k and v overlap", func() error { return kc.Read(rk, rk, 0) }},
		{"KVCache.Read into the cache", "k overlaps the cache's keys", func() error { return kc.Read(F(onCache(rl.Span()), rl), rv, 0) }},
		{"KVCache.Read of other dim", "v has shape [1 2 2 16]; want [1 2 n 32]", func() error { return kc.Read(rk, withDim(rv, 16), 0) }},
		{"KVCache.Read of other type", "has element type " + q8.DType().String(), func() error {
			return kc.Read(q8, q8, 0)
		}},
		{"KVCache.Read rows overlapping", "which place two of its elements on one", func() error {
			l := rl
			l.SeqStride = 1
			return kc.Read(F(rk.Float32s(), l), rv, 0)
		}},
		{"PagedCache.Read unknown sequence", "unknown or freed sequence", func() error { return pc.Read(id+7, rk, rv, 0) }},
		{"PagedCache.Read past Len", "2 positions from 2 of 3", func() error { return pc.Read(id, rk, rv, 2) }},
		{"PagedCache.Read into the pool", "v overlaps the cache's keys", func() error { return pc.Read(id, rk, F(onPaged(rl.Span()), rl), 0) }},
	}
	all := func() [][]byte {
		m := [][]byte{sliceBytes(k.Float32s()), sliceBytes(v.Float32s()), sliceBytes(slots), sliceBytes(dst), sliceBytes(kv.BlockTable), sliceBytes(kv.SeqLens),
			sliceBytes(rk.Float32s()), sliceBytes(rv.Float32s()), sliceBytes(many), sliceBytes(kMany.Float32s())}
		m = append(m, attention.TensorMemory(kv.K)...)
		m = append(m, attention.TensorMemory(kv.V)...)
		m = append(m, attention.TensorMemory(bigKV.K)...)
		m = append(m, attention.TensorMemory(bigKV.V)...)
		m = append(m, attention.TensorMemory(q8)...)
		m = append(m, attention.CacheMemory(kc)...)
		return append(m, attention.PagedCacheMemory(pc)...)
	}
	snapshot := func() [][]byte {
		var s [][]byte
		for _, x := range all() {
			s = append(s, append([]byte(nil), x...))
		}
		return s
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			before := snapshot()
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				return c.run()
			}()
			require.Error(t, err)
			require.NotContains(t, err.Error(), "panic")
			require.ErrorContains(t, err, c.want)
			after := snapshot()
			for i := range before {
				require.Equal(t, before[i], after[i], "buffer %d changed by a call that failed with %q", i, err)
			}
		})
	}

	// Valid calls change no input, and allocate nothing once warm.
	in := [][]byte{sliceBytes(k.Float32s()), sliceBytes(v.Float32s()), sliceBytes(slots), sliceBytes(kv.BlockTable), sliceBytes(kv.SeqLens), sliceBytes(cu)}
	in = append(in, attention.CacheMemory(kc)...)
	in = append(in, attention.PagedCacheMemory(pc)...)
	var before [][]byte
	for _, x := range in {
		before = append(before, append([]byte(nil), x...))
	}
	manyOK := slices.Clone(many)
	manyOK[37] = 37
	valid := map[string]func() error{
		"Write":           func() error { return kv.Write(k, v, slots) },
		"Write many":      func() error { return bigKV.Write(kMany, kMany, manyOK) },
		"SlotMapping":     func() error { return kv.SlotMapping(dst, cu) },
		"SlotMapping nil": func() error { return kv.SlotMapping(dst[:2], nil) },
		"KVCache.Read":    func() error { return kc.Read(rk, rv, 1) },
		"PagedCache.Read": func() error { return pc.Read(id, rk, rv, 0) },
	}
	for name, f := range valid {
		require.NoError(t, f(), name)
		require.Zero(t, testing.AllocsPerRun(10, func() {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}), "%s allocates", name)
	}
	for i := range in {
		require.Equal(t, before[i], in[i], "input %d modified by a valid call", i)
	}
	require.NoError(t, kv.SlotMapping(dst[:2], nil))
	require.Equal(t, []int32{5, 20}, dst[:2], "the slots of sequence 0's position 5 (block 1) and of sequence 1's position 0 (block 5)")
	require.NoError(t, kv.SlotMapping(dst, cu))
	require.Equal(t, []int32{4, 5, 20}, dst, "the slots of sequence 0's positions 4 and 5 and of sequence 1's position 0")
}

// TestPagedKVWriteConcurrent writes a step's tokens into the same pools
// from four goroutines at once, each its share of the tokens at its own
// slots (as attnbench -write does with several threads): the pools end
// with the bits of one Write of every token, for every storage type. Run
// under the race detector (make test-race), it shows that calls with
// disjoint slots touch disjoint memory.
func TestPagedKVWriteConcurrent(t *testing.T) {
	const hkv, d, bs, blocks, n, parts = 2, 64, 4, 16, 37, 4
	for _, st := range storageTypes {
		t.Run(st.dt.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(17, uint64(st.dt)))
			pl := attention.BSHD(blocks, bs, hkv, d)
			one := attention.PagedKV{K: zeroStorage(st.dt, pl, st.kScale), V: zeroStorage(st.dt, pl, st.vScale)}
			many := attention.PagedKV{K: zeroStorage(st.dt, pl, st.kScale), V: zeroStorage(st.dt, pl, st.vScale)}
			il := attention.BSHD(1, n, hkv, d)
			kx, vx := randn(rng, il.Span()), randn(rng, il.Span())
			slots := make([]int32, n)
			for i, s := range rng.Perm(blocks * bs)[:n] {
				slots[i] = int32(s)
			}
			slots[5] = -1
			require.NoError(t, one.Write(attention.F32Tensor(kx, il), attention.F32Tensor(vx, il), slots))
			errs := make([]error, parts)
			var wg sync.WaitGroup
			for p := range parts {
				lo, hi := p*n/parts, (p+1)*n/parts
				l := attention.BSHD(1, hi-lo, hkv, d)
				k, v := attention.F32Tensor(kx[lo*hkv*d:hi*hkv*d], l), attention.F32Tensor(vx[lo*hkv*d:hi*hkv*d], l)
				wg.Go(func() { errs[p] = many.Write(k, v, slots[lo:hi]) })
			}
			wg.Wait()
			for _, err := range errs {
				require.NoError(t, err)
			}
			require.Equal(t, append(attention.TensorMemory(one.K), attention.TensorMemory(one.V)...),
				append(attention.TensorMemory(many.K), attention.TensorMemory(many.V)...))
		})
	}
}
