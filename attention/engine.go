package attention

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// Default tile sizes; docs/design.md explains the choice.
const (
	DefaultBlockQ  = 256
	DefaultBlockKV = 64
	// DefaultBlockQBF16 and DefaultBlockKVBF16 are the default BlockQ
	// and BlockKV of calls in PrecisionBFloat16. The AMX products are fast
	// enough for the per-tile costs to matter (a softmax call, the output's
	// trip through the cache in P·V): wider tiles share them among more
	// keys (BenchmarkBF16, P1 on the device Xeon, 2026-11-24: one core
	// 142–144 GFLOP/s with 512 × 64 tiles, 168–170 with 256 × 256;
	// sixteen 1782 and 2117).
	DefaultBlockQBF16  = 256
	DefaultBlockKVBF16 = 256
)

// Limits of Config: NewEngine refuses larger settings. A call's scratch
// memory grows with BlockQ·BlockKV per thread and, in split-KV decoding,
// with KVSplits; within these limits a call never sizes its scratch past
// what its problem needs: a tile or a block of queries is never larger
// than the largest default or the problem, whichever is larger, and a
// decode call never has more runs than its keys have tiles, or 32.
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
	// variable-length batch), the visible key tiles of each (batch entry or
	// sequence, K/V head) are cut into runs that different threads fold
	// independently, and the partial results are combined by the
	// log-sum-exp rule (see Merge), in a fixed order. This keeps every
	// thread busy when batch × K/V heads is smaller than the thread count.
	//
	// 0 chooses the number of runs from the shape alone (as
	// FlashAttention's num_splits = 0): enough for about 64 (batch, head,
	// run) blocks, each of at least 512 keys, at most 32 runs; 1 turns
	// splitting off; 2 or more (at most MaxKVSplits) is that many runs,
	// of which those past the number of key tiles are empty. The output
	// depends on the number of runs (it is rounded differently) but never
	// on Threads: a given shape and KVSplits give bitwise the same result
	// for every thread count.
	KVSplits int
}

