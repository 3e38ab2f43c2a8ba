package attention

import "fmt"

// SharedPrefixKV is the K/V of a batch of sequences that share their first
// positions (parallel sampling, beam search, many requests over one system
// prompt), split as cascade attention splits it: the shared prefix once,
// and each sequence's own positions after it.
//
// Prefix is a PagedKV of one sequence: the prefix's blocks in
// BlockTable[:MaxBlocks] and its length in SeqLens[0]. Suffix is a PagedKV
// of one sequence per batch entry of q (or per sequence of
// Options.CuSeqQ): sequence b's positions after the prefix, SeqLens[b] of
// them (0 allowed). The two may share pools (the prefix's blocks among the
// pool's others, as a paged cache holds them) or not; their V head dims
// must agree. Both may be views of one table of the whole sequences
// (PagedKV.BlockStride): Prefix its first row's first columns, Suffix the
// columns after them (ExampleEngine_ForwardSharedPrefix_tableView).
//
// With Groups, Prefix holds several prefixes, each seen by a group of the
// sequences (a multi-prefix cascade, as FlashInfer's multi-level cascade
// with several shared prefixes in one level: requests over different
// system prompts, the samples of several prompts, in one step).
type SharedPrefixKV struct {
	Prefix PagedKV
	Suffix PagedKV
	// Packed, if not nil, is Prefix packed by PackedPrefix.Pack: a call
	// whose prefix product is computed in the precision it was packed
	// for reads its panels instead of packing the prefix's tiles again,
	// with bitwise the same result. Elsewhere (another precision, or a
	// product of few rows, which reads K and V rows where they lie; see
	// ComputedPrecision) it is not read, but checked all the same: it must
	// have been packed from Prefix (the same pools, layouts, length and
	// block table, and the same scale slices of Q8 or fp8 pools, holding
	// for fp8 the same values), whose keys and values must not have
	// changed since (which no call can check). With several prefixes it
	// must be nil (PackedGroups holds their panels).
	Packed *PackedPrefix
	// Groups, if not nil, says which sequences see which prefix. Prefix
	// is then a PagedKV of one sequence per prefix (prefix g's blocks in
	// table row g, BlockTable[g·stride:][:MaxBlocks], its length in
	// SeqLens[g]), and Groups has len(Prefix.SeqLens)+1 offsets, from 0
	// to the number of sequences, never decreasing: prefix g is seen by
	// sequences Groups[g] to Groups[g+1]−1 (none allowed) and by no
	// other, so the sequences come group by group, as FlashInfer's
	// qo_indptr of a shared level groups them. A prefix of length 0 gives
	// its group the plain attention over their suffixes. Nil: one prefix
	// (Prefix of one sequence), seen by every sequence, as Groups = {0,
	// number of sequences} says.
	Groups []int
	// PackedGroups, if not nil, holds a PackedPrefix per prefix of
	// Prefix (len(Prefix.SeqLens) of them), nil for a prefix not packed:
	// PackedGroups[g], if not nil, must have been packed from prefix g,
	// Prefix.Sequence(g), and is used and checked as Packed is. Packed
	// and PackedGroups may not both be set.
	PackedGroups []*PackedPrefix
}

