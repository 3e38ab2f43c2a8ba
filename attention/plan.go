package attention

import (
	"cmp"
	"slices"

	"github.com/flashgo/flashgo/kernel"
)

// The planner. Every decision of how a call is computed is taken here,
// once per call or once per sequence, by makePlan, and read, never
// changed, afterwards: by the work loop (work.go), which hands out the
// work items, and by the tile loop (fold.go), which reads a task: the
// call and the plan of its path.
//
// The decisions that change bits: a sequence's path (in place with the
// row kernels, in float32, or through packed tiles in the call's
// precision: readsRows, so a bf16 call of few rows is computed in
// float32, as Precision's doc says), the width of a tile (bkv) and how
// many parts its keys are cut into (splitFor). Those that change none: the
// query positions of a block (which, like the thread count, changes no
// rounding; see foldTiles), how many K/V heads of a decode item are
// folded together (fuseGroup: each head's fold is the same as alone),
// whether a bf16 prefill packs its K and V once (the panels hold what the
// per-tile packs would), the chunks of the bf16 fold, and the order of
// the work items.
//
// The sequences of a call take one of three forms (sequence):
//
//   - a uniform batch: batch entry b of q holds the Nq queries of sequence
//     b, whose keys are batch entry b of the origin (Forward, and the
//     caches and paged calls without Options.CuSeqQ);
//   - Forward's variable lengths (Options.CuSeqQ and CuSeqKV): q's and the
//     views' one batch entry pack the sequences' queries and keys;
//   - per-sequence query counts over caches or paged sequences
//     (Options.CuSeqQ): q's one batch entry packs the queries, and sequence
//     s's keys are batch entry s of the origin.
//
// A uniform batch is planned as a whole, as one sequence plan over all its
// batch entries, from the batch's shape. Forward's variable lengths take
// their path from the packed shape and are never split. With per-sequence
// query counts each sequence takes the decisions that change bits as a
// call for it alone would (batch 1, its own query count and keys), so
// that its rows are bitwise that call's; one call then computes a serving
// step's decoding sequences and prefill chunks together.

// task is one call being computed along one path: the validated request
// (call, never changed once validated, shared by the call's paths) and
// the plan of the path. The tile loop reads both through it.
type task struct {
	*call
	plan
}

// plan is how the sequences of one path of a call are computed, decided
// once per call by makePlan and read, never changed, by the tile loop. A
// call has two paths (job.packs and job.rows), and two more for the
// sequences with a tree mask (job.treePacks and job.treeRows); each
// sequence takes one.
type plan struct {
	precision Precision // what the products are computed in: the call's, or float32 on the row kernels' path
	direct    bool      // read K and V rows in place with the row kernels (few query rows; see readsRows)
	// terms: the score tiles need a per-element pass (call.callTerms, or
	// a path of sequences with tree masks); treeMasked: the latter.
	terms, treeMasked bool
	bkv               int  // keys in a tile: Config.BlockKV or its default, bounded by the problem
	gridTiles         bool // a tile is as wide as the grid allows, not cut at the block's last key (foldTile)
	trim              bool // a crossing tile stops after the last key any of its rows sees (foldTile)
	// chunked, bf16: the fold computes the scores of a tile fuseRows rows
	// at a time itself, between the softmaxes (compute_bf16.go's foldTile).
	chunked bool
	// chunkFused, chunked: the level folds a tile whose width is a
	// multiple of 32 in one kernel.FoldChunkBF16 call (the amx and
	// avx512bf16 levels, d and dv multiples of 32), where fuseChunks.
	chunkFused bool
	fold       bool // f32Math folds a tile in one kernel.FoldTile call (foldsTiles)

	math   tileMath // how the tiles' products are computed: float32 or bfloat16
	pre    *prepack // bf16 K/V packed once per call, or nil
	gather bool     // the row kernels read K and V through tables of row offsets (kvOrigin.gathers)

	// The kernels of the call's element types, looked up once: K's and
	// V's rows, the queries' and outputs' rows, the additive mask's
	// entries (nil without one).
	kOps, vOps *elemKernels
	qIO, outIO *rowIO
	maskOps    *maskKernels
}

