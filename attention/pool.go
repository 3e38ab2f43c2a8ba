package attention

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// The worker pool. A call cuts its work into items (makePlan, work.go);
// the calling goroutine and up to Threads−1 helpers take items from a
// shared counter until none is left.
//
// Helpers are long-lived goroutines per engine. A call puts its job on the
// pool's list of open jobs and sends wake-up tokens (one per helper it may
// use) down a buffered channel; a helper that wakes takes any open job that
// still has items to hand out, and the caller, once it runs out of items
// itself, closes its job and waits only for the helpers that took it. A
// helper busy with another call (concurrent callers share the helpers) or
// slow to wake never holds a caller up, and a token that arrives late just
// finds nothing to do. Tokens carry no job, so nothing keeps a finished
// job alive: the jobs in use are exactly the calls in progress, and the
// caller reserves one workspace per goroutine that may work on its call
// before it starts. Hence a warmed-up engine allocates nothing, however the
// helpers happen to be scheduled. When the Engine is garbage collected, a
// cleanup closes the channel and the helpers exit.

// job is one call being computed: the call, where its keys and values
// lie, its plan (makePlan) and the share-out of its work items. Jobs are
// pooled by the engine, so none of it escapes.
type job struct {
	e       *Engine
	call    call    // the validated call, by value
	origins origins // the value the call's kv points to

	// The plan: the call's two paths (packs: through packed tiles in the
	// call's precision; rows: in place with the row kernels, in float32),
	// the same two for the sequences with a tree mask (treePacks,
	// treeRows: with the masks' per-element pass, which the others skip)
	// and the plan of each sequence with queries, in the order of its
	// items; total items, and the K/V heads a fused item folds together.
	packs, rows         task
	treePacks, treeRows task
	seqs                []seqPlan
	total               int
	fuse                int
	next                atomic.Int64

	// parts holds the accumulators of the split sequences' parts (split
	// is set when there are some), merged at the end (mergeParts).
	parts splitParts
	split bool

	// pre holds the K/V pair panels of a bf16 prefill, packed once.
	pre prepack

	// The scratch a worker needs: a tile of wsRows query rows × wsCols
	// keys, with the bf16 buffers when wsBF16 is set.
	wsRows, wsCols int
	wsBF16         bool

	// pack, when not nil, makes the job's items the strips of a
	// PackedPrefix's pack (Engine.PackPrefix) instead of attention work.
	pack *PackedPrefix

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

// compute computes c, spreading its work items over the pool. j is the
// job the entry point took before validation, since c's origin lies in it
// (origins); the entry point gives it back.
func (e *Engine) compute(j *job, c *call) error {
	// From here on the call is the job's copy: a pointer into the
	// caller's would make it escape (and allocate).
	j.e, j.call = e, *c
	e.makePlan(j)
	helpers := min(e.threadCount(), j.total) - 1
	e.reserveWorkspaces((1+max(0, helpers))*j.fuse, j.wsRows, j.wsCols, j.call.wsDim(), j.wsBF16)
	if err := e.runJob(j, helpers); err != nil {
		return err
	}
	if j.split {
		e.mergeParts(j)
	}
	return nil
}

// runJob takes j's j.total items on the calling goroutine and up to
// helpers helpers of the pool, and returns the job's first error.
func (e *Engine) runJob(j *job, helpers int) error {
	j.next.Store(0)
	j.closed, j.active, j.err = false, 0, nil
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
	return j.err
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
	j.e, j.call, j.packs, j.rows, j.treePacks, j.treeRows, j.origins, j.pack = nil, call{}, task{}, task{}, task{}, task{}, origins{}, nil
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
