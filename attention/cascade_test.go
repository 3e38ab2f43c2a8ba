package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/internal/impltest"
	"github.com/flashgo/flashgo/internal/tier"
)

// cascadeFixture is one pool holding len(pre) prefixes and len(suf)
// suffixes, with the SharedPrefixKV that reads it (Groups set when groups
// is, the prefixes' blocks in rows of kv.Prefix's table), and each
// sequence's keys and values (its group's prefix, then its suffix)
// canonical, [Hkv, n, d].
type cascadeFixture struct {
	kv         attention.SharedPrefixKV
	groups     []int // the groups' offsets: kv.Groups, or {0, sequences} for one prefix
	pre, suf   []int
	seqK, seqV [][]float32
	kf, vf     []float32
}

// group returns the group of sequence s.
func (fx *cascadeFixture) group(s int) int {
	for g := range len(fx.pre) {
		if s < fx.groups[g+1] {
			return g
		}
	}
	panic("no group")
}

func newCascadeFixture(t testing.TB, rng *rand.Rand, dt attention.DType, hkv, d, bs int, pre, suf, groups []int) *cascadeFixture {
	t.Helper()
	blocks := func(n int) int { return (n + bs - 1) / bs }
	nBlocks, maxP, maxS := 2, 0, 0
	for _, n := range pre {
		nBlocks += blocks(n)
		maxP = max(maxP, blocks(n))
	}
	for _, n := range suf {
		nBlocks += blocks(n)
		maxS = max(maxS, blocks(n))
	}
	l := attention.BSHD(nBlocks, bs, hkv, d)
	fx := &cascadeFixture{kf: randn(rng, l.Span()), vf: randn(rng, l.Span()), pre: pre, suf: suf, groups: groups}
	if groups == nil {
		fx.groups = []int{0, len(suf)}
	}
	roundKV(dt, fx.kf)
	roundKV(dt, fx.vf)
	ids := rng.Perm(nBlocks)
	table := func(lens []int, maxB int) []int32 {
		tab := make([]int32, len(lens)*maxB)
		for s, n := range lens {
			for i := range blocks(n) {
				tab[s*maxB+i] = int32(ids[0])
				ids = ids[1:]
			}
		}
		return tab
	}
	lens32 := func(lens []int) []int32 {
		x := make([]int32, len(lens))
		for i, n := range lens {
			x[i] = int32(n)
		}
		return x
	}
	pt, st := table(pre, maxP), table(suf, maxS)
	K, V := typedTensor(t, dt, fx.kf, l), typedTensor(t, dt, fx.vf, l)
	fx.kv = attention.SharedPrefixKV{
		Prefix: attention.PagedKV{K: K, V: V, BlockTable: pt, MaxBlocks: maxP, SeqLens: lens32(pre)},
		Suffix: attention.PagedKV{K: K, V: V, BlockTable: st, MaxBlocks: maxS, SeqLens: lens32(suf)},
		Groups: groups,
	}
	for s, ns := range suf {
		g := fx.group(s)
		np := pre[g]
		n := np + ns
		sk, sv := make([]float32, hkv*n*d), make([]float32, hkv*n*d)
		for pos := range n {
			var blk int32
			var slot int
			if pos < np {
				blk, slot = pt[g*maxP+pos/bs], pos%bs
			} else {
				blk, slot = st[s*maxS+(pos-np)/bs], (pos-np)%bs
			}
			for h := range hkv {
				copy(sk[(h*n+pos)*d:][:d], fx.kf[l.Offset(int(blk), h, slot):][:d])
				copy(sv[(h*n+pos)*d:][:d], fx.vf[l.Offset(int(blk), h, slot):][:d])
			}
		}
		fx.seqK, fx.seqV = append(fx.seqK, sk), append(fx.seqV, sv)
	}
	return fx
}

// cascadeRows returns the stacked rows [r0, r1) of group g: batch entries
// times nq, or with cu the packed positions.
func cascadeRows(groups, cu []int, g, nq int) (r0, r1 int) {
	s0, s1 := groups[g], groups[g+1]
	if cu != nil {
		return cu[s0], cu[s1]
	}
	return s0 * nq, s1 * nq
}

// cascadeBySeparateCalls computes ForwardSharedPrefixLSE(kv, opts) of the
// queries qf (values that qt's type holds exactly; laid out ql) as the
// separate calls of its doc, through the public API: per group a
// ForwardPagedKVLSE over its prefix alone for its stacked F32 queries
// (never through panels: they hold the same values), the suffixes'
// ForwardPagedKVLSE without sinks (one call with CuSeqQ, else one per
// group over its batch entries), and Merge. It returns out and lse laid
// out as the call's rows, [B, Hq, Nq] (or [1, Hq, totalQ]) contiguous.
func cascadeBySeparateCalls(t *testing.T, e *attention.Engine, fx *cascadeFixture, qdt attention.DType, qf []float32, ql attention.Layout, dv int, opts attention.Options) (out, lse []float32) {
	t.Helper()
	out, lse, err := separateCalls(e, fx.kv, fx.groups, qdt, qf, ql, dv, opts)
	require.NoError(t, err)
	return out, lse
}

