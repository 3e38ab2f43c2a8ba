package attention_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/internal/tier"
)

// modelSeq is the simple model of a cached sequence: per K/V head, its keys
// and values as float32 rows (already rounded to the storage type).
type modelSeq struct {
	k, v [][]float32 // [head][pos·d + c]
}

func newModelSeq(hkv int) *modelSeq {
	return &modelSeq{k: make([][]float32, hkv), v: make([][]float32, hkv)}
}

func (m *modelSeq) len(d int) int { return len(m.k[0]) / d }

func (m *modelSeq) clone() *modelSeq {
	c := newModelSeq(len(m.k))
	for h := range m.k {
		c.k[h] = append([]float32(nil), m.k[h]...)
		c.v[h] = append([]float32(nil), m.v[h]...)
	}
	return c
}

// add appends a chunk given canonically as [hkv, n, d].
func (m *modelSeq) add(k, v []float32, n, d int) {
	for h := range m.k {
		m.k[h] = append(m.k[h], k[h*n*d:(h+1)*n*d]...)
		m.v[h] = append(m.v[h], v[h*n*d:(h+1)*n*d]...)
	}
}

func (m *modelSeq) truncate(n, d int) {
	for h := range m.k {
		m.k[h], m.v[h] = m.k[h][:n*d], m.v[h][:n*d]
	}
}

// canonical returns the keys and values laid out [hkv, n, d].
func (m *modelSeq) canonical() (k, v []float32) {
	for h := range m.k {
		k = append(k, m.k[h]...)
		v = append(v, m.v[h]...)
	}
	return k, v
}

// randChunk returns n new positions of keys and values, [hkv, n, d],
// rounded to dt.
func randChunk(rng *rand.Rand, dt attention.DType, hkv, n, d int) (k, v []float32) {
	k, v = randn(rng, hkv*n*d), randn(rng, hkv*n*d)
	roundKV(dt, k)
	roundKV(dt, v)
	return k, v
}

func chunkTensor(x []float32, hkv, n, d int) attention.Tensor {
	return attention.F32Tensor(x, attention.BHSD(1, hkv, n, d))
}

// storedTensor is chunkTensor in storage type dt where the path a
// precision takes depends on it: in bf16 precision, bfloat16 K/V are read
// in place and float32 ones are rounded into panels, so a comparison with
// a cache of bfloat16 must hold bfloat16 too.
func storedTensor(dt attention.DType, x []float32, hkv, n, d int) attention.Tensor {
	if dt == attention.BF16 && precisionUnderTest == attention.PrecisionBFloat16 {
		return attention.BF16Tensor(fp16.BFloat16s(x), attention.BHSD(1, hkv, n, d))
	}
	return chunkTensor(x, hkv, n, d)
}

// TestPagedMatchesContiguous decodes a batch of sequences of different
// lengths from a paged cache in one call and checks that every output and
// lse is bitwise the one of Forward over a contiguous cache with the same
// data.
func TestPagedMatchesContiguous(t *testing.T) { forEachImpl(t, testPagedMatchesContiguous) }