// ForwardSharedPrefix computes attention for a batch of sequences whose
// keys and values are a shared prefix followed by each one's own suffix
// (cascade attention): batch entry b of q (and out), [batch, Hq, Nq, Dim]
// in F32, F16 or BF16, holds the queries of the Nq newest positions of
// sequence b, which see every position of its prefix and, under
// Options.Causal, the suffix positions up to their own (aligned to the
// bottom right of the suffix, as ForwardPagedKV aligns them).
//
// With Options.CuSeqQ the sequences have query counts of their own, as in
// ForwardPagedKV: q and out are [1, Hq, totalQ, Dim], the packed queries
// of every sequence; CuSeqQ has len(kv.Suffix.SeqLens)+1 offsets from 0
// to totalQ, never decreasing, and sequence s's CuSeqQ[s+1]−CuSeqQ[s]
// queries (0 allowed) are the newest positions of its suffix, so that one
// call computes a serving step's decoding sequences and prefill chunks
// over one system prompt (ExampleEngine_ForwardSharedPrefix_mixedBatch).
// Every row still sees the whole prefix; Causal applies within the
// suffix. The log-sum-exps are laid out [1, Hq, totalQ]. With
// SharedPrefixKV.Groups the sequences have several prefixes, each seen by
// its group (ExampleEngine_ForwardSharedPrefix_groups); with both, one
// call is a whole step of several system prompts' requests.
//
// Each prefix is read once for its group: one product over the prefix for
// the query rows of the group's sequences and grouped-query heads stacked
// together, then the suffixes per sequence (ForwardPagedKV), then the two
// parts of each row merged by their log-sum-exps (Merge). Bit for bit,
// the output and log-sum-exps of the sequences of group g (all of them
// without Groups) are those of these separate calls on the same engine:
//
//   - the prefix's part: ForwardPagedKVLSE over prefix g alone
//     (kv.Prefix.Sequence(g), read through PackedGroups[g] or Packed where
//     set) with Options{Scale, SoftCap, Sinks, Precision} of opts and no
//     mask (every row sees all of it), for F32 queries [1, Hq, R, Dim]
//     whose head h holds, in order, head h's rows of the group's
//     sequences (batch entries Groups[g] to Groups[g+1]−1, Nq rows each;
//     with CuSeqQ the packed rows CuSeqQ[Groups[g]] to
//     CuSeqQ[Groups[g+1]]−1), F16 and BF16 queries widened exactly;
//   - the suffixes' part: ForwardPagedKVLSE over kv.Suffix with opts less
//     Sinks (a sink counts once, in the prefix's part), into F32: with
//     CuSeqQ one call over every sequence (which computes each as the call
//     for it alone: ForwardPagedKV's doc); without, one call over the
//     group's batch entries (table rows and lengths Groups[g] to
//     Groups[g+1]−1; with one group, the whole batch);
//   - each row's two parts merged as Merge merges them (commutative, so
//     the order of the parts changes no bit: the suffix's part first, the
//     prefix's second), rounded once to out's element type.
//
// So each group's rows are bitwise ForwardSharedPrefix of that group alone
// (its prefix as a Prefix of one sequence, its suffixes, its queries, its
// CuSeqQ offsets from 0), whatever the other groups and the thread count;
// with CuSeqQ a sequence's suffix part is that of its own call. Its
// prefix part is a row of the stacked product, whose path is chosen from R, the
// group's stacked rows (ComputedPrecision of R rows; a split of the
// prefix's keys when R rows fit one query block: Config.KVSplits), so a
// sequence's rows equal those of the call for it alone only where its
// own rows would take the same path. Nor are they bitwise those of
// ForwardPagedKV over each whole sequence (its sums are taken in another
// order): they are the attention of each row over its prefix and suffix
// keys within the accuracy rule of the precision (docs/math.md).
//
// Options.Scale, Causal, SoftCap, Sinks, Precision and CuSeqQ mean what
// they mean for ForwardPagedKV; Window, Slopes (ALiBi), masks and
// CuSeqKV depend on positions the stacked product does not have, and are
// errors. The arguments are checked before anything is written: every
// error of ForwardPagedKV for either part (of every prefix), Groups that
// do not match the prefixes or the sequences, a Prefix of several
// sequences without Groups, Packed with several prefixes or PackedGroups
// of another length, panels packed from another prefix, V head dims that
// differ, and an out or lse that shares memory with anything the call
// reads (Groups included). After the first call of a shape it allocates
// nothing.
func (e *Engine) ForwardSharedPrefix(out, q Tensor, kv SharedPrefixKV, opts Options) error {
	return e.forwardShared(out, nil, q, &kv, opts)
}

// ForwardSharedPrefixLSE is ForwardSharedPrefix that also writes each
// row's log-sum-exp over the prefix and suffix keys (and the sink) into
// lse, laid out [batch, Hq, Nq] contiguously ([1, Hq, totalQ] with
// Options.CuSeqQ).
func (e *Engine) ForwardSharedPrefixLSE(out Tensor, lse []float32, q Tensor, kv SharedPrefixKV, opts Options) error {
	if lse == nil {
		return fmt.Errorf("attention: lse is nil; want a slice of B·Hq·Nq = %s elements", rowCountText(q.Layout))
	}
	return e.forwardShared(out, lse, q, &kv, opts)
}

const sharedFn = "attention: ForwardSharedPrefix: "

// sharedScratch is the memory of one ForwardSharedPrefix call: the stacked
// queries, both parts' outputs and log-sum-exps. Engines keep them in a
// free list (Engine.freeShared).
type sharedScratch struct {
	q, outP, lseP, outS, lseS []float32
	// The caller's q and out, whose addresses the row readers and writers
	// (function values) take: here rather than on the stack, which they
	// would make escape.
	qT, outT Tensor
}

