package attention

import (
	"cmp"
	"slices"
)

// Per-sequence query counts over caches or paged sequences (Options.CuSeqQ
// with ForwardPagedKV, ForwardPaged, ForwardKVCaches): one call computes a
// serving step's decoding sequences and prefill chunks together, and each
// sequence's rows are bitwise those of a call for that sequence alone
// (batch 1, its own query count) on the same engine.
//
// A call's plan decides from its shape how its blocks are computed: in
// place or through packed tiles (readsRows), in float32 or bfloat16
// (a bf16 call of few rows per K/V head is computed in float32), over
// which tiles of keys, and cut into how many parts (splitCount). Those
// decisions change the rounding, so here each sequence takes them as its
// own call would, from its own query count and keys (mixedPlan). The
// arithmetic that follows from them is one of two tasks of the job: the
// call's own, for the sequences computed through packed tiles, and
// j.rows, in float32 with the row kernels, for those read in place. What
// cannot change a bit is decided for the call as a whole: the block size
// of an unsplit sequence (which, like the thread count, changes no
// rounding; see foldTiles), the order of the work items, and how many
// heads of a decoding sequence one item folds together (fuseGroup, over
// heads whose rows lie together; each head's fold is the same as alone).
//
// The work items are numbered sequence by sequence, in an order where the
// items that cost the most come first (as the blocks of any call are),
// and are shared out over the pool like any call's: items (sequence, K/V
// head, query block) of an unsplit sequence, (sequence, K/V head, part) of
// a split one, and (sequence, group of K/V heads, part) of one whose heads
// are fused. The parts are merged by the caller at the end, in
// part order, as mergeParts does.

// seqWork is the plan of one sequence of a call with per-sequence query
// counts.
type seqWork struct {
	seq    int  // the sequence: batch entry of the store
	q0, nq int  // its queries: packed positions [q0, q0+nq) of q
	nk     int  // its keys
	direct bool // its own call reads K and V rows in place (j.rows)
	np     int  // query positions per block
	nBlk   int  // query blocks
	splits int  // parts of its keys (1: none; then nBlk is 1)
	fused  bool // an item folds j.t.fuse K/V heads (one block, read in place)
	items  int  // work items: K/V heads × nBlk × splits, divided by j.t.fuse when fused
	item0  int  // its first work item
	slot0  int  // split: its first slot of the job's parts
	cost   int  // an estimate of one item's work, to order the items
}

// mixedPlan plans the job's call, whose q packs the queries of every
// sequence (call.seqQ), as the calls of its sequences alone would be
// planned: the two tasks, each sequence's blocks and parts, the work
// items, the parts' buffers and the scratch of a worker.
func (e *Engine) mixedPlan(j *job, src kvStore) {
	j.mixed = true
	c := &j.t.call
	heads, g := c.k.Heads, c.group
	j.t.plan = basePlan(c, src)
	_, j.t.bkv = e.blockShape(c.precision, g, c.q.Seq, c.k.Seq)
	j.t.fold = foldsTiles(c, &j.t.plan)
	// A sequence of few rows is computed in float32 (Precision's doc),
	// with the rows read in place: its own call demotes its precision.
	j.rows.call = *c
	rc := &j.rows.call
	rc.precision = PrecisionFloat32
	rc.gridTiles, rc.trim = false, false
	j.rows.plan = basePlan(rc, src)
	j.rows.direct = true
	_, j.rows.bkv = e.blockShape(rc.precision, g, c.q.Seq, c.k.Seq)

	// Each sequence's decisions, from its own query count and keys. The
	// tile width is the call's: a sequence's own call has a narrower
	// tile only when its keys fit one tile, and one tile either way.
	j.seqs = j.seqs[:0]
	var maxNq [2]int // the longest unsplit sequence of each task (0: j.t, 1: j.rows)
	maxSplitNq, slots := 0, 0
	for s := range len(c.seqQ) - 1 {
		nq := c.seqQ[s+1] - c.seqQ[s]
		if nq == 0 {
			continue
		}
		w := seqWork{seq: s, q0: c.seqQ[s], nq: nq, nk: src.keys(s), direct: readsRows(g, nq), splits: 1}
		t := j.taskOf(&w)
		if np0, _ := e.blockShape(t.precision, g, nq, w.nk); nq <= np0 {
			// Its queries fit one block: its own call splits its keys
			// when its shape asks for it (positionsPerBlock).
			w.splits = e.splitFor(heads, w.nk, t.bkv)
		}
		if w.splits > 1 {
			w.np, w.nBlk = nq, 1
			w.slot0 = slots
			slots += heads * w.splits
			maxSplitNq = max(maxSplitNq, nq)
		} else {
			v := 0
			if w.direct {
				v = 1
			}
			maxNq[v] = max(maxNq[v], nq)
		}
		j.seqs = append(j.seqs, w)
	}
	// The block of the unsplit sequences of each task: the call's, shrunk
	// until there are enough blocks for the threads.
	rows := maxSplitNq
	for v, t := range [...]*task{&j.t, &j.rows} {
		if maxNq[v] == 0 {
			continue
		}
		np, _ := e.blockShape(t.precision, g, maxNq[v], c.k.Seq)
		threads := e.threadCount()
		for np > 16 {
			blocks := 0
			for i := range j.seqs {
				if w := &j.seqs[i]; w.splits == 1 && w.direct == (v == 1) {
					blocks += heads * ceilDiv(w.nq, np)
				}
			}
			if blocks >= 8*threads {
				break
			}
			np /= 2
		}
		t.np = np
		rows = max(rows, min(np, maxNq[v]))
	}
	j.wsBF16 = false
	fusible := 0 // (sequence, part) pairs whose heads may be fused
	for i := range j.seqs {
		w := &j.seqs[i]
		t := j.taskOf(w)
		if w.splits == 1 {
			w.np = t.np
			w.nBlk = ceilDiv(w.nq, w.np)
		}
		// A sequence read in place in one block folds its heads together
		// where their rows lie together, as its own call does.
		w.fused = w.direct && w.nBlk == 1 && src.interleaved(heads)
		if w.fused {
			fusible += w.splits
		}
		j.wsBF16 = j.wsBF16 || t.precision == PrecisionBFloat16
	}
	j.t.fuse = 1
	if fusible > 0 {
		j.t.fuse = fuseGroup(heads, fusible, e.threadCount())
	}
	for i := range j.seqs {
		w := &j.seqs[i]
		w.items = heads * w.nBlk * w.splits
		// Rows × keys of an item; the keys of a causal block are about
		// half its sequence's, which orders the same way.
		w.cost = min(w.np, w.nq) * max(1, w.nk/w.splits)
		if w.fused {
			w.items /= j.t.fuse
			w.cost *= j.t.fuse
		}
	}
	// The most expensive items first; the order changes no bit.
	slices.SortFunc(j.seqs, func(a, b seqWork) int {
		if d := cmp.Compare(b.cost, a.cost); d != 0 {
			return d
		}
		return cmp.Compare(a.seq, b.seq)
	})
	j.total = 0
	for i := range j.seqs {
		j.seqs[i].item0 = j.total
		j.total += j.seqs[i].items
	}
	if slots > 0 {
		j.parts.ensure(slots, g*maxSplitNq, c.wsDim())
	}
	j.pre.on = false
	j.wsRows, j.wsCols = g*rows, max(j.t.bkv, j.rows.bkv)
}

