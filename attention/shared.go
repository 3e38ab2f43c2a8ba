package attention

import "fmt"

// SharedPrefixKV is the K/V of a batch of sequences that share their first
// positions (parallel sampling, beam search, many requests over one system
// prompt), split as cascade attention splits it: the shared prefix once,
// and each sequence's own positions after it.
//
// Prefix is a PagedKV of one sequence: the prefix's blocks in
// BlockTable[:MaxBlocks] and its length in SeqLens[0]. Suffix is a PagedKV
// of one sequence per batch entry of q: sequence b's positions after the
// prefix, SeqLens[b] of them (0 allowed). The two may share pools (the
// prefix's blocks among the pool's others, as a paged cache holds them) or
// not; their V head dims must agree. Both may be views of one table of the
// whole sequences (PagedKV.BlockStride): Prefix its first row's first
// columns, Suffix the columns after them
// (ExampleEngine_ForwardSharedPrefix_tableView).
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
	// changed since (which no call can check).
	Packed *PackedPrefix
}

// ForwardSharedPrefix computes attention for a batch of sequences whose
// keys and values are a shared prefix followed by each one's own suffix:
// batch entry b of q (and out), [batch, Hq, Nq, Dim] in F32, F16 or BF16,
// holds the queries of the Nq newest positions of sequence b, which see
// every position of the prefix and, under Options.Causal, the suffix
// positions up to their own (aligned to the bottom right, as
// ForwardPagedKV aligns them).
//
// It reads the prefix once for the whole batch: one product over the
// prefix for the query rows of every sequence and grouped-query head
// stacked together, then the suffixes per sequence (ForwardPagedKV), then
// the two parts of each row merged by their log-sum-exps (Merge). The
// result is the attention of each row over its prefix and suffix keys,
// within the accuracy rule of the precision (docs/math.md), but not
// bitwise that of ForwardPagedKV over each whole sequence: its sums are
// taken in another order.
//
// Options.Scale, Causal, SoftCap, Sinks and Precision mean what they mean
// for ForwardPagedKV; Window, Slopes (ALiBi), masks and variable lengths
// depend on positions the stacked product does not have, and are errors.
// The arguments are checked before anything is written: every error of
// ForwardPagedKV for either part, a Prefix of more than one sequence, V
// head dims that differ, and an out or lse that shares memory with
// anything the call reads. After the first call of a shape it allocates
// nothing.
func (e *Engine) ForwardSharedPrefix(out, q Tensor, kv SharedPrefixKV, opts Options) error {
	return e.forwardShared(out, nil, q, &kv, opts)
}

// ForwardSharedPrefixLSE is ForwardSharedPrefix that also writes each
// row's log-sum-exp over the prefix and suffix keys (and the sink) into
// lse, laid out [batch, Hq, Nq] contiguously.
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
	case opts.CuSeqQ != nil || opts.CuSeqKV != nil:
		return fmt.Errorf("%sOptions.CuSeqQ/CuSeqKV are set; want nil (one sequence per batch entry)", sharedFn)
	case len(kv.Prefix.SeqLens) != 1:
		return fmt.Errorf("%skv.Prefix.SeqLens has %d lengths; want 1 (the prefix is one sequence)", sharedFn, len(kv.Prefix.SeqLens))
	case kv.Prefix.V.Dim != kv.Suffix.V.Dim:
		return fmt.Errorf("%skv.Prefix.V has head dim %d and kv.Suffix.V %d; want the same", sharedFn, kv.Prefix.V.Dim, kv.Suffix.V.Dim)
	}
	// The suffixes, validated against the caller's outputs: q, out, lse,
	// the suffix pools and the options, and every overlap among them.
	js := e.getJob()
	defer e.putJob(js)
	js.origins.pool = poolOrigin{kv: kv.Suffix}
	cs, err := validateRequest(&request{fn: sharedFn + "suffixes: ", kv: &js.origins.pool, out: out, lse: lse, q: q}, &opts)
	if err != nil {
		return err
	}
	B, hq, nq, d, dv := q.Batch, q.Heads, q.Seq, q.Dim, cs.dv
	rows := B * hq * nq // fits: validateRequest checked the outputs' sizes
	s := e.getShared()
	defer e.putShared(s)
	stacked := BHSD(1, hq, B*nq, d)
	s.q = grow(s.q, stacked.Span())
	s.outP = grow(s.outP, rows*dv)
	s.lseP, s.outS, s.lseS = grow(s.lseP, rows), grow(s.outS, rows*dv), grow(s.lseS, rows)
	// The prefix: every row of every sequence sees all of it.
	popts := Options{Scale: opts.Scale, SoftCap: opts.SoftCap, Sinks: opts.Sinks, Precision: opts.Precision}
	// Its pools, read through the panels packed once where there are some
	// (for the call's precision).
	jp := e.getJob()
	defer e.putJob(jp)
	var prefix kvOrigin = &jp.origins.pool
	jp.origins.pool = poolOrigin{kv: kv.Prefix}
	if kv.Packed != nil {
		jp.origins.packed = packedOrigin{poolOrigin: poolOrigin{kv: kv.Prefix}, pp: kv.Packed}
		prefix = &jp.origins.packed
	}
	cp, err := validateRequest(&request{fn: sharedFn + "prefix: ", kv: prefix,
		out: F32Tensor(s.outP, BHSD(1, hq, B*nq, dv)), lse: s.lseP, q: F32Tensor(s.q, stacked)}, &popts)
	if err != nil {
		return err
	}
	if kv.Packed != nil {
		// Checked whatever the precision, so that a wrong one is found
		// by every call, not only by those that read it.
		if err := kv.Packed.matches(&kv.Prefix); err != nil {
			return err
		}
	}
	// The prefix's buffers against the caller's outputs.
	rp := request{fn: sharedFn + "prefix: ", kv: prefix, out: out, lse: lse, q: q}
	if err := rp.checkOverlaps(&popts); err != nil {
		return err
	}
	if rows == 0 {
		return nil
	}
	load := activationIO[q.dtype].load
	s.qT, s.outT = q, out
	defer func() { s.qT, s.outT = Tensor{}, Tensor{} }() // keep no caller's memory alive
	for b := range B {
		for h := range hq {
			for n := range nq {
				load(s.q[(h*B*nq+b*nq+n)*d:][:d], &s.qT, q.Offset(b, h, n))
			}
		}
	}
	if err := e.compute(jp, &cp); err != nil {
		return err
	}
	// The suffixes into scratch, without the sinks (the prefix's part has
	// them: they count once).
	cs.out, cs.lse, cs.sinks = F32Tensor(s.outS, BHSD(B, hq, nq, dv)), s.lseS, nil
	if err := e.compute(js, &cs); err != nil {
		return err
	}
	store := activationIO[out.dtype].store
	r := 0
	for b := range B {
		for h := range hq {
			for n := range nq {
				o := s.outS[r*dv:][:dv]
				p := h*B*nq + b*nq + n
				l := mergeRow(o, o, s.outP[p*dv:][:dv], s.lseS[r], s.lseP[p])
				store(&s.outT, out.Offset(b, h, n), o)
				if lse != nil {
					lse[r] = l
				}
				r++
			}
		}
	}
	return nil
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
