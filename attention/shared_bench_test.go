package attention_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/fp16"
)

// BenchmarkSharedPrefix times one decode step of 16 sequences that share
// an 8192-position prefix and have 256 positions of their own (Hq 32,
// Hkv 8, d 128, f16 pools of 16-position blocks): ForwardSharedPrefix
// ("shared"), the same with the prefix packed once beforehand for the
// precision (SharedPrefixKV.Packed, "packed"), against ForwardPagedKV over each whole sequence, the prefix's blocks
// listed in every table ("unshared"), on one thread and on all.
func BenchmarkSharedPrefix(b *testing.B) {
	const seqs, prefix, own, hq, hkv, d, bs = 16, 8192, 256, 32, 8, 128, 16
	pb, ob := prefix/bs, own/bs
	nBlocks := pb + seqs*ob
	l := attention.BSHD(nBlocks, bs, hkv, d)
	rng := rand.New(rand.NewPCG(1, 2))
	K, V := attention.F16Tensor(fp16.Float16s(randn(rng, l.Span())), l), attention.F16Tensor(fp16.Float16s(randn(rng, l.Span())), l)
	pt := make([]int32, pb)
	for i := range pt {
		pt[i] = int32(i)
	}
	st := make([]int32, seqs*ob)
	whole := make([]int32, seqs*(pb+ob))
	sl, wl := make([]int32, seqs), make([]int32, seqs)
	for s := range seqs {
		for i := range ob {
			st[s*ob+i] = int32(pb + s*ob + i)
		}
		copy(whole[s*(pb+ob):], pt)
		copy(whole[s*(pb+ob)+pb:], st[s*ob:][:ob])
		sl[s], wl[s] = own, prefix+own
	}
	shared := attention.SharedPrefixKV{
		Prefix: attention.PagedKV{K: K, V: V, BlockTable: pt, MaxBlocks: pb, SeqLens: []int32{prefix}},
		Suffix: attention.PagedKV{K: K, V: V, BlockTable: st, MaxBlocks: ob, SeqLens: sl},
	}
	unshared := attention.PagedKV{K: K, V: V, BlockTable: whole, MaxBlocks: pb + ob, SeqLens: wl}
	ql := attention.BHSD(seqs, hq, 1, d)
	q, out := randn(rng, ql.Span()), make([]float32, ql.Span())
	packed := map[attention.Precision]attention.SharedPrefixKV{}
	for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
		kv := shared
		kv.Packed = new(attention.PackedPrefix)
		if err := kv.Packed.Pack(shared.Prefix, prec); err != nil {
			b.Fatal(err)
		}
		packed[prec] = kv
	}
	for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
		for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
			benchShared(b, prec, threads, q, out, ql, shared, packed[prec], unshared)
		}
	}
}

