package attention_test

import (
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/fp16"
)

// badCall is a call of a public entry point that must fail: it returns an
// error containing want, leaves every buffer of outs as it was (each is
// filled with a sentinel first) and every buffer of ins unmodified, and
// state (when set) reports the same before and after, for the
// bookkeeping of a cache.
type badCall struct {
	name  string
	want  string
	outs  []any // []float32, []int8, ... that the entry point may write
	ins   []any // buffers it only reads (or a cache's storage)
	state func() string
	call  func() error
}

// sentinel is the byte every output buffer is filled with before a bad
// call: as float32 it is −2.9e−16, as int8 −91, nothing a computation
// leaves by chance.
const sentinel = 0xA5

// rawBytes returns the memory behind a slice of one of the element types
// the API takes.
func rawBytes(t testing.TB, x any) []byte {
	t.Helper()
	switch s := x.(type) {
	case []float32:
		return sliceBytes(s)
	case []int8:
		return sliceBytes(s)
	case []fp16.Float16:
		return sliceBytes(s)
	case []fp16.BFloat16:
		return sliceBytes(s)
	case []bool:
		return sliceBytes(s)
	case []int:
		return sliceBytes(s)
	case []attention.SeqID:
		return sliceBytes(s)
	}
	t.Fatalf("rawBytes: unsupported buffer type %T", x)
	return nil
}

func sliceBytes[T any](s []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// checkBadCalls runs each bad call in a subtest and checks the error, the
// outputs, the inputs and the state.
func checkBadCalls(t *testing.T, calls []badCall) {
	t.Helper()
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			for _, o := range c.outs {
				b := rawBytes(t, o)
				for i := range b {
					b[i] = sentinel
				}
			}
			before := make([][]byte, len(c.ins))
			for i, in := range c.ins {
				before[i] = append([]byte(nil), rawBytes(t, in)...)
			}
			var state string
			if c.state != nil {
				state = c.state()
			}
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
						t.Errorf("the call panicked: %v", r)
					}
				}()
				return c.call()
			}()
			require.Error(t, err)
			require.ErrorContains(t, err, c.want)
			for i, o := range c.outs {
				for j, x := range rawBytes(t, o) {
					if x != sentinel {
						t.Fatalf("output %d (%T): byte %d written (error %q)", i, o, j, err)
					}
				}
			}
			for i, in := range c.ins {
				require.Equal(t, before[i], rawBytes(t, in), "input %d (%T) modified", i, in)
			}
			if c.state != nil {
				require.Equal(t, state, c.state(), "state changed")
			}
		})
	}
}

