package attention_test

import (
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/internal/impltest"
)

// The fuzz targets' hostile calls. After drawing its problem, each
// target reads a plan (fzPlan) from the rest of its input and, when the
// plan asks for anything, makes one more call of its entry point over
// copies of the inputs laid out in an arena (fzArena): out and lse may be
// placed on the memory of any input the call reads, on each other, or next
// to an input (a near miss, which is valid), and one dimension or stride of
// q, out, the keys or values may be zero or negative. The target then
// checks that the call did not panic, that it failed exactly when the
// promise says it must (an output that shares memory with an input, or
// with the other output, always fails, except Merge's documented in-place
// forms), that a failed call changed no byte of the arena (nor of the
// caches' storage), and that a successful call wrote only the outputs'
// elements, with the bits of the same call on plain copies of the inputs.
// The target's own problem, drawn from the start of the input, and its
// checks are untouched, so a corpus entry keeps its meaning.

// fzArena is one Go allocation that holds copies of a call's inputs, each
// region 8-byte aligned, with pad floats before the first and after the
// last and gap floats between regions: an output placed on an input, or
// next to it, stays inside the arena. It holds no pointers: only float32,
// integers, fp16 and bool are copied into it.
type fzArena struct {
	mem       []float32
	next, end int // the next free float; where the trailing pad begins
	gap       int
}

// newFzArena returns an arena for regions of the given byte sizes.
func newFzArena(pad, gap int, sizes ...int) *fzArena {
	n := 2 * pad
	for _, b := range sizes {
		n += fzFloats(b) + gap
	}
	return &fzArena{mem: make([]float32, n), next: pad, end: n - pad, gap: gap}
}

// fzFloats is the number of floats a region of nbytes takes (whole 8-byte
// words).
func fzFloats(nbytes int) int { return (nbytes + 7) / 8 * 2 }

// carve returns the next nbytes of the arena.
func (a *fzArena) carve(nbytes int) []byte {
	f := fzFloats(nbytes)
	if a.next+f > a.end {
		panic(fmt.Sprintf("fzArena: %d bytes do not fit (%d of %d floats used)", nbytes, a.next, a.end))
	}
	b := sliceBytes(a.mem[a.next : a.next+f])[:nbytes]
	a.next += f + a.gap
	return b
}

// floats returns n float32 of the arena, filled with x.
func (a *fzArena) floats(n int, x float32) []float32 {
	s := fzAs[float32](a.carve(4 * n))
	for i := range s {
		s[i] = x
	}
	return s
}

// bytes returns the whole arena's memory.
func (a *fzArena) bytes() []byte { return sliceBytes(a.mem) }

// fzAs reinterprets b as a slice of T (a type without pointers).
func fzAs[T any](b []byte) []T {
	if b == nil {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(z)))
}

// fzCopy copies s into the arena (nil stays nil).
func fzCopy[T any](a *fzArena, s []T) []T {
	if s == nil {
		return nil
	}
	src := sliceBytes(s)
	b := a.carve(len(src))
	copy(b, src)
	return fzAs[T](b)
}

// fzTensorBytes returns the memory behind a view's slice and, for Q8 and
// fp8, its scales (nil for the zero Tensor).
func fzTensorBytes(t attention.Tensor) (data, scales []byte) {
	m := attention.TensorMemory(t)
	switch len(m) {
	case 0:
		return nil, nil
	case 1:
		return m[0], nil
	}
	return m[0], m[1]
}