// Options are the per-call settings of an attention computation. The zero
// value of every field turns its feature off, so Options{} is plain
// softmax attention and Options{Causal: true} is causal attention.
//
// For batch entry b, query head h, query i and key j, with i' the query's
// diagonal position (see Alignment), key j is visible iff
//
//	Causal:       j <= i'
//	Window:       i' − Window.Left <= j <= i' + Window.Right (−1: unbounded)
//	BoolMask:     BoolMask[b, h, i, j] is true
//	Mask:         Mask[b, h, i, j] is not −Inf
//	CuSeqQ/KV:    i and j belong to the same sequence
//
// and a visible key has the logit
//
//	s   = Scale·⟨q_i, k_j⟩
//	s   = SoftCap·tanh(s/SoftCap)                 if SoftCap > 0
//	x_j = s − Slopes[h]·|i' − j| + Mask[b, h, i, j]
//
// With σ = Sinks[h] (−Inf without sinks) and the sums over visible keys,
//
//	out_i = Σ_j e^{x_j}·v_j / (e^σ + Σ_j e^{x_j}),   lse_i = ln(e^σ + Σ_j e^{x_j})
//
// computed with every exponent relative to the running maximum. A row with
// no visible key, under any combination of options, gets out = 0 and lse =
// σ (−Inf without a sink), never NaN.
//
// Tiles of keys that the causal mask, the window or the sequence bounds hide
// from a whole block of queries are neither converted nor computed, so a
// sliding window of w keys costs in proportion to w, not to Nkv. Keys that
// those structural masks hide from a row are left out of its P·V entirely,
// so a NaN or Inf in their K or V rows never reaches it.
//
// Keys hidden by Mask or BoolMask: of the keys the structural masks leave
// a row, those that Mask or BoolMask hides before the row's first visible
// key or after its last visible key are never read for that row either,
// whatever their K and V rows hold: the padding of a key-padding mask, at
// the end or at the start of each sequence, may be uninitialised memory.
// A key that the mask hides between two keys the row sees gets
// probability exactly 0 but may still be read by P·V: a NaN or ±Inf in its
// value row may turn the row into NaN (0·NaN), so keep such value rows
// finite, or hide them with a window or CuSeqKV instead. (A NaN or ±Inf in
// the K row of a hidden key never matters: its score is replaced by −Inf,
// not added to.) A tile of keys that the mask hides from every row of a
// block of queries is skipped whole, like one outside every window.
type Options struct {
	// Scale multiplies Q·Kᵀ before the softmax; 0 means 1/sqrt(Dim). It
	// must be finite.
	Scale float32
	// Causal masks the keys after each query's diagonal position: query i
	// sees key j iff j <= i'. With the default alignment (BottomRight, as
	// FlashAttention >= 2.1) i' = i + Nkv − Nq; when Nq > Nkv the first
	// Nq − Nkv queries see no key at all and their output rows are zero and
	// their log-sum-exp −Inf (or the sink).
	Causal bool
	// CausalAlign picks the diagonal that Causal, Window and Slopes measure
	// from: BottomRight (the zero value, FlashAttention's and llama.cpp's
	// convention) or TopLeft (PyTorch's is_causal). It only matters when
	// Nq != Nkv.
	CausalAlign Alignment
	// Window, when non-nil, is a sliding attention window (Mistral, Gemma 2,
	// gpt-oss); see Window. Bounds below -1 are an error. nil is no window.
	Window *Window
	// SoftCap, when positive, caps each scaled score s smoothly as
	// SoftCap·tanh(s/SoftCap) before ALiBi and Mask are added (Gemma 2's
	// attn_logit_softcapping). 0 is off; a negative, NaN or infinite value
	// is an error.
	SoftCap float32
	// Slopes, when non-nil, holds one ALiBi slope per query head (length
	// Hq; see ALiBiSlopes): head h adds −Slopes[h]·|i' − j| to the logit
	// of key j. Each slope must be finite.
	Slopes []float32
	// Sinks, when non-nil, holds one attention-sink logit per query head
	// (length Hq), as in gpt-oss: the sink joins the softmax denominator
	// but has no value vector, so a row's weights sum to less than 1, and
	// it is counted in the log-sum-exp. −Inf is no sink for that head; NaN
	// and +Inf are errors. When partial results are merged (Merge), exactly
	// one part may carry the sink.
	Sinks []float32
	// Mask, when set (not the zero Tensor), is an additive float mask of
	// element type F32, F16 or BF16, read as [batch, heads, Nq, Nkv] with
	// the keys contiguous (the Layout's Dim is Nkv, its Seq is Nq). Batch
	// may be 1 to broadcast over the batch, Heads 1 to broadcast over the
	// query heads, and SeqStride 0 to broadcast one row over the queries.
	// Its entry is added to the logit; an entry of −Inf hides the key (the
	// score is replaced, not added to, so a NaN score of a hidden key does
	// not survive). A NaN or +Inf entry of a visible key makes the row NaN.
	Mask Tensor
	// BoolMask, when its Data is non-nil, is a boolean mask (true keeps the
	// key), broadcast like Mask; see BoolMask. Keys it hides at either end
	// of a row's range are never read (see above), so a key-padding mask
	// may hide uninitialised padding.
	BoolMask BoolMask
	// CuSeqQ and CuSeqKV, when non-nil, make the call a variable-length
	// batch, as flash_attn_varlen_func: the batch must be 1 and the
	// sequences are packed one after another along the sequence axis.
	// Sequence s owns queries CuSeqQ[s] <= i < CuSeqQ[s+1] and keys
	// CuSeqKV[s] <= j < CuSeqKV[s+1] and attends only within itself; its
	// causal alignment, window and ALiBi distances use its own lengths and
	// positions. Both slices have nseq+1 elements, start at 0, never
	// decrease (empty sequences are allowed) and end at Nq and Nkv. Mask and
	// BoolMask are indexed by the packed positions. The work is shared out
	// by (sequence, K/V head, block of queries).
	CuSeqQ, CuSeqKV []int
	// Precision is the arithmetic of the products Q·Kᵀ and P·V:
	// PrecisionFloat32 (the zero value) or PrecisionBFloat16, several
	// times faster where the CPU has AMX or AVX512-BF16. See Precision.
	Precision Precision
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
	pool     *pool
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
// Shapes (Layout's batch, heads, seq, dim): q and out are [B, Hq, Nq, D] and
// float32; k and v are [B, Hkv, Nkv, D] in F32, F16, BF16 or Q8 (they may
// differ). Hq must be a multiple of Hkv: query head h reads K/V head
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
	c, err := validate(out, lse, q, k, v, &opts)
	if err != nil {
		return err
	}
	if q.Batch == 0 || q.Seq == 0 {
		return nil
	}
	return e.run(&c, e.positionsPerBlock(&c))
}

