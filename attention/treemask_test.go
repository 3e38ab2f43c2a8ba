package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/internal/impltest"
	"github.com/flashgo/flashgo/internal/tier"
)

// treeRows returns the mask of a random tree of nq draft tokens, [nq][nq]
// row-major, true where row i sees draft t: node 0 is the root, node i's
// parent is a random earlier node, and a node sees itself and its
// ancestors (EAGLE's and Medusa's tree attention). With free, the rows are
// random bits instead, which need not be a tree nor causal.
func treeRows(rng *rand.Rand, nq int, free bool) []bool {
	m := make([]bool, nq*nq)
	if free {
		for i := range m {
			m[i] = rng.IntN(3) != 0
		}
		return m
	}
	parent := make([]int, nq)
	for i := range nq {
		parent[i] = -1
		if i > 0 {
			parent[i] = rng.IntN(i)
		}
		for a := i; a >= 0; a = parent[a] {
			m[i*nq+a] = true
		}
	}
	return m
}

// packTree packs the masks of the sequences (nil: no mask) as
// Options.TreeMask takes them: each mask's bits little-endian from a byte
// of its own, and the byte offsets.
func packTree(masks [][]bool) attention.TreeMask {
	tm := attention.TreeMask{Offsets: []int{0}}
	for _, m := range masks {
		start := len(tm.Bits)
		tm.Bits = append(tm.Bits, make([]uint8, (len(m)+7)/8)...)
		for k, keep := range m {
			if keep {
				tm.Bits[start+k/8] |= 1 << (k % 8)
			}
		}
		tm.Offsets = append(tm.Offsets, len(tm.Bits))
	}
	return tm
}

// treeBoolMask returns the BoolMask, [1, 1, nq, n], that keeps every
// context key of a sequence of n keys and, among its last nq, those of the
// tree mask m ([nq][nq]).
func treeBoolMask(m []bool, nq, n int) attention.BoolMask {
	data := make([]bool, nq*n)
	for i := range nq {
		for j := range n - nq {
			data[i*n+j] = true
		}
		copy(data[i*n+n-nq:][:nq], m[i*nq:][:nq])
	}
	return attention.BoolMask{Layout: attention.BHSD(1, 1, nq, n), Data: data}
}

// treeCase is a verification step: each sequence's query count, its keys
// (context and drafts) and whether its rows have a tree mask (and whether
// it is a free mask rather than a tree).
type treeCase struct {
	nqs, lens  []int
	mask, free []bool
}

// treeSteps are the steps the tree tests run: trees beside a decoding
// sequence and a prefill chunk, a tree with no context (rows may see no
// key), trees of more than 16 rows (bf16 products through packed tiles),
// sequences of no queries, free masks, a mask that hides every draft (a
// last tile of drafts alone that no row sees: skipped, as BoolMask skips
// it; testTreeMaskMatchesBoolMask clears it); and a uniform step (the
// same query count everywhere, every sequence a tree).
var treeSteps = []treeCase{
	{
		nqs:  []int{4, 1, 3, 20, 7, 0, 17, 4},
		lens: []int{41, 30, 3, 60, 137, 5, 90, 68},
		mask: []bool{true, false, true, false, true, false, true, true},
		free: []bool{false, false, true, false, false, false, false, true},
	},
	{
		nqs:  []int{5, 5, 5},
		lens: []int{5, 70, 33},
		mask: []bool{true, true, true},
		free: []bool{true, false, false},
	},
}

// TestTreeMaskMatchesBoolMask verifies draft trees for several sequences
// in one ForwardPagedKVLSE call (Options.TreeMask, with Options.CuSeqQ and
// in the uniform form) and checks every sequence's rows and log-sum-exps
// bitwise against Forward over the sequence alone with the equivalent
// Options.BoolMask (and, for the sequences without a mask, without one),
// for every implementation, both precisions, every K/V type, one and three
// threads, causal or not, with a window, soft-capping, sinks or ALiBi
// besides.
func TestTreeMaskMatchesBoolMask(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			t.Run(prec.String(), inPrecision(prec, testTreeMaskMatchesBoolMask))
		}
	})
}

