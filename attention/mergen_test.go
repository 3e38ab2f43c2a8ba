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

// keyChunk returns the view of keys [k0, k1) of a contiguous [B, Hkv, Nkv,
// D] tensor x, in place: the strides stay those of the whole tensor.
func keyChunk(x []float32, b, hkv, nkv, d, k0, k1 int) attention.Tensor {
	l := attention.BHSD(b, hkv, nkv, d)
	l.Seq = k1 - k0
	return attention.F32Tensor(x[k0*d:], l)
}

// unevenCuts returns n+1 increasing cut points from 0 to total, chosen at
// random, so that chunks have uneven sizes and some may be empty.
func unevenCuts(r *rand.Rand, n, total int) []int {
	cuts := make([]int, n+1)
	for i := 1; i < n; i++ {
		cuts[i] = r.IntN(total + 1)
	}
	cuts[n] = total
	for i := 1; i < n; i++ { // insertion sort, n is small
		for j := i; j > 0 && cuts[j] < cuts[j-1]; j-- {
			cuts[j], cuts[j-1] = cuts[j-1], cuts[j]
		}
	}
	return cuts
}

// A problem's keys cut into 1 to 7 chunks of uneven sizes, each computed by
// ForwardLSE over its key range (read in place), merged by MergeN into
// outputs of every layout, in place or not: the result must match the
// float64 oracle over all keys, and a chain of two-way Merge calls to
// within a few float32 roundings.
func TestMergeNSplitKeysMatchesOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(301, 1))
	p := reference.Params{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 5, SeqKV: 37, Dim: 16}
	q32, k32, v32 := randn(r, p.QLen()), randn(r, p.KVLen()), randn(r, p.KVLen())
	wantOut, wantLSE, err := reference.Attention(p, reference.Float64s(q32), reference.Float64s(k32), reference.Float64s(v32))
	require.NoError(t, err)
	B, H, N, D := p.Batch, p.HeadsQ, p.SeqQ, p.Dim
	eng, err := attention.NewEngine(attention.Config{})
	require.NoError(t, err)
	qT := attention.F32Tensor(q32, attention.BHSD(B, H, N, D))
	rows := B * H * N

	for n := 1; n <= 7; n++ {
		for trial := range 3 {
			cuts := unevenCuts(r, n, p.SeqKV)
			if trial == 2 && n > 1 {
				cuts[1] = 0 // parts[0] saw no key: the in-place accumulator starts empty
			}
			name := fmt.Sprintf("%d parts, cuts %v", n, cuts)
			canon := make([][]float32, n)
			lses := make([][]float32, n)
			for i := range n {
				canon[i] = make([]float32, rows*D)
				lses[i] = make([]float32, rows)
				kT := keyChunk(k32, B, p.HeadsKV, p.SeqKV, D, cuts[i], cuts[i+1])
				vT := keyChunk(v32, B, p.HeadsKV, p.SeqKV, D, cuts[i], cuts[i+1])
				require.NoError(t, eng.ForwardLSE(attention.F32Tensor(canon[i], attention.BHSD(B, H, N, D)), lses[i], qT, kT, vT, attention.Options{}), name)
			}
			lay := mergeLayout(trial % 3)
			parts := make([]attention.Tensor, n)
			for i := range parts {
				parts[i] = toView(mergeLayout((int(lay)+i)%3), canon[i], B, H, N, D)
			}
			out := toView((lay+1)%3, impltest.Filled(rows*D, guard), B, H, N, D)
			lse := impltest.Filled(rows, guard)
			require.NoError(t, attention.MergeN(out, lse, parts, lses), name)
			got := fromView(out)
			e := reference.Compare(got, wantOut)
			require.Equal(t, len(wantOut), e.N, name)
			// ForwardLSE's own rule for float32 with D <= 128 is 1e-5; the
			// merge adds less than a float32 rounding.
			require.Less(t, e.MaxAbs, 1e-5, "%s: out %v", name, e)
			le := lseErrors(lse, wantLSE)
			require.Less(t, le.MaxAbs, 1e-5*(1+math.Log(float64(p.SeqKV+1))), "%s: lse %v", name, le)

			// A chain of Merge calls, each rounding to float32.
			acc := toView(mergeBHSD, canon[0], B, H, N, D)
			accLSE := append([]float32(nil), lses[0]...)
			for i := 1; i < n; i++ {
				require.NoError(t, attention.Merge(acc, accLSE, acc, accLSE, parts[i], lses[i]), name)
			}
			chained := fromView(acc)
			for j := range got {
				require.InDelta(t, chained[j], got[j], 4e-7*float64(n), "%s: element %d against chained Merge", name, j)
			}
			for j := range lse {
				require.InDelta(t, accLSE[j], lse[j], 1e-6*(1+math.Abs(float64(lse[j]))), "%s: lse %d against chained Merge", name, j)
			}
			if n == 2 {
				assert.Equal(t, bitsOf(chained), bitsOf(got), "%s: two parts are Merge bit for bit", name)
				assert.Equal(t, bitsOf(accLSE), bitsOf(lse), "%s: two parts are Merge bit for bit (lse)", name)
			}

			// In place into parts[0] and lses[0], bitwise the same.
			in := append([]attention.Tensor(nil), parts...)
			in[0] = toView(lay, canon[0], B, H, N, D)
			inLSE := append([][]float32(nil), lses...)
			inLSE[0] = append([]float32(nil), lses[0]...)
			require.NoError(t, attention.MergeN(in[0], inLSE[0], in, inLSE), name)
			assert.Equal(t, bitsOf(got), bitsOf(fromView(in[0])), "%s: in place", name)
			assert.Equal(t, bitsOf(lse), bitsOf(inLSE[0]), "%s: in place lse", name)
		}
	}
}

