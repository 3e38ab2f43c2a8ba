package attention

import (
	"fmt"
	"slices"
	"sync"
)

// Write stores the keys k and values v of n new tokens into the pools of
// kv, in the pools' element type: token i's rows of every head go to slot
// slots[i], which is position slots[i] mod BlockSize of block
// slots[i] / BlockSize (vLLM's slot_mapping; SlotMapping computes the
// slots of each sequence's newest positions from the block table). It is
// the counterpart of vLLM's reshape_and_cache and FlashInfer's
// append_paged_kv_cache, for a runtime that owns its pools and reads them
// with ForwardPagedKV. A slot of −1 skips its token (vLLM's padding slot).
// Only kv.K and kv.V are used; the block table and lengths are not read.
//
// k and v are [1, Hkv, n, Dim] views in any layout (BSHD(1, n, Hkv, Dim)
// is a projection's [tokens, kvHeads, dim]), k of K's head dim and v of
// V's, of element type F32, F16, BF16 or the pools' own. Rows of the
// pools' type are copied (fp8 rows whose scale of the head is the pool's;
// Q8 rows with their block scales); the others are converted as
// KVCache.Append converts: rounded to nearest even for F16 and BF16,
// quantised per block for Q8 (QuantizeQ8), divided by the pool's scale of
// the head and rounded, saturating, for FP8E4M3 and FP8E5M2 (see
// NewKVCacheFP8).
//
// Everything is checked before anything is written, and a misuse is an
// error that writes nothing: pools that are not valid pools (as
// ForwardPagedKV checks them), that overlap each other or whose rows
// overlap (a layout with two positions on one element), a k or v of
// another shape or type, len(slots) other than n, a slot outside [−1,
// blocks·BlockSize), the same slot twice, or a k, v or slots that shares
// memory with what the call writes (the pools' rows, a Q8 pool's scales).
// When V is a view of K (an MLA latent pool, as ForwardPagedKV reads one),
// v must be the zero Tensor and only K's rows are written. Write never
// allocates once warm (a call of more than 32 tokens sorts a copy of the
// slots in reused scratch memory to find duplicates).
func (kv PagedKV) Write(k, v Tensor, slots []int32) error {
	const fn = "attention: PagedKV.Write: "
	if err := checkPoolPair(fn, &kv.K, &kv.V); err != nil {
		return err
	}
	K, V := &kv.K, &kv.V
	latent := tensorsOverlap(K, V)
	if latent {
		if !sameView(K, V) {
			return fmt.Errorf("%skv.V overlaps kv.K and is not a view of its rows (the same data and strides); want separate pools, or V a view of K", fn)
		}
		if v.dtype != 0 {
			return fmt.Errorf("%skv.V is a view of kv.K (a latent pool) and v holds values; want v the zero Tensor: the latent rows are written through k alone", fn)
		}
	} else if v.dtype == 0 {
		return fmt.Errorf("%sv is the zero Tensor; want the new values (only a pool whose V is a view of K takes none)", fn)
	}
	n := len(slots)
	if err := checkRows(fn, "k", &k, K.dtype, K.Heads, K.Dim); err != nil {
		return err
	}
	if k.Seq != n {
		return fmt.Errorf("%sk has %d tokens and slots %d entries; want one slot per token", fn, k.Seq, n)
	}
	if !latent {
		if err := checkRows(fn, "v", &v, V.dtype, V.Heads, V.Dim); err != nil {
			return err
		}
		if v.Seq != n {
			return fmt.Errorf("%sv has %d tokens and slots %d entries; want one slot per token", fn, v.Seq, n)
		}
	}
	bs := K.Seq
	nSlots, ok := mulSize(K.Batch, bs)
	if !ok {
		nSlots = int(^uint(0) >> 1) // every int32 slot is below it
	}
	for _, p := range [...]namedTensor{{"kv.K", *K}, {"kv.V", *V}} {
		if latent && p.name == "kv.V" {
			break // V's rows are K's
		}
		for _, in := range [...]namedTensor{{"k", k}, {"v", v}} {
			if writeOverlaps(&p.t, &in.t) {
				return fmt.Errorf("%s%s overlaps the pool %s in memory; want a separate buffer", fn, in.name, p.name)
			}
		}
		if writeOverlapsSpan(&p.t, spanOf(slots)) {
			return fmt.Errorf("%sslots overlaps the pool %s in memory; want a separate buffer", fn, p.name)
		}
	}
	for i, s := range slots {
		if s < -1 || int(s) >= nSlots {
			return fmt.Errorf("%sslots[%d] is %d; want −1 (skip) or 0 to %d (blocks·BlockSize − 1 = %d·%d − 1)", fn, i, s, nSlots-1, K.Batch, bs)
		}
	}
	if i, j, ok := duplicateSlot(slots); ok {
		return fmt.Errorf("%sslots[%d] and slots[%d] are both slot %d; want each slot at most once (two tokens cannot share a position)", fn, i, j, slots[i])
	}
	// A token's rows of every head lie end to end in the pool and in
	// the new rows (vLLM's layout and a projection's): one conversion
	// for all of them.
	wholeK, wholeV := headsTogether(K, &k), !latent && headsTogether(V, &v)
	for i, s := range slots {
		if s < 0 {
			continue
		}
		blk, pos := int(s)/bs, int(s)%bs
		if wholeK {
			storeRow(K, K.Offset(blk, 0, pos), &k, k.Offset(0, 0, i), 0, K.Heads*K.Dim)
		} else {
			for h := range K.Heads {
				storeRow(K, K.Offset(blk, h, pos), &k, k.Offset(0, h, i), h, K.Dim)
			}
		}
		switch {
		case latent:
		case wholeV:
			storeRow(V, V.Offset(blk, 0, pos), &v, v.Offset(0, 0, i), 0, V.Heads*V.Dim)
		default:
			for h := range V.Heads {
				storeRow(V, V.Offset(blk, h, pos), &v, v.Offset(0, h, i), h, V.Dim)
			}
		}
	}
	return nil
}