// grow returns x resized to n elements, reallocated only when its
// capacity is short (the scratch keeps the largest size seen).
func grow(x []float32, n int) []float32 {
	if cap(x) < n {
		return make([]float32, n)
	}
	return x[:n]
}

func (e *Engine) forwardShared(out Tensor, lse []float32, q Tensor, kv *SharedPrefixKV, opts Options) error {
	if err := e.usable(); err != nil {
		return err
	}
	switch {
	case opts.Window != nil:
		return fmt.Errorf("%sOptions.Window is set; want nil: the stacked prefix product has no query positions", sharedFn)
	case opts.Slopes != nil:
		return fmt.Errorf("%sOptions.Slopes is set; want nil: ALiBi needs the query positions the stacked prefix product does not have", sharedFn)
	case opts.Mask.dtype != 0 || opts.BoolMask.Data != nil:
		return fmt.Errorf("%sa mask is set; want none", sharedFn)
	case opts.TreeMask.Offsets != nil || opts.TreeMask.Bits != nil:
		return fmt.Errorf("%sOptions.TreeMask is set; want none: verify draft trees with ForwardPagedKV over the whole sequences", sharedFn)
	case opts.CuSeqKV != nil:
		return fmt.Errorf("%sOptions.CuSeqKV is set; want nil (each sequence's keys are its prefix and its suffix; Options.CuSeqQ alone gives per-sequence query counts)", sharedFn)
	case kv.Prefix.V.Dim != kv.Suffix.V.Dim:
		return fmt.Errorf("%skv.Prefix.V has head dim %d and kv.Suffix.V %d; want the same", sharedFn, kv.Prefix.V.Dim, kv.Suffix.V.Dim)
	}
	// The suffixes, validated against the caller's outputs: q, out, lse,
	// the suffix pools and the options (CuSeqQ included), and every
	// overlap among them.
	js := e.getJob()
	defer e.putJob(js)
	js.origins.pool = poolOrigin{kv: kv.Suffix}
	cs, err := validateRequest(&request{fn: sharedFn + "suffixes: ", kv: &js.origins.pool, out: out, lse: lse, q: q}, &opts)
	if err != nil {
		return err
	}
	nPre := len(kv.Prefix.SeqLens)
	if err := kv.checkGroups(nPre, cs.sequences(), out, lse); err != nil {
		return err
	}
	hq, d, dv := q.Heads, q.Dim, cs.dv
	// Every prefix, checked as a batch of one sequence a prefix: its
	// pools, its table and lengths, against the queries' heads and dims.
	popts := Options{Scale: opts.Scale, SoftCap: opts.SoftCap, Sinks: opts.Sinks, Precision: opts.Precision}
	jp := e.getJob()
	defer e.putJob(jp)
	jp.origins.pool = poolOrigin{kv: kv.Prefix}
	if _, err := validateRequest(&request{fn: sharedFn + "prefix: ", kv: &jp.origins.pool,
		out: F32Tensor(nil, BHSD(nPre, hq, 0, dv)), q: F32Tensor(nil, BHSD(nPre, hq, 0, d))}, &popts); err != nil {
		return err
	}
	// Checked whatever the precision, so that a wrong one is found by
	// every call, not only by those that read it.
	for g := range nPre {
		if pp, name := kv.packs(g); pp != nil {
			if err := pp.matches(name, g, kv.Prefix.Sequence(g)); err != nil {
				return err
			}
		}
	}
	// The prefixes' buffers against the caller's outputs.
	rp := request{fn: sharedFn + "prefix: ", kv: &jp.origins.pool, out: out, lse: lse, q: q}
	if err := rp.checkOverlaps(&popts); err != nil {
		return err
	}
	rows := q.Batch * hq * q.Seq // fits: validateRequest checked the outputs' sizes
	if rows == 0 {
		return nil
	}
	s := e.getShared()
	defer e.putShared(s)
	s.q = grow(s.q, rows*d)
	s.outP, s.lseP = grow(s.outP, rows*dv), grow(s.lseP, rows)
	s.outS, s.lseS = grow(s.outS, rows*dv), grow(s.lseS, rows)
	s.qT, s.outT = q, out
	defer func() { s.qT, s.outT = Tensor{}, Tensor{} }() // keep no caller's memory alive

	// The prefixes: every row of a group's sequences sees all of its
	// prefix. Group g's stacked rows lie in the scratch from row base on.
	load := activationIO[q.dtype].load
	base := 0
	for g := range nPre {
		r0, r1 := kv.groupRows(g, &cs)
		R := r1 - r0
		if R == 0 {
			continue
		}
		for h := range hq {
			for i := range R {
				load(s.q[(base+h*R+i)*d:][:d], &s.qT, stackedOffset(&q, cs.cuQ != nil, h, r0+i))
			}
		}
		var prefix kvOrigin = &jp.origins.pool
		jp.origins.pool = poolOrigin{kv: kv.Prefix.Sequence(g)}
		if pp, _ := kv.packs(g); pp != nil {
			jp.origins.packed = packedOrigin{poolOrigin: poolOrigin{kv: kv.Prefix.Sequence(g)}, pp: pp}
			prefix = &jp.origins.packed
		}
		cp, err := validateRequest(&request{fn: sharedFn + "prefix: ", kv: prefix,
			out: F32Tensor(s.outP[base*dv:], BHSD(1, hq, R, dv)), lse: s.lseP[base:], q: F32Tensor(s.q[base*d:], BHSD(1, hq, R, d))}, &popts)
		if err != nil {
			return err
		}
		if err := e.compute(jp, &cp); err != nil {
			return err
		}
		base += hq * R
	}

	// The suffixes into scratch, without the sinks (the prefix's part has
	// them: they count once): in one call with per-sequence query counts
	// (each sequence computed as alone) or of one group, else one call per
	// group, as the group's own call computes them.
	if cs.cuQ != nil || nPre == 1 {
		cs.out, cs.lse, cs.sinks = F32Tensor(s.outS, BHSD(q.Batch, hq, q.Seq, dv)), s.lseS, nil
		if err := e.compute(js, &cs); err != nil {
			return err
		}
	} else {
		sopts := opts
		sopts.Sinks = nil
		nq := q.Seq
		for g := range nPre {
			s0, n := kv.Groups[g], kv.Groups[g+1]-kv.Groups[g]
			if n == 0 {
				continue
			}
			sub := kv.Suffix
			sub.BlockTable, sub.SeqLens = sub.BlockTable[s0*sub.rowStride():], sub.SeqLens[s0:][:n]
			js.origins.pool = poolOrigin{kv: sub}
			r0 := s0 * hq * nq
			cg, err := validateRequest(&request{fn: sharedFn + "suffixes: ", kv: &js.origins.pool,
				out: F32Tensor(s.outS[r0*dv:], BHSD(n, hq, nq, dv)), lse: s.lseS[r0:], q: batchView(q, s0, n)}, &sopts)
			if err != nil {
				return err
			}
			if err := e.compute(js, &cg); err != nil {
				return err
			}
		}
	}

	// Each row's two parts, merged into out: row r of the suffixes' layout
	// ([B, Hq, Nq], or [1, Hq, totalQ]) and row p of its group's stack.
	store := activationIO[out.dtype].store
	base = 0
	for g := range nPre {
		r0, r1 := kv.groupRows(g, &cs)
		R := r1 - r0
		for h := range hq {
			for i := range R {
				b, n := stackedRow(&q, cs.cuQ != nil, r0+i)
				r := (b*hq+h)*q.Seq + n
				o := s.outS[r*dv:][:dv]
				p := base + h*R + i
				l := mergeRow(o, o, s.outP[p*dv:][:dv], s.lseS[r], s.lseP[p])
				store(&s.outT, out.Offset(b, h, n), o)
				if lse != nil {
					lse[r] = l
				}
			}
		}
		base += hq * R
	}
	return nil
}

