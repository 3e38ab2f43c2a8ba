package attention

import (
	"fmt"
	"runtime"
	"sync"
)

// DefaultBlockQ and DefaultBlockKV are the default tile sizes (BlockQ and
// BlockKV); docs/design.md explains the choice.
const (
	DefaultBlockQ  = 256
	DefaultBlockKV = 64
	// DefaultBlockQBF16 and DefaultBlockKVBF16 are the default BlockQ
	// and BlockKV of calls in PrecisionBFloat16. The bf16 products are
	// fast enough for the per-tile costs to matter (a softmax call, the
	// output's trip through the cache in P·V): wider tiles share them
	// among more keys (docs/design.md, "Tile sizes").
	DefaultBlockQBF16  = 256
	DefaultBlockKVBF16 = 256
)

// MaxBlockQ, MaxBlockKV, MaxKVSplits and MaxThreads are the limits of
// Config: NewEngine refuses larger settings. A call's scratch
// memory grows with BlockQ·BlockKV per thread and, in split-KV decoding,
// with KVSplits; within these limits a call never sizes its scratch past
// what its problem needs: a tile or a block of queries is never larger
// than the largest default or the problem, whichever is larger, and a
// decode call never has more parts than its keys have tiles, or 32.
const (
	MaxBlockQ   = 4096
	MaxBlockKV  = 4096
	MaxKVSplits = 256
	MaxThreads  = 4096
)

// Config sets up an Engine. The zero Config is valid and picks the defaults.
type Config struct {
	// BlockQ is the number of query rows in a tile (Br), 0 for
	// DefaultBlockQ (DefaultBlockQBF16 in bf16 precision). With
	// grouped-query attention the rows of a tile come from all the query
	// heads that share a K/V head. At most MaxBlockQ.
	BlockQ int
	// BlockKV is the number of keys in a tile (Bc), 0 for DefaultBlockKV
	// (DefaultBlockKVBF16 in bf16 precision). At most MaxBlockKV.
	BlockKV int
	// Threads is the number of goroutines a call may use, 0 for
	// runtime.GOMAXPROCS(0) at the time of the call. The output does not
	// depend on it: every thread count gives bitwise the same result. At
	// most MaxThreads.
	Threads int
	// KVSplits sets split-KV decoding (flash-decoding): in a call whose
	// query positions fit one block (decode, a few draft tokens; not a
	// variable-length batch of Forward), and in each such sequence of a
	// paged or cache call with per-sequence query counts (Options.CuSeqQ),
	// the visible key tiles of each (batch entry or sequence, K/V head)
	// are cut into parts that different threads fold
	// independently, and the partial results are combined by the
	// log-sum-exp rule (see Merge), in a fixed order. This keeps every
	// thread busy when batch × K/V heads is smaller than the thread count.
	//
	// 0 chooses the number of parts from the shape alone (as
	// FlashAttention's num_splits = 0): enough for about 64 (batch, head,
	// part) blocks, each of at least 512 keys, at most 32 parts; 1 turns
	// splitting off; 2 or more (at most MaxKVSplits) is that many parts,
	// of which those past the number of key tiles are empty. The output
	// depends on the number of parts (it is rounded differently) but never
	// on Threads: a given shape and KVSplits give bitwise the same result
	// for every thread count.
	KVSplits int
}

// Engine computes attention with the tiled online softmax. It owns the
// scratch memory of its computations and reuses it, so repeated calls
// allocate nothing once the largest shape has been seen. An Engine is safe
// for concurrent use by many goroutines: each call takes scratch memory of
// its own from the engine's free list.
type Engine struct {
	blockQ, blockKV, threads int
	blockQSet, blockKVSet    bool // Config.BlockQ, BlockKV were given (not the defaults)
	splits                   int  // KV splits of a decode call (1: none, 0: automatic)

	mu       sync.Mutex
	free     []*workspace
	freeJobs []*job
	// freeShared holds ForwardSharedPrefix's scratch.
	freeShared []*sharedScratch
	pool       *pool
}

// usable returns an error for a nil Engine or one not made by NewEngine
// (the zero Engine), which every call reports instead of crashing.
func (e *Engine) usable() error {
	if e == nil {
		return fmt.Errorf("attention: the Engine is nil; want one from NewEngine")
	}
	if e.pool == nil {
		return fmt.Errorf("attention: the Engine is a zero Engine; want one from NewEngine")
	}
	return nil
}

