package attention_test

import (
	"fmt"
	"math"

	"github.com/flashgo/flashgo/attention"
)

// A decode loop over a contiguous fp16 cache: append the new token's K and
// V, then one causal Forward over the cache's views. Bottom-right alignment
// makes the same call serve prefill chunks and single tokens.
func ExampleKVCache() {
	const hq, hkv, d = 8, 2, 64
	cache, err := attention.NewKVCache(attention.F16, hkv, 1024, d)
	if err != nil {
		panic(err)
	}
	e, _ := attention.NewEngine(attention.Config{})
	q := make([]float32, hq*d)
	out := make([]float32, hq*d)
	k, v := make([]float32, hkv*d), make([]float32, hkv*d)
	for range 3 {
		// ... project the token into q, k and v ...
		if err := cache.Append(attention.F32Tensor(k, attention.BHSD(1, hkv, 1, d)), attention.F32Tensor(v, attention.BHSD(1, hkv, 1, d))); err != nil {
			panic(err)
		}
		err := e.Forward(attention.F32Tensor(out, attention.BHSD(1, hq, 1, d)), attention.F32Tensor(q, attention.BHSD(1, hq, 1, d)),
			cache.K(), cache.V(), attention.Options{Causal: true})
		if err != nil {
			panic(err)
		}
	}
	fmt.Println(cache.Len(), "positions cached")
	// Output: 3 positions cached
}

// Two sequences share a prompt in a paged cache (Fork is copy-on-write)
// and decode together in one call.
func ExamplePagedCache() {
	const hq, hkv, d = 4, 1, 32
	cache, err := attention.NewPagedCache(attention.BF16, hkv, d, 16, 64)
	if err != nil {
		panic(err)
	}
	prompt := make([]float32, 20*d)
	a := cache.NewSequence()
	if err := cache.Append(a, attention.F32Tensor(prompt, attention.BHSD(1, hkv, 20, d)), attention.F32Tensor(prompt, attention.BHSD(1, hkv, 20, d))); err != nil {
		panic(err)
	}
	b, _ := cache.Fork(a) // shares the prompt's two blocks
	tok := make([]float32, d)
	for _, s := range []attention.SeqID{a, b} {
		if err := cache.Append(s, attention.F32Tensor(tok, attention.BHSD(1, hkv, 1, d)), attention.F32Tensor(tok, attention.BHSD(1, hkv, 1, d))); err != nil {
			panic(err)
		}
	}
	e, _ := attention.NewEngine(attention.Config{})
	q := make([]float32, 2*hq*d)
	out := make([]float32, 2*hq*d)
	err = e.ForwardPaged(attention.F32Tensor(out, attention.BHSD(2, hq, 1, d)), attention.F32Tensor(q, attention.BHSD(2, hq, 1, d)),
		cache, []attention.SeqID{a, b}, attention.Options{Causal: true})
	if err != nil {
		panic(err)
	}
	fmt.Println(cache.NumBlocks()-cache.FreeBlocks(), "blocks in use")
	// Output: 3 blocks in use
}

