package attention_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/internal/impltest"
)

// fuzzReader decodes a fuzz input into the choices of a test case: each
// call consumes a byte (0 once the input is exhausted), so every input is
// valid and short inputs are the simple cases. The random data of a case
// (Q, K, V values and the like) come from rng, seeded by the first eight
// bytes, so that the fuzzer steers the structure and the seeds the values.
type fuzzReader struct {
	b   []byte
	rng *rand.Rand
}

func newFuzzReader(data []byte) *fuzzReader {
	var seed [8]byte
	copy(seed[:], data)
	if len(data) > 8 {
		data = data[8:]
	} else {
		data = nil
	}
	return &fuzzReader{b: data, rng: rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:]), 14))}
}

func (r *fuzzReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// intn returns a choice in [0, n).
func (r *fuzzReader) intn(n int) int { return int(r.byte()) % n }

func (r *fuzzReader) bool() bool { return r.byte()&1 == 1 }

// sameValue reports whether x and y are equal or both NaN.
func sameValue(x, y float32) bool { return x == y || (x != x && y != y) }

// mergeSpecials are the log-sum-exps FuzzMerge draws besides random ones.
var mergeSpecials = []float32{
	float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN()), 0, 1e30, -1e30, 88, -88, 1e-30,
}

// elementSpecials are the output elements FuzzMerge draws besides random ones.
var elementSpecials = []float32{
	float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32, 1e-40, 0,
}

// checkWroteOnlyOutputs fails if a merge (fn) wrote out's buffer outside
// its view ov or lse's buffer outside its rows (lse starts one element
// into lsebuf); o0 and l0 are the buffers as they were.
func checkWroteOnlyOutputs(t *testing.T, fn string, ov view, obuf, o0, lsebuf, l0 []float32, rows int) {
	t.Helper()
	in := inView(ov)
	for i, x := range obuf {
		if !in[i] && math.Float32bits(x) != math.Float32bits(o0[i]) {
			t.Fatalf("%s wrote out's buffer element %d outside the view", fn, i)
		}
	}
	if !sameBits(lsebuf[:1], l0[:1]) || !sameBits(lsebuf[rows+1:], l0[rows+1:]) {
		t.Fatalf("%s wrote outside lse", fn)
	}
}

