package reference

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ---------------------------------------------------------------------------
// A second implementation of the package comment's definition

// spec computes attention with every Params feature by the most literal
// means: for each row it walks every key of the row's sequence, tests each
// visibility rule of the package comment in turn, forms the logit term by
// term and sums the softmax with explicit exponentials. It shares no code
// with the oracle (no gonum, no Params helpers, broadcasting by index
// modulo size, sequences found by scanning the offsets), so the two can only
// agree by both following the definition.
func spec(p Params, q, k, v []float64) (out, lse []float64) {
	scale := p.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(p.Dim))
	}
	d := p.Dim
	type sequence struct{ q0, nq, k0, nk int }
	seqs := []sequence{{0, p.SeqQ, 0, p.SeqKV}}
	if p.CuSeqQ != nil {
		seqs = nil
		for s := 0; s+1 < len(p.CuSeqQ); s++ {
			seqs = append(seqs, sequence{p.CuSeqQ[s], p.CuSeqQ[s+1] - p.CuSeqQ[s], p.CuSeqKV[s], p.CuSeqKV[s+1] - p.CuSeqKV[s]})
		}
	}
	at := func(shape [4]int, b, h, i, j int) int {
		idx := [4]int{b, h, i, j}
		flat := 0
		for a := range 4 {
			flat = flat*shape[a] + idx[a]%shape[a]
		}
		return flat
	}

	out = make([]float64, p.Batch*p.HeadsQ*p.SeqQ*d)
	lse = make([]float64, p.Batch*p.HeadsQ*p.SeqQ)
	for b := 0; b < p.Batch; b++ {
		for h := 0; h < p.HeadsQ; h++ {
			hk := h / (p.HeadsQ / p.HeadsKV)
			sink := math.Inf(-1)
			if p.Sinks != nil {
				sink = p.Sinks[h]
			}
			for _, sq := range seqs {
				for il := 0; il < sq.nq; il++ {
					i := sq.q0 + il
					pos := il // top-left
					if !p.CausalTopLeft {
						pos = il + sq.nk - sq.nq
					}
					var keys []int
					var logits []float64
					for jl := 0; jl < sq.nk; jl++ {
						j := sq.k0 + jl
						if (p.Causal || p.CausalTopLeft) && jl > pos {
							continue
						}
						if p.Window && p.WindowLeft != -1 && pos-jl > p.WindowLeft {
							continue
						}
						if p.Window && p.WindowRight != -1 && jl-pos > p.WindowRight {
							continue
						}
						if p.BoolMask != nil && !p.BoolMask[at(p.BoolMaskShape, b, h, i, j)] {
							continue
						}
						add := 0.0
						if p.Mask != nil {
							add = p.Mask[at(p.MaskShape, b, h, i, j)]
							if add == math.Inf(-1) {
								continue
							}
						}
						var dot float64
						for c := 0; c < d; c++ {
							dot += q[((b*p.HeadsQ+h)*p.SeqQ+i)*d+c] * k[((b*p.HeadsKV+hk)*p.SeqKV+j)*d+c]
						}
						x := scale * dot
						if p.SoftCap != 0 {
							x = p.SoftCap * math.Tanh(x/p.SoftCap)
						}
						if p.Slopes != nil {
							x -= p.Slopes[h] * math.Abs(float64(pos-jl))
						}
						x += add
						keys = append(keys, j)
						logits = append(logits, x)
					}
					r := (b*p.HeadsQ+h)*p.SeqQ + i
					if len(keys) == 0 {
						lse[r] = sink
						continue
					}
					m := sink
					for _, x := range logits {
						m = math.Max(m, x)
					}
					den := math.Exp(sink - m)
					for _, x := range logits {
						den += math.Exp(x - m)
					}
					lse[r] = m + math.Log(den)
					for c := 0; c < d; c++ {
						var acc float64
						for t, j := range keys {
							acc += math.Exp(logits[t]-m) * v[((b*p.HeadsKV+hk)*p.SeqKV+j)*d+c]
						}
						out[r*d+c] = acc / den
					}
				}
			}
		}
	}
	return out, lse
}

// randMask returns n mask values: normal with about a quarter −Inf.
func randMask(r *rand.Rand, n int) []float64 {
	m := randNormal(r, n)
	for i := range m {
		if r.IntN(4) == 0 {
			m[i] = math.Inf(-1)
		}
	}
	return m
}

// randBoolMask returns n booleans, about 70% true.
func randBoolMask(r *rand.Rand, n int) []bool {
	m := make([]bool, n)
	for i := range m {
		m[i] = r.IntN(10) < 7
	}
	return m
}

// checkFeatures runs p on random inputs through the oracle, spec and Naive:
// the oracle must match spec to float64 rounding and Naive must match the
// oracle to float32 accuracy. It returns the oracle's result.
func checkFeatures(t *testing.T, r *rand.Rand, p Params) (out, lse []float64) {
	t.Helper()
	require.NoError(t, p.Validate(), "%+v", p)
	q32 := randNormal32(r, p.QLen())
	k32 := randNormal32(r, p.KVLen())
	v32 := randNormal32(r, p.KVLen())
	q, k, v := Float64s(q32), Float64s(k32), Float64s(v32)
	out, lse, err := Attention(p, q, k, v)
	require.NoError(t, err)
	wantOut, wantLSE := spec(p, q, k, v)
	assertClose(t, wantOut, out, 1e-12, "out")
	assertClose(t, wantLSE, lse, 1e-12, "lse")
	require.False(t, hasNaN(out) || hasNaN(lse), "NaN in a clean run")

	var n Naive
	got := make([]float32, p.QLen())
	for i := range got {
		got[i] = float32(math.NaN()) // must be overwritten everywhere
	}
	require.NoError(t, n.Attention(p, got, q32, k32, v32))
	e := Compare(got, out)
	require.Equal(t, p.QLen(), e.N)
	require.Less(t, e.MaxAbs, 2e-5, "naive: %v", e)
	return out, lse
}

// visibleSets lists, for every query of p, the keys Visible reports.
func visibleSets(p Params) [][]int {
	sets := make([][]int, p.SeqQ)
	for i := range sets {
		sets[i] = []int{}
		for j := 0; j < p.SeqKV; j++ {
			if p.Visible(i, j) {
				sets[i] = append(sets[i], j)
			}
		}
	}
	return sets
}