func testPagedMatchesContiguous(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	const hkv, d = 2, 32
	lens := []int{1, 37, 64, 130, 200, 3}
	for _, dt := range kvTypesQ8 {
		for _, bs := range []int{1, 5, 16, 64} {
			for _, g := range []int{1, 3} {
				for _, nq := range []int{1, 4, 16} {
					for _, opt := range []string{"causal", "window", "sinks"} {
						hq := g * hkv
						e := mustEngine(t, attention.Config{BlockKV: 32, Threads: 3})
						pc, err := attention.NewPagedCache(dt, hkv, d, bs, 1+(1000+len(lens)*bs)/bs)
						require.NoError(t, err)
						ids := make([]attention.SeqID, len(lens))
						conts := make([]*attention.KVCache, len(lens))
						for s, n := range lens {
							ids[s] = pc.NewSequence()
							conts[s], err = attention.NewKVCache(dt, hkv, n, d)
							require.NoError(t, err)
							for from := 0; from < n; {
								m := min(n-from, 1+rng.IntN(70))
								k, v := randChunk(rng, dt, hkv, m, d)
								require.NoError(t, pc.Append(ids[s], chunkTensor(k, hkv, m, d), chunkTensor(v, hkv, m, d)))
								require.NoError(t, conts[s].Append(chunkTensor(k, hkv, m, d), chunkTensor(v, hkv, m, d)))
								from += m
							}
						}
						require.NoError(t, pc.Check())
						opts := attention.Options{Causal: true, Precision: precisionUnderTest}
						switch opt {
						case "window":
							opts.Window = &attention.Window{Left: 40, Right: 0}
						case "sinks":
							opts.Sinks = randn(rng, hq)
						}
						B := len(lens)
						q := randn(rng, B*hq*nq*d)
						if !tier.Keep(t, fmt.Sprintf("%v bs%d g%d nq%d %s", dt, bs, g, nq, opt), 12) {
							continue // drawn first: a cell has the same inputs in both tiers
						}
						out, lse := make([]float32, len(q)), make([]float32, B*hq*nq)
						require.NoError(t, e.ForwardPagedLSE(attention.F32Tensor(out, attention.BHSD(B, hq, nq, d)), lse,
							attention.F32Tensor(q, attention.BHSD(B, hq, nq, d)), pc, ids, opts))
						for s := range lens {
							l := attention.BHSD(1, hq, nq, d)
							o1, l1 := make([]float32, hq*nq*d), make([]float32, hq*nq)
							require.NoError(t, e.ForwardLSE(attention.F32Tensor(o1, l), l1,
								attention.F32Tensor(q[s*hq*nq*d:], l), conts[s].K(), conts[s].V(), opts))
							what := fmt.Sprintf("%v bs%d g%d nq%d %s seq%d", dt, bs, g, nq, opt, s)
							requireSameBits(t, out[s*hq*nq*d:][:hq*nq*d], o1, "%s out", what)
							requireSameBits(t, lse[s*hq*nq:][:hq*nq], l1, "%s lse", what)
						}
					}
				}
			}
		}
	}
}

// TestPagedOracle checks a batched decode from a paged cache against the
// float64 oracle, sequence by sequence.
func TestPagedOracle(t *testing.T) { testPagedOracle(t) }

func testPagedOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(63, 64))
	const hkv, hq, d, nq, bs = 2, 8, 64, 5, 16
	lens := []int{5, 17, 90, 300}
	for _, dt := range kvTypesQ8 {
		pc, err := attention.NewPagedCache(dt, hkv, d, bs, 64)
		require.NoError(t, err)
		ids := make([]attention.SeqID, len(lens))
		models := make([]*modelSeq, len(lens))
		for s, n := range lens {
			ids[s], models[s] = pc.NewSequence(), newModelSeq(hkv)
			k, v := randChunk(rng, dt, hkv, n, d)
			require.NoError(t, pc.Append(ids[s], chunkTensor(k, hkv, n, d), chunkTensor(v, hkv, n, d)))
			models[s].add(k, v, n, d)
		}
		B := len(lens)
		q := randn(rng, B*hq*nq*d)
		out := make([]float32, len(q))
		require.NoError(t, mustEngine(t, attention.Config{}).ForwardPaged(attention.F32Tensor(out, attention.BHSD(B, hq, nq, d)),
			attention.F32Tensor(q, attention.BHSD(B, hq, nq, d)), pc, ids, attention.Options{Causal: true, Precision: precisionUnderTest}))
		for s, n := range lens {
			k, v := models[s].canonical()
			p := reference.Params{Batch: 1, HeadsQ: hq, HeadsKV: hkv, SeqQ: nq, SeqKV: n, Dim: d, Causal: true}
			checkPrecisionError(t, fmt.Sprintf("%v seq %d (len %d)", dt, s, n), p, q[s*hq*nq*d:][:hq*nq*d], k, v, out[s*hq*nq*d:][:hq*nq*d], nil, 2e-5, 0)
		}
	}
}

// pagedChecker decodes sequences of a paged cache and compares them with
// their models: bitwise against Forward over the model's data (as F32
// tensors, which hold exactly the values the cache stores) and, loosely,
// against the oracle.
type pagedChecker struct {
	e          *attention.Engine
	hq, hkv, d int
	dt         attention.DType // the cache's type: fp8 references hold fp8 too (0: float32)
}

