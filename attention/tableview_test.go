package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/internal/impltest"
)

// tableGarbage is what the entries of a wide table outside the rows of a
// view hold: a block id out of range, which a call that read it would
// refuse (or crash on).
const tableGarbage = int32(1 << 30)

// wideTable copies the rows of a compact table (B rows of mb entries, the
// last one possibly short) into a wider one of stride entries a row, row b
// starting at off + b·stride, every other entry tableGarbage, and returns
// the wide table and the view of it from off. With pad, the wide table is
// off + B·stride entries long, as a column slice of vLLM's block_table
// is; otherwise as short as the view may be, (B−1)·stride + mb (short by
// as many entries as the compact table is short of B·mb).
func wideTable(compact []int32, B, mb, stride, off int, pad bool) (wide, view []int32) {
	n, short := off, max(0, B*mb-len(compact))
	if B > 0 {
		n += (B-1)*stride + mb - short
	}
	if pad && short == 0 { // a short table stays short
		n = max(n, off+B*stride)
	}
	wide = make([]int32, n)
	for i := range wide {
		wide[i] = tableGarbage
	}
	for b := range B {
		copy(wide[off+b*stride:], compact[min(len(compact), b*mb):min(len(compact), (b+1)*mb)])
	}
	return wide, wide[off:]
}

// tableView returns kv with its table copied into a wider one at the given
// stride and offset (wideTable), read through BlockStride.
func tableView(kv attention.PagedKV, stride, off int, pad bool) attention.PagedKV {
	_, kv.BlockTable = wideTable(kv.BlockTable, len(kv.SeqLens), kv.MaxBlocks, stride, off, pad)
	kv.BlockStride = stride
	return kv
}

// TestPagedKVTableView reads a caller's pool through block tables that are
// views of wider ones (PagedKV.BlockStride, and an offset into the table)
// and checks every entry point that takes a PagedKV against the same call
// over the compact copy of the table, bitwise: ForwardPagedKVLSE with
// uniform and per-sequence (Options.CuSeqQ) query counts, for every K/V
// type, both precisions, one and three threads, in vLLM's layout and per
// head, and SlotMapping. The entries outside the rows are block ids out of
// range, so a call that read one would fail.
func TestPagedKVTableView(t *testing.T) {
	rng := rand.New(rand.NewPCG(601, 602))
	const hkv, g, d = 2, 2, 32
	hq := g * hkv
	lens := []int{37, 20, 1, 0, 130, 3}
	nqs := []int{1, 5, 1, 0, 17, 3}
	B := len(lens)
	for _, dt := range kvTypesQ8 {
		for _, perHead := range []bool{false, true} {
			pool := newVLLMPool(t, rng, dt, perHead, hkv, d, 16, lens)
			mb := pool.kv.MaxBlocks
			for _, v := range []struct{ stride, off int }{{mb, 0}, {mb, 3}, {mb + 1, 0}, {mb + 5, 2}, {3 * mb, 7}} {
				for _, pad := range []bool{false, true} {
					view := tableView(pool.kv, v.stride, v.off, pad)
					for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
						for _, threads := range []int{1, 3} {
							what := fmt.Sprintf("%v perHead %v stride %d off %d pad %v %v threads %d", dt, perHead, v.stride, v.off, pad, prec, threads)
							e := mustEngine(t, attention.Config{BlockKV: 32, Threads: threads})
							opts := attention.Options{Causal: true, Precision: prec}
							for _, nq := range []int{1, 3} {
								l := attention.BSHD(B, nq, hq, d)
								q := randn(rng, l.Span())
								run := func(kv attention.PagedKV) ([]float32, []float32) {
									out, lse := make([]float32, l.Span()), make([]float32, B*hq*nq)
									require.NoError(t, e.ForwardPagedKVLSE(attention.F32Tensor(out, l), lse, attention.F32Tensor(q, l), kv, opts), what)
									return out, lse
								}
								wo, wl := run(pool.kv)
								go_, gl := run(view)
								requireSameBits(t, go_, wo, "%s nq %d: out", what, nq)
								requireSameBits(t, gl, wl, "%s nq %d: lse", what, nq)
							}
							cu := offsets(nqs)
							ql := attention.BSHD(1, cu[B], hq, d)
							q := randn(rng, ql.Span())
							mixed := opts
							mixed.CuSeqQ = cu
							run := func(kv attention.PagedKV) ([]float32, []float32) {
								out, lse := make([]float32, ql.Span()), make([]float32, hq*cu[B])
								require.NoError(t, e.ForwardPagedKVLSE(attention.F32Tensor(out, ql), lse, attention.F32Tensor(q, ql), kv, mixed), what)
								return out, lse
							}
							wo, wl := run(pool.kv)
							go_, gl := run(view)
							requireSameBits(t, go_, wo, "%s CuSeqQ: out", what)
							requireSameBits(t, gl, wl, "%s CuSeqQ: lse", what)
						}
					}
					// The slots of a step through the view are those through the
					// compact table.
					for _, cu := range [][]int{nil, offsets(nqs)} {
						n, kv, kvView := B, pool.kv, view
						if cu != nil {
							n = cu[B]
						} else {
							kv, kvView = withoutEmpty(kv), withoutEmpty(kvView)
						}
						want, got := make([]int32, n), make([]int32, n)
						require.NoError(t, kv.SlotMapping(want, cu))
						require.NoError(t, kvView.SlotMapping(got, cu))
						require.Equal(t, want, got, "%v stride %d off %d: SlotMapping", dt, v.stride, v.off)
					}
				}
			}
		}
	}
}