// separateCalls is cascadeBySeparateCalls over kv, whose groups' offsets
// are groups (kv.Groups, or {0, sequences} for one prefix).
func separateCalls(e *attention.Engine, kv attention.SharedPrefixKV, groups []int, qdt attention.DType, qf []float32, ql attention.Layout, dv int, opts attention.Options) (out, lse []float32, err error) {
	hq, d, cu, nq := ql.Heads, ql.Dim, opts.CuSeqQ, ql.Seq
	sl := attention.BHSD(ql.Batch, hq, nq, dv)
	rows := ql.Batch * hq * nq
	outS, lseS := make([]float32, sl.Span()), make([]float32, rows)
	sopts := opts
	sopts.Sinks = nil
	if cu != nil {
		if err := e.ForwardPagedKVLSE(attention.F32Tensor(outS, sl), lseS, activation(qdt, qf, ql), kv.Suffix, sopts); err != nil {
			return nil, nil, err
		}
	} else {
		for g := range len(groups) - 1 {
			s0, s1 := groups[g], groups[g+1]
			if s1 == s0 {
				continue
			}
			sub := kv.Suffix
			sub.BlockTable, sub.SeqLens = sub.BlockTable[s0*sub.MaxBlocks:], sub.SeqLens[s0:s1]
			qv := ql
			qv.Batch = s1 - s0
			if err := e.ForwardPagedKVLSE(attention.F32Tensor(outS[sl.Offset(s0, 0, 0):], attention.BHSD(s1-s0, hq, nq, dv)),
				lseS[s0*hq*nq:], activation(qdt, qf[ql.Offset(s0, 0, 0):], qv), sub, sopts); err != nil {
				return nil, nil, err
			}
		}
	}
	popts := attention.Options{Scale: opts.Scale, SoftCap: opts.SoftCap, Sinks: opts.Sinks, Precision: opts.Precision}
	partP, lseP := make([]float32, sl.Span()), make([]float32, rows)
	where := func(i int) (b, n int) {
		if cu != nil {
			return 0, i
		}
		return i / nq, i % nq
	}
	for g := range len(groups) - 1 {
		r0, r1 := cascadeRows(groups, cu, g, nq)
		R := r1 - r0
		if R == 0 {
			continue
		}
		qs := make([]float32, hq*R*d)
		for h := range hq {
			for i := range R {
				b, n := where(r0 + i)
				copy(qs[(h*R+i)*d:][:d], qf[ql.Offset(b, h, n):][:d])
			}
		}
		op, lp := make([]float32, hq*R*dv), make([]float32, hq*R)
		if err := e.ForwardPagedKVLSE(attention.F32Tensor(op, attention.BHSD(1, hq, R, dv)), lp,
			attention.F32Tensor(qs, attention.BHSD(1, hq, R, d)), kv.Prefix.Sequence(g), popts); err != nil {
			return nil, nil, err
		}
		for h := range hq {
			for i := range R {
				b, n := where(r0 + i)
				copy(partP[sl.Offset(b, h, n):][:dv], op[(h*R+i)*dv:][:dv])
				lseP[(b*hq+h)*nq+n] = lp[h*R+i]
			}
		}
	}
	out, lse = make([]float32, sl.Span()), make([]float32, rows)
	err = attention.Merge(attention.F32Tensor(out, sl), lse, attention.F32Tensor(outS, sl), lseS, attention.F32Tensor(partP, sl), lseP)
	return out, lse, err
}

// outRows reads the rows of an output of type dt (F32 or BF16) laid out
// ol into float32, laid out [B, Hq, Nq, dv] contiguously.
func outRows(dt attention.DType, buf any, ol attention.Layout) []float32 {
	r := make([]float32, ol.Batch*ol.Heads*ol.Seq*ol.Dim)
	i := 0
	for b := range ol.Batch {
		for h := range ol.Heads {
			for n := range ol.Seq {
				off := ol.Offset(b, h, n)
				for c := range ol.Dim {
					if dt == attention.BF16 {
						r[i] = buf.([]fp16.BFloat16)[off+c].Float32()
					} else {
						r[i] = buf.([]float32)[off+c]
					}
					i++
				}
			}
		}
	}
	return r
}

// cascadeCase is a batch over a cascadeFixture: prefixes, suffixes,
// groups (nil: one prefix), query counts (nil: nq for every sequence).
type cascadeCase struct {
	name          string
	pre, suf, grp []int
	nqs           []int
	nq            int
}

var cascadeCases = []cascadeCase{
	// One prefix, a serving step: decodes, drafts, prefill chunks, a
	// sequence that sits out, one with more queries than suffix keys.
	{name: "mixed", pre: []int{300}, suf: []int{5, 40, 1, 0, 17, 3, 64}, nqs: []int{1, 40, 1, 0, 3, 3, 1}},
	// Three prompts: one with a long prefix, an empty one (no shared
	// positions), a short one; a group without sequences.
	{name: "groups-mixed", pre: []int{300, 0, 37, 50}, suf: []int{5, 40, 1, 9, 3, 17, 2}, grp: []int{0, 3, 5, 5, 7}, nqs: []int{1, 40, 1, 9, 0, 3, 1}},
	{name: "groups-uniform", pre: []int{300, 0, 37}, suf: []int{5, 40, 1, 9, 3, 17, 2}, grp: []int{0, 3, 5, 7}, nq: 1},
	{name: "groups-drafts", pre: []int{70, 130}, suf: []int{5, 4, 9, 3}, grp: []int{0, 1, 4}, nq: 3},
}