// FuzzMerge merges two parts of random shape, layout and log-sum-exps
// (−Inf, +Inf, NaN, huge, empty parts) and checks the result row by row
// against the documented rule evaluated in float64: a part with lse −Inf is
// ignored (the other copied bit for bit), a NaN lse gives a NaN lse, two
// +Inf give NaN, one +Inf takes all the weight, and otherwise out =
// e^(lseA−lse)·a + e^(lseB−lse)·b within 1e-6 of the magnitude of its terms
// (the float32 rounding of the result is 6e-8) and lse within 1e-6·(1+|lse|).
// It also checks that the merge is commutative bit for bit, that nothing
// outside out and lse is written, that the inputs are not modified, and
// that a misuse returns an error and writes nothing. The rest of the input
// draws a hostile merge (mergeHostile): out and lse on a, b, lseA, lseB or
// each other, in the documented in-place form or a near miss of it (out
// on a in another layout or a float off, lse a float off lseA), b aliasing
// a, and a dimension or stride of out, a or b 0 or negative.
func FuzzMerge(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x01\x02\x03\x05\x01\x00\x00\x00"))
	f.Add([]byte("seedseed\x00\x02\x03\x08\x02\x01\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09"))
	f.Add([]byte("inplace!\x01\x01\x01\x04\x00\x00\x01\x03\x00\x01\x02"))
	f.Add([]byte("misuse..\x01\x01\x01\x04\x00\x00\x00\x01\x01\x01\x01"))
	f.Add([]byte("misuse..\x01\x01\x01\x04\x00\x00\x00\x03\x01\x01\x01"))
	// Hostile calls (mergeHostile): one row of 2 (or two rows of 2, out
	// padded, b BSHD), then the plan.
	hostile := func(plan string) []byte {
		return []byte("hostile." + "\x00\x00\x01\x02\x00\x00\x00\x01\x00\x01\x01\x01\x01\x00\x00" + plan)
	}
	hostile2 := func(plan string) []byte {
		return []byte("hostile2" + "\x00\x00\x02\x02\x02\x00\x01\x01\x00\x01\x01\x01\x01\x01\x01\x01\x01\x00\x00\x00\x00" + plan)
	}
	f.Add(hostile("\x01\x00\x00\x03\x00\x00\x00\x00\x00\x00\x04")) // out = a, lse = lseA: in place
	f.Add(hostile("\x01\x06\x00\x00\x00\x00\x00\x00\x00\x00\x04")) // out one float into a
	f.Add(hostile("\x01\x05\x00\x02\x04\x00\x00\x00\x00\x01\x04")) // out just after a, lse just before lseA: near misses
	f.Add(hostile("\x00\x00\x00\x04\x00\x00"))                     // lse = lseB
	f.Add(hostile("\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05")) // b = a, out on b (a's layout)
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03")) // b = a, lseB = lseA: valid
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x01\x03\x00"))         // out head dim 0
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x01\x07\x00"))         // no rows
	f.Add(hostile2("\x01\x00\x00"))                                // out (padded) on a (BHSD): the same start, another layout
	f.Add(hostile2("\x00\x00\x00\x00\x00\x00\x02\x06\x00"))        // a SeqStride 0: one row repeated
	f.Add(hostile2("\x00\x00\x00\x00\x00\x00\x01\x06\x00"))        // out SeqStride 0: rows collide
	f.Add(hostile2("\x00\x00\x00\x00\x00\x00\x03\x04\x02"))        // b BatchStride -1
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newFuzzReader(data)
		nb, nh, ns, nd := 1+r.intn(2), 1+r.intn(3), r.intn(5), r.intn(10)
		kindO, kindA, kindB := layoutKind(r.intn(3)), layoutKind(r.intn(3)), layoutKind(r.intn(3))
		inPlace := r.intn(4) == 0
		misuse := r.intn(8)
		rows := nb * nh * ns

		mk := func(kind layoutKind) (view, []float32, []float32) {
			v := makeView(kind, nb, nh, ns, nd)
			buf := impltest.Filled(v.size, guard)
			canon := make([]float32, rows*nd)
			for i := range canon {
				if r.intn(16) == 0 {
					canon[i] = elementSpecials[r.intn(len(elementSpecials))]
				} else {
					canon[i] = float32(r.rng.NormFloat64())
				}
			}
			scatter(v, buf, canon, func(x float32) float32 { return x })
			return v, buf, canon
		}
		av, abuf, aval := mk(kindA)
		bv, bbuf, bval := mk(kindB)
		lseOf := func() []float32 {
			x := impltest.Filled(rows+2, guard)
			for i := range rows {
				if r.bool() {
					x[1+i] = mergeSpecials[r.intn(len(mergeSpecials))]
				} else {
					x[1+i] = float32(r.rng.NormFloat64() * 10)
				}
			}
			return x
		}
		lseAbuf, lseBbuf := lseOf(), lseOf()
		a := attention.F32Tensor(abuf[av.pre:], av.lay)
		b := attention.F32Tensor(bbuf[bv.pre:], bv.lay)
		lseA, lseB := lseAbuf[1:1+rows], lseBbuf[1:1+rows]

		ov := makeView(kindO, nb, nh, ns, nd)
		obuf := impltest.Filled(ov.size, outGuard)
		out := attention.F32Tensor(obuf[ov.pre:], ov.lay)
		lsebuf := impltest.Filled(rows+2, outGuard)
		lse := lsebuf[1 : 1+rows]
		if inPlace {
			ov, obuf, out, lsebuf, lse = av, abuf, a, lseAbuf, lseA
		}
		wantErr := true
		switch misuse {
		case 1: // b of another shape
			l := b.Layout
			l.Dim++
			b = attention.F32Tensor(make([]float32, l.Span()+1), l)
		case 2: // short lseB
			if rows == 0 {
				wantErr = false
				break
			}
			lseB = lseB[:rows-1]
		case 3: // out is b
			if nd == 0 || rows == 0 {
				wantErr = false
				break
			}
			out, obuf = b, bbuf
		case 4: // a is not F32
			a = attention.F16Tensor(make([]fp16.Float16, av.lay.Span()+1), av.lay)
		default:
			wantErr = false
		}
		mergeHostile(t, r, "Merge", ov.lay, []attention.Tensor{a, b}, [][]float32{lseA, lseB})
		a0, b0 := append([]float32(nil), abuf...), append([]float32(nil), bbuf...)
		la0, lb0 := append([]float32(nil), lseAbuf...), append([]float32(nil), lseBbuf...)
		o0, l0 := append([]float32(nil), obuf...), append([]float32(nil), lsebuf...)
		err := attention.Merge(out, lse, a, lseA, b, lseB)
		if wantErr {
			if err == nil {
				t.Fatalf("misuse %d: Merge returned no error", misuse)
			}
			if !sameBits(obuf, o0) || !sameBits(lsebuf, l0) || !sameBits(abuf, a0) || !sameBits(bbuf, b0) ||
				!sameBits(lseAbuf, la0) || !sameBits(lseBbuf, lb0) {
				t.Fatalf("misuse %d: Merge failed (%v) but wrote", misuse, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Merge [%d %d %d %d] %v/%v/%v in place %v: %v", nb, nh, ns, nd, kindO, kindA, kindB, inPlace, err)
		}
		if !inPlace && (!sameBits(abuf, a0) || !sameBits(lseAbuf, la0)) {
			t.Fatal("Merge modified a or lseA")
		}
		if !sameBits(bbuf, b0) || !sameBits(lseBbuf, lb0) {
			t.Fatal("Merge modified b or lseB")
		}
		checkWroteOnlyOutputs(t, "Merge", ov, obuf, o0, lsebuf, l0, rows)
		got := gather(ov, obuf)
		negInf := math.Inf(-1)
		for i := range rows {
			la, lb := float64(la0[1+i]), float64(lb0[1+i])
			gl := lse[i]
			ga, xa, xb := got[i*nd:][:nd], aval[i*nd:][:nd], bval[i*nd:][:nd]
			switch {
			case la == negInf && lb == negInf:
				if gl != float32(negInf) {
					t.Fatalf("row %d: both lse −Inf: lse %v", i, gl)
				}
				for c, x := range ga {
					if math.Float32bits(x) != 0 {
						t.Fatalf("row %d: both lse −Inf: out[%d] = %v, want +0", i, c, x)
					}
				}
			case la == negInf || lb == negInf:
				keep, kl := xa, la0[1+i]
				if la == negInf {
					keep, kl = xb, lb0[1+i]
				}
				if math.Float32bits(gl) != math.Float32bits(kl) {
					t.Fatalf("row %d: lse (%v, %v): lse %v, want the other part's %v", i, la, lb, gl, kl)
				}
				if !sameBits(ga, keep) {
					t.Fatalf("row %d: lse (%v, %v): out %v, want the other part %v copied", i, la, lb, ga, keep)
				}
			case la != la || lb != lb || (math.IsInf(la, 1) && math.IsInf(lb, 1)):
				if gl == gl {
					t.Fatalf("row %d: lse (%v, %v): lse %v, want NaN", i, la, lb, gl)
				}
				for c, x := range ga {
					if x == x {
						t.Fatalf("row %d: lse (%v, %v): out[%d] = %v, want NaN", i, la, lb, c, x)
					}
				}
			default:
				var wa, wb, wl float64
				switch {
				case math.IsInf(la, 1):
					wa, wl = 1, la
				case math.IsInf(lb, 1):
					wb, wl = 1, lb
				default:
					// The weights e^(la−lse) and e^(lb−lse), written so
					// that a huge lse does not swallow ln 2.
					m := math.Max(la, lb)
					wl = m + math.Log(math.Exp(la-m)+math.Exp(lb-m))
					wa, wb = 1/(1+math.Exp(lb-la)), 1/(1+math.Exp(la-lb))
				}
				if math.IsInf(wl, 0) {
					if float64(gl) != wl {
						t.Fatalf("row %d: lse (%v, %v): lse %v, want %v", i, la, lb, gl, wl)
					}
				} else if d := math.Abs(float64(gl) - wl); !(d <= 1e-6*(1+math.Abs(wl))) {
					t.Fatalf("row %d: lse (%v, %v): lse %v, want %v", i, la, lb, gl, wl)
				}
				for c := range ga {
					ta, tb := wa*float64(xa[c]), wb*float64(xb[c])
					want := ta + tb
					w32 := float32(want)
					g := ga[c]
					if math.IsNaN(want) || math.IsInf(float64(w32), 0) {
						if !sameValue(g, w32) {
							t.Fatalf("row %d: lse (%v, %v): out[%d] = %v from %v and %v, want %v", i, la, lb, c, g, xa[c], xb[c], w32)
						}
						continue
					}
					if d := math.Abs(float64(g) - want); !(d <= 1e-6*(math.Abs(ta)+math.Abs(tb))+1e-44) {
						t.Fatalf("row %d: lse (%v, %v): out[%d] = %v from %v and %v, want %v (weights %v, %v)", i, la, lb, c, g, xa[c], xb[c], want, wa, wb)
					}
				}
			}
		}
		if inPlace {
			return
		}
		// Commutativity.
		obuf2 := impltest.Filled(ov.size, outGuard)
		lse2 := make([]float32, rows)
		if err := attention.Merge(attention.F32Tensor(obuf2[ov.pre:], ov.lay), lse2, b, lseB, a, lseA); err != nil {
			t.Fatalf("swapped Merge: %v", err)
		}
		for i := range obuf {
			if !sameValue(obuf[i], obuf2[i]) || (obuf[i] == obuf[i] && math.Float32bits(obuf[i]) != math.Float32bits(obuf2[i])) {
				t.Fatalf("Merge not commutative: out element %d %v vs %v", i, obuf[i], obuf2[i])
			}
		}
		for i := range lse2 {
			if !sameValue(lse[i], lse2[i]) {
				t.Fatalf("Merge not commutative: lse %d %v vs %v", i, lse[i], lse2[i])
			}
		}
	})
}