// checkGroups checks kv.Groups and the panels against the nPre prefixes
// of kv.Prefix and the call's seqs sequences, and that out and lse share
// no memory with Groups.
func (kv *SharedPrefixKV) checkGroups(nPre, seqs int, out Tensor, lse []float32) error {
	const fn = sharedFn
	g := kv.Groups
	switch {
	case g == nil && nPre != 1:
		return fmt.Errorf("%skv.Prefix.SeqLens has %d lengths and kv.Groups is nil; want 1 (one prefix for every sequence), or kv.Groups to say which sequences see each prefix", fn, nPre)
	case g == nil:
	case nPre == 0:
		return fmt.Errorf("%skv.Prefix.SeqLens is empty; want a length per prefix", fn)
	case len(g) != nPre+1:
		return fmt.Errorf("%skv.Groups has %d offsets and kv.Prefix.SeqLens %d prefixes; want one offset more than prefixes", fn, len(g), nPre)
	case g[0] != 0:
		return fmt.Errorf("%skv.Groups[0] is %d; want 0", fn, g[0])
	}
	for i := 1; i < len(g); i++ {
		if g[i] < g[i-1] {
			return fmt.Errorf("%skv.Groups[%d] is %d, less than kv.Groups[%d] = %d; want non-decreasing offsets", fn, i, g[i], i-1, g[i-1])
		}
	}
	if len(g) > 0 && g[len(g)-1] != seqs {
		return fmt.Errorf("%skv.Groups[%d] is %d; want the number of sequences, %d (q's batch entries, or Options.CuSeqQ's sequences)", fn, len(g)-1, g[len(g)-1], seqs)
	}
	switch {
	case kv.Packed != nil && kv.PackedGroups != nil:
		return fmt.Errorf("%skv.Packed and kv.PackedGroups are both set; want one", fn)
	case kv.Packed != nil && nPre != 1:
		return fmt.Errorf("%skv.Packed is set with %d prefixes; want kv.PackedGroups, a PackedPrefix per prefix", fn, nPre)
	case kv.PackedGroups != nil && len(kv.PackedGroups) != nPre:
		return fmt.Errorf("%skv.PackedGroups has %d entries and kv.Prefix.SeqLens %d prefixes; want one per prefix (nil for one not packed)", fn, len(kv.PackedGroups), nPre)
	}
	if sp := spanOf(g); sp.lo != sp.hi {
		olo, ohi := out.byteRange()
		if overlaps(olo, ohi, sp.lo, sp.hi) {
			return fmt.Errorf("%sout overlaps kv.Groups in memory; want separate buffers", fn)
		}
		if lse != nil {
			n, _ := rowCount(out.Layout)
			llo, lhi := floatsRange(lse[:n])
			if overlaps(llo, lhi, sp.lo, sp.hi) {
				return fmt.Errorf("%slse overlaps kv.Groups in memory; want separate buffers", fn)
			}
		}
	}
	return nil
}