// A serving loop holds one contiguous cache per request and decodes every
// request in one call a step: each appends its new token's K and V, then
// ForwardKVCaches reads the caches, of different lengths, in place. The
// slice picks which requests take part, in any order.
func ExampleEngine_ForwardKVCaches() {
	const hq, hkv, d = 8, 2, 64
	prompts := []int{5, 12, 1} // three requests with prompts of different lengths
	caches := make([]*attention.KVCache, len(prompts))
	for i, n := range prompts {
		c, err := attention.NewKVCache(attention.BF16, hkv, 256, d)
		if err != nil {
			panic(err)
		}
		kv := make([]float32, hkv*n*d) // ... the prompt's keys and values ...
		if err := c.Append(attention.F32Tensor(kv, attention.BHSD(1, hkv, n, d)), attention.F32Tensor(kv, attention.BHSD(1, hkv, n, d))); err != nil {
			panic(err)
		}
		caches[i] = c
	}
	e, _ := attention.NewEngine(attention.Config{})
	B := len(caches)
	q := make([]float32, B*hq*d)   // [B, 1, Hq, d]: each request's new query
	out := make([]float32, B*hq*d) // [B, 1, Hq, d]
	k, v := make([]float32, hkv*d), make([]float32, hkv*d)
	for range 4 {
		for _, c := range caches {
			// ... project the request's token into its q, k and v ...
			if err := c.Append(attention.F32Tensor(k, attention.BHSD(1, hkv, 1, d)), attention.F32Tensor(v, attention.BHSD(1, hkv, 1, d))); err != nil {
				panic(err)
			}
		}
		err := e.ForwardKVCaches(attention.F32Tensor(out, attention.BSHD(B, 1, hq, d)), attention.F32Tensor(q, attention.BSHD(B, 1, hq, d)),
			caches, attention.Options{Causal: true})
		if err != nil {
			panic(err)
		}
	}
	for _, c := range caches {
		fmt.Print(c.Len(), " ")
	}
	fmt.Println("positions cached")
	// Output: 9 16 5 positions cached
}

// A runtime that manages its own block pool, in vLLM's layout: key and
// value pools [numBlocks, blockSize, Hkv, d], an int32 block table
// [batch, maxBlocks] and the sequences' lengths. ForwardPagedKV decodes
// the batch straight from them, without moving the data.
func ExampleEngine_ForwardPagedKV() {
	const hq, hkv, d, blockSize, numBlocks, maxBlocks = 8, 2, 64, 16, 32, 4
	pool := attention.BSHD(numBlocks, blockSize, hkv, d) // [numBlocks, blockSize, Hkv, d]
	kPool := make([]float32, pool.Span())                // ... the runtime's cached keys ...
	vPool := make([]float32, pool.Span())                // ... and values ...
	kv := attention.PagedKV{
		K: attention.F32Tensor(kPool, pool),
		V: attention.F32Tensor(vPool, pool),
		BlockTable: []int32{
			7, 3, 0, 0, // sequence 0: blocks 7 then 3 (the zeros are unused)
			7, 12, 30, 0, // sequence 1 shares block 7, its prompt prefix
		},
		MaxBlocks: maxBlocks,
		SeqLens:   []int32{20, 40},
	}
	e, _ := attention.NewEngine(attention.Config{})
	q := make([]float32, 2*hq*d)   // [batch, 1, Hq, d]: one new token each
	out := make([]float32, 2*hq*d) // [batch, 1, Hq, d]
	err := e.ForwardPagedKV(attention.F32Tensor(out, attention.BSHD(2, 1, hq, d)), attention.F32Tensor(q, attention.BSHD(2, 1, hq, d)),
		kv, attention.Options{Causal: true})
	fmt.Println(err)

	kv.SeqLens[1] = 80 // more than the table's 4 blocks of 16 hold
	err = e.ForwardPagedKV(attention.F32Tensor(out, attention.BSHD(2, 1, hq, d)), attention.F32Tensor(q, attention.BSHD(2, 1, hq, d)),
		kv, attention.Options{Causal: true})
	fmt.Println(err)
	// Output:
	// <nil>
	// attention: ForwardPagedKV: kv.SeqLens[1] is 80, more than kv.MaxBlocks·BlockSize = 4·16 = 64 positions; want kv.MaxBlocks >= 5 (the table's entries per sequence)
}