// taskOf returns the task that computes sequence w: j.rows for a sequence
// whose own call reads K and V rows in place, else the call's own.
func (j *job) taskOf(w *seqWork) *task {
	if w.direct {
		return &j.rows
	}
	return &j.t
}

// workMixed takes the items of a call with per-sequence query counts until
// none is left.
func (j *job) workMixed(ws *workspace) {
	heads, fuse := j.t.k.Heads, j.t.fuse
	var wss [maxFuse]*workspace
	j.takeWorkspaces(&wss, ws)
	defer j.giveWorkspaces(&wss)
	k := 0 // the sequence of the last item taken: a worker's items only grow
	for {
		i := int(j.next.Add(1)) - 1
		if i >= j.total {
			return
		}
		for i >= j.seqs[k].item0+j.seqs[k].items {
			k++
		}
		w := &j.seqs[k]
		c := j.taskOf(w)
		li := i - w.item0
		sg := seg{q0: w.q0, nq: w.nq, nk: w.nk, seq: w.seq}
		var err error
		if w.fused {
			// Part li%splits of the heads of group li/splits, whose parts
			// go to the slots of their heads.
			g, part := li/w.splits, li%w.splits
			err = j.foldHeads(wss[:fuse], c, 0, g*fuse, w.q0, sg, part, w.splits, w.slot0+part)
		} else if w.splits > 1 {
			// Part li%splits of K/V head li/splits, whose slot is li after
			// the sequence's first.
			if err = j.e.foldTiles(ws, c, 0, li/w.splits, w.q0, w.q0+w.nq, sg, li%w.splits, w.splits); err == nil {
				j.storePart(ws, w.slot0+li)
			}
		} else {
			// Within a sequence, its last (most expensive under a causal
			// mask) query blocks come first.
			blk := w.nBlk - 1 - li/heads
			p0 := w.q0 + blk*w.np
			err = j.e.foldBlock(ws, c, 0, li%heads, p0, min(p0+w.np, w.q0+w.nq), sg)
		}
		if err != nil {
			j.fail(err)
		}
	}
}

// mergeMixed merges the parts of every split sequence of a call with
// per-sequence query counts and writes its outputs, as mergeParts does for
// a call of one sequence.
func (e *Engine) mergeMixed(j *job) {
	p := &j.parts
	ws := e.getWorkspace()
	defer e.putWorkspace(ws)
	ws.ensure(p.rows, j.t.bkv, j.t.wsDim(), false)
	for i := range j.seqs {
		w := &j.seqs[i]
		if w.splits == 1 {
			continue
		}
		c := j.taskOf(w)
		for hk := range c.k.Heads {
			p.merge(ws, w.slot0+hk*w.splits, w.splits, c.group*w.nq, c.dv)
			finishBlock(ws, c, 0, hk, w.q0, w.nq)
		}
	}
}