// seqShapes covers Nq = Nkv, Nq < Nkv, Nq > Nkv, decode and one key, with
// and without grouped-query attention.
var seqShapes = []Params{
	{Batch: 1, HeadsQ: 2, HeadsKV: 2, SeqQ: 6, SeqKV: 6, Dim: 4},
	{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 4, SeqKV: 9, Dim: 5},
	{Batch: 1, HeadsQ: 3, HeadsKV: 1, SeqQ: 9, SeqKV: 4, Dim: 3, Scale: 0.6},
	{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 1, SeqKV: 12, Dim: 8},
	{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 5, SeqKV: 1, Dim: 2},
	{Batch: 1, HeadsQ: 2, HeadsKV: 2, SeqQ: 3, SeqKV: 0, Dim: 2},
}

// causalModes are the three alignments: none, bottom-right, top-left.
var causalModes = []struct {
	name            string
	causal, topLeft bool
}{{"none", false, false}, {"bottom-right", true, false}, {"top-left", false, true}}

// ---------------------------------------------------------------------------
// Causal alignment

func TestCausalTopLeftVisibleSets(t *testing.T) {
	p := Params{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 2, SeqKV: 4, Dim: 1, CausalTopLeft: true}
	assert.Equal(t, [][]int{{0}, {0, 1}}, visibleSets(p))
	p.SeqQ, p.SeqKV = 4, 2
	assert.Equal(t, [][]int{{0}, {0, 1}, {0, 1}, {0, 1}}, visibleSets(p), "no row is empty top-left")
	p.CausalTopLeft, p.Causal = false, true
	assert.Equal(t, [][]int{{}, {}, {0}, {0, 1}}, visibleSets(p), "bottom-right for contrast")
}

func TestCausalTopLeftEqualsBottomRightForSquare(t *testing.T) {
	r := rand.New(rand.NewPCG(101, 1))
	p := Params{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 7, SeqKV: 7, Dim: 5, Causal: true}
	q, k, v := randNormal(r, p.QLen()), randNormal(r, p.KVLen()), randNormal(r, p.KVLen())
	br, brLSE, err := Attention(p, q, k, v)
	require.NoError(t, err)
	p.Causal, p.CausalTopLeft = false, true
	tl, tlLSE, err := Attention(p, q, k, v)
	require.NoError(t, err)
	assert.Equal(t, br, tl)
	assert.Equal(t, brLSE, tlLSE)
}

func TestCausalModesMatchSpec(t *testing.T) {
	r := rand.New(rand.NewPCG(102, 1))
	for _, base := range seqShapes {
		for _, cm := range causalModes {
			p := base
			p.Causal, p.CausalTopLeft = cm.causal, cm.topLeft
			t.Run(fmt.Sprintf("%s/%dx%d", cm.name, p.SeqQ, p.SeqKV), func(t *testing.T) { checkFeatures(t, r, p) })
		}
	}
}

// ---------------------------------------------------------------------------
// Sliding window

func TestWindowVisibleSets(t *testing.T) {
	big := math.MaxInt
	for _, tc := range []struct {
		name            string
		nq, nkv         int
		causal, topLeft bool
		left, right     int
		want            [][]int
	}{
		// Bottom-right: δ = 2, query i sits at diagonal i+2; the last row's
		// window is clipped by the end of the keys.
		{"(1,1) nq<nkv", 4, 6, false, false, 1, 1, [][]int{{1, 2, 3}, {2, 3, 4}, {3, 4, 5}, {4, 5}}},
		{"(1,1) causal", 4, 6, true, false, 1, 1, [][]int{{1, 2}, {2, 3}, {3, 4}, {4, 5}}},
		// Top-left: the diagonal is i itself; the first rows are clipped by
		// the start of the keys.
		{"(1,-1) top-left", 4, 6, false, true, 1, -1, [][]int{{0}, {0, 1}, {1, 2}, {2, 3}}},
		{"(1,2) top-left", 3, 6, false, true, 1, 2, [][]int{{0}, {0, 1}, {1, 2}}},
		// Nq > Nkv bottom-right: δ = −3, rows before the first key are empty.
		{"(0,0) nq>nkv", 6, 3, false, false, 0, 0, [][]int{{}, {}, {}, {0}, {1}, {2}}},
		{"(1,1) nq>nkv", 6, 3, false, false, 1, 1, [][]int{{}, {}, {0}, {0, 1}, {0, 1, 2}, {1, 2}}},
		// A right bound alone looks ahead of the diagonal.
		{"(-1,1) nq>nkv", 5, 3, false, false, -1, 1, [][]int{{}, {0}, {0, 1}, {0, 1, 2}, {0, 1, 2}}},
		{"(2,-1)", 3, 5, false, false, 2, -1, [][]int{{0, 1, 2, 3, 4}, {1, 2, 3, 4}, {2, 3, 4}}},
		{"(3,0) decode", 1, 10, false, false, 3, 0, [][]int{{6, 7, 8, 9}}},
		{"(-1,-1)", 2, 3, false, false, -1, -1, [][]int{{0, 1, 2}, {0, 1, 2}}},
		{"(-1,0) is causal", 2, 3, false, false, -1, 0, [][]int{{0, 1}, {0, 1, 2}}},
		{"(0,5) causal wins", 2, 3, true, false, 0, 5, [][]int{{1}, {2}}},
		{"huge bounds", 2, 3, false, false, big, big, [][]int{{0, 1, 2}, {0, 1, 2}}},
		{"huge bounds top-left", 3, 2, false, true, big, big, [][]int{{0}, {0, 1}, {0, 1}}},
	} {
		p := Params{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: tc.nq, SeqKV: tc.nkv, Dim: 2,
			Causal: tc.causal, CausalTopLeft: tc.topLeft, Window: true, WindowLeft: tc.left, WindowRight: tc.right}
		require.NoError(t, p.Validate(), tc.name)
		assert.Equal(t, tc.want, visibleSets(p), tc.name)

		// Empty rows give zeros and −Inf; the others a finite lse.
		r := rand.New(rand.NewPCG(103, uint64(tc.nq*100+tc.nkv)))
		out, lse := checkFeatures(t, r, p)
		for i, keys := range tc.want {
			if len(keys) == 0 {
				assert.True(t, math.IsInf(lse[i], -1), "%s row %d lse %v", tc.name, i, lse[i])
				assert.Equal(t, []float64{0, 0}, out[i*2:i*2+2], "%s row %d", tc.name, i)
			} else {
				assert.False(t, math.IsInf(lse[i], 0), "%s row %d", tc.name, i)
			}
		}
	}
}