// fzTensorOf makes a view of element type dt over data (and scales).
func fzTensorOf(dt attention.DType, data, scales []byte, l attention.Layout) attention.Tensor {
	switch dt {
	case attention.F16:
		return attention.F16Tensor(fzAs[fp16.Float16](data), l)
	case attention.BF16:
		return attention.BF16Tensor(fzAs[fp16.BFloat16](data), l)
	case attention.Q8:
		return attention.Q8Tensor(fzAs[int8](data), fzAs[float32](scales), l)
	case attention.FP8E4M3:
		return attention.FP8E4M3Tensor(fzAs[fp16.Float8E4M3](data), fzAs[float32](scales), l)
	case attention.FP8E5M2:
		return attention.FP8E5M2Tensor(fzAs[fp16.Float8E5M2](data), fzAs[float32](scales), l)
	case attention.F32:
		return attention.F32Tensor(fzAs[float32](data), l)
	}
	return attention.Tensor{}
}

// fzTensorTo copies the slice behind t (and its scales) into the arena and
// returns the same view of the copy.
func fzTensorTo(a *fzArena, t attention.Tensor) attention.Tensor {
	if t.DType() == 0 {
		return t
	}
	data, scales := fzTensorBytes(t)
	d := a.carve(len(data))
	copy(d, data)
	var s []byte
	if scales != nil {
		s = a.carve(len(scales))
		copy(s, scales)
	}
	return fzTensorOf(t.DType(), d, s, t.Layout)
}

// fzTensorSize is the number of bytes fzTensorTo carves for t.
func fzTensorSize(t attention.Tensor) []int {
	data, scales := fzTensorBytes(t)
	return []int{len(data), len(scales)}
}

// fzMaterialize returns a fresh view of layout to (of the same sizes as
// t's) holding the elements t reads: a plain copy of t when to is t's
// layout, the values a view with zero strides repeats otherwise.
func fzMaterialize(t attention.Tensor, to attention.Layout) attention.Tensor {
	from := t.Layout
	dt := t.DType()
	es := dt.Size()
	data, scales := fzTensorBytes(t)
	n := max(to.Span(), 0)
	nd := sliceBytes(make([]float32, (n*es+3)/4))[:n*es]
	var ns []byte
	switch dt {
	case attention.Q8:
		ns = sliceBytes(make([]float32, (n+attention.Q8Block-1)/attention.Q8Block))
	case attention.FP8E4M3, attention.FP8E5M2:
		ns = append([]byte(nil), scales...) // per tensor or head: the layout does not move them
	}
	if n > 0 {
		d := to.Dim
		for b := range to.Batch {
			for h := range to.Heads {
				for s := range to.Seq {
					fo, too := from.Offset(b, h, s), to.Offset(b, h, s)
					copy(nd[too*es:][:d*es], data[fo*es:][:d*es])
					if dt == attention.Q8 {
						const q = attention.Q8Block
						copy(ns[too/q*4:][:d/q*4], scales[fo/q*4:][:d/q*4])
					}
				}
			}
		}
	}
	return fzTensorOf(dt, nd, ns, to)
}

// fzIn is a buffer a call reads, as its overlap checks see it: the bytes
// [lo, hi), and the allocation (room) around them where an output may be
// placed without running past its end (nil: none).
type fzIn struct {
	name   string
	lo, hi uintptr
	room   []byte
	lay    *attention.Layout // an F32 tensor input's layout (Merge's in-place form)
}

func (x fzIn) overlaps(y fzIn) bool {
	return x.lo < x.hi && y.lo < y.hi && x.lo < y.hi && y.lo < x.hi
}

func (x fzIn) String() string { return x.name }

func fzAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// fzTensorIns returns the memory a view of a valid layout reads: its
// elements' span and, for Q8, the span of their scales.
func fzTensorIns(name string, t attention.Tensor, room []byte) []fzIn {
	if t.DType() == 0 || t.Layout.Validate() != nil {
		return nil
	}
	n := t.Span()
	data, scales := fzTensorBytes(t)
	lo := fzAddr(data)
	in := fzIn{name: name, lo: lo, hi: lo + uintptr(n*t.DType().Size()), room: room}
	if room == nil {
		in.room = data
	}
	if t.DType() == attention.F32 {
		l := t.Layout
		in.lay = &l
	}
	ins := []fzIn{in}
	if scales != nil {
		lo := fzAddr(scales)
		hi := lo + uintptr((n+attention.Q8Block-1)/attention.Q8Block*4)
		if t.DType() != attention.Q8 {
			hi = lo + uintptr(len(scales)) // fp8: every scale
			if n == 0 {
				hi = lo
			}
		}
		s := fzIn{name: name + " scales", lo: lo, hi: hi, room: room}
		if room == nil {
			s.room = scales
		}
		ins = append(ins, s)
	}
	return ins
}