// headsTogether reports whether a position's rows of every head lie end
// to end both in the pool p and in the new rows r (HeadStride = Dim in
// both) and convert alike, so that storeRow may move them as one row of
// Heads·Dim elements: neither holds fp8 with scales per head.
func headsTogether(p, r *Tensor) bool {
	return p.Heads > 1 && p.HeadStride == p.Dim && r.HeadStride == r.Dim && len(p.f8s) <= 1 && len(r.f8s) <= 1
}

// SlotMapping writes to dst the slots (block·BlockSize + position in the
// block, as Write takes them) of each sequence's newest positions, through
// kv's block table and lengths: with cuSeqQ nil, the last position
// SeqLens[s]−1 of each sequence s (a decode step: dst has len(SeqLens)
// entries); otherwise the cuSeqQ[s+1]−cuSeqQ[s] last positions of sequence
// s, in order, at dst[cuSeqQ[s]:cuSeqQ[s+1]], with cuSeqQ the offsets that
// Options.CuSeqQ gives ForwardPagedKV for the same step. So the lengths
// count the new tokens already, as ForwardPagedKV's do, and
//
//	kv.SlotMapping(slots, cuSeqQ)
//	kv.Write(kNew, vNew, slots)
//	e.ForwardPagedKV(out, q, kv, attention.Options{Causal: true, CuSeqQ: cuSeqQ})
//
// is a serving step (FlashInfer's get_batch_indices_positions and the
// slot_mapping a vLLM scheduler builds). The table, lengths and offsets are
// checked as ForwardPagedKV checks them (a sequence given more new tokens
// than it has positions, or a length of 0 without cuSeqQ, is an error too),
// and dst must have exactly one entry per new token and share no memory
// with them; on error nothing is written. It does not allocate.
func (kv PagedKV) SlotMapping(dst []int32, cuSeqQ []int) error {
	const fn = "attention: PagedKV.SlotMapping: "
	if err := kv.K.Layout.Validate(); err != nil {
		return fmt.Errorf("%skv.K: %w", fn, err)
	}
	bs, nBlocks := kv.K.Seq, kv.K.Batch
	if bs < 1 {
		return fmt.Errorf("%skv.K has %d positions per block; want >= 1", fn, bs)
	}
	B := len(kv.SeqLens)
	if nSlots, ok := mulSize(nBlocks, bs); !ok || nSlots > 1<<31 {
		return fmt.Errorf("%sthe pools have %d blocks of %d positions; want at most 2^31 slots (a slot is an int32)", fn, nBlocks, bs)
	}
	if _, err := checkTable(fn, &kv, B, bs, nBlocks); err != nil {
		return err
	}
	total := B
	if cuSeqQ != nil {
		if len(cuSeqQ) != B+1 {
			return fmt.Errorf("%scuSeqQ has %d offsets and kv.SeqLens %d lengths; want one more offset than lengths", fn, len(cuSeqQ), B)
		}
		if cuSeqQ[0] != 0 {
			return fmt.Errorf("%scuSeqQ[0] is %d; want 0", fn, cuSeqQ[0])
		}
		for s := range B {
			nq := cuSeqQ[s+1] - cuSeqQ[s]
			if cuSeqQ[s+1] < cuSeqQ[s] {
				return fmt.Errorf("%scuSeqQ[%d] is %d, less than cuSeqQ[%d] = %d; want offsets that never decrease", fn, s+1, cuSeqQ[s+1], s, cuSeqQ[s])
			}
			if nq > int(kv.SeqLens[s]) {
				return fmt.Errorf("%scuSeqQ gives sequence %d %d new tokens and kv.SeqLens[%d] is %d; want at most as many new tokens as positions (the lengths count the new tokens)", fn, s, nq, s, kv.SeqLens[s])
			}
		}
		total = cuSeqQ[B]
	} else {
		for s, n := range kv.SeqLens {
			if n == 0 {
				return fmt.Errorf("%skv.SeqLens[%d] is 0 and cuSeqQ is nil (one new token per sequence); want >= 1, or cuSeqQ giving it none", fn, s)
			}
		}
	}
	if len(dst) != total {
		return fmt.Errorf("%sdst has %d entries; want %d, one per new token", fn, len(dst), total)
	}
	out := spanOf(dst)
	for _, in := range [...]struct {
		name string
		s    span
	}{{"kv.BlockTable", spanOf(kv.BlockTable)}, {"kv.SeqLens", spanOf(kv.SeqLens)}, {"cuSeqQ", spanOf(cuSeqQ)}} {
		if overlaps(out.lo, out.hi, in.s.lo, in.s.hi) {
			return fmt.Errorf("%sdst overlaps %s in memory; want a separate buffer", fn, in.name)
		}
	}
	i := 0
	for s, n32 := range kv.SeqLens {
		n, nq := int(n32), 1
		if cuSeqQ != nil {
			nq = cuSeqQ[s+1] - cuSeqQ[s]
		}
		table := kv.row(s, ceilDiv(n, bs))
		for p := n - nq; p < n; p++ {
			dst[i] = table[p/bs]*int32(bs) + int32(p%bs)
			i++
		}
	}
	return nil
}