func TestWindowMatchesSpec(t *testing.T) {
	r := rand.New(rand.NewPCG(104, 1))
	windows := [][2]int{{-1, -1}, {0, 0}, {2, 0}, {0, 2}, {1, 3}, {-1, 1}, {3, -1}, {100, 100}}
	for _, base := range seqShapes {
		for _, cm := range causalModes {
			for _, w := range windows {
				p := base
				p.Causal, p.CausalTopLeft = cm.causal, cm.topLeft
				p.Window, p.WindowLeft, p.WindowRight = true, w[0], w[1]
				t.Run(fmt.Sprintf("%s/%dx%d/%v", cm.name, p.SeqQ, p.SeqKV, w), func(t *testing.T) { checkFeatures(t, r, p) })
			}
		}
	}
}

// Without Window the bounds are ignored only if zero; (-1, -1) equals no
// window at all.
func TestUnboundedWindowIsNoWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(105, 1))
	p := Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 5, SeqKV: 8, Dim: 4, Causal: true}
	q, k, v := randNormal(r, p.QLen()), randNormal(r, p.KVLen()), randNormal(r, p.KVLen())
	want, wantLSE, err := Attention(p, q, k, v)
	require.NoError(t, err)
	p.Window, p.WindowLeft, p.WindowRight = true, -1, -1
	got, gotLSE, err := Attention(p, q, k, v)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, wantLSE, gotLSE)
}

// ---------------------------------------------------------------------------
// Masks

func TestMaskBroadcastPatterns(t *testing.T) {
	r := rand.New(rand.NewPCG(106, 1))
	base := Params{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 3, SeqKV: 5, Dim: 4}
	full := [4]int{base.Batch, base.HeadsQ, base.SeqQ, base.SeqKV}
	shapeOf := func(pattern int) [4]int {
		var s [4]int
		for d := range 4 {
			s[d] = 1
			if pattern&(1<<d) != 0 {
				s[d] = full[d]
			}
		}
		return s
	}
	size := func(s [4]int) int { return s[0] * s[1] * s[2] * s[3] }
	// expand writes out a broadcast mask at full size by explicit loops.
	expand := func(s [4]int, get func(int)) {
		for b := range full[0] {
			for h := range full[1] {
				for i := range full[2] {
					for j := range full[3] {
						idx := [4]int{b, h, i, j}
						for d := range 4 {
							if s[d] == 1 {
								idx[d] = 0
							}
						}
						get(((idx[0]*s[1]+idx[1])*s[2]+idx[2])*s[3] + idx[3])
					}
				}
			}
		}
	}
	for pattern := range 16 {
		shape := shapeOf(pattern)
		t.Run(fmt.Sprint(shape), func(t *testing.T) {
			q := randNormal(r, base.QLen())
			k := randNormal(r, base.KVLen())
			v := randNormal(r, base.KVLen())

			// Additive mask against spec, and against its own expansion.
			p := base
			p.Mask, p.MaskShape = randMask(r, size(shape)), shape
			checkFeatures(t, r, p)
			out, lse, err := Attention(p, q, k, v)
			require.NoError(t, err)
			var fullMask []float64
			expand(shape, func(i int) { fullMask = append(fullMask, p.Mask[i]) })
			pf := base
			pf.Mask, pf.MaskShape = fullMask, full
			outF, lseF, err := Attention(pf, q, k, v)
			require.NoError(t, err)
			assert.Equal(t, outF, out)
			assert.Equal(t, lseF, lse)

			// Boolean mask likewise, and combined with an additive mask of
			// the complementary pattern.
			p = base
			p.BoolMask, p.BoolMaskShape = randBoolMask(r, size(shape)), shape
			checkFeatures(t, r, p)
			out, lse, err = Attention(p, q, k, v)
			require.NoError(t, err)
			var fullBool []bool
			expand(shape, func(i int) { fullBool = append(fullBool, p.BoolMask[i]) })
			pf = base
			pf.BoolMask, pf.BoolMaskShape = fullBool, full
			outF, lseF, err = Attention(pf, q, k, v)
			require.NoError(t, err)
			assert.Equal(t, outF, out)
			assert.Equal(t, lseF, lse)

			other := shapeOf(15 - pattern)
			p.Mask, p.MaskShape = randMask(r, size(other)), other
			checkFeatures(t, r, p)
		})
	}
}

// A −Inf mask entry hides the key exactly like a false BoolMask entry, and
// NaN in the hidden K/V rows does not leak.
func TestMaskMinusInfHidesKey(t *testing.T) {
	r := rand.New(rand.NewPCG(107, 1))
	p := Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 3, SeqKV: 4, Dim: 3}
	q, k, v := randNormal(r, p.QLen()), randNormal(r, p.KVLen()), randNormal(r, p.KVLen())
	for c := range 3 { // key 2 is garbage
		k[2*3+c], v[2*3+c] = math.NaN(), math.Inf(1)
	}
	keep := []bool{true, true, false, true}
	pb := p
	pb.BoolMask, pb.BoolMaskShape = keep, [4]int{1, 1, 1, 4}
	wantOut, wantLSE, err := Attention(pb, q, k, v)
	require.NoError(t, err)
	require.False(t, hasNaN(wantOut) || hasNaN(wantLSE))

	pm := p
	pm.Mask, pm.MaskShape = []float64{0, 0, math.Inf(-1), 0}, [4]int{1, 1, 1, 4}
	out, lse, err := Attention(pm, q, k, v)
	require.NoError(t, err)
	assert.Equal(t, wantOut, out)
	assert.Equal(t, wantLSE, lse)

	// A window that excludes the key protects the same way.
	pw := p
	pw.Window, pw.WindowLeft, pw.WindowRight = true, -1, 0 // δ = 1: row 0 sees keys 0..1 only
	out, _, err = Attention(pw, q, k, v)
	require.NoError(t, err)
	assert.False(t, hasNaN(out[:3]), "row 0 cannot see key 2")
}

