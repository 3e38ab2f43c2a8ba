package attention

// Decoding over a cache whose rows hold every K/V head of a position:
// llama.cpp's layout and the flat [seq][kvHeads·headDim] cache of
// llama2.c-style runtimes (BSHD views of K and V). Folding one K/V head at
// a time walks each head's rows at a stride of the whole position row, so
// that a decode step reads memory in as many strided passes as there are
// heads, which neither the hardware prefetchers nor the DRAM pages favour
// (docs/design.md). Instead a worker takes several heads at once and folds
// them tile by tile: for every tile of positions, head after head, so
// that the tile's position rows are read together, as one stretch of
// memory. Each head's fold is the same as alone (its own workspace, the
// same tiles in the same order), so the outputs are the same bits; how
// many heads go together depends only on the thread count, never on
// anything that would change a result.

// maxFuse is the most K/V heads one worker folds together.
const maxFuse = 16

// fuseGroup returns how many of heads K/V heads a worker folds together:
// the largest divisor of heads, at most maxFuse, that still leaves at
// least threads items of work when each of items0 items per head group is
// one (items0 = batch × splits).
func fuseGroup(heads, items0, threads int) int {
	for g := min(heads, maxFuse); g > 1; g-- {
		if heads%g == 0 && items0*(heads/g) >= threads {
			return g
		}
	}
	return 1
}

// workFused takes items of j.t.fuse heads until none is left; ws is the
// worker's first workspace, and it takes the others from the engine (the
// call reserved them).
func (j *job) workFused(ws *workspace) {
	var wss [maxFuse]*workspace
	j.takeWorkspaces(&wss, ws)
	defer j.giveWorkspaces(&wss)
	for {
		i := int(j.next.Add(1)) - 1
		if i >= j.total {
			return
		}
		if err := j.foldFused(wss[:j.t.fuse], i); err != nil {
			j.fail(err)
		}
	}
}

// takeWorkspaces sets wss to ws and the j.t.fuse − 1 further workspaces a
// worker of fused heads needs, taken from the engine (the call reserved
// them); giveWorkspaces gives those back.
func (j *job) takeWorkspaces(wss *[maxFuse]*workspace, ws *workspace) {
	wss[0] = ws
	for h := 1; h < j.t.fuse; h++ {
		wss[h] = j.e.getWorkspace()
		wss[h].ensure(j.wsRows, j.wsCols, j.t.wsDim(), j.wsBF16)
	}
}

func (j *job) giveWorkspaces(wss *[maxFuse]*workspace) {
	for h := 1; h < j.t.fuse; h++ {
		j.e.putWorkspace(wss[h])
	}
}

// foldFused folds item i: part i%splits of the keys of the head group
// i/splits (batch entry and j.t.fuse consecutive K/V heads), tile by tile
// across the group, and finishes each head (or stores its part).
func (j *job) foldFused(wss []*workspace, i int) error {
	c := &j.t
	groups := c.k.Heads / j.t.fuse
	bg, part := i/j.t.splits, i%j.t.splits
	b, hk0 := bg/groups, bg%groups*j.t.fuse
	sg := seg{nq: c.q.Seq, nk: c.keys(b)}
	return j.foldHeads(wss, c, b, hk0, 0, sg, part, j.t.splits, b*c.k.Heads*j.t.splits+part)
}

// foldHeads folds part part of parts of the keys of the query positions
// [p0, p0+sg.nq) (one block: all of sequence sg's) for the K/V heads hk0,
// hk0+1, ... (one workspace each), tile by tile across the heads, and
// finishes each head, or with parts > 1 stores head hk's part in slot
// slot + hk·parts.
func (j *job) foldHeads(wss []*workspace, c *task, b, hk0, p0 int, sg seg, part, parts, slot int) error {
	e := j.e
	var spans [maxFuse]tileSpan
	for h, ws := range wss {
		var err error
		if spans[h], err = e.beginTiles(ws, c, b, hk0+h, p0, p0+sg.nq, sg, part, parts); err != nil {
			return err
		}
	}
	// Every head has the same tiles: the same sequence and positions.
	for j0 := spans[0].kBeg; j0 < spans[0].kEnd; j0 += c.bkv {
		for h, ws := range wss {
			if err := e.foldTile(ws, c, &spans[h], j0); err != nil {
				return err
			}
		}
	}
	for h, ws := range wss {
		if parts > 1 {
			j.storePart(ws, slot+(hk0+h)*parts)
		} else {
			finishBlock(ws, c, b, hk0+h, p0, sg.nq)
		}
	}
	return nil
}