// A continuous-batching step in one call: six sequences decode a token
// each while two prefill a chunk of their prompts (the second one's chunk
// follows 512 positions prefilled in an earlier step), all from one paged
// pool. The new tokens' queries are packed one after another ([tokens, Hq,
// d], vLLM's layout) and Options.CuSeqQ says where each sequence's start,
// as vLLM's query_start_loc; each sequence attends causally to its own
// cached positions, its new tokens being the newest of them. Every
// sequence's rows are bitwise those of a call for it alone.
func ExampleEngine_ForwardPagedKV_mixedBatch() {
	const hq, hkv, d, blockSize, maxBlocks = 8, 2, 64, 16, 64
	lens := []int32{100, 37, 250, 18, 64, 129, 512, 1024} // cached positions, the new tokens' included
	newTokens := []int{1, 1, 1, 1, 1, 1, 512, 512}
	cuSeqQ := []int{0}
	for _, n := range newTokens {
		cuSeqQ = append(cuSeqQ, cuSeqQ[len(cuSeqQ)-1]+n)
	}
	tokens := cuSeqQ[len(cuSeqQ)-1]

	// The runtime's pool, [numBlocks, blockSize, Hkv, d], and block table:
	// here sequence s's blocks follow each other, and its values are all
	// s+1, so that each output row is s+1.
	table := make([]int32, len(lens)*maxBlocks)
	numBlocks := 0
	for s, n := range lens {
		for i := range (int(n) + blockSize - 1) / blockSize {
			table[s*maxBlocks+i] = int32(numBlocks)
			numBlocks++
		}
	}
	pool := attention.BSHD(numBlocks, blockSize, hkv, d)
	kPool, vPool := make([]float32, pool.Span()), make([]float32, pool.Span())
	for s, n := range lens {
		for p := range int(n) {
			blk := int(table[s*maxBlocks+p/blockSize])
			for h := range hkv {
				row := pool.Offset(blk, h, p%blockSize)
				for i := range d {
					kPool[row+i] = float32(math.Sin(float64(p*d + i)))
					vPool[row+i] = float32(s + 1)
				}
			}
		}
	}
	kv := attention.PagedKV{K: attention.F32Tensor(kPool, pool), V: attention.F32Tensor(vPool, pool),
		BlockTable: table, MaxBlocks: maxBlocks, SeqLens: lens}

	e, _ := attention.NewEngine(attention.Config{})
	qLayout := attention.BSHD(1, tokens, hq, d) // [1, tokens, Hq, d]
	q := make([]float32, qLayout.Span())
	for i := range q {
		q[i] = float32(math.Cos(float64(i)))
	}
	out := make([]float32, qLayout.Span())
	err := e.ForwardPagedKV(attention.F32Tensor(out, qLayout), attention.F32Tensor(q, qLayout), kv,
		attention.Options{Causal: true, CuSeqQ: cuSeqQ})
	fmt.Println(err, tokens, "tokens")
	for s := range lens {
		last := qLayout.Offset(0, hq-1, cuSeqQ[s+1]-1) // the sequence's newest token, last head
		fmt.Printf("sequence %d: %d new of %d, out %.3f\n", s, newTokens[s], lens[s], out[last])
	}

	// Offsets that do not end at the queries' count are an error.
	bad := []int{0, 1, 2, 3, 4, 5, 6, 518, tokens - 1}
	err = e.ForwardPagedKV(attention.F32Tensor(out, qLayout), attention.F32Tensor(q, qLayout), kv,
		attention.Options{Causal: true, CuSeqQ: bad})
	fmt.Println(err)
	// Output:
	// <nil> 1030 tokens
	// sequence 0: 1 new of 100, out 1.000
	// sequence 1: 1 new of 37, out 2.000
	// sequence 2: 1 new of 250, out 3.000
	// sequence 3: 1 new of 18, out 4.000
	// sequence 4: 1 new of 64, out 5.000
	// sequence 5: 1 new of 129, out 6.000
	// sequence 6: 512 new of 512, out 7.000
	// sequence 7: 512 new of 1024, out 8.000
	// attention: ForwardPagedKV: Options.CuSeqQ[8] is 1029; want Nq = 1030 (the packed length)
}