// withoutEmpty returns kv with its sequences of no positions given one (a
// decode step's SlotMapping without offsets wants every sequence to have
// a newest position): the first slot of its row's first block, which
// newVLLMPool leaves garbage, is then a block of the pool's.
func withoutEmpty(kv attention.PagedKV) attention.PagedKV {
	kv.SeqLens = append([]int32(nil), kv.SeqLens...)
	kv.BlockTable = append([]int32(nil), kv.BlockTable...)
	stride := kv.BlockStride
	if stride == 0 {
		stride = kv.MaxBlocks
	}
	for b, n := range kv.SeqLens {
		if n == 0 {
			kv.SeqLens[b] = 1
			kv.BlockTable[b*stride] = 0
		}
	}
	return kv
}

// TestSharedPrefixTableView runs a shared-prefix step as a runtime that
// keeps one block table per sequence (prefix blocks, then its own) would:
// Prefix the first row's first columns, Suffix the column slice past them
// (an offset into the table, BlockStride its width). Every output and
// log-sum-exp must be bitwise that of the step over compact copies of the
// tables, with and without the prefix packed (PackedPrefix.Pack from the
// view, used with either), for every K/V type and both precisions.
func TestSharedPrefixTableView(t *testing.T) {
	rng := rand.New(rand.NewPCG(603, 604))
	const hkv, d, g, nq, bs, np = 2, 32, 4, 2, 16, 200
	suffix := []int{3, 0, 40, 17, 9}
	B, hq := len(suffix), g*hkv
	l := attention.BHSD(B, hq, nq, d)
	q := randn(rng, l.Span())
	for _, dt := range kvTypesQ8 {
		fx := newSharedFixture(t, rng, dt, hkv, d, bs, np, suffix)
		pre, suf := fx.kv.Prefix, fx.kv.Suffix
		pb, sb := pre.MaxBlocks, suf.MaxBlocks
		// Each sequence's whole table: [B][W], the prefix's blocks, its own,
		// then room for more (garbage).
		W := pb + sb + 3
		table := make([]int32, B*W)
		for i := range table {
			table[i] = tableGarbage
		}
		for b := range B {
			copy(table[b*W:], pre.BlockTable)
			copy(table[b*W+pb:], suf.BlockTable[b*sb:][:sb])
		}
		view := fx.kv
		view.Prefix.BlockTable, view.Prefix.BlockStride = table, W
		view.Suffix.BlockTable, view.Suffix.BlockStride = table[pb:], W
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			var packedC, packedV attention.PackedPrefix
			require.NoError(t, packedC.Pack(fx.kv.Prefix, prec))
			require.NoError(t, packedV.Pack(view.Prefix, prec))
			for _, threads := range []int{1, 3} {
				e := mustEngine(t, attention.Config{Threads: threads})
				opts := attention.Options{Causal: true, Precision: prec}
				run := func(kv attention.SharedPrefixKV) ([]float32, []float32) {
					out, lse := make([]float32, l.Span()), make([]float32, B*hq*nq)
					require.NoError(t, e.ForwardSharedPrefixLSE(attention.F32Tensor(out, l), lse, attention.F32Tensor(q, l), kv, opts))
					return out, lse
				}
				what := fmt.Sprintf("%v %v threads %d", dt, prec, threads)
				wo, wl := run(fx.kv)
				for _, c := range []struct {
					name   string
					packed *attention.PackedPrefix
				}{{"unpacked", nil}, {"packed from the view", &packedV}, {"packed from the compact table", &packedC}} {
					kv := view
					kv.Packed = c.packed
					go_, gl := run(kv)
					requireSameBits(t, go_, wo, "%s %s: out", what, c.name)
					requireSameBits(t, gl, wl, "%s %s: lse", what, c.name)
				}
				// The compact step with the panels packed from the view.
				kv := fx.kv
				kv.Packed = &packedV
				go_, gl := run(kv)
				requireSameBits(t, go_, wo, "%s compact with the view's panels: out", what)
				requireSameBits(t, gl, wl, "%s compact with the view's panels: lse", what)
			}
		}
	}
}

