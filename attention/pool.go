package attention

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// The worker pool. A call cuts its work into blocks (batch entry, K/V head,
// range of query positions); the calling goroutine and up to Threads−1
// helpers take blocks from a shared counter until none is left. Each block
// is computed by the same code whatever goroutine runs it and writes only
// its own output rows, so the result is bitwise identical for every thread
// count.
//
// Blocks are handed out largest first: under a causal mask a late query
// block sees more keys than an early one, and taking the expensive blocks
// first leaves the cheap ones to fill the gaps at the end (longest
// processing time first, made dynamic by the shared counter).
//
// Helpers are long-lived goroutines per engine. A call puts its job on the
// pool's list of open jobs and sends wake-up tokens (one per helper it may
// use) down a buffered channel; a helper that wakes takes any open job that
// still has blocks to hand out, and the caller, once it runs out of blocks
// itself, closes its job and waits only for the helpers that took it. A
// helper busy with another call (concurrent callers share the helpers) or
// slow to wake never holds a caller up, and a token that arrives late just
// finds nothing to do. Tokens carry no job, so nothing keeps a finished
// job alive: the jobs in use are exactly the calls in progress, and the
// caller reserves one workspace per goroutine that may work on its call
// before it starts. Hence a warmed-up engine allocates nothing, however the
// helpers happen to be scheduled. When the Engine is garbage collected, a
// cleanup closes the channel and the helpers exit.

// job is one call's share-out of blocks.
type job struct {
	e       *Engine
	t       task    // by value: the job is pooled, so the call does not escape
	origins origins // the value the call's kv points to
	total   int     // blocks in all
	next    atomic.Int64

	// Split-KV decoding (t.splits > 1): block i is part i%splits of
	// (batch, K/V head) i/splits, and its accumulators go to the part
	// buffers. With t.fuse > 1 each item folds fuse K/V heads together,
	// tile by tile (workFused); item i is part i%splits of head group
	// i/splits.
	parts splitParts

	// pre holds the K/V pair panels of a bf16 prefill, packed once.
	pre prepack

	// Per-sequence query counts (call.seqQ, mixedPlan): rows is the call
	// as computed for the sequences whose own call reads K and V rows in
	// place (t for the others), and seqs the plan of each sequence with
	// queries, in the order of its items.
	mixed bool
	rows  task
	seqs  []seqWork

	// The scratch a worker needs: a tile of wsRows query rows × wsCols
	// keys, with the bf16 buffers when wsBF16 is set.
	wsRows, wsCols int
	wsBF16         bool

	// Guarded by the pool's mutex.
	done   sync.Cond // signalled when the last helper leaves a closed job
	closed bool      // the caller has finished: no helper may take the job
	active int       // helpers working on the job

	errMu sync.Mutex
	err   error
}

// pool is the part of an Engine that its helpers share; it must not point
// back to the Engine, or the cleanup that stops the helpers would never run.
type pool struct {
	wake    chan struct{}
	mu      sync.Mutex
	open    []*job // jobs whose callers are still working
	helpers int
}

// poolQueue is the capacity of the wake-up channel. When it is full the
// helpers have that many wake-ups pending already, so a further one is
// simply not sent.
const poolQueue = 256

func (p *pool) grow(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ; p.helpers < n; p.helpers++ {
		go p.help()
	}
}

func (p *pool) help() {
	for range p.wake {
		if j := p.join(); j != nil {
			j.work()
			p.leave(j)
		}
	}
}

// join returns an open job with blocks left, counting the helper in (leave
// counts it out).
func (p *pool) join() *job {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.open) - 1; i >= 0; i-- {
		if j := p.open[i]; j.next.Load() < int64(j.total) {
			j.active++
			return j
		}
	}
	return nil
}

func (p *pool) leave(j *job) {
	p.mu.Lock()
	j.active--
	if j.active == 0 && j.closed {
		j.done.Signal()
	}
	p.mu.Unlock()
}