// fzSliceIn returns the memory of the elements of s.
func fzSliceIn[T any](name string, s []T, room []byte) fzIn {
	b := sliceBytes(s)
	lo := fzAddr(b)
	return fzIn{name: name, lo: lo, hi: lo + uintptr(len(b)), room: room}
}

// fzOptionIns returns the memory of the options' slices and masks.
func fzOptionIns(o attention.Options, room []byte) []fzIn {
	ins := fzTensorIns("Options.Mask", o.Mask, room)
	if m := o.BoolMask; m.Data != nil && m.Layout.Validate() == nil && len(m.Data) >= m.Span() {
		ins = append(ins, fzSliceIn("Options.BoolMask.Data", m.Data[:m.Span()], room))
	}
	if o.Slopes != nil {
		ins = append(ins, fzSliceIn("Options.Slopes", o.Slopes, room))
	}
	if o.Sinks != nil {
		ins = append(ins, fzSliceIn("Options.Sinks", o.Sinks, room))
	}
	if o.CuSeqQ != nil {
		ins = append(ins, fzSliceIn("Options.CuSeqQ", o.CuSeqQ, room))
	}
	if o.CuSeqKV != nil {
		ins = append(ins, fzSliceIn("Options.CuSeqKV", o.CuSeqKV, room))
	}
	return ins
}

// fzOut returns the memory an output view of a valid layout may write.
func fzOut(name string, t attention.Tensor) fzIn {
	if t.Layout.Validate() != nil {
		return fzIn{name: name}
	}
	lo := fzAddr(sliceBytes(t.Float32s()))
	return fzIn{name: name, lo: lo, hi: lo + uintptr(4*t.Span())}
}

// fzLSE returns the memory of the first rows elements of lse (none when
// lse is shorter: the call fails before it looks at overlaps).
func fzLSE(lse []float32, rows int) fzIn {
	if lse == nil || rows <= 0 || len(lse) < rows {
		return fzIn{name: "lse"}
	}
	return fzSliceIn("lse", lse[:rows], nil)
}

// fzOverlap returns the first input that x overlaps.
func fzOverlap(x fzIn, ins []fzIn) (fzIn, bool) {
	for _, in := range ins {
		if x.overlaps(in) {
			return in, true
		}
	}
	return fzIn{}, false
}

// fzPlace returns n float32 placed in in.room relative to the input's
// bytes: mode 0 at its start, 1 at an offset (off/256 of the way in), 2 on
// its last word, 3 ending on its first word, 4 ending just before it (a
// near miss), 5 starting just after it (a near miss), 6 one float past its
// start, 7 one float before it. It reports false when they do not fit in
// the room (or there is none).
func fzPlace(in fzIn, n, mode int, off byte) ([]float32, bool) {
	if len(in.room) == 0 || n < 0 {
		return nil, false
	}
	base := fzAddr(in.room)
	end := base + uintptr(len(in.room))
	size := uintptr(4 * n)
	lo, hi := in.lo&^3, (in.hi+3)&^3
	var start uintptr
	switch mode {
	case 0:
		start = lo
	case 1:
		start = (in.lo + (in.hi-in.lo)*uintptr(off)/256) &^ 3
	case 2:
		start = hi - 4
	case 3:
		start = lo + 4 - size
	case 4:
		start = lo - size
	case 5:
		start = hi
	case 6:
		start = lo + 4
	default:
		start = lo - 4
	}
	if start < base || start > end || size > end-start {
		return nil, false
	}
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(in.room)), int(start-base))
	return unsafe.Slice((*float32)(p), n), true
}