// seqPlan is the plan of one sequence of a call, or of every sequence of
// a uniform batch, and of its work items.
type seqPlan struct {
	t      *task // its path: &job.packs or &job.rows (or their tree-masked forms)
	s0, n  int   // its sequences [s0, s0+n) (a uniform batch: all; otherwise one)
	nq, nk int   // the queries of a sequence and its keys (a uniform batch: its longest sequence's)
	np     int   // query positions per block
	nBlk   int   // query blocks of a (sequence, K/V head)
	splits int   // parts of each (sequence, K/V head)'s keys (split-KV decoding; 1: none, and then nBlk may be more)
	fused  bool  // an item folds job.fuse K/V heads together (one block, read in place, interleaved heads)
	// headMajor: the items of the sequences' blocks are handed out head by
	// head, where the prepacked panels of every head do not fit at once.
	headMajor bool
	items     int // work items: n × K/V heads × nBlk × splits, divided by job.fuse when fused
	item0     int // its first work item
	slot0     int // split: its first slot of the job's parts
	cost      int // an estimate of one item's work, to order the items
}

// sequences returns the number of sequences of c.
func (c *call) sequences() int {
	if c.cuQ == nil {
		return c.q.Batch
	}
	return len(c.cuQ) - 1
}

// sequence returns sequence s of c: the batch entry of q that holds its
// queries, and where its queries and keys lie.
func (c *call) sequence(s int) (b int, sg seg) {
	switch {
	case c.cuQ == nil:
		return s, seg{nq: c.q.Seq, nk: c.kv.keys(s), seq: s}
	case c.cuKV != nil:
		return 0, seg{q0: c.cuQ[s], nq: c.cuQ[s+1] - c.cuQ[s], kv0: c.cuKV[s], nk: c.cuKV[s+1] - c.cuKV[s]}
	}
	return 0, seg{q0: c.cuQ[s], nq: c.cuQ[s+1] - c.cuQ[s], nk: c.kv.keys(s), seq: s}
}

