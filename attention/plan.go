package attention

import "github.com/flashgo/flashgo/kernel"

// task is one call being computed: the validated request (call, never
// changed once validated) and the plan that says how it is computed. The
// tile loop reads both through it.
type task struct {
	call
	plan
}

// plan is how a call is computed, decided once per call by makePlan and
// read, never changed, by the tile loop.
type plan struct {
	np     int  // query positions per block (positionsPerBlock)
	bkv    int  // keys in a tile: Config.BlockKV or its default, bounded by the problem
	nBlk   int  // query blocks per (batch entry, K/V head)
	splits int  // parts of each (batch entry, K/V head)'s keys (split-KV decoding); 1: none
	fuse   int  // K/V heads one work item folds together (fused decode over interleaved heads); 1: none
	direct bool // read K and V rows in place with the row kernels (few query rows; see directRows)
	fold   bool // f32Math folds a tile in one kernel.FoldTile call (foldsTiles)

	math tileMath // how the tiles' products are computed: float32 or bfloat16
	pre  *prepack // bf16 K/V packed once per call, or nil
	src  kvStore  // where the keys and values lie

	// The kernels of the call's element types, looked up once: K's and
	// V's rows, the queries' and outputs' rows, the additive mask's
	// entries (nil without one).
	kOps, vOps *elemKernels
	qIO, outIO *rowIO
	maskOps    *maskKernels
}

// makePlan returns the plan of c for this engine. src is where c's keys
// and values lie; it must stay valid for the whole call (the job's own
// storage). The prepacked panels are set up by the caller, which owns
// their buffers.
func (e *Engine) makePlan(c *call, src kvStore) plan {
	p := basePlan(c, src)
	p.np = e.positionsPerBlock(c, &p)
	p.direct = readsRows(c.group, c.q.Seq)
	p.nBlk = (c.q.Seq + p.np - 1) / p.np
	p.splits = 1
	if c.cuQ == nil && p.nBlk == 1 {
		p.splits = e.splitCount(c, &p)
	}
	p.fold = foldsTiles(c, &p)
	p.fuse = 1
	if p.direct && c.cuQ == nil && p.nBlk == 1 && src.interleaved(c.k.Heads) {
		p.fuse = fuseGroup(c.k.Heads, c.q.Batch*p.splits, e.threadCount())
	}
	return p
}

// basePlan returns the part of c's plan that follows from its types and
// precision alone: the store, the arithmetic and the kernels, with no
// split and no fused heads.
func basePlan(c *call, src kvStore) plan {
	p := plan{src: src, math: f32Math{}, splits: 1, fuse: 1,
		kOps: &kvKernels[c.k.dtype], vOps: &kvKernels[c.v.dtype], qIO: &activationIO[c.q.dtype], outIO: &activationIO[c.out.dtype]}
	if c.mask.dtype != 0 {
		p.maskOps = &maskTypes[c.mask.dtype]
	}
	if c.precision == PrecisionBFloat16 {
		p.math = bf16Math{}
	}
	return p
}

// foldEnabled lets tests turn foldsTiles off (SetFoldTiles), to compare
// the fused fold with the chain of kernels it stands for.
var foldEnabled = true

// foldsTiles reports whether a call of plan p folds its packed float32
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
	return foldEnabled && f32 && !p.direct && !c.q8Query && !c.terms && p.bkv <= kernel.FoldTileCols &&
		kernel.Current().FoldTile
}