// fzPlan is what a target's hostile call draws from the end of its input.
type fzPlan struct {
	outSel, outMode int // out: 0 in its own place, else on target outSel−1 (mod the targets) by fzPlace's mode
	outOff          byte
	lseSel, lseMode int // lse likewise (its last target is out)
	lseOff          byte
	dimsSel         int // 0: no change; else the tensor (dimsSel−1 mod the target's list)
	dimsField       int // 0–3 Batch, Heads, Seq, Dim; 4–6 the strides; 7 a target-specific change
	dimsValue       int // index into fzDimValues
	wide            bool
	flags           byte // target-specific
}

// fzDimValues are the values a changed dimension or stride takes.
var fzDimValues = [4]int{0, 0, -1, math.MinInt}

func readFzPlan(r *fuzzReader) fzPlan {
	var p fzPlan
	p.outSel, p.outMode, p.outOff = int(r.byte()), r.intn(8), r.byte()
	p.lseSel, p.lseMode, p.lseOff = int(r.byte()), r.intn(8), r.byte()
	p.dimsSel, p.dimsField, p.dimsValue = int(r.byte()), r.intn(8), r.intn(4)
	p.wide = r.bool()
	p.flags = r.byte()
	return p
}

func (p fzPlan) on() bool { return p.outSel != 0 || p.lseSel != 0 || p.dimsSel != 0 || p.flags != 0 }

func (p fzPlan) value() int { return fzDimValues[p.dimsValue] }

// gap returns the floats between arena regions: pad (room for a near miss
// that touches nothing else) or none.
func (p fzPlan) gap(pad int) int {
	if p.wide {
		return pad
	}
	return 0
}

// String describes the plan in failure messages.
func (p fzPlan) String() string {
	return fmt.Sprintf("plan{out %d mode %d off %d, lse %d mode %d off %d, dims %d field %d value %d, wide %v, flags %#x}",
		p.outSel, p.outMode, p.outOff, p.lseSel, p.lseMode, p.lseOff, p.dimsSel, p.dimsField, p.value(), p.wide, p.flags)
}

// fzPick returns the target sel (1-based, modulo the targets) or false
// for 0.
func fzPick(sel int, targets []fzIn) (fzIn, bool) {
	if sel == 0 || len(targets) == 0 {
		return fzIn{}, false
	}
	return targets[(sel-1)%len(targets)], true
}

// fzField returns the field f (0–6) of l.
func fzField(l *attention.Layout, f int) *int {
	return [...]*int{&l.Batch, &l.Heads, &l.Seq, &l.Dim, &l.BatchStride, &l.HeadStride, &l.SeqStride}[f]
}

var fzFieldNames = [...]string{"Batch", "Heads", "Seq", "Dim", "BatchStride", "HeadStride", "SeqStride"}

// fzStepped returns the size of the dimension that stride field f (4–6)
// steps.
func fzStepped(l attention.Layout, f int) int {
	return [...]int{l.Batch, l.Heads, l.Seq}[f-4]
}

// fzChange is the effect of a change of one field of a layout (what
// fzClassify says): none, a certain misuse, valid with the same elements
// read, or valid with other elements read (a zero stride that repeats
// them).
type fzChange int

const (
	fzNone fzChange = iota
	fzInvalid
	fzSame
	fzRepeat
)