// TestSharedPrefixCascadeMatchesSeparateCalls checks ForwardSharedPrefix
// with Options.CuSeqQ and with SharedPrefixKV.Groups, for every K/V type,
// both precisions, block sizes even and odd, with and without causal
// masking and sinks, against its doc's statement: bitwise the separate
// calls (cascadeBySeparateCalls), for 1, 2 and 3 threads, with the
// prefixes packed (PackedGroups, by Engine.PackPrefix) or not; and each
// group bitwise ForwardSharedPrefix of that group alone.
func TestSharedPrefixCascadeMatchesSeparateCalls(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(171, 172))
		const hkv, d = 2, 32
		for _, dt := range kvTypesQ8 {
			for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
				for _, cc := range cascadeCases {
					for _, g := range []int{1, 4} {
						for _, bs := range []int{16, 5} {
							what := fmt.Sprintf("%v %v %s g %d bs %d", dt, prec, cc.name, g, bs)
							if !tier.Keep(t, what, 6) {
								continue
							}
							fx := newCascadeFixture(t, rng, dt, hkv, d, bs, cc.pre, cc.suf, cc.grp)
							opts := attention.Options{Causal: bs == 16, Precision: prec}
							if g == 4 {
								opts.Sinks = float32s(randSinks(rng, g*hkv))
							}
							checkCascade(t, what, rng, fx, cc, g*hkv, opts)
						}
					}
				}
			}
		}
	})
}

// checkCascade runs case cc over fx with hq query heads and opts and
// checks it against the separate calls and the per-group calls, for
// thread counts 1, 2 and 3, with and without panels.
func checkCascade(t *testing.T, what string, rng *rand.Rand, fx *cascadeFixture, cc cascadeCase, hq int, opts attention.Options) {
	t.Helper()
	d := fx.kv.Prefix.K.Dim
	dv := fx.kv.Prefix.V.Dim
	B := len(cc.suf)
	var ql attention.Layout
	if cc.nqs != nil {
		opts.CuSeqQ = offsets(cc.nqs)
		ql = attention.BSHD(1, opts.CuSeqQ[B], hq, d)
	} else {
		ql = attention.BHSD(B, hq, cc.nq, d)
	}
	qf := randn(rng, ql.Span())
	ol := ql
	ol.Dim, ol.SeqStride, ol.HeadStride, ol.BatchStride = dv, ql.SeqStride/d*dv, ql.HeadStride/d*dv, ql.BatchStride/d*dv
	rows := ql.Batch * hq * ql.Seq
	// The inputs, which no call may modify.
	inputs := func() [][]byte {
		m := [][]byte{fmt.Append(nil, qf, fx.kv.Prefix.BlockTable, fx.kv.Prefix.SeqLens, fx.kv.Suffix.BlockTable, fx.kv.Suffix.SeqLens, fx.kv.Groups, opts.CuSeqQ)}
		for _, x := range []attention.Tensor{fx.kv.Prefix.K, fx.kv.Prefix.V} {
			for _, b := range attention.TensorMemory(x) {
				m = append(m, slices.Clone(b)) // a copy: the memory itself would compare equal to itself
			}
		}
		return m
	}
	before := inputs()
	defer func() { require.Equal(t, before, inputs(), "%s: an input was modified", what) }()
	ref := mustEngine(t, attention.Config{Threads: 1})
	want, wantLSE := cascadeBySeparateCalls(t, ref, fx, attention.F32, qf, ql, dv, opts)
	packed := fx.kv
	packed.Packed, packed.PackedGroups = nil, make([]*attention.PackedPrefix, len(fx.pre))
	for g := range fx.pre {
		if g%3 == 1 {
			continue // one not packed
		}
		packed.PackedGroups[g] = new(attention.PackedPrefix)
		require.NoError(t, ref.PackPrefix(packed.PackedGroups[g], fx.kv.Prefix.Sequence(g), opts.Precision), what)
	}
	for _, threads := range []int{1, 2, 3} {
		e := mustEngine(t, attention.Config{Threads: threads})
		for _, kv := range []attention.SharedPrefixKV{fx.kv, packed} {
			out, lse := impltest.Filled(ol.Span(), outGuard), make([]float32, rows)
			require.NoError(t, e.ForwardSharedPrefixLSE(attention.F32Tensor(out, ol), lse, attention.F32Tensor(qf, ql), kv, opts), what)
			w := fmt.Sprintf("%s threads %d packed %v", what, threads, kv.PackedGroups != nil)
			requireSameBits(t, outRows(attention.F32, out, ol), want, "%s: out against the separate calls", w)
			requireSameBits(t, lse, wantLSE, "%s: lse against the separate calls", w)
		}
	}
	// Each group alone: its prefix, its suffixes, its queries.
	e := mustEngine(t, attention.Config{Threads: 2})
	out, lse := make([]float32, ol.Span()), make([]float32, rows)
	require.NoError(t, e.ForwardSharedPrefixLSE(attention.F32Tensor(out, ol), lse, attention.F32Tensor(qf, ql), fx.kv, opts), what)
	got := outRows(attention.F32, out, ol)
	for g := range fx.pre {
		s0, s1 := fx.groups[g], fx.groups[g+1]
		if s1 == s0 {
			continue
		}
		one := attention.SharedPrefixKV{Prefix: fx.kv.Prefix.Sequence(g), Suffix: fx.kv.Suffix}
		one.Suffix.BlockTable, one.Suffix.SeqLens = one.Suffix.BlockTable[s0*one.Suffix.MaxBlocks:], one.Suffix.SeqLens[s0:s1]
		o := opts
		gl := ql
		var qoff int
		if o.CuSeqQ != nil {
			cu := opts.CuSeqQ
			o.CuSeqQ = make([]int, s1-s0+1)
			for i := range o.CuSeqQ {
				o.CuSeqQ[i] = cu[s0+i] - cu[s0]
			}
			qoff, gl = seqView(ql, cu[s0], cu[s1]-cu[s0])
		} else {
			qoff, gl.Batch = ql.Offset(s0, 0, 0), s1-s0
		}
		gRows := gl.Batch * hq * gl.Seq
		if gRows == 0 {
			continue
		}
		og := attention.BHSD(gl.Batch, hq, gl.Seq, dv)
		o1, l1 := make([]float32, og.Span()), make([]float32, gRows)
		require.NoError(t, e.ForwardSharedPrefixLSE(attention.F32Tensor(o1, og), l1, attention.F32Tensor(qf[qoff:], gl), one, o), "%s group %d", what, g)
		r0, _ := cascadeRows(fx.groups, opts.CuSeqQ, g, ql.Seq)
		for b := range gl.Batch {
			for h := range hq {
				for n := range gl.Seq {
					bb, nn := s0+b, n
					if opts.CuSeqQ != nil {
						bb, nn = 0, r0+n
					}
					r := (bb*hq+h)*ql.Seq + nn
					requireSameBits(t, got[r*dv:][:dv], o1[og.Offset(b, h, n):][:dv], "%s group %d alone: out row %d", what, g, r)
					requireSameBits(t, lse[r:r+1], l1[(b*hq+h)*gl.Seq+n:][:1], "%s group %d alone: lse row %d", what, g, r)
				}
			}
		}
	}
}

