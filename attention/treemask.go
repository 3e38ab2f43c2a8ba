package attention

import (
	"fmt"
	"math"
)

// TreeMask is a bit mask per sequence over its query rows and its newest
// keys: what a step that verifies a tree of draft tokens for several
// sequences at once needs (speculative decoding: EAGLE, Medusa), as
// FlashInfer's packed custom_mask with its mask_indptr, or vLLM's tree
// attention, gives it. Options.TreeMask passes it to the paged and cache
// calls (ForwardPagedKV, ForwardPaged, ForwardKVCaches), with or without
// Options.CuSeqQ; docs/integrating.md, "Verifying draft trees in a batch".
//
// Sequence s has nq query rows (CuSeqQ[s+1]−CuSeqQ[s], or the uniform
// Nq) and n keys, its queries being its newest positions, so its last nq
// keys are the draft tokens the rows stand for. With a mask, its query
// row i (position n−nq+i) sees
//
//   - every key before the last nq (the context), under the other options
//     as usual (Causal hides none of them; a Window may), and
//   - draft key t (position n−nq+t, t < nq) iff bit i·nq+t of its mask is
//     set and the other options leave it visible (Causal leaves t <= i,
//     which a tree whose nodes follow their parents satisfies).
//
// Its mask is Bits[Offsets[s]:Offsets[s+1]]: nq rows of nq bits,
// row-major, packed little-endian (bit k is Bits[Offsets[s]+k/8] >> (k%8)
// & 1: numpy.packbits(mask, bitorder="little"), as FlashInfer's
// segment_packbits packs each sequence's mask from a byte of its own), in
// ceil(nq²/8) bytes whose padding bits, past the nq² in the last byte, are
// 0: a set padding bit is an error, which catches masks packed in the
// other bit order or for another query count. An empty segment
// (Offsets[s] == Offsets[s+1]) is no mask: the sequence's rows follow the
// other options alone, as a decoding sequence or a prefill chunk beside
// the verifications does. Offsets has one entry more than there are
// sequences, starts at 0 and never decreases, and Bits holds at least
// Offsets[len(Offsets)−1] bytes (any after them are not read). A
// sequence with a mask has at least as many keys as queries (its drafts
// are among its keys: append them first, PagedKV.Write).
//
// The rows and log-sum-exps of a sequence with a mask are bitwise those
// of the same sequence computed alone by Engine.Forward with
// Options.BoolMask keeping every context key and the draft keys whose
// bits are set, and with the same other options, on the same engine,
// where both calls cut its keys into the same parts (ForwardPaged says
// when: always with Options.CuSeqQ, which plans each sequence as a call
// for it alone, or Config.KVSplits 1), and those of the call for it alone
// (batch 1, its own segment); a
// row that sees no key (no context, and every draft hidden) gets what
// BoolMask gives it, a zero row and a −Inf log-sum-exp (or its sink).
// Keys the mask hides at either end of a row's range are not read for it,
// as BoolMask's are not (Options). The mask is read in place (nq²/8
// bytes a sequence: 32 bytes for a tree of 16 drafts), and a call
// allocates nothing for it. The cost: a sequence with a mask is computed
// as Forward computes one with a BoolMask, its tiles through the masks'
// per-element pass (not the fused float32 tile kernel nor the chunked
// bfloat16 fold); with Options.CuSeqQ the call's other sequences are
// computed as without the masks, while in the uniform form every batch
// entry takes the masked sequences' path.
//
// The zero TreeMask (nil Offsets) is no mask; Bits without Offsets is an
// error.
type TreeMask struct {
	Bits    []uint8
	Offsets []int
}

// treeMask is Options.TreeMask once checked, when some sequence has a
// mask: the bits of every segment and the offsets.
type treeMask struct {
	bits    []uint8
	offsets []int
}