func (pk *pagedChecker) check(t *testing.T, rng *rand.Rand, pc *attention.PagedCache, ids []attention.SeqID, models []*modelSeq, nq int) {
	t.Helper()
	hq, hkv, d := pk.hq, pk.hkv, pk.d
	B := len(ids)
	q := randn(rng, B*hq*nq*d)
	out := make([]float32, len(q))
	require.NoError(t, pk.e.ForwardPaged(attention.F32Tensor(out, attention.BHSD(B, hq, nq, d)),
		attention.F32Tensor(q, attention.BHSD(B, hq, nq, d)), pc, ids, attention.Options{Causal: true}))
	for s, m := range models {
		n := m.len(d)
		got := out[s*hq*nq*d:][:hq*nq*d]
		qs := q[s*hq*nq*d:][:hq*nq*d]
		n1, err := pc.Len(ids[s])
		require.NoError(t, err)
		require.Equal(t, n, n1, "sequence %d length", ids[s])
		if n == 0 {
			for _, x := range got {
				require.Zero(t, x)
			}
			continue
		}
		k, v := m.canonical()
		l := attention.BHSD(1, hq, nq, d)
		want := make([]float32, len(got))
		kt, vt := chunkTensor(k, hkv, n, d), chunkTensor(v, hkv, n, d)
		if pk.dt == attention.FP8E4M3 || pk.dt == attention.FP8E5M2 {
			// The fp8 kernels read the same values as the float32 ones
			// but may sum them in another order: compare like with like.
			kt, vt = typedTensor(t, pk.dt, k, kt.Layout), typedTensor(t, pk.dt, v, vt.Layout)
		}
		require.NoError(t, pk.e.Forward(attention.F32Tensor(want, l), attention.F32Tensor(qs, l),
			kt, vt, attention.Options{Causal: true}))
		requireSameBits(t, got, want, "sequence %d", ids[s])
		w64, _ := cacheOracle(t, qs, k, v, hq, hkv, nq, n, d)
		if errs := reference.Compare(got, w64); errs.MaxAbs > 2e-5 {
			t.Fatalf("sequence %d: %v", ids[s], errs)
		}
	}
}

// TestPagedForkCopyOnWrite forks a sequence in the middle of a block and
// checks that the two diverge without seeing each other's tokens, that
// only the shared partial block is copied, and that freeing returns the
// blocks.
func TestPagedForkCopyOnWrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(65, 66))
	const hkv, hq, d, bs = 2, 4, 16, 16
	for _, dt := range kvTypesAll {
		pc, err := attention.NewPagedCache(dt, hkv, d, bs, 20)
		require.NoError(t, err)
		pk := &pagedChecker{e: mustEngine(t, attention.Config{}), hq: hq, hkv: hkv, d: d, dt: dt}
		a, ma := pc.NewSequence(), newModelSeq(hkv)
		k, v := randChunk(rng, dt, hkv, 40, d)
		require.NoError(t, pc.Append(a, chunkTensor(k, hkv, 40, d), chunkTensor(v, hkv, 40, d)))
		ma.add(k, v, 40, d)
		require.Equal(t, 17, pc.FreeBlocks())

		b, err := pc.Fork(a)
		require.NoError(t, err)
		mb := ma.clone()
		require.Equal(t, 17, pc.FreeBlocks(), "fork copies nothing")
		pk.check(t, rng, pc, []attention.SeqID{a, b}, []*modelSeq{ma, mb}, 1)

		// a writes into the shared third block: it gets a copy.
		k, v = randChunk(rng, dt, hkv, 1, d)
		require.NoError(t, pc.Append(a, chunkTensor(k, hkv, 1, d), chunkTensor(v, hkv, 1, d)))
		ma.add(k, v, 1, d)
		require.Equal(t, 16, pc.FreeBlocks(), "copy on write takes one block")
		// b's third block is its own now: no copy.
		k, v = randChunk(rng, dt, hkv, 3, d)
		require.NoError(t, pc.Append(b, chunkTensor(k, hkv, 3, d), chunkTensor(v, hkv, 3, d)))
		mb.add(k, v, 3, d)
		require.Equal(t, 16, pc.FreeBlocks())
		pk.check(t, rng, pc, []attention.SeqID{a, b, a}, []*modelSeq{ma, mb, ma}, 3)

		// Roll a back into the shared prefix and regrow it differently.
		require.NoError(t, pc.Truncate(a, 20))
		ma.truncate(20, d)
		require.Equal(t, 17, pc.FreeBlocks())
		k, v = randChunk(rng, dt, hkv, 30, d)
		require.NoError(t, pc.Append(a, chunkTensor(k, hkv, 30, d), chunkTensor(v, hkv, 30, d)))
		ma.add(k, v, 30, d)
		pk.check(t, rng, pc, []attention.SeqID{b, a}, []*modelSeq{mb, ma}, 2)
		require.NoError(t, pc.Check())

		require.NoError(t, pc.Free(a))
		pk.check(t, rng, pc, []attention.SeqID{b}, []*modelSeq{mb}, 1)
		require.NoError(t, pc.Free(b))
		require.Equal(t, 20, pc.FreeBlocks())
		require.NoError(t, pc.Check())
	}
}