// TestSharedPrefixCascadeTypes checks the mixed, grouped call with fp16
// queries and bfloat16 outputs: the queries widened exactly, each merged
// row rounded once to bfloat16.
func TestSharedPrefixCascadeTypes(t *testing.T) {
	rng := rand.New(rand.NewPCG(173, 174))
	const hkv, d, hq = 2, 32, 4
	cc := cascadeCases[1]
	fx := newCascadeFixture(t, rng, attention.F16, hkv, d, 16, cc.pre, cc.suf, cc.grp)
	opts := attention.Options{Causal: true, CuSeqQ: offsets(cc.nqs)}
	total := opts.CuSeqQ[len(cc.nqs)]
	ql := attention.BSHD(1, total, hq, d)
	qf := randn(rng, ql.Span())
	roundTo(attention.F16, qf)
	e := mustEngine(t, attention.Config{Threads: 3})
	want, wantLSE := cascadeBySeparateCalls(t, e, fx, attention.F16, qf, ql, d, opts)
	out, lse := make([]fp16.BFloat16, ql.Span()), make([]float32, hq*total)
	require.NoError(t, e.ForwardSharedPrefixLSE(attention.BF16Tensor(out, ql), lse, attention.F16Tensor(fp16.Float16s(qf), ql), fx.kv, opts))
	roundTo(attention.BF16, want)
	requireSameBits(t, outRows(attention.BF16, out, ql), want, "bf16 out of f16 queries")
	requireSameBits(t, lse, wantLSE, "lse")
}

// TestSharedPrefixCascadeOracle checks the mixed, grouped call against
// the float64 oracle of each whole sequence (its group's prefix, then its
// suffix), in both precisions: what the calls compute, beyond agreeing
// with one another.
func TestSharedPrefixCascadeOracle(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			t.Run(prec.String(), inPrecision(prec, testSharedPrefixCascadeOracle))
		}
	})
}

func testSharedPrefixCascadeOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(175, 176))
	const hkv, d, g = 2, 32, 2
	hq := g * hkv
	lseTol := 1e-4
	if precisionUnderTest == attention.PrecisionBFloat16 {
		lseTol = 2e-2
	}
	for _, dt := range []attention.DType{attention.F32, attention.F16, attention.Q8} {
		for _, cc := range cascadeCases[:2] {
			fx := newCascadeFixture(t, rng, dt, hkv, d, 16, cc.pre, cc.suf, cc.grp)
			cu := offsets(cc.nqs)
			total := cu[len(cc.nqs)]
			ql := attention.BHSD(1, hq, total, d)
			q := randn(rng, ql.Span())
			out, lse := make([]float32, ql.Span()), make([]float32, hq*total)
			opts := attention.Options{Causal: true, CuSeqQ: cu, Precision: precisionUnderTest}
			require.NoError(t, mustEngine(t, attention.Config{}).ForwardSharedPrefixLSE(attention.F32Tensor(out, ql), lse, attention.F32Tensor(q, ql), fx.kv, opts))
			for s, nq := range cc.nqs {
				np := fx.pre[fx.group(s)]
				n := np + cc.suf[s]
				if nq == 0 || nq > cc.suf[s] {
					continue // queries before the suffix: not a shape the call is for
				}
				qs, os, ls := make([]float32, hq*nq*d), make([]float32, hq*nq*d), make([]float32, hq*nq)
				for h := range hq {
					copy(qs[h*nq*d:][:nq*d], q[ql.Offset(0, h, cu[s]):][:nq*d])
					copy(os[h*nq*d:][:nq*d], out[ql.Offset(0, h, cu[s]):][:nq*d])
					copy(ls[h*nq:][:nq], lse[h*total+cu[s]:][:nq])
				}
				p := reference.Params{Batch: 1, HeadsQ: hq, HeadsKV: hkv, SeqQ: nq, SeqKV: n, Dim: d, Causal: true}
				checkPrecisionError(t, fmt.Sprintf("%v %s sequence %d", dt, cc.name, s), p, qs, fx.seqK[s], fx.seqV[s], os, ls, 2e-5, lseTol)
			}
		}
	}
}