// close takes j off the open list and waits for its helpers to leave.
func (p *pool) close(j *job) {
	p.mu.Lock()
	j.closed = true
	for i, o := range p.open {
		if o == j {
			last := len(p.open) - 1
			p.open[i], p.open[last] = p.open[last], nil
			p.open = p.open[:last]
			break
		}
	}
	for j.active > 0 {
		j.done.Wait()
	}
	p.mu.Unlock()
}

// threadCount returns the number of goroutines a call may use.
func (e *Engine) threadCount() int {
	if e.threads > 0 {
		return e.threads
	}
	return runtime.GOMAXPROCS(0)
}

// compute computes every block of c, spreading them over the pool. j is
// the job the entry point took before validation, since c's origin lies
// in it (origins); the entry point gives it back.
func (e *Engine) compute(j *job, c *call) error {
	j.e, j.t.call = e, *c
	// From here on c is the job's copy: a pointer into the caller's call
	// would make it escape (and allocate).
	jc := &j.t.call
	if jc.seqQ != nil {
		e.mixedPlan(j)
	} else {
		e.callPlan(j)
	}
	c, p := jc, &j.t.plan
	j.next.Store(0)
	j.closed, j.active, j.err = false, 0, nil
	helpers := min(e.threadCount(), j.total) - 1
	e.reserveWorkspaces((1+max(0, helpers))*p.fuse, j.wsRows, j.wsCols, c.wsDim(), j.wsBF16)
	if helpers > 0 {
		pl := e.pool
		pl.grow(helpers)
		pl.mu.Lock()
		pl.open = append(pl.open, j)
		pl.mu.Unlock()
		for range helpers {
			select {
			case pl.wake <- struct{}{}:
			default: // plenty of wake-ups are pending already
			}
		}
	}
	j.work()
	if helpers > 0 {
		e.pool.close(j)
	}
	if j.err == nil {
		if j.mixed {
			e.mergeMixed(j)
		} else if p.splits > 1 {
			e.mergeParts(j)
		}
	}
	return j.err
}

// callPlan plans the job's call (one without per-sequence query counts):
// its plan, its blocks, the split parts' buffers, the prepacked panels
// and the scratch of a worker.
func (e *Engine) callPlan(j *job) {
	j.mixed = false
	j.t.plan = e.makePlan(&j.t.call)
	c, p := &j.t.call, &j.t.plan
	j.total = c.q.Batch * c.k.Heads * p.nBlk
	if c.cuQ != nil {
		j.total = 0
		for s := range len(c.cuQ) - 1 {
			j.total += c.k.Heads * ((c.cuQ[s+1] - c.cuQ[s] + p.np - 1) / p.np)
		}
	}
	if p.splits > 1 {
		j.total *= p.splits
		j.parts.ensure(c.q.Batch*c.k.Heads*p.splits, c.group*c.q.Seq, c.wsDim())
	}
	j.total /= p.fuse
	if pre := c.kv.packed(c.precision); pre != nil && !p.direct {
		// Packed once for many calls: read only, never packed here, and
		// the job's own panels are off (headMajor asks them).
		p.pre = pre
		j.pre.on = false
	} else if j.pre.setup(&j.t, p.nBlk, p.bkv); j.pre.on {
		p.pre = &j.pre
	}
	j.wsRows, j.wsCols, j.wsBF16 = c.group*p.np, p.bkv, c.precision == PrecisionBFloat16
}

// splitCount returns the number of parts each (batch, K/V head) of a
// one-block call is cut into (Config.KVSplits). The automatic choice
// depends only on the shape, so that the result never depends on the
// thread count: parts of at least minSplitKeys keys, until there are
// splitBlocks blocks in all, and at most maxSplits parts.
func (e *Engine) splitCount(c *call, p *plan) int {
	nk := 0
	for b := range c.q.Batch {
		nk = max(nk, c.kv.keys(b))
	}
	return e.splitFor(c.q.Batch*c.k.Heads, nk, p.bkv)
}

// splitFor is splitCount for bh (batch entry, K/V head) pairs whose
// longest sequence has nk keys, in tiles of bkv keys.
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