// TestNothingWrittenOnError gives every public entry point that writes
// (Forward, ForwardLSE, the Engine's methods, variable-length batches,
// ForwardPaged, decoding through both caches, Merge, the Q8 conversions)
// calls that must fail, and checks that each returns an error naming the
// problem, writes nothing and modifies no input.
func TestNothingWrittenOnError(t *testing.T) {
	const hq, hkv, nq, nkv, d = 2, 1, 17, 3, 8
	seq := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(i%11)/11 - 0.5
		}
		return x
	}
	qb, kb, vb := seq(hq*nq*d), seq(hkv*nkv*d), seq(hkv*nkv*d)
	ob, lb := make([]float32, hq*nq*d), make([]float32, hq*nq)
	q := attention.F32Tensor(qb, attention.BHSD(1, hq, nq, d))
	k := attention.F32Tensor(kb, attention.BHSD(1, hkv, nkv, d))
	v := attention.F32Tensor(vb, attention.BHSD(1, hkv, nkv, d))
	out := attention.F32Tensor(ob, q.Layout)
	e := mustEngine(t, attention.Config{Threads: 2})
	ins := []any{qb, kb, vb}
	outs := []any{ob, lb}
	fwd := func(name, want string, out attention.Tensor, q, k, v attention.Tensor, opts attention.Options) []badCall {
		return []badCall{
			{name: "Forward/" + name, want: want, outs: outs, ins: ins, call: func() error { return attention.Forward(out, q, k, v, opts) }},
			{name: "Engine.Forward/" + name, want: want, outs: outs, ins: ins, call: func() error { return e.Forward(out, q, k, v, opts) }},
			{name: "Engine.ForwardLSE/" + name, want: want, outs: outs, ins: ins, call: func() error { return e.ForwardLSE(out, lb, q, k, v, opts) }},
		}
	}
	var calls []badCall
	// K/V rows that overlap (SeqStride < Dim with two or more positions),
	// which the kernels cannot read: decided up front, naming the tensor.
	overlapK := attention.F32Tensor(kb, attention.Layout{Batch: 1, Heads: hkv, Seq: nkv, Dim: d, HeadStride: nkv * d})
	overlapV := attention.F32Tensor(vb, attention.Layout{Batch: 1, Heads: hkv, Seq: nkv, Dim: d, HeadStride: nkv * d, SeqStride: d / 2})
	calls = append(calls, fwd("k rows overlap", "k has SeqStride 0 with 3 positions of head dim 8; want SeqStride >= 8", out, q, overlapK, v, attention.Options{Causal: true})...)
	calls = append(calls, fwd("v rows overlap", "v has SeqStride 4 with 3 positions of head dim 8; want SeqStride >= 8", out, q, k, overlapV, attention.Options{Causal: true})...)
	calls = append(calls, fwd("varlen, first sequence empty, k rows overlap", "k has SeqStride 0",
		out, q, overlapK, v, attention.Options{Causal: true, CuSeqQ: []int{0, 0, nq}, CuSeqKV: []int{0, 0, nkv}})...)
	calls = append(calls, fwd("varlen offsets past the end", "Options.CuSeqKV[2] is 4; want Nkv = 3",
		out, q, k, v, attention.Options{CuSeqQ: []int{0, 5, nq}, CuSeqKV: []int{0, 1, 4}})...)
	calls = append(calls, fwd("short q", "q: slice has", out, attention.F32Tensor(qb[:len(qb)-1], q.Layout), k, v, attention.Options{})...)
	calls = append(calls, fwd("out overlaps v", "out overlaps v",
		attention.F32Tensor(vb, attention.BHSD(1, 1, 3, d)), attention.F32Tensor(qb, attention.BHSD(1, 1, 3, d)), k, v, attention.Options{})...)
	calls = append(calls, fwd("huge k", "k: layout",
		out, q, attention.F32Tensor(kb, attention.Layout{Batch: 1, Heads: hkv, Seq: math.MaxInt, Dim: d, SeqStride: 2}), v, attention.Options{})...)
	calls = append(calls, fwd("bad mask", "Options.BoolMask.Data has 3 elements",
		out, q, k, v, attention.Options{BoolMask: attention.BoolMask{Layout: attention.BHSD(1, 1, nq, nkv), Data: make([]bool, 3)}})...)
	calls = append(calls, fwd("bad window", "Options.Window.Left is -3",
		out, q, k, v, attention.Options{Window: &attention.Window{Left: -3}})...)

	// Decoding through a KVCache: bad appends leave the cache as it was,
	// and a bad query leaves the output alone.
	cache, err := attention.NewKVCache(attention.F32, hkv, 4, d)
	require.NoError(t, err)
	require.NoError(t, cache.Append(k, v))
	cacheState := func() string { return fmt.Sprint(cache.Len()) }
	cacheIns := []any{cache.K().Float32s(), cache.V().Float32s(), kb, vb}
	calls = append(calls,
		badCall{name: "KVCache.Append/overflow", want: "want at most 1", ins: cacheIns, state: cacheState, call: func() error {
			big := attention.F32Tensor(kb, attention.Layout{Batch: 1, Heads: hkv, Seq: math.MaxInt, Dim: d})
			return cache.Append(big, big)
		}},
		badCall{name: "KVCache.Append/past capacity", want: "want at most 1", ins: cacheIns, state: cacheState, call: func() error { return cache.Append(k, v) }},
		badCall{name: "KVCache.Append/shape", want: "shape", ins: cacheIns, state: cacheState, call: func() error {
			return cache.Append(q, q)
		}},
		badCall{name: "KVCache.Truncate", want: "0 <= n <= 3", ins: cacheIns, state: cacheState, call: func() error { return cache.Truncate(4) }},
		badCall{name: "KVCache decode/bad q", want: "head dims", outs: outs, ins: append(cacheIns, qb), call: func() error {
			q1 := attention.F32Tensor(qb, attention.BHSD(1, hq, 1, d/2))
			return e.ForwardLSE(attention.F32Tensor(ob, q1.Layout), lb, q1, cache.K(), cache.V(), attention.Options{Causal: true})
		}},
	)

	// Decoding through a PagedCache.
	pc, err := attention.NewPagedCache(attention.F32, hkv, d, 2, 3)
	require.NoError(t, err)
	sa := pc.NewSequence()
	require.NoError(t, pc.Append(sa, k, v))
	sb, err := pc.Fork(sa)
	require.NoError(t, err)
	pk, pv := attention.PagedStorage(pc)
	pagedState := func() string {
		la, _ := pc.Len(sa)
		lb, _ := pc.Len(sb)
		return fmt.Sprint(la, lb, pc.FreeBlocks(), pc.Check())
	}
	pagedIns := []any{pk, pv, kb, vb}
	seqs := []attention.SeqID{sa, sb}
	q2 := attention.F32Tensor(qb[:2*hq*d], attention.BHSD(2, hq, 1, d))
	o2 := attention.F32Tensor(ob[:2*hq*d], q2.Layout)
	calls = append(calls,
		badCall{name: "PagedCache.Append/overflow", want: "free blocks", ins: pagedIns, state: pagedState, call: func() error {
			big := attention.F32Tensor(kb, attention.Layout{Batch: 1, Heads: hkv, Seq: math.MaxInt - 14, Dim: d})
			return pc.Append(sa, big, big)
		}},
		badCall{name: "PagedCache.Append/too few blocks", want: "need 2 free blocks; 1 of 3 are free", ins: pagedIns, state: pagedState, call: func() error {
			return pc.Append(sb, k, v)
		}},
		badCall{name: "PagedCache.Append/unknown", want: "unknown or freed", ins: pagedIns, state: pagedState, call: func() error { return pc.Append(99, k, v) }},
		badCall{name: "PagedCache.Truncate", want: "0 <= n <= 3", ins: pagedIns, state: pagedState, call: func() error { return pc.Truncate(sa, 5) }},
		badCall{name: "PagedCache.Fork", want: "unknown or freed", ins: pagedIns, state: pagedState, call: func() error { _, err := pc.Fork(99); return err }},
		badCall{name: "PagedCache.Free", want: "unknown or freed", ins: pagedIns, state: pagedState, call: func() error { return pc.Free(99) }},
		badCall{name: "ForwardPaged/unknown sequence", want: "seqs[1] is 99", outs: outs, ins: append(pagedIns, qb), state: pagedState, call: func() error {
			return e.ForwardPaged(o2, q2, pc, []attention.SeqID{sa, 99}, attention.Options{Causal: true})
		}},
		badCall{name: "ForwardPaged/mask", want: "Options.Mask and Options.BoolMask are not supported", outs: outs, ins: append(pagedIns, qb), state: pagedState, call: func() error {
			return e.ForwardPaged(o2, q2, pc, seqs, attention.Options{BoolMask: attention.BoolMask{Layout: attention.BHSD(1, 1, 1, 3), Data: make([]bool, 3)}})
		}},
		badCall{name: "ForwardPagedLSE/short lse", want: "lse has 3 elements; want >= B·Hq·Nq = 4", outs: outs, ins: append(pagedIns, qb), state: pagedState, call: func() error {
			return e.ForwardPagedLSE(o2, lb[:3], q2, pc, seqs, attention.Options{})
		}},
		badCall{name: "ForwardPaged/bad option", want: "Options.Sinks has 1 elements", outs: outs, ins: append(pagedIns, qb), state: pagedState, call: func() error {
			return e.ForwardPaged(o2, q2, pc, seqs, attention.Options{Sinks: []float32{0}})
		}},
	)
	// Per-sequence query counts: q packs both sequences' queries, [1, Hq, 4, d].
	qp := attention.F32Tensor(qb[:4*hq*d], attention.BHSD(1, hq, 4, d))
	op := attention.F32Tensor(ob[:4*hq*d], qp.Layout)
	cuIns := func(cu []int) []any { return append(pagedIns, qb, cu) }
	for _, c := range []struct {
		name, want string
		cu         []int
		q          attention.Tensor
	}{
		{"offsets past the end", "Options.CuSeqQ[2] is 5; want Nq = 4", []int{0, 1, 5}, qp},
		{"decreasing offsets", "Options.CuSeqQ[2] is 0, less than CuSeqQ[1] = 4", []int{0, 4, 0, 4}, qp},
		{"sequence count", "Options.CuSeqQ has 4 offsets (3 sequences) and seqs 2 sequences", []int{0, 1, 2, 4}, qp},
		{"batch", "q has batch 2 with Options.CuSeqQ set; want 1", []int{0, 1, 2}, q2},
	} {
		cu := c.cu
		calls = append(calls, badCall{name: "ForwardPaged/CuSeqQ " + c.name, want: c.want, outs: outs, ins: cuIns(cu), state: pagedState, call: func() error {
			out := op
			if c.q.Batch != 1 {
				out = o2
			}
			return e.ForwardPagedLSE(out, lb, c.q, pc, seqs, attention.Options{Causal: true, CuSeqQ: cu})
		}})
	}

	// Merge.
	ab, bb := seq(hq*nq*d), seq(hq*nq*d)
	la, lbb := seq(hq*nq), seq(hq*nq)
	a := attention.F32Tensor(ab, q.Layout)
	b := attention.F32Tensor(bb, q.Layout)
	mergeIns := []any{ab, bb, la, lbb}
	calls = append(calls,
		badCall{name: "Merge/shape", want: "b has shape", outs: outs, ins: mergeIns, call: func() error {
			return attention.Merge(out, lb, a, la, attention.F32Tensor(bb, attention.BHSD(1, hq, nq-1, d)), lbb)
		}},
		badCall{name: "Merge/short lseB", want: "lseB has 5 elements", outs: outs, ins: mergeIns, call: func() error {
			return attention.Merge(out, lb, a, la, b, lbb[:5])
		}},
		badCall{name: "Merge/out overlaps b", want: "out overlaps b", outs: outs, ins: mergeIns, call: func() error {
			return attention.Merge(b, lb, a, la, b, lbb)
		}},
	)

	// The Q8 conversions.
	q8, sc := make([]int8, 64), make([]float32, 2)
	src := seq(64)
	calls = append(calls,
		badCall{name: "QuantizeQ8", want: "2 scales; want >= 3", outs: []any{q8, sc}, ins: []any{src}, call: func() error {
			return attention.QuantizeQ8(make([]int8, 96), sc, seq(96))
		}},
		badCall{name: "DequantizeQ8", want: "dst has room for 64 values; want >= 96", outs: []any{src}, ins: []any{q8, sc}, call: func() error {
			return attention.DequantizeQ8(src, make([]int8, 96), make([]float32, 3))
		}},
	)
	checkBadCalls(t, calls)
}