// TestSharedPrefixCascadeErrors checks that a misuse of per-sequence query
// counts or groups returns an error that says what was wrong, writes
// nothing and modifies no input (pools, queries, tables, lengths,
// offsets, groups).
func TestSharedPrefixCascadeErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(177, 178))
	const hkv, d, hq = 1, 32, 2
	cc := cascadeCases[1]
	fx := newCascadeFixture(t, rng, attention.F16, hkv, d, 16, cc.pre, cc.suf, cc.grp)
	cu := offsets(cc.nqs)
	total := cu[len(cc.nqs)]
	ql := attention.BHSD(1, hq, total, d)
	q := randn(rng, ql.Span())
	e := mustEngine(t, attention.Config{})
	var other attention.PackedPrefix
	require.NoError(t, other.Pack(fx.kv.Prefix.Sequence(0), attention.PrecisionFloat32))
	edit := func(f func(kv *attention.SharedPrefixKV, o *attention.Options)) (attention.SharedPrefixKV, attention.Options) {
		kv := fx.kv
		kv.Groups = slices.Clone(kv.Groups)
		o := attention.Options{Causal: true, CuSeqQ: slices.Clone(cu)}
		f(&kv, &o)
		return kv, o
	}
	for _, c := range []struct {
		name string
		f    func(kv *attention.SharedPrefixKV, o *attention.Options)
		want string
	}{
		{"CuSeqQ one short", func(_ *attention.SharedPrefixKV, o *attention.Options) {
			o.CuSeqQ = append(o.CuSeqQ[:1], o.CuSeqQ[2:]...)
		},
			"suffixes: kv.SeqLens has 7 lengths and Options.CuSeqQ 7 offsets (6 sequences)"},
		{"CuSeqQ decreasing", func(_ *attention.SharedPrefixKV, o *attention.Options) { o.CuSeqQ[2] = 0 }, "Options.CuSeqQ[2] is 0, less than"},
		{"CuSeqQ end", func(_ *attention.SharedPrefixKV, o *attention.Options) { o.CuSeqQ[len(o.CuSeqQ)-1]-- }, "want Nq = 55"},
		{"CuSeqQ with batch 2", nil, "q has batch 2 with Options.CuSeqQ set"},
		{"CuSeqKV", func(_ *attention.SharedPrefixKV, o *attention.Options) { o.CuSeqKV = []int{0, 1} }, "Options.CuSeqKV is set"},
		{"no groups", func(kv *attention.SharedPrefixKV, _ *attention.Options) { kv.Groups = nil }, "kv.Prefix.SeqLens has 4 lengths and kv.Groups is nil"},
		{"groups short", func(kv *attention.SharedPrefixKV, _ *attention.Options) { kv.Groups = kv.Groups[:4] }, "kv.Groups has 4 offsets and kv.Prefix.SeqLens 4 prefixes"},
		{"groups from 1", func(kv *attention.SharedPrefixKV, _ *attention.Options) { kv.Groups[0] = 1 }, "kv.Groups[0] is 1; want 0"},
		{"groups decreasing", func(kv *attention.SharedPrefixKV, _ *attention.Options) { kv.Groups[2] = 2 }, "kv.Groups[2] is 2, less than kv.Groups[1] = 3"},
		{"groups end", func(kv *attention.SharedPrefixKV, _ *attention.Options) { kv.Groups[4] = 6 }, "kv.Groups[4] is 6; want the number of sequences, 7"},
		{"no prefixes", func(kv *attention.SharedPrefixKV, _ *attention.Options) {
			kv.Prefix.SeqLens, kv.Groups = nil, []int{7}
		}, "kv.Prefix.SeqLens is empty"},
		{"prefix block", func(kv *attention.SharedPrefixKV, _ *attention.Options) {
			kv.Prefix.BlockTable = slices.Clone(kv.Prefix.BlockTable)
			kv.Prefix.BlockTable[2*kv.Prefix.MaxBlocks] = 1000
		}, "prefix: kv.BlockTable[2][0] is block 1000"},
		{"prefix table short", func(kv *attention.SharedPrefixKV, _ *attention.Options) {
			kv.Prefix.BlockTable = kv.Prefix.BlockTable[:3*kv.Prefix.MaxBlocks]
		}, "prefix: kv.BlockTable has"},
		{"Packed with groups", func(kv *attention.SharedPrefixKV, _ *attention.Options) { kv.Packed = &other }, "kv.Packed is set with 4 prefixes"},
		{"both packs", func(kv *attention.SharedPrefixKV, _ *attention.Options) {
			kv.Packed, kv.PackedGroups = &other, make([]*attention.PackedPrefix, 4)
		}, "kv.Packed and kv.PackedGroups are both set"},
		{"PackedGroups length", func(kv *attention.SharedPrefixKV, _ *attention.Options) {
			kv.PackedGroups = []*attention.PackedPrefix{&other}
		},
			"kv.PackedGroups has 1 entries and kv.Prefix.SeqLens 4 prefixes"},
		{"PackedGroups of another prefix", func(kv *attention.SharedPrefixKV, _ *attention.Options) {
			kv.PackedGroups = []*attention.PackedPrefix{nil, nil, &other, nil}
		}, "kv.PackedGroups[2]: holds a prefix of 300 positions and kv.Prefix.Sequence(2) has 37"},
		{"PackedGroups empty", func(kv *attention.SharedPrefixKV, _ *attention.Options) {
			kv.PackedGroups = []*attention.PackedPrefix{new(attention.PackedPrefix), nil, nil, nil}
		}, "kv.PackedGroups[0]: holds no prefix"},
		{"window", func(_ *attention.SharedPrefixKV, o *attention.Options) { o.Window = &attention.Window{Left: 1} }, "Options.Window is set"},
		{"out on Groups", nil, "out overlaps kv.Groups"},
	} {
		kv, o := fx.kv, attention.Options{Causal: true, CuSeqQ: cu}
		if c.f != nil {
			kv, o = edit(c.f)
		}
		qt := attention.F32Tensor(q, ql)
		outBuf := impltest.Filled(ql.Span(), outGuard)
		out := attention.F32Tensor(outBuf, ql)
		lse := impltest.Filled(hq*total, outGuard)
		switch c.name {
		case "CuSeqQ with batch 2":
			l := attention.BHSD(2, hq, total/2, d)
			qt, out = attention.F32Tensor(q, l), attention.F32Tensor(outBuf, l)
			lse = lse[:2*hq*(total/2)]
		case "out on Groups":
			// Groups carved from out's memory (8-byte aligned: element
			// 100 of a fresh slice), as an arena would carve them.
			g := unsafe.Slice((*int)(unsafe.Pointer(&outBuf[100])), len(fx.kv.Groups))
			copy(g, fx.kv.Groups)
			kv.Groups = g
		}
		outBefore, lseBefore := slices.Clone(outBuf), slices.Clone(lse)
		before := struct {
			q, kf, vf  []float32
			pt, st, pl []int32
			cu, groups []int
		}{slices.Clone(q), slices.Clone(fx.kf), slices.Clone(fx.vf), slices.Clone(fx.kv.Prefix.BlockTable), slices.Clone(fx.kv.Suffix.BlockTable),
			slices.Clone(fx.kv.Prefix.SeqLens), slices.Clone(cu), slices.Clone(fx.kv.Groups)}
		err := e.ForwardSharedPrefixLSE(out, lse, qt, kv, o)
		require.ErrorContains(t, err, c.want, c.name)
		require.ErrorContains(t, err, "attention: ForwardSharedPrefix: ", c.name)
		requireSameBits(t, outBuf, outBefore, "%s: out written on error", c.name)
		requireSameBits(t, lse, lseBefore, "%s: lse written on error", c.name)
		requireSameBits(t, q, before.q, "%s: q", c.name)
		requireSameBits(t, fx.kf, before.kf, "%s: the K pool", c.name)
		requireSameBits(t, fx.vf, before.vf, "%s: the V pool", c.name)
		require.Equal(t, before.pt, fx.kv.Prefix.BlockTable, c.name)
		require.Equal(t, before.st, fx.kv.Suffix.BlockTable, c.name)
		require.Equal(t, before.pl, fx.kv.Prefix.SeqLens, c.name)
		require.Equal(t, before.cu, cu, c.name)
		require.Equal(t, before.groups, fx.kv.Groups, c.name)
	}
}

// TestSharedPrefixGroupsSplitSuffixes checks a uniform batch of groups
// whose long suffixes the automatic split-KV cuts into a number of parts
// that depends on the batch (11 parts for the whole batch of 3 sequences
// × 2 K/V heads, 13 and 12 for the groups alone): each group's rows are
// still bitwise those of its own call, the suffixes being computed group
// by group.
func TestSharedPrefixGroupsSplitSuffixes(t *testing.T) {
	rng := rand.New(rand.NewPCG(179, 180))
	const hkv, d = 2, 32
	cc := cascadeCase{name: "long", pre: []int{100, 40}, suf: []int{7000, 300, 6500}, grp: []int{0, 1, 3}, nq: 1}
	fx := newCascadeFixture(t, rng, attention.F16, hkv, d, 16, cc.pre, cc.suf, cc.grp)
	for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
		checkCascade(t, fmt.Sprintf("long suffixes %v", prec), rng, fx, cc, 2*hkv, attention.Options{Causal: true, Precision: prec})
	}
}