// ForwardPagedKV reads an MLA cache (DeepSeek's absorbed decode) from a
// paged pool as vLLM stores it: one pool of latent rows of 576 values, 512
// of them the values, so V is a view of K's pool with Dim 512. The queries
// are the absorbed ones, 576 wide; the output rows are 512 wide.
func ExampleEngine_ForwardPagedKV_mla() {
	const heads, latent, rank, blockSize, numBlocks, maxBlocks = 16, 576, 512, 16, 64, 8
	pool := attention.BSHD(numBlocks, blockSize, 1, latent) // [numBlocks, blockSize, 1, 576]
	cache := make([]float32, pool.Span())                   // ... the runtime's latent cache ...
	k := attention.F32Tensor(cache, pool)
	v := k
	v.Dim = rank // the first 512 values of each latent row
	kv := attention.PagedKV{K: k, V: v, BlockTable: []int32{5, 9, 2, 0, 0, 0, 0, 0}, MaxBlocks: maxBlocks, SeqLens: []int32{40}}
	e, _ := attention.NewEngine(attention.Config{})
	q := make([]float32, heads*latent) // [1, 1, heads, 576]: one new token
	out := make([]float32, heads*rank) // [1, 1, heads, 512]
	err := e.ForwardPagedKV(attention.F32Tensor(out, attention.BSHD(1, 1, heads, rank)), attention.F32Tensor(q, attention.BSHD(1, 1, heads, latent)),
		kv, attention.Options{Causal: true, Scale: 1 / float32(math.Sqrt(128+64))})
	fmt.Println(err)
	// Output:
	// <nil>
}

// ForwardSharedPrefix decodes four sequences sampled from one prompt: the
// prompt's blocks are read once for all four, each sequence's own blocks
// after it per sequence.
func ExampleEngine_ForwardSharedPrefix() {
	const hq, hkv, d, blockSize, numBlocks = 8, 2, 64, 16, 32
	pool := attention.BSHD(numBlocks, blockSize, hkv, d)
	k := attention.F32Tensor(make([]float32, pool.Span()), pool) // ... the runtime's cached keys ...
	v := attention.F32Tensor(make([]float32, pool.Span()), pool) // ... and values ...
	kv := attention.SharedPrefixKV{
		// The prompt: 40 positions in blocks 3, 8 and 1.
		Prefix: attention.PagedKV{K: k, V: v, BlockTable: []int32{3, 8, 1}, MaxBlocks: 3, SeqLens: []int32{40}},
		// Each sample's tokens after the prompt: one block each.
		Suffix: attention.PagedKV{K: k, V: v, BlockTable: []int32{10, 11, 12, 13}, MaxBlocks: 1, SeqLens: []int32{5, 5, 3, 5}},
	}
	e, _ := attention.NewEngine(attention.Config{})
	q := make([]float32, 4*hq*d)   // [4, 1, Hq, d]: one new token each
	out := make([]float32, 4*hq*d) // [4, 1, Hq, d]
	err := e.ForwardSharedPrefix(attention.F32Tensor(out, attention.BSHD(4, 1, hq, d)), attention.F32Tensor(q, attention.BSHD(4, 1, hq, d)),
		kv, attention.Options{Causal: true})
	fmt.Println(err)
	// Output:
	// <nil>
}