// makePlan plans the job's call (j.call): the plans of its two paths, the
// plan of each sequence, the work items and their order, the split parts'
// buffers, the prepacked panels and the scratch of a worker.
func (e *Engine) makePlan(j *job) {
	c := &j.call
	g, heads, threads := c.group, c.k.Heads, e.threadCount()
	j.packs = task{call: c, plan: e.pathPlan(c, c.asked, false, false)}
	j.rows = task{call: c, plan: e.pathPlan(c, PrecisionFloat32, true, false)}
	trees := c.tree.bits != nil
	if trees {
		// The sequences with a tree mask take paths with the masks'
		// per-element pass; the others keep theirs, as without the masks.
		j.treePacks = task{call: c, plan: e.pathPlan(c, c.asked, false, true)}
		j.treeRows = task{call: c, plan: e.pathPlan(c, PrecisionFloat32, true, true)}
	}

	// The sequences, each with its path and parts.
	j.seqs = j.seqs[:0]
	switch {
	case c.cuQ == nil:
		// A uniform batch: one plan for all of it, from its shape.
		// With tree masks, on their paths (the decisions that change bits
		// are the same on either).
		e.addSeq(j, seqPlan{s0: 0, n: c.q.Batch, nq: c.q.Seq, nk: c.k.Seq}, readsRows(g, c.q.Seq), true, trees)
	case c.cuKV != nil:
		// Forward's variable lengths: the path of the packed shape, and no
		// split.
		direct := readsRows(g, c.q.Seq)
		for s := range c.sequences() {
			if _, sg := c.sequence(s); sg.nq > 0 {
				e.addSeq(j, seqPlan{s0: s, n: 1, nq: sg.nq, nk: sg.nk}, direct, false, false)
			}
		}
	default:
		// Per-sequence query counts: each sequence as a call for it alone.
		for s := range c.sequences() {
			if _, sg := c.sequence(s); sg.nq > 0 {
				e.addSeq(j, seqPlan{s0: s, n: 1, nq: sg.nq, nk: sg.nk}, readsRows(g, sg.nq), true, c.treeSeg(sg) != nil)
			}
		}
	}

	// The block of each path's unsplit sequences: the configured one,
	// halved (down to 16 positions) until there are at least 8 blocks a
	// thread, so that every thread stays busy to the end under a causal
	// mask, while big blocks amortise the packing of each tile over more
	// rows.
	for _, t := range [...]*task{&j.packs, &j.rows, &j.treePacks, &j.treeRows} {
		maxNq := 0
		for i := range j.seqs {
			if sp := &j.seqs[i]; sp.t == t && sp.splits == 1 {
				maxNq = max(maxNq, sp.nq)
			}
		}
		if maxNq == 0 {
			continue
		}
		np, _ := e.blockShape(t.precision, g, maxNq, c.k.Seq)
		for np > 16 {
			blocks := 0
			for i := range j.seqs {
				if sp := &j.seqs[i]; sp.t == t && sp.splits == 1 {
					blocks += sp.n * heads * ceilDiv(sp.nq, np)
				}
			}
			if blocks >= 8*threads {
				break
			}
			np /= 2
		}
		for i := range j.seqs {
			if sp := &j.seqs[i]; sp.t == t && sp.splits == 1 {
				sp.np, sp.nBlk = np, ceilDiv(sp.nq, np)
			}
		}
	}

	// Fused heads: a sequence read in place in one block folds its heads
	// together where their rows lie together, as many as leave an item
	// for every thread.
	fusible := 0
	for i := range j.seqs {
		sp := &j.seqs[i]
		sp.fused = sp.t.direct && sp.nBlk == 1 && c.cuKV == nil && c.kv.interleaved(heads)
		if sp.fused {
			fusible += sp.n * sp.splits
		}
	}
	j.fuse = 1
	if fusible > 0 {
		j.fuse = fuseGroup(heads, fusible, threads)
	}

	// The panels a prefill packs once for all its query blocks, or those
	// packed once for many calls (a PackedPrefix's, read only): for a
	// uniform batch through packed tiles. Packing once needs query blocks
	// that share the tiles (nBlk >= 2), tensor views (whole) and, in
	// bf16, tiles that start on even keys; in float32 not the integer
	// products of Q8 queries, which read the keys where they lie.
	j.pre.on = false
	if t := &j.packs; len(j.seqs) == 1 && c.cuQ == nil && j.seqs[0].t == t {
		sp := &j.seqs[0]
		if pre := c.kv.packed(t.precision); pre != nil {
			t.pre = pre
		} else if packsOnce(c, &t.plan, sp.nBlk) {
			if j.pre.setup(c, &t.plan, sp.nBlk) {
				t.pre = &j.pre
				sp.headMajor = j.pre.headMajor(c.q.Batch * heads)
			}
		}
	}

	// The work items, the parts' slots and the scratch of a worker.
	slots, splitRows, rows, cols := 0, 0, 0, 0
	j.wsBF16 = false
	for i := range j.seqs {
		sp := &j.seqs[i]
		sp.items = sp.n * heads * sp.nBlk * sp.splits
		// Rows × keys of an item; the keys of a causal block are about
		// half its sequence's, which orders the same way.
		sp.cost = min(sp.np, sp.nq) * max(1, sp.nk/sp.splits)
		if sp.fused {
			sp.items /= j.fuse
			sp.cost *= j.fuse
		}
		if sp.splits > 1 {
			sp.slot0 = slots
			slots += sp.n * heads * sp.splits
			splitRows = max(splitRows, g*sp.nq)
		}
		rows = max(rows, g*min(sp.np, sp.nq))
		cols = max(cols, sp.t.bkv)
		j.wsBF16 = j.wsBF16 || sp.t.precision == PrecisionBFloat16
	}
	// The most expensive items first (the order changes no bit).
	slices.SortStableFunc(j.seqs, func(a, b seqPlan) int { return cmp.Compare(b.cost, a.cost) })
	j.total = 0
	for i := range j.seqs {
		j.seqs[i].item0 = j.total
		j.total += j.seqs[i].items
	}
	j.split = slots > 0
	if j.split {
		j.parts.ensure(slots, splitRows, c.wsDim())
	}
	j.wsRows, j.wsCols = rows, cols
}