// positionsPerBlock returns how many query positions a block covers:
// BlockQ rows shared among the group's heads. Big blocks amortise the
// packing of each K/V tile over more rows, but a call must also have enough
// blocks to keep every thread busy to the end under a causal mask, so the
// block shrinks (down to 16 positions) until there are at least 8 per
// thread. It also sets c.bkv, the keys of a tile. The block size may
// depend on the thread count; no rounding does (see foldTiles).
func (e *Engine) positionsPerBlock(c *call) int {
	bq := e.blockQ
	if c.precision == PrecisionBFloat16 && !e.blockQSet {
		bq = DefaultBlockQBF16
	}
	np := max(1, bq/c.group)
	// A block bigger than the defaults shrinks to the queries there are
	// (halving keeps it a single block, as it was), so that a large BlockQ
	// never sizes the scratch past the problem.
	for np > max(DefaultBlockQ, DefaultBlockQBF16) && np/2 >= c.q.Seq {
		np /= 2
	}
	c.bkv = e.blockKV
	if c.precision == PrecisionBFloat16 && !e.blockKVSet {
		c.bkv = DefaultBlockKVBF16
	}
	// Likewise a tile bigger than the defaults never exceeds the keys
	// there are: a problem of fewer keys has one tile either way.
	c.bkv = min(c.bkv, max(DefaultBlockKV, DefaultBlockKVBF16, c.k.Seq))
	// A call whose queries fit one block of the configured size is split
	// over its keys when the shape asks for it (splitCount depends only on
	// the shape and Config): it stays one block whatever the thread
	// count, so that the thread count never decides whether it is split.
	if c.cuQ == nil && c.q.Seq <= np && e.splitCount(c) > 1 {
		return max(1, c.q.Seq)
	}
	threads := e.threadCount()
	for np > 16 && c.q.Batch*c.k.Heads*((c.q.Seq+np-1)/np) < 8*threads {
		np /= 2
	}
	return np
}

func validate(out Tensor, lse []float32, q, k, v Tensor, opts *Options) (call, error) {
	for _, t := range [...]struct {
		name string
		t    Tensor
	}{{"q", q}, {"k", k}, {"v", v}, {"out", out}} {
		if err := t.t.Validate(); err != nil {
			return call{}, fmt.Errorf("attention: %s: %w", t.name, err)
		}
	}
	if q.dtype != F32 {
		return call{}, fmt.Errorf("attention: q has element type %v; want f32", q.dtype)
	}
	if out.dtype != F32 {
		return call{}, fmt.Errorf("attention: out has element type %v; want f32", out.dtype)
	}
	if q.Dim == 0 {
		return call{}, fmt.Errorf("attention: q has head dim 0; want >= 1")
	}
	if q.Heads == 0 || k.Heads == 0 {
		return call{}, fmt.Errorf("attention: q has %d heads and k has %d; want >= 1 each", q.Heads, k.Heads)
	}
	if k.Dim != q.Dim || v.Dim != q.Dim {
		return call{}, fmt.Errorf("attention: head dims are q %d, k %d, v %d; want all equal", q.Dim, k.Dim, v.Dim)
	}
	if k.Batch != q.Batch || v.Batch != q.Batch {
		return call{}, fmt.Errorf("attention: batch sizes are q %d, k %d, v %d; want all equal", q.Batch, k.Batch, v.Batch)
	}
	if v.Heads != k.Heads || v.Seq != k.Seq {
		return call{}, fmt.Errorf("attention: v has %d heads × %d keys and k has %d × %d; want the same", v.Heads, v.Seq, k.Heads, k.Seq)
	}
	if q.Heads%k.Heads != 0 {
		return call{}, fmt.Errorf("attention: q has %d heads and k has %d; want a multiple (grouped-query attention)", q.Heads, k.Heads)
	}
	for _, t := range [...]namedTensor{{"k", k}, {"v", v}} {
		// The kernels read K and V rows SeqStride apart as the rows of a
		// matrix, which must not overlap. With one position the stride
		// steps nowhere: denseRows makes it Dim below.
		if t.t.Seq >= 2 && t.t.SeqStride < t.t.Dim {
			return call{}, fmt.Errorf("attention: %s has SeqStride %d with %d positions of head dim %d; want SeqStride >= %d (the head dim), so that its rows do not overlap",
				t.name, t.t.SeqStride, t.t.Seq, t.t.Dim, t.t.Dim)
		}
	}
	if err := checkOutputs("attention: ", out, lse, q, namedTensor{"k", k}, namedTensor{"v", v}); err != nil {
		return call{}, err
	}
	scale, err := callScale(opts.Scale, q.Dim)
	if err != nil {
		return call{}, err
	}
	c := call{out: out, q: q, k: denseRows(k), v: denseRows(v), lse: lse, scale: scale, causal: opts.Causal, group: q.Heads / k.Heads}
	if err := validateOptions(&c, opts); err != nil {
		return call{}, err
	}
	return c, nil
}

