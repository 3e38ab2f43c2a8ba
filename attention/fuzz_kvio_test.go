package attention_test

import (
	"bytes"
	"math"
	"slices"
	"testing"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/fp16"
	registry "github.com/flashgo/flashgo/internal/impl"
	"github.com/flashgo/flashgo/kernel"
)

// fuzzStore is a K/V store of one element type held as its typed slice,
// for FuzzPagedKVWrite's model of what a write or a read must leave: the
// rows are set with the scalar conversions (fp16's, and QuantizeQ8's Go
// loop at the generic level), never through storeRow.
type fuzzStore struct {
	dt   attention.DType
	l    attention.Layout
	f32  []float32
	f16  []fp16.Float16
	bf16 []fp16.BFloat16
	i8   []int8
	q8s  []float32
	e4   []fp16.Float8E4M3
	e5   []fp16.Float8E5M2
	sc   []float32 // fp8: one scale per tensor or per head
}

// newFuzzStore returns a store of layout l holding x (a value per element
// of the span) as type dt stores it, with the fp8 scales sc.
func newFuzzStore(dt attention.DType, l attention.Layout, sc []float32, x []float32) *fuzzStore {
	n := l.Span()
	s := &fuzzStore{dt: dt, l: l, sc: sc}
	switch dt {
	case attention.F32:
		s.f32 = slices.Clone(x[:n])
	case attention.F16:
		s.f16 = fp16.Float16s(x[:n])
	case attention.BF16:
		s.bf16 = fp16.BFloat16s(x[:n])
	case attention.Q8:
		s.i8, s.q8s = make([]int8, n), make([]float32, n/attention.Q8Block)
		quantizeQ8Generic(s.i8, s.q8s, x[:n])
	case attention.FP8E4M3:
		s.e4 = make([]fp16.Float8E4M3, n)
	case attention.FP8E5M2:
		s.e5 = make([]fp16.Float8E5M2, n)
	}
	if dt == attention.FP8E4M3 || dt == attention.FP8E5M2 {
		for i := range n {
			s.set(i, s.scale(0), x[i]) // every head: x is only fill
		}
	}
	return s
}

// quantizeQ8Generic is attention.QuantizeQ8 at the generic level: the Go
// loop the vector kernels are held to.
func quantizeQ8Generic(q []int8, s []float32, x []float32) {
	restore, err := registry.Select(registry.Kernel, kernel.Generic)
	if err != nil {
		panic(err)
	}
	defer restore()
	if err := attention.QuantizeQ8(q, s, x); err != nil {
		panic(err)
	}
}

func (s *fuzzStore) scale(h int) float32 { return s.sc[min(h, len(s.sc)-1)] }

// set stores the value x at element e as an fp8 element of scale sc.
func (s *fuzzStore) set(e int, sc, x float32) {
	switch s.dt {
	case attention.FP8E4M3:
		s.e4[e] = fp16.Float8E4M3FromFloat32(x / sc)
	case attention.FP8E5M2:
		s.e5[e] = fp16.Float8E5M2FromFloat32(x / sc)
	}
}

func (s *fuzzStore) tensor() attention.Tensor {
	switch s.dt {
	case attention.F16:
		return attention.F16Tensor(s.f16, s.l)
	case attention.BF16:
		return attention.BF16Tensor(s.bf16, s.l)
	case attention.Q8:
		return attention.Q8Tensor(s.i8, s.q8s, s.l)
	case attention.FP8E4M3:
		return attention.FP8E4M3Tensor(s.e4, s.sc, s.l)
	case attention.FP8E5M2:
		return attention.FP8E5M2Tensor(s.e5, s.sc, s.l)
	}
	return attention.F32Tensor(s.f32, s.l)
}

func (s *fuzzStore) clone() *fuzzStore {
	c := *s
	c.f32, c.f16, c.bf16, c.i8, c.q8s = slices.Clone(s.f32), slices.Clone(s.f16), slices.Clone(s.bf16), slices.Clone(s.i8), slices.Clone(s.q8s)
	c.e4, c.e5 = slices.Clone(s.e4), slices.Clone(s.e5)
	return &c
}