// FuzzMergeN merges 1 to 6 parts of random shape, layouts and log-sum-exps
// (−Inf, +Inf, NaN, huge, empty parts), in place into parts[0] or not, and
// checks the result row by row against MergeN's documented rule: no part
// above −Inf gives zeros and −Inf; one is copied bit for bit; two give
// Merge's result bit for bit; with three or more a NaN lse or two +Inf give
// NaN, one +Inf takes all the weight, and otherwise out = Σ e^(lse_i−lse)·x_i
// (in float64) within 1e-6 of the magnitude of its terms and lse within
// 1e-6·(1+|lse|). It also checks that reversing the parts changes each
// element by at most an ulp plus n·2^−52·Σ|terms|, that nothing outside out
// and lse is written, that the inputs are not modified, and that a misuse
// returns an error and writes nothing. The rest of the input draws a
// hostile merge (mergeHostile), as FuzzMerge's over the parts and lses.
func FuzzMergeN(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x01\x02\x03\x05\x02\x00\x00\x00\x01"))
	f.Add([]byte("seedseed\x00\x02\x03\x08\x05\x01\x00\x01\x02\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09"))
	f.Add([]byte("inplace!\x01\x01\x01\x04\x03\x00\x00\x02\x01\x00\x01\x02"))
	f.Add([]byte("misuse..\x01\x01\x01\x04\x02\x00\x00\x01\x01\x01\x01\x01"))
	f.Add([]byte("misuse..\x01\x01\x01\x04\x02\x00\x00\x01\x03\x01\x01\x01"))
	// Hostile calls (mergeHostile): three parts of one row of 2, then the
	// plan.
	hostile := func(plan string) []byte {
		return []byte("hostile." + "\x00\x00\x01\x02\x02\x00\x01\x00\x00\x01\x01\x00\x00\x01\x01\x00\x00\x01\x01\x00" + plan)
	}
	f.Add(hostile("\x01\x00\x00\x04\x00\x00\x00\x00\x00\x00\x04")) // out = parts[0], lse = lses[0]: in place
	f.Add(hostile("\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04")) // out = parts[1]
	f.Add(hostile("\x01\x07\x00\x05\x02\x00\x00\x00\x00\x00\x04")) // out one float before parts[0], lse on the end of lses[1]
	f.Add(hostile("\x01\x00\x00\x04\x00\x00\x00\x00\x00\x00\x15")) // in place, parts[2] = parts[0]
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x13")) // parts[2] = parts[0], lses[2] = lses[0]: valid
	f.Add(hostile("\x00\x00\x00\x07\x00\x00"))                     // lse on out
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x02\x03\x00"))         // parts[0] head dim 0
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x03\x05\x03"))         // parts[1] HeadStride MinInt
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newFuzzReader(data)
		nb, nh, ns, nd := 1+r.intn(2), 1+r.intn(3), r.intn(5), r.intn(10)
		n := 1 + r.intn(6)
		kindO := layoutKind(r.intn(3))
		inPlace := r.intn(4) == 0
		misuse := r.intn(8)
		rows := nb * nh * ns

		views := make([]view, n)
		bufs := make([][]float32, n)
		vals := make([][]float32, n)
		lseBufs := make([][]float32, n)
		parts := make([]attention.Tensor, n)
		lses := make([][]float32, n)
		for i := range n {
			views[i] = makeView(layoutKind(r.intn(3)), nb, nh, ns, nd)
			bufs[i] = impltest.Filled(views[i].size, guard)
			vals[i] = make([]float32, rows*nd)
			for j := range vals[i] {
				if r.intn(16) == 0 {
					vals[i][j] = elementSpecials[r.intn(len(elementSpecials))]
				} else {
					vals[i][j] = float32(r.rng.NormFloat64())
				}
			}
			scatter(views[i], bufs[i], vals[i], func(x float32) float32 { return x })
			lseBufs[i] = impltest.Filled(rows+2, guard)
			for j := range rows {
				if r.bool() {
					lseBufs[i][1+j] = mergeSpecials[r.intn(len(mergeSpecials))]
				} else {
					lseBufs[i][1+j] = float32(r.rng.NormFloat64() * 10)
				}
			}
			parts[i] = attention.F32Tensor(bufs[i][views[i].pre:], views[i].lay)
			lses[i] = lseBufs[i][1 : 1+rows]
		}

		ov := makeView(kindO, nb, nh, ns, nd)
		obuf := impltest.Filled(ov.size, outGuard)
		out := attention.F32Tensor(obuf[ov.pre:], ov.lay)
		lsebuf := impltest.Filled(rows+2, outGuard)
		lse := lsebuf[1 : 1+rows]
		if inPlace {
			ov, obuf, out, lsebuf, lse = views[0], bufs[0], parts[0], lseBufs[0], lses[0]
		}
		last := n - 1
		wantErr := true
		switch misuse {
		case 1: // the last part of another shape
			l := parts[last].Layout
			l.Dim++
			parts[last] = attention.F32Tensor(make([]float32, l.Span()+1), l)
		case 2: // a short lse of the last part
			if rows == 0 {
				wantErr = false
				break
			}
			lses[last] = lses[last][:rows-1]
		case 3: // out is the last part (not parts[0])
			if nd == 0 || rows == 0 || n == 1 {
				wantErr = false
				break
			}
			out, obuf = parts[last], bufs[last]
		case 4: // the last part is not F32
			parts[last] = attention.F16Tensor(make([]fp16.Float16, views[last].lay.Span()+1), views[last].lay)
		case 5: // one lse slice too few
			lses = lses[:last]
		default:
			wantErr = false
		}
		mergeHostile(t, r, "MergeN", ov.lay, parts, lses)
		copies := func(x [][]float32) [][]float32 {
			y := make([][]float32, len(x))
			for i := range x {
				y[i] = append([]float32(nil), x[i]...)
			}
			return y
		}
		bufs0, lseBufs0 := copies(bufs), copies(lseBufs)
		o0, l0 := append([]float32(nil), obuf...), append([]float32(nil), lsebuf...)
		inputsUnchanged := func(skip0 bool) bool {
			for i := range n {
				if skip0 && i == 0 {
					continue
				}
				if !sameBits(bufs[i], bufs0[i]) || !sameBits(lseBufs[i], lseBufs0[i]) {
					return false
				}
			}
			return true
		}
		err := attention.MergeN(out, lse, parts, lses)
		if wantErr {
			if err == nil {
				t.Fatalf("misuse %d: MergeN returned no error", misuse)
			}
			if !sameBits(obuf, o0) || !sameBits(lsebuf, l0) || !inputsUnchanged(false) {
				t.Fatalf("misuse %d: MergeN failed (%v) but wrote", misuse, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("MergeN of %d parts [%d %d %d %d] into %v in place %v: %v", n, nb, nh, ns, nd, kindO, inPlace, err)
		}
		if !inputsUnchanged(inPlace) {
			t.Fatal("MergeN modified an input")
		}
		checkWroteOnlyOutputs(t, "MergeN", ov, obuf, o0, lsebuf, l0, rows)
		got := gather(ov, obuf)
		negInf := math.Inf(-1)
		one := attention.BHSD(1, 1, 1, nd)
		for j := range rows {
			ga, gl := got[j*nd:][:nd], lse[j]
			var live []int
			nNaN, nInf := 0, 0
			for i := range n {
				l := float64(lseBufs0[i][1+j])
				switch {
				case l == negInf:
					continue
				case l != l:
					nNaN++
				case math.IsInf(l, 1):
					nInf++
				}
				live = append(live, i)
			}
			switch {
			case len(live) == 0:
				if gl != float32(negInf) {
					t.Fatalf("row %d: no part: lse %v", j, gl)
				}
				for c, x := range ga {
					if math.Float32bits(x) != 0 {
						t.Fatalf("row %d: no part: out[%d] = %v, want +0", j, c, x)
					}
				}
			case len(live) == 1:
				k := live[0]
				if math.Float32bits(gl) != math.Float32bits(lseBufs0[k][1+j]) || !sameBits(ga, vals[k][j*nd:][:nd]) {
					t.Fatalf("row %d: only part %d: out %v lse %v, want it copied", j, k, ga, gl)
				}
			case len(live) == 2:
				a, b := live[0], live[1]
				wo, wl := make([]float32, nd), make([]float32, 1)
				if err := attention.Merge(attention.F32Tensor(wo, one), wl,
					attention.F32Tensor(vals[a][j*nd:][:nd], one), lseBufs0[a][1+j:][:1],
					attention.F32Tensor(vals[b][j*nd:][:nd], one), lseBufs0[b][1+j:][:1]); err != nil {
					t.Fatal(err)
				}
				if math.Float32bits(gl) != math.Float32bits(wl[0]) && !(gl != gl && wl[0] != wl[0]) {
					t.Fatalf("row %d: parts %d and %d: lse %v, want Merge's %v", j, a, b, gl, wl[0])
				}
				for c := range ga {
					if math.Float32bits(ga[c]) != math.Float32bits(wo[c]) && !(ga[c] != ga[c] && wo[c] != wo[c]) {
						t.Fatalf("row %d: parts %d and %d: out[%d] = %v, want Merge's %v", j, a, b, c, ga[c], wo[c])
					}
				}
			case nNaN > 0 || nInf > 1:
				if gl == gl {
					t.Fatalf("row %d: %d NaN and %d +Inf lses: lse %v, want NaN", j, nNaN, nInf, gl)
				}
				for c, x := range ga {
					if x == x {
						t.Fatalf("row %d: %d NaN and %d +Inf lses: out[%d] = %v, want NaN", j, nNaN, nInf, c, x)
					}
				}
			default:
				w := make([]float64, n)
				var wl float64
				if nInf == 1 {
					for _, i := range live {
						if math.IsInf(float64(lseBufs0[i][1+j]), 1) {
							w[i], wl = 1, math.Inf(1)
						}
					}
				} else {
					m := negInf
					for _, i := range live {
						m = math.Max(m, float64(lseBufs0[i][1+j]))
					}
					s := 0.0
					for _, i := range live {
						s += math.Exp(float64(lseBufs0[i][1+j]) - m)
					}
					wl = m + math.Log(s)
					for _, i := range live {
						w[i] = math.Exp(float64(lseBufs0[i][1+j])-m) / s
					}
				}
				if math.IsInf(wl, 0) {
					if float64(gl) != wl {
						t.Fatalf("row %d: lse %v, want %v", j, gl, wl)
					}
				} else if d := math.Abs(float64(gl) - wl); !(d <= 1e-6*(1+math.Abs(wl))) {
					t.Fatalf("row %d: lse %v, want %v", j, gl, wl)
				}
				for c := range ga {
					want, mag := 0.0, 0.0
					for _, i := range live {
						term := w[i] * float64(vals[i][j*nd+c])
						want += term
						mag += math.Abs(term)
					}
					w32 := float32(want)
					if math.IsNaN(want) || math.IsInf(float64(w32), 0) {
						if !sameValue(ga[c], w32) {
							t.Fatalf("row %d: out[%d] = %v, want %v", j, c, ga[c], w32)
						}
						continue
					}
					if d := math.Abs(float64(ga[c]) - want); !(d <= 1e-6*mag+1e-44) {
						t.Fatalf("row %d: out[%d] = %v, want %v (weights %v)", j, c, ga[c], want, w)
					}
				}
			}
		}
		if inPlace {
			return
		}
		// The parts reversed: within an ulp plus n·2^−52·Σ|x_i| (weights
		// are at most 1), or the same NaN-ness and infinity.
		rp, rl := make([]attention.Tensor, n), make([][]float32, n)
		for i := range n {
			rp[i], rl[i] = parts[n-1-i], lses[n-1-i]
		}
		obuf2 := impltest.Filled(ov.size, outGuard)
		lse2 := make([]float32, rows)
		if err := attention.MergeN(attention.F32Tensor(obuf2[ov.pre:], ov.lay), lse2, rp, rl); err != nil {
			t.Fatalf("reversed MergeN: %v", err)
		}
		got2 := gather(ov, obuf2)
		near := func(a, b float32, sum float64) bool {
			if a != a || b != b || math.IsInf(float64(a), 0) || math.IsInf(float64(b), 0) {
				return sameValue(a, b)
			}
			return math.Abs(float64(a)-float64(b)) <= math.Max(impltest.ULP(a), impltest.ULP(b))+float64(n)*0x1p-52*sum
		}
		for j := range rows {
			if !near(lse[j], lse2[j], 0) {
				t.Fatalf("reversed parts: lse %d %v vs %v", j, lse[j], lse2[j])
			}
			for c := range nd {
				sum := 0.0 // over the parts that are read: the others may hold NaN
				for i := range n {
					if !math.IsInf(float64(lseBufs0[i][1+j]), -1) {
						sum += math.Abs(float64(vals[i][j*nd+c]))
					}
				}
				if !near(got[j*nd+c], got2[j*nd+c], sum) {
					t.Fatalf("reversed parts: row %d element %d: %v vs %v", j, c, got[j*nd+c], got2[j*nd+c])
				}
			}
		}
	})
}