// Adding a constant c to a row's logits leaves its output alone and moves
// its lse by c.
func TestMaskConstantShift(t *testing.T) {
	r := rand.New(rand.NewPCG(108, 1))
	p := Params{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 4, SeqKV: 6, Dim: 3, Causal: true}
	q, k, v := randNormal(r, p.QLen()), randNormal(r, p.KVLen()), randNormal(r, p.KVLen())
	out, lse, err := Attention(p, q, k, v)
	require.NoError(t, err)
	shift := []float64{1.5, -2, 30, 0.25}
	p.Mask, p.MaskShape = shift, [4]int{1, 1, 4, 1}
	out2, lse2, err := Attention(p, q, k, v)
	require.NoError(t, err)
	assertClose(t, out, out2, 1e-13, "out")
	for i := range lse {
		assert.InDelta(t, lse[i]+shift[i], lse2[i], 1e-12, "row %d", i)
	}
}

// ---------------------------------------------------------------------------
// ALiBi

func TestALiBiHandChecked(t *testing.T) {
	// q = 0 makes every dot product 0, so the logits are the ALiBi terms.
	p := Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 3, SeqKV: 3, Dim: 1, Slopes: []float64{0.5, 0.25}}
	q := make([]float64, p.QLen())
	k := []float64{1, 2, 3}
	v := []float64{10, 20, 40}
	out, lse, err := Attention(p, q, k, v)
	require.NoError(t, err)
	for h, m := range p.Slopes {
		for i := range 3 {
			// Non-causal: −m·|i − j| on both sides of the diagonal.
			var z, o float64
			for j := range 3 {
				e := math.Exp(-m * math.Abs(float64(i-j)))
				z += e
				o += e * v[j]
			}
			row := h*3 + i
			assert.InDelta(t, o/z, out[row], 1e-13, "head %d row %d", h, i)
			assert.InDelta(t, math.Log(z), lse[row], 1e-13, "head %d row %d", h, i)
		}
	}
	// Decode with causal: one query at diagonal 2 sees keys at distances 2,
	// 1, 0, i.e. logits slope·(j − i').
	p = Params{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqKV: 3, Dim: 1, Causal: true, Slopes: []float64{0.5}}
	out, lse, err = Attention(p, []float64{0}, k, v)
	require.NoError(t, err)
	z := math.Exp(-1) + math.Exp(-0.5) + 1
	assert.InDelta(t, (10*math.Exp(-1)+20*math.Exp(-0.5)+40)/z, out[0], 1e-13)
	assert.InDelta(t, math.Log(z), lse[0], 1e-13)

	b, ok := p.Bias(0, 0, 0, 0)
	assert.True(t, ok)
	assert.Equal(t, -1.0, b)
}

func TestALiBiMatchesSpec(t *testing.T) {
	r := rand.New(rand.NewPCG(109, 1))
	for _, base := range seqShapes {
		for _, cm := range causalModes {
			p := base
			p.Causal, p.CausalTopLeft = cm.causal, cm.topLeft
			p.Slopes = make([]float64, p.HeadsQ)
			for h := range p.Slopes {
				p.Slopes[h] = math.Exp2(-float64(h+1) * 8 / float64(p.HeadsQ))
			}
			p.Slopes[0] = -0.1 // negative slopes are allowed
			t.Run(fmt.Sprintf("%s/%dx%d", cm.name, p.SeqQ, p.SeqKV), func(t *testing.T) { checkFeatures(t, r, p) })
		}
	}
}

// ---------------------------------------------------------------------------
// Soft-capping

func TestSoftCapHandChecked(t *testing.T) {
	// Scale 1, Dim 1: the dot products are q·k = 100, −100, 1.
	p := Params{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqKV: 3, Dim: 1, Scale: 1, SoftCap: 10}
	k := []float64{1, -1, 0.01}
	v := []float64{1, 2, 3}
	_, lse, err := Attention(p, []float64{100}, k, v)
	require.NoError(t, err)
	x := []float64{10 * math.Tanh(10), 10 * math.Tanh(-10), 10 * math.Tanh(0.1)}
	assert.InDelta(t, math.Log(math.Exp(x[0])+math.Exp(x[1])+math.Exp(x[2])), lse[0], 1e-12)

	// The cap applies to the dot product only: a mask and ALiBi added after
	// it may push the logit past the cap.
	p.SeqKV, p.Mask, p.MaskShape = 1, []float64{3}, [4]int{1, 1, 1, 1}
	_, lse, err = Attention(p, []float64{100}, k[:1], v[:1])
	require.NoError(t, err)
	assert.InDelta(t, 10*math.Tanh(10)+3, lse[0], 1e-12)
	p.Mask, p.MaskShape = nil, [4]int{}
	p.SeqQ, p.SeqKV, p.Slopes = 1, 2, []float64{-4} // key 0 at distance 1
	_, lse, err = Attention(p, []float64{100}, k[:2], v[:2])
	require.NoError(t, err)
	assert.InDelta(t, math.Log(math.Exp(x[0]+4)+math.Exp(x[1])), lse[0], 1e-12)
}

func TestSoftCapBoundsLogits(t *testing.T) {
	r := rand.New(rand.NewPCG(110, 1))
	p := Params{Batch: 1, HeadsQ: 2, HeadsKV: 2, SeqQ: 5, SeqKV: 7, Dim: 4, Scale: 1e3, SoftCap: 30}
	_, lse := checkFeatures(t, r, p)
	for _, l := range lse {
		assert.LessOrEqual(t, l, 30+math.Log(7)+1e-12)
		assert.GreaterOrEqual(t, l, -30+math.Log(7)-1e-12)
	}
}

