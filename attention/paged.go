package attention

import (
	"fmt"
	"math"
	"sync"
)

// SeqID names a sequence of a PagedCache. The zero SeqID is never used.
type SeqID uint64

// PagedCache is a key/value cache for many sequences in fixed-size blocks,
// as vLLM's PagedAttention: a pool of NumBlocks blocks of BlockSize
// positions (each block holding those positions for all Hkv heads, keys and
// values), and per sequence a block table listing its blocks in order.
// Position p of a sequence lives at slot p mod BlockSize of block
// table[p / BlockSize].
//
// Fork gives a new sequence that shares every block of its source, counted
// by reference (a shared prompt prefix is stored once). A write into a
// shared block copies it first (copy on write), so neither sequence ever
// sees the other's later tokens. Truncate and Free return the blocks no
// sequence uses any more to a free list, from which Append takes new ones.
//
// Engine.ForwardPaged decodes a batch of sequences of different lengths
// from the cache in one call, reading K/V tiles through the block tables.
//
// A PagedCache is safe for concurrent use: mutations (NewSequence, Fork,
// Append, Truncate, Free) take a write lock, and ForwardPaged holds a read
// lock for the whole call, so decodes of any sequences may run from many
// goroutines at once while mutations wait for them.
type PagedCache struct {
	heads, dim, blockSize, numBlocks int

	mu     sync.RWMutex
	k, v   Tensor  // [heads, numBlocks, blockSize, dim]; Offset(block, head, slot)
	ref    []int32 // references per block
	free   []int32 // free blocks (a stack)
	seqs   map[SeqID]*pagedSeq
	nextID SeqID
}

type pagedSeq struct {
	blocks []int32
	n      int
}

// NewPagedCache returns an empty cache of numBlocks blocks of blockSize
// positions, for heads K/V heads of dimension dim stored as dtype (F32,
// F16, BF16, Q8, FP8E4M3 or FP8E5M2; the fp8 types with scale 1, see
// NewPagedCacheFP8 for others). All the storage is allocated here, and
// must fit in MaxCacheBytes.
func NewPagedCache(dtype DType, heads, dim, blockSize, numBlocks int) (*PagedCache, error) {
	return newPagedCache("NewPagedCache", dtype, heads, dim, blockSize, numBlocks, nil, nil)
}

// NewPagedCacheFP8 returns an empty cache as NewPagedCache does, stored as
// dtype FP8E4M3 or FP8E5M2 with the key scales kScales and value scales
// vScales (one each, or one per head), which Append quantises with as
// NewKVCacheFP8 says. Nil scales are an error, as there.
func NewPagedCacheFP8(dtype DType, heads, dim, blockSize, numBlocks int, kScales, vScales []float32) (*PagedCache, error) {
	if err := checkFP8Args("NewPagedCacheFP8", dtype, heads, kScales, vScales); err != nil {
		return nil, err
	}
	return newPagedCache("NewPagedCacheFP8", dtype, heads, dim, blockSize, numBlocks, kScales, vScales)
}

func newPagedCache(fn string, dtype DType, heads, dim, blockSize, numBlocks int, kScales, vScales []float32) (*PagedCache, error) {
	if err := checkCacheShape(fn, dtype, heads, dim); err != nil {
		return nil, err
	}
	ks, vs, err := cacheScales(fn, dtype, heads, kScales, vScales)
	if err != nil {
		return nil, err
	}
	if blockSize < 1 {
		return nil, fmt.Errorf("attention: %s: block size %d; want >= 1", fn, blockSize)
	}
	if numBlocks < 0 || numBlocks > 1<<31-1 {
		return nil, fmt.Errorf("attention: %s: %d blocks; want 0 to 2^31-1", fn, numBlocks)
	}
	// Each head has a pool of its own, [heads, numBlocks, blockSize, dim],
	// addressed as Offset(block, head, slot): a sequence whose table lists
	// consecutive blocks has each head's rows one after the other, as a
	// contiguous cache has, and the kernels read them in one run.
	l := Layout{Batch: numBlocks, Heads: heads, Seq: blockSize, Dim: dim,
		BatchStride: satMul(blockSize, dim), HeadStride: satMul(numBlocks, blockSize, dim), SeqStride: dim}
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("attention: %s: %w", fn, err)
	}
	if err := checkCacheBytes(fn, dtype, l); err != nil {
		return nil, err
	}
	c := &PagedCache{
		heads: heads, dim: dim, blockSize: blockSize, numBlocks: numBlocks,
		k: newStorage(dtype, l, ks), v: newStorage(dtype, l, vs),
		ref: make([]int32, numBlocks), free: make([]int32, numBlocks),
		seqs: make(map[SeqID]*pagedSeq),
	}
	for i := range c.free {
		c.free[i] = int32(numBlocks - 1 - i) // block 0 is taken first
	}
	return c, nil
}