func testTreeMaskMatchesBoolMask(t *testing.T) {
	rng := rand.New(rand.NewPCG(701, 702))
	const hkv, d = 2, 32
	for ci, tc := range treeSteps {
		uniform := ci == 1
		for _, dt := range kvTypesQ8 {
			pool := newVLLMPool(t, rng, dt, ci%2 == 1, hkv, d, 16, tc.lens)
			refs := make([]*attention.KVCache, len(tc.lens))
			for b, n := range tc.lens {
				kc, err := attention.NewKVCache(dt, hkv, n, d)
				require.NoError(t, err)
				require.NoError(t, kc.Append(chunkTensor(pool.seqK[b], hkv, n, d), chunkTensor(pool.seqV[b], hkv, n, d)))
				refs[b] = kc
			}
			masks := make([][]bool, len(tc.nqs))
			for s, nq := range tc.nqs {
				if tc.mask[s] {
					masks[s] = treeRows(rng, nq, tc.free[s])
				}
			}
			if !uniform {
				clear(masks[7]) // no row sees a draft: keys 64 to 67, a tile of 32 of their own
				if dt == attention.F32 {
					masks[2][2*3+0], masks[2][2*3+1], masks[2][2*3+2] = false, false, false // a row of no context that sees no key
				}
			}
			tree := packTree(masks)
			for _, g := range []int{1, 2} {
				for _, cfg := range []attention.Config{{BlockKV: 32, Threads: 1}, {BlockKV: 32, Threads: 3}, {BlockKV: 32, Threads: 3, KVSplits: 3}} {
					for _, opt := range []string{"causal", "plain", "window", "softcap", "sinks", "alibi"} {
						what := fmt.Sprintf("step %d %v g %d threads %d splits %d %s", ci, dt, g, cfg.Threads, cfg.KVSplits, opt)
						hq := g * hkv
						e := mustEngine(t, cfg)
						opts := attention.Options{Causal: opt != "plain", Precision: precisionUnderTest}
						switch opt {
						case "window":
							opts.Window = &attention.Window{Left: 40, Right: 0}
						case "softcap":
							opts.SoftCap = 2
						case "sinks":
							opts.Sinks = randn(rng, hq)
						case "alibi":
							opts.Slopes, _ = attention.ALiBiSlopes(hq)
						}
						cu := offsets(tc.nqs)
						total := cu[len(tc.nqs)]
						ql := attention.BSHD(1, total, hq, d)
						if uniform {
							ql = attention.BSHD(len(tc.nqs), tc.nqs[0], hq, d)
						}
						q := randn(rng, ql.Span())
						if !tier.Keep(t, what, 4) {
							continue // drawn first: a cell has the same inputs in both tiers
						}
						out, lse := make([]float32, ql.Span()), make([]float32, hq*total)
						call := opts
						call.TreeMask = tree
						if !uniform {
							call.CuSeqQ = cu
						}
						require.NoError(t, e.ForwardPagedKVLSE(attention.F32Tensor(out, ql), lse, attention.F32Tensor(q, ql), pool.kv, call), what)
						for s, nq := range tc.nqs {
							if nq == 0 {
								continue
							}
							n := tc.lens[s]
							b, q0 := 0, cu[s]
							if uniform {
								b, q0 = s, 0
							}
							qv, l1 := ql, attention.BHSD(1, hq, nq, d)
							qv.Batch, qv.Seq = 1, nq
							one := opts
							if masks[s] != nil {
								one.BoolMask = treeBoolMask(masks[s], nq, n)
							}
							o1, s1 := make([]float32, l1.Span()), make([]float32, hq*nq)
							require.NoError(t, e.ForwardLSE(attention.F32Tensor(o1, l1), s1, attention.F32Tensor(q[ql.Offset(b, 0, q0):], qv), refs[s].K(), refs[s].V(), one), what)
							for h := range hq {
								for i := range nq {
									requireSameBits(t, out[ql.Offset(b, h, q0+i):][:d], o1[l1.Offset(0, h, i):][:d], "%s seq %d (nq %d, keys %d, mask %v) head %d row %d out", what, s, nq, n, masks[s] != nil, h, i)
								}
								off := h*total + q0
								if uniform {
									off = (b*hq+h)*nq + q0
								}
								requireSameBits(t, lse[off:][:nq], s1[h*nq:][:nq], "%s seq %d head %d lse", what, s, h)
							}
						}
						if !uniform && dt == attention.F32 && opts.Causal && opts.Sinks == nil {
							// Sequence 2's last row (no context, no bit) sees no
							// key: a zero row and −Inf, as BoolMask gives it.
							for h := range hq {
								row := out[ql.Offset(0, h, cu[2]+2):][:d]
								require.Equal(t, make([]float32, d), row, "%s: the row that sees no key", what)
								require.True(t, math.IsInf(float64(lse[h*total+cu[2]+2]), -1), "%s: its lse", what)
							}
						}
					}
				}
			}
		}
	}
}