// value is the float32 value of element e of head h, as the engine reads
// it.
func (s *fuzzStore) value(e, h int) float32 {
	switch s.dt {
	case attention.F16:
		return s.f16[e].Float32()
	case attention.BF16:
		return s.bf16[e].Float32()
	case attention.Q8:
		return float32(s.i8[e]) * s.q8s[e/attention.Q8Block]
	case attention.FP8E4M3:
		return s.e4[e].Float32() * s.scale(h)
	case attention.FP8E5M2:
		return s.e5[e].Float32() * s.scale(h)
	}
	return s.f32[e]
}

// store sets row (doff, head h) of s to d elements of src's row (soff,
// head h) as a write or a read must: copied where the types agree (for
// fp8, and the scales of the head), else widened exactly and rounded by
// the scalar conversion of s's type.
func (s *fuzzStore) store(doff, h int, src *fuzzStore, soff, d int) {
	if src.dt == s.dt && (s.sc == nil || src.scale(h) == s.scale(h)) {
		switch s.dt {
		case attention.F32:
			copy(s.f32[doff:doff+d], src.f32[soff:])
		case attention.F16:
			copy(s.f16[doff:doff+d], src.f16[soff:])
		case attention.BF16:
			copy(s.bf16[doff:doff+d], src.bf16[soff:])
		case attention.Q8:
			copy(s.i8[doff:doff+d], src.i8[soff:])
			copy(s.q8s[doff/attention.Q8Block:(doff+d)/attention.Q8Block], src.q8s[soff/attention.Q8Block:])
		case attention.FP8E4M3:
			copy(s.e4[doff:doff+d], src.e4[soff:])
		case attention.FP8E5M2:
			copy(s.e5[doff:doff+d], src.e5[soff:])
		}
		return
	}
	x := make([]float32, d)
	for c := range x {
		x[c] = src.value(soff+c, h)
	}
	switch s.dt {
	case attention.F32:
		copy(s.f32[doff:], x)
	case attention.F16:
		fp16.EncodeFloat16(s.f16[doff:doff+d], x)
	case attention.BF16:
		fp16.EncodeBFloat16(s.bf16[doff:doff+d], x)
	case attention.Q8:
		quantizeQ8Generic(s.i8[doff:doff+d], s.q8s[doff/attention.Q8Block:(doff+d)/attention.Q8Block], x)
	default:
		for c, v := range x {
			s.set(doff+c, s.scale(h), v)
		}
	}
}

// fuzzValues returns n values: normal ones of the magnitudes of K and V
// rows, and now and then zeros, subnormals, huge values, ±Inf and NaN.
func fuzzValues(r *fuzzReader, n int, specials bool) []float32 {
	x := randn(r.rng, n)
	if !specials {
		return x
	}
	odd := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -3e-39, 1e30, -6e4, 500, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for i := range x {
		if r.rng.IntN(6) == 0 {
			x[i] = odd[r.rng.IntN(len(odd))]
		}
	}
	return x
}

// writeScales are the fp8 scales FuzzPagedKVWrite draws.
var writeScales = []float32{1, 0.02, 0.5, 3.5, 0.0003}