// work takes blocks until none is left.
func (j *job) work() {
	ws := j.e.getWorkspace()
	defer j.e.putWorkspace(ws)
	c := &j.t
	ws.ensure(j.wsRows, j.wsCols, c.wsDim(), j.wsBF16)
	if j.mixed {
		j.workMixed(ws)
		return
	}
	if j.t.fuse > 1 {
		j.workFused(ws)
		return
	}
	heads := c.k.Heads
	// Variable lengths: the blocks are numbered sequence by sequence, and
	// each worker's block indices only grow, so it finds a block's
	// sequence by walking forward from the last one it saw.
	cs, csBase := 0, 0 // a sequence, and the index of its first block
	for {
		i := int(j.next.Add(1)) - 1
		if i >= j.total {
			return
		}
		var err error
		if j.t.splits > 1 {
			err = j.foldPart(ws, i)
		} else if c.cuQ == nil {
			// Block index i, largest first: the last query block of every
			// (batch, head) comes before any second-to-last one; or head by
			// head, largest first within each, where the prepacked panels
			// of every head do not fit at once.
			blk := j.t.nBlk - 1 - i/(c.q.Batch*heads)
			bh := i % (c.q.Batch * heads)
			if j.pre.headMajor(c.q.Batch * heads) {
				blk, bh = j.t.nBlk-1-i%j.t.nBlk, i/j.t.nBlk
			}
			p0 := blk * j.t.np
			sg := seg{nq: c.q.Seq, nk: c.keys(bh / heads)}
			err = j.e.foldBlock(ws, c, bh/heads, bh%heads, p0, min(p0+j.t.np, c.q.Seq), sg)
		} else {
			var sg seg
			for {
				sg = seg{q0: c.cuQ[cs], nq: c.cuQ[cs+1] - c.cuQ[cs], kv0: c.cuKV[cs], nk: c.cuKV[cs+1] - c.cuKV[cs]}
				n := heads * ((sg.nq + j.t.np - 1) / j.t.np)
				if i < csBase+n {
					break
				}
				cs, csBase = cs+1, csBase+n
			}
			// Within a sequence, its last (most expensive under a causal
			// mask) query blocks come first.
			li := i - csBase
			blk := (sg.nq+j.t.np-1)/j.t.np - 1 - li/heads
			p0 := sg.q0 + blk*j.t.np
			err = j.e.foldBlock(ws, c, 0, li%heads, p0, min(p0+j.t.np, sg.q0+sg.nq), sg)
		}
		if err != nil {
			j.fail(err)
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

func (e *Engine) getJob() *job {
	if j := takeFree(&e.mu, &e.freeJobs); j != nil {
		return j
	}
	j := new(job)
	j.done.L = &e.pool.mu
	return j
}

func (e *Engine) putJob(j *job) {
	j.e, j.t, j.rows, j.origins = nil, task{}, task{}, origins{}
	clear(j.seqs)
	j.seqs = j.seqs[:0]
	giveFree(&e.mu, &e.freeJobs, j)
}

// takeFree pops the last element of one of the engine's free lists under
// its lock, or returns nil when the list is empty.
func takeFree[T any](mu *sync.Mutex, list *[]*T) *T {
	mu.Lock()
	defer mu.Unlock()
	n := len(*list)
	if n == 0 {
		return nil
	}
	x := (*list)[n-1]
	(*list)[n-1] = nil
	*list = (*list)[:n-1]
	return x
}

// giveFree pushes x onto one of the engine's free lists under its lock.
func giveFree[T any](mu *sync.Mutex, list *[]*T, x *T) {
	mu.Lock()
	*list = append(*list, x)
	mu.Unlock()
}

// reserveWorkspaces makes sure that n goroutines can each take a workspace
// for a tile of rows × cols with head dim dim from the free list without
// allocating, so that the number of helpers that happen to join a call
// never decides whether it allocates.
func (e *Engine) reserveWorkspaces(n, rows, cols, dim int, bf16 bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ws := range e.free {
		ws.ensure(rows, cols, dim, bf16)
	}
	for len(e.free) < n {
		ws := new(workspace)
		ws.ensure(rows, cols, dim, bf16)
		e.free = append(e.free, ws)
	}
}
