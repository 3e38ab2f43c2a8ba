package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/internal/impltest"
)

// ---------------------------------------------------------------------------
// Helpers

// mergeLayout is one of the layouts the merge tests place tensors in.
type mergeLayout int

const (
	mergeBHSD   mergeLayout = iota // contiguous [b, h, n, d]
	mergeBSHD                      // contiguous [b, n, h, d]
	mergePadded                    // [b, n, h, d] with NaN gaps after every row, head and batch
)

func (m mergeLayout) layout(b, h, n, d int) attention.Layout {
	switch m {
	case mergeBSHD:
		return attention.BSHD(b, n, h, d)
	case mergePadded:
		l := attention.Layout{Batch: b, Heads: h, Seq: n, Dim: d, HeadStride: d + 3}
		l.SeqStride = h*l.HeadStride + 5
		l.BatchStride = n*l.SeqStride + 7
		return l
	}
	return attention.BHSD(b, h, n, d)
}

// toView places canonical [b, h, n, d] data into a fresh buffer of the
// given layout, with NaN in every gap.
func toView(m mergeLayout, x []float32, b, h, n, d int) attention.Tensor {
	l := m.layout(b, h, n, d)
	buf := make([]float32, l.Span()+5)
	for i := range buf {
		buf[i] = float32(math.NaN())
	}
	for bi := range b {
		for hi := range h {
			for s := range n {
				copy(buf[l.Offset(bi, hi, s):][:d], x[((bi*h+hi)*n+s)*d:][:d])
			}
		}
	}
	return attention.F32Tensor(buf, l)
}

// fromView reads a view back into canonical order.
func fromView(t attention.Tensor) []float32 {
	l := t.Layout
	x := make([]float32, 0, l.Batch*l.Heads*l.Seq*l.Dim)
	for bi := range l.Batch {
		for hi := range l.Heads {
			for s := range l.Seq {
				x = append(x, t.Float32s()[l.Offset(bi, hi, s):][:l.Dim]...)
			}
		}
	}
	return x
}

func f32s(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, f := range x {
		y[i] = float32(f)
	}
	return y
}

// keyRange cuts keys [k0, k1) out of every (batch, K/V head) of k or v.
func keyRange(p reference.Params, x []float64, k0, k1 int) []float64 {
	var y []float64
	for b := range p.Batch {
		for h := range p.HeadsKV {
			base := (b*p.HeadsKV + h) * p.SeqKV * p.Dim
			y = append(y, x[base+k0*p.Dim:base+k1*p.Dim]...)
		}
	}
	return y
}

// oraclePart computes the float32 output and lse of p over keys [k0, k1)
// only, with the float64 oracle.
func oraclePart(t *testing.T, p reference.Params, q, k, v []float64, k0, k1 int) ([]float32, []float32) {
	t.Helper()
	ps := p
	ps.SeqKV = k1 - k0
	out, lse, err := reference.Attention(ps, q, keyRange(p, k, k0, k1), keyRange(p, v, k0, k1))
	require.NoError(t, err)
	return f32s(out), f32s(lse)
}

// requireClose checks a merged result against the oracle's full result.
func requireClose(t *testing.T, wantOut, wantLSE []float64, out, lse []float32, msg string) {
	t.Helper()
	e := reference.Compare(out, wantOut)
	require.Equal(t, len(wantOut), e.N, msg)
	require.Less(t, e.MaxAbs, 1e-6, "%s: out %v", msg, e)
	el := reference.Compare(lse, wantLSE)
	require.Equal(t, len(wantLSE), el.N, msg)
	require.LessOrEqual(t, el.MaxRel, 1e-6, "%s: lse %v", msg, el)
}

// ---------------------------------------------------------------------------
// Correctness