func TestSoftCapMatchesSpec(t *testing.T) {
	r := rand.New(rand.NewPCG(111, 1))
	for _, base := range seqShapes {
		for _, c := range []float64{0.5, 5, 50} {
			p := base
			p.Causal = true
			p.SoftCap = c
			p.Scale = 2
			t.Run(fmt.Sprintf("cap%v/%dx%d", c, p.SeqQ, p.SeqKV), func(t *testing.T) { checkFeatures(t, r, p) })
		}
	}
}

// ---------------------------------------------------------------------------
// Sinks

func TestSinksHandChecked(t *testing.T) {
	// One key with logit 1 and value 5; sink 0.5.
	p := Params{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqKV: 1, Dim: 1, Scale: 1, Sinks: []float64{0.5}}
	out, lse, err := Attention(p, []float64{1}, []float64{1}, []float64{5})
	require.NoError(t, err)
	e, es := math.E, math.Exp(0.5)
	assert.InDelta(t, 5*e/(e+es), out[0], 1e-14)
	assert.InDelta(t, math.Log(e+es), lse[0], 1e-14)

	// A dominant sink takes all the weight: the output underflows to 0 and
	// lse is the sink, with no overflow.
	p.Sinks = []float64{1e4}
	out, lse, err = Attention(p, []float64{1}, []float64{1}, []float64{5})
	require.NoError(t, err)
	assert.Equal(t, []float64{0}, out)
	assert.Equal(t, []float64{1e4}, lse)

	// A row without visible keys: zero output and lse = sink.
	p = Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 3, SeqKV: 1, Dim: 1, Causal: true, Sinks: []float64{-0.75, 2}}
	out, lse, err = Attention(p, []float64{1, 1, 1, 1, 1, 1}, []float64{1}, []float64{5})
	require.NoError(t, err)
	assert.Equal(t, []float64{0, 0}, []float64{out[0], out[1]})
	assert.Equal(t, []float64{-0.75, -0.75}, lse[:2])
	assert.Equal(t, []float64{2, 2}, lse[3:5])
	p.SeqKV = 0
	out, lse, err = Attention(p, []float64{1, 1, 1, 1, 1, 1}, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, make([]float64, 6), out)
	assert.Equal(t, []float64{-0.75, -0.75, -0.75, 2, 2, 2}, lse)
}

func TestSinkMinusInfIsNoSink(t *testing.T) {
	r := rand.New(rand.NewPCG(112, 1))
	p := Params{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 6, SeqKV: 4, Dim: 3, Causal: true}
	q, k, v := randNormal(r, p.QLen()), randNormal(r, p.KVLen()), randNormal(r, p.KVLen())
	want, wantLSE, err := Attention(p, q, k, v)
	require.NoError(t, err)
	p.Sinks = []float64{math.Inf(-1), math.Inf(-1)}
	got, gotLSE, err := Attention(p, q, k, v)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, wantLSE, gotLSE)
}

// With V all ones a row's output is the total weight of its keys, which
// the sink reduces to 1 − e^(sink − lse).
func TestSinkWeightDeficit(t *testing.T) {
	r := rand.New(rand.NewPCG(113, 1))
	p := Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 4, SeqKV: 5, Dim: 3, Sinks: []float64{0.3, -1.2}}
	q, k := randNormal(r, p.QLen()), randNormal(r, p.KVLen())
	v := make([]float64, p.KVLen())
	for i := range v {
		v[i] = 1
	}
	out, lse, err := Attention(p, q, k, v)
	require.NoError(t, err)
	for row := range p.LSELen() {
		want := 1 - math.Exp(p.Sinks[row/p.SeqQ]-lse[row])
		for c := range p.Dim {
			assert.InDelta(t, want, out[row*p.Dim+c], 1e-14, "row %d", row)
		}
	}
}

func TestSinksMatchSpec(t *testing.T) {
	r := rand.New(rand.NewPCG(114, 1))
	for _, base := range seqShapes {
		for _, cm := range causalModes {
			p := base
			p.Causal, p.CausalTopLeft = cm.causal, cm.topLeft
			p.Sinks = randNormal(r, p.HeadsQ)
			t.Run(fmt.Sprintf("%s/%dx%d", cm.name, p.SeqQ, p.SeqKV), func(t *testing.T) { checkFeatures(t, r, p) })
		}
	}
}

// ---------------------------------------------------------------------------
// Variable-length batches

// varlenCase packs five sequences, including an empty query set, an empty
// key set and an empty pair, with Nq < Nkv and Nq > Nkv.
var (
	varlenCuQ  = []int{0, 3, 3, 7, 8, 8, 13}
	varlenCuKV = []int{0, 5, 6, 6, 10, 10, 12}
)

// TestVarlenEqualsSeparateCalls checks each packed sequence against a plain
// call on that sequence alone.
func TestVarlenEqualsSeparateCalls(t *testing.T) {
	r := rand.New(rand.NewPCG(115, 1))
	for _, cm := range causalModes {
		for _, extra := range []string{"plain", "alibi", "window", "sinks"} {
			p := Params{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 13, SeqKV: 12, Dim: 3,
				Causal: cm.causal, CausalTopLeft: cm.topLeft, CuSeqQ: varlenCuQ, CuSeqKV: varlenCuKV}
			switch extra {
			case "alibi":
				p.Slopes = []float64{0.5, 0.25, 0.125, 0.0625}
			case "window":
				p.Window, p.WindowLeft, p.WindowRight = true, 1, 1
			case "sinks":
				p.Sinks = []float64{0.1, -0.2, 0.3, math.Inf(-1)}
			}
			t.Run(cm.name+"/"+extra, func(t *testing.T) {
				q, k, v := randNormal(r, p.QLen()), randNormal(r, p.KVLen()), randNormal(r, p.KVLen())
				out, lse, err := Attention(p, q, k, v)
				require.NoError(t, err)
				wantOut, wantLSE := spec(p, q, k, v)
				assertClose(t, wantOut, out, 1e-12, "out vs spec")
				assertClose(t, wantLSE, lse, 1e-12, "lse vs spec")

				d := p.Dim
				for s := 0; s+1 < len(p.CuSeqQ); s++ {
					q0, q1, k0, k1 := p.CuSeqQ[s], p.CuSeqQ[s+1], p.CuSeqKV[s], p.CuSeqKV[s+1]
					ps := p
					ps.CuSeqQ, ps.CuSeqKV = nil, nil
					ps.SeqQ, ps.SeqKV = q1-q0, k1-k0
					var qs, ks, vs []float64
					for h := range p.HeadsQ {
						qs = append(qs, q[(h*p.SeqQ+q0)*d:(h*p.SeqQ+q1)*d]...)
					}
					for h := range p.HeadsKV {
						ks = append(ks, k[(h*p.SeqKV+k0)*d:(h*p.SeqKV+k1)*d]...)
						vs = append(vs, v[(h*p.SeqKV+k0)*d:(h*p.SeqKV+k1)*d]...)
					}
					o, l, err := Attention(ps, qs, ks, vs)
					require.NoError(t, err)
					for h := range p.HeadsQ {
						for i := range ps.SeqQ {
							row := h*p.SeqQ + q0 + i
							assertClose(t, o[(h*ps.SeqQ+i)*d:(h*ps.SeqQ+i+1)*d], out[row*d:(row+1)*d], 1e-13,
								fmt.Sprintf("seq %d head %d row %d", s, h, i))
							assertClose(t, l[h*ps.SeqQ+i:h*ps.SeqQ+i+1], lse[row:row+1], 1e-13,
								fmt.Sprintf("seq %d head %d row %d lse", s, h, i))
						}
					}
				}
			})
		}
	}
}