// mergeHostile makes FuzzMerge's (fn "Merge": parts a and b) or
// FuzzMergeN's hostile call (see fzPlan): the merge just drawn (misuse
// included; out of layout outLay), over copies of the parts and lses in an
// arena, with out and lse placed on any input, on each other or next to
// one, out taking the layout of the part it lies on (flags bit 2: the
// in-place form when that part is a or parts[0], a near miss by layout or
// offset otherwise), a part or lse aliasing the first (flags bits 0 and 1:
// inputs may overlap), and a dimension or stride of out or a part changed
// to 0 or a negative number (field 7: no rows). A call that breaks a rule
// of Merge's documentation must fail and change nothing; a valid one must
// write only its outputs, with the bits of the same merge over plain BHSD
// copies of the inputs.
func mergeHostile(t *testing.T, r *fuzzReader, fn string, outLay attention.Layout, parts []attention.Tensor, lses [][]float32) {
	plan := readFzPlan(r)
	if !plan.on() {
		return
	}
	rows, outN := fzRowCount(outLay), outLay.Span()
	pad := max(outN, rows)
	var sizes []int
	for _, p := range parts {
		pad = max(pad, p.Span())
		sizes = append(sizes, fzTensorSize(p)...)
	}
	for _, l := range lses {
		sizes = append(sizes, 4*len(l))
	}
	pad += 16
	a := newFzArena(pad, plan.gap(pad), append(sizes, 4*outN, 4*rows)...)
	ps, ls := make([]attention.Tensor, len(parts)), make([][]float32, len(lses))
	for i := range parts {
		ps[i] = fzTensorTo(a, parts[i])
	}
	for i := range lses {
		ls[i] = fzCopy(a, lses[i])
	}
	outHome, lseHome := a.floats(outN, outGuard), a.floats(rows, outGuard)
	room := a.bytes()
	partName, lseName := func(i int) string { return fmt.Sprintf("parts[%d]", i) }, func(i int) string { return fmt.Sprintf("lses[%d]", i) }
	if fn == "Merge" {
		partName, lseName = func(i int) string { return [...]string{"a", "b"}[i] }, func(i int) string { return [...]string{"lseA", "lseB"}[i] }
	}

	// Inputs that overlap each other (allowed), then (b) a dimension or
	// stride of out or a part.
	aliases := ""
	if len(ps) >= 2 {
		j := 1 + int(plan.flags>>4)%(len(ps)-1)
		if plan.flags&1 != 0 {
			ps[j], aliases = ps[0], fmt.Sprintf(" %s = %s", partName(j), partName(0))
		}
		if plan.flags&2 != 0 && j < len(ls) {
			ls[j], aliases = ls[0], aliases+fmt.Sprintf(" %s = %s", lseName(j), lseName(0))
		}
	}
	hl, dims := outLay, ""
	if plan.dimsSel != 0 {
		if plan.dimsField == 7 {
			hl.Seq, dims = 0, "no rows"
			for i := range ps {
				ps[i].Seq = 0
			}
		} else {
			i := (plan.dimsSel - 1) % (1 + len(ps))
			l, name := &hl, "out"
			if i > 0 {
				l, name = &ps[i-1].Layout, partName(i-1)
			}
			*fzField(l, plan.dimsField) = plan.value()
			dims = fmt.Sprintf("%s.%s = %d", name, fzFieldNames[plan.dimsField], plan.value())
		}
	}

	// (a) out and lse on an input, on each other, or next to one.
	var ins []fzIn
	for i, p := range ps {
		ins = append(ins, fzTensorIns(partName(i), p, room)...)
	}
	for i, l := range ls {
		ins = append(ins, fzSliceIn(lseName(i), l[:min(len(l), rows)], room))
	}
	out := attention.F32Tensor(outHome, hl)
	outAt, lseAt := "its own place", "its own place"
	if tg, ok := fzPick(plan.outSel, append(ins, fzSliceIn("lse's place", lseHome, room))); ok {
		l := hl
		if plan.flags&4 != 0 && tg.lay != nil {
			l = *tg.lay
		}
		n := outN
		if l.Validate() == nil {
			n = l.Span()
		}
		if s, ok := fzPlace(tg, n, plan.outMode, plan.outOff); ok {
			out, outAt = attention.F32Tensor(s, l), fmt.Sprintf("%s (mode %d, layout %+v)", tg.name, plan.outMode, l)
		}
	}
	lse := lseHome
	ot := fzOut("out", out)
	ot.room = room
	if tg, ok := fzPick(plan.lseSel, append(ins, ot)); ok {
		if s, ok := fzPlace(tg, rows, plan.lseMode, plan.lseOff); ok {
			lse, lseAt = s, fmt.Sprintf("%s (mode %d)", tg.name, plan.lseMode)
		}
	}
	rowsNow := 0 // the rows of out as placed (it may have taken a part's layout)
	if out.Layout.Validate() == nil {
		rowsNow = fzRowCount(out.Layout)
	}
	what := fmt.Sprintf("hostile %s of %d parts (%s,%s, out on %s, lse on %s) %v", fn, len(ps), dims, aliases, outAt, lseAt, plan)
	call := func(out attention.Tensor, lse []float32, ps []attention.Tensor, ls [][]float32) error {
		if fn == "Merge" {
			return attention.Merge(out, lse, ps[0], ls[0], ps[1], ls[1])
		}
		return attention.MergeN(out, lse, ps, ls)
	}

	why := fzMergeMisuse(out, lse, ps, ls)
	var cleanOut attention.Tensor
	var cleanLSE []float32
	if why == "" {
		// The same merge over plain BHSD copies, made before the call
		// that may merge in place.
		l := out.Layout
		bl := attention.BHSD(l.Batch, l.Heads, l.Seq, l.Dim)
		cleanOut, cleanLSE = attention.F32Tensor(impltest.Filled(bl.Span(), outGuard), bl), impltest.Filled(rows, outGuard)
		cps, cls := make([]attention.Tensor, len(ps)), make([][]float32, len(ls))
		for i, p := range ps {
			cps[i] = fzMaterialize(p, bl)
		}
		for i, x := range ls {
			cls[i] = append([]float32(nil), x...)
		}
		if err := call(cleanOut, cleanLSE, cps, cls); err != nil {
			t.Fatalf("%s: the same merge of plain copies failed: %v", what, err)
		}
	}
	before := fzSnap(room)
	err := fzCall(t, what, func() error { return call(out, lse, ps, ls) })
	fzCheck(t, what, err, why != "", why, false, room, before, ins, out, cleanOut, lse, cleanLSE, rowsNow)
}

