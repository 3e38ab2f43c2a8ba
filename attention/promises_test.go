package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/internal/impltest"
	"github.com/flashgo/flashgo/internal/tier"
)

// The engine's promises, each a cell of this table per entry point: every
// cell runs on every kernel implementation this machine has (forEachImpl),
// in both precisions, with f32, f16, bf16 and Q8 keys and values, in the
// long tier; the fast tier runs a sample of the cells (tier.Run).
//
//	promise                      Forward[LSE]  ForwardKVCaches[LSE]  ForwardPaged[LSE]  ForwardPagedKV[LSE]
//	error, not panic; nothing    x             x  +CuSeqQ  +Tree     x  +CuSeqQ  +Tree  x  +CuSeqQ  +Tree
//	  written; no input modified
//	  (zero and negative dims,
//	  outputs on every input,
//	  bad offsets, bad masks)
//	inputs never modified        x             x  +CuSeqQ  +Tree     x  +CuSeqQ  +Tree  x  +CuSeqQ  +Tree
//	bits independent of threads  x             x  +CuSeqQ  +Tree     x  +CuSeqQ  +Tree  x  +CuSeqQ  +Tree
//	paged = contiguous           x (per seq.)  x  +CuSeqQ  +Tree     x  +CuSeqQ  +Tree  x  +CuSeqQ  +Tree
//	V as a view of K = equal     x             (one head dim: none)                     x  +CuSeqQ
//	  dims
//
// The +CuSeqQ entries are the batched ones with per-sequence query counts
// (Options.CuSeqQ): the same sequences, each with its own number of
// queries, packed into one batch entry. The +Tree entries are those with
// a tree mask (Options.TreeMask) over the drafts of two of the sequences,
// whose reference per sequence is Forward with the equivalent BoolMask.
//
// Merge, MergeN, KVCache.Append and PagedCache.Append have the first two
// rows in TestPromisesMergeAppend; their outputs are not computed per
// thread. PagedKV.Write, PagedKV.SlotMapping, KVCache.Read and
// PagedCache.Read have them, with no allocation once warm, in
// TestPromisesWriteRead (kvio_test.go), on every storage type. TestDimVMatchesEqualDims and the view-of-K tests check the last
// row in more shapes.
var promiseTable = []struct {
	promise string
	entries []string // entry point names; nil: all of entryPoints
	check   func(t *testing.T, fx *promiseFixture, ep *entryPoint)
}{
	{"error not panic, nothing written", nil, checkHostileCalls},
	{"inputs never modified", nil, checkInputsUnmodified},
	{"bits independent of threads", nil, checkThreadBits},
	{"paged equals contiguous", nil, checkPagedEqualsContiguous},
	{"V as a view of K equals equal dims", []string{"Forward", "ForwardLSE", "ForwardPagedKV", "ForwardPagedKVLSE", "ForwardPagedKV+CuSeqQ", "ForwardPagedKVLSE+CuSeqQ"}, checkViewOfK},
}