func TestVarlenVisibleSets(t *testing.T) {
	// Two sequences: (2 queries, 3 keys) and (3 queries, 1 key).
	p := Params{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 5, SeqKV: 4, Dim: 1,
		CuSeqQ: []int{0, 2, 5}, CuSeqKV: []int{0, 3, 4}}
	assert.Equal(t, [][]int{{0, 1, 2}, {0, 1, 2}, {3}, {3}, {3}}, visibleSets(p))
	p.Causal = true
	assert.Equal(t, [][]int{{0, 1}, {0, 1, 2}, {}, {}, {3}}, visibleSets(p))
	p.Causal, p.CausalTopLeft = false, true
	assert.Equal(t, [][]int{{0}, {0, 1}, {3}, {3}, {3}}, visibleSets(p))
}

// ---------------------------------------------------------------------------
// Combinations

func TestCombinations(t *testing.T) {
	r := rand.New(rand.NewPCG(116, 1))
	for name, p := range map[string]Params{
		"GQA+window+softcap+sinks": {Batch: 2, HeadsQ: 6, HeadsKV: 2, SeqQ: 9, SeqKV: 13, Dim: 8,
			Causal: true, Window: true, WindowLeft: 4, WindowRight: -1, SoftCap: 3, Scale: 1.5,
			Sinks: []float64{0, 1, -1, 2, -2, 0.5}},
		"GQA+window+softcap+sinks nq>nkv": {Batch: 1, HeadsQ: 4, HeadsKV: 1, SeqQ: 12, SeqKV: 5, Dim: 4,
			Window: true, WindowLeft: 2, WindowRight: 1, SoftCap: 2, Sinks: []float64{0.5, 0.5, -3, 1}},
		"varlen+causal+ALiBi": {Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 13, SeqKV: 12, Dim: 5, Causal: true,
			Slopes: []float64{0.5, 0.25, 0.125, 0.0625}, CuSeqQ: varlenCuQ, CuSeqKV: varlenCuKV},
		"varlen+top-left+ALiBi+mask": {Batch: 1, HeadsQ: 2, HeadsKV: 2, SeqQ: 13, SeqKV: 12, Dim: 5, CausalTopLeft: true,
			Slopes: []float64{0.3, 0.1}, CuSeqQ: varlenCuQ, CuSeqKV: varlenCuKV,
			Mask: randMask(r, 2*13*12), MaskShape: [4]int{1, 2, 13, 12}},
		"everything": {Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 13, SeqKV: 12, Dim: 6, Causal: true,
			Window: true, WindowLeft: 3, WindowRight: 0, SoftCap: 4, Scale: 0.8,
			Slopes: []float64{0.5, 0.25, 0.125, 0.0625}, Sinks: []float64{0.2, -0.4, 1, math.Inf(-1)},
			Mask: randMask(r, 13*12), MaskShape: [4]int{1, 1, 13, 12},
			BoolMask: randBoolMask(r, 4*12), BoolMaskShape: [4]int{1, 4, 1, 12},
			CuSeqQ: varlenCuQ, CuSeqKV: varlenCuKV},
		"everything batched": {Batch: 3, HeadsQ: 4, HeadsKV: 4, SeqQ: 5, SeqKV: 8, Dim: 6, CausalTopLeft: true,
			Window: true, WindowLeft: 5, WindowRight: 2, SoftCap: 1,
			Slopes: []float64{0.5, 0.25, 0.125, 0.0625}, Sinks: []float64{0.2, -0.4, 1, 0},
			Mask: randMask(r, 3*8), MaskShape: [4]int{3, 1, 1, 8},
			BoolMask: randBoolMask(r, 3*4*5*8), BoolMaskShape: [4]int{3, 4, 5, 8}},
	} {
		t.Run(name, func(t *testing.T) { checkFeatures(t, r, p) })
	}
}

// ---------------------------------------------------------------------------
// Fully masked rows