// TestTreeMaskOtherEntryPoints runs a step with tree masks through
// ForwardPaged (a PagedCache holding the sequences) and ForwardKVCaches (a
// KVCache each) and checks their outputs and log-sum-exps bitwise against
// ForwardPagedKV's, with the uniform and per-sequence query counts.
func TestTreeMaskOtherEntryPoints(t *testing.T) {
	rng := rand.New(rand.NewPCG(703, 704))
	const hkv, hq, d, bs = 2, 4, 32, 16
	for ci, tc := range treeSteps {
		uniform := ci == 1
		for _, dt := range []attention.DType{attention.F32, attention.BF16, attention.Q8} {
			pool := newVLLMPool(t, rng, dt, false, hkv, d, bs, tc.lens)
			pc, err := attention.NewPagedCache(dt, hkv, d, bs, 64)
			require.NoError(t, err)
			caches := make([]*attention.KVCache, len(tc.lens))
			ids := make([]attention.SeqID, len(tc.lens))
			for b, n := range tc.lens {
				kc, err := attention.NewKVCache(dt, hkv, n, d)
				require.NoError(t, err)
				require.NoError(t, kc.Append(chunkTensor(pool.seqK[b], hkv, n, d), chunkTensor(pool.seqV[b], hkv, n, d)))
				caches[b] = kc
				ids[b] = pc.NewSequence()
				require.NoError(t, pc.Append(ids[b], chunkTensor(pool.seqK[b], hkv, n, d), chunkTensor(pool.seqV[b], hkv, n, d)))
			}
			masks := make([][]bool, len(tc.nqs))
			for s, nq := range tc.nqs {
				if tc.mask[s] {
					masks[s] = treeRows(rng, nq, tc.free[s])
				}
			}
			for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
				opts := attention.Options{Causal: true, Precision: prec, TreeMask: packTree(masks)}
				cu := offsets(tc.nqs)
				total := cu[len(tc.nqs)]
				ql := attention.BSHD(1, total, hq, d)
				if uniform {
					ql = attention.BSHD(len(tc.nqs), tc.nqs[0], hq, d)
				} else {
					opts.CuSeqQ = cu
				}
				q := randn(rng, ql.Span())
				e := mustEngine(t, attention.Config{Threads: 3})
				run := func(f func(out attention.Tensor, lse []float32) error) ([]float32, []float32) {
					out, lse := make([]float32, ql.Span()), make([]float32, hq*total)
					require.NoError(t, f(attention.F32Tensor(out, ql), lse))
					return out, lse
				}
				qT := attention.F32Tensor(q, ql)
				wo, wl := run(func(out attention.Tensor, lse []float32) error {
					return e.ForwardPagedKVLSE(out, lse, qT, pool.kv, opts)
				})
				what := fmt.Sprintf("step %d %v %v", ci, dt, prec)
				go_, gl := run(func(out attention.Tensor, lse []float32) error { return e.ForwardPagedLSE(out, lse, qT, pc, ids, opts) })
				requireSameBits(t, go_, wo, "%s ForwardPaged out", what)
				requireSameBits(t, gl, wl, "%s ForwardPaged lse", what)
				go_, gl = run(func(out attention.Tensor, lse []float32) error {
					return e.ForwardKVCachesLSE(out, lse, qT, caches, opts)
				})
				requireSameBits(t, go_, wo, "%s ForwardKVCaches out", what)
				requireSameBits(t, gl, wl, "%s ForwardKVCaches lse", what)
			}
		}
	}
}