// FuzzPagedKVWrite decodes from the input caller-owned pools (every
// storage type, vLLM's layout or per head, fp8 scales per pool or per
// head), new rows (float32, binary16, bfloat16 or the pools' own type, fp8
// of the pools' scale or another; [tokens, heads, dim] or per head,
// values with zeros, subnormals, huge values, ±Inf and NaN now and then)
// and slots: the slots SlotMapping gives for a block table, lengths and
// query offsets drawn from the input (hostile ones included: a block id
// out of range, a length past the table or negative, offsets that do
// not fit), or slots drawn directly, −1, out of range and repeated ones
// included. A call that fails writes nothing: SlotMapping's destination
// and every byte of the pools are unchanged. A Write that succeeds leaves
// in each slot's row of every head the bits of the scalar conversions
// (fp16's; QuantizeQ8's Go loop; fp8 values divided by the pool's scale
// of the head, or copied where the scales agree) and every other byte of
// the pools as it was. Last, the same rows appended to a KVCache of the
// pools' type and scales are read back (KVCache.Read, from a position the
// input draws, possibly past the end) into float32, binary16, bfloat16 or
// the cache's own type: an error writes nothing, a success gives the
// model's values, rounded by fp16's conversions for binary16 and
// bfloat16, or the stored elements themselves.
func FuzzPagedKVWrite(f *testing.F) {
	f.Add([]byte{})
	// Eight seed bytes, then: pool type, input type, heads, dim, block
	// size, blocks, pool layout, fp8 scales (per head?, K scale, V scale,
	// the input's scale), row layout, tokens, specials, slot mode, ...
	f.Add([]byte("writef16\x01\x00\x01\x05\x02\x03\x00\x00\x00\x00\x00\x00\x01\x04\x01\x01\x01\x02\x03\x00\x01\x04"))
	f.Add([]byte("writeq8.\x03\x02\x01\x00\x01\x02\x01\x00\x00\x00\x00\x00\x00\x03\x01\x01\x05\x00\x07\x02\x03"))
	f.Add([]byte("writee4.\x04\x00\x02\x07\x03\x04\x00\x01\x01\x02\x03\x00\x01\x05\x01\x00\x02\x01\x00\x01\x03\x02\x00"))
	f.Add([]byte("writee5.\x05\x03\x01\x09\x01\x02\x01\x00\x04\x04\x02\x01\x00\x03\x01\x01\x01\x00\x02\x04\x01"))
	f.Add([]byte("slotmap.\x00\x01\x01\x03\x02\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x02\x03\x00\x01\x02\x03\x05\x02\x01\x02"))
	f.Add([]byte("hostile.\x02\x01\x00\x02\x01\x02\x00\x00\x00\x00\x00\x01\x04\x00\x02\x07\x07\x01\x03\x09\x00"))
	// A serving step through SlotMapping: two sequences of 5 and 3
	// positions in blocks of 2 (table rows 3 1 0 and 2 1), 2 and 1 new
	// tokens (slots 3, 0, 2), then all 3 read back into float32 (f16
	// pools from float32 rows; E4M3 pools per head from bfloat16 rows,
	// per head, read into binary16; Q8 pools of dim 32 from binary16 rows,
	// read into Q8).
	step := func(head string, read string) []byte {
		return []byte("stepstep" + head + "\x01\x03\x01\x00\x01\x03\x00\x04\x02\x01\x03\x02\x04\x05\x00\x02\x03\x00\x01\x01" + read)
	}
	f.Add(step("\x01\x00\x01\x07\x01\x03\x00\x00\x00\x00\x00", "\x00\x01\x03\x00"))
	f.Add(step("\x04\x02\x01\x07\x01\x03\x01\x01\x01\x02\x03\x00", "\x01\x01\x03\x01"))
	f.Add(step("\x03\x01\x01\x00\x00\x01\x03\x00\x00\x00\x00\x00", "\x03\x01\x03\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newFuzzReader(data)
		dt := fuzzKVType[r.intn(len(fuzzKVType))]
		in := []attention.DType{attention.F32, attention.F16, attention.BF16, dt}[r.intn(4)]
		hkv, d := 1+r.intn(3), 1+r.intn(40)
		if dt == attention.Q8 {
			d = attention.Q8Block * (1 + r.intn(2))
		}
		bs, blocks := 1+r.intn(4), 1+r.intn(6)
		pl := attention.BSHD(blocks, bs, hkv, d)
		if r.bool() {
			pl = attention.BHSD(blocks, hkv, bs, d)
		}
		var ks, vs, is []float32
		perHead, k0, v0, i0 := r.bool(), r.intn(len(writeScales)), r.intn(len(writeScales)), r.intn(len(writeScales))
		if dt == attention.FP8E4M3 || dt == attention.FP8E5M2 {
			ks, vs, is = []float32{writeScales[k0]}, []float32{writeScales[v0]}, []float32{writeScales[i0]}
			if perHead {
				for h := 1; h < hkv; h++ {
					ks = append(ks, writeScales[(k0+h)%len(writeScales)])
					vs = append(vs, writeScales[(v0+2*h)%len(writeScales)])
					is = append(is, writeScales[(i0+h)%len(writeScales)])
				}
			}
			if r.bool() {
				is = ks // the input in the pool's scales: copied
			}
		}
		K := newFuzzStore(dt, pl, ks, randn(r.rng, pl.Span()))
		V := newFuzzStore(dt, pl, vs, randn(r.rng, pl.Span()))
		rowsBSHD, n, specials := r.bool(), r.intn(7), r.bool()
		il := attention.BHSD(1, hkv, n, d)
		if rowsBSHD {
			il = attention.BSHD(1, n, hkv, d)
		}
		var inScales []float32
		if in == dt {
			inScales = is
		}
		kIn := newFuzzStore(in, il, inScales, fuzzValues(r, il.Span(), specials))
		vIn := newFuzzStore(in, il, inScales, fuzzValues(r, il.Span(), specials))
		kv := attention.PagedKV{K: K.tensor(), V: V.tensor()}
		nSlots := blocks * bs

		slots := make([]int32, n)
		switch mode := r.intn(3); mode {
		case 0: // SlotMapping's, for a table and lengths from the input
			B, maxBlocks := 1+r.intn(3), r.intn(4)
			table := make([]int32, max(0, B*maxBlocks-r.intn(2)))
			for i := range table {
				table[i] = int32(r.intn(blocks+2)) - 1 // −1 and blocks are out of range
			}
			lens := make([]int32, B)
			cu := []int{0}
			for b := range lens {
				lens[b] = int32(r.intn(maxBlocks*bs+2)) - int32(r.intn(2))
				cu = append(cu, cu[b]+r.intn(3))
			}
			var cuSeqQ []int
			if r.bool() || n != B {
				cuSeqQ = cu
				// Offsets that give n tokens where the input allows.
				if extra := n - cu[B]; extra > 0 && r.bool() {
					cuSeqQ[B] += extra
				}
			}
			dst := slices.Repeat([]int32{-7}, n)
			m := attention.PagedKV{K: kv.K, V: kv.V, BlockTable: table, MaxBlocks: maxBlocks, SeqLens: lens}
			if err := m.SlotMapping(dst, cuSeqQ); err != nil {
				if !slices.Equal(dst, slices.Repeat([]int32{-7}, n)) {
					t.Fatalf("SlotMapping failed (%v) and wrote %v", err, dst)
				}
				for i := range slots {
					slots[i] = -1
				}
				break
			}
			// The slots of each sequence's newest positions.
			i := 0
			for b, l := range lens {
				nq := 1
				if cuSeqQ != nil {
					nq = cuSeqQ[b+1] - cuSeqQ[b]
				}
				for p := int(l) - nq; p < int(l); p++ {
					want := table[b*maxBlocks+p/bs]*int32(bs) + int32(p%bs)
					if dst[i] != want {
						t.Fatalf("SlotMapping: slot %d (sequence %d position %d) is %d, want %d", i, b, p, dst[i], want)
					}
					i++
				}
			}
			copy(slots, dst)
		case 1: // distinct slots, some skipped
			perm := r.rng.Perm(nSlots)
			for i := range slots {
				slots[i] = -1
				if i < len(perm) && r.rng.IntN(5) > 0 {
					slots[i] = int32(perm[i])
				}
			}
		default: // anything: out of range and repeated ones too
			for i := range slots {
				slots[i] = int32(r.intn(nSlots+4)) - 2
			}
		}

		wantK, wantV := K.clone(), V.clone()
		before := append(attention.TensorMemory(kv.K), attention.TensorMemory(kv.V)...)
		for i := range before {
			before[i] = bytes.Clone(before[i])
		}
		err := kv.Write(kIn.tensor(), vIn.tensor(), slots)
		if err != nil {
			after := append(attention.TensorMemory(kv.K), attention.TensorMemory(kv.V)...)
			for i := range before {
				if !bytes.Equal(before[i], after[i]) {
					t.Fatalf("Write failed (%v) and changed the pools", err)
				}
			}
			valid := true
			seen := map[int32]bool{}
			for _, s := range slots {
				if s < -1 || int(s) >= nSlots || (s >= 0 && seen[s]) {
					valid = false
				}
				seen[s] = true
			}
			if valid {
				t.Fatalf("Write of valid slots %v failed: %v", slots, err)
			}
			return
		}
		for i, s := range slots {
			if s < 0 {
				continue
			}
			blk, pos := int(s)/bs, int(s)%bs
			for h := range hkv {
				wantK.store(pl.Offset(blk, h, pos), h, kIn, il.Offset(0, h, i), d)
				wantV.store(pl.Offset(blk, h, pos), h, vIn, il.Offset(0, h, i), d)
			}
		}
		for name, p := range map[string][2]*fuzzStore{"K": {K, wantK}, "V": {V, wantV}} {
			got, want := attention.TensorMemory(p[0].tensor()), attention.TensorMemory(p[1].tensor())
			for i := range got {
				if j := firstByteDiff(got[i], want[i]); j >= 0 {
					t.Fatalf("pool %s (%v from %v, slots %v): byte %d of memory %d is %#02x, want %#02x", name, dt, in, slots, j, i, got[i][j], want[i][j])
				}
			}
		}

		// The same rows through a KVCache, read back.
		if n == 0 {
			return
		}
		var kc *attention.KVCache
		if ks != nil {
			kc, err = attention.NewKVCacheFP8(dt, hkv, n, d, ks, vs)
		} else {
			kc, err = attention.NewKVCache(dt, hkv, n, d)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := kc.Append(kIn.tensor(), vIn.tensor()); err != nil {
			t.Fatalf("KVCache.Append: %v", err)
		}
		cl := attention.BHSD(1, hkv, n, d)
		cK, cV := newFuzzStore(dt, cl, ks, make([]float32, cl.Span())), newFuzzStore(dt, cl, vs, make([]float32, cl.Span()))
		for i := range n {
			for h := range hkv {
				cK.store(cl.Offset(0, h, i), h, kIn, il.Offset(0, h, i), d)
				cV.store(cl.Offset(0, h, i), h, vIn, il.Offset(0, h, i), d)
			}
		}
		rt := []attention.DType{attention.F32, attention.F16, attention.BF16, dt}[r.intn(4)]
		from, m := r.intn(n+2)-1, r.intn(n+1)
		rl := attention.BHSD(1, hkv, m, d)
		if r.bool() {
			rl = attention.BSHD(1, m, hkv, d)
		}
		var oks, ovs []float32
		if rt == dt {
			oks, ovs = ks, vs
		}
		oK := newFuzzStore(rt, rl, oks, slices.Repeat([]float32{42}, rl.Span()))
		oV := newFuzzStore(rt, rl, ovs, slices.Repeat([]float32{42}, rl.Span()))
		wantOK, wantOV := oK.clone(), oV.clone()
		err = kc.Read(oK.tensor(), oV.tensor(), from)
		if err == nil {
			if from < 0 || from+m > n {
				t.Fatalf("KVCache.Read of %d positions from %d of %d succeeded", m, from, n)
			}
			for s := range m {
				for h := range hkv {
					wantOK.store(rl.Offset(0, h, s), h, cK, cl.Offset(0, h, from+s), d)
					wantOV.store(rl.Offset(0, h, s), h, cV, cl.Offset(0, h, from+s), d)
				}
			}
		} else if from >= 0 && from+m <= n {
			t.Fatalf("KVCache.Read of %d positions from %d of %d: %v", m, from, n, err)
		}
		for name, p := range map[string][2]*fuzzStore{"k": {oK, wantOK}, "v": {oV, wantOV}} {
			got, want := attention.TensorMemory(p[0].tensor()), attention.TensorMemory(p[1].tensor())
			for i := range got {
				if j := firstByteDiff(got[i], want[i]); j >= 0 {
					t.Fatalf("KVCache.Read into %v (%v cache, from %d, err %v): %s byte %d of memory %d is %#02x, want %#02x", rt, dt, from, err, name, j, i, got[i][j], want[i][j])
				}
			}
		}
	})
}

// firstByteDiff returns the first index where a and b differ, or −1.
func firstByteDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