func benchShared(b *testing.B, prec attention.Precision, threads int, q, out []float32, ql attention.Layout, shared, packed attention.SharedPrefixKV, unshared attention.PagedKV) {
	opts := attention.Options{Causal: true, Precision: prec}
	e := mustEngine(b, attention.Config{Threads: threads})
	{
		for _, c := range []struct {
			name string
			kv   attention.SharedPrefixKV
		}{{"shared", shared}, {"packed", packed}} {
			b.Run(fmt.Sprintf("%v/%s/threads=%d", prec, c.name, threads), func(b *testing.B) {
				for b.Loop() {
					if err := e.ForwardSharedPrefix(attention.F32Tensor(out, ql), attention.F32Tensor(q, ql), c.kv, opts); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("%v/unshared/threads=%d", prec, threads), func(b *testing.B) {
			for b.Loop() {
				if err := e.ForwardPagedKV(attention.F32Tensor(out, ql), attention.F32Tensor(q, ql), unshared, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPackPrefix times packing an 8192-position prefix (Hkv 8, d
// 128, f16 pools of 16-position blocks: a layer of Llama 3 8B) into the
// panels of each precision, again into the memory of an earlier pack (what
// a runtime pays per new prefix once its PackedPrefix is warm):
// PackedPrefix.Pack on the calling goroutine, and Engine.PackPrefix on
// 1, 2, 4, 8 and GOMAXPROCS threads.
func BenchmarkPackPrefix(b *testing.B) {
	const prefix, hkv, d, bs = 8192, 8, 128, 16
	nb := prefix / bs
	l := attention.BSHD(nb, bs, hkv, d)
	rng := rand.New(rand.NewPCG(3, 4))
	table := make([]int32, nb)
	for i := range table {
		table[i] = int32(i)
	}
	kv := attention.PagedKV{K: attention.F16Tensor(fp16.Float16s(randn(rng, l.Span())), l), V: attention.F16Tensor(fp16.Float16s(randn(rng, l.Span())), l), BlockTable: table, MaxBlocks: nb, SeqLens: []int32{prefix}}
	for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
		var p attention.PackedPrefix
		if err := p.Pack(kv, prec); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("%v/Pack", prec), func(b *testing.B) {
			b.SetBytes(int64(p.Bytes()))
			for b.Loop() {
				if err := p.Pack(kv, prec); err != nil {
					b.Fatal(err)
				}
			}
		})
		threads := []int{1, 2, 4, 8}
		if n := runtime.GOMAXPROCS(0); n > 8 {
			threads = append(threads, n)
		}
		for _, th := range threads {
			e := mustEngine(b, attention.Config{Threads: th})
			b.Run(fmt.Sprintf("%v/PackPrefix/threads=%d", prec, th), func(b *testing.B) {
				b.SetBytes(int64(p.Bytes()))
				for b.Loop() {
					if err := e.PackPrefix(&p, kv, prec); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSharedPrefixMixed times a serving step over one 8192-position
// prompt (Hq 32, Hkv 8, d 128, f16 pools of 16-position blocks, bf16
// precision, the prompt packed): 16 sequences decode a token each (256
// positions of their own) and one request prefills a chunk of 512 after
// the prompt, in one call (Options.CuSeqQ, "one call") and as the two
// calls the step took before (the decodes, then the chunk: "two calls").
func BenchmarkSharedPrefixMixed(b *testing.B) {
	const seqs, prefix, own, chunk, hq, hkv, d, bs = 16, 8192, 256, 512, 32, 8, 128, 16
	pb, ob, cb := prefix/bs, own/bs, chunk/bs
	nBlocks := pb + seqs*ob + cb
	l := attention.BSHD(nBlocks, bs, hkv, d)
	rng := rand.New(rand.NewPCG(5, 6))
	K, V := attention.F16Tensor(fp16.Float16s(randn(rng, l.Span())), l), attention.F16Tensor(fp16.Float16s(randn(rng, l.Span())), l)
	pt := make([]int32, pb)
	for i := range pt {
		pt[i] = int32(i)
	}
	// Suffix rows of cb blocks: the decodes use ob of theirs.
	st := make([]int32, (seqs+1)*cb)
	lens := make([]int32, seqs+1)
	next := int32(pb)
	for s := range seqs + 1 {
		n := ob
		lens[s] = own
		if s == seqs {
			n, lens[s] = cb, chunk
		}
		for i := range n {
			st[s*cb+i] = next
			next++
		}
	}
	prec := attention.PrecisionBFloat16
	all := attention.SharedPrefixKV{
		Prefix: attention.PagedKV{K: K, V: V, BlockTable: pt, MaxBlocks: pb, SeqLens: []int32{prefix}},
		Suffix: attention.PagedKV{K: K, V: V, BlockTable: st, MaxBlocks: cb, SeqLens: lens},
		Packed: new(attention.PackedPrefix),
	}
	if err := all.Packed.Pack(all.Prefix, prec); err != nil {
		b.Fatal(err)
	}
	decodes, prefill := all, all
	decodes.Suffix.SeqLens = lens[:seqs]
	prefill.Suffix.BlockTable, prefill.Suffix.SeqLens = st[seqs*cb:], lens[seqs:]
	nqs := make([]int, seqs+1)
	for s := range nqs {
		nqs[s] = 1
	}
	nqs[seqs] = chunk
	cu := offsets(nqs)
	total := cu[seqs+1]
	ql := attention.BSHD(1, total, hq, d) // the decodes' rows first, then the chunk's
	q, out := randn(rng, ql.Span()), make([]float32, ql.Span())
	dl, pl := attention.BSHD(seqs, 1, hq, d), attention.BSHD(1, chunk, hq, d)
	for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
		e := mustEngine(b, attention.Config{Threads: threads})
		b.Run(fmt.Sprintf("one call/threads=%d", threads), func(b *testing.B) {
			opts := attention.Options{Causal: true, Precision: prec, CuSeqQ: cu}
			for b.Loop() {
				if err := e.ForwardSharedPrefix(attention.F32Tensor(out, ql), attention.F32Tensor(q, ql), all, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("two calls/threads=%d", threads), func(b *testing.B) {
			opts := attention.Options{Causal: true, Precision: prec}
			off := ql.Offset(0, 0, seqs)
			for b.Loop() {
				if err := e.ForwardSharedPrefix(attention.F32Tensor(out, dl), attention.F32Tensor(q, dl), decodes, opts); err != nil {
					b.Fatal(err)
				}
				if err := e.ForwardSharedPrefix(attention.F32Tensor(out[off:], pl), attention.F32Tensor(q[off:], pl), prefill, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