// TestTreeMaskErrors checks that a tree mask that does not fit the step,
// and one given to a call that refuses it, are errors that say what is
// wrong and what is wanted, with nothing written.
func TestTreeMaskErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(705, 706))
	const hkv, hq, d, bs = 2, 4, 32, 4
	lens := []int{9, 3, 6}
	nqs := []int{3, 1, 2}
	pool := newVLLMPool(t, rng, attention.F32, false, hkv, d, bs, lens)
	e := mustEngine(t, attention.Config{})
	cu := offsets(nqs)
	ql := attention.BSHD(1, cu[3], hq, d)
	q := randn(rng, ql.Span())
	good := packTree([][]bool{treeRows(rng, 3, false), nil, treeRows(rng, 2, false)})
	require.Equal(t, []int{0, 2, 2, 3}, good.Offsets)
	with := func(f func(m *attention.TreeMask)) attention.TreeMask {
		m := attention.TreeMask{Bits: append([]uint8(nil), good.Bits...), Offsets: append([]int(nil), good.Offsets...)}
		f(&m)
		return m
	}
	for _, c := range []struct {
		name string
		m    attention.TreeMask
		want string
	}{
		{"bits without offsets", attention.TreeMask{Bits: good.Bits}, "Options.TreeMask has Bits but no Offsets; want both"},
		{"offsets count", with(func(m *attention.TreeMask) { m.Offsets = m.Offsets[:3] }), "Options.TreeMask.Offsets has 3 offsets for 3 sequences; want 4"},
		{"first offset", with(func(m *attention.TreeMask) { m.Offsets[0] = 1 }), "Options.TreeMask.Offsets[0] is 1; want 0"},
		{"decreasing", with(func(m *attention.TreeMask) { m.Offsets[2] = 1 }), "Options.TreeMask.Offsets[2] is 1, less than Offsets[1] = 2"},
		{"short bits", with(func(m *attention.TreeMask) { m.Bits = m.Bits[:2] }), "Options.TreeMask.Bits has 2 bytes; want >= Offsets[3] = 3"},
		{"segment size", with(func(m *attention.TreeMask) { m.Offsets[1], m.Offsets[2] = 1, 1 }), "Options.TreeMask gives sequence 0 1 bytes (Offsets[0] to Offsets[1]); want ceil(nq²/8) = ceil(3²/8) = 2"},
		{"padding bits (big-endian)", with(func(m *attention.TreeMask) { m.Bits[1] |= 0x80 }), "Options.TreeMask.Bits[1] is 0b10000001: bits of sequence 0 past its 3·3 are set; want them 0"},
		{"more queries than keys", with(func(m *attention.TreeMask) {
			m.Bits = append(m.Bits[:2:2], 1, m.Bits[2])
			m.Offsets = []int{0, 2, 3, 4}
		}), ""},
	} {
		kv := pool.kv
		if c.name == "more queries than keys" {
			kv.SeqLens = append([]int32(nil), kv.SeqLens...)
			kv.SeqLens[1] = 0
			c.want = "Options.TreeMask gives sequence 1 a mask and it has 1 queries and kv.SeqLens[1] is 0; want at least as many keys as queries"
		}
		out, lse := impltest.Filled(ql.Span(), float32(math.NaN())), impltest.Filled(hq*cu[3], float32(math.NaN()))
		err := e.ForwardPagedKVLSE(attention.F32Tensor(out, ql), lse, attention.F32Tensor(q, ql), kv, attention.Options{Causal: true, CuSeqQ: cu, TreeMask: c.m})
		require.ErrorContains(t, err, "attention: ForwardPagedKV: "+c.want, c.name)
		for i, x := range append(out, lse...) {
			require.True(t, math.IsNaN(float64(x)), "%s: output %d written on error", c.name, i)
		}
	}
	// A valid mask is accepted; every segment empty is no mask.
	out := make([]float32, ql.Span())
	require.NoError(t, e.ForwardPagedKV(attention.F32Tensor(out, ql), attention.F32Tensor(q, ql), pool.kv, attention.Options{Causal: true, CuSeqQ: cu, TreeMask: good}))
	require.NoError(t, e.ForwardPagedKV(attention.F32Tensor(out, ql), attention.F32Tensor(q, ql), pool.kv,
		attention.Options{Causal: true, CuSeqQ: cu, TreeMask: attention.TreeMask{Offsets: []int{0, 0, 0, 0}}}))
	// The mask shares no memory with the outputs.
	alias := unsafe.Slice((*uint8)(unsafe.Pointer(&out[0])), 3)
	copy(alias, good.Bits)
	err := e.ForwardPagedKV(attention.F32Tensor(out, ql), attention.F32Tensor(q, ql), pool.kv,
		attention.Options{Causal: true, CuSeqQ: cu, TreeMask: attention.TreeMask{Bits: alias, Offsets: good.Offsets}})
	require.ErrorContains(t, err, "attention: ForwardPagedKV: out overlaps Options.TreeMask.Bits in memory")
	// Forward and ForwardSharedPrefix refuse it.
	l := attention.BHSD(1, hq, 3, d)
	k := attention.F32Tensor(randn(rng, hkv*9*d), attention.BHSD(1, hkv, 9, d))
	o := impltest.Filled(l.Span(), float32(math.NaN()))
	err = e.Forward(attention.F32Tensor(o, l), attention.F32Tensor(q[:l.Span()], l), k, k, attention.Options{TreeMask: good})
	require.ErrorContains(t, err, "attention: Options.TreeMask is set; want it nil: it is for the paged and cache calls (ForwardPagedKV, ForwardPaged, ForwardKVCaches), and Forward takes a mask of any shape in Options.BoolMask")
	shared := attention.SharedPrefixKV{Prefix: attention.PagedKV{K: pool.kv.K, V: pool.kv.V, BlockTable: pool.kv.BlockTable, MaxBlocks: 1, SeqLens: []int32{4}}, Suffix: pool.kv}
	ls := attention.BHSD(3, hq, 1, d)
	err = e.ForwardSharedPrefix(attention.F32Tensor(impltest.Filled(ls.Span(), float32(math.NaN())), ls), attention.F32Tensor(q[:ls.Span()], ls), shared,
		attention.Options{TreeMask: attention.TreeMask{Bits: []uint8{1, 1, 1}, Offsets: []int{0, 1, 2, 3}}})
	require.ErrorContains(t, err, "attention: ForwardSharedPrefix: Options.TreeMask is set; want none")
	for i, x := range o {
		require.True(t, math.IsNaN(float64(x)), "Forward wrote o[%d] on error", i)
	}
}