// TestPagedKVTableViewErrors checks that a BlockStride that is negative or
// below MaxBlocks, and a table short of (sequences−1)·stride + MaxBlocks
// entries, are errors that say what was wrong and what is wanted, with
// nothing written, from every entry point that takes a PagedKV; and that
// a table of exactly that many entries is accepted.
func TestPagedKVTableViewErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(605, 606))
	const hkv, hq, d, bs = 2, 4, 32, 4
	lens := []int{5, 9, 2}
	pool := newVLLMPool(t, rng, attention.F16, false, hkv, d, bs, lens)
	B, mb := len(lens), pool.kv.MaxBlocks
	e := mustEngine(t, attention.Config{})
	l := attention.BHSD(B, hq, 1, d)
	q := randn(rng, l.Span())
	exact := tableView(pool.kv, mb+2, 1, false)
	require.Len(t, exact.BlockTable, (B-1)*(mb+2)+mb)
	short := exact
	short.BlockTable = short.BlockTable[:len(short.BlockTable)-1]
	for _, c := range []struct {
		name string
		kv   attention.PagedKV
		want string
	}{
		{"negative stride", func() attention.PagedKV { kv := pool.kv; kv.BlockStride = -1; return kv }(),
			fmt.Sprintf("kv.BlockStride is -1; want >= kv.MaxBlocks = %d", mb)},
		{"stride below MaxBlocks", func() attention.PagedKV { kv := pool.kv; kv.BlockStride = mb - 1; return kv }(),
			fmt.Sprintf("kv.BlockStride is %d, less than kv.MaxBlocks = %d, so that rows of the table overlap; want >= %d", mb-1, mb, mb)},
		{"short view", short, fmt.Sprintf("kv.BlockTable has %d entries; want >= (sequences−1)·BlockStride + MaxBlocks = (3−1)·%d + %d", len(short.BlockTable), mb+2, mb)},
	} {
		out := impltest.Filled(l.Span(), float32(math.NaN()))
		err := e.ForwardPagedKV(attention.F32Tensor(out, l), attention.F32Tensor(q, l), c.kv, attention.Options{Causal: true})
		require.ErrorContains(t, err, "attention: ForwardPagedKV: "+c.want, c.name)
		for i, x := range out {
			require.True(t, math.IsNaN(float64(x)), "%s: out[%d] written on error", c.name, i)
		}
		slots := []int32{-3, -3, -3}
		require.ErrorContains(t, c.kv.SlotMapping(slots, nil), "attention: PagedKV.SlotMapping: "+c.want, c.name)
		require.Equal(t, []int32{-3, -3, -3}, slots, "%s: SlotMapping wrote on error", c.name)
		// As the suffixes of a shared-prefix step.
		shared := attention.SharedPrefixKV{Prefix: attention.PagedKV{K: pool.kv.K, V: pool.kv.V, BlockTable: pool.kv.BlockTable, MaxBlocks: 1, SeqLens: []int32{4}}, Suffix: c.kv}
		require.ErrorContains(t, e.ForwardSharedPrefix(attention.F32Tensor(out, l), attention.F32Tensor(q, l), shared, attention.Options{Causal: true}), c.want, c.name)
		for i, x := range out {
			require.True(t, math.IsNaN(float64(x)), "%s: ForwardSharedPrefix wrote out[%d] on error", c.name, i)
		}
	}
	// The prefix of a shared step, and Pack, check its stride as well,
	// though one sequence steps none.
	prefix := attention.PagedKV{K: pool.kv.K, V: pool.kv.V, BlockTable: pool.kv.BlockTable, MaxBlocks: 2, SeqLens: []int32{5}, BlockStride: 1}
	var packed attention.PackedPrefix
	require.ErrorContains(t, packed.Pack(prefix, attention.PrecisionFloat32), "attention: PackedPrefix.Pack: kv.BlockStride is 1, less than kv.MaxBlocks = 2")
	shared := attention.SharedPrefixKV{Prefix: prefix, Suffix: pool.kv}
	require.ErrorContains(t, e.ForwardSharedPrefix(attention.F32Tensor(make([]float32, l.Span()), l), attention.F32Tensor(q, l), shared, attention.Options{}),
		"attention: ForwardSharedPrefix: prefix: kv.BlockStride is 1")
	// The shortest view is accepted; so is one sequence with any stride
	// >= MaxBlocks over a table of MaxBlocks entries.
	require.NoError(t, e.ForwardPagedKV(attention.F32Tensor(make([]float32, l.Span()), l), attention.F32Tensor(q, l), exact, attention.Options{Causal: true}))
	one := attention.PagedKV{K: pool.kv.K, V: pool.kv.V, BlockTable: pool.kv.BlockTable[:mb], MaxBlocks: mb, SeqLens: pool.kv.SeqLens[:1], BlockStride: 1000}
	l1 := attention.BHSD(1, hq, 1, d)
	require.NoError(t, e.ForwardPagedKV(attention.F32Tensor(make([]float32, l1.Span()), l1), attention.F32Tensor(q, l1), one, attention.Options{Causal: true}))
}