// fzClassify applies value v to field f of l (a valid layout) and says
// what it does to a tensor that is an input whose sizes must not change
// (rows: its rows must not overlap, as K's and V's; out: its elements must
// be distinct).
func fzClassify(l *attention.Layout, f, v int, rows, out bool) fzChange {
	p := fzField(l, f)
	old := *p
	*p = v
	switch {
	case old == v:
		return fzNone
	case v < 0:
		return fzInvalid
	case f < 4: // a size set to 0: the shapes no longer match
		return fzInvalid
	case out:
		if !fzInjective(*l) {
			return fzInvalid
		}
		return fzSame
	case rows && f == 6 && l.Seq >= 2:
		return fzInvalid
	case fzStepped(*l, f) >= 2 && l.Span() > 0:
		return fzRepeat
	}
	return fzSame
}

// fzInjective reports whether the elements of l are distinct, by the
// sufficient condition the package documents for an output: ordered by
// stride, each dimension steps past what the smaller ones span.
func fzInjective(l attention.Layout) bool {
	if l.Batch == 0 || l.Heads == 0 || l.Seq == 0 || l.Dim == 0 {
		return true
	}
	dims := [4][2]int{{l.Dim, 1}, {l.Seq, l.SeqStride}, {l.Heads, l.HeadStride}, {l.Batch, l.BatchStride}}
	for i := 1; i < len(dims); i++ {
		for j := i; j > 0 && dims[j][1] < dims[j-1][1]; j-- {
			dims[j], dims[j-1] = dims[j-1], dims[j]
		}
	}
	extent := 0
	for _, d := range dims {
		if d[0] <= 1 {
			continue
		}
		if d[1] <= extent {
			return false
		}
		extent += (d[0] - 1) * d[1]
	}
	return true
}

// fzRowCount is B·H·N of a valid layout.
func fzRowCount(l attention.Layout) int { return l.Batch * l.Heads * l.Seq }

// fzCall runs f, turning a panic into a test failure.
func fzCall(t *testing.T, what string, f func() error) error {
	t.Helper()
	var p any
	err := func() (err error) {
		defer func() { p = recover() }()
		return f()
	}()
	if p != nil {
		t.Fatalf("%s panicked: %v", what, p)
	}
	return err
}

// fzSnap copies memories.
func fzSnap(mems ...[]byte) [][]byte {
	s := make([][]byte, len(mems))
	for i, m := range mems {
		s[i] = append([]byte(nil), m...)
	}
	return s
}

// fzUnchanged fails unless every memory holds what its snapshot does;
// names (the call's inputs) say where a changed byte lies.
func fzUnchanged(t *testing.T, what string, before [][]byte, mems [][]byte, names []fzIn) {
	t.Helper()
	for i, m := range mems {
		for j := range m {
			if m[j] != before[i][j] {
				t.Fatalf("%s: byte %d of memory %d changed (%s)", what, j, i, fzWhere(fzAddr(m)+uintptr(j), names))
			}
		}
	}
}

// fzWhere names the input that holds address p.
func fzWhere(p uintptr, names []fzIn) string {
	for _, in := range names {
		if in.lo <= p && p < in.hi {
			return "in " + in.name
		}
	}
	return "in no input"
}

// fzWroteOnly fails unless room differs from before only at the elements
// of out and the first rows elements of lse (either may lie elsewhere).
func fzWroteOnly(t *testing.T, what string, room, before []byte, out attention.Tensor, lse []float32, rows int, names []fzIn) {
	t.Helper()
	base, end := fzAddr(room), fzAddr(room)+uintptr(len(room))
	allowed := make([]bool, len(room))
	mark := func(lo uintptr, n int) {
		for i := range uintptr(n) {
			if p := lo + i; p >= base && p < end {
				allowed[p-base] = true
			}
		}
	}
	if l := out.Layout; l.Span() > 0 {
		ob := fzAddr(sliceBytes(out.Float32s()))
		for b := range l.Batch {
			for h := range l.Heads {
				for s := range l.Seq {
					mark(ob+uintptr(4*l.Offset(b, h, s)), 4*l.Dim)
				}
			}
		}
	}
	if rows > 0 {
		mark(fzAddr(sliceBytes(lse)), 4*rows)
	}
	for i := range room {
		if !allowed[i] && room[i] != before[i] {
			t.Fatalf("%s: wrote byte %d of the arena outside out and lse (%s)", what, i, fzWhere(base+uintptr(i), names))
		}
	}
}