// TestPromises runs every cell of promiseTable.
func TestPromises(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			t.Run(prec.String(), inPrecision(prec, func(t *testing.T) {
				for _, dt := range []attention.DType{attention.F32, attention.F16, attention.BF16, attention.Q8} {
					t.Run(dt.String(), func(t *testing.T) {
						fx := newPromiseFixture(t, dt)
						for _, row := range promiseTable {
							for i := range entryPoints {
								ep := &entryPoints[i]
								if row.entries != nil && !contains(row.entries, ep.name) {
									continue
								}
								tier.Run(t, row.promise+"/"+ep.name, 12, func(t *testing.T) { row.check(t, fx, ep) })
							}
						}
					})
				}
			}))
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// promiseFixture is one batch of sequences held in every K/V source: a
// KVCache per sequence, a PagedCache, a caller's paged pool (vLLM's
// layout) and, for Forward, sequence fwdSeq as K/V views. The small
// inputs (block table, lengths, sequence ids, slopes, sinks) lie in an
// arena, each followed by room for an output, as in a serving loop that
// carves its buffers out of one allocation: an output placed on one of
// them stays inside the arena.
type promiseFixture struct {
	dt                    attention.DType
	batch, hq, hkv, nq, d int
	lens                  []int
	q                     []float32 // [batch, hq, nq, d]
	qF                    []float32 // sequence fwdSeq's queries, [1, hq, nq, d]
	fwdK, fwdV            attention.Tensor
	caches                []*attention.KVCache
	pc                    *attention.PagedCache
	seqs                  []attention.SeqID  // in the arena
	kv                    attention.PagedKV  // BlockTable and SeqLens in the arena
	slopes, sinks         []float32          // in the arena
	nqs                   []int              // the +CuSeqQ entries' query counts: batch·nq in all
	cuQ                   []int              // their offsets, in the arena
	trees                 [][]bool           // the +Tree entries' masks, [nq][nq] per sequence (nil: none)
	tree                  attention.TreeMask // packed, Bits and Offsets in the arena
	qP                    []float32          // their packed queries, [1, hq, batch·nq, d]
	arena                 []float32
	used                  int // floats of the arena carved so far
}

const fwdSeq = 2 // the sequence Forward computes: the longest

func newPromiseFixture(t *testing.T, dt attention.DType) *promiseFixture {
	t.Helper()
	d := 40 // no multiple of a vector width
	if dt == attention.Q8 {
		d = 64
	}
	fx := &promiseFixture{dt: dt, batch: 3, hq: 4, hkv: 2, nq: 3, d: d, lens: []int{5, 3, 1100}}
	rng := rand.New(rand.NewPCG(251, uint64(dt)))
	pool := newVLLMPool(t, rng, dt, false, fx.hkv, d, 16, fx.lens)
	fx.arena = make([]float32, 1<<15)
	fx.q = randn(rng, fx.batch*fx.hq*fx.nq*d)
	fx.qF = append([]float32(nil), fx.q[fwdSeq*fx.hq*fx.nq*d:][:fx.hq*fx.nq*d]...)
	n := fx.lens[fwdSeq]
	fx.fwdK = typedTensor(t, dt, pool.seqK[fwdSeq], attention.BHSD(1, fx.hkv, n, d))
	fx.fwdV = typedTensor(t, dt, pool.seqV[fwdSeq], attention.BHSD(1, fx.hkv, n, d))
	var err error
	fx.pc, err = attention.NewPagedCache(dt, fx.hkv, d, 16, 200)
	require.NoError(t, err)
	fx.seqs = carve[attention.SeqID](fx, fx.batch)
	for b, n := range fx.lens {
		k := attention.F32Tensor(pool.seqK[b], attention.BHSD(1, fx.hkv, n, d))
		v := attention.F32Tensor(pool.seqV[b], attention.BHSD(1, fx.hkv, n, d))
		kc, err := attention.NewKVCache(dt, fx.hkv, n+1100, d) // room after the keys: an output may lie there
		require.NoError(t, err)
		require.NoError(t, kc.Append(k, v))
		fx.caches = append(fx.caches, kc)
		fx.seqs[b] = fx.pc.NewSequence()
		require.NoError(t, fx.pc.Append(fx.seqs[b], k, v))
	}
	fx.kv = pool.kv
	fx.kv.BlockTable = carve[int32](fx, len(pool.kv.BlockTable))
	copy(fx.kv.BlockTable, pool.kv.BlockTable)
	fx.kv.SeqLens = carve[int32](fx, fx.batch)
	copy(fx.kv.SeqLens, pool.kv.SeqLens)
	fx.slopes = carve[float32](fx, fx.hq)
	fx.sinks = carve[float32](fx, fx.hq)
	// A decode, a sequence whose queries are all its keys, a chunk of a
	// long one: as many rows as the batch of nq each.
	fx.nqs = []int{1, 3, 5}
	fx.cuQ = carve[int](fx, fx.batch+1)
	for b, n := range fx.nqs {
		fx.cuQ[b+1] = fx.cuQ[b] + n
	}
	total := fx.cuQ[fx.batch]
	fx.qP = randn(rng, fx.hq*total*d)
	// Trees over the drafts of the second sequence (all its keys) and the
	// third (its last 5 of 1,100); none for the decode.
	fx.trees = [][]bool{nil, treeRows(rng, fx.nqs[1], false), treeRows(rng, fx.nqs[2], false)}
	packed := packTree(fx.trees)
	fx.tree.Bits = carve[uint8](fx, len(packed.Bits))
	copy(fx.tree.Bits, packed.Bits)
	fx.tree.Offsets = carve[int](fx, len(packed.Offsets))
	copy(fx.tree.Offsets, packed.Offsets)
	for h := range fx.hq {
		fx.slopes[h] = 0.01 * float32(h+1)
		fx.sinks[h] = 0.5 - float32(h)
	}
	return fx
}

// carve returns n elements of type T from the fixture's arena, followed by
// room for any output of the fixture's calls.
func carve[T any](fx *promiseFixture, n int) []T {
	var z T
	floats := (n*int(unsafe.Sizeof(z)) + 7) / 8 * 2 // whole 8-byte words
	room := fx.batch*fx.hq*fx.nq*fx.d + 64
	if fx.used+floats+room > len(fx.arena) {
		panic("promiseFixture: arena too small")
	}
	s := unsafe.Slice((*T)(unsafe.Pointer(&fx.arena[fx.used])), n)
	fx.used += floats + room
	return s
}

// opts returns the options of every call: causal, ALiBi slopes and sinks
// (which the call reads, so that outputs are checked against them too).
func (fx *promiseFixture) opts() attention.Options {
	return attention.Options{Causal: true, Slopes: fx.slopes, Sinks: fx.sinks, Precision: precisionUnderTest}
}

// callArgs are the arguments of one call of an entry point, which a
// hostile case changes.
type callArgs struct {
	out    attention.Tensor
	lse    []float32
	q      attention.Tensor
	k, v   attention.Tensor // Forward
	caches []*attention.KVCache
	pc     *attention.PagedCache
	seqs   []attention.SeqID
	kv     attention.PagedKV
	opts   attention.Options
}

// memory is a buffer a call reads, named as an error names it.
type memory struct {
	name  string
	mem   []byte
	arena bool // in the fixture's arena: an output may start on it and run on
}

// entryPoint is one public attention entry point under test.
type entryPoint struct {
	name  string
	lse   bool
	batch bool // a batch of sequences (not Forward over sequence fwdSeq)
	run   func(e *attention.Engine, a *callArgs) error
}

// packed reports whether ep is a batched entry point with per-sequence
// query counts: the batch's queries packed, with Options.CuSeqQ.
func (ep *entryPoint) packed() bool { return strings.Contains(ep.name, "+CuSeqQ") }

// tree reports whether ep is a +CuSeqQ entry point with tree masks
// (Options.TreeMask).
func (ep *entryPoint) tree() bool { return strings.HasSuffix(ep.name, "+Tree") }

var entryPoints = []entryPoint{
	{"Forward", false, false, func(e *attention.Engine, a *callArgs) error { return e.Forward(a.out, a.q, a.k, a.v, a.opts) }},
	{"ForwardLSE", true, false, func(e *attention.Engine, a *callArgs) error {
		return e.ForwardLSE(a.out, a.lse, a.q, a.k, a.v, a.opts)
	}},
	{"ForwardKVCaches", false, true, func(e *attention.Engine, a *callArgs) error {
		return e.ForwardKVCaches(a.out, a.q, a.caches, a.opts)
	}},
	{"ForwardKVCachesLSE", true, true, func(e *attention.Engine, a *callArgs) error {
		return e.ForwardKVCachesLSE(a.out, a.lse, a.q, a.caches, a.opts)
	}},
	{"ForwardPaged", false, true, func(e *attention.Engine, a *callArgs) error {
		return e.ForwardPaged(a.out, a.q, a.pc, a.seqs, a.opts)
	}},
	{"ForwardPagedLSE", true, true, func(e *attention.Engine, a *callArgs) error {
		return e.ForwardPagedLSE(a.out, a.lse, a.q, a.pc, a.seqs, a.opts)
	}},
	{"ForwardPagedKV", false, true, func(e *attention.Engine, a *callArgs) error {
		return e.ForwardPagedKV(a.out, a.q, a.kv, a.opts)
	}},
	{"ForwardPagedKVLSE", true, true, func(e *attention.Engine, a *callArgs) error {
		return e.ForwardPagedKVLSE(a.out, a.lse, a.q, a.kv, a.opts)
	}},
}

// The batched entry points with per-sequence query counts, and with tree
// masks besides.
func init() {
	for _, ep := range entryPoints {
		if ep.batch {
			ep.name += "+CuSeqQ"
			entryPoints = append(entryPoints, ep)
			ep.name += "+Tree"
			entryPoints = append(entryPoints, ep)
		}
	}
}

// args returns the arguments of a valid call of ep with fresh outputs
// filled with the sentinel byte.
func (fx *promiseFixture) args(ep *entryPoint) *callArgs {
	b, nq := fx.batch, fx.nq
	q := fx.q
	if !ep.batch {
		b, q = 1, fx.qF
	}
	if ep.packed() {
		b, nq, q = 1, fx.batch*fx.nq, fx.qP
	}
	a := &callArgs{
		q:      attention.F32Tensor(q, attention.BHSD(b, fx.hq, nq, fx.d)),
		out:    attention.F32Tensor(impltest.Filled(b*fx.hq*nq*fx.d, sentinelFloat), attention.BHSD(b, fx.hq, nq, fx.d)),
		k:      fx.fwdK,
		v:      fx.fwdV,
		caches: fx.caches,
		pc:     fx.pc,
		seqs:   fx.seqs,
		kv:     fx.kv,
		opts:   fx.opts(),
	}
	if ep.lse {
		a.lse = impltest.Filled(b*fx.hq*nq, sentinelFloat)
	}
	if ep.packed() {
		a.opts.CuSeqQ = fx.cuQ
	}
	if ep.tree() {
		a.opts.TreeMask = fx.tree
	}
	return a
}

// sentinelFloat is the float32 of four sentinel bytes.
var sentinelFloat = math.Float32frombits(sentinel * 0x01010101)

// inputs returns every buffer a call of ep reads.
func (fx *promiseFixture) inputs(ep *entryPoint, a *callArgs) []memory {
	mem := []memory{{"q", sliceBytes(a.q.Float32s()), false}}
	named := func(name string, parts [][]byte) {
		for i, p := range parts {
			n := name
			if i%2 == 1 && fx.dt == attention.Q8 {
				n += " scales"
			}
			mem = append(mem, memory{n, p, false})
		}
	}
	switch {
	case ep.name == "Forward" || ep.name == "ForwardLSE":
		named("k", attention.TensorMemory(a.k))
		named("v", attention.TensorMemory(a.v))
	case strings.HasPrefix(ep.name, "ForwardKVCaches"):
		for b, kc := range a.caches {
			for _, p := range attention.CacheMemory(kc) {
				mem = append(mem, memory{fmt.Sprintf("caches[%d]", b), p, false})
			}
		}
	case strings.HasPrefix(ep.name, "ForwardPagedKV"):
		named("kv.K", attention.TensorMemory(a.kv.K))
		named("kv.V", attention.TensorMemory(a.kv.V))
		mem = append(mem, memory{"kv.BlockTable", sliceBytes(a.kv.BlockTable), true}, memory{"kv.SeqLens", sliceBytes(a.kv.SeqLens), true})
	default: // ForwardPaged
		for _, p := range attention.PagedCacheMemory(fx.pc) {
			mem = append(mem, memory{"the cache's", p, false})
		}
		mem = append(mem, memory{"seqs", sliceBytes(a.seqs), true})
	}
	mem = append(mem, memory{"Options.Slopes", sliceBytes(fx.slopes), true}, memory{"Options.Sinks", sliceBytes(fx.sinks), true})
	if ep.packed() {
		mem = append(mem, memory{"Options.CuSeqQ", sliceBytes(fx.cuQ), true})
	}
	if ep.tree() {
		mem = append(mem, memory{"Options.TreeMask.Bits", sliceBytes(fx.tree.Bits), true}, memory{"Options.TreeMask.Offsets", sliceBytes(fx.tree.Offsets), true})
	}
	return mem
}

// floatsOn returns n float32 starting where m does: on the buffer itself,
// or, for a buffer in the arena, running on into the room after it.
func floatsOn(t *testing.T, m memory, n int) []float32 {
	t.Helper()
	if !m.arena && len(m.mem) < 4*n {
		t.Fatalf("%s has %d bytes; an output needs %d", m.name, len(m.mem), 4*n)
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&m.mem[0])), n)
}

