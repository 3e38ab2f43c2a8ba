package attention

// The work loop. makePlan cuts a call into work items, sequence plan by
// sequence plan (job.seqs, the most expensive first): (sequence, K/V head,
// query block) for an unsplit sequence, (sequence, K/V head, part) for a
// split one (split.go) and (sequence, group of K/V heads, part) for one
// whose heads are fused (fuse.go). The calling goroutine and the helpers
// that join it take item numbers from the job's counter until none is
// left (work), and the caller merges the split sequences' parts at the
// end, in part order (mergeParts). Each item is computed by the same code
// whatever goroutine runs it and writes only its own output rows or part,
// so the result is bitwise identical for every thread count.
//
// Within a sequence plan the last query block of every (sequence, K/V
// head) comes before any second-to-last one: under a causal mask a late
// query block sees more keys than an early one, and taking the expensive
// blocks first leaves the cheap ones to fill the gaps at the end (longest
// processing time first, made dynamic by the shared counter). Where the
// prepacked panels of every head do not fit at once the blocks go head by
// head instead (seqPlan.headMajor; prepack.go says why that never
// deadlocks).

// work takes items until none is left. A worker's item numbers only grow,
// so it finds an item's sequence plan by walking forward from the last
// one it saw.
func (j *job) work() {
	if j.pack != nil {
		j.packItems()
		return
	}
	ws := j.e.getWorkspace()
	defer j.e.putWorkspace(ws)
	ws.ensure(j.wsRows, j.wsCols, j.call.wsDim(), j.wsBF16)
	// A worker of fused heads folds each head in a workspace of its own:
	// ws and fuse − 1 more, taken from the engine (compute reserved them).
	var wss [maxFuse]*workspace
	wss[0] = ws
	for h := 1; h < j.fuse; h++ {
		wss[h] = j.e.getWorkspace()
		wss[h].ensure(j.wsRows, j.wsCols, j.call.wsDim(), j.wsBF16)
	}
	defer func() {
		for h := 1; h < j.fuse; h++ {
			j.e.putWorkspace(wss[h])
		}
	}()
	k := 0
	for {
		i := int(j.next.Add(1)) - 1
		if i >= j.total {
			return
		}
		for i >= j.seqs[k].item0+j.seqs[k].items {
			k++
		}
		sp := &j.seqs[k]
		if err := j.workItem(wss[:j.fuse], sp, i-sp.item0); err != nil {
			j.fail(err)
		}
	}
}

// packItems takes the strips of a PackedPrefix's pack until none is
// left.
func (j *job) packItems() {
	for {
		i := int(j.next.Add(1)) - 1
		if i >= j.total {
			return
		}
		if err := j.pack.packItem(i); err != nil {
			j.fail(err)
		}
	}
}

// workItem computes item li of sequence plan sp with the worker's
// workspaces wss (one per fused head; wss[0] for an item of one head).
func (j *job) workItem(wss []*workspace, sp *seqPlan, li int) error {
	c, heads, ws := sp.t, j.call.k.Heads, wss[0]
	switch {
	case sp.fused:
		// Part li%splits of the head group li/splits (a sequence and
		// fuse consecutive K/V heads), whose parts go to the slots of
		// their heads.
		groups := heads / j.fuse
		grp, part := li/sp.splits, li%sp.splits
		s, hk0 := grp/groups, grp%groups*j.fuse
		b, seq := c.sequence(sp.s0 + s)
		return j.foldHeads(wss, c, b, hk0, seq.q0, seq, part, sp.splits, sp.slot0+s*heads*sp.splits+part)
	case sp.splits > 1:
		// Part li%splits of (sequence, K/V head) li/splits, whose slot is
		// li after the plan's first.
		bh, part := li/sp.splits, li%sp.splits
		b, seq := c.sequence(sp.s0 + bh/heads)
		if err := j.e.foldTiles(ws, c, b, bh%heads, seq.q0, seq.q0+seq.nq, seq, part, sp.splits); err != nil {
			return err
		}
		j.storePart(ws, sp.slot0+li)
		return nil
	}
	n := sp.n * heads
	blk, bh := sp.nBlk-1-li/n, li%n
	if sp.headMajor {
		blk, bh = sp.nBlk-1-li%sp.nBlk, li/sp.nBlk
	}
	b, seq := c.sequence(sp.s0 + bh/heads)
	p0 := seq.q0 + blk*sp.np
	return j.e.foldBlock(ws, c, b, bh%heads, p0, min(p0+sp.np, seq.q0+seq.nq), seq)
}

// mergeParts combines the parts of every (sequence, K/V head) of the split
// sequences in part order and writes their outputs.
func (e *Engine) mergeParts(j *job) {
	p := &j.parts
	ws := e.getWorkspace()
	defer e.putWorkspace(ws)
	ws.ensure(p.rows, j.wsCols, j.call.wsDim(), false)
	heads := j.call.k.Heads
	for i := range j.seqs {
		sp := &j.seqs[i]
		if sp.splits == 1 {
			continue
		}
		c := sp.t
		for bh := range sp.n * heads {
			b, seq := c.sequence(sp.s0 + bh/heads)
			p.merge(ws, sp.slot0+bh*sp.splits, sp.splits, c.group*seq.nq, c.dv)
			finishBlock(ws, c, b, bh%heads, seq.q0, seq.nq)
		}
	}
}

// fail records the first error of the job.
func (j *job) fail(err error) {
	j.errMu.Lock()
	if j.err == nil {
		j.err = err
	}
	j.errMu.Unlock()
}
