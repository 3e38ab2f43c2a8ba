package attention

import (
	"fmt"
	"math"
)

// PagedKV is a view of a paged K/V store that the caller owns, as vLLM
// lays one out: a pool of blocks of BlockSize positions for keys and one
// for values, a block table per sequence and the sequences' lengths.
// Position p of sequence b lives at slot p mod BlockSize of block
// BlockTable[b·stride + p/BlockSize], where the stride is BlockStride, or
// MaxBlocks when BlockStride is 0.
//
// K and V are the pools as Tensors whose Batch is the number of blocks,
// Seq the block size, Heads the K/V heads and Dim the head dim, so that
// row (block, head, slot) is at Offset(block, head, slot):
// BSHD(numBlocks, blockSize, Hkv, d) is vLLM's [numBlocks, blockSize, Hkv,
// d] and BHSD(numBlocks, Hkv, blockSize, d) the per-head [numBlocks, Hkv,
// blockSize, d]; any strides with a contiguous head dim work, and K and V
// may differ in layout and head dim but not in blocks, block size, heads
// or element type (F32, F16, BF16, Q8, FP8E4M3 or FP8E5M2: a pool's fp8
// scales are per pool or per K/V head). Nothing is copied; the engine
// reads the blocks where they lie.
//
// V may be a view of K's pool (the same data and strides, its Dim the
// first values of each row), as vLLM stores an MLA cache: one pool of
// latent rows of 576 values whose first 512 are the values
// (ExampleEngine_ForwardPagedKV_mla). The output then has V's head dim.
//
// BlockTable is row-major [sequences][MaxBlocks] (vLLM's block_tables), of
// which sequence b uses the first ceil(SeqLens[b]/BlockSize) entries; the
// rest may hold anything. Blocks may be shared between sequences and
// listed in any order. The sequences are q's batch entries, or with
// Options.CuSeqQ the sequences it delimits.
//
// BlockStride makes the table a view of a wider one, read where it lies:
// row b starts at BlockTable[b·BlockStride] and holds MaxBlocks entries,
// and the entries between one row's MaxBlocks and the next row are never
// read. A column slice of vLLM's block_table, block_table[:, off:off+m] of
// a table of W columns (the suffix tables of a shared-prefix step, past
// the prefix's blocks), is PagedKV{BlockTable: table[off:], MaxBlocks: m,
// BlockStride: W} (ExampleEngine_ForwardSharedPrefix_tableView).
// BlockStride 0 means MaxBlocks (rows one after another, as above);
// otherwise it must be at least MaxBlocks, so that no two rows share an
// entry: a stride below MaxBlocks is an error, as it would let a
// sequence's length run into the next row's blocks (sequences share
// blocks by listing the same ids). The table must hold
// (sequences−1)·stride + MaxBlocks entries, none for no sequences: the
// last row needs its MaxBlocks entries, not a whole stride.
type PagedKV struct {
	K, V       Tensor
	BlockTable []int32
	MaxBlocks  int
	SeqLens    []int32
	// BlockStride is the distance in entries of BlockTable from one
	// sequence's row to the next: 0 (MaxBlocks) or >= MaxBlocks.
	BlockStride int
}

// rowStride returns the distance between consecutive rows of the table:
// BlockStride, or MaxBlocks when it is 0.
func (kv *PagedKV) rowStride() int {
	if kv.BlockStride == 0 {
		return kv.MaxBlocks
	}
	return kv.BlockStride
}

// row returns sequence b's row of the table, its first n entries (checked
// by checkTable).
func (kv *PagedKV) row(b, n int) []int32 {
	return kv.BlockTable[b*kv.rowStride():][:n]
}

// tableEntries returns the number of entries of BlockTable that rows of B
// sequences span: (B−1)·stride + MaxBlocks, 0 for no sequences; ok is
// false if it overflows an int.
func (kv *PagedKV) tableEntries(B int) (n int, ok bool) {
	if B == 0 {
		return 0, true
	}
	n, ok = mulSize(B-1, kv.rowStride())
	if !ok || n > math.MaxInt-kv.MaxBlocks {
		return 0, false
	}
	return n + kv.MaxBlocks, true
}