// TestPackPrefixThreads checks that Engine.PackPrefix packs bitwise the
// panels of PackedPrefix.Pack for 1, 2, 3 and 7 threads, for every K/V
// type, both precisions and block sizes even and odd (runs of values that
// start at odd keys), over a prefix of several strips whose value rows
// hold NaN and ±Inf here and there (pools that hold them: f32, f16,
// bf16), with the counts of non-finite rows running over the whole
// prefix; and that a call reading the panels gives the bits of the call
// without.
func TestPackPrefixThreads(t *testing.T) {
	rng := rand.New(rand.NewPCG(181, 182))
	const hkv, d, np = 2, 32, 1500
	suffix := []int{3, 0, 40, 17, 9}
	B, hq := len(suffix), 4*hkv
	q := randn(rng, B*hq*d)
	l := attention.BHSD(B, hq, 1, d)
	for _, dt := range kvTypesQ8 {
		for _, bs := range []int{16, 5} {
			fx := newSharedFixture(t, rng, dt, hkv, d, bs, np, suffix)
			special := dt == attention.F32 || dt == attention.F16 || dt == attention.BF16
			bad := make([][]int32, hkv) // each head's expected counts
			for h := range hkv {
				bad[h] = make([]int32, np+1)
			}
			if special {
				vf := slices.Clone(fx.vf)
				pl := fx.kv.Prefix.V.Layout
				for j := 0; j < np; j += 1 + rng.IntN(300) {
					h := rng.IntN(hkv)
					blk := int(fx.kv.Prefix.BlockTable[j/bs])
					vf[pl.Offset(blk, h, j%bs)+rng.IntN(d)] = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}[rng.IntN(3)]
				}
				fx.kv.Prefix.V = typedTensor(t, dt, vf, pl)
				for h := range hkv {
					for j := range np {
						blk := int(fx.kv.Prefix.BlockTable[j/bs])
						row := vf[pl.Offset(blk, h, j%bs):][:d]
						n := bad[h][j]
						if slices.ContainsFunc(row, func(x float32) bool { return math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) }) {
							n++
						}
						bad[h][j+1] = n
					}
				}
			}
			for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
				what := fmt.Sprintf("%v bs %d %v", dt, bs, prec)
				var want attention.PackedPrefix
				require.NoError(t, want.Pack(fx.kv.Prefix, prec), what)
				if prec == attention.PrecisionBFloat16 && special {
					counts := attention.PackedCounts(&want, hkv, np)
					for h := range hkv {
						require.Equal(t, bad[h], counts[h*(np+1):][:np+1], "%s: head %d's counts of non-finite value rows", what, h)
					}
				}
				for _, threads := range []int{1, 2, 3, 7} {
					var got attention.PackedPrefix
					e := mustEngine(t, attention.Config{Threads: threads})
					require.NoError(t, e.PackPrefix(&got, fx.kv.Prefix, prec), what)
					for i, m := range attention.PackedPanels(&got) {
						require.Equal(t, attention.PackedPanels(&want)[i], m, "%s threads %d: panel %d", what, threads, i)
					}
					if special {
						continue // NaN rows: the outputs are NaN either way
					}
					kv := fx.kv
					kv.Packed = &got
					opts := attention.Options{Causal: true, Precision: prec}
					o1, o2 := make([]float32, len(q)), make([]float32, len(q))
					require.NoError(t, e.ForwardSharedPrefix(attention.F32Tensor(o1, l), attention.F32Tensor(q, l), fx.kv, opts))
					require.NoError(t, e.ForwardSharedPrefix(attention.F32Tensor(o2, l), attention.F32Tensor(q, l), kv, opts))
					requireSameBits(t, o2, o1, "%s threads %d: the call with the panels", what, threads)
				}
			}
		}
	}
}

// packedBytes is the formula of PackedPrefix's doc: the bytes of the
// panels of a prefix of n positions, hkv K/V heads, head dims d and dv.
func packedBytes(prec attention.Precision, n, hkv, d, dv int) int {
	up := func(x, m int) int { return (x + m - 1) / m * m }
	if prec == attention.PrecisionFloat32 {
		return 4 * hkv * (d*(up(n, 16)+16) + n*dv)
	}
	return 2*hkv*((d+1)/2*(2*up(n, 16)+32)+(n+1)/2*(2*up(dv, 16)+32)) + 4*hkv*(n+1)
}