// TestPagedRandomModel runs random interleavings of new, append, fork,
// truncate, free and batched decode over many sequences, checking the
// cache against the simple model after every step.
func TestPagedRandomModel(t *testing.T) {
	steps := 400
	if raceEnabled {
		steps = 100
	}
	const hkv, hq, d = 2, 6, 16
	for _, dt := range kvTypesAll {
		for _, bs := range []int{4, 16} {
			rng := rand.New(rand.NewPCG(67, uint64(bs)))
			pc, err := attention.NewPagedCache(dt, hkv, d, bs, 256/bs*3)
			require.NoError(t, err)
			pk := &pagedChecker{e: mustEngine(t, attention.Config{BlockKV: 16, Threads: 2}), hq: hq, hkv: hkv, d: d, dt: dt}
			models := map[attention.SeqID]*modelSeq{}
			var live []attention.SeqID
			var freed []attention.SeqID
			pick := func() attention.SeqID { return live[rng.IntN(len(live))] }
			for step := range steps {
				op := rng.IntN(10)
				if len(live) == 0 {
					op = 0
				}
				switch {
				case op == 0:
					id := pc.NewSequence()
					models[id] = newModelSeq(hkv)
					live = append(live, id)
				case op <= 3: // append
					id := pick()
					m := 1 + rng.IntN(3*bs)
					k, v := randChunk(rng, dt, hkv, m, d)
					free := pc.FreeBlocks()
					err := pc.Append(id, chunkTensor(k, hkv, m, d), chunkTensor(v, hkv, m, d))
					if err != nil {
						require.ErrorContains(t, err, "free blocks")
						require.Equal(t, free, pc.FreeBlocks(), "failed append took blocks")
					} else {
						models[id].add(k, v, m, d)
					}
				case op == 4:
					src := pick()
					id, err := pc.Fork(src)
					require.NoError(t, err)
					models[id] = models[src].clone()
					live = append(live, id)
				case op == 5:
					id := pick()
					n := rng.IntN(models[id].len(d) + 1)
					require.NoError(t, pc.Truncate(id, n))
					models[id].truncate(n, d)
				case op == 6:
					i := rng.IntN(len(live))
					id := live[i]
					require.NoError(t, pc.Free(id))
					delete(models, id)
					live = append(live[:i], live[i+1:]...)
					freed = append(freed, id)
				default: // decode a random batch
					nb := 1 + rng.IntN(min(len(live), 5))
					ids := make([]attention.SeqID, nb)
					ms := make([]*modelSeq, nb)
					for i := range ids {
						ids[i] = pick()
						ms[i] = models[ids[i]]
					}
					pk.check(t, rng, pc, ids, ms, 1+rng.IntN(4))
				}
				if err := pc.Check(); err != nil {
					t.Fatalf("%v bs%d step %d (op %d): %v", dt, bs, step, op, err)
				}
				if len(freed) > 0 {
					id := freed[rng.IntN(len(freed))]
					_, err := pc.Len(id)
					require.ErrorContains(t, err, "unknown or freed")
				}
			}
			// Free everything: every block comes back.
			for _, id := range live {
				require.NoError(t, pc.Free(id))
			}
			require.Equal(t, pc.NumBlocks(), pc.FreeBlocks())
			require.NoError(t, pc.Check())
		}
	}
}