// randomParts returns n parts [1, 2, rows/2, d] (BHSD) of random values
// and log-sum-exps, with about one lse in five −Inf.
func randomParts(r *rand.Rand, n, rows, d int) ([]attention.Tensor, [][]float32) {
	parts := make([]attention.Tensor, n)
	lses := make([][]float32, n)
	for i := range parts {
		parts[i] = attention.F32Tensor(randn(r, rows*d), attention.BHSD(1, 2, rows/2, d))
		lses[i] = make([]float32, rows)
		for j := range lses[i] {
			if r.IntN(5) == 0 {
				lses[i][j] = float32(math.Inf(-1))
			} else {
				lses[i][j] = float32(r.NormFloat64() * 3)
			}
		}
	}
	return parts, lses
}

// With two parts MergeN is Merge bit for bit, and with more it is Merge of
// the two parts in the rows where only two parts have an lse above −Inf.
func TestMergeNTwoPartsIsMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(302, 1))
	const rows, d = 40, 9
	lay := attention.BHSD(1, 2, rows/2, d)
	parts, lses := randomParts(r, 5, rows, d)
	lses[0][0], lses[1][0] = 7, 7 // equal lses
	lses[0][1], lses[1][1] = 80, -80
	out, lse := make([]float32, rows*d), make([]float32, rows)
	want, wantLSE := make([]float32, rows*d), make([]float32, rows)
	for _, pair := range [][2]int{{0, 1}, {1, 0}, {3, 2}} {
		a, b := pair[0], pair[1]
		require.NoError(t, attention.MergeN(attention.F32Tensor(out, lay), lse, []attention.Tensor{parts[a], parts[b]}, [][]float32{lses[a], lses[b]}))
		require.NoError(t, attention.Merge(attention.F32Tensor(want, lay), wantLSE, parts[a], lses[a], parts[b], lses[b]))
		assert.Equal(t, bitsOf(want), bitsOf(out), "parts %v", pair)
		assert.Equal(t, bitsOf(wantLSE), bitsOf(lse), "parts %v", pair)
	}

	// Five parts, of which only 1 and 3 are alive in every row.
	for _, i := range []int{0, 2, 4} {
		for j := range lses[i] {
			lses[i][j] = float32(math.Inf(-1))
			parts[i].Float32s()[j] = float32(math.NaN()) // never read
		}
	}
	for j := range rows {
		if math.IsInf(float64(lses[1][j]), -1) || math.IsInf(float64(lses[3][j]), -1) {
			lses[1][j], lses[3][j] = 1, 2
		}
	}
	require.NoError(t, attention.MergeN(attention.F32Tensor(out, lay), lse, parts, lses))
	require.NoError(t, attention.Merge(attention.F32Tensor(want, lay), wantLSE, parts[1], lses[1], parts[3], lses[3]))
	assert.Equal(t, bitsOf(want), bitsOf(out))
	assert.Equal(t, bitsOf(wantLSE), bitsOf(lse))
}