// hostile is a change that makes a call invalid, with a word the error
// must contain.
type hostile struct {
	name string
	want string
	bad  func(a *callArgs)
}

// hostileCases returns the invalid calls of ep: zero and negative dims,
// each output placed on each input and on the other output, and the
// source's own misuses.
func (fx *promiseFixture) hostileCases(t *testing.T, ep *entryPoint) []hostile {
	resize := func(x attention.Tensor, f func(l *attention.Layout)) attention.Tensor {
		l := x.Layout
		f(&l)
		return attention.F32Tensor(x.Float32s(), l)
	}
	cases := []hostile{
		{"q head dim 0", "", func(a *callArgs) {
			a.q = resize(a.q, func(l *attention.Layout) { l.Dim = 0 })
			a.out = resize(a.out, func(l *attention.Layout) { l.Dim = 0 })
		}},
		{"q 0 heads", "", func(a *callArgs) {
			a.q = resize(a.q, func(l *attention.Layout) { l.Heads = 0 })
			a.out = resize(a.out, func(l *attention.Layout) { l.Heads = 0 })
		}},
		{"q negative seq", "want >= 0", func(a *callArgs) { a.q = resize(a.q, func(l *attention.Layout) { l.Seq = -1 }) }},
		{"q negative stride", "want >= 0", func(a *callArgs) { a.q = resize(a.q, func(l *attention.Layout) { l.HeadStride = -1 }) }},
		{"out negative dim", "want >= 0", func(a *callArgs) { a.out = resize(a.out, func(l *attention.Layout) { l.Dim = -1 }) }},
		{"out head dim + 1", "out has shape", func(a *callArgs) {
			l := a.out.Layout
			a.out = attention.F32Tensor(impltest.Filled(l.Batch*l.Heads*l.Seq*(l.Dim+1), sentinelFloat), attention.BHSD(l.Batch, l.Heads, l.Seq, l.Dim+1))
		}},
	}
	if ep.lse {
		cases = append(cases, hostile{"lse short", "lse has", func(a *callArgs) { a.lse = a.lse[:len(a.lse)-1] }},
			hostile{"lse on out", "overlaps", func(a *callArgs) { a.lse = a.out.Float32s()[3:][:len(a.lse)] }})
	}
	switch {
	case !ep.batch:
		cases = append(cases,
			hostile{"k head dim 0", "", func(a *callArgs) { a.k = withDim(a.k, 0) }},
			hostile{"v head dim 0", "", func(a *callArgs) { a.v = withDim(a.v, 0) }},
			hostile{"k negative seq", "want >= 0", func(a *callArgs) { a.k = withSeq(a.k, -3) }},
		)
	case strings.HasPrefix(ep.name, "ForwardKVCaches"):
		cases = append(cases,
			hostile{"nil cache", "caches[1] is nil", func(a *callArgs) { a.caches = []*attention.KVCache{a.caches[0], nil, a.caches[2]} }},
			hostile{"zero cache", "zero KVCache", func(a *callArgs) {
				a.caches = []*attention.KVCache{a.caches[0], {}, a.caches[2]}
			}},
		)
	case strings.HasPrefix(ep.name, "ForwardPagedKV"):
		cases = append(cases,
			hostile{"pools of head dim 0", "", func(a *callArgs) { a.kv.K, a.kv.V = withDim(a.kv.K, 0), withDim(a.kv.V, 0) }},
			hostile{"pools of 0 heads", "", func(a *callArgs) { a.kv.K, a.kv.V = withHeads(a.kv.K, 0), withHeads(a.kv.V, 0) }},
			hostile{"pools of negative dim", "want >= 0", func(a *callArgs) { a.kv.K, a.kv.V = withDim(a.kv.K, -1), withDim(a.kv.V, -1) }},
			hostile{"negative MaxBlocks", "MaxBlocks", func(a *callArgs) { a.kv.MaxBlocks = -1 }},
			hostile{"negative length", "SeqLens[1]", func(a *callArgs) { a.kv.SeqLens = []int32{a.kv.SeqLens[0], -1, a.kv.SeqLens[2]} }},
			hostile{"block out of range", "BlockTable[0][0]", func(a *callArgs) {
				a.kv.BlockTable = append([]int32{int32(a.kv.K.Batch)}, a.kv.BlockTable[1:]...)
			}},
		)
	default: // ForwardPaged
		cases = append(cases, hostile{"unknown sequence", "unknown or freed", func(a *callArgs) {
			a.seqs = []attention.SeqID{a.seqs[0], a.seqs[1] + 1000, a.seqs[2]}
		}})
	}
	if ep.packed() {
		cu := func(cu ...int) func(a *callArgs) { return func(a *callArgs) { a.opts.CuSeqQ = cu } }
		count := "Options.CuSeqQ has 3 offsets (2 sequences)"
		if strings.HasPrefix(ep.name, "ForwardPagedKV") {
			count = "kv.SeqLens has 3 lengths and Options.CuSeqQ 3 offsets (2 sequences)"
		}
		cases = append(cases,
			hostile{"CuSeqQ empty", "Options.CuSeqQ is empty", func(a *callArgs) { a.opts.CuSeqQ = []int{} }},
			hostile{"CuSeqQ from 1", "Options.CuSeqQ[0] is 1; want 0", cu(1, 4, 9)},
			hostile{"CuSeqQ decreasing", "Options.CuSeqQ[2] is 1, less than CuSeqQ[1] = 4", cu(0, 4, 1, 9)},
			hostile{"CuSeqQ short of Nq", "Options.CuSeqQ[3] is 8; want Nq = 9", cu(0, 1, 4, 8)},
			hostile{"CuSeqQ past Nq", "Options.CuSeqQ[3] is 10; want Nq = 9", cu(0, 1, 4, 10)},
			hostile{"CuSeqQ sequences", count, cu(0, 4, 9)},
			hostile{"CuSeqKV", "Options.CuSeqKV is not supported", func(a *callArgs) { a.opts.CuSeqKV = []int{0, 5, 8, 1108} }},
			hostile{"TreeMask offsets", "Options.TreeMask.Offsets has 3 offsets for 3 sequences", func(a *callArgs) {
				a.opts.TreeMask = attention.TreeMask{Bits: fx.tree.Bits, Offsets: fx.tree.Offsets[:3]}
			}},
			hostile{"TreeMask padding bit", "bits of sequence 1 past its 3·3 are set", func(a *callArgs) {
				bits := append([]uint8(nil), fx.tree.Bits...)
				bits[fx.tree.Offsets[2]-1] |= 0x80
				a.opts.TreeMask = attention.TreeMask{Bits: bits, Offsets: fx.tree.Offsets}
			}},
			hostile{"TreeMask on a sequence of fewer keys", "want at least as many keys as queries", func(a *callArgs) {
				// The decode's one query, then 5 queries for the 3 keys of
				// the second sequence and 3 for the third.
				a.opts.CuSeqQ = []int{0, 1, 6, 9}
				a.opts.TreeMask = packTree([][]bool{nil, make([]bool, 25), make([]bool, 9)})
			}},
			hostile{"batch 3", "q has batch 3 with Options.CuSeqQ set; want 1", func(a *callArgs) {
				a.q = attention.F32Tensor(a.q.Float32s(), attention.BHSD(fx.batch, fx.hq, fx.nq, fx.d))
				a.out = attention.F32Tensor(a.out.Float32s(), a.q.Layout)
			}},
		)
	}
	for _, m := range fx.inputs(ep, fx.args(ep)) {
		if !m.arena && len(m.mem) < 4*fx.args(ep).out.Span() {
			t.Logf("%s: %d bytes, too small to hold an output", m.name, len(m.mem))
		} else {
			cases = append(cases, hostile{"out on " + m.name, "out overlaps " + m.name, func(a *callArgs) {
				a.out = attention.F32Tensor(floatsOn(t, m, a.out.Span()), a.out.Layout)
			}})
		}
		if ep.lse {
			cases = append(cases, hostile{"lse on " + m.name, "lse overlaps " + m.name, func(a *callArgs) {
				a.lse = floatsOn(t, m, len(a.lse))
			}})
		}
	}
	return cases
}