// TestPagedKVTableViewAllocs checks that a step through a table view
// allocates nothing once warm, as one through a compact table.
func TestPagedKVTableViewAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("SKIP: the race detector allocates")
	}
	rng := rand.New(rand.NewPCG(607, 608))
	const hkv, hq, d, bs = 2, 8, 64, 16
	pool := newVLLMPool(t, rng, attention.BF16, false, hkv, d, bs, []int{100, 7, 1000, 0, 333})
	kv := tableView(pool.kv, pool.kv.MaxBlocks+9, 4, true)
	e := mustEngine(t, attention.Config{Threads: 3})
	B := len(pool.lens)
	q := randn(rng, B*hq*d)
	out, lse := make([]float32, len(q)), make([]float32, B*hq)
	slots := make([]int32, B)
	kv.SeqLens[3] = 1 // every sequence decodes a token
	kv.BlockTable[3*kv.BlockStride] = 0
	l := attention.BSHD(B, 1, hq, d)
	step := func() {
		if err := kv.SlotMapping(slots, nil); err != nil {
			t.Fatal(err)
		}
		if err := e.ForwardPagedKVLSE(attention.F32Tensor(out, l), lse, attention.F32Tensor(q, l), kv, attention.Options{Causal: true}); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if n := testing.AllocsPerRun(20, step); n != 0 {
		t.Fatalf("a step through a table view allocates %v times; want 0", n)
	}
}