// Permuting the parts changes each element by at most one float32 ulp plus
// n·2^−52·Σ w_i·|x_i| (bounded here with weights <= 1), and lse by at most
// one ulp, as MergeN's doc says.
func TestMergeNPermutation(t *testing.T) {
	r := rand.New(rand.NewPCG(303, 1))
	const n, rows, d = 7, 60, 200 // d above mergeTile: two tiles per row
	lay := attention.BHSD(1, 2, rows/2, d)
	parts, lses := randomParts(r, n, rows, d)
	lses[2][5], lses[4][5] = 3, 3 // tied maxima
	out, lse := make([]float32, rows*d), make([]float32, rows)
	require.NoError(t, attention.MergeN(attention.F32Tensor(out, lay), lse, parts, lses))
	for trial := range 20 {
		perm := r.Perm(n)
		pp, pl := make([]attention.Tensor, n), make([][]float32, n)
		for i, j := range perm {
			pp[i], pl[i] = parts[j], lses[j]
		}
		out2, lse2 := make([]float32, rows*d), make([]float32, rows)
		require.NoError(t, attention.MergeN(attention.F32Tensor(out2, lay), lse2, pp, pl))
		for j := range rows {
			assert.LessOrEqual(t, math.Abs(float64(lse[j])-float64(lse2[j])), impltest.ULP(lse[j]), "trial %d perm %v: lse %d", trial, perm, j)
			for c := range d {
				sum := 0.0
				for i := range n {
					sum += math.Abs(float64(parts[i].Float32s()[j*d+c]))
				}
				a, b := out[j*d+c], out2[j*d+c]
				tol := math.Max(impltest.ULP(a), impltest.ULP(b)) + n*0x1p-52*sum
				if math.Abs(float64(a)-float64(b)) > tol {
					t.Fatalf("trial %d perm %v: row %d element %d: %v vs %v (tolerance %.3g)", trial, perm, j, c, a, b, tol)
				}
			}
		}
	}
}

// The documented special values, row by row, with three parts.
func TestMergeNSpecialValues(t *testing.T) {
	nan, inf, ninf := float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))
	const rows = 7
	lay := attention.BHSD(1, 1, rows, 2)
	a := []float32{1, 2, 1, 2, nan, nan, 1, 2, 1, 2, 1, 2, 1, 2}
	b := []float32{3, 4, 3, 4, 3, 4, 3, 4, 3, 4, 3, 4, 3, 4}
	c := []float32{5, 6, 5, 6, 5, 6, 5, 6, 5, 6, 5, 6, 5, inf}
	la := []float32{ninf, ninf, nan, 0, inf, inf, 1}
	lb := []float32{ninf, 2, ninf, nan, 0, inf, 1}
	lc := []float32{ninf, ninf, ninf, 0, 0, 0, -1000}
	parts := []attention.Tensor{attention.F32Tensor(a, lay), attention.F32Tensor(b, lay), attention.F32Tensor(c, lay)}
	out, lse := impltest.Filled(2*rows, guard), impltest.Filled(rows, guard)
	require.NoError(t, attention.MergeN(attention.F32Tensor(out, lay), lse, parts, [][]float32{la, lb, lc}))

	// Row 0: every part empty.
	assert.Equal(t, []uint32{0, 0}, bitsOf(out[0:2]))
	assert.Equal(t, ninf, lse[0])
	// Row 1: one part left, copied.
	assert.Equal(t, []float32{3, 4}, out[2:4])
	assert.Equal(t, float32(2), lse[1])
	// Row 2: one part left, copied even with a NaN lse and NaN elements.
	assert.True(t, isNaN32(out[4]) && isNaN32(out[5]) && isNaN32(lse[2]))
	// Row 3: a NaN lse among three poisons the row.
	assert.True(t, isNaN32(out[6]) && isNaN32(out[7]) && isNaN32(lse[3]))
	// Row 4: +Inf takes all the weight.
	assert.Equal(t, []float32{1, 2}, out[8:10])
	assert.Equal(t, inf, lse[4])
	// Row 5: two +Inf give NaN.
	assert.True(t, isNaN32(out[10]) && isNaN32(out[11]) && isNaN32(lse[5]))
	// Row 6: c's weight underflows to 0, but 0·Inf is NaN in that element.
	assert.InDelta(t, 2, out[12], 1e-6)
	assert.True(t, isNaN32(out[13]))
	assert.InDelta(t, 1+math.Ln2, lse[6], 1e-6)
}