// denseRows returns the K or V view t with SeqStride Dim when it has at
// most one position, so that a stride that steps nowhere (0 in a Layout
// literal that sets only the sizes) reaches the kernels as the dense one.
// The elements the view reaches are the same.
func denseRows(t Tensor) Tensor {
	if t.Seq <= 1 {
		t.SeqStride = t.Dim
	}
	return t
}

// namedTensor is an input that an output must not overlap, with the name an
// error gives it.
type namedTensor struct {
	name string
	t    Tensor
}

// checkOutputs checks out and lse (which may be nil) against the queries q
// and the other inputs: out has q's shape and distinct elements, lse holds
// a value per row, and neither shares memory with an input or the other.
// Error messages start with prefix.
func checkOutputs(prefix string, out Tensor, lse []float32, q Tensor, inputs ...namedTensor) error {
	if out.Batch != q.Batch || out.Heads != q.Heads || out.Seq != q.Seq || out.Dim != q.Dim {
		return fmt.Errorf("%sout has shape [%d %d %d %d]; want q's shape [%d %d %d %d]",
			prefix, out.Batch, out.Heads, out.Seq, out.Dim, q.Batch, q.Heads, q.Seq, q.Dim)
	}
	if !out.injective() {
		return fmt.Errorf("%sout has strides [%d %d %d 1] under which elements of shape [%d %d %d %d] overlap; want every element distinct",
			prefix, out.BatchStride, out.HeadStride, out.SeqStride, out.Batch, out.Heads, out.Seq, out.Dim)
	}
	olo, ohi := out.byteRange()
	// q first: the order in which overlaps are reported.
	all := func(f func(name string, t *Tensor) error) error {
		if err := f("q", &q); err != nil {
			return err
		}
		for i := range inputs {
			if err := f(inputs[i].name, &inputs[i].t); err != nil {
				return err
			}
		}
		return nil
	}
	err := all(func(name string, t *Tensor) error {
		lo, hi := t.byteRange()
		slo, shi := t.scaleRange()
		if overlaps(olo, ohi, lo, hi) || overlaps(olo, ohi, slo, shi) {
			return fmt.Errorf("%sout overlaps %s in memory; want separate buffers", prefix, name)
		}
		return nil
	})
	if err != nil || lse == nil {
		return err
	}
	need, ok := rowCount(q.Layout)
	if !ok || len(lse) < need {
		return fmt.Errorf("%slse has %d elements; want >= B·Hq·Nq = %s", prefix, len(lse), rowCountText(q.Layout))
	}
	llo, lhi := floatsRange(lse[:need])
	err = all(func(name string, t *Tensor) error {
		lo, hi := t.byteRange()
		slo, shi := t.scaleRange()
		if overlaps(llo, lhi, lo, hi) || overlaps(llo, lhi, slo, shi) {
			return fmt.Errorf("%slse overlaps %s in memory; want separate buffers", prefix, name)
		}
		return nil
	})
	if err == nil && overlaps(llo, lhi, olo, ohi) {
		err = fmt.Errorf("%slse overlaps out in memory; want separate buffers", prefix)
	}
	return err
}

// callScale checks Options.Scale and resolves 0 to 1/sqrt(dim).
func callScale(scale float32, dim int) (float32, error) {
	if scale != scale || math.IsInf(float64(scale), 0) {
		return 0, fmt.Errorf("attention: Options.Scale is %v; want a finite number, or 0 for 1/sqrt(dim)", scale)
	}
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(dim)))
	}
	return scale, nil
}
