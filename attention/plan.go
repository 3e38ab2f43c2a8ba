package attention

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

// makePlan returns the plan of c for this engine. The prepacked panels
// are set up by the caller, which owns their buffers.
func (e *Engine) makePlan(c *call) plan {
	p := basePlan(c)
	p.np = e.positionsPerBlock(c, &p)
	p.direct = readsRows(c.group, c.q.Seq)
	p.nBlk = (c.q.Seq + p.np - 1) / p.np
	p.splits = 1
	if c.cuQ == nil && p.nBlk == 1 {
		p.splits = e.splitCount(c, &p)
	}
	p.fuse = 1
	if p.direct && c.cuQ == nil && p.nBlk == 1 && c.kv.interleaved(c.k.Heads) {
		p.fuse = fuseGroup(c.k.Heads, c.q.Batch*p.splits, e.threadCount())
	}
	return p
}

// basePlan returns the part of c's plan that follows from its types and
// precision alone: the arithmetic and the kernels, with no
// split and no fused heads.
func basePlan(c *call) plan {
	p := plan{math: f32Math{}, splits: 1, fuse: 1, gather: c.kv.gathers(),
		kOps: &kvKernels[c.k.dtype], vOps: &kvKernels[c.v.dtype], qIO: &activationIO[c.q.dtype], outIO: &activationIO[c.out.dtype]}
	if c.mask.dtype != 0 {
		p.maskOps = &maskTypes[c.mask.dtype]
	}
	if c.precision == PrecisionBFloat16 {
		p.math = bf16Math{}
	}
	return p
}