// TestPackedPrefixBytes checks the memory formula of PackedPrefix's doc
// against Bytes for fresh PackedPrefixes of several shapes (V head dims
// other than K's, odd ones, prefixes of 0, 1, 17 and 1500 positions,
// block sizes even and odd), the bookkeeping included (the copy of the
// block table; staging rows for odd blocks in bf16), the example the doc
// gives, and that packing a shorter prefix again keeps the memory.
func TestPackedPrefixBytes(t *testing.T) {
	require.Equal(t, 67174400, packedBytes(attention.PrecisionFloat32, 8192, 8, 128, 128))
	require.Equal(t, 35946528, packedBytes(attention.PrecisionBFloat16, 8192, 8, 128, 128))
	require.Zero(t, new(attention.PackedPrefix).Bytes())
	rng := rand.New(rand.NewPCG(183, 184))
	for _, sh := range []struct{ n, hkv, d, dv, bs int }{
		{1500, 2, 32, 32, 16}, {17, 3, 24, 40, 16}, {1, 1, 7, 5, 4}, {0, 2, 8, 8, 16}, {1500, 2, 30, 17, 5}, {600, 1, 16, 16, 3},
	} {
		nb := (sh.n + sh.bs - 1) / sh.bs
		kl, vl := attention.BSHD(nb+1, sh.bs, sh.hkv, sh.d), attention.BSHD(nb+1, sh.bs, sh.hkv, sh.dv)
		table := make([]int32, max(nb, 1))
		for i := range table {
			table[i] = int32(i)
		}
		prefix := attention.PagedKV{K: attention.F32Tensor(randn(rng, kl.Span()), kl), V: attention.F32Tensor(randn(rng, vl.Span()), vl),
			BlockTable: table, MaxBlocks: len(table), SeqLens: []int32{int32(sh.n)}}
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			var p attention.PackedPrefix
			require.NoError(t, p.Pack(prefix, prec))
			want := packedBytes(prec, sh.n, sh.hkv, sh.d, sh.dv) + 4*nb
			if prec == attention.PrecisionBFloat16 && sh.bs%2 == 1 {
				want += 2 * sh.hkv * ((sh.n + 255) / 256) * (2*((sh.dv+15)/16*16) + 32)
			}
			require.Equal(t, want, p.Bytes(), "%+v %v", sh, prec)
			short := prefix
			short.SeqLens = []int32{int32(sh.n / 2)}
			require.NoError(t, p.Pack(short, prec))
			require.Equal(t, want, p.Bytes(), "%+v %v packed again shorter: the memory kept", sh, prec)
		}
	}
}

// TestPackPrefixErrors checks Engine.PackPrefix's own errors and that it
// reports Pack's.
func TestPackPrefixErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(185, 186))
	fx := newSharedFixture(t, rng, attention.F16, 1, 32, 16, 40, []int{1})
	e := mustEngine(t, attention.Config{})
	require.ErrorContains(t, e.PackPrefix(nil, fx.kv.Prefix, attention.PrecisionFloat32), "attention: Engine.PackPrefix: p is nil")
	var nilEngine *attention.Engine
	require.ErrorContains(t, nilEngine.PackPrefix(new(attention.PackedPrefix), fx.kv.Prefix, attention.PrecisionFloat32), "the Engine is nil")
	require.ErrorContains(t, new(attention.Engine).PackPrefix(new(attention.PackedPrefix), fx.kv.Prefix, attention.PrecisionFloat32), "zero Engine")
	two := fx.kv.Prefix
	two.SeqLens = []int32{40, 40}
	require.ErrorContains(t, e.PackPrefix(new(attention.PackedPrefix), two, attention.PrecisionBFloat16), "PackedPrefix.Pack: prefix.SeqLens has 2 lengths")
	bad := fx.kv.Prefix
	bad.BlockTable = []int32{0, 1000, 2}
	var p attention.PackedPrefix
	require.NoError(t, p.Pack(fx.kv.Prefix, attention.PrecisionBFloat16))
	require.ErrorContains(t, e.PackPrefix(&p, bad, attention.PrecisionBFloat16), "kv.BlockTable[0][1] is block 1000")
	// A refused pack writes nothing: p still holds the prefix it held.
	kv := fx.kv
	kv.Packed = &p
	l := attention.BHSD(1, 2, 1, 32)
	require.NoError(t, e.ForwardSharedPrefix(attention.F32Tensor(make([]float32, 64), l), attention.F32Tensor(make([]float32, 64), l), kv, attention.Options{}))
}

// TestPagedKVSequence checks PagedKV.Sequence: a sequence's own table row
// and length, and for an index out of range or a short table a PagedKV
// that Pack refuses.
func TestPagedKVSequence(t *testing.T) {
	l := attention.BSHD(4, 2, 1, 8)
	K := attention.F32Tensor(make([]float32, l.Span()), l)
	kv := attention.PagedKV{K: K, V: K, BlockTable: []int32{0, 1, 2, 3, 1, 0}, MaxBlocks: 2, SeqLens: []int32{3, 4, 1}}
	one := kv.Sequence(1)
	require.Equal(t, []int32{2, 3}, one.BlockTable)
	require.Equal(t, []int32{4}, one.SeqLens)
	require.Equal(t, 2, one.MaxBlocks)
	for _, s := range []int{-1, 3} {
		require.ErrorContains(t, new(attention.PackedPrefix).Pack(kv.Sequence(s), attention.PrecisionFloat32), "prefix.SeqLens has 0 lengths", "s %d", s)
	}
	short := kv
	short.BlockTable = kv.BlockTable[:5]
	require.Equal(t, []int32{1}, short.Sequence(2).BlockTable)
	require.ErrorContains(t, new(attention.PackedPrefix).Pack(short.Sequence(2), attention.PrecisionFloat32), "kv.BlockTable has 1 entries; want >= sequences·MaxBlocks = 1·2")
}