func withDim(x attention.Tensor, d int) attention.Tensor {
	x.Dim = d
	return x
}

func withSeq(x attention.Tensor, n int) attention.Tensor {
	x.Seq = n
	return x
}

func withHeads(x attention.Tensor, n int) attention.Tensor {
	x.Heads = n
	return x
}

// snapshot copies every buffer of the call (inputs, caches' storage, the
// arena and the outputs).
func (fx *promiseFixture) snapshot(ep *entryPoint, a *callArgs) [][]byte {
	var s [][]byte
	for _, m := range fx.inputs(ep, fx.args(ep)) {
		s = append(s, append([]byte(nil), m.mem...))
	}
	s = append(s, append([]byte(nil), sliceBytes(fx.arena)...), append([]byte(nil), sliceBytes(a.out.Float32s())...), append([]byte(nil), sliceBytes(a.lse)...))
	for _, kc := range fx.caches {
		for _, p := range attention.CacheMemory(kc) {
			s = append(s, append([]byte(nil), p...))
		}
	}
	return s
}

// checkHostileCalls: every hostile call returns an error (no panic) and
// changes no byte of any buffer.
func checkHostileCalls(t *testing.T, fx *promiseFixture, ep *entryPoint) {
	e := mustEngine(t, attention.Config{Threads: 2})
	for _, h := range fx.hostileCases(t, ep) {
		t.Run(h.name, func(t *testing.T) {
			a := fx.args(ep)
			h.bad(a)
			beforeBad := fx.snapshot(ep, a)
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				return ep.run(e, a)
			}()
			afterBad := fx.snapshot(ep, a)
			require.Error(t, err)
			require.NotContains(t, err.Error(), "panic")
			require.ErrorContains(t, err, h.want)
			for i := range beforeBad {
				require.Equal(t, beforeBad[i], afterBad[i], "buffer %d changed by a call that failed with %q", i, err)
			}
		})
	}
}