// Heads returns the number of K/V heads.
func (c *PagedCache) Heads() int { return c.heads }

// Dim returns the head dimension.
func (c *PagedCache) Dim() int { return c.dim }

// DType returns the storage element type.
func (c *PagedCache) DType() DType { return c.k.dtype }

// BlockSize returns the number of positions per block.
func (c *PagedCache) BlockSize() int { return c.blockSize }

// NumBlocks returns the number of blocks of the pool.
func (c *PagedCache) NumBlocks() int { return c.numBlocks }

// FreeBlocks returns the number of blocks no sequence uses.
func (c *PagedCache) FreeBlocks() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.free)
}

// NewSequence starts an empty sequence. It takes no block until the first
// Append.
func (c *PagedCache) NewSequence() SeqID {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	c.seqs[c.nextID] = &pagedSeq{}
	return c.nextID
}

// Len returns the number of positions of sequence id.
func (c *PagedCache) Len(id SeqID) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, err := c.seq("Len", id)
	if err != nil {
		return 0, err
	}
	return s.n, nil
}

func (c *PagedCache) seq(fn string, id SeqID) (*pagedSeq, error) {
	s := c.seqs[id]
	if s == nil {
		return nil, fmt.Errorf("attention: PagedCache.%s: unknown or freed sequence %d", fn, id)
	}
	return s, nil
}

// Fork returns a new sequence with the contents of src, sharing its blocks
// (copy on write): nothing is copied until one of them appends into a
// shared block.
func (c *PagedCache) Fork(src SeqID) (SeqID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.seq("Fork", src)
	if err != nil {
		return 0, err
	}
	for _, b := range s.blocks {
		if c.ref[b] == math.MaxInt32 {
			return 0, fmt.Errorf("attention: PagedCache.Fork: block %d of sequence %d is shared by %d sequences already; want fewer than 2^31-1 sharers", b, src, c.ref[b])
		}
	}
	for _, b := range s.blocks {
		c.ref[b]++
	}
	c.nextID++
	c.seqs[c.nextID] = &pagedSeq{blocks: append([]int32(nil), s.blocks...), n: s.n}
	return c.nextID, nil
}

// Free releases sequence id; blocks no other sequence shares return to the
// free list. The id becomes unknown.
func (c *PagedCache) Free(id SeqID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.seq("Free", id)
	if err != nil {
		return err
	}
	c.release(s.blocks)
	delete(c.seqs, id)
	return nil
}

// release drops one reference to each block, freeing the unused ones.
func (c *PagedCache) release(blocks []int32) {
	for _, b := range blocks {
		c.ref[b]--
		if c.ref[b] == 0 {
			c.free = append(c.free, b) // cap is numBlocks: never allocates
		}
	}
}

// Truncate keeps the first n positions of sequence id (0 <= n <= Len),
// returning the blocks past them that no other sequence shares.
func (c *PagedCache) Truncate(id SeqID, n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.seq("Truncate", id)
	if err != nil {
		return err
	}
	if n < 0 || n > s.n {
		return fmt.Errorf("attention: PagedCache.Truncate(%d, %d) on a sequence of %d positions; want 0 <= n <= %d", id, n, s.n, s.n)
	}
	keep := ceilDiv(n, c.blockSize)
	c.release(s.blocks[keep:])
	clear(s.blocks[keep:])
	s.blocks, s.n = s.blocks[:keep], n
	return nil
}