// Splitting the keys into two ranges, computing each with the oracle and
// merging must give the oracle's result over all keys, for every layout,
// in place or not, in either order.
func TestMergeSplitKeysMatchesOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(201, 1))
	p := reference.Params{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 5, SeqKV: 11, Dim: 8}
	q, k, v := impltest.RandnF64(r, p.QLen()), impltest.RandnF64(r, p.KVLen()), impltest.RandnF64(r, p.KVLen())
	wantOut, wantLSE, err := reference.Attention(p, q, k, v)
	require.NoError(t, err)
	B, H, N, D := p.Batch, p.HeadsQ, p.SeqQ, p.Dim

	for _, split := range []int{0, 1, 5, 10, 11} { // 0 and 11: one part has no keys
		o1, l1 := oraclePart(t, p, q, k, v, 0, split)
		o2, l2 := oraclePart(t, p, q, k, v, split, p.SeqKV)
		for _, lay := range []mergeLayout{mergeBHSD, mergeBSHD, mergePadded} {
			name := fmt.Sprintf("split %d layout %d", split, lay)
			a := toView(lay, o1, B, H, N, D)
			b := toView((lay+1)%3, o2, B, H, N, D)
			out := toView((lay+2)%3, impltest.Filled(len(o1), guard), B, H, N, D)
			lse := impltest.Filled(len(l1), guard)
			require.NoError(t, attention.Merge(out, lse, a, l1, b, l2), name)
			got := fromView(out)
			requireClose(t, wantOut, wantLSE, got, lse, name)

			// Commutative, bitwise.
			out2 := toView(lay, impltest.Filled(len(o1), guard), B, H, N, D)
			lse2 := impltest.Filled(len(l1), guard)
			require.NoError(t, attention.Merge(out2, lse2, b, l2, a, l1), name)
			assert.Equal(t, bitsOf(got), bitsOf(fromView(out2)), "%s: swapped", name)
			assert.Equal(t, bitsOf(lse), bitsOf(lse2), "%s: swapped lse", name)

			// In place into a (same view) and lseA (same slice), bitwise the
			// same as into a separate buffer.
			accLSE := append([]float32(nil), l1...)
			require.NoError(t, attention.Merge(a, accLSE, a, accLSE, b, l2), name)
			assert.Equal(t, bitsOf(got), bitsOf(fromView(a)), "%s: in place", name)
			assert.Equal(t, bitsOf(lse), bitsOf(accLSE), "%s: in place lse", name)
		}
	}
}

// Keys split into interleaved sets under a causal mask (via boolean masks),
// accumulated in place over three parts: rows where a part sees no key
// exercise the empty-part rule in the middle of real data.
func TestMergeRunningThreeParts(t *testing.T) {
	r := rand.New(rand.NewPCG(202, 1))
	p := reference.Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 9, SeqKV: 9, Dim: 6, Causal: true}
	q, k, v := impltest.RandnF64(r, p.QLen()), impltest.RandnF64(r, p.KVLen()), impltest.RandnF64(r, p.KVLen())
	wantOut, wantLSE, err := reference.Attention(p, q, k, v)
	require.NoError(t, err)

	part := func(rem int) ([]float32, []float32) { // keys j with j%3 == rem
		pp := p
		pp.BoolMask, pp.BoolMaskShape = make([]bool, p.SeqKV), [4]int{1, 1, 1, p.SeqKV}
		for j := range pp.BoolMask {
			pp.BoolMask[j] = j%3 == rem
		}
		out, lse, err := reference.Attention(pp, q, k, v)
		require.NoError(t, err)
		return f32s(out), f32s(lse)
	}
	accOut, accLSE := part(2) // rows 0 and 1 see no key of this part
	assert.True(t, math.IsInf(float64(accLSE[0]), -1))
	acc := attention.F32Tensor(accOut, attention.BHSD(1, 2, 9, 6))
	for _, rem := range []int{1, 0} {
		o, l := part(rem)
		require.NoError(t, attention.Merge(acc, accLSE, acc, accLSE, attention.F32Tensor(o, attention.BHSD(1, 2, 9, 6)), l))
	}
	requireClose(t, wantOut, wantLSE, accOut, accLSE, "three parts")
}