// A speculative-decoding step verifies a tree of draft tokens for each of
// two sequences in one call (EAGLE/Medusa tree attention; FlashInfer's
// custom_mask): the drafts' K and V are already in the pool, as each
// sequence's newest positions, and Options.TreeMask says which drafts each
// draft's row sees, its ancestors and itself. The values here are each
// key's position, and the queries zero, so each row's output is the mean
// position of the keys it sees.
func ExampleEngine_ForwardPagedKV_treeMask() {
	const blockSize, d = 4, 2
	// Sequence 0: 10 context tokens, then drafts 0 to 3 at positions 10 to
	// 13: 1 and 2 follow 0, 3 follows 1. Sequence 1: 6 context tokens, then
	// drafts 0 to 2 at positions 6 to 8: 1 and 2 follow 0.
	parents := [][]int{{-1, 0, 0, 1}, {-1, 0, 0}}
	lens := []int32{14, 9}
	table := []int32{0, 1, 2, 3, 4, 5, 6, -1} // 4 entries a sequence
	pool := attention.BSHD(7, blockSize, 1, d)
	k, v := make([]float32, pool.Span()), make([]float32, pool.Span())
	for s, n := range lens {
		for p := range int(n) {
			off := pool.Offset(int(table[s*4+p/blockSize]), 0, p%blockSize)
			v[off], v[off+1] = float32(p), 1 // ... the runtime's cached values ...
		}
	}
	// Each sequence's mask: nq rows of nq bits, row i's bit t set when
	// draft t is draft i or an ancestor, packed little-endian from a byte
	// of its own (numpy.packbits(bitorder="little")); Offsets are where
	// each sequence's bytes start (FlashInfer's mask_indptr).
	tree := attention.TreeMask{Offsets: []int{0}}
	cuSeqQ := []int{0}
	for _, par := range parents {
		nq := len(par)
		bits := make([]uint8, (nq*nq+7)/8)
		for i := range nq {
			for t := i; t >= 0; t = par[t] {
				bits[(i*nq+t)/8] |= 1 << ((i*nq + t) % 8)
			}
		}
		tree.Bits = append(tree.Bits, bits...)
		tree.Offsets = append(tree.Offsets, len(tree.Bits))
		cuSeqQ = append(cuSeqQ, cuSeqQ[len(cuSeqQ)-1]+nq)
	}
	fmt.Printf("mask bytes %#x, offsets %v\n", tree.Bits, tree.Offsets)
	kv := attention.PagedKV{K: attention.F32Tensor(k, pool), V: attention.F32Tensor(v, pool), BlockTable: table, MaxBlocks: 4, SeqLens: lens}
	ql := attention.BSHD(1, cuSeqQ[2], 1, d) // [the 7 drafts, 1 head, d]
	q, out := make([]float32, ql.Span()), make([]float32, ql.Span())
	e, _ := attention.NewEngine(attention.Config{})
	err := e.ForwardPagedKV(attention.F32Tensor(out, ql), attention.F32Tensor(q, ql), kv,
		attention.Options{Causal: true, CuSeqQ: cuSeqQ, TreeMask: tree})
	if err != nil {
		fmt.Println(err)
		return
	}
	for s, par := range parents {
		for i := range par {
			fmt.Printf("sequence %d draft %d: mean position %.3f\n", s, i, out[ql.Offset(0, 0, cuSeqQ[s]+i)])
		}
	}
	// Output:
	// mask bytes 0x31b55901, offsets [0 2 4]
	// sequence 0 draft 0: mean position 5.000
	// sequence 0 draft 1: mean position 5.500
	// sequence 0 draft 2: mean position 5.583
	// sequence 0 draft 3: mean position 6.077
	// sequence 1 draft 0: mean position 3.000
	// sequence 1 draft 1: mean position 3.500
	// sequence 1 draft 2: mean position 3.625
}