// checkTable checks a block table of B sequences and their lengths for
// pools of nBlocks blocks of bs positions: MaxBlocks, BlockStride, the
// table's length, every length, and every block id a sequence uses. It returns the
// longest length. ForwardPagedKV's pool origin and SlotMapping share it.
func checkTable(fn string, kv *PagedKV, B, bs, nBlocks int) (maxLen int, err error) {
	if kv.MaxBlocks < 0 {
		return 0, fmt.Errorf("%skv.MaxBlocks is %d; want >= 0", fn, kv.MaxBlocks)
	}
	if kv.BlockStride < 0 {
		return 0, fmt.Errorf("%skv.BlockStride is %d; want >= kv.MaxBlocks = %d (the entries from one sequence's row to the next), or 0 for rows of MaxBlocks entries", fn, kv.BlockStride, kv.MaxBlocks)
	}
	if kv.BlockStride != 0 && kv.BlockStride < kv.MaxBlocks {
		return 0, fmt.Errorf("%skv.BlockStride is %d, less than kv.MaxBlocks = %d, so that rows of the table overlap; want >= %d (the entries from one sequence's row to the next), or 0 for rows of MaxBlocks entries", fn, kv.BlockStride, kv.MaxBlocks, kv.MaxBlocks)
	}
	if n, ok := kv.tableEntries(B); !ok || len(kv.BlockTable) < n {
		if kv.BlockStride == 0 {
			return 0, fmt.Errorf("%skv.BlockTable has %d entries; want >= sequences·MaxBlocks = %d·%d", fn, len(kv.BlockTable), B, kv.MaxBlocks)
		}
		return 0, fmt.Errorf("%skv.BlockTable has %d entries; want >= (sequences−1)·BlockStride + MaxBlocks = (%d−1)·%d + %d (the last row needs MaxBlocks entries)", fn, len(kv.BlockTable), B, kv.BlockStride, kv.MaxBlocks)
	}
	maxKeys, ok := mulSize(kv.MaxBlocks, bs)
	if !ok || maxKeys > 1<<31-1 {
		maxKeys = 1<<31 - 1 // every int32 length fits
	}
	for s, n32 := range kv.SeqLens {
		n := int(n32)
		if n < 0 {
			return 0, fmt.Errorf("%skv.SeqLens[%d] is %d; want >= 0", fn, s, n)
		}
		if n > maxKeys { // the table's fault as much as the length's: name both
			return 0, fmt.Errorf("%skv.SeqLens[%d] is %d, more than kv.MaxBlocks·BlockSize = %d·%d = %d positions; want kv.MaxBlocks >= %d (the table's entries per sequence)",
				fn, s, n, kv.MaxBlocks, bs, maxKeys, ceilDiv(n, bs))
		}
		for i, id := range kv.row(s, ceilDiv(n, bs)) {
			if id < 0 || int(id) >= nBlocks {
				return 0, fmt.Errorf("%skv.BlockTable[%d][%d] is block %d; want 0 to %d (the pools' blocks)", fn, s, i, id, nBlocks-1)
			}
		}
		maxLen = max(maxLen, n)
	}
	return maxLen, nil
}