func TestPagedErrors(t *testing.T) {
	_, err := attention.NewPagedCache(attention.DType(0), 2, 8, 16, 4)
	require.ErrorContains(t, err, "element type")
	_, err = attention.NewPagedCache(attention.F16, 2, 8, 0, 4)
	require.ErrorContains(t, err, "block size")
	_, err = attention.NewPagedCache(attention.F16, 2, 8, 16, -1)
	require.ErrorContains(t, err, "blocks")

	rng := rand.New(rand.NewPCG(69, 70))
	const hkv, hq, d, bs = 2, 4, 8, 4
	pc, err := attention.NewPagedCache(attention.F16, hkv, d, bs, 4)
	require.NoError(t, err)
	pk := &pagedChecker{e: mustEngine(t, attention.Config{}), hq: hq, hkv: hkv, d: d}
	a, ma := pc.NewSequence(), newModelSeq(hkv)
	k, v := randChunk(rng, attention.F16, hkv, 10, d)
	require.NoError(t, pc.Append(a, chunkTensor(k, hkv, 10, d), chunkTensor(v, hkv, 10, d)))
	ma.add(k, v, 10, d)
	b, err := pc.Fork(a)
	require.NoError(t, err)
	gone := pc.NewSequence()
	require.NoError(t, pc.Free(gone))

	// Past capacity: a needs 1 block for its shared partial block (copy on
	// write) and 2 more for 7 positions, with 1 free.
	k, v = randChunk(rng, attention.F16, hkv, 7, d)
	require.ErrorContains(t, pc.Append(a, chunkTensor(k, hkv, 7, d), chunkTensor(v, hkv, 7, d)), "need 3 free blocks; 1 of 4 are free")
	// Unknown and freed sequences.
	for _, id := range []attention.SeqID{gone, 0, 999} {
		require.ErrorContains(t, pc.Append(id, chunkTensor(k, hkv, 1, d), chunkTensor(v, hkv, 1, d)), "unknown or freed")
		require.ErrorContains(t, pc.Truncate(id, 0), "unknown or freed")
		require.ErrorContains(t, pc.Free(id), "unknown or freed")
		_, err = pc.Fork(id)
		require.ErrorContains(t, err, "unknown or freed")
	}
	// Mismatched type and head dim.
	bf := make([]float32, hkv*d)
	require.ErrorContains(t, pc.Append(a, attention.FP8E4M3Tensor(make([]fp16.Float8E4M3, hkv*d), []float32{1}, attention.BHSD(1, hkv, 1, d)),
		chunkTensor(bf, hkv, 1, d)), "element type")
	require.ErrorContains(t, pc.Append(a, attention.F32Tensor(bf, attention.BHSD(1, hkv, 1, d/2)),
		attention.F32Tensor(bf, attention.BHSD(1, hkv, 1, d/2))), "shape")
	require.ErrorContains(t, pc.Truncate(a, 11), "0 <= n <= 10")

	e := mustEngine(t, attention.Config{})
	q := attention.F32Tensor(make([]float32, 2*hq*d), attention.BHSD(2, hq, 1, d))
	out := attention.F32Tensor(make([]float32, 2*hq*d), attention.BHSD(2, hq, 1, d))
	opts := attention.Options{Causal: true}
	require.ErrorContains(t, e.ForwardPaged(out, q, pc, []attention.SeqID{a, gone}, opts), "seqs[1]")
	require.ErrorContains(t, e.ForwardPaged(out, q, pc, []attention.SeqID{a}, opts), "batch")
	require.ErrorContains(t, e.ForwardPaged(out, q, nil, []attention.SeqID{a, b}, opts), "nil")
	q3 := attention.F32Tensor(make([]float32, 2*3*d), attention.BHSD(2, 3, 1, d))
	require.ErrorContains(t, e.ForwardPaged(out, q3, pc, []attention.SeqID{a, b}, opts), "heads")
	qd := attention.F32Tensor(make([]float32, 2*hq*2*d), attention.BHSD(2, hq, 1, 2*d))
	require.ErrorContains(t, e.ForwardPaged(out, qd, pc, []attention.SeqID{a, b}, opts), "head dim")
	require.ErrorContains(t, e.ForwardPaged(q, q, pc, []attention.SeqID{a, b}, opts), "overlaps")
	withMask := opts
	withMask.Mask = attention.F32Tensor(make([]float32, 10), attention.BHSD(1, 1, 1, 10))
	require.ErrorContains(t, e.ForwardPaged(out, q, pc, []attention.SeqID{a, b}, withMask), "Mask")
	withCu := opts
	withCu.CuSeqQ, withCu.CuSeqKV = []int{0, 1}, []int{0, 10}
	require.ErrorContains(t, e.ForwardPaged(out, q, pc, []attention.SeqID{a, b}, withCu), "CuSeq")
	require.ErrorContains(t, e.ForwardPagedLSE(out, make([]float32, 3), q, pc, []attention.SeqID{a, b}, opts), "lse")

	// Nothing was corrupted.
	require.NoError(t, pc.Check())
	require.Equal(t, 1, pc.FreeBlocks())
	pk.check(t, rng, pc, []attention.SeqID{a, b}, []*modelSeq{ma, ma}, 2)
}