// addSeq appends sequence plan sp (its sequences, queries and keys set) to
// j.seqs with its path, the row kernels' when direct, the tree-masked one
// when tree, and the parts of its
// keys. A sequence whose queries fit one block of the configured size is
// split over its keys when its shape asks for it (maySplit): it stays one
// block whatever the thread count, so that the thread count never decides
// whether it is split.
func (e *Engine) addSeq(j *job, sp seqPlan, direct, maySplit, tree bool) {
	switch {
	case tree && direct:
		sp.t = &j.treeRows
	case tree:
		sp.t = &j.treePacks
	case direct:
		sp.t = &j.rows
	default:
		sp.t = &j.packs
	}
	sp.splits = 1
	if np0, _ := e.blockShape(sp.t.precision, j.call.group, sp.nq, sp.nk); maySplit && sp.nq <= np0 {
		sp.splits = e.splitFor(sp.n*j.call.k.Heads, sp.nk, sp.t.bkv)
	}
	if sp.splits > 1 {
		sp.np, sp.nBlk = sp.nq, 1
	}
	j.seqs = append(j.seqs, sp)
}

// pathPlan returns the plan of c's path that computes in precision prec,
// reading K and V rows in place with the row kernels when direct, for the
// sequences with a tree mask when tree. The choices that change bits
// (precision, bkv) are the same for a path and its tree-masked form; the
// others (fold, chunked, trim) change none.
func (e *Engine) pathPlan(c *call, prec Precision, direct, tree bool) plan {
	p := plan{precision: prec, direct: direct, math: f32Math{}, gather: c.kv.gathers(),
		terms: c.callTerms || tree, treeMasked: tree,
		kOps: &kvKernels[c.k.dtype], vOps: &kvKernels[c.v.dtype], qIO: &activationIO[c.q.dtype], outIO: &activationIO[c.out.dtype]}
	_, p.bkv = e.blockShape(prec, c.group, c.q.Seq, c.k.Seq)
	if c.mask.dtype != 0 {
		p.maskOps = &maskTypes[c.mask.dtype]
	}
	if prec == PrecisionBFloat16 {
		p.math = bf16Math{}
		p.gridTiles = true
		p.trim = !p.terms
		// Without per-element terms nothing reads the whole tile's scores
		// between the product and the softmax.
		p.chunked = !p.terms
		p.chunkFused = fuseChunks && p.chunked && kernel.FusesChunkBF16(32, c.q.Dim, c.dv)
	}
	p.fold = foldsTiles(c, &p)
	return p
}

// fuseChunks says whether a bf16 path folds its tiles with
// kernel.FoldChunkBF16 where the level fuses them (amx, avx512bf16). It is
// off: neither fused kernel ran faster than the chain of calls it computes
// the bits of (one Xeon core, amx: a chunk of 64 × 256 × 128 at 433.7
// GFLOP/s against 430.7, a P1 step slower in two of three rounds; one Zen 5
// core, avx512bf16: the chunk within the rounds' noise of the chain, P1
// and P3 too), so the engine keeps the chain; the tests turn it on
// (TestBF16ChunkKernelMatchesChain).
var fuseChunks = false

// packsOnce reports whether a uniform call's path t of nBlk query blocks
// a (batch entry, K/V head) packs its K and V once for all of them
// (prepack.go), rather than every block packing every tile it reads.
func packsOnce(c *call, t *plan, nBlk int) bool {
	if !prepackEnabled || nBlk < 2 || !c.kv.whole() || c.k.Seq == 0 || t.direct {
		return false
	}
	if t.precision == PrecisionBFloat16 {
		return t.bkv%2 == 0
	}
	return !c.q8Query
}

// foldEnabled lets tests turn foldsTiles off (SetFoldTiles), to compare
// the fused fold with the chain of kernels it stands for.
var foldEnabled = true

