package attention

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// The worker pool. A call cuts its work into blocks (batch entry, K/V head,
// run of query positions); the calling goroutine and up to Threads−1
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
// Helpers are long-lived goroutines that wait on the engine's job channel,
// so a call starts them without allocating. A call offers its job to as many
// helpers as it may use; a helper joins the job only if the caller has not
// finished it yet, and the caller waits only for helpers that joined. So a
// helper that is busy with another call (concurrent callers share the
// helpers) or slow to come back never holds a caller up, and one that comes
// late just finds the job closed. The pooled job is recycled only when every
// copy handed out has been let go. When the Engine is garbage collected, a
// cleanup closes the channel and the helpers exit.

// job is one call's share-out of blocks.
type job struct {
	e     *Engine
	c     call // by value: the job is pooled, so the call does not escape
	np    int  // query positions per block
	nBlk  int  // blocks per (batch, K/V head)
	total int  // blocks in all
	next  atomic.Int64
	refs  atomic.Int32 // holders: the caller and every offered copy

	mu     sync.Mutex
	done   sync.Cond // signalled when the last joined helper leaves
	closed bool      // the caller has finished; nobody may join
	active int       // helpers working on the job
	err    error
}

// pool is the part of an Engine that its helpers share; it must not point
// back to the Engine, or the cleanup that stops the helpers would never run.
type pool struct {
	jobs    chan *job
	mu      sync.Mutex
	helpers int
}

// poolQueue is the capacity of the job channel: offers beyond it (many
// concurrent callers) are skipped and those callers do more of the work.
const poolQueue = 256

func (p *pool) grow(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ; p.helpers < n; p.helpers++ {
		go p.help()
	}
}

func (p *pool) help() {
	for j := range p.jobs {
		if j.join() {
			j.work()
			j.leave()
		}
		j.release()
	}
}

func (j *job) join() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return false
	}
	j.active++
	return true
}

func (j *job) leave() {
	j.mu.Lock()
	j.active--
	if j.active == 0 && j.closed {
		j.done.Signal()
	}
	j.mu.Unlock()
}

// release lets go of one holder's reference; the last returns the job to
// the engine's free list.
func (j *job) release() {
	if j.refs.Add(-1) == 0 {
		e := j.e
		j.e, j.c = nil, call{}
		e.mu.Lock()
		e.freeJobs = append(e.freeJobs, j)
		e.mu.Unlock()
	}
}

// threads returns the number of goroutines a call may use.
func (e *Engine) threadCount() int {
	if e.threads > 0 {
		return e.threads
	}
	return runtime.GOMAXPROCS(0)
}

// run computes every block of c, spreading them over the pool.
func (e *Engine) run(c *call, np int) error {
	j := e.getJob()
	j.e, j.c, j.np = e, *c, np
	j.nBlk = (c.q.Seq + np - 1) / np
	j.total = c.q.Batch * c.k.Heads * j.nBlk
	if c.cuQ != nil {
		j.total = 0
		for s := range len(c.cuQ) - 1 {
			j.total += c.k.Heads * ((c.cuQ[s+1] - c.cuQ[s] + np - 1) / np)
		}
	}
	j.next.Store(0)
	j.closed, j.active, j.err = false, 0, nil
	helpers := min(e.threadCount(), j.total) - 1
	j.refs.Store(int32(1 + max(0, helpers)))
	if helpers > 0 {
		e.pool.grow(helpers)
		offered := 0
		for range helpers {
			select {
			case e.pool.jobs <- j:
				offered++
			default: // the queue is full: do without
			}
		}
		// The caller still holds its own reference, so this cannot drop
		// the count to zero under a helper.
		j.refs.Add(int32(offered - helpers))
	}
	j.work()
	j.mu.Lock()
	j.closed = true
	for j.active > 0 {
		j.done.Wait()
	}
	err := j.err
	j.mu.Unlock()
	j.release()
	return err
}

// work takes blocks until none is left.
func (j *job) work() {
	ws := j.e.getWorkspace()
	defer j.e.putWorkspace(ws)
	c := &j.c
	ws.ensure(c.group*j.np, j.e.blockKV, c.q.Dim)
	heads := c.k.Heads
	whole := seg{nq: c.q.Seq, nk: c.k.Seq}
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
		if c.cuQ == nil {
			// Block index i, largest first: the last query block of every
			// (batch, head) comes before any second-to-last one.
			blk := j.nBlk - 1 - i/(c.q.Batch*heads)
			bh := i % (c.q.Batch * heads)
			p0 := blk * j.np
			err = j.e.foldBlock(ws, c, bh/heads, bh%heads, p0, min(p0+j.np, c.q.Seq), whole)
		} else {
			var sg seg
			for {
				sg = seg{q0: c.cuQ[cs], nq: c.cuQ[cs+1] - c.cuQ[cs], kv0: c.cuKV[cs], nk: c.cuKV[cs+1] - c.cuKV[cs]}
				n := heads * ((sg.nq + j.np - 1) / j.np)
				if i < csBase+n {
					break
				}
				cs, csBase = cs+1, csBase+n
			}
			// Within a sequence, its last (most expensive under a causal
			// mask) query blocks come first.
			li := i - csBase
			blk := (sg.nq+j.np-1)/j.np - 1 - li/heads
			p0 := sg.q0 + blk*j.np
			err = j.e.foldBlock(ws, c, 0, li%heads, p0, min(p0+j.np, sg.q0+sg.nq), sg)
		}
		if err != nil {
			j.mu.Lock()
			if j.err == nil {
				j.err = err
			}
			j.mu.Unlock()
		}
	}
}

func (e *Engine) getJob() *job {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := len(e.freeJobs); n > 0 {
		j := e.freeJobs[n-1]
		e.freeJobs = e.freeJobs[:n-1]
		return j
	}
	j := new(job)
	j.done.L = &j.mu
	return j
}
