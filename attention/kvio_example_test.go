package attention_test

import (
	"fmt"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/fp16"
)

// A serving step over pools the runtime owns, as vLLM runs one: the
// step's new keys and values, [tokens, Hkv, d] as the projection wrote
// them, go into the fp16 pools at the slots of each sequence's newest
// positions (reshape_and_cache with a slot_mapping), and the same call's
// queries attend to the pools in place.
func ExamplePagedKV_Write() {
	const hq, hkv, d, blockSize, numBlocks, maxBlocks = 8, 2, 64, 16, 32, 4
	pool := attention.BSHD(numBlocks, blockSize, hkv, d) // [numBlocks, blockSize, Hkv, d]
	kv := attention.PagedKV{
		K: attention.F16Tensor(make([]fp16.Float16, pool.Span()), pool),
		V: attention.F16Tensor(make([]fp16.Float16, pool.Span()), pool),
		BlockTable: []int32{
			7, 3, 0, 0, // sequence 0: blocks 7 then 3
			9, 12, 30, 0, // sequence 1
		},
		MaxBlocks: maxBlocks,
		SeqLens:   []int32{17, 3}, // the new tokens included
	}
	// Sequence 0 decodes one token (position 16); sequence 1 prefills its
	// first three.
	cuSeqQ := []int{0, 1, 4}
	const tokens = 4
	slots := make([]int32, tokens)
	if err := kv.SlotMapping(slots, cuSeqQ); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("slots:", slots)

	rows := attention.BSHD(1, tokens, hkv, d) // [tokens, Hkv, d]
	k, v := make([]float32, rows.Span()), make([]float32, rows.Span())
	for i := range k {
		k[i], v[i] = float32(i%7)/8, float32(i%5)/4 // ... the projection's output ...
	}
	err := kv.Write(attention.F32Tensor(k, rows), attention.F32Tensor(v, rows), slots)
	fmt.Println("write:", err)

	e, _ := attention.NewEngine(attention.Config{})
	q := make([]float32, tokens*hq*d) // [tokens, Hq, d]
	out := make([]float32, tokens*hq*d)
	ql := attention.BSHD(1, tokens, hq, d)
	err = e.ForwardPagedKV(attention.F32Tensor(out, ql), attention.F32Tensor(q, ql), kv, attention.Options{Causal: true, CuSeqQ: cuSeqQ})
	fmt.Println("attention:", err)

	// Two tokens on one slot is an error, and nothing is written.
	fmt.Println(kv.Write(attention.F32Tensor(k, rows), attention.F32Tensor(v, rows), []int32{48, 144, 145, 48}))
	// Output:
	// slots: [48 144 145 146]
	// write: <nil>
	// attention: <nil>
	// attention: PagedKV.Write: slots[0] and slots[3] are both slot 48; want each slot at most once (two tokens cannot share a position)
}

// A sequence swapped out to host memory and back: Read in the cache's
// own type copies the stored elements (here Q8 values with their block
// scales), and Append of them into a fresh cache restores the same bits.
// Read in F32 gives the values attention reads.
func ExampleKVCache_Read() {
	const hkv, d, n = 2, 32, 5
	c, _ := attention.NewKVCache(attention.Q8, hkv, 64, d)
	rows := attention.BSHD(1, n, hkv, d)
	k, v := make([]float32, rows.Span()), make([]float32, rows.Span())
	for i := range k {
		k[i], v[i] = float32(i%9)-4, float32(i%11)/10
	}
	_ = c.Append(attention.F32Tensor(k, rows), attention.F32Tensor(v, rows))

	// Out: the stored int8 values and their scales.
	saved := attention.BHSD(1, hkv, n, d)
	sk, sks := make([]int8, saved.Span()), make([]float32, saved.Span()/attention.Q8Block)
	sv, svs := make([]int8, saved.Span()), make([]float32, saved.Span()/attention.Q8Block)
	err := c.Read(attention.Q8Tensor(sk, sks, saved), attention.Q8Tensor(sv, svs, saved), 0)
	fmt.Println("read:", err)

	// In: a fresh cache, bit for bit the same.
	back, _ := attention.NewKVCache(attention.Q8, hkv, 64, d)
	err = back.Append(attention.Q8Tensor(sk, sks, saved), attention.Q8Tensor(sv, svs, saved))
	fmt.Println("append:", err, back.Len())

	// The values attention reads, position 2 of head 0: its keys rounded
	// to Q8 (a block's largest |x|, 4 here, is 127 steps).
	f := attention.BHSD(1, hkv, 1, d)
	fk, fv := make([]float32, f.Span()), make([]float32, f.Span())
	_ = back.Read(attention.F32Tensor(fk, f), attention.F32Tensor(fv, f), 2)
	fmt.Println(fk[:4], k[rows.Offset(0, 0, 2):][:4])
	fmt.Println(c.Read(attention.F32Tensor(fk, f), attention.F32Tensor(fv, f), 5))
	// Output:
	// read: <nil>
	// append: <nil> 5
	// [-2.015748 -1.007874 0 1.007874] [-2 -1 0 1]
	// attention: KVCache.Read: 1 positions from 5 of 5; want from + n <= 5
}