// fzMergeMisuse returns why MergeN(out, lse, parts, lses) (or Merge with
// parts a, b) must fail by its documentation, or "" when it must succeed:
// no parts, one lse slice per part, F32 views of one shape, out's elements
// distinct, lse slices of B·H·N elements, and no overlap in memory between
// out or lse and an input, or between them, except out the very same view
// as parts[0] and lse starting where lses[0] does.
func fzMergeMisuse(out attention.Tensor, lse []float32, parts []attention.Tensor, lses [][]float32) string {
	switch {
	case len(parts) == 0:
		return "no parts"
	case len(lses) != len(parts):
		return "not one lse slice per part"
	case out.Validate() != nil || out.DType() != attention.F32:
		return "out is not a valid F32 view"
	}
	l := out.Layout
	for i, p := range parts {
		if p.Validate() != nil || p.DType() != attention.F32 {
			return fmt.Sprintf("part %d is not a valid F32 view", i)
		}
		if p.Batch != l.Batch || p.Heads != l.Heads || p.Seq != l.Seq || p.Dim != l.Dim {
			return fmt.Sprintf("part %d has another shape", i)
		}
	}
	if !fzInjective(l) {
		return "out's elements collide"
	}
	rows := fzRowCount(l)
	if len(lse) < rows {
		return "lse is short"
	}
	for i, x := range lses {
		if len(x) < rows {
			return fmt.Sprintf("lse %d is short", i)
		}
	}
	ot, lt := fzOut("out", out), fzLSE(lse, rows)
	if ot.overlaps(lt) {
		return "out overlaps lse"
	}
	for i, p := range parts {
		pt := fzOut("part", p)
		if ot.overlaps(pt) && !(i == 0 && ot.lo == pt.lo && p.Layout == l) {
			return fmt.Sprintf("out overlaps part %d (not in place)", i)
		}
		if lt.overlaps(pt) {
			return fmt.Sprintf("lse overlaps part %d", i)
		}
	}
	for i, x := range lses {
		xt := fzLSE(x, rows)
		if ot.overlaps(xt) {
			return fmt.Sprintf("out overlaps lse %d", i)
		}
		if lt.overlaps(xt) && !(i == 0 && lt.lo == xt.lo) {
			return fmt.Sprintf("lse overlaps lse %d (not in place)", i)
		}
	}
	return ""
}