// fzValues returns the elements of an F32 view in canonical order.
func fzValues(t attention.Tensor) []float32 {
	return gather(view{lay: t.Layout, size: t.Len()}, t.Float32s())
}

// fzSameOutputs fails unless the hostile call's out and lse hold the bits
// of the clean call's.
func fzSameOutputs(t *testing.T, what string, out, cleanOut attention.Tensor, lse, cleanLSE []float32, rows int) {
	t.Helper()
	got, want := fzValues(out), fzValues(cleanOut)
	if !sameBits(got, want) {
		t.Fatalf("%s: out differs from the same call on plain copies:\n%v\n%v", what, got, want)
	}
	if rows > 0 && !sameBits(lse[:rows], cleanLSE[:rows]) {
		t.Fatalf("%s: lse differs from the same call on plain copies:\n%v\n%v", what, lse[:rows], cleanLSE[:rows])
	}
}

// pagedKVHostile makes FuzzPagedKV's hostile call (see fzPlan): the call
// just drawn, ForwardPagedKV or (flags bit 2, or an lse placed) its LSE
// form, with sinks (flags bit 0) and ALiBi slopes (bit 1), over copies of
// q, the pools, the block table and the lengths in an arena, with out and
// lse placed on any of them, on each other or next to one, and q, out, a
// pool or both pools with a dimension or stride changed to 0 or a negative
// number (field 7: no queries, a negative MaxBlocks or a negative length).
// Whether the call is valid otherwise is what the same call over the
// unchanged copies says. A call that must fail must change nothing; one
// that may succeed must write only its outputs, with the bits of the same
// call with plain outputs (and, where a zero stride repeats elements, over
// copies that hold them repeated).
func pagedKVHostile(t *testing.T, r *fuzzReader, e *attention.Engine, q attention.Tensor, kv attention.PagedKV, opts attention.Options, outLay attention.Layout) {
	plan := readFzPlan(r)
	if !plan.on() {
		return
	}
	useLSE := plan.flags&4 != 0 || plan.lseSel != 0
	hq := q.Heads
	if plan.flags&1 != 0 {
		opts.Sinks = make([]float32, hq)
		for h := range opts.Sinks {
			opts.Sinks[h] = 0.5 - float32(h)
		}
	}
	if plan.flags&2 != 0 {
		opts.Slopes = make([]float32, hq)
		for h := range opts.Slopes {
			opts.Slopes[h] = 0.125 * float32(h+1)
		}
	}
	rows, outN := fzRowCount(q.Layout), outLay.Span()
	pad := max(outN, rows) + 16
	var sizes []int
	for _, x := range []attention.Tensor{q, kv.K, kv.V} {
		sizes = append(sizes, fzTensorSize(x)...)
	}
	sizes = append(sizes, 4*len(kv.BlockTable), 4*len(kv.SeqLens), 4*len(opts.Slopes), 4*len(opts.Sinks), 4*outN, 4*rows)
	a := newFzArena(pad, plan.gap(pad), sizes...)
	qA := fzTensorTo(a, q)
	kvA := attention.PagedKV{K: fzTensorTo(a, kv.K), V: fzTensorTo(a, kv.V), BlockTable: fzCopy(a, kv.BlockTable), MaxBlocks: kv.MaxBlocks, SeqLens: fzCopy(a, kv.SeqLens)}
	o := opts
	o.Slopes, o.Sinks = fzCopy(a, opts.Slopes), fzCopy(a, opts.Sinks)
	outHome := a.floats(outN, outGuard)
	var lseHome []float32
	if useLSE {
		lseHome = a.floats(rows, outGuard)
	}
	room := a.bytes()
	call := func(out attention.Tensor, lse []float32, q attention.Tensor, kv attention.PagedKV) error {
		if useLSE {
			return e.ForwardPagedKVLSE(out, lse, q, kv, o)
		}
		return e.ForwardPagedKV(out, q, kv, o)
	}
	plain := func(q attention.Tensor, kv attention.PagedKV) (attention.Tensor, []float32, error) {
		out := attention.F32Tensor(impltest.Filled(outN, outGuard), outLay)
		var lse []float32
		if useLSE {
			lse = impltest.Filled(rows, outGuard)
		}
		return out, lse, call(out, lse, q, kv)
	}
	// Is the call valid but for what follows? (And its result if so.)
	cleanOut, cleanLSE, baseErr := plain(qA, kvA)

	// (b) A dimension or stride of q, out, a pool or both, MaxBlocks or
	// a length.
	hl := outLay
	change, empty, dims := fzNone, false, ""
	allEmpty := true
	for _, n := range kv.SeqLens {
		allEmpty = allEmpty && n == 0
	}
	if plan.dimsSel != 0 {
		i := (plan.dimsSel - 1) % 5
		f, v := plan.dimsField, plan.value()
		switch {
		case f == 7 && plan.dimsValue < 2:
			qA.Seq, hl.Seq, empty, change, dims = 0, 0, true, fzSame, "no queries"
		case f == 7 && plan.dimsValue == 2:
			kvA.MaxBlocks, change, dims = -1, fzInvalid, "MaxBlocks -1"
		case f == 7:
			if len(kvA.SeqLens) > 0 {
				kvA.SeqLens[len(kvA.SeqLens)-1], change, dims = -1, fzInvalid, "a length -1"
			}
		case i == 0:
			change, dims = fzClassify(&qA.Layout, f, v, false, false), fmt.Sprintf("q.%s = %d", fzFieldNames[f], v)
		case i == 1:
			change, dims = fzClassify(&hl, f, v, false, true), fmt.Sprintf("out.%s = %d", fzFieldNames[f], v)
		case i == 2:
			change, dims = fzClassify(&kvA.K.Layout, f, v, true, false), fmt.Sprintf("kv.K.%s = %d", fzFieldNames[f], v)
		case i == 3:
			change, dims = fzClassify(&kvA.V.Layout, f, v, true, false), fmt.Sprintf("kv.V.%s = %d", fzFieldNames[f], v)
		default:
			ck, cv := fzClassify(&kvA.K.Layout, f, v, true, false), fzClassify(&kvA.V.Layout, f, v, true, false)
			change, dims = max(ck, cv), fmt.Sprintf("the pools' %s = %d", fzFieldNames[f], v)
			if f == 0 && v == 0 && allEmpty {
				change = fzSame // no blocks, and no sequence reads one
			}
		}
	}

	// (a) out and lse on an input, on each other, or next to one.
	ins := fzPagedKVIns(room, qA, kvA, o)
	out := attention.F32Tensor(outHome, hl)
	outAt, lseAt := "its own place", "its own place"
	if tg, ok := fzPick(plan.outSel, append(ins, fzSliceIn("lse's place", lseHome, room))); ok {
		n := outN
		if hl.Validate() == nil {
			n = hl.Span()
		}
		if s, ok := fzPlace(tg, n, plan.outMode, plan.outOff); ok {
			out, outAt = attention.F32Tensor(s, hl), fmt.Sprintf("%s (mode %d)", tg.name, plan.outMode)
		}
	}
	lse := lseHome
	if useLSE {
		ot := fzOut("out", out)
		ot.room = room
		if tg, ok := fzPick(plan.lseSel, append(ins, ot)); ok {
			if s, ok := fzPlace(tg, rows, plan.lseMode, plan.lseOff); ok {
				lse, lseAt = s, fmt.Sprintf("%s (mode %d)", tg.name, plan.lseMode)
			}
		}
	}
	what := fmt.Sprintf("hostile ForwardPagedKV (lse %v, sinks %v, slopes %v, valid otherwise: %v, %s, out on %s, lse on %s) %v",
		useLSE, o.Sinks != nil, o.Slopes != nil, baseErr, dims, outAt, lseAt, plan)
	rowsNow := 0
	if useLSE && qA.Layout.Validate() == nil {
		rowsNow = fzRowCount(qA.Layout)
	}
	expectErr, why := baseErr != nil, "the call is invalid otherwise"
	if change == fzInvalid {
		expectErr, why = true, "an invalid "+dims
	}
	if !expectErr {
		ot, lt := fzOut("out", out), fzLSE(lse, rowsNow)
		if in, ok := fzOverlap(ot, ins); ok {
			expectErr, why = true, "out overlaps "+in.name
		} else if in, ok := fzOverlap(lt, ins); ok {
			expectErr, why = true, "lse overlaps "+in.name
		} else if ot.overlaps(lt) {
			expectErr, why = true, "lse overlaps out"
		}
	}
	if !expectErr && change == fzRepeat {
		var err error
		cleanOut, cleanLSE, err = plain(fzMaterialize(qA, q.Layout),
			attention.PagedKV{K: fzMaterialize(kvA.K, kv.K.Layout), V: fzMaterialize(kvA.V, kv.V.Layout), BlockTable: kvA.BlockTable, MaxBlocks: kvA.MaxBlocks, SeqLens: kvA.SeqLens})
		if err != nil {
			t.Fatalf("%s: the same call over plain copies failed: %v", what, err)
		}
	}
	before := fzSnap(room)
	err := fzCall(t, what, func() error { return call(out, lse, qA, kvA) })
	fzCheck(t, what, err, expectErr, why, empty, room, before, ins, out, cleanOut, lse, cleanLSE, rowsNow)
}