// checkPoolPair checks the K and V pools of a PagedKV that a call writes:
// valid views of one element type, number of blocks, block size and heads,
// at least one of each, and rows that never share an element.
func checkPoolPair(fn string, K, V *Tensor) error {
	for _, t := range [...]namedTensor{{"kv.K", *K}, {"kv.V", *V}} {
		if err := t.t.Validate(); err != nil {
			return fmt.Errorf("%s%s: %w", fn, t.name, err)
		}
	}
	if K.dtype != V.dtype || K.Batch != V.Batch || K.Seq != V.Seq || K.Heads != V.Heads {
		return fmt.Errorf("%skv.K is %s and kv.V %s; want the same type, blocks, positions and heads (the head dims may differ)",
			fn, poolText(*K), poolText(*V))
	}
	if K.Batch < 1 || K.Seq < 1 || K.Heads < 1 || K.Dim < 1 || V.Dim < 1 {
		return fmt.Errorf("%skv.K is %s and kv.V %s; want >= 1 block, position per block, head and head dim", fn, poolText(*K), poolText(*V))
	}
	for _, t := range [...]namedTensor{{"kv.K", *K}, {"kv.V", *V}} {
		if !t.t.injective() {
			return fmt.Errorf("%s%s has strides [%d %d %d 1] for %s, which place two of its elements on one; want rows that do not overlap",
				fn, t.name, t.t.BatchStride, t.t.HeadStride, t.t.SeqStride, poolText(t.t))
		}
	}
	return nil
}