func TestMergeSelf(t *testing.T) {
	r := rand.New(rand.NewPCG(203, 1))
	const B, H, N, D = 2, 3, 4, 5
	x := randn(r, B*H*N*D)
	l := randn(r, B*H*N)
	l[3] = 80 // large lse values are fine
	l[4] = -80
	a := attention.F32Tensor(x, attention.BHSD(B, H, N, D))
	out := make([]float32, len(x))
	lse := make([]float32, len(l))
	require.NoError(t, attention.Merge(attention.F32Tensor(out, attention.BHSD(B, H, N, D)), lse, a, l, a, l))
	assert.Equal(t, x, out, "weights are exactly 1/2")
	for i := range l {
		assert.InDelta(t, float64(l[i])+math.Ln2, float64(lse[i]), 1e-6*(1+math.Abs(float64(l[i]))), "row %d", i)
	}
}

func TestMergeEmptyPartIgnored(t *testing.T) {
	r := rand.New(rand.NewPCG(204, 1))
	const B, H, N, D = 1, 2, 3, 4
	x := randn(r, B*H*N*D)
	lx := randn(r, B*H*N)
	empty := impltest.Filled(len(x), guard) // never read
	lEmpty := make([]float32, len(lx))
	for i := range lEmpty {
		lEmpty[i] = float32(math.Inf(-1))
	}
	lay := attention.BHSD(B, H, N, D)
	for _, emptyFirst := range []bool{false, true} {
		out := impltest.Filled(len(x), guard)
		lse := impltest.Filled(len(lx), guard)
		a, la, b, lb := x, lx, empty, lEmpty
		if emptyFirst {
			a, la, b, lb = b, lb, a, la
		}
		require.NoError(t, attention.Merge(attention.F32Tensor(out, lay), lse,
			attention.F32Tensor(a, lay), la, attention.F32Tensor(b, lay), lb))
		assert.Equal(t, bitsOf(x), bitsOf(out), "emptyFirst=%v", emptyFirst)
		assert.Equal(t, bitsOf(lx), bitsOf(lse), "emptyFirst=%v", emptyFirst)
	}
}

func TestMergeBothEmpty(t *testing.T) {
	const B, H, N, D = 2, 1, 3, 2
	lay := attention.BHSD(B, H, N, D)
	a, b := impltest.Filled(B*H*N*D, guard), impltest.Filled(B*H*N*D, guard)
	neg := []float32{float32(math.Inf(-1)), float32(math.Inf(-1)), float32(math.Inf(-1)),
		float32(math.Inf(-1)), float32(math.Inf(-1)), float32(math.Inf(-1))}
	out := impltest.Filled(B*H*N*D, guard)
	lse := impltest.Filled(B*H*N, guard)
	require.NoError(t, attention.Merge(attention.F32Tensor(out, lay), lse,
		attention.F32Tensor(a, lay), neg, attention.F32Tensor(b, lay), neg))
	assert.Equal(t, make([]float32, len(out)), out)
	assert.Equal(t, neg, lse)
}