// checkInputsUnmodified: a valid call changes no byte of its inputs, the
// caches' storage included, and writes every element of its outputs.
func checkInputsUnmodified(t *testing.T, fx *promiseFixture, ep *entryPoint) {
	e := mustEngine(t, attention.Config{Threads: 2})
	a := fx.args(ep)
	mems := fx.inputs(ep, a)
	before := make([][]byte, len(mems))
	for i, m := range mems {
		before[i] = append([]byte(nil), m.mem...)
	}
	require.NoError(t, ep.run(e, a))
	for i, m := range mems {
		require.Equal(t, before[i], m.mem, "%s modified", m.name)
	}
	for i, x := range a.out.Float32s() {
		require.NotEqual(t, uint32(sentinel*0x01010101), math.Float32bits(x), "out[%d] not written", i)
	}
}

// result runs ep with a fresh engine of cfg and returns out and lse.
func (fx *promiseFixture) result(t *testing.T, ep *entryPoint, cfg attention.Config) ([]float32, []float32) {
	t.Helper()
	a := fx.args(ep)
	require.NoError(t, ep.run(mustEngine(t, cfg), a))
	return a.out.Float32s(), a.lse
}

// checkThreadBits: 1, 3 and 4 threads give the same bits.
func checkThreadBits(t *testing.T, fx *promiseFixture, ep *entryPoint) {
	out1, lse1 := fx.result(t, ep, attention.Config{Threads: 1})
	for _, n := range []int{3, 4} {
		out, lse := fx.result(t, ep, attention.Config{Threads: n})
		requireSameBits(t, out, out1, "out, 1 and %d threads", n)
		requireSameBits(t, lse, lse1, "lse, 1 and %d threads", n)
	}
}