// Append copies the keys k and values v of m new positions to the end of
// sequence id. k and v are [1, Hkv, m, Dim] views in any layout, of element
// type F32, F16, BF16 or the cache's own, converted or copied as
// KVCache.Append does. A shared last block is copied first; new blocks
// come from the free list. An unknown sequence, a mismatched shape or
// type, or too few free blocks is an error and changes nothing. Append
// allocates only when the sequence's block table outgrows its capacity
// (doubling, as append does).
func (c *PagedCache) Append(id SeqID, k, v Tensor) error {
	if err := checkAppend("PagedCache.Append", k, v, &c.k, &c.v, c.heads, c.dim); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.seq("Append", id)
	if err != nil {
		return err
	}
	m := k.Seq
	if m == 0 {
		return nil
	}
	bs := c.blockSize
	have := len(s.blocks)
	// New blocks: those the positions past the room left in the last
	// block take, counted without forming s.n+m, which a view claiming
	// nearly math.MaxInt positions would overflow.
	need := 0
	if slack := have*bs - s.n; m > slack {
		need = ceilDiv(m-slack, bs)
	}
	cow := s.n%bs != 0 && c.ref[s.blocks[have-1]] > 1
	if cow {
		need++
	}
	if need > len(c.free) {
		return fmt.Errorf("attention: PagedCache.Append: %d positions to sequence %d need %d free blocks; %d of %d are free",
			m, id, need, len(c.free), c.numBlocks)
	}
	if cow {
		old := s.blocks[have-1]
		nb := c.allocBlock()
		c.copyBlock(nb, old, s.n%bs)
		c.ref[old]--
		s.blocks[have-1] = nb
	}
	for len(s.blocks)*bs < s.n+m {
		s.blocks = append(s.blocks, c.allocBlock())
	}
	for h := range c.heads {
		for t := range m {
			p := s.n + t
			blk := int(s.blocks[p/bs])
			storeRow(&c.k, c.k.Offset(blk, h, p%bs), &k, k.Offset(0, h, t), h, c.dim)
			storeRow(&c.v, c.v.Offset(blk, h, p%bs), &v, v.Offset(0, h, t), h, c.dim)
		}
	}
	s.n += m
	return nil
}

// allocBlock pops a free block and gives it one reference.
func (c *PagedCache) allocBlock() int32 {
	b := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	c.ref[b] = 1
	return b
}

// copyBlock copies the first n positions of every head of block src to dst.
func (c *PagedCache) copyBlock(dst, src int32, n int) {
	for _, t := range [...]*Tensor{&c.k, &c.v} {
		for h := range c.heads {
			copyElems(t, t.Offset(int(dst), h, 0), t, t.Offset(int(src), h, 0), n*c.dim)
		}
	}
}

// Check verifies the cache's bookkeeping: every block table has exactly the
// blocks its length needs, each in range; every block's reference count is
// the number of tables that hold it; and the free list holds exactly the
// blocks of count 0, once each. It returns the first inconsistency found,
// for tests and debugging.
func (c *PagedCache) Check() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	count := make([]int32, c.numBlocks)
	for id, s := range c.seqs {
		if want := ceilDiv(s.n, c.blockSize); len(s.blocks) != want {
			return fmt.Errorf("attention: PagedCache: sequence %d of %d positions has %d blocks; want %d", id, s.n, len(s.blocks), want)
		}
		for i, b := range s.blocks {
			if b < 0 || int(b) >= c.numBlocks {
				return fmt.Errorf("attention: PagedCache: sequence %d: block table entry %d is %d; want 0 to %d", id, i, b, c.numBlocks-1)
			}
			count[b]++
		}
	}
	inFree := make([]bool, c.numBlocks)
	for _, b := range c.free {
		if b < 0 || int(b) >= c.numBlocks || inFree[b] {
			return fmt.Errorf("attention: PagedCache: free list holds block %d twice or out of range", b)
		}
		inFree[b] = true
	}
	for b := range c.numBlocks {
		if count[b] != c.ref[b] {
			return fmt.Errorf("attention: PagedCache: block %d has %d references counted and %d in tables", b, c.ref[b], count[b])
		}
		if (count[b] == 0) != inFree[b] {
			return fmt.Errorf("attention: PagedCache: block %d with %d references is free=%v", b, count[b], inFree[b])
		}
	}
	return nil
}