// A runtime that keeps one block table per sequence, [seqs][W] with the
// shared prompt's blocks in the first columns (vLLM's block_table), hands
// ForwardSharedPrefix views of it instead of copying the suffix tables
// every step: the prefix is the first row's first columns, and the
// suffixes are the column slice after them, table[pb:] with BlockStride W
// (block_table[:, pb:] in PyTorch). The same table serves ForwardPagedKV
// over the whole sequences, which gives the same attention up to the
// order of the sums.
func ExampleEngine_ForwardSharedPrefix_tableView() {
	const seqs, hq, hkv, d, blockSize, numBlocks = 3, 4, 2, 16, 4, 16
	const W = 6  // the table's columns: room for 24 positions a sequence
	const pb = 2 // the prompt: blocks 0 and 1, 8 positions
	pool := attention.BSHD(numBlocks, blockSize, hkv, d)
	kf, vf := make([]float32, pool.Span()), make([]float32, pool.Span())
	for i := range kf { // ... the runtime's cached keys and values ...
		kf[i], vf[i] = float32(i%7)/7, float32(i%5)/5
	}
	k, v := attention.F32Tensor(kf, pool), attention.F32Tensor(vf, pool)
	table := []int32{
		0, 1, 2, 3, -1, -1, // sequence 0: the prompt, then blocks 2 and 3
		0, 1, 4, -1, -1, -1, // sequence 1: the prompt, then block 4
		0, 1, 5, 6, 7, -1, // sequence 2: the prompt, then blocks 5 to 7
	}
	lens := []int32{8 + 6, 8 + 1, 8 + 10} // whole sequences
	suffixLens := make([]int32, seqs)
	for s, n := range lens {
		suffixLens[s] = n - pb*blockSize
	}
	kv := attention.SharedPrefixKV{
		Prefix: attention.PagedKV{K: k, V: v, BlockTable: table, MaxBlocks: pb, SeqLens: []int32{pb * blockSize}},
		Suffix: attention.PagedKV{K: k, V: v, BlockTable: table[pb:], MaxBlocks: W - pb, BlockStride: W, SeqLens: suffixLens},
	}
	e, _ := attention.NewEngine(attention.Config{})
	l := attention.BSHD(seqs, 1, hq, d) // one new token each
	q := make([]float32, l.Span())
	for i := range q {
		q[i] = float32(i%11) / 11
	}
	shared, whole := make([]float32, l.Span()), make([]float32, l.Span())
	opts := attention.Options{Causal: true}
	if err := e.ForwardSharedPrefix(attention.F32Tensor(shared, l), attention.F32Tensor(q, l), kv, opts); err != nil {
		fmt.Println(err)
		return
	}
	all := attention.PagedKV{K: k, V: v, BlockTable: table, MaxBlocks: W, SeqLens: lens}
	if err := e.ForwardPagedKV(attention.F32Tensor(whole, l), attention.F32Tensor(q, l), all, opts); err != nil {
		fmt.Println(err)
		return
	}
	diff := 0.0
	for i := range shared {
		diff = max(diff, math.Abs(float64(shared[i]-whole[i])))
	}
	fmt.Println("max difference below 1e-6:", diff < 1e-6)
	// Output:
	// max difference below 1e-6: true
}