// checkPagedEqualsContiguous: every batched entry point gives, per
// sequence, the bits of Forward over that sequence's K/V (with the split
// of the keys fixed: Config.KVSplits 1), and ForwardPaged and
// ForwardPagedKV give those of ForwardKVCaches in any configuration.
func checkPagedEqualsContiguous(t *testing.T, fx *promiseFixture, ep *entryPoint) {
	if !ep.batch {
		// Forward is the reference of the batched entries; here its own
		// sequence's rows against ForwardKVCaches'.
		out, lse := fx.result(t, ep, attention.Config{Threads: 2, KVSplits: 1})
		ref := entryNamed("ForwardKVCaches", ep.lse)
		bOut, bLSE := fx.result(t, ref, attention.Config{Threads: 2, KVSplits: 1})
		rows := fx.hq * fx.nq
		requireSameBits(t, out, bOut[fwdSeq*rows*fx.d:][:rows*fx.d], "out against ForwardKVCaches' sequence %d", fwdSeq)
		if ep.lse {
			requireSameBits(t, lse, bLSE[fwdSeq*rows:][:rows], "lse against ForwardKVCaches' sequence %d", fwdSeq)
		}
		return
	}
	for _, cfg := range []attention.Config{{Threads: 2, KVSplits: 1}, {Threads: 3}} {
		out, lse := fx.result(t, ep, cfg)
		ref := entryNamed("ForwardKVCaches", ep.lse)
		switch {
		case ep.tree():
			ref = entryNamed("ForwardKVCaches", ep.lse, "+CuSeqQ+Tree")
		case ep.packed():
			ref = entryNamed("ForwardKVCaches", ep.lse, "+CuSeqQ")
		}
		wOut, wLSE := fx.result(t, ref, cfg)
		requireSameBits(t, out, wOut, "out against %s, %+v", ref.name, cfg)
		requireSameBits(t, lse, wLSE, "lse against %s, %+v", ref.name, cfg)
	}
	// Per sequence against Forward over its K/V, split fixed.
	out, _ := fx.result(t, ep, attention.Config{Threads: 2, KVSplits: 1})
	e := mustEngine(t, attention.Config{Threads: 2, KVSplits: 1})
	rows := fx.hq * fx.nq
	if ep.packed() {
		// Sequence b's rows of head h are rows cu[b]..cu[b+1] of head h's
		// packed rows.
		total := fx.cuQ[fx.batch]
		for b, kc := range fx.caches {
			nq := fx.nqs[b]
			view := attention.Layout{Batch: 1, Heads: fx.hq, Seq: nq, Dim: fx.d, BatchStride: fx.hq * total * fx.d, HeadStride: total * fx.d, SeqStride: fx.d}
			got := make([]float32, fx.hq*nq*fx.d)
			q := attention.F32Tensor(fx.qP[fx.cuQ[b]*fx.d:], view)
			opts := fx.opts()
			if ep.tree() && fx.trees[b] != nil {
				opts.BoolMask = treeBoolMask(fx.trees[b], nq, kc.Len())
			}
			require.NoError(t, e.Forward(attention.F32Tensor(got, attention.BHSD(1, fx.hq, nq, fx.d)), q, kc.K(), kc.V(), opts))
			for h := range fx.hq {
				requireSameBits(t, out[(h*total+fx.cuQ[b])*fx.d:][:nq*fx.d], got[h*nq*fx.d:][:nq*fx.d], "sequence %d head %d against Forward", b, h)
			}
		}
		return
	}
	for b, kc := range fx.caches {
		got := make([]float32, rows*fx.d)
		q := attention.F32Tensor(fx.q[b*rows*fx.d:][:rows*fx.d], attention.BHSD(1, fx.hq, fx.nq, fx.d))
		require.NoError(t, e.Forward(attention.F32Tensor(got, attention.BHSD(1, fx.hq, fx.nq, fx.d)), q, kc.K(), kc.V(), fx.opts()))
		requireSameBits(t, out[b*rows*fx.d:][:rows*fx.d], got, "sequence %d against Forward", b)
	}
}

// entryNamed returns the entry point of that name, or its LSE form, with
// the suffix (none, or "+CuSeqQ").
func entryNamed(name string, lse bool, suffix ...string) *entryPoint {
	if lse {
		name += "LSE"
	}
	for _, x := range suffix {
		name += x
	}
	for i := range entryPoints {
		if entryPoints[i].name == name {
			return &entryPoints[i]
		}
	}
	panic("no entry point " + name)
}

// checkViewOfK: V given as a view of K's first Dv components gives those
// columns of the V = K call, bit for bit.
func checkViewOfK(t *testing.T, fx *promiseFixture, ep *entryPoint) {
	e := mustEngine(t, attention.Config{Threads: 2})
	dv := 24
	if fx.dt == attention.Q8 {
		dv = 32
	}
	full := fx.args(ep)
	full.v, full.kv.V = full.k, full.kv.K
	require.NoError(t, ep.run(e, full))
	half := fx.args(ep)
	half.v, half.kv.V = withDim(half.k, dv), withDim(half.kv.K, dv)
	l := full.out.Layout
	half.out = attention.F32Tensor(make([]float32, l.Batch*l.Heads*l.Seq*dv), attention.BHSD(l.Batch, l.Heads, l.Seq, dv))
	require.NoError(t, ep.run(e, half))
	for r := range l.Batch * l.Heads * l.Seq {
		requireSameBits(t, half.out.Float32s()[r*dv:][:dv], full.out.Float32s()[r*fx.d:][:dv], "row %d", r)
	}
	if ep.lse {
		requireSameBits(t, half.lse, full.lse, "lse")
	}
}

