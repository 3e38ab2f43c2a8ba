package attention_test

import (
	"slices"
	"testing"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
)

// cacheModel is FuzzCaches' model of one sequence: the float32 keys and
// values appended so far (position-major, [Hkv, Dim] per position) and a
// KVCache that holds the same sequence.
type cacheModel struct {
	k, v [][]float32
	kv   *attention.KVCache
}

// fuzzRows returns n random positions of heads × dim values and the
// [1, heads, n, dim] tensor (BHSD or BSHD) that holds them.
func fuzzRows(r *fuzzReader, bshdLayout bool, heads, n, dim int, rows [][]float32) ([][]float32, attention.Tensor) {
	if rows == nil {
		rows = make([][]float32, n)
		for i := range rows {
			rows[i] = randn(r.rng, heads*dim)
		}
	}
	l := attention.BHSD(1, heads, n, dim)
	if bshdLayout {
		l = attention.BSHD(1, n, heads, dim)
	}
	buf := make([]float32, max(l.Span(), 1))
	for s, row := range rows {
		for h := range heads {
			copy(buf[l.Offset(0, h, s):][:dim], row[h*dim:][:dim])
		}
	}
	return rows, attention.F32Tensor(buf, l)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// FuzzCaches runs a sequence of operations decoded from the input on a
// PagedCache (NewSequence, Append of 0 to 2·BlockSize+1 positions,
// Truncate, Fork, Free, and batched decode) and mirrors every sequence in
// a model: the float32 rows appended, and a KVCache fed the same rows.
// After every operation PagedCache.Check must pass and every length agree;
// an Append may fail only when the free blocks cannot hold it, and a
// failed operation must change nothing. A decode (one query per sequence,
// or 2 to 4 draft tokens; not longer chunks: the known chunked-prefill
// discrepancy past 16 positions is left to its own fix) must give, for
// each sequence, bitwise the output and
// log-sum-exp of Engine.Forward over its KVCache, as ForwardPaged's
// documentation promises, and for F32, F16 and BF16 storage stay within
// 1e-4 of the float64 oracle over the model's rows; ForwardKVCaches over
// the sequences' KVCaches must give bitwise ForwardPaged's result.
func FuzzCaches(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("appendde\x00\x01\x01\x03\x02\x04\x00\x00\x00\x00\x05\x00\x05\x00\x03\x00\x00\x05\x00"))
	f.Add([]byte("forkfork\x01\x00\x01\x03\x01\x03\x00\x00\x00\x00\x00\x06\x00\x02\x00\x00\x00\x03\x00\x05\x00\x01\x01\x01\x05\x00"))
	f.Add([]byte("truncate\x02\x01\x00\x04\x02\x07\x01\x01\x02\x00\x00\x09\x00\x01\x00\x04\x05\x00\x04\x00\x01\x00\x05\x00\x03\x00\x05\x00"))
	f.Add([]byte("q8cache.\x03\x00\x01\x00\x01\x05\x00\x02\x00\x00\x00\x04\x00\x02\x00\x00\x00\x05\x00\x03\x01\x05\x00"))
	f.Add([]byte("fullpool\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x02\x00\x02\x00\x00\x00\x02\x00\x05\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newFuzzReader(data)
		dt := fuzzKVType[r.intn(4)]
		hkv, group, d := 1+r.intn(2), 1+r.intn(2), 1+r.intn(8)
		if dt == attention.Q8 {
			d = attention.Q8Block
		}
		bs, nblocks := 1+r.intn(4), 1+r.intn(12)
		cfg := attention.Config{BlockQ: fuzzBlocks[r.intn(len(fuzzBlocks))], BlockKV: fuzzBlocks[r.intn(len(fuzzBlocks))], Threads: 1 + r.intn(3), KVSplits: r.intn(4)}
		pc, err := attention.NewPagedCache(dt, hkv, d, bs, nblocks)
		if err != nil {
			t.Fatal(err)
		}
		e, err := attention.NewEngine(cfg)
		if err != nil {
			t.Fatal(err)
		}
		capacity := bs * nblocks
		live := map[attention.SeqID]*cacheModel{}
		var ids []attention.SeqID // live ids in creation order
		newModel := func(k, v [][]float32) *cacheModel {
			kv, err := attention.NewKVCache(dt, hkv, capacity, d)
			if err != nil {
				t.Fatal(err)
			}
			m := &cacheModel{k: k, v: v, kv: kv}
			if len(k) > 0 {
				_, kt := fuzzRows(r, false, hkv, len(k), d, k)
				_, vt := fuzzRows(r, false, hkv, len(v), d, v)
				if err := kv.Append(kt, vt); err != nil {
					t.Fatalf("KVCache.Append of %d positions: %v", len(k), err)
				}
			}
			return m
		}
		addSeq := func() {
			id := pc.NewSequence()
			if _, ok := live[id]; ok {
				t.Fatalf("NewSequence returned the live id %v", id)
			}
			live[id] = newModel(nil, nil)
			ids = append(ids, id)
		}
		pick := func() attention.SeqID {
			if len(ids) == 0 {
				addSeq()
			}
			return ids[r.intn(len(ids))]
		}
		decode := func() {
			nq := 1
			if r.intn(4) == 0 {
				nq = 1 + r.intn(4) // a few draft tokens
			}
			var seqs []attention.SeqID
			for _, id := range ids {
				if len(live[id].k) >= nq {
					seqs = append(seqs, id)
				}
			}
			if len(seqs) == 0 {
				return
			}
			if r.bool() {
				seqs = append(seqs, seqs[r.intn(len(seqs))]) // a repeated sequence
			}
			hq := hkv * group
			opts := attention.Options{Causal: r.bool()}
			if r.bool() {
				opts.Window = &attention.Window{Left: r.intn(6) - 1, Right: r.intn(3) - 1}
			}
			if r.bool() {
				opts.SoftCap = 2
			}
			if r.bool() {
				opts.Sinks = make([]float32, hq)
			}
			ql := attention.BHSD(len(seqs), hq, nq, d)
			q := randn(r.rng, ql.Span())
			out := nanBuffer(ql.Span(), outGuard)
			lse := nanBuffer(len(seqs)*hq*nq, outGuard)
			if err := e.ForwardPagedLSE(attention.F32Tensor(out, ql), lse, attention.F32Tensor(q, ql), pc, seqs, opts); err != nil {
				t.Fatalf("ForwardPagedLSE %v: %v", seqs, err)
			}
			// The same batch from the sequences' contiguous caches in one
			// call: bitwise the paged result.
			kcs := make([]*attention.KVCache, len(seqs))
			for b, id := range seqs {
				kcs[b] = live[id].kv
			}
			out2 := nanBuffer(ql.Span(), outGuard)
			lse2 := nanBuffer(len(seqs)*hq*nq, outGuard)
			if err := e.ForwardKVCachesLSE(attention.F32Tensor(out2, ql), lse2, attention.F32Tensor(q, ql), kcs, opts); err != nil {
				t.Fatalf("ForwardKVCachesLSE: %v", err)
			}
			if !sameBits(out2, out) || !sameBits(lse2, lse) {
				t.Fatalf("%v cfg %+v opts %+v: ForwardKVCaches differs from ForwardPaged over the same sequences %v", dt, cfg, opts, seqs)
			}
			bl := attention.BHSD(1, hq, nq, d)
			for b, id := range seqs {
				m := live[id]
				qb := q[b*hq*nq*d:][:hq*nq*d]
				want := make([]float32, hq*nq*d)
				wantLSE := make([]float32, hq*nq)
				if err := e.ForwardLSE(attention.F32Tensor(want, bl), wantLSE, attention.F32Tensor(qb, bl), m.kv.K(), m.kv.V(), opts); err != nil {
					t.Fatalf("ForwardLSE over the KVCache: %v", err)
				}
				if !sameBits(out[b*hq*nq*d:][:hq*nq*d], want) || !sameBits(lse[b*hq*nq:][:hq*nq], wantLSE) {
					t.Fatalf("%v cfg %+v opts %+v: ForwardPaged of sequence %v (batch entry %d, %d positions, Nq %d, block size %d) differs from Forward over its KVCache:\n%v\n%v\nlse %v vs %v",
						dt, cfg, opts, id, b, len(m.k), nq, bs, out[b*hq*nq*d:][:hq*nq*d], want, lse[b*hq*nq:][:hq*nq], wantLSE)
				}
				if dt == attention.Q8 {
					continue
				}
				n := len(m.k)
				p := reference.Params{Batch: 1, HeadsQ: hq, HeadsKV: hkv, SeqQ: nq, SeqKV: n, Dim: d, Causal: opts.Causal, SoftCap: float64(opts.SoftCap)}
				if opts.Window != nil {
					p.Window, p.WindowLeft, p.WindowRight = true, opts.Window.Left, opts.Window.Right
				}
				if opts.Sinks != nil {
					p.Sinks = make([]float64, hq)
				}
				k64, v64 := make([]float64, hkv*n*d), make([]float64, hkv*n*d)
				for s := range n {
					kr, vr := slices.Clone(m.k[s]), slices.Clone(m.v[s])
					roundTo(dt, kr)
					roundTo(dt, vr)
					for h := range hkv {
						for c := range d {
							k64[(h*n+s)*d+c] = float64(kr[h*d+c])
							v64[(h*n+s)*d+c] = float64(vr[h*d+c])
						}
					}
				}
				w, _, err := reference.Attention(p, reference.Float64s(qb), k64, v64)
				if err != nil {
					t.Fatal(err)
				}
				if errs := reference.Compare(want, w); errs.MaxAbs > 1e-4 {
					t.Fatalf("%v: sequence %v of %d positions: Forward over the KVCache vs oracle: %v", dt, id, n, errs)
				}
			}
		}
		check := func(op string) {
			if err := pc.Check(); err != nil {
				t.Fatalf("after %s: Check: %v", op, err)
			}
			if fb := pc.FreeBlocks(); fb < 0 || fb > nblocks {
				t.Fatalf("after %s: %d free blocks of %d", op, fb, nblocks)
			}
			for _, id := range ids {
				m := live[id]
				n, err := pc.Len(id)
				if err != nil || n != len(m.k) || m.kv.Len() != n {
					t.Fatalf("after %s: sequence %v: Len %d (%v), KVCache.Len %d, model %d", op, id, n, err, m.kv.Len(), len(m.k))
				}
				if dt == attention.F32 && n > 0 {
					kt, vt := m.kv.K(), m.kv.V()
					kd, vd := kt.Float32s(), vt.Float32s()
					for s := range n {
						for h := range hkv {
							if !sameBits(kd[kt.Layout.Offset(0, h, s):][:d], m.k[s][h*d:][:d]) || !sameBits(vd[vt.Layout.Offset(0, h, s):][:d], m.v[s][h*d:][:d]) {
								t.Fatalf("after %s: KVCache of sequence %v: position %d head %d differs from the rows appended", op, id, s, h)
							}
						}
					}
				}
			}
		}
		for step := 0; step < 32 && len(r.b) > 0; step++ {
			var op string
			switch r.intn(6) {
			case 0:
				op = "Append"
				id := pick()
				m := live[id]
				n := len(m.k)
				cnt := r.intn(2*bs + 2)
				kr, kt := fuzzRows(r, r.bool(), hkv, cnt, d, nil)
				vr, vt := fuzzRows(r, r.bool(), hkv, cnt, d, nil)
				free := pc.FreeBlocks()
				need := ceilDiv(n+cnt, bs) - ceilDiv(n, bs)
				if n%bs != 0 && cnt > 0 {
					need++ // the last block may be shared and copied
				}
				if err := pc.Append(id, kt, vt); err != nil {
					if free >= need {
						t.Fatalf("Append of %d to sequence %v of %d positions failed with %d free blocks (block size %d): %v", cnt, id, n, free, bs, err)
					}
					if pc.FreeBlocks() != free {
						t.Fatalf("failed Append changed the free blocks from %d to %d", free, pc.FreeBlocks())
					}
					break
				}
				if err := m.kv.Append(kt, vt); err != nil {
					t.Fatalf("KVCache.Append: %v", err)
				}
				m.k, m.v = append(m.k, kr...), append(m.v, vr...)
			case 1:
				op = "Truncate"
				id := pick()
				m := live[id]
				n := r.intn(len(m.k) + 2)
				err := pc.Truncate(id, n)
				errKV := m.kv.Truncate(n)
				if n > len(m.k) {
					if err == nil || errKV == nil {
						t.Fatalf("Truncate to %d of %d positions: errors %v, %v", n, len(m.k), err, errKV)
					}
					break
				}
				if err != nil || errKV != nil {
					t.Fatalf("Truncate to %d of %d positions: %v, %v", n, len(m.k), err, errKV)
				}
				m.k, m.v = m.k[:n:n], m.v[:n:n]
			case 2:
				op = "Fork"
				if len(ids) >= 6 {
					break
				}
				src := pick()
				id, err := pc.Fork(src)
				if err != nil {
					t.Fatalf("Fork(%v): %v", src, err)
				}
				if _, ok := live[id]; ok {
					t.Fatalf("Fork returned the live id %v", id)
				}
				m := live[src]
				live[id] = newModel(m.k[:len(m.k):len(m.k)], m.v[:len(m.v):len(m.v)])
				ids = append(ids, id)
			case 3:
				op = "Free"
				if len(ids) == 0 {
					break
				}
				i := r.intn(len(ids))
				id := ids[i]
				if err := pc.Free(id); err != nil {
					t.Fatalf("Free(%v): %v", id, err)
				}
				ids = slices.Delete(ids, i, i+1)
				delete(live, id)
				if err := pc.Free(id); err == nil {
					t.Fatalf("second Free(%v) succeeded", id)
				}
				if _, err := pc.Len(id); err == nil {
					t.Fatalf("Len of the freed %v succeeded", id)
				}
			case 4:
				op = "NewSequence"
				if len(ids) < 6 {
					addSeq()
				}
			case 5:
				op = "decode"
				decode()
			}
			check(op)
		}
		decode()
		for _, id := range ids {
			if err := pc.Free(id); err != nil {
				t.Fatalf("Free(%v): %v", id, err)
			}
		}
		if pc.FreeBlocks() != nblocks {
			t.Fatalf("all sequences freed but %d of %d blocks free", pc.FreeBlocks(), nblocks)
		}
	})
}
