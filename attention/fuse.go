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