// Rows that see no key, whichever feature hides the keys, give zeros and
// −Inf (or the sink), even when every K and V element is NaN.
func TestFullyMaskedRowsEveryWay(t *testing.T) {
	base := Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 4, SeqKV: 3, Dim: 2}
	rowMask := func(p *Params, hidden int) { // hide every key of one query row
		p.Mask = []float64{0, 0, 0, 0}
		p.Mask[hidden] = math.Inf(-1)
		p.MaskShape = [4]int{1, 1, 4, 1}
	}
	for _, tc := range []struct {
		name  string
		mod   func(*Params)
		empty []int // query rows with no visible key
	}{
		{"causal nq>nkv", func(p *Params) { p.Causal = true }, []int{0}},
		{"window (0,0)", func(p *Params) { p.Window = true }, []int{0}},
		{"window right of keys", func(p *Params) { p.CausalTopLeft, p.Window, p.WindowLeft, p.WindowRight = true, true, 0, -1 }, []int{3}},
		{"bool mask", func(p *Params) {
			p.BoolMask, p.BoolMaskShape = []bool{true, false, true, true}, [4]int{1, 1, 4, 1}
		}, []int{1}},
		{"mask -Inf", func(p *Params) { rowMask(p, 2) }, []int{2}},
		{"varlen empty kv", func(p *Params) { p.CuSeqQ, p.CuSeqKV = []int{0, 2, 4}, []int{0, 3, 3} }, []int{2, 3}},
		{"sinks", func(p *Params) { p.Causal, p.Sinks = true, []float64{0.5, -7} }, []int{0}},
	} {
		p := base
		tc.mod(&p)
		require.NoError(t, p.Validate(), tc.name)
		r := rand.New(rand.NewPCG(117, 1))
		q := randNormal(r, p.QLen())
		nan := make([]float64, p.KVLen())
		for i := range nan {
			nan[i] = math.NaN()
		}
		out, lse, err := Attention(p, q, nan, nan)
		require.NoError(t, err)
		for h := range p.HeadsQ {
			for _, i := range tc.empty {
				row := h*p.SeqQ + i
				assert.Equal(t, []float64{0, 0}, out[row*2:row*2+2], "%s: head %d row %d", tc.name, h, i)
				assert.Equal(t, p.sink(h), lse[row], "%s: head %d row %d", tc.name, h, i)
			}
		}
		// With clean inputs the other rows are finite and all agree with spec.
		checkFeatures(t, r, p)
	}
}

// ---------------------------------------------------------------------------
// Helpers and validation

func TestBiasAndVisible(t *testing.T) {
	p := Params{Batch: 2, HeadsQ: 2, HeadsKV: 1, SeqQ: 2, SeqKV: 3, Dim: 1, Causal: true,
		Slopes: []float64{0.5, 2}, Mask: []float64{1, math.Inf(-1), 3}, MaskShape: [4]int{1, 1, 1, 3},
		BoolMask: []bool{true, false}, BoolMaskShape: [4]int{2, 1, 1, 1}}
	require.NoError(t, p.Validate())
	// Batch 0, head 1, query 1 (diagonal 2): key 0 at distance 2.
	b, ok := p.Bias(0, 1, 1, 0)
	assert.True(t, ok)
	assert.Equal(t, -2*2.0+1, b)
	_, ok = p.Bias(0, 1, 1, 1) // mask −Inf
	assert.False(t, ok)
	b, ok = p.Bias(0, 0, 1, 2)
	assert.True(t, ok)
	assert.Equal(t, 3.0, b)
	_, ok = p.Bias(0, 0, 0, 2) // causal
	assert.False(t, ok)
	_, ok = p.Bias(1, 0, 1, 0) // BoolMask hides batch 1
	assert.False(t, ok)
	assert.True(t, p.Visible(1, 2))
	assert.False(t, p.Visible(0, 2))
	assert.False(t, p.Visible(0, 3), "out of range")

	assert.Equal(t, 2.0*2*2*2*3, p.FLOPs())
	p.Causal, p.CausalTopLeft = false, true
	assert.Equal(t, 2.0*2*2*2*3, p.FLOPs(), "top-left halves too")
}