// checkTreeMask checks Options.TreeMask m against the sequences of c, a
// call over a batch of caches or paged sequences (their query and key
// counts are known), and records it in c when some sequence has a mask.
func checkTreeMask(fn string, c *call, m *TreeMask) error {
	if m.Offsets == nil {
		if m.Bits != nil {
			return fmt.Errorf("%sOptions.TreeMask has Bits but no Offsets; want both (a mask per sequence) or neither", fn)
		}
		return nil
	}
	off, S := m.Offsets, c.sequences()
	if len(off) != S+1 {
		return fmt.Errorf("%sOptions.TreeMask.Offsets has %d offsets for %d sequences; want %d, one more than sequences", fn, len(off), S, S+1)
	}
	if off[0] != 0 {
		return fmt.Errorf("%sOptions.TreeMask.Offsets[0] is %d; want 0", fn, off[0])
	}
	for s := range S {
		if off[s+1] < off[s] {
			return fmt.Errorf("%sOptions.TreeMask.Offsets[%d] is %d, less than Offsets[%d] = %d; want offsets that never decrease", fn, s+1, off[s+1], s, off[s])
		}
	}
	if len(m.Bits) < off[S] {
		return fmt.Errorf("%sOptions.TreeMask.Bits has %d bytes; want >= Offsets[%d] = %d", fn, len(m.Bits), S, off[S])
	}
	for s := range S {
		n := off[s+1] - off[s]
		if n == 0 {
			continue
		}
		_, sg := c.sequence(s)
		nq := sg.nq
		bits, ok := mulSize(nq, nq)
		if !ok {
			return fmt.Errorf("%sOptions.TreeMask gives sequence %d a mask of %d·%d bits; want at most %d bits", fn, s, nq, nq, math.MaxInt)
		}
		if want := ceilDiv(bits, 8); n != want {
			return fmt.Errorf("%sOptions.TreeMask gives sequence %d %d bytes (Offsets[%d] to Offsets[%d]); want ceil(nq²/8) = ceil(%d²/8) = %d for its %d query rows, or 0 for no mask",
				fn, s, n, s, s+1, nq, want, nq)
		}
		if nq > sg.nk {
			return fmt.Errorf("%sOptions.TreeMask gives sequence %d a mask and it has %d queries and %s; want at least as many keys as queries (its drafts are its last keys), or no mask",
				fn, s, nq, c.kv.keysText(s))
		}
		if used := bits % 8; used != 0 {
			last := off[s+1] - 1
			if pad := m.Bits[last] >> used; pad != 0 {
				return fmt.Errorf("%sOptions.TreeMask.Bits[%d] is %#08b: bits of sequence %d past its %d·%d are set; want them 0 (bit k of a mask is Bits[Offsets[s]+k/8]>>(k%%8)&1, little-endian)",
					fn, last, m.Bits[last], s, nq, nq)
			}
		}
	}
	if off[S] > 0 {
		c.tree = treeMask{bits: m.Bits[:off[S]], offsets: off}
	}
	return nil
}

// treeSeg returns the mask of sequence sg (its bytes), or nil when the
// call has none or the sequence's segment is empty.
func (c *call) treeSeg(sg seg) []uint8 {
	if c.tree.bits == nil {
		return nil
	}
	lo, hi := c.tree.offsets[sg.seq], c.tree.offsets[sg.seq+1]
	if lo == hi {
		return nil
	}
	return c.tree.bits[lo:hi]
}

// treeKeeps reports whether the mask m of sequence sg keeps its key j
// (its own key numbering) for its query row il: a context key always, a
// draft key iff its bit is set.
func treeKeeps(m []uint8, sg seg, il, j int) bool {
	t := j - (sg.nk - sg.nq)
	if t < 0 {
		return true
	}
	k := il*sg.nq + t
	return m[k>>3]>>(k&7)&1 != 0
}

// treeHidesAll reports whether the mask m of sequence sg hides every key
// of [lo, hi) (its own numbering) from its query row il.
func treeHidesAll(m []uint8, sg seg, il, lo, hi int) bool {
	if lo < sg.nk-sg.nq {
		return false // a context key
	}
	for j := lo; j < hi; j++ {
		if treeKeeps(m, sg, il, j) {
			return false
		}
	}
	return true
}