// TestTreeMaskAllocs checks that a verification step with tree masks
// allocates nothing once the engine has seen its shape.
func TestTreeMaskAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("SKIP: the race detector allocates")
	}
	rng := rand.New(rand.NewPCG(707, 708))
	const hkv, hq, d, bs = 2, 8, 64, 16
	tc := treeSteps[0]
	pool := newVLLMPool(t, rng, attention.BF16, false, hkv, d, bs, tc.lens)
	masks := make([][]bool, len(tc.nqs))
	for s, nq := range tc.nqs {
		if tc.mask[s] {
			masks[s] = treeRows(rng, nq, false)
		}
	}
	cu := offsets(tc.nqs)
	ql := attention.BSHD(1, cu[len(tc.nqs)], hq, d)
	q := randn(rng, ql.Span())
	out, lse := make([]float32, ql.Span()), make([]float32, hq*cu[len(tc.nqs)])
	opts := attention.Options{Causal: true, CuSeqQ: cu, TreeMask: packTree(masks), Precision: attention.PrecisionBFloat16}
	e := mustEngine(t, attention.Config{Threads: 3})
	step := func() {
		if err := e.ForwardPagedKVLSE(attention.F32Tensor(out, ql), lse, attention.F32Tensor(q, ql), pool.kv, opts); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if n := testing.AllocsPerRun(20, step); n != 0 {
		t.Fatalf("a step with tree masks allocates %v times; want 0", n)
	}
}