// n copies of one result give the same output (up to rounding) and lse +
// ln n; two copies give exactly the output, as Merge does.
func TestMergeNSelf(t *testing.T) {
	r := rand.New(rand.NewPCG(304, 1))
	const B, H, N, D = 2, 3, 4, 5
	x := randn(r, B*H*N*D)
	l := randn(r, B*H*N)
	l[3], l[4] = 80, -80
	a := attention.F32Tensor(x, attention.BHSD(B, H, N, D))
	for n := 1; n <= 6; n++ {
		parts, lses := make([]attention.Tensor, n), make([][]float32, n)
		for i := range parts {
			parts[i], lses[i] = a, l
		}
		out, lse := make([]float32, len(x)), make([]float32, len(l))
		require.NoError(t, attention.MergeN(attention.F32Tensor(out, attention.BHSD(B, H, N, D)), lse, parts, lses))
		if n <= 2 {
			assert.Equal(t, x, out, "n = %d: exact", n)
		}
		for i := range x {
			assert.LessOrEqual(t, math.Abs(float64(x[i])-float64(out[i])), impltest.ULP(x[i]), "n = %d element %d", n, i)
		}
		for i := range l {
			assert.InDelta(t, float64(l[i])+math.Log(float64(n)), float64(lse[i]), 1e-6*(1+math.Abs(float64(l[i]))), "n = %d row %d", n, i)
		}
	}
}

func TestMergeNEmptyShapes(t *testing.T) {
	for _, l := range []attention.Layout{
		attention.BHSD(0, 2, 3, 4), attention.BHSD(1, 2, 0, 4), attention.BHSD(1, 0, 3, 4),
	} {
		x := attention.F32Tensor(nil, l)
		require.NoError(t, attention.MergeN(x, nil, []attention.Tensor{x, x, x}, [][]float32{nil, nil, nil}), "%+v", l)
	}
	// Dim 0: only the log-sum-exps are merged; strides may point anywhere.
	l := attention.Layout{Batch: 1, Heads: 1, Seq: 2, Dim: 0, SeqStride: 8, HeadStride: 100, BatchStride: 100}
	x := attention.F32Tensor(nil, l)
	lse := make([]float32, 2)
	ninf := float32(math.Inf(-1))
	require.NoError(t, attention.MergeN(x, lse, []attention.Tensor{x, x, x}, [][]float32{{0, ninf}, {0, 1}, {0, ninf}}))
	assert.InDelta(t, math.Log(3), float64(lse[0]), 1e-7)
	assert.Equal(t, float32(1), lse[1])
}

func TestMergeNDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(305, 1))
	const B, H, N, D = 2, 4, 16, 32
	lay := attention.BSHD(B, N, H, D)
	rows := B * H * N
	parts, lses := make([]attention.Tensor, 5), make([][]float32, 5)
	for i := range parts {
		parts[i] = attention.F32Tensor(randn(r, B*H*N*D), lay)
		lses[i] = randn(r, rows)
	}
	allocs := testing.AllocsPerRun(10, func() {
		if err := attention.MergeN(parts[0], lses[0], parts, lses); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, allocs, "5 parts in place")

	// Many parts (views of one buffer, since inputs may overlap): nothing is
	// sized by their number.
	const many = 20000
	x := randn(r, 2*D)
	lx := []float32{0.5, -0.5}
	one := attention.BHSD(1, 1, 2, D)
	manyParts, manyLSEs := make([]attention.Tensor, many), make([][]float32, many)
	for i := range manyParts {
		manyParts[i], manyLSEs[i] = attention.F32Tensor(x, one), lx
	}
	out, lse := make([]float32, 2*D), make([]float32, 2)
	allocs = testing.AllocsPerRun(3, func() {
		if err := attention.MergeN(attention.F32Tensor(out, one), lse, manyParts, manyLSEs); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, allocs, "%d parts", many)
	assert.InDelta(t, 0.5+math.Log(many), float64(lse[0]), 1e-5)
	for c := range D {
		assert.InDelta(t, x[c], out[c], 1e-6)
	}
}

func TestMergeNErrors(t *testing.T) {
	const B, H, N, D = 1, 2, 3, 4
	lay := attention.BHSD(B, H, N, D)
	n, rows := B*H*N*D, B*H*N
	outBuf, lseBuf := make([]float32, n), make([]float32, rows)
	p0, p1, p2 := make([]float32, n), make([]float32, n), make([]float32, n)
	l0, l1, l2 := make([]float32, rows), make([]float32, rows), make([]float32, rows)
	big := make([]float32, 4*n) // one buffer that holds everything, for overlap cases

	type args struct {
		out   attention.Tensor
		lse   []float32
		parts []attention.Tensor
		lses  [][]float32
	}
	good := func() args {
		return args{attention.F32Tensor(outBuf, lay), lseBuf,
			[]attention.Tensor{attention.F32Tensor(p0, lay), attention.F32Tensor(p1, lay), attention.F32Tensor(p2, lay)},
			[][]float32{l0, l1, l2}}
	}
	for _, tc := range []struct {
		name string
		mod  func(*args)
		want string
	}{
		{"nil parts", func(x *args) { x.parts, x.lses = nil, nil }, "attention: MergeN: parts is empty; want at least one part"},
		{"short lses", func(x *args) { x.lses = x.lses[:2] }, "attention: MergeN: lses has 2 slices; want one per part, len(parts) = 3"},
		{"long lses", func(x *args) { x.lses = append(x.lses, l0) }, "attention: MergeN: lses has 4 slices; want one per part, len(parts) = 3"},
		{"zero out", func(x *args) { x.out = attention.Tensor{} }, "attention: MergeN: out: no data (zero Tensor)"},
		{"bf16 out", func(x *args) { x.out = attention.BF16Tensor(make([]fp16.BFloat16, n), lay) }, "attention: MergeN: out has element type bf16; want f32"},
		{"zero part", func(x *args) { x.parts[1] = attention.Tensor{} }, "attention: MergeN: parts[1]: no data (zero Tensor)"},
		{"short part", func(x *args) { x.parts[2] = attention.F32Tensor(p2[:n-1], lay) }, "attention: MergeN: parts[2]: slice has 23 elements; want >= 24"},
		{"f16 part", func(x *args) { x.parts[0] = attention.F16Tensor(make([]fp16.Float16, n), lay) }, "attention: MergeN: parts[0] has element type f16; want f32"},
		{"shape part", func(x *args) { x.parts[2] = attention.F32Tensor(p2, attention.BHSD(1, 2, 2, 4)) }, "attention: MergeN: parts[2] has shape [1 2 2 4]; want out's shape [1 2 3 4]"},
		{"out collides", func(x *args) {
			l := lay
			l.HeadStride = 2
			x.out = attention.F32Tensor(outBuf, l)
		}, "attention: MergeN: out has strides [24 2 4 1] under which elements of shape [1 2 3 4] overlap"},
		{"short lse", func(x *args) { x.lse = lseBuf[:5] }, "attention: MergeN: lse has 5 elements; want >= B·H·N = 6"},
		{"nil lses[1]", func(x *args) { x.lses[1] = nil }, "attention: MergeN: lses[1] has 0 elements; want >= B·H·N = 6"},
		{"out over lse", func(x *args) { x.out, x.lse = attention.F32Tensor(big, lay), big[n-2:] }, "attention: MergeN: out overlaps lse in memory"},
		{"out shifted over parts[0]", func(x *args) {
			x.parts[0] = attention.F32Tensor(big, lay)
			x.out = attention.F32Tensor(big[1:], lay)
		}, "attention: MergeN: out overlaps parts[0] in memory without being the same view"},
		{"out = parts[0] other layout", func(x *args) {
			x.parts[0] = attention.F32Tensor(big, lay)
			x.out = attention.F32Tensor(big, attention.BSHD(B, N, H, D))
		}, "out overlaps parts[0] in memory without being the same view"},
		{"out = parts[2]", func(x *args) { x.out = x.parts[2] }, "attention: MergeN: out overlaps parts[2] in memory; want a separate buffer (only out = parts[0] may alias)"},
		{"out = parts[0] = parts[1]", func(x *args) { x.out, x.parts[1] = x.parts[0], x.parts[0] }, "attention: MergeN: out overlaps parts[1] in memory"},
		{"lse over parts[1]", func(x *args) { x.parts[1], x.lse = attention.F32Tensor(big, lay), big[5:] }, "attention: MergeN: lse overlaps parts[1] in memory"},
		{"out over lses[2]", func(x *args) { x.out, x.lses[2] = attention.F32Tensor(big, lay), big[3:] }, "attention: MergeN: out overlaps lses[2] in memory"},
		{"lse shifted over lses[0]", func(x *args) { x.lse, x.lses[0] = big[1:], big }, "attention: MergeN: lse overlaps lses[0] in memory without being the same slice"},
		{"lse = lses[1]", func(x *args) { x.lse = x.lses[1] }, "attention: MergeN: lse overlaps lses[1] in memory; want a separate buffer (only lse = lses[0] may alias)"},
	} {
		for _, buf := range [][]float32{outBuf, lseBuf, big} {
			for i := range buf {
				buf[i] = 7
			}
		}
		x := good()
		tc.mod(&x)
		err := attention.MergeN(x.out, x.lse, x.parts, x.lses)
		require.Error(t, err, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
		for _, buf := range [][]float32{outBuf, lseBuf, big} {
			for i := range buf {
				require.Equal(t, float32(7), buf[i], "%s: element %d written", tc.name, i)
			}
		}
	}
	// The allowed aliasing: inputs overlapping each other, out = parts[0],
	// lse = lses[0].
	x := good()
	require.NoError(t, attention.MergeN(x.out, x.lse, []attention.Tensor{x.parts[0], x.parts[0], x.parts[1]}, [][]float32{l0, l0, l1}))
	require.NoError(t, attention.MergeN(x.parts[0], x.lses[0], x.parts, x.lses))
	require.NoError(t, attention.MergeN(x.parts[0], x.lses[0], x.parts[:1], x.lses[:1]))
}

// Context parallelism: the keys of a long context live on three workers
// (machines, or threads), each computes attention over its own keys with
// ForwardLSE, and MergeN combines the three results exactly.
func ExampleMergeN() {
	const dim = 2
	q := []float32{1, 0}                                // one query
	k := []float32{1, 0, 0, 1, 1, 1, 2, 0, -1, 0, 0, 0} // six keys
	v := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	one := attention.BHSD(1, 1, 1, dim)
	two := attention.BHSD(1, 1, 2, dim)
	six := attention.BHSD(1, 1, 6, dim)

	eng, err := attention.NewEngine(attention.Config{})
	if err != nil {
		panic(err)
	}
	// Each worker's two keys on their own.
	parts := make([]attention.Tensor, 3)
	lses := make([][]float32, 3)
	for w := range parts {
		parts[w], lses[w] = attention.F32Tensor(make([]float32, dim), one), make([]float32, 1)
		err := eng.ForwardLSE(parts[w], lses[w], attention.F32Tensor(q, one),
			attention.F32Tensor(k[w*2*dim:], two), attention.F32Tensor(v[w*2*dim:], two), attention.Options{})
		if err != nil {
			panic(err)
		}
	}
	// Combine them, in place into the first.
	if err := attention.MergeN(parts[0], lses[0], parts, lses); err != nil {
		panic(err)
	}

	// All six keys at once, for comparison.
	full, fullLSE := make([]float32, dim), make([]float32, 1)
	err = eng.ForwardLSE(attention.F32Tensor(full, one), fullLSE, attention.F32Tensor(q, one),
		attention.F32Tensor(k, six), attention.F32Tensor(v, six), attention.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("merged: %.4f lse %.4f\n", parts[0].Float32s(), lses[0][0])
	fmt.Printf("full:   %.4f lse %.4f\n", full, fullLSE[0])
	// Output:
	// merged: [5.5708 6.5708] lse 2.3667
	// full:   [5.5708 6.5708] lse 2.3667
}