// checkRows checks the rows that a write or read moves to or from storage
// of element type dtype with heads × dim per position: a valid [1, heads,
// n, dim] view of type F32, F16, BF16 or dtype.
func checkRows(fn, name string, t *Tensor, dtype DType, heads, dim int) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("%s%s: %w", fn, name, err)
	}
	if t.dtype != F32 && t.dtype != F16 && t.dtype != BF16 && t.dtype != dtype {
		return fmt.Errorf("%s%s has element type %v; want f32, f16, bf16 or the storage's %v", fn, name, t.dtype, dtype)
	}
	if t.Batch != 1 || t.Heads != heads || t.Dim != dim {
		return fmt.Errorf("%s%s has shape [%d %d %d %d]; want [1 %d n %d]", fn, name, t.Batch, t.Heads, t.Seq, t.Dim, heads, dim)
	}
	return nil
}

// sameView reports whether b is a view of a's rows: the same data and
// strides (b's Dim may be smaller).
func sameView(a, b *Tensor) bool {
	alo, _ := a.byteRange()
	blo, _ := b.byteRange()
	return alo == blo && a.BatchStride == b.BatchStride && a.HeadStride == b.HeadStride && a.SeqStride == b.SeqStride && b.Dim <= a.Dim
}

// writtenRanges returns the memory a write into t changes: its elements
// and, for Q8, their block scales (an fp8 tensor's scales are only read).
func writtenRanges(t *Tensor) (span, span) {
	lo, hi := t.byteRange()
	var s span
	if t.dtype == Q8 {
		s.lo, s.hi = t.scaleRange()
	}
	return span{lo, hi}, s
}

// writeOverlaps reports whether writing into w changes memory that the
// view r reads (its elements or scales).
func writeOverlaps(w, r *Tensor) bool {
	if r.dtype == 0 {
		return false
	}
	rlo, rhi := r.byteRange()
	slo, shi := r.scaleRange()
	return writeOverlapsSpan(w, span{rlo, rhi}) || writeOverlapsSpan(w, span{slo, shi})
}

// writeOverlapsSpan reports whether writing into w changes memory in s.
func writeOverlapsSpan(w *Tensor, s span) bool {
	a, b := writtenRanges(w)
	return overlaps(a.lo, a.hi, s.lo, s.hi) || overlaps(b.lo, b.hi, s.lo, s.hi)
}

// smallSlots is the most slots duplicateSlot compares pairwise; more are
// sorted.
const smallSlots = 32

// slotScratch holds sorted copies of slot mappings, reused across calls
// so that finding duplicates does not allocate once warm.
var slotScratch = sync.Pool{New: func() any { return new([]int32) }}

// duplicateSlot returns the indices i < j of the first pair of equal
// slots (−1, the skip, excluded) in the order of the later index, if any.
func duplicateSlot(slots []int32) (i, j int, found bool) {
	if len(slots) <= smallSlots {
		for j := range slots {
			for i := range j {
				if slots[i] == slots[j] && slots[j] >= 0 {
					return i, j, true
				}
			}
		}
		return 0, 0, false
	}
	p := slotScratch.Get().(*[]int32)
	defer slotScratch.Put(p)
	sorted := append((*p)[:0], slots...)
	*p = sorted
	slices.Sort(sorted)
	dup, found := int32(0), false
	for k := 1; k < len(sorted); k++ {
		if sorted[k] == sorted[k-1] && sorted[k] >= 0 {
			dup, found = sorted[k], true
			break
		}
	}
	if !found {
		return 0, 0, false
	}
	i = slices.Index(slots, dup)
	j = i + 1 + slices.Index(slots[i+1:], dup)
	return i, j, true
}