// fuzzTreeMask verifies draft trees over FuzzPagedKV's valid pool: each
// sequence gets a query count (0 to 3, at most its keys) and, or not, a
// mask of drawn bits (Options.TreeMask), and ForwardPagedKVLSE runs them
// with Options.CuSeqQ. Now and then the mask is hostile (a padding bit
// set, a byte short, an offset missing, a mask for a sequence of more
// queries than keys), which must fail, writing nothing. Otherwise it must
// succeed, and each sequence's rows and log-sum-exps must be bitwise
// those of the call for it alone (batch 1, its own segment) and, but for
// Q8 pools (whose rows gathered and quantised again may differ), of
// Forward over its rows with the equivalent BoolMask (or none).
func fuzzTreeMask(t *testing.T, r *fuzzReader, e *attention.Engine, kv attention.PagedKV, kf, vf []float32, l attention.Layout, dt attention.DType, hq, d, dv int, opts attention.Options) {
	t.Helper()
	B, hkv, bs := len(kv.SeqLens), kv.K.Heads, kv.K.Seq
	nqs := make([]int, B)
	masks := make([][]bool, B)
	for s := range B {
		nqs[s] = min(r.intn(4), int(kv.SeqLens[s]))
		if r.bool() {
			masks[s] = make([]bool, nqs[s]*nqs[s])
			for k := range masks[s] {
				masks[s][k] = r.byte()&1 == 1
			}
		}
	}
	tm := packTree(masks)
	hostile := true
	switch r.intn(8) {
	case 4: // a padding bit
		s := 0
		for s < B && (masks[s] == nil || len(masks[s])%8 == 0) {
			s++
		}
		if s == B {
			hostile = false
			break
		}
		tm.Bits[tm.Offsets[s+1]-1] |= 0x80
	case 5: // a byte short
		if len(tm.Bits) == 0 {
			hostile = false
			break
		}
		tm.Bits = tm.Bits[:len(tm.Bits)-1]
	case 6:
		tm.Offsets = tm.Offsets[:B]
	case 7: // a mask for a sequence of one query and no keys
		s := 0
		for s < B && kv.SeqLens[s] != 0 {
			s++
		}
		if s == B {
			hostile = false
			break
		}
		nqs[s], masks[s] = 1, []bool{true}
		tm = packTree(masks)
	default:
		hostile = false
	}
	cu := offsets(nqs)
	total := cu[B]
	ql, ol := attention.BSHD(1, total, hq, d), attention.BSHD(1, total, hq, dv)
	q := randn(r.rng, ql.Span())
	out, lse := impltest.Filled(ol.Span(), outGuard), impltest.Filled(hq*total, outGuard)
	opts.CuSeqQ, opts.TreeMask = cu, tm
	err := e.ForwardPagedKVLSE(attention.F32Tensor(out, ol), lse, attention.F32Tensor(q, ql), kv, opts)
	if err != nil {
		if !sameBits(out, impltest.Filled(ol.Span(), outGuard)) || !sameBits(lse, impltest.Filled(hq*total, outGuard)) {
			t.Fatalf("tree mask %v: error %v, but out or lse was written", tm, err)
		}
		if !hostile {
			t.Fatalf("tree mask %v (query counts %v, lengths %v): %v", tm, nqs, kv.SeqLens, err)
		}
		return
	}
	if hostile {
		t.Fatalf("hostile tree mask %v (query counts %v, lengths %v) accepted", tm, nqs, kv.SeqLens)
	}
	opts.CuSeqQ, opts.TreeMask = nil, attention.TreeMask{}
	for s, nq := range nqs {
		if nq == 0 {
			continue
		}
		n := int(kv.SeqLens[s])
		qo, qv := seqView(ql, cu[s], nq)
		ov := attention.BHSD(1, hq, nq, dv)
		check := func(what string, o1, l1 []float32) {
			for h := range hq {
				for i := range nq {
					if !sameBits(out[ol.Offset(0, h, cu[s]+i):][:dv], o1[ov.Offset(0, h, i):][:dv]) {
						t.Fatalf("tree masks %v: sequence %d (nq %d, keys %d) head %d row %d differs from %s", masks, s, nq, n, h, i, what)
					}
				}
				if !sameBits(lse[h*total+cu[s]:][:nq], l1[h*nq:][:nq]) {
					t.Fatalf("tree masks %v: sequence %d head %d lse differs from %s", masks, s, h, what)
				}
			}
		}
		one := attention.PagedKV{K: kv.K, V: kv.V, BlockTable: kv.BlockTable[s*kv.MaxBlocks:][:kv.MaxBlocks], MaxBlocks: kv.MaxBlocks, SeqLens: kv.SeqLens[s : s+1]}
		alone := opts
		alone.TreeMask = packTree([][]bool{masks[s]})
		o1, l1 := make([]float32, ov.Span()), make([]float32, hq*nq)
		if err := e.ForwardPagedKVLSE(attention.F32Tensor(o1, ov), l1, attention.F32Tensor(q[qo:], qv), one, alone); err != nil {
			t.Fatal(err)
		}
		check("its own call", o1, l1)
		if dt == attention.Q8 {
			continue
		}
		gk, gv := make([]float32, hkv*n*d), make([]float32, hkv*n*dv)
		for pos := range n {
			blk := int(one.BlockTable[pos/bs])
			for h := range hkv {
				copy(gk[(h*n+pos)*d:][:d], kf[l.Offset(blk, h, pos%bs):][:d])
				copy(gv[(h*n+pos)*dv:][:dv], vf[l.Offset(blk, h, pos%bs):][:dv])
			}
		}
		fw := opts
		if masks[s] != nil {
			fw.BoolMask = treeBoolMask(masks[s], nq, n)
		}
		o2, l2 := make([]float32, ov.Span()), make([]float32, hq*nq)
		if err := e.ForwardLSE(attention.F32Tensor(o2, ov), l2, attention.F32Tensor(q[qo:], qv), typedTensor(t, dt, gk, attention.BHSD(1, hkv, n, d)),
			typedTensor(t, dt, gv, attention.BHSD(1, hkv, n, dv)), fw); err != nil {
			t.Fatal(err)
		}
		check("Forward with the BoolMask", o2, l2)
	}
}