// fuzzTableView runs FuzzPagedKV's call again through a view of its table
// (PagedKV.BlockStride): the rows copied into a wider table (wideTable) at
// a drawn stride (MaxBlocks to MaxBlocks+3) and offset (0 to 2), the
// entries between them block ids out of range, or now and then a stride
// that is negative or below MaxBlocks with the compact table. A hostile
// stride must fail, writing nothing; otherwise ForwardPagedKVLSE (with the
// batch's queries, then with per-sequence query counts, Options.CuSeqQ)
// and SlotMapping through the view must fail exactly where they fail
// through the compact table, writing nothing, and succeed with the same
// bits.
func fuzzTableView(t *testing.T, r *fuzzReader, e *attention.Engine, kv attention.PagedKV, q attention.Tensor, ol attention.Layout, opts attention.Options) {
	t.Helper()
	B, mb := len(kv.SeqLens), kv.MaxBlocks
	stride, off := mb+r.intn(4), r.intn(3)
	hostile := false
	switch r.intn(8) {
	case 6:
		stride = mb - 1 - r.intn(2)
		hostile = stride != 0 // 0 is MaxBlocks
	case 7:
		stride = -1 - r.intn(3)
		hostile = true
	}
	hostile = hostile || mb < 0 // the compact call fails too; no view to build
	view := kv
	if hostile {
		view.BlockStride = stride
	} else {
		eff := stride
		if eff == 0 {
			eff = mb
		}
		view = tableView(kv, eff, off, r.bool())
		view.BlockStride = stride
	}
	call := func(kv attention.PagedKV, q attention.Tensor, ol attention.Layout, opts attention.Options) ([]float32, []float32, error) {
		rows := ol.Batch * ol.Heads * ol.Seq
		out, lse := impltest.Filled(ol.Span(), outGuard), impltest.Filled(rows, outGuard)
		err := e.ForwardPagedKVLSE(attention.F32Tensor(out, ol), lse, q, kv, opts)
		if err != nil && (!sameBits(out, impltest.Filled(ol.Span(), outGuard)) || !sameBits(lse, impltest.Filled(rows, outGuard))) {
			t.Fatalf("BlockStride %d: error %v, but out or lse was written", kv.BlockStride, err)
		}
		return out, lse, err
	}
	compare := func(what string, q attention.Tensor, ol attention.Layout, opts attention.Options) {
		if hostile {
			if _, _, err := call(view, q, ol, opts); err == nil {
				t.Fatalf("%s: BlockStride %d with MaxBlocks %d succeeded; want an error", what, stride, mb)
			}
			return
		}
		wo, wl, errC := call(kv, q, ol, opts)
		go_, gl, errV := call(view, q, ol, opts)
		switch {
		case (errC == nil) != (errV == nil):
			t.Fatalf("%s: the compact table gives %v and the view (stride %d, offset %d) %v", what, errC, stride, off, errV)
		case errC == nil && (!sameBits(go_, wo) || !sameBits(gl, wl)):
			t.Fatalf("%s: the view (stride %d, offset %d) gives other bits than the compact table %v", what, stride, off, kv.BlockTable)
		}
	}
	compare("uniform", q, ol, opts)
	cu := make([]int, B+1)
	for s := range B {
		cu[s+1] = cu[s] + r.intn(3)
	}
	ql := attention.BSHD(1, cu[B], q.Heads, q.Dim)
	mixed := opts
	mixed.CuSeqQ = cu
	compare("CuSeqQ", attention.F32Tensor(randn(r.rng, ql.Span()), ql), attention.BSHD(1, cu[B], ol.Heads, ol.Dim), mixed)
	for _, c := range [][]int{nil, cu} {
		n := B
		if c != nil {
			n = c[B]
		}
		want, got := impltest.Filled(n, int32(-9)), impltest.Filled(n, int32(-9))
		errC, errV := kv.SlotMapping(want, c), view.SlotMapping(got, c)
		if errV != nil && !slices.Equal(got, impltest.Filled(n, int32(-9))) {
			t.Fatalf("SlotMapping through BlockStride %d: error %v, but dst was written", stride, errV)
		}
		if hostile {
			if errV == nil {
				t.Fatalf("SlotMapping: BlockStride %d with MaxBlocks %d succeeded; want an error", stride, mb)
			}
			continue
		}
		if (errC == nil) != (errV == nil) || !slices.Equal(got, want) {
			t.Fatalf("SlotMapping (cuSeqQ %v): the compact table gives %v %v and the view (stride %d, offset %d) %v %v", c, want, errC, stride, off, got, errV)
		}
	}
}