// packs returns the panels of prefix g, if any, and their name in errors.
func (kv *SharedPrefixKV) packs(g int) (*PackedPrefix, string) {
	if kv.Packed != nil {
		return kv.Packed, "kv.Packed"
	}
	if kv.PackedGroups != nil {
		return kv.PackedGroups[g], "kv.PackedGroups"
	}
	return nil, ""
}

// groupRows returns the stacked rows [r0, r1) of group g of validated
// call c (whose q is the caller's): batch entry times Nq plus position,
// or with Options.CuSeqQ packed position. Without Groups the one group is
// every row.
func (kv *SharedPrefixKV) groupRows(g int, c *call) (r0, r1 int) {
	s0, s1 := 0, c.sequences()
	if kv.Groups != nil {
		s0, s1 = kv.Groups[g], kv.Groups[g+1]
	}
	if c.cuQ != nil {
		return c.cuQ[s0], c.cuQ[s1]
	}
	return s0 * c.q.Seq, s1 * c.q.Seq
}

// stackedRow returns the batch entry and position of q of stacked row i:
// the packed position itself with per-sequence query counts (packed),
// else batch entry i/Nq, position i%Nq.
func stackedRow(q *Tensor, packed bool, i int) (b, n int) {
	if packed {
		return 0, i
	}
	return i / q.Seq, i % q.Seq
}

// stackedOffset returns the offset in q of head h's stacked row i.
func stackedOffset(q *Tensor, packed bool, h, i int) int {
	b, n := stackedRow(q, packed, i)
	return q.Offset(b, h, n)
}

// batchView returns batch entries [b0, b0+n) of t, an F32, F16 or BF16
// view, as a view of n entries: the same elements, nothing copied.
func batchView(t Tensor, b0, n int) Tensor {
	off := b0 * t.BatchStride
	t.Batch = n
	switch t.dtype {
	case F32:
		t.f32 = t.f32[off:]
	case F16:
		t.f16 = t.f16[off:]
	case BF16:
		t.bf16 = t.bf16[off:]
	}
	return t
}

// getShared takes a scratch of ForwardSharedPrefix from the free list.
func (e *Engine) getShared() *sharedScratch {
	if s := takeFree(&e.mu, &e.freeShared); s != nil {
		return s
	}
	return new(sharedScratch)
}

// putShared returns a scratch to the free list.
func (e *Engine) putShared(s *sharedScratch) { giveFree(&e.mu, &e.freeShared, s) }