// BenchmarkPagedKVTreeMask measures a speculative-decoding step from a
// caller's pool in vLLM's layout (Hq 32, Hkv 8, d 128, f16 blocks of 16)
// over eight sequences of 512 to 4096 positions, each verifying a tree of
// 8 drafts (step=trees), or six doing so beside two prefill chunks of 512
// (step=trees+prefill); mask=tree with Options.TreeMask, mask=none the
// same step with the causal rule alone (a chain of drafts), whose
// difference is what the trees cost.
func BenchmarkPagedKVTreeMask(b *testing.B) {
	const hkv, hq, d, bs, drafts = 8, 32, 128, 16, 8
	lens := []int{700, 4096, 1500, 2048, 3000, 1024, 512, 1536}
	rng := rand.New(rand.NewPCG(709, 710))
	pool := newVLLMPool(b, rng, attention.F16, false, hkv, d, bs, lens)
	for _, sc := range []struct {
		name  string
		trees int // the first trees sequences verify drafts; the others prefill 512
	}{{"trees", 8}, {"trees+prefill", 6}} {
		nqs, masks := make([]int, len(lens)), make([][]bool, len(lens))
		for s := range nqs {
			nqs[s] = 512
			if s < sc.trees {
				nqs[s], masks[s] = drafts, treeRows(rng, drafts, false)
			}
		}
		cu := offsets(nqs)
		ql := attention.BSHD(1, cu[len(nqs)], hq, d)
		q, out := randn(rng, ql.Span()), make([]float32, ql.Span())
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			for _, tree := range []bool{true, false} {
				mask := "none"
				opts := attention.Options{Causal: true, Precision: prec, CuSeqQ: cu}
				if tree {
					mask, opts.TreeMask = "tree", packTree(masks)
				}
				b.Run(fmt.Sprintf("step=%s/%v/mask=%s", sc.name, prec, mask), func(b *testing.B) {
					e := mustEngine(b, attention.Config{})
					step := func() {
						if err := e.ForwardPagedKV(attention.F32Tensor(out, ql), attention.F32Tensor(q, ql), pool.kv, opts); err != nil {
							b.Fatal(err)
						}
					}
					step()
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						step()
					}
				})
			}
		}
	}
}