// TestSingleRowKVStrides checks that K and V of one position whose Layout
// leaves the strides at 0 (which Validate accepts: a stride that steps
// nowhere) work as the dense layout does, plain and in a variable-length
// batch whose first sequence is empty. They used to fail in the kernel
// after the rows that see no key had been written.
func TestSingleRowKVStrides(t *testing.T) {
	const nq, d = 17, 8
	qb := make([]float32, nq*d)
	for i := range qb {
		qb[i] = float32(i%5) - 2
	}
	kb, vb := []float32{1, 2, 3, 4, 5, 6, 7, 8}, []float32{8, 7, 6, 5, 4, 3, 2, 1}
	q := attention.F32Tensor(qb, attention.BHSD(1, 1, nq, d))
	zero := attention.Layout{Batch: 1, Heads: 1, Seq: 1, Dim: d}
	for _, opts := range []attention.Options{
		{Causal: true},
		{},
		{Causal: true, CuSeqQ: []int{0, 0, nq}, CuSeqKV: []int{0, 0, 1}},
		{Causal: true, CuSeqQ: []int{0, 3, nq}, CuSeqKV: []int{0, 0, 1}},
	} {
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			opts.Precision = prec
			want, got := make([]float32, nq*d), make([]float32, nq*d)
			wantLSE, gotLSE := make([]float32, nq), make([]float32, nq)
			dense := attention.BHSD(1, 1, 1, d)
			require.NoError(t, attention.Forward(attention.F32Tensor(want, q.Layout), q, attention.F32Tensor(kb, dense), attention.F32Tensor(vb, dense), opts))
			e := mustEngine(t, attention.Config{})
			require.NoError(t, e.ForwardLSE(attention.F32Tensor(want, q.Layout), wantLSE, q, attention.F32Tensor(kb, dense), attention.F32Tensor(vb, dense), opts))
			require.NoError(t, e.ForwardLSE(attention.F32Tensor(got, q.Layout), gotLSE, q, attention.F32Tensor(kb, zero), attention.F32Tensor(vb, zero), opts), "%+v", opts)
			require.Equal(t, want, got, "%+v", opts)
			require.Equal(t, wantLSE, gotLSE, "%+v", opts)
			if opts.Causal && opts.CuSeqQ == nil {
				require.Equal(t, make([]float32, (nq-1)*d), got[:(nq-1)*d], "rows that see no key are zero")
				require.Equal(t, vb, got[(nq-1)*d:], "the last row sees the one key")
			}
		}
	}
	// A Q8 view of one position with zero strides, through the row kernels.
	q8 := make([]int8, 32)
	sc := make([]float32, 1)
	x := make([]float32, 32)
	for i := range x {
		x[i] = float32(i) / 8
	}
	require.NoError(t, attention.QuantizeQ8(q8, sc, x))
	q32 := attention.F32Tensor(make([]float32, 2*32), attention.BHSD(1, 2, 1, 32))
	o1, o2 := make([]float32, 64), make([]float32, 64)
	require.NoError(t, attention.Forward(attention.F32Tensor(o1, q32.Layout), q32,
		attention.Q8Tensor(q8, sc, attention.BHSD(1, 1, 1, 32)), attention.Q8Tensor(q8, sc, attention.BHSD(1, 1, 1, 32)), attention.Options{}))
	require.NoError(t, attention.Forward(attention.F32Tensor(o2, q32.Layout), q32,
		attention.Q8Tensor(q8, sc, attention.Layout{Batch: 1, Heads: 1, Seq: 1, Dim: 32}), attention.Q8Tensor(q8, sc, attention.Layout{Batch: 1, Heads: 1, Seq: 1, Dim: 32}), attention.Options{}))
	require.Equal(t, o1, o2)
}