// ForwardPagedKV computes attention for a batch of sequences read from a
// caller-owned paged store: batch entry b of q (and out) holds the queries
// of the Nq newest positions of sequence b, whose keys and values are its
// SeqLens[b] positions in kv. Semantics, shapes and options are those of
// ForwardPaged (q and out are [batch, Hq, Nq, Dim] in F32, F16 or BF16;
// with Options{Causal: true} decoding, speculative verification and
// chunked prefill are one form; Mask, BoolMask and CuSeqKV are errors, and
// Options.TreeMask verifies trees of drafts: ExampleEngine_ForwardPagedKV_treeMask),
// and so is the output: ForwardPaged is this call over the cache's own
// pools and tables, and a caller's store holding the same values gives
// the same bits.
//
// With Options.CuSeqQ the sequences have query counts of their own, so
// that one call computes a continuous-batching step (sequences decoding
// one token, others prefilling a chunk; ExampleEngine_ForwardPagedKV_mixedBatch):
// q and out are [1, Hq, totalQ, Dim], the packed queries of every
// sequence, CuSeqQ has len(kv.SeqLens)+1 offsets from 0 to totalQ, never
// decreasing, and sequence s's CuSeqQ[s+1]−CuSeqQ[s] queries (0 allowed;
// more than SeqLens[s] as Options.CuSeqQ says) are its newest positions. Each sequence's rows and
// log-sum-exps are bitwise those of this call for that sequence alone
// (batch 1, Nq its query count, its table row and length) on the same
// engine; Options.CuSeqQ describes the rest.
//
// The table and the lengths are checked before anything is read: a block
// id out of [0, number of blocks) among the entries a sequence uses, a
// length beyond MaxBlocks·BlockSize or negative, a BlockStride negative
// or below MaxBlocks, or a table shorter than (sequences−1)·stride +
// MaxBlocks (sequences·MaxBlocks with BlockStride 0) is an error that
// names the entry, and nothing is written; so are offsets of
// Options.CuSeqQ that do not match q or the lengths. So is an out or lse
// that shares memory with anything the call reads: q, the pools and their
// Q8 or fp8 scales, the table (its entries from the first row to the last
// row's MaxBlocks, those between rows included), the lengths, the
// options' slices, CuSeqQ included (a serving loop that carves caches and
// outputs from one arena gets an error, never a cache overwritten). After
// the first call of a shape it allocates nothing. The
// store must not change during the call; any number of calls may read it
// at once.
func (e *Engine) ForwardPagedKV(out, q Tensor, kv PagedKV, opts Options) error {
	return e.forwardPagedKV(out, nil, q, &kv, opts)
}

// ForwardPagedKVLSE is ForwardPagedKV that also writes each row's
// log-sum-exp into lse, laid out [batch, Hq, Nq] contiguously, as
// ForwardLSE does ([1, Hq, totalQ] with Options.CuSeqQ).
func (e *Engine) ForwardPagedKVLSE(out Tensor, lse []float32, q Tensor, kv PagedKV, opts Options) error {
	if lse == nil {
		return fmt.Errorf("attention: lse is nil; want a slice of B·Hq·Nq = %s elements", rowCountText(q.Layout))
	}
	return e.forwardPagedKV(out, lse, q, &kv, opts)
}

func (e *Engine) forwardPagedKV(out Tensor, lse []float32, q Tensor, kv *PagedKV, opts Options) error {
	if err := e.usable(); err != nil {
		return err
	}
	j := e.getJob()
	defer e.putJob(j)
	j.origins.pool = poolOrigin{kv: *kv}
	c, err := validateRequest(&request{fn: "attention: ForwardPagedKV: ", kv: &j.origins.pool, out: out, lse: lse, q: q}, &opts)
	if err != nil {
		return err
	}
	if q.Batch == 0 || q.Seq == 0 {
		return nil
	}
	return e.compute(j, &c)
}

// Sequence returns sequence s of kv as a PagedKV of that one sequence:
// the same pools, its row of the table (BlockTable[s·stride:], its first
// MaxBlocks entries; the stride is BlockStride, or MaxBlocks when it is
// 0) and its length (SeqLens[s:s+1]). Nothing is
// copied. It is how a prefix of a SharedPrefixKV with Groups is named on
// its own, to pack it (PackedPrefix.Pack) or to call it alone. For an s
// outside [0, len(SeqLens)), or a table without row s, it returns a
// PagedKV without lengths or with a short table, which every call and
// Pack refuse with an error.
func (kv PagedKV) Sequence(s int) PagedKV {
	one := PagedKV{K: kv.K, V: kv.V, MaxBlocks: kv.MaxBlocks}
	if s < 0 || s >= len(kv.SeqLens) {
		return one
	}
	one.SeqLens = kv.SeqLens[s : s+1]
	if lo, ok := mulSize(s, max(kv.rowStride(), 0)); ok && lo <= len(kv.BlockTable) {
		one.BlockTable = kv.BlockTable[lo:][:min(max(kv.MaxBlocks, 0), len(kv.BlockTable)-lo)]
	}
	return one
}