func TestValidateFeatureErrors(t *testing.T) {
	ok := Params{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 3, SeqKV: 5, Dim: 8}
	require.NoError(t, ok.Validate())
	inf, nan := math.Inf(1), math.NaN()
	for _, tc := range []struct {
		mod  func(*Params)
		want string
	}{
		{func(p *Params) { p.Causal, p.CausalTopLeft = true, true }, "Params.Causal and Params.CausalTopLeft are both true"},
		{func(p *Params) { p.Window, p.WindowLeft = true, -2 }, "Params.WindowLeft = -2, want >= 0, or -1 for unbounded"},
		{func(p *Params) { p.Window, p.WindowRight = true, -5 }, "Params.WindowRight = -5, want >= 0, or -1 for unbounded"},
		{func(p *Params) { p.WindowLeft = 3 }, "Params.WindowLeft = 3 and Params.WindowRight = 0 but Params.Window is false"},
		{func(p *Params) { p.WindowRight = -1 }, "but Params.Window is false"},
		{func(p *Params) { p.SoftCap = -1 }, "Params.SoftCap = -1, want a finite number >= 0"},
		{func(p *Params) { p.SoftCap = nan }, "Params.SoftCap = NaN"},
		{func(p *Params) { p.SoftCap = inf }, "Params.SoftCap = +Inf"},
		{func(p *Params) { p.Slopes = []float64{1, 2, 3} }, "Params.Slopes has 3 elements, want HeadsQ = 4"},
		{func(p *Params) { p.Slopes = []float64{} }, "Params.Slopes has 0 elements"},
		{func(p *Params) { p.Slopes = []float64{1, nan, 1, 1} }, "Params.Slopes[1] = NaN, want a finite number"},
		{func(p *Params) { p.Slopes = []float64{1, 1, 1, -inf} }, "Params.Slopes[3] = -Inf"},
		{func(p *Params) { p.Sinks = []float64{1} }, "Params.Sinks has 1 elements, want HeadsQ = 4"},
		{func(p *Params) { p.Sinks = []float64{0, 0, nan, 0} }, "Params.Sinks[2] = NaN, want a finite number or -Inf"},
		{func(p *Params) { p.Sinks = []float64{inf, 0, 0, 0} }, "Params.Sinks[0] = +Inf"},
		{func(p *Params) { p.Mask, p.MaskShape = make([]float64, 15), [4]int{1, 1, 3, 4} }, "Params.MaskShape[3] (SeqKV) = 4, want 5 (SeqKV) or 1 (broadcast)"},
		{func(p *Params) { p.Mask, p.MaskShape = make([]float64, 2), [4]int{2, 1, 1, 1} }, "Params.MaskShape[0] (Batch) = 2, want 1 (Batch) or 1"},
		{func(p *Params) { p.Mask, p.MaskShape = make([]float64, 2), [4]int{1, 2, 1, 1} }, "Params.MaskShape[1] (HeadsQ) = 2, want 4 (HeadsQ)"},
		{func(p *Params) { p.Mask, p.MaskShape = make([]float64, 2), [4]int{1, 1, 2, 1} }, "Params.MaskShape[2] (SeqQ) = 2, want 3 (SeqQ)"},
		{func(p *Params) { p.Mask = make([]float64, 15) }, "Params.MaskShape[0] (Batch) = 0"},
		{func(p *Params) { p.Mask, p.MaskShape = make([]float64, 14), [4]int{1, 1, 3, 5} }, "Params.Mask has 14 elements, want 15 (the product of MaskShape [1 1 3 5])"},
		{func(p *Params) { p.MaskShape = [4]int{1, 1, 1, 1} }, "Params.MaskShape = [1 1 1 1] but Params.Mask is nil"},
		{func(p *Params) { p.BoolMask, p.BoolMaskShape = make([]bool, 4), [4]int{1, 4, 1, 2} }, "Params.BoolMaskShape[3] (SeqKV) = 2, want 5"},
		{func(p *Params) { p.BoolMask, p.BoolMaskShape = make([]bool, 3), [4]int{1, 4, 1, 1} }, "Params.BoolMask has 3 elements, want 4"},
		{func(p *Params) { p.BoolMaskShape = [4]int{1, 1, 1, 5} }, "Params.BoolMaskShape = [1 1 1 5] but Params.BoolMask is nil"},
		{func(p *Params) { p.CuSeqQ = []int{0, 3} }, "only one of Params.CuSeqQ (2 elements) and Params.CuSeqKV (0 elements) is set"},
		{func(p *Params) { p.CuSeqKV = []int{0, 5} }, "only one of Params.CuSeqQ (0 elements) and Params.CuSeqKV (2 elements) is set"},
		{func(p *Params) { p.CuSeqQ, p.CuSeqKV = []int{0, 3}, []int{0, 2, 5} }, "Params.CuSeqQ has 2 elements and Params.CuSeqKV 3; want the same"},
		{func(p *Params) { p.Batch, p.CuSeqQ, p.CuSeqKV = 2, []int{0, 3}, []int{0, 5} }, "Params.Batch = 2 with CuSeqQ/CuSeqKV set; want 1"},
		{func(p *Params) { p.CuSeqQ, p.CuSeqKV = []int{}, []int{} }, "Params.CuSeqQ is empty"},
		{func(p *Params) { p.CuSeqQ, p.CuSeqKV = []int{1, 3}, []int{0, 5} }, "Params.CuSeqQ[0] = 1, want 0"},
		{func(p *Params) { p.CuSeqQ, p.CuSeqKV = []int{0, 2, 1, 3}, []int{0, 1, 2, 5} }, "Params.CuSeqQ[2] = 1 is less than CuSeqQ[1] = 2; want non-decreasing"},
		{func(p *Params) { p.CuSeqQ, p.CuSeqKV = []int{0, 2}, []int{0, 5} }, "Params.CuSeqQ[1] = 2, want Params.SeqQ = 3"},
		{func(p *Params) { p.CuSeqQ, p.CuSeqKV = []int{0, 3}, []int{-1, 5} }, "Params.CuSeqKV[0] = -1, want 0"},
		{func(p *Params) { p.CuSeqQ, p.CuSeqKV = []int{0, 1, 3}, []int{0, 6, 5} }, "Params.CuSeqKV[2] = 5 is less than CuSeqKV[1] = 6"},
		{func(p *Params) { p.CuSeqQ, p.CuSeqKV = []int{0, 3}, []int{0, 6} }, "Params.CuSeqKV[1] = 6, want Params.SeqKV = 5"},
	} {
		p := ok
		tc.mod(&p)
		err := p.Validate()
		require.Error(t, err, tc.want)
		assert.Contains(t, err.Error(), tc.want)

		_, _, err = Attention(p, nil, nil, nil)
		require.Error(t, err, tc.want)
		assert.Contains(t, err.Error(), tc.want)
		var n Naive
		require.ErrorContains(t, n.Attention(p, nil, nil, nil, nil), tc.want)
	}
	// Valid edge cases.
	for _, p := range []Params{
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 2, SeqKV: 2, Dim: 1, Window: true}, // (0, 0)
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 2, SeqKV: 2, Dim: 1, Window: true, WindowLeft: -1, WindowRight: -1},
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, Dim: 1, CuSeqQ: []int{0}, CuSeqKV: []int{0}},             // no sequences
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, Dim: 1, CuSeqQ: []int{0, 0, 0}, CuSeqKV: []int{0, 0, 0}}, // empty ones
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqKV: 2, Dim: 1, Mask: []float64{}, MaskShape: [4]int{1, 1, 0, 2}},
		{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqKV: 2, Dim: 1, Mask: []float64{1, 2}, MaskShape: [4]int{1, 1, 1, 2}},
		{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 1, SeqKV: 1, Dim: 1, Sinks: []float64{math.Inf(-1), 3}, Slopes: []float64{-1, 0}},
	} {
		assert.NoError(t, p.Validate(), "%+v", p)
	}
}

func TestNaiveFeaturesDoNotAllocate(t *testing.T) {
	p := Params{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 40, SeqKV: 48, Dim: 32, Causal: true,
		Window: true, WindowLeft: 8, WindowRight: 0, SoftCap: 5,
		Slopes: []float64{0.5, 0.25, 0.125, 0.0625}, Sinks: []float64{0, 1, 2, 3},
		Mask: make([]float64, 40*48), MaskShape: [4]int{1, 1, 40, 48},
		BoolMask: make([]bool, 48), BoolMaskShape: [4]int{1, 1, 1, 48},
		CuSeqQ: []int{0, 10, 40}, CuSeqKV: []int{0, 20, 48}}
	for i := range p.BoolMask {
		p.BoolMask[i] = i%5 != 0
	}
	r := rand.New(rand.NewPCG(118, 1))
	q := randNormal32(r, p.QLen())
	k := randNormal32(r, p.KVLen())
	v := randNormal32(r, p.KVLen())
	out := make([]float32, p.QLen())
	var n Naive
	require.NoError(t, n.Attention(p, out, q, k, v))
	allocs := testing.AllocsPerRun(5, func() {
		if err := n.Attention(p, out, q, k, v); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, allocs)
}
