package attention_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/internal/impltest"
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
// documentation promises (every K/V type, the fp8 ones with scale 1), and
// for F32, F16 and BF16 storage stay within
// 1e-4 of the float64 oracle over the model's rows; ForwardKVCaches over
// the sequences' KVCaches must give bitwise ForwardPaged's result.
// An operation's byte also draws hostile calls (cachesAppendHostile,
// decodeHostile): Appends whose keys or values lie on the cache's own
// storage or have a dimension 0 or negative, and decodes with out or lse
// on q, the pools, the caches' storage, seqs, sinks or slopes, or with a
// dimension or stride of q or out 0 or negative, which must fail, changing
// no byte of any cache, or succeed with the bits of the same call.
func FuzzCaches(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("appendde\x00\x01\x01\x03\x02\x04\x00\x00\x00\x00\x05\x00\x05\x00\x03\x00\x00\x05\x00"))
	f.Add([]byte("forkfork\x01\x00\x01\x03\x01\x03\x00\x00\x00\x00\x00\x06\x00\x02\x00\x00\x00\x03\x00\x05\x00\x01\x01\x01\x05\x00"))
	f.Add([]byte("truncate\x02\x01\x00\x04\x02\x07\x01\x01\x02\x00\x00\x09\x00\x01\x00\x04\x05\x00\x04\x00\x01\x00\x05\x00\x03\x00\x05\x00"))
	f.Add([]byte("q8cache.\x03\x00\x01\x00\x01\x05\x00\x02\x00\x00\x00\x04\x00\x02\x00\x00\x00\x05\x00\x03\x01\x05\x00"))
	f.Add([]byte("fullpool\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x02\x00\x02\x00\x00\x00\x02\x00\x05\x00"))
	// Hostile calls: an operation's byte b is operation b % 6 and hostile
	// call b / 6 (cachesAppendHostile before an Append, decodeHostile after
	// a decode). One K/V head of dim 4 and 2 query heads, blocks of 2,
	// then one Append of 3 positions and one decode.
	hostileSeeded := func(seed string, appendOp, decodeOp byte) []byte {
		return append([]byte(seed+"\x00\x00\x01\x03\x01\x05\x00\x00\x00\x00"), appendOp, 0, 3, 0, 0, decodeOp, 1, 0, 1, 0, 0, 1)
	}
	hostile := func(appendOp, decodeOp byte) []byte { return hostileSeeded("hostile.", appendOp, decodeOp) }
	f.Add(hostile(6*1, 5))    // PagedCache.Append of k on the cache's keys
	f.Add(hostile(6*2, 5))    // KVCache.Append of k on its keys
	f.Add(hostile(6*4, 5))    // KVCache.Append of v on its storage
	f.Add(hostile(6*10, 5))   // KVCache.Append of v with 0 heads
	f.Add(hostile(6*11, 5))   // PagedCache.Append of no positions on the cache's storage: valid
	f.Add(hostile(0, 5+6*3))  // ForwardPaged: out on the pool of keys
	f.Add(hostile(0, 5+6*4))  // ForwardKVCaches: out on caches[0]'s keys
	f.Add(hostile(0, 5+6*21)) // ForwardPaged: lse on seqs
	// A dimension of q or out changed (the value, and whether q or out,
	// come from the seed): "zerodim1" gives q's, "zerodim4" out's head dim
	// 0, batch 0 and a SeqStride 0 (of one query: valid), "zerodim2" no
	// queries.
	for _, seed := range []string{"zerodim1", "zerodim2", "zerodim4"} {
		f.Add(hostileSeeded(seed, 0, 5+6*(1+34))) // ForwardPaged: head dim
		f.Add(hostileSeeded(seed, 0, 5+6*(1+29))) // ForwardKVCaches: batch
		f.Add(hostileSeeded(seed, 0, 5+6*(1+40))) // ForwardPaged: SeqStride
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newFuzzReader(data)
		var seed [8]byte
		copy(seed[:], data)
		aux := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:]), 15)) // the hostile calls' details
		dt := fuzzKVType[r.intn(len(fuzzKVType))]
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
		storage := func() [][]byte { // every byte of the caches' storage
			mems := attention.PagedCacheMemory(pc)
			for _, id := range ids {
				mems = append(mems, attention.CacheMemory(live[id].kv)...)
			}
			return mems
		}
		lengths := func() string { // the caches' bookkeeping
			s := fmt.Sprintf("free %d:", pc.FreeBlocks())
			for _, id := range ids {
				n, err := pc.Len(id)
				s += fmt.Sprintf(" %v %d %v %d", id, n, err, live[id].kv.Len())
			}
			return s
		}
		decode := func(hostile int) {
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
			out := impltest.Filled(ql.Span(), outGuard)
			lse := impltest.Filled(len(seqs)*hq*nq, outGuard)
			if err := e.ForwardPagedLSE(attention.F32Tensor(out, ql), lse, attention.F32Tensor(q, ql), pc, seqs, opts); err != nil {
				t.Fatalf("ForwardPagedLSE %v: %v", seqs, err)
			}
			// The same batch from the sequences' contiguous caches in one
			// call: bitwise the paged result.
			kcs := make([]*attention.KVCache, len(seqs))
			for b, id := range seqs {
				kcs[b] = live[id].kv
			}
			out2 := impltest.Filled(ql.Span(), outGuard)
			lse2 := impltest.Filled(len(seqs)*hq*nq, outGuard)
			if err := e.ForwardKVCachesLSE(attention.F32Tensor(out2, ql), lse2, attention.F32Tensor(q, ql), kcs, opts); err != nil {
				t.Fatalf("ForwardKVCachesLSE: %v", err)
			}
			if !sameBits(out2, out) || !sameBits(lse2, lse) {
				t.Fatalf("%v cfg %+v opts %+v: ForwardKVCaches differs from ForwardPaged over the same sequences %v", dt, cfg, opts, seqs)
			}
			if hostile != 0 {
				decodeHostile(t, hostile, aux, e, pc, kcs, attention.F32Tensor(q, ql), seqs, opts, storage, lengths)
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
				if dt == attention.Q8 || dt == attention.FP8E4M3 || dt == attention.FP8E5M2 {
					continue // the oracle sees the unquantised rows
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
			ob := r.byte()
			hostile := int(ob) / 6
			switch ob % 6 {
			case 0:
				op = "Append"
				id := pick()
				m := live[id]
				n := len(m.k)
				cnt := r.intn(2*bs + 2)
				kr, kt := fuzzRows(r, r.bool(), hkv, cnt, d, nil)
				vr, vt := fuzzRows(r, r.bool(), hkv, cnt, d, nil)
				if hostile != 0 {
					cachesAppendHostile(t, hostile, aux, pc, id, m.kv, storage, lengths)
					check("a hostile Append")
				}
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
				decode(hostile)
			}
			check(op)
		}
		decode(0)
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

// cachesAppendHostile makes one of FuzzCaches' hostile Appends (h from 1
// to 42: h−1 even PagedCache.Append to sequence id, odd KVCache.Append to
// kv; (h−1)/2 mod 7 the change) of 1 or 2 positions: k, v or both placed
// on the cache's own storage (keys, values or Q8 scales, as aux picks), k
// or v with a dimension 0 or negative or a negative stride, k and v of
// different lengths, or no positions placed on the storage (valid: nothing
// to copy).
// A failed Append must change no byte of any cache's storage nor their
// bookkeeping (lengths, free blocks; Check is run after it); the valid
// one must change nothing either.
func cachesAppendHostile(t *testing.T, h int, aux *rand.Rand, pc *attention.PagedCache, id attention.SeqID, kv *attention.KVCache,
	storage func() [][]byte, lengths func() string) {
	x := h - 1
	paged, variant := x%2 == 0, (x/2)%7
	heads, dim := pc.Heads(), pc.Dim()
	mem := attention.CacheMemory(kv)
	if paged {
		mem = attention.PagedCacheMemory(pc)
	}
	cnt := 1 + aux.IntN(2)
	if variant == 5 {
		cnt = 0
	}
	l := attention.BHSD(1, heads, cnt, dim)
	k := attention.F32Tensor(randn(aux, l.Span()), l)
	v := attention.F32Tensor(randn(aux, l.Span()), l)
	// onStorage places a view of layout l on the storage, overlapping it
	// (false when it does not fit).
	onStorage := func() (attention.Tensor, string, bool) {
		i := aux.IntN(len(mem))
		in := fzIn{name: fmt.Sprintf("storage part %d", i), lo: fzAddr(mem[i]), hi: fzAddr(mem[i]) + uintptr(len(mem[i])), room: mem[i]}
		mode := [...]int{0, 1, 2, 6}[aux.IntN(4)]
		s, ok := fzPlace(in, l.Span(), mode, byte(aux.IntN(256)))
		if !ok {
			s, ok = fzPlace(in, l.Span(), 0, 0)
		}
		return attention.F32Tensor(s, l), fmt.Sprintf("%s (mode %d)", in.name, mode), ok
	}
	dims := func(x attention.Tensor) (attention.Tensor, string) {
		f := aux.IntN(7)
		vals := []int{0, -1, math.MinInt}
		if f >= 4 {
			vals = vals[1:] // a zero stride repeats the input, which is valid
		}
		val := vals[aux.IntN(len(vals))]
		*fzField(&x.Layout, f) = val
		return x, fmt.Sprintf("%s = %d", fzFieldNames[f], val)
	}
	var what string
	var ok bool
	expectErr := true
	switch variant {
	case 0:
		k, what, ok = onStorage()
		what = "k on " + what
	case 1:
		v, what, ok = onStorage()
		what = "v on " + what
	case 2:
		var w2 string
		k, what, ok = onStorage()
		v, w2, _ = onStorage()
		what = "k on " + what + ", v on " + w2
	case 3:
		k, what = dims(k)
		what, ok = "k."+what, true
	case 4:
		v, what = dims(v)
		what, ok = "v."+what, true
	case 5:
		k, _, ok = onStorage()
		v, _, _ = onStorage()
		what, expectErr = "no positions, k and v on the storage", false
	default:
		v.Seq--
		what, ok = "v one position short", true
	}
	if !ok {
		return // the storage is too small for an input
	}
	fn := "KVCache.Append"
	if paged {
		fn = "PagedCache.Append"
	}
	what = fmt.Sprintf("hostile %s (%s)", fn, what)
	mems := storage()
	before, state := fzSnap(mems...), lengths()
	err := fzCall(t, what, func() error {
		if paged {
			return pc.Append(id, k, v)
		}
		return kv.Append(k, v)
	})
	switch {
	case expectErr && err == nil:
		t.Fatalf("%s: no error", what)
	case !expectErr && err != nil:
		t.Fatalf("%s: %v", what, err)
	}
	fzUnchanged(t, fmt.Sprintf("%s (error %v)", what, err), before, mems, nil)
	if s := lengths(); s != state {
		t.Fatalf("%s (error %v): the caches' bookkeeping changed from %s to %s", what, err, state, s)
	}
}

// fzPlaceOr0 places n floats on the input by a mode aux picks, or at its
// start when they do not fit so (an input in a cache's storage has no
// room around it).
func fzPlaceOr0(in fzIn, n int, aux *rand.Rand) ([]float32, int, bool) {
	mode := aux.IntN(8)
	if s, ok := fzPlace(in, n, mode, byte(aux.IntN(256))); ok {
		return s, mode, true
	}
	s, ok := fzPlace(in, n, 0, 0)
	return s, 0, ok
}

// decodeHostile makes one of FuzzCaches' hostile decodes (h from 1 to 42:
// h−1 even ForwardPaged[LSE] over pc, odd ForwardKVCaches[LSE] over kcs;
// s = (h−1)/2 the change): the decode just made, with q, seqs and the
// options' sinks and slopes copied into an arena, and out (s < 7) or lse
// (7 <= s < 14) placed on input s mod the inputs (q, the pools or caches'
// keys, values and Q8 scales, seqs, sinks, slopes; in the cache's storage
// only where it fits), on the other output, or next to an arena input, or
// (s >= 14) field s−14 of q or out set to 0 or a negative number, or no
// queries; aux picks the rest. A call that must fail must change no byte
// of the arena nor of any cache's storage; one that may succeed must write
// only its outputs, with the bits of the same call with plain outputs.
func decodeHostile(t *testing.T, h int, aux *rand.Rand, e *attention.Engine, pc *attention.PagedCache, kcs []*attention.KVCache,
	q attention.Tensor, seqs []attention.SeqID, opts attention.Options, storage func() [][]byte, lengths func() string) {
	x := h - 1
	paged, sel := x%2 == 0, x/2
	useLSE := aux.IntN(4) != 0 || (sel >= 7 && sel < 14)
	if aux.IntN(2) == 0 {
		opts.Slopes = make([]float32, q.Heads)
		for i := range opts.Slopes {
			opts.Slopes[i] = 0.25 / float32(i+1)
		}
	}
	outLay := q.Layout
	rows, outN := fzRowCount(q.Layout), outLay.Span()
	pad := max(outN, rows) + 16
	wide := aux.IntN(2) == 0
	gap := 0
	if wide {
		gap = pad
	}
	a := newFzArena(pad, gap, append(fzTensorSize(q), 8*len(seqs), 4*len(opts.Sinks), 4*len(opts.Slopes), 4*outN, 4*rows)...)
	qA, seqsA := fzTensorTo(a, q), fzCopy(a, seqs)
	o := opts
	o.Sinks, o.Slopes = fzCopy(a, opts.Sinks), fzCopy(a, opts.Slopes)
	outHome := a.floats(outN, outGuard)
	var lseHome []float32
	if useLSE {
		lseHome = a.floats(rows, outGuard)
	}
	room := a.bytes()
	ins := fzTensorIns("q", qA, room)
	if paged {
		for i, m := range attention.PagedCacheMemory(pc) {
			ins = append(ins, fzIn{name: fmt.Sprintf("the pool's part %d", i), lo: fzAddr(m), hi: fzAddr(m) + uintptr(len(m)), room: m})
		}
		ins = append(ins, fzSliceIn("seqs", seqsA, room))
	} else {
		for b, kc := range kcs {
			for i, m := range attention.CacheMemory(kc) {
				ins = append(ins, fzIn{name: fmt.Sprintf("caches[%d] part %d", b, i), lo: fzAddr(m), hi: fzAddr(m) + uintptr(len(m)), room: m})
			}
		}
	}
	ins = append(ins, fzOptionIns(o, room)...)
	call := func(out attention.Tensor, lse []float32, q attention.Tensor) error {
		switch {
		case paged && useLSE:
			return e.ForwardPagedLSE(out, lse, q, pc, seqsA, o)
		case paged:
			return e.ForwardPaged(out, q, pc, seqsA, o)
		case useLSE:
			return e.ForwardKVCachesLSE(out, lse, q, kcs, o)
		}
		return e.ForwardKVCaches(out, q, kcs, o)
	}

	// (b) A dimension or stride of q or out.
	hl := outLay
	change, empty, dims := fzNone, false, ""
	if sel >= 14 {
		f, v := sel-14, fzDimValues[aux.IntN(4)]
		switch {
		case aux.IntN(8) == 0:
			qA.Seq, hl.Seq, empty, change, dims = 0, 0, true, fzSame, "no queries"
		case aux.IntN(2) == 0:
			change, dims = fzClassify(&qA.Layout, f, v, false, false), fmt.Sprintf("q.%s = %d", fzFieldNames[f], v)
		default:
			change, dims = fzClassify(&hl, f, v, false, true), fmt.Sprintf("out.%s = %d", fzFieldNames[f], v)
		}
	}

	// (a) out or lse on an input, on the other output, or next to one.
	out, lse := attention.F32Tensor(outHome, hl), lseHome
	at := "its own place"
	if sel < 7 {
		if tg, ok := fzPick(1+sel, append(ins, fzSliceIn("lse's place", lseHome, room))); ok {
			s, mode, ok := fzPlaceOr0(tg, outN, aux)
			if ok {
				out, at = attention.F32Tensor(s, hl), fmt.Sprintf("out on %s (mode %d)", tg.name, mode)
			}
		}
	} else if sel < 14 {
		ot := fzOut("out", out)
		ot.room = room
		if tg, ok := fzPick(sel-6, append(ins, ot)); ok {
			if s, mode, ok := fzPlaceOr0(tg, rows, aux); ok {
				lse, at = s, fmt.Sprintf("lse on %s (mode %d)", tg.name, mode)
			}
		}
	}
	what := fmt.Sprintf("hostile decode (paged %v, lse %v, slopes %v, sinks %v, %d sequences, %s, %s)", paged, useLSE, o.Slopes != nil, o.Sinks != nil, len(seqs), dims, at)
	rowsNow := 0
	if useLSE && qA.Layout.Validate() == nil {
		rowsNow = fzRowCount(qA.Layout)
	}
	expectErr, why := change == fzInvalid, ""
	if expectErr {
		why = "an invalid " + dims
	} else {
		ot, lt := fzOut("out", out), fzLSE(lse, rowsNow)
		if in, ok := fzOverlap(ot, ins); ok {
			expectErr, why = true, "out overlaps "+in.name
		} else if in, ok := fzOverlap(lt, ins); ok {
			expectErr, why = true, "lse overlaps "+in.name
		} else if ot.overlaps(lt) {
			expectErr, why = true, "lse overlaps out"
		}
	}
	var cleanOut attention.Tensor
	var cleanLSE []float32
	if !expectErr && !empty {
		cleanOut = attention.F32Tensor(impltest.Filled(outN, outGuard), outLay)
		if useLSE {
			cleanLSE = impltest.Filled(rows, outGuard)
		}
		if err := call(cleanOut, cleanLSE, fzMaterialize(qA, q.Layout)); err != nil {
			t.Fatalf("%s: the same call with plain outputs failed: %v", what, err)
		}
	}
	mems := storage()
	before, caches, state := fzSnap(room), fzSnap(mems...), lengths()
	err := fzCall(t, what, func() error { return call(out, lse, qA) })
	fzUnchanged(t, fmt.Sprintf("%s (error %v): the caches' storage", what, err), caches, mems, ins)
	if s := lengths(); s != state {
		t.Fatalf("%s (error %v): the caches' bookkeeping changed from %s to %s", what, err, state, s)
	}
	fzCheck(t, what, err, expectErr, why, empty, room, before, ins, out, cleanOut, lse, cleanLSE, rowsNow)
}