// fzCheck checks the outcome err of a hostile draw over the arena room
// (before is fzSnap(room) taken before the call): an error when expectErr
// (why says why the call is invalid), and then, or when there was nothing
// to compute (empty), no byte changed; otherwise no error, only out's
// elements and lse's rows written, with the bits of the same call over
// plain copies (cleanOut, cleanLSE).
func fzCheck(t *testing.T, what string, err error, expectErr bool, why string, empty bool, room []byte, before [][]byte, ins []fzIn,
	out, cleanOut attention.Tensor, lse, cleanLSE []float32, rows int) {
	t.Helper()
	if expectErr {
		if err == nil {
			t.Fatalf("%s: no error, but %s", what, why)
		}
		fzUnchanged(t, fmt.Sprintf("%s, failed with %q", what, err), before, [][]byte{room}, ins)
		return
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if empty {
		fzUnchanged(t, what+" (nothing to compute)", before, [][]byte{room}, ins)
		return
	}
	fzWroteOnly(t, what, room, before[0], out, lse, rows, ins)
	fzSameOutputs(t, what, out, cleanOut, lse, cleanLSE, rows)
}

// fzPagedKVIns returns what a ForwardPagedKV call reads.
func fzPagedKVIns(room []byte, q attention.Tensor, kv attention.PagedKV, o attention.Options) []fzIn {
	ins := fzTensorIns("q", q, room)
	ins = append(ins, fzTensorIns("kv.K", kv.K, room)...)
	ins = append(ins, fzTensorIns("kv.V", kv.V, room)...)
	if n := len(kv.SeqLens) * kv.MaxBlocks; kv.MaxBlocks >= 0 && n <= len(kv.BlockTable) {
		ins = append(ins, fzSliceIn("kv.BlockTable", kv.BlockTable[:n], room))
	}
	ins = append(ins, fzSliceIn("kv.SeqLens", kv.SeqLens, room))
	return append(ins, fzOptionIns(o, room)...)
}