// ForwardPaged computes attention for a batch of sequences read from a
// paged cache: batch entry b of q (and out) holds the queries of the Nq
// newest positions of sequence seqs[b], whose keys and values are all the
// sequence's cached positions (append the new tokens' K and V first).
// Sequences may have different lengths; with Options{Causal: true} the
// bottom-right alignment makes query i of sequence b see the keys up to
// position i + Len(seqs[b]) − Nq, which is decoding (Nq = 1), speculative
// verification (a few drafts) and chunked prefill in one form.
//
// Shapes: q and out are [len(seqs), Hq, Nq, Dim] in F32, F16 or BF16 (as
// in Forward), with Hq a multiple of the cache's Hkv and Dim the cache's.
// The same sequence may appear
// more than once. Options are those of Forward except Mask, BoolMask and
// CuSeqKV (errors here: each sequence's keys are its own cached
// positions); Window, SoftCap, Slopes and Sinks apply per sequence with
// its own length, and Options.TreeMask gives sequences masks over their
// draft tokens (a tree of drafts verified in one call; TreeMask). Options.CuSeqQ gives each sequence a query count of
// its own: q and out are then [1, Hq, totalQ, Dim], the packed queries of
// every sequence, CuSeqQ has len(seqs)+1 offsets from 0 to totalQ, never
// decreasing, and sequence b's CuSeqQ[b+1]−CuSeqQ[b] queries (0 allowed;
// more than Len(seqs[b]) as Options.CuSeqQ says) are its newest
// positions, so that one call
// serves sequences decoding and others prefilling a chunk; each
// sequence's rows are bitwise those of this call for it alone (batch 1,
// Nq its query count) on the same engine (Options.CuSeqQ).
//
// The output is bitwise that of ForwardKVCaches over KVCaches holding the
// same sequences, and of ForwardPagedKV over pools holding them, in any
// engine configuration. Each sequence's rows are bitwise those of Forward
// over that sequence's K/V (a KVCache's K() and V(), or any tensors
// holding them) when both calls cut its keys into the same parts: always
// with Config.KVSplits 1, and with the automatic split (KVSplits 0) when
// the batch is one sequence or its longest sequence has fewer than 1,024
// keys. Otherwise the automatic split, which depends on the batch's shape,
// may differ, and with it the last bits of the rows. A misuse returns an
// error and writes nothing; an out or lse that shares memory with
// anything the call reads (q, seqs, the options' slices, CuSeqQ
// included) is one. After the first call of a shape it allocates nothing. It holds the cache's read lock throughout.
func (e *Engine) ForwardPaged(out, q Tensor, cache *PagedCache, seqs []SeqID, opts Options) error {
	return e.forwardPaged(out, nil, q, cache, seqs, opts)
}

// ForwardPagedLSE is ForwardPaged that also writes each row's log-sum-exp
// into lse, laid out [len(seqs), Hq, Nq] contiguously, as ForwardLSE does
// ([1, Hq, totalQ] with Options.CuSeqQ).
func (e *Engine) ForwardPagedLSE(out Tensor, lse []float32, q Tensor, cache *PagedCache, seqs []SeqID, opts Options) error {
	if lse == nil {
		return fmt.Errorf("attention: lse is nil; want a slice of B·Hq·Nq = %s elements", rowCountText(q.Layout))
	}
	return e.forwardPaged(out, lse, q, cache, seqs, opts)
}

func (e *Engine) forwardPaged(out Tensor, lse []float32, q Tensor, cache *PagedCache, seqs []SeqID, opts Options) error {
	if err := e.usable(); err != nil {
		return err
	}
	if cache == nil {
		return fmt.Errorf("attention: ForwardPaged: cache is nil")
	}
	cache.mu.RLock()
	defer cache.mu.RUnlock()
	j := e.getJob()
	defer e.putJob(j)
	j.origins.cache = pagedCacheOrigin{cache: cache, seqs: seqs}
	c, err := validateRequest(&request{fn: "attention: ForwardPaged: ", kv: &j.origins.cache, out: out, lse: lse, q: q}, &opts)
	if err != nil {
		return err
	}
	if q.Batch == 0 || q.Seq == 0 {
		return nil
	}
	return e.compute(j, &c)
}