// TestPagedAutoSplitMatchesForward checks ForwardPaged's promise of
// Forward's bits under the automatic split of the keys: for a batch whose
// longest sequence has fewer than 1,024 keys, and for a batch of one
// sequence of any length, each sequence's rows equal Forward over its K/V.
func TestPagedAutoSplitMatchesForward(t *testing.T) {
	const hq, hkv, d, nq = 4, 2, 24, 1
	forEachImpl(t, func(t *testing.T) {
		for _, lens := range [][]int{{1000, 7, 513}, {3000}} {
			rng := rand.New(rand.NewPCG(5, uint64(len(lens))))
			pc, err := attention.NewPagedCache(attention.F16, hkv, d, 16, 400)
			require.NoError(t, err)
			e := mustEngine(t, attention.Config{Threads: 3})
			B := len(lens)
			q := randn(rng, B*hq*nq*d)
			seqs := make([]attention.SeqID, B)
			var caches []*attention.KVCache
			for b, n := range lens {
				k := attention.F32Tensor(randn(rng, hkv*n*d), attention.BHSD(1, hkv, n, d))
				v := attention.F32Tensor(randn(rng, hkv*n*d), attention.BHSD(1, hkv, n, d))
				seqs[b] = pc.NewSequence()
				require.NoError(t, pc.Append(seqs[b], k, v))
				kc, err := attention.NewKVCache(attention.F16, hkv, n, d)
				require.NoError(t, err)
				require.NoError(t, kc.Append(k, v))
				caches = append(caches, kc)
			}
			out := make([]float32, len(q))
			opts := attention.Options{Causal: true, Precision: precisionUnderTest}
			require.NoError(t, e.ForwardPaged(attention.F32Tensor(out, attention.BHSD(B, hq, nq, d)), attention.F32Tensor(q, attention.BHSD(B, hq, nq, d)), pc, seqs, opts))
			rows := hq * nq * d
			for b, kc := range caches {
				got := make([]float32, rows)
				require.NoError(t, e.Forward(attention.F32Tensor(got, attention.BHSD(1, hq, nq, d)), attention.F32Tensor(q[b*rows:][:rows], attention.BHSD(1, hq, nq, d)), kc.K(), kc.V(), opts))
				requireSameBits(t, out[b*rows:][:rows], got, "lengths %v: sequence %d against Forward", lens, b)
			}
		}
	})
}

// TestPromisesMergeAppend is promiseTable's first two rows for Merge,
// MergeN, KVCache.Append and PagedCache.Append, on every implementation:
// hostile calls (negative dims, an output or a new row on an input or on
// the cache's storage) return an error and change no byte of any buffer,
// and valid calls modify no input.
func TestPromisesMergeAppend(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, dt := range []attention.DType{attention.F32, attention.F16, attention.BF16, attention.Q8} {
			t.Run(dt.String(), func(t *testing.T) { testPromisesMergeAppend(t, dt) })
		}
	})
}