// NewEngine returns an engine with the given configuration.
func NewEngine(cfg Config) (*Engine, error) {
	if cfg.BlockQ < 0 || cfg.BlockQ > MaxBlockQ {
		return nil, fmt.Errorf("attention: Config.BlockQ is %d; want 1 to MaxBlockQ (%d), or 0 for the default %d", cfg.BlockQ, MaxBlockQ, DefaultBlockQ)
	}
	if cfg.BlockKV < 0 || cfg.BlockKV > MaxBlockKV {
		return nil, fmt.Errorf("attention: Config.BlockKV is %d; want 1 to MaxBlockKV (%d), or 0 for the default %d", cfg.BlockKV, MaxBlockKV, DefaultBlockKV)
	}
	if cfg.KVSplits < 0 || cfg.KVSplits > MaxKVSplits {
		return nil, fmt.Errorf("attention: Config.KVSplits is %d; want 0 (automatic), 1 (no split-KV decoding) or a number of splits from 2 to MaxKVSplits (%d)", cfg.KVSplits, MaxKVSplits)
	}
	if cfg.Threads < 0 || cfg.Threads > MaxThreads {
		return nil, fmt.Errorf("attention: Config.Threads is %d; want 1 to MaxThreads (%d), or 0 for GOMAXPROCS", cfg.Threads, MaxThreads)
	}
	e := &Engine{blockQ: cfg.BlockQ, blockKV: cfg.BlockKV, threads: cfg.Threads, splits: cfg.KVSplits, pool: &pool{wake: make(chan struct{}, poolQueue)}}
	// The helpers hold only the pool; once the Engine is unreachable they
	// are told to exit.
	runtime.AddCleanup(e, func(p *pool) { close(p.wake) }, e.pool)
	e.blockQSet, e.blockKVSet = e.blockQ != 0, e.blockKV != 0
	if e.blockQ == 0 {
		e.blockQ = DefaultBlockQ
	}
	if e.blockKV == 0 {
		e.blockKV = DefaultBlockKV
	}
	return e, nil
}

var defaultEngine, _ = NewEngine(Config{})

// Forward computes out = softmax(scale·Q·Kᵀ + mask)·V with the package's
// default Engine. See Engine.Forward.
func Forward(out, q, k, v Tensor, opts Options) error {
	return defaultEngine.Forward(out, q, k, v, opts)
}

// Forward computes out = softmax(scale·Q·Kᵀ + mask)·V for every batch and
// query head, without materialising the score matrix.
//
// Shapes (Layout's batch, heads, seq, dim): q is [B, Hq, Nq, D] and out
// [B, Hq, Nq, Dv], in F32, F16 or BF16 (they may differ: fp16 and bf16
// queries are widened as they are gathered, and each output row is rounded
// to nearest even as it is written, so with such types the result is the
// float32 result of the widened queries, rounded once; the log-sum-exps are
// float32 either way); k is [B, Hkv, Nkv, D] and v [B, Hkv, Nkv, Dv], in
// F32, F16, BF16, Q8, FP8E4M3 or FP8E5M2 (they may differ). Dv, the head dim of v and of the
// output, is usually D; it may differ (DeepSeek's multi-head latent
// attention has D 192 and Dv 128, its absorbed decode 576 and 512), and
// the default scale is 1/sqrt(D) either way. Hq must be a multiple of Hkv: query head h reads K/V head
// h/(Hq/Hkv), which covers multi-head, grouped-query and multi-query
// attention. B, Nq and Nkv may be 0. The rows of k and of v must not
// overlap: with Nkv >= 2 their SeqStride must be at least D (with one
// position the stride is never stepped, and any value, 0 included, reads
// as the dense one). q may repeat rows (SeqStride 0 broadcasts one query);
// out must have distinct elements.
//
// A misuse (mismatched shapes, a short slice, overlapping K or V rows, an
// output that overlaps an input, a bad option) returns an error that names
// the argument, and nothing is written: every argument is checked before
// the first output element is. The inputs are never modified.
func (e *Engine) Forward(out, q, k, v Tensor, opts Options) error {
	return e.forward(out, nil, q, k, v, opts)
}

// ForwardLSE is Forward that also writes the log-sum-exp of every row,
// lse = ln Σ_j exp(scale·q·k_j) over the keys the row sees, into lse laid
// out [B, Hq, Nq] contiguously. A row that sees no key gets −Inf.
func (e *Engine) ForwardLSE(out Tensor, lse []float32, q, k, v Tensor, opts Options) error {
	if lse == nil {
		return fmt.Errorf("attention: lse is nil; want a slice of B·Hq·Nq = %s elements", rowCountText(q.Layout))
	}
	return e.forward(out, lse, q, k, v, opts)
}

func (e *Engine) forward(out Tensor, lse []float32, q, k, v Tensor, opts Options) error {
	if err := e.usable(); err != nil {
		return err
	}
	j := e.getJob()
	defer e.putJob(j)
	j.origins.views = viewOrigin{k: k, v: v}
	c, err := validateRequest(&request{fn: "attention: ", kv: &j.origins.views, out: out, lse: lse, q: q}, &opts)
	if err != nil {
		return err
	}
	if q.Batch == 0 || q.Seq == 0 {
		return nil
	}
	return e.compute(j, &c)
}
