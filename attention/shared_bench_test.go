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
	k, v := make([]fp16.Float16, l.Span()), make([]fp16.Float16, l.Span())
	for i := range k {
		k[i], v[i] = fp16.FromFloat32(float32(rng.NormFloat64())), fp16.FromFloat32(float32(rng.NormFloat64()))
	}
	K, V := attention.F16Tensor(k, l), attention.F16Tensor(v, l)
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