// The documented NaN and +Inf behaviour, row by row.
func TestMergeSpecialValues(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	lay := attention.BHSD(1, 1, 5, 2)
	a := []float32{1, 2, 1, 2, 1, nan, 1, 2, 1, 2}
	b := []float32{3, 4, 3, 4, 3, 4, 3, 4, 3, 4}
	la := []float32{nan, nan, -1000, inf, inf}
	lb := []float32{0, -inf, 0, 0, inf}
	out := make([]float32, 10)
	lse := make([]float32, 5)
	require.NoError(t, attention.Merge(attention.F32Tensor(out, lay), lse,
		attention.F32Tensor(a, lay), la, attention.F32Tensor(b, lay), lb))

	// Row 0: a NaN lse poisons the row.
	assert.True(t, isNaN32(out[0]) && isNaN32(out[1]) && isNaN32(lse[0]), "row 0: %v %v", out[:2], lse[0])
	// Row 1: the other part is empty, so this one is copied, NaN lse and all.
	assert.Equal(t, []float32{1, 2}, out[2:4])
	assert.True(t, isNaN32(lse[1]))
	// Row 2: a's weight underflows to 0, but 0·NaN is NaN in that element.
	assert.True(t, isNaN32(out[5]), "row 2 element 1: %v", out[5])
	assert.Equal(t, float32(3), out[4])
	assert.Equal(t, float32(0), lse[2])
	// Row 3: +Inf takes all the weight.
	assert.Equal(t, []float32{1, 2}, out[6:8])
	assert.Equal(t, inf, lse[3])
	// Row 4: two +Inf give NaN.
	assert.True(t, isNaN32(out[8]) && isNaN32(out[9]) && isNaN32(lse[4]))
}

func TestMergeEmptyShapes(t *testing.T) {
	for _, l := range []attention.Layout{
		attention.BHSD(0, 2, 3, 4), attention.BHSD(1, 2, 0, 4), attention.BHSD(1, 0, 3, 4),
	} {
		x := attention.F32Tensor(nil, l)
		require.NoError(t, attention.Merge(x, nil, x, nil, x, nil), "%+v", l)
	}
	// Dim 0: only the log-sum-exps are merged; strides may point anywhere.
	l := attention.Layout{Batch: 1, Heads: 1, Seq: 2, Dim: 0, SeqStride: 8, HeadStride: 100, BatchStride: 100}
	x := attention.F32Tensor(nil, l)
	lse := make([]float32, 2)
	require.NoError(t, attention.Merge(x, lse, x, []float32{0, float32(math.Inf(-1))}, x, []float32{0, 1}))
	assert.InDelta(t, math.Ln2, float64(lse[0]), 1e-7)
	assert.Equal(t, float32(1), lse[1])
}

func TestMergeDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(205, 1))
	const B, H, N, D = 2, 4, 16, 32
	lay := attention.BSHD(B, N, H, D)
	acc := attention.F32Tensor(randn(r, B*H*N*D), lay)
	part := attention.F32Tensor(randn(r, B*H*N*D), lay)
	accLSE, partLSE := randn(r, B*H*N), randn(r, B*H*N)
	allocs := testing.AllocsPerRun(10, func() {
		if err := attention.Merge(acc, accLSE, acc, accLSE, part, partLSE); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, allocs)
}

// ---------------------------------------------------------------------------
// Errors