// foldsTiles reports whether a path of plan p folds its packed float32
// tiles with kernel.FoldTile, the four kernels of the chain (QKT,
// OnlineSoftmax, ScaleRows, PV) in one SIMD call with the same bits,
// where the level has it: tiles of at most kernel.FoldTileCols keys whose
// scores nothing reads between the product and the softmax (no
// per-element terms), packed (not read in place, not Q8 query products).
// The tile loop then gives FoldTile the whole tiles and the crossing
// ones whose rows see keys from the tile's first (a causal diagonal);
// other crossing tiles take the chain.
func foldsTiles(c *call, p *plan) bool {
	_, f32 := p.math.(f32Math)
	return foldEnabled && f32 && !p.direct && !c.q8Query && !p.terms && p.bkv <= kernel.FoldTileCols &&
		kernel.Current().FoldTile
}

// directRows is the most rows (query heads of a group × query positions of
// a sequence, or of the call) for which a sequence is read in place with
// kernel.QKRows and kernel.PVRows rather than packing each tile for QKT
// and PV (where kernel.Current says the row kernels are SIMD): the row
// kernels re-read a tile's rows for every few query rows, the packed
// kernels reuse a packed tile across all of them.
const directRows = 16

// readsRows reports whether group query heads per K/V head and nq query
// positions are read in place (plan.direct): at most directRows rows, and
// SIMD row kernels. Such a sequence is computed in float32 whatever the
// call's precision (ComputedPrecision).
func readsRows(group, nq int) bool {
	return nq <= directRows && group*nq <= directRows && kernel.Current().RowKernels
}

// blockShape returns the query positions of a block before the thread
// count shrinks it and the keys of a tile, for a path of precision prec
// with group query heads per K/V head, nq query positions and nk keys (the
// longest sequence's).
func (e *Engine) blockShape(prec Precision, group, nq, nk int) (np, bkv int) {
	bq := e.blockQ
	if prec == PrecisionBFloat16 && !e.blockQSet {
		bq = DefaultBlockQBF16
	}
	np = max(1, bq/group)
	// A block bigger than the defaults shrinks to the queries there are
	// (halving keeps it a single block, as it was), so that a large BlockQ
	// never sizes the scratch past the problem.
	for np > max(DefaultBlockQ, DefaultBlockQBF16) && np/2 >= nq {
		np /= 2
	}
	bkv = e.blockKV
	if prec == PrecisionBFloat16 && !e.blockKVSet {
		bkv = DefaultBlockKVBF16
	}
	// Likewise a tile bigger than the defaults never exceeds the keys
	// there are: a problem of fewer keys has one tile either way.
	bkv = min(bkv, max(DefaultBlockKV, DefaultBlockKVBF16, nk))
	return np, bkv
}

// splitFor returns the number of parts the keys of each of bh (sequence,
// K/V head) pairs of one block are cut into (Config.KVSplits), whose
// longest sequence has nk keys, in tiles of bkv keys. The automatic choice
// depends only on the shape, so that the result never depends on the
// thread count: parts of at least minSplitKeys keys, until there are
// splitBlocks blocks in all, and at most maxSplits parts.
func (e *Engine) splitFor(bh, nk, bkv int) int {
	const minSplitKeys, splitBlocks, maxSplits = 512, 64, 32
	if e.splits != 0 {
		// More parts than tiles leave parts empty: capping them at the
		// tiles of the longest sequence (or maxSplits) changes no part's
		// tiles, hence no bit of the result, and bounds the partial
		// results by the problem.
		return min(e.splits, max(maxSplits, ceilDiv(nk, bkv)))
	}
	return max(1, min(maxSplits, (splitBlocks+bh-1)/bh, nk/minSplitKeys))
}

// fuseGroup returns how many of heads K/V heads a worker folds together:
// the largest divisor of heads, at most maxFuse, that still leaves at
// least threads items of work when each of items0 items per head group is
// one (items0: the fusible (sequence, part) pairs).
func fuseGroup(heads, items0, threads int) int {
	for g := min(heads, maxFuse); g > 1; g-- {
		if heads%g == 0 && items0*(heads/g) >= threads {
			return g
		}
	}
	return 1
}