// Read copies positions from, from+1, ..., from+n−1 of the cache into k
// and v, [1, Hkv, n, Dim] views in any layout: to swap a sequence out to
// host memory, save it, or look at what the cache holds. Views of element
// type F32 receive the values as stored, widened exactly to float32 (Q8
// and fp8 times their scales, as Engine.Forward reads them); views of the
// cache's own type receive the stored elements themselves (Q8 with their
// block scales; fp8 where the view's scale of the head is the cache's,
// and re-quantised from the float32 value otherwise); F16 and BF16 views
// of another type receive the float32 value rounded to nearest even. So
// Append of what Read gave in the cache's type fills another cache of the
// same type and scales with the same bits, and Read in F32 gives exactly
// the values attention reads.
//
// A misuse is an error that writes nothing: from+n beyond Len, a
// mismatched shape or type, k or v whose elements overlap each other or
// themselves, or that share memory with the cache's storage. Read does not
// allocate.
func (c *KVCache) Read(k, v Tensor, from int) error {
	if err := checkRead("attention: KVCache.Read: ", k, v, &c.k, &c.v, c.heads, c.dim, from, c.n); err != nil {
		return err
	}
	for h := range c.heads {
		for s := range k.Seq {
			storeRow(&k, k.Offset(0, h, s), &c.k, c.k.Offset(0, h, from+s), h, c.dim)
			storeRow(&v, v.Offset(0, h, s), &c.v, c.v.Offset(0, h, from+s), h, c.dim)
		}
	}
	return nil
}

// Read copies positions from, from+1, ..., from+n−1 of sequence id into k
// and v, [1, Hkv, n, Dim] views, as KVCache.Read does (the same types,
// conversions and errors; an unknown sequence is one too). It holds the
// cache's read lock and does not allocate.
func (c *PagedCache) Read(id SeqID, k, v Tensor, from int) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, err := c.seq("Read", id)
	if err != nil {
		return err
	}
	if err := checkRead("attention: PagedCache.Read: ", k, v, &c.k, &c.v, c.heads, c.dim, from, s.n); err != nil {
		return err
	}
	bs := c.blockSize
	for h := range c.heads {
		for t := range k.Seq {
			p := from + t
			blk := int(s.blocks[p/bs])
			storeRow(&k, k.Offset(0, h, t), &c.k, c.k.Offset(blk, h, p%bs), h, c.dim)
			storeRow(&v, v.Offset(0, h, t), &c.v, c.v.Offset(blk, h, p%bs), h, c.dim)
		}
	}
	return nil
}

// checkRead validates the destination views of a read of positions
// [from, from+k.Seq) out of storage ck and cv holding length positions.
func checkRead(fn string, k, v Tensor, ck, cv *Tensor, heads, dim, from, length int) error {
	for _, t := range [...]namedTensor{{"k", k}, {"v", v}} {
		if err := checkRows(fn, t.name, &t.t, ck.dtype, heads, dim); err != nil {
			return err
		}
		if !t.t.injective() {
			return fmt.Errorf("%s%s has strides [%d %d %d 1] for shape [%d %d %d %d], which place two of its elements on one; want a view whose elements are distinct",
				fn, t.name, t.t.BatchStride, t.t.HeadStride, t.t.SeqStride, t.t.Batch, t.t.Heads, t.t.Seq, t.t.Dim)
		}
	}
	if k.Seq != v.Seq {
		return fmt.Errorf("%sk has %d positions and v %d; want the same", fn, k.Seq, v.Seq)
	}
	if from < 0 || from > length || k.Seq > length-from {
		return fmt.Errorf("%s%d positions from %d of %d; want from + n <= %d", fn, k.Seq, from, length, length)
	}
	if writeOverlaps(&k, &v) || writeOverlaps(&v, &k) {
		return fmt.Errorf("%sk and v overlap in memory; want separate buffers", fn)
	}
	for _, t := range [...]namedTensor{{"k", k}, {"v", v}} {
		for _, st := range [...]namedTensor{{"keys", *ck}, {"values", *cv}} {
			if writeOverlaps(&t.t, &st.t) {
				return fmt.Errorf("%s%s overlaps the cache's %s in memory; want a separate buffer", fn, t.name, st.name)
			}
		}
	}
	return nil
}