// A decode loop over one shared prompt packs the prompt once (for the
// precision the steps compute in) and hands the panels to every step:
// the steps then read the panels instead of packing the prompt's tiles
// again, with bitwise the same results.
func ExamplePackedPrefix() {
	const seqs, hq, hkv, d, blockSize, numBlocks = 8, 8, 2, 64, 16, 32
	pool := attention.BSHD(numBlocks, blockSize, hkv, d)
	k := attention.F32Tensor(make([]float32, pool.Span()), pool) // ... the runtime's cached keys ...
	v := attention.F32Tensor(make([]float32, pool.Span()), pool) // ... and values ...
	kv := attention.SharedPrefixKV{
		// The prompt: 48 positions in blocks 0 to 2, which no step writes.
		Prefix: attention.PagedKV{K: k, V: v, BlockTable: []int32{0, 1, 2}, MaxBlocks: 3, SeqLens: []int32{48}},
		// Each sample's tokens after the prompt: one block each.
		Suffix: attention.PagedKV{K: k, V: v, BlockTable: []int32{3, 4, 5, 6, 7, 8, 9, 10}, MaxBlocks: 1,
			SeqLens: []int32{1, 1, 1, 1, 1, 1, 1, 1}},
	}
	opts := attention.Options{Causal: true, Precision: attention.PrecisionBFloat16}
	kv.Packed = new(attention.PackedPrefix)
	if err := kv.Packed.Pack(kv.Prefix, opts.Precision); err != nil {
		fmt.Println(err)
		return
	}
	e, _ := attention.NewEngine(attention.Config{})
	q := make([]float32, seqs*hq*d)   // [seqs, 1, Hq, d]: one new token each
	out := make([]float32, seqs*hq*d) // [seqs, 1, Hq, d]
	l := attention.BSHD(seqs, 1, hq, d)
	for step := range 3 {
		// ... the runtime writes each sample's new K/V into its block ...
		for s := range seqs {
			kv.Suffix.SeqLens[s] = int32(step + 1)
		}
		if err := e.ForwardSharedPrefix(attention.F32Tensor(out, l), attention.F32Tensor(q, l), kv, opts); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("three steps, one pack")
	// Output:
	// three steps, one pack
}

// A serving step over one system prompt: three sequences decode a token
// each and a new request prefills its first 24 tokens after the prompt,
// all in one call (Options.CuSeqQ), the prompt's blocks read once for
// every row of the step. Each sequence's suffix is its own blocks after
// the prompt, the new tokens included.
func ExampleEngine_ForwardSharedPrefix_mixedBatch() {
	const hq, hkv, d, blockSize, numBlocks = 8, 2, 64, 16, 32
	pool := attention.BSHD(numBlocks, blockSize, hkv, d)
	k := attention.F32Tensor(make([]float32, pool.Span()), pool) // ... the runtime's cached keys ...
	v := attention.F32Tensor(make([]float32, pool.Span()), pool) // ... and values ...
	kv := attention.SharedPrefixKV{
		// The system prompt: 40 positions in blocks 3, 8 and 1.
		Prefix: attention.PagedKV{K: k, V: v, BlockTable: []int32{3, 8, 1}, MaxBlocks: 3, SeqLens: []int32{40}},
		// Each request's positions after the prompt, two blocks a row.
		Suffix: attention.PagedKV{K: k, V: v, BlockTable: []int32{10, 0, 11, 0, 12, 0, 13, 14}, MaxBlocks: 2,
			SeqLens: []int32{5, 9, 3, 24}},
	}
	newTokens := []int{1, 1, 1, 24}
	cuSeqQ := []int{0}
	for _, n := range newTokens {
		cuSeqQ = append(cuSeqQ, cuSeqQ[len(cuSeqQ)-1]+n)
	}
	totalQ := cuSeqQ[len(newTokens)]
	l := attention.BSHD(1, totalQ, hq, d) // [num_tokens, heads, d], as the projections write them
	q, out := make([]float32, l.Span()), make([]float32, l.Span())
	e, _ := attention.NewEngine(attention.Config{})
	err := e.ForwardSharedPrefix(attention.F32Tensor(out, l), attention.F32Tensor(q, l), kv,
		attention.Options{Causal: true, CuSeqQ: cuSeqQ})
	fmt.Println(totalQ, "query rows:", err)
	// Output:
	// 27 query rows: <nil>
}

// Two system prompts in one step (SharedPrefixKV.Groups): sequences 0 to
// 2 run over the first, 3 and 4 over the second, each prompt read once
// for its group, and each packed once on the engine's threads for the
// whole decode loop (PackedGroups, Engine.PackPrefix). The result of each
// group is bitwise that of its own ForwardSharedPrefix call.
func ExampleEngine_ForwardSharedPrefix_groups() {
	const seqs, hq, hkv, d, blockSize, numBlocks = 5, 8, 2, 64, 16, 32
	pool := attention.BSHD(numBlocks, blockSize, hkv, d)
	k := attention.F32Tensor(make([]float32, pool.Span()), pool) // ... the runtime's cached keys ...
	v := attention.F32Tensor(make([]float32, pool.Span()), pool) // ... and values ...
	kv := attention.SharedPrefixKV{
		// Prompt 0: 48 positions in blocks 0 to 2; prompt 1: 20 in blocks
		// 3 and 4. A table row each.
		Prefix: attention.PagedKV{K: k, V: v, BlockTable: []int32{0, 1, 2, 3, 4, 0}, MaxBlocks: 3, SeqLens: []int32{48, 20}},
		Groups: []int{0, 3, 5},
		Suffix: attention.PagedKV{K: k, V: v, BlockTable: []int32{5, 6, 7, 8, 9}, MaxBlocks: 1, SeqLens: []int32{1, 1, 1, 1, 1}},
	}
	e, _ := attention.NewEngine(attention.Config{})
	opts := attention.Options{Causal: true, Precision: attention.PrecisionBFloat16}
	kv.PackedGroups = make([]*attention.PackedPrefix, 2)
	for g := range kv.PackedGroups {
		kv.PackedGroups[g] = new(attention.PackedPrefix)
		if err := e.PackPrefix(kv.PackedGroups[g], kv.Prefix.Sequence(g), opts.Precision); err != nil {
			fmt.Println(err)
			return
		}
	}
	l := attention.BSHD(seqs, 1, hq, d) // one new token each
	q, out := make([]float32, l.Span()), make([]float32, l.Span())
	for step := range 3 {
		// ... the runtime writes each sequence's new K/V into its block ...
		for s := range seqs {
			kv.Suffix.SeqLens[s] = int32(step + 1)
		}
		if err := e.ForwardSharedPrefix(attention.F32Tensor(out, l), attention.F32Tensor(q, l), kv, opts); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("three steps, two prompts, one pack each")
	// Output:
	// three steps, two prompts, one pack each
}

// PackPrefix packs a prompt on the engine's threads (the same panels as
// PackedPrefix.Pack), and Bytes says what the panels take: for float32,
// 4·Hkv·(d·(⌈n/16⌉·16 + 16) + n·dv) bytes, here 4·2·(64·64 + 48·64) =
// 57344, and 12 more for the copy of the prompt's block table.
func ExampleEngine_PackPrefix() {
	const hkv, d, blockSize, numBlocks = 2, 64, 16, 8
	pool := attention.BSHD(numBlocks, blockSize, hkv, d)
	k := attention.F32Tensor(make([]float32, pool.Span()), pool) // ... the runtime's cached keys ...
	v := attention.F32Tensor(make([]float32, pool.Span()), pool) // ... and values ...
	prompt := attention.PagedKV{K: k, V: v, BlockTable: []int32{0, 1, 2}, MaxBlocks: 3, SeqLens: []int32{48}}
	e, _ := attention.NewEngine(attention.Config{})
	var p attention.PackedPrefix
	if err := e.PackPrefix(&p, prompt, attention.PrecisionFloat32); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Bytes(), "bytes")
	// Output:
	// 57356 bytes
}

// An fp8 cache as vLLM keeps one (kv_cache_dtype fp8_e4m3, a k_scale and a
// v_scale): Append divides each value by the scale and rounds to E4M3FN,
// saturating at ±448; the engine reads x·scale.
func ExampleNewKVCacheFP8() {
	const hkv, d = 1, 4
	cache, err := attention.NewKVCacheFP8(attention.FP8E4M3, hkv, 16, d, []float32{0.5}, []float32{0.5})
	if err != nil {
		panic(err)
	}
	// 1000/0.5 = 2000 saturates to 448 (stored 448·0.5 = 224); 0.3/0.5 =
	// 0.6 rounds to 0.625 (0.3125).
	k := []float32{1, -2, 1000, 0.3}
	row := attention.F32Tensor(k, attention.BHSD(1, hkv, 1, d))
	if err := cache.Append(row, row); err != nil {
		panic(err)
	}
	// One key: the output is its value row.
	e, _ := attention.NewEngine(attention.Config{})
	out := make([]float32, d)
	l := attention.BHSD(1, 1, 1, d)
	if err := e.Forward(attention.F32Tensor(out, l), attention.F32Tensor(make([]float32, d), l), cache.K(), cache.V(), attention.Options{}); err != nil {
		panic(err)
	}
	fmt.Println(out, cache.V().FP8Scales())
	// Output: [1 -2 224 0.3125] [0.5]
}