func testPromisesMergeAppend(t *testing.T, dt attention.DType) {
	const b, h, n, d, hkv = 1, 2, 3, 32, 2
	rng := rand.New(rand.NewPCG(7, uint64(dt)))
	l := attention.BHSD(b, h, n, d)
	rows := b * h * n
	aBuf := randn(rng, l.Span()+1) // a, and room for an output shifted by one element
	a, bb := aBuf[:l.Span()], randn(rng, l.Span())
	lseA, lseB := randn(rng, rows), randn(rng, rows)
	kc, err := attention.NewKVCache(dt, hkv, 64, d)
	require.NoError(t, err)
	pc, err := attention.NewPagedCache(dt, hkv, d, 16, 8)
	require.NoError(t, err)
	id := pc.NewSequence()
	newK := attention.F32Tensor(randn(rng, hkv*n*d), attention.BHSD(1, hkv, n, d))
	newV := attention.F32Tensor(randn(rng, hkv*n*d), attention.BHSD(1, hkv, n, d))
	require.NoError(t, kc.Append(newK, newV))
	require.NoError(t, pc.Append(id, newK, newV))

	// every buffer any call below may touch, for the byte-for-byte checks
	all := func(extra ...[]byte) [][]byte {
		m := [][]byte{sliceBytes(a), sliceBytes(bb), sliceBytes(lseA), sliceBytes(lseB), sliceBytes(newK.Float32s()), sliceBytes(newV.Float32s())}
		m = append(m, attention.CacheMemory(kc)...)
		m = append(m, attention.PagedCacheMemory(pc)...)
		return append(m, extra...)
	}
	snapshot := func(m [][]byte) [][]byte {
		s := make([][]byte, len(m))
		for i, x := range m {
			s[i] = append([]byte(nil), x...)
		}
		return s
	}
	cacheK := attention.CacheMemory(kc)[0]
	onCache := func(nfl int) []float32 { return unsafe.Slice((*float32)(unsafe.Pointer(&cacheK[0])), nfl) }
	pagedK := attention.PagedCacheMemory(pc)[0]
	onPaged := func(nfl int) []float32 { return unsafe.Slice((*float32)(unsafe.Pointer(&pagedK[0])), nfl) }
	neg := l
	neg.Seq = -1
	type call struct {
		name, want string
		run        func() error
		outs       [][]byte
	}
	out, lse := impltest.Filled(l.Span(), sentinelFloat), impltest.Filled(rows, sentinelFloat)
	F := func(x []float32, l attention.Layout) attention.Tensor { return attention.F32Tensor(x, l) }
	calls := []call{
		{"Merge negative seq", "want >= 0", func() error { return attention.Merge(F(out, neg), lse, F(a, l), lseA, F(bb, l), lseB) }, nil},
		{"Merge out on b", "out overlaps b", func() error { return attention.Merge(F(bb, l), lse, F(a, l), lseA, F(bb, l), lseB) }, nil},
		{"Merge out on a, shifted", "without being the same view", func() error { return attention.Merge(F(aBuf[1:], l), lse, F(a, l), lseA, F(bb, l), lseB) }, nil},
		{"Merge lse on a", "lse overlaps a", func() error { return attention.Merge(F(out, l), a[:rows], F(a, l), lseA, F(bb, l), lseB) }, nil},
		{"Merge out on a cache", "", func() error {
			return attention.Merge(F(onCache(l.Span()), l), lse, F(a, l), lseA, F(onCache(l.Span()), l), lseB)
		}, nil},
		{"MergeN negative seq", "want >= 0", func() error {
			return attention.MergeN(F(out, neg), lse, []attention.Tensor{F(a, l), F(bb, l)}, [][]float32{lseA, lseB})
		}, nil},
		{"MergeN out on parts[1]", "out overlaps parts[1]", func() error {
			return attention.MergeN(F(bb, l), lse, []attention.Tensor{F(a, l), F(bb, l)}, [][]float32{lseA, lseB})
		}, nil},
		{"MergeN lse on lses[1]", "lse overlaps lses[1]", func() error {
			return attention.MergeN(F(out, l), lseB, []attention.Tensor{F(a, l), F(bb, l)}, [][]float32{lseA, lseB})
		}, nil},
		{"KVCache.Append negative seq", "want >= 0", func() error { return kc.Append(withSeq(newK, -1), withSeq(newV, -1)) }, nil},
		{"KVCache.Append head dim 0", "want [1 2 n 32]", func() error { return kc.Append(withDim(newK, 0), withDim(newV, 0)) }, nil},
		{"PagedCache.Append negative seq", "want >= 0", func() error { return pc.Append(id, withSeq(newK, -1), withSeq(newV, -1)) }, nil},
		{"PagedCache.Append 0 heads", "want [1 2 n 32]", func() error { return pc.Append(id, withHeads(newK, 0), withHeads(newV, 0)) }, nil},
	}
	if dt == attention.F32 {
		// A view of the cache's own rows as the new ones: K() reaches
		// them without unsafe.
		calls = append(calls, call{"KVCache.Append k = K()", "k overlaps the cache's keys", func() error { return kc.Append(kc.K(), newV) }, nil})
	}
	calls = append(calls,
		call{"KVCache.Append v on the cache", "v overlaps the cache's keys", func() error {
			return kc.Append(newK, F(onCache(newV.Span()), newV.Layout))
		}, nil},
		call{"PagedCache.Append k on the pool", "k overlaps the cache's keys", func() error {
			return pc.Append(id, F(onPaged(newK.Span()), newK.Layout), newV)
		}, nil},
	)
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			mem := all(sliceBytes(out), sliceBytes(lse))
			before := snapshot(mem)
			lenK, lenP := kc.Len(), 0
			lenP, _ = pc.Len(id)
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
			for i := range mem {
				require.Equal(t, before[i], mem[i], "buffer %d changed by a call that failed with %q", i, err)
			}
			require.Equal(t, lenK, kc.Len())
			n, _ := pc.Len(id)
			require.Equal(t, lenP, n)
		})
	}
	// Valid calls modify no input.
	in := [][]byte{sliceBytes(a), sliceBytes(bb), sliceBytes(lseA), sliceBytes(lseB), sliceBytes(newK.Float32s()), sliceBytes(newV.Float32s())}
	before := snapshot(in)
	require.NoError(t, attention.Merge(F(out, l), lse, F(a, l), lseA, F(bb, l), lseB))
	require.NoError(t, attention.MergeN(F(out, l), lse, []attention.Tensor{F(a, l), F(bb, l)}, [][]float32{lseA, lseB}))
	require.NoError(t, kc.Append(newK, newV))
	require.NoError(t, pc.Append(id, newK, newV))
	for i := range in {
		require.Equal(t, before[i], in[i], "input %d modified by a valid call", i)
	}
}

// TestPagedKVBlockOfOneStride checks pools of one position per block whose
// SeqStride is below the head dim (0, as a Layout literal that sets only
// the sizes leaves it): the stride is never stepped, so the call is valid
// and gives the bits of the dense stride.
func TestPagedKVBlockOfOneStride(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		const hkv, d, blocks = 1, 4, 3
		rng := rand.New(rand.NewPCG(3, 4))
		kd, vd := randn(rng, blocks*d), randn(rng, blocks*d)
		q := randn(rng, 2*d)
		run := func(stride int) ([]float32, []float32) {
			l := attention.BSHD(blocks, 1, hkv, d)
			l.SeqStride = stride
			kv := attention.PagedKV{K: attention.F32Tensor(kd, l), V: attention.F32Tensor(vd, l),
				BlockTable: []int32{0, 1, 2, 2, 1, 0}, MaxBlocks: 3, SeqLens: []int32{0, 3}}
			out, lse := make([]float32, 2*d), make([]float32, 2)
			e := mustEngine(t, attention.Config{Threads: 1})
			require.NoError(t, e.ForwardPagedKVLSE(attention.F32Tensor(out, attention.BHSD(2, 1, 1, d)), lse, attention.F32Tensor(q, attention.BHSD(2, 1, 1, d)), kv, attention.Options{}))
			return out, lse
		}
		wantOut, wantLSE := run(d)
		for _, stride := range []int{0, 1, 3} {
			out, lse := run(stride)
			requireSameBits(t, out, wantOut, "out, SeqStride %d", stride)
			requireSameBits(t, lse, wantLSE, "lse, SeqStride %d", stride)
		}
	})
}