// TestPagedDecodeNoAllocations checks that a steady-state decode step of a
// batch (append a token to each sequence, one ForwardPaged call, roll back)
// allocates nothing.
func TestPagedDecodeNoAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	const hkv, hq, d, bs = 2, 8, 64, 16
	pc, err := attention.NewPagedCache(attention.BF16, hkv, d, bs, 200)
	require.NoError(t, err)
	e := mustEngine(t, attention.Config{Threads: 2})
	ids := make([]attention.SeqID, 3)
	for s, n := range []int{100, 250, 31} {
		ids[s] = pc.NewSequence()
		k, v := randChunk(rng, attention.BF16, hkv, n, d)
		require.NoError(t, pc.Append(ids[s], chunkTensor(k, hkv, n, d), chunkTensor(v, hkv, n, d)))
	}
	kt, vt := randChunk(rng, attention.BF16, hkv, 1, d)
	q := attention.F32Tensor(randn(rng, 3*hq*d), attention.BHSD(3, hq, 1, d))
	out := attention.F32Tensor(make([]float32, 3*hq*d), q.Layout)
	step := func() {
		for _, id := range ids {
			require.NoError(t, pc.Append(id, chunkTensor(kt, hkv, 1, d), chunkTensor(vt, hkv, 1, d)))
		}
		require.NoError(t, e.ForwardPaged(out, q, pc, ids, attention.Options{Causal: true}))
		for _, id := range ids {
			n, _ := pc.Len(id)
			require.NoError(t, pc.Truncate(id, n-1))
		}
	}
	step()
	if allocs := testing.AllocsPerRun(100, step); allocs != 0 {
		t.Errorf("decode step allocates %v times", allocs)
	}
}

// TestPagedConcurrent appends to and decodes different sequences of one
// cache from several goroutines at once (run it with -race).
func TestPagedConcurrent(t *testing.T) {
	const hkv, hq, d, bs, workers = 2, 4, 16, 8, 4
	steps := 30
	if raceEnabled {
		steps = 10
	}
	pc, err := attention.NewPagedCache(attention.F16, hkv, d, bs, workers*(steps*3/bs+4))
	require.NoError(t, err)
	e := mustEngine(t, attention.Config{Threads: 2})
	root := pc.NewSequence()
	rng0 := rand.New(rand.NewPCG(73, 74))
	k, v := randChunk(rng0, attention.F16, hkv, 13, d)
	require.NoError(t, pc.Append(root, chunkTensor(k, hkv, 13, d), chunkTensor(v, hkv, 13, d)))
	mroot := newModelSeq(hkv)
	mroot.add(k, v, 13, d)
	var wg sync.WaitGroup
	for w := range workers {
		id, err := pc.Fork(root)
		require.NoError(t, err)
		m := mroot.clone()
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(75, uint64(w)))
			pk := &pagedChecker{e: e, hq: hq, hkv: hkv, d: d}
			for range steps {
				n := 1 + rng.IntN(3)
				k, v := randChunk(rng, attention.F16, hkv, n, d)
				if err := pc.Append(id, chunkTensor(k, hkv, n, d), chunkTensor(v, hkv, n, d)); err != nil {
					t.Error(err)
					return
				}
				m.add(k, v, n, d)
				pk.check(t, rng, pc, []attention.SeqID{id, root}, []*modelSeq{m, mroot}, 1+rng.IntN(2))
			}
		})
	}
	wg.Wait()
	require.NoError(t, pc.Check())
}