func TestMergeErrors(t *testing.T) {
	const B, H, N, D = 1, 2, 3, 4
	lay := attention.BHSD(B, H, N, D)
	n, rows := B*H*N*D, B*H*N
	outBuf, lseBuf := make([]float32, n), make([]float32, rows)
	aBuf, bBuf := make([]float32, n), make([]float32, n)
	laBuf, lbBuf := make([]float32, rows), make([]float32, rows)
	// One buffer that holds everything, for overlap cases.
	big := make([]float32, 4*n)

	type args struct {
		out attention.Tensor
		lse []float32
		a   attention.Tensor
		la  []float32
		b   attention.Tensor
		lb  []float32
	}
	good := func() args {
		return args{attention.F32Tensor(outBuf, lay), lseBuf, attention.F32Tensor(aBuf, lay), laBuf, attention.F32Tensor(bBuf, lay), lbBuf}
	}
	for _, tc := range []struct {
		name string
		mod  func(*args)
		want string
	}{
		{"zero out", func(x *args) { x.out = attention.Tensor{} }, "attention: Merge: out: no data (zero Tensor)"},
		{"short a", func(x *args) { x.a = attention.F32Tensor(aBuf[:n-1], lay) }, "attention: Merge: a: slice has 23 elements; want >= 24"},
		{"bad layout b", func(x *args) { x.b = attention.F32Tensor(bBuf, attention.Layout{Batch: -1}) }, "attention: Merge: b: Batch is -1"},
		{"f16 a", func(x *args) { x.a = attention.F16Tensor(make([]fp16.Float16, n), lay) }, "attention: Merge: a has element type f16; want f32"},
		{"bf16 out", func(x *args) { x.out = attention.BF16Tensor(make([]fp16.BFloat16, n), lay) }, "attention: Merge: out has element type bf16; want f32"},
		{"shape a", func(x *args) { x.a = attention.F32Tensor(aBuf, attention.BHSD(1, 2, 2, 4)) }, "attention: Merge: a has shape [1 2 2 4]; want out's shape [1 2 3 4]"},
		{"shape b", func(x *args) { x.b = attention.F32Tensor(bBuf, attention.BHSD(1, 1, 3, 4)) }, "attention: Merge: b has shape [1 1 3 4]; want out's shape [1 2 3 4]"},
		{"out collides", func(x *args) {
			l := lay
			l.HeadStride = 2
			x.out = attention.F32Tensor(outBuf, l)
		}, "attention: Merge: out has strides [24 2 4 1] under which elements of shape [1 2 3 4] overlap"},
		{"short lse", func(x *args) { x.lse = lseBuf[:5] }, "attention: Merge: lse has 5 elements; want >= B·H·N = 6"},
		{"nil lseA", func(x *args) { x.la = nil }, "attention: Merge: lseA has 0 elements; want >= B·H·N = 6"},
		{"short lseB", func(x *args) { x.lb = lbBuf[:1] }, "attention: Merge: lseB has 1 elements"},
		{"out shifted over a", func(x *args) {
			x.a = attention.F32Tensor(big, lay)
			x.out = attention.F32Tensor(big[1:], lay)
		}, "attention: Merge: out overlaps a in memory without being the same view"},
		{"out = a other layout", func(x *args) {
			x.a = attention.F32Tensor(big, lay)
			x.out = attention.F32Tensor(big, attention.BSHD(B, N, H, D))
		}, "out overlaps a in memory without being the same view"},
		{"out = b", func(x *args) { x.out = x.b }, "attention: Merge: out overlaps b in memory; want a separate buffer (only out = a may alias: swap a and b"},
		{"out over lse", func(x *args) { x.out, x.lse = attention.F32Tensor(big, lay), big[n-2:] }, "attention: Merge: out overlaps lse in memory"},
		{"out over lseA", func(x *args) { x.out, x.la = attention.F32Tensor(big, lay), big[3:] }, "attention: Merge: out overlaps lseA in memory"},
		{"out over lseB", func(x *args) { x.out, x.lb = attention.F32Tensor(big, lay), big[n-1:] }, "attention: Merge: out overlaps lseB in memory"},
		{"lse shifted over lseA", func(x *args) { x.lse, x.la = big[1:], big }, "attention: Merge: lse overlaps lseA in memory without being the same slice"},
		{"lse = lseB", func(x *args) { x.lse = x.lb }, "attention: Merge: lse overlaps lseB in memory; want a separate buffer (only lse = lseA may alias)"},
		{"lse over a", func(x *args) { x.a, x.lse = attention.F32Tensor(big, lay), big[n-rows+1:] }, "attention: Merge: lse overlaps a in memory"},
		{"lse over b", func(x *args) { x.b, x.lse = attention.F32Tensor(big, lay), big[5:] }, "attention: Merge: lse overlaps b in memory"},
	} {
		for i := range outBuf {
			outBuf[i] = 7
		}
		for i := range lseBuf {
			lseBuf[i] = 7
		}
		for i := range big {
			big[i] = 7
		}
		x := good()
		tc.mod(&x)
		err := attention.Merge(x.out, x.lse, x.a, x.la, x.b, x.lb)
		require.Error(t, err, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
		for i := range outBuf {
			require.Equal(t, float32(7), outBuf[i], "%s: out[%d] written", tc.name, i)
		}
		for i := range lseBuf {
			require.Equal(t, float32(7), lseBuf[i], "%s: lse[%d] written", tc.name, i)
		}
		for i := range big {
			require.Equal(t, float32(7), big[i], "%s: big[%d] written", tc.name, i)
		}
	}
	// The allowed aliasing: inputs overlapping each other, out = a, lse = lseA.
	x := good()
	require.NoError(t, attention.Merge(x.out, x.lse, x.a, x.la, x.a, x.la))
	require.NoError(t, attention.Merge(x.a, x.la, x.a, x.la, x.b, x.lb))
}

func TestFloat32s(t *testing.T) {
	x := []float32{1, 2, 3}
	assert.Equal(t, x, attention.F32Tensor(x, attention.BHSD(1, 1, 1, 3)).Float32s())
	assert.Nil(t, attention.F16Tensor(make([]fp16.Float16, 3), attention.BHSD(1, 1, 1, 3)).Float32s())
	assert.Nil(t, attention.BF16Tensor(make([]fp16.BFloat16, 3), attention.BHSD(1, 1, 1, 3)).Float32s())
	assert.Nil(t, attention.Tensor{}.Float32s())
}

func bitsOf(x []float32) []uint32 {
	y := make([]uint32, len(x))
	for i, f := range x {
		y[i] = math.Float32bits(f)
	}
	return y
}

func isNaN32(x float32) bool { return x != x }

// ---------------------------------------------------------------------------
// Example

// Split-K decoding: the keys of a KV cache are processed in two chunks
// (say, on two threads or from two cache pages), and Merge combines the
// chunk results exactly, using their log-sum-exps.
func ExampleMerge() {
	const dim = 2
	q := []float32{1, 0}                   // one query
	k := []float32{1, 0, 0, 1, 1, 1, 2, 0} // four keys
	v := []float32{1, 2, 3, 4, 5, 6, 7, 8}
	one := attention.BHSD(1, 1, 1, dim)
	two := attention.BHSD(1, 1, 2, dim)
	four := attention.BHSD(1, 1, 4, dim)

	eng, err := attention.NewEngine(attention.Config{})
	if err != nil {
		panic(err)
	}
	// Each chunk of two keys on its own.
	acc, accLSE := make([]float32, dim), make([]float32, 1)
	part, partLSE := make([]float32, dim), make([]float32, 1)
	for c, dst := range [][]float32{acc, part} {
		lse := [][]float32{accLSE, partLSE}[c]
		err := eng.ForwardLSE(attention.F32Tensor(dst, one), lse, attention.F32Tensor(q, one),
			attention.F32Tensor(k[c*2*dim:], two), attention.F32Tensor(v[c*2*dim:], two), attention.Options{})
		if err != nil {
			panic(err)
		}
	}
	// Fold the second chunk into the first, in place.
	accT := attention.F32Tensor(acc, one)
	if err := attention.Merge(accT, accLSE, accT, accLSE, attention.F32Tensor(part, one), partLSE); err != nil {
		panic(err)
	}

	// All four keys at once, for comparison.
	full, fullLSE := make([]float32, dim), make([]float32, 1)
	err = eng.ForwardLSE(attention.F32Tensor(full, one), fullLSE, attention.F32Tensor(q, one),
		attention.F32Tensor(k, four), attention.F32Tensor(v, four), attention.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("merged: %.4f lse %.4f\n", acc, accLSE[0])
	fmt.Printf("full:   %.4f lse %.4f\n", full, fullLSE[0])
	// Output:
	// merged: [4.7943 5.7943] lse 2.2159
	// full:   [4.7943 5.7943] lse 2.2159
}
