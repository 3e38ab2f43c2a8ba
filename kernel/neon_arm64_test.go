//go:build arm64 && !purego

package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/internal/impltest"
	"github.com/flashgo/flashgo/kernel/internal/arm"
)

// The NEON kernels are tested against their generic twins on every size
// class that their blocking distinguishes, with operands that start 1-3
// elements into their buffers, leading dimensions with gaps between rows,
// and guard elements on both sides (impltest.Block). Guards and gaps hold
// neonGuardBits, a signalling NaN: arithmetic never produces one, so any
// write there is seen, and any read of one turns a result into NaN, which
// is seen too. Each test runs under the neon implementation (setImpl,
// impltest.Select), which skips it, naming what is missing, where this
// build cannot run it.

const (
	neonPad       = 4
	neonGuardBits = 0x7fa0beef // signalling NaN
	neonGuard16   = 0x7d5a     // signalling binary16 NaN, for the 16-bit inputs
)

var (
	// Sizes that straddle the 4- and 16-wide blocks and the 32-component
	// chunks of QKT.
	neonDims = []int{1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 64, 65, 128, 129}
	neonRows = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 17}
)

// neonCols returns 1..65, 127, 128, 129 and a few random sizes.
func neonCols(rng *rand.Rand, random int) []int {
	var c []int
	for n := 1; n <= 65; n++ {
		c = append(c, n)
	}
	c = append(c, 127, 128, 129)
	for range random {
		c = append(c, 130+rng.IntN(200))
	}
	return c
}

// newBlock returns a block of guards only; the block starts off elements
// after the leading guards.
func newBlock(rows, cols, ld, off int) *guardedBlock {
	return impltest.NewBlock(rows, cols, ld, neonPad+off, blockTrail, math.Float32frombits(neonGuardBits))
}

// block16 is a block of the 16-bit sources of the pack kernels.
type block16 = impltest.Block[uint16]

// newBlock16 is newBlock for a block16.
func newBlock16(rows, cols, ld, off int) *block16 {
	return impltest.NewBlock(rows, cols, ld, neonPad+off, neonPad, uint16(neonGuard16))
}

func gapFor(rng *rand.Rand) int { return rng.IntN(4) }

// withinDot reports whether got is within the dot-product bound of the
// reference want: |got - want| <= 4·(n+1)·2⁻²⁴·mag, mag being the sum of
// the magnitudes of the terms. NaN must match NaN.
func withinDot(got, want float32, mag float64, n int) bool {
	if want != want || got != got {
		return want != want && got != got
	}
	if math.IsInf(float64(want), 0) {
		return got == want
	}
	return math.Abs(float64(got)-float64(want)) <= 4*float64(n+1)*0x1p-24*mag
}

func TestQKTNEON(t *testing.T) {
	setImpl(t, NEON)
	rng := rand.New(rand.NewPCG(11, 12))
	cols := neonCols(rng, 2)
	exact, total := 0, 0
	for _, rows := range neonRows {
		for _, d := range neonDims {
			for ci, nc := range cols {
				offS, offQ, offK := 1+ci%3, 1+(ci+1)%3, 1+(ci+2)%3
				s := newBlock(rows, nc, nc+gapFor(rng), offS)
				q := newBlock(rows, d, d+gapFor(rng), offQ)
				kt := newBlock(d, nc, nc+gapFor(rng), offK)
				impltest.FillBlock(rng, q)
				impltest.FillBlock(rng, kt)
				scale := float32(0.125 + rng.Float64())
				sg := s.Clone()
				arm.QktNEON(&s.S()[0], s.LD, &q.S()[0], q.LD, &kt.S()[0], kt.LD, rows, nc, d, scale)
				qktGeneric(sg.S(), sg.LD, q.S(), q.LD, kt.S(), kt.LD, rows, nc, d, scale)
				what := fmt.Sprintf("QKT rows %d cols %d d %d", rows, nc, d)
				s.CheckOutside(t, what)
				for i := range rows {
					for j := range nc {
						var mag float64
						for k := range d {
							mag += math.Abs(float64(*q.At(i, k)) * float64(*kt.At(k, j)))
						}
						mag *= float64(scale)
						got, want := *s.At(i, j), *sg.At(i, j)
						if !withinDot(got, want, mag, d) {
							t.Fatalf("%s: s[%d][%d] = %g, generic %g (bound %g)", what, i, j, got, want, 4*float64(d+1)*0x1p-24*mag)
						}
						total++
						if got == want {
							exact++
						}
					}
				}
			}
		}
	}
	// Same chunking and order of additions as qktGeneric: where the
	// compiler fuses the generic loop the same way, the results agree
	// bit for bit.
	t.Logf("QKT: %d of %d scores equal to the generic ones", exact, total)
}

// A NaN or Inf anywhere in a row of q or a column of kt reaches exactly
// the scores it should.
func TestQKTNEONSpecials(t *testing.T) {
	setImpl(t, NEON)
	rng := rand.New(rand.NewPCG(13, 14))
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1))}
	for _, rows := range []int{1, 3, 4, 5, 9} {
		for _, d := range []int{1, 5, 32, 33, 70} {
			for _, nc := range []int{1, 3, 4, 6, 16, 17, 35} {
				s := newBlock(rows, nc, nc+1, 1)
				q := newBlock(rows, d, d+2, 2)
				kt := newBlock(d, nc, nc+3, 3)
				impltest.FillBlock(rng, q)
				impltest.FillBlock(rng, kt)
				for range 2 {
					*q.At(rng.IntN(rows), rng.IntN(d)) = specials[rng.IntN(len(specials))]
					*kt.At(rng.IntN(d), rng.IntN(nc)) = specials[rng.IntN(len(specials))]
				}
				sg := s.Clone()
				arm.QktNEON(&s.S()[0], s.LD, &q.S()[0], q.LD, &kt.S()[0], kt.LD, rows, nc, d, 0.5)
				qktGeneric(sg.S(), sg.LD, q.S(), q.LD, kt.S(), kt.LD, rows, nc, d, 0.5)
				s.CheckOutside(t, "QKT specials")
				for i := range rows {
					for j := range nc {
						var mag float64
						for k := range d {
							mag += math.Abs(float64(*q.At(i, k)) * float64(*kt.At(k, j)))
						}
						got, want := *s.At(i, j), *sg.At(i, j)
						if math.IsNaN(mag) || math.IsInf(mag, 0) {
							require.Equal(t, math.IsNaN(float64(want)), math.IsNaN(float64(got)), "rows %d cols %d d %d s[%d][%d]: %g vs %g", rows, nc, d, i, j, got, want)
							if !math.IsNaN(float64(want)) {
								require.Equal(t, want, got)
							}
							continue
						}
						require.True(t, withinDot(got, want, 0.5*mag, d), "rows %d cols %d d %d s[%d][%d]: %g vs %g", rows, nc, d, i, j, got, want)
					}
				}
			}
		}
	}
}

func TestPVNEON(t *testing.T) {
	setImpl(t, NEON)
	rng := rand.New(rand.NewPCG(21, 22))
	keys := neonCols(rng, 2)
	exact, total := 0, 0
	for _, rows := range neonRows {
		for _, d := range neonDims {
			for ci, nc := range keys {
				offO, offP, offV := 1+ci%3, 1+(ci+2)%3, 1+(ci+1)%3
				o := newBlock(rows, d, d+gapFor(rng), offO)
				p := newBlock(rows, nc, nc+gapFor(rng), offP)
				v := newBlock(nc, d, d+gapFor(rng), offV)
				impltest.FillBlock(rng, o)
				impltest.FillBlock(rng, v)
				for i := range rows {
					for j := range nc {
						*p.At(i, j) = float32(rng.Float64())
					}
				}
				og, o0 := o.Clone(), o.Clone()
				arm.PvNEON(&o.S()[0], o.LD, &p.S()[0], p.LD, &v.S()[0], v.LD, rows, nc, d)
				pvGeneric(og.S(), og.LD, p.S(), p.LD, v.S(), v.LD, rows, nc, d)
				what := fmt.Sprintf("PV rows %d cols %d d %d", rows, nc, d)
				o.CheckOutside(t, what)
				for i := range rows {
					for k := range d {
						mag := math.Abs(float64(*o0.At(i, k)))
						for j := range nc {
							mag += math.Abs(float64(*p.At(i, j)) * float64(*v.At(j, k)))
						}
						got, want := *o.At(i, k), *og.At(i, k)
						if !withinDot(got, want, mag, nc) {
							t.Fatalf("%s: o[%d][%d] = %g, generic %g", what, i, k, got, want)
						}
						total++
						if got == want {
							exact++
						}
					}
				}
			}
		}
	}
	t.Logf("PV: %d of %d outputs equal to the generic ones", exact, total)
}

// The tail of a PV row that overlaps the previous block must not be
// accumulated twice: with o = 0 and a single key, o must come out as p·v
// exactly, for every d.
func TestPVNEONExactSingleKey(t *testing.T) {
	setImpl(t, NEON)
	for _, rows := range []int{1, 2, 3, 4, 5, 7} {
		for d := 1; d <= 70; d++ {
			o := newBlock(rows, d, d+1, 1)
			p := newBlock(rows, 1, 3, 2)
			v := newBlock(1, d, d, 3)
			for i := range rows {
				*p.At(i, 0) = float32(i + 2)
				for k := range d {
					*o.At(i, k) = 0
				}
			}
			for k := range d {
				*v.At(0, k) = float32(k + 1)
			}
			arm.PvNEON(&o.S()[0], o.LD, &p.S()[0], p.LD, &v.S()[0], v.LD, rows, 1, d)
			o.CheckOutside(t, "PV single key")
			for i := range rows {
				for k := range d {
					require.Equal(t, float32((i+2)*(k+1)), *o.At(i, k), "rows %d d %d o[%d][%d]", rows, d, i, k)
				}
			}
		}
	}
}

// checkExpSum runs arm.ExpSumNEON on src (copied into a guarded buffer at off)
// against Exp, elementwise within 1 ulp, 0 exactly where Exp gives 0, and
// the sum within 1e-6·n of the generic sum.
func checkExpSum(t *testing.T, src []float32, max float32, off int, inPlace bool) {
	t.Helper()
	n := len(src)
	sb := newBlock(1, n, n, off)
	copy(sb.S(), src)
	db := sb
	if !inPlace {
		db = newBlock(1, n, n, 3-off%3)
	}
	got := arm.ExpSumNEON(&db.S()[0], &sb.S()[0], n, max)
	db.CheckOutside(t, "ExpSum dst")
	want := expSumGeneric(make([]float32, n), src, max)
	for i, x := range src {
		e := Exp(x - max)
		g := db.S()[i]
		if ulps(g, e) > 1 || (e == 0) != (g == 0) || math.IsInf(float64(e), 0) != math.IsInf(float64(g), 0) {
			t.Fatalf("ExpSum n %d: Exp(%g - %g) = %g (%#x), NEON %g (%#x)", n, x, max, e, math.Float32bits(e), g, math.Float32bits(g))
		}
	}
	switch {
	case want != want:
		require.True(t, got != got, "ExpSum n %d: sum %g, generic NaN", n, got)
	case math.IsInf(float64(want), 0):
		require.Equal(t, want, got)
	default:
		require.InDelta(t, float64(want), float64(got), 1e-6*float64(n)*math.Abs(float64(want))+1e-38, "ExpSum n %d sum", n)
	}
}

func TestExpSumNEON(t *testing.T) {
	setImpl(t, NEON)
	rng := rand.New(rand.NewPCG(31, 32))
	sizes := neonCols(rng, 3)
	sizes = append(sizes, 1000)
	for si, n := range sizes {
		src := make([]float32, n)
		// Typical softmax scores: the row maximum is 0 after the shift, the
		// rest spread far enough to underflow now and then.
		for i := range src {
			src[i] = float32(rng.NormFloat64() * 30)
		}
		m := maxGeneric(src)
		checkExpSum(t, src, m, 1+si%3, si%2 == 0)
		checkExpSum(t, src, 0, 1+(si+1)%3, si%2 == 1)
	}
	// Special and boundary values in every lane position and tail length.
	specials := []float32{
		float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN()), 0, float32(math.Copysign(0, -1)),
		expMin, math.Nextafter32(expMin, 0), math.Nextafter32(expMin, -100), -87.3, -87.4, -100, -1e30,
		expMax, math.Nextafter32(expMax, 0), math.Nextafter32(expMax, 100), 88.72, 88.7, 88.0, 1e30,
		-103.9, -104, 0.34657359, -0.34657359, 1e-8, -1e-8, 1, -1, 0.5, 87.9, -86.9,
	}
	for n := 1; n <= 37; n++ {
		src := make([]float32, n)
		for i := range src {
			src[i] = specials[(i*7+n)%len(specials)]
		}
		checkExpSum(t, src, 0, 1+n%3, n%2 == 0)
	}
	// Masked scores (-Inf) against a finite maximum give exactly 0, a -Inf
	// maximum turns everything into NaN (−Inf − (−Inf)), like Exp does.
	checkExpSum(t, []float32{float32(math.Inf(-1)), 0, -3, float32(math.Inf(-1)), 1, 2}, 2, 1, false)
	checkExpSum(t, []float32{float32(math.Inf(-1)), float32(math.Inf(-1)), float32(math.Inf(-1))}, float32(math.Inf(-1)), 2, true)
}

// TestExpNEONRange compares the vector exponential with Exp over a dense
// sweep of its whole domain and past both ends.
func TestExpNEONRange(t *testing.T) {
	setImpl(t, NEON)
	const n = 1 << 16
	for _, r := range [][2]float32{{-110, 110}, {-88, -86}, {88, 89}, {-1, 1}} {
		src := make([]float32, n)
		for i := range src {
			src[i] = r[0] + (r[1]-r[0])*float32(i)/n
		}
		dst := make([]float32, n)
		arm.ExpSumNEON(&dst[0], &src[0], n, 0)
		worst := int64(0)
		for i, x := range src {
			d := ulps(dst[i], Exp(x))
			worst = max(worst, d)
			if d > 1 || (dst[i] == 0) != (Exp(x) == 0) {
				t.Fatalf("Exp(%g) = %g, NEON %g", x, Exp(x), dst[i])
			}
		}
		t.Logf("range [%g, %g]: worst %d ulp", r[0], r[1], worst)
	}
}

func TestMaxNEON(t *testing.T) {
	setImpl(t, NEON)
	rng := rand.New(rand.NewPCG(41, 42))
	nan := float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	check := func(x []float32, off int) {
		t.Helper()
		b := newBlock(1, len(x), len(x), off)
		copy(b.S(), x)
		got, want := arm.MaxNEON(&b.S()[0], len(x)), maxGeneric(x)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("Max of %d elements %v: NEON %g (%#x), generic %g (%#x)", len(x), x, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	for si, n := range neonCols(rng, 4) {
		x := randn(rng, n)
		check(x, 1+si%3)
		// A NaN at every position (a sample of positions for long rows),
		// with distinct payloads so that the first one must come back.
		for pos := 0; pos < n; pos += 1 + n/40 {
			y := append([]float32(nil), x...)
			y[pos] = math.Float32frombits(0x7fc00001)
			y[(pos+n/2)%n] = math.Float32frombits(0xffc00002)
			check(y, 1+pos%3)
			z := append([]float32(nil), x...)
			z[pos] = math.Float32frombits(0x7f800003) // signalling
			check(z, 1+(pos+1)%3)
		}
		// Maximum zero with both signs in different orders.
		for i := range x {
			x[i] = -float32(rng.Float64()) - 0.1
		}
		if n >= 2 {
			y := append([]float32(nil), x...)
			y[rng.IntN(n)] = negZero
			y[rng.IntN(n)] = 0
			check(y, 1+si%3)
			y[rng.IntN(n)] = negZero
			check(y, 2)
		}
		all := make([]float32, n)
		for i := range all {
			all[i] = float32(math.Inf(-1))
		}
		check(all, 3)
		all[n-1] = float32(math.Inf(1))
		check(all, 1)
		all[0] = nan
		check(all, 2)
	}
}

func TestScaleNEON(t *testing.T) {
	setImpl(t, NEON)
	rng := rand.New(rand.NewPCG(51, 52))
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), 1e-40, 3e38}
	for si, n := range neonCols(rng, 4) {
		src := newBlock(1, n, n, 1+si%3)
		impltest.FillBlock(rng, src)
		for range 3 {
			src.S()[rng.IntN(n)] = specials[rng.IntN(len(specials))]
		}
		for _, a := range []float32{0.7, -3, 0, float32(math.Inf(1)), 1e-30} {
			dst := newBlock(1, n, n, 1+(si+1)%3)
			arm.ScaleNEON(&dst.S()[0], &src.S()[0], n, a)
			dst.CheckOutside(t, "Scale")
			want := make([]float32, n)
			scaleGeneric(want, src.S(), a)
			requireSameBits(t, dst.S(), want, "Scale n %d a %g", n, a)
			// In place.
			in := src.Clone()
			arm.ScaleNEON(&in.S()[0], &in.S()[0], n, a)
			in.CheckOutside(t, "Scale in place")
			requireSameBits(t, in.S(), want, "Scale in place n %d", n)
		}
	}
}

// packCase runs one pack kernel and its generic twin on n rows of d, with
// the destination transposed or not, and requires identical bits.
type packCase struct {
	name      string
	transpose bool
	neon      func(dst *float32, ldDst int, src *uint16, ldSrc int, n, d int)
	generic   func(dst []float32, ldDst int, src *block16, n, d int)
}

var packCases = []packCase{
	{"PackKTFloat16", true, arm.PackKTF16NEON, func(dst []float32, ldDst int, src *block16, n, d int) {
		packKTFloat16Generic(dst, ldDst, asF16(src.S()), src.LD, n, d)
	}},
	{"PackKTBFloat16", true, arm.PackKTBF16NEON, func(dst []float32, ldDst int, src *block16, n, d int) {
		packKTBFloat16Generic(dst, ldDst, asBF16(src.S()), src.LD, n, d)
	}},
	{"PackFloat16", false, arm.PackF16NEON, func(dst []float32, ldDst int, src *block16, n, d int) {
		packFloat16Generic(dst, ldDst, asF16(src.S()), src.LD, n, d)
	}},
	{"PackBFloat16", false, arm.PackBF16NEON, func(dst []float32, ldDst int, src *block16, n, d int) {
		packBFloat16Generic(dst, ldDst, asBF16(src.S()), src.LD, n, d)
	}},
}

func (pc packCase) run(t *testing.T, src *block16, n, d, gap, off int) {
	t.Helper()
	var dst *guardedBlock
	if pc.transpose {
		dst = newBlock(d, n, n+gap, off)
	} else {
		dst = newBlock(n, d, d+gap, off)
	}
	want := dst.Clone()
	pc.neon(&dst.S()[0], dst.LD, &src.S()[0], src.LD, n, d)
	pc.generic(want.S(), want.LD, src, n, d)
	what := fmt.Sprintf("%s n %d d %d", pc.name, n, d)
	dst.CheckOutside(t, what)
	requireSameBits(t, dst.Buf, want.Buf, "%s (the buffer, block from %d)", what, dst.Off)
}

func TestPack16NEON(t *testing.T) {
	setImpl(t, NEON)
	rng := rand.New(rand.NewPCG(61, 62))
	for _, pc := range packCases {
		for _, n := range neonRows {
			for di, d := range neonCols(rng, 1) {
				if d > 65 && n > 5 {
					continue
				}
				src := newBlock16(n, d, d+gapFor(rng), 1+di%3)
				src.Each(func(p *uint16) { *p = uint16(rng.Uint32()) })
				pc.run(t, src, n, d, gapFor(rng), 1+(di+n)%3)
			}
			for di, d := range neonDims {
				src := newBlock16(d, n, n+gapFor(rng), 1+di%3) // rows = d: the key count varies too
				src.Each(func(p *uint16) { *p = uint16(rng.Uint32()) })
				pc.run(t, src, d, n, gapFor(rng), 1+(di+n)%3)
			}
		}
	}
}

// TestPack16NEONAllPatterns converts every one of the 65,536 binary16 and
// bfloat16 bit patterns, both transposed and not, and requires the bits of
// the generic conversion (so NaN stays NaN, with its payload and sign).
func TestPack16NEONAllPatterns(t *testing.T) {
	setImpl(t, NEON)
	for _, pc := range packCases {
		for _, shape := range [][2]int{{256, 256}, {1024, 64}, {37, 1772}} { // 37·1772 = 65,564 ≥ 65,536
			n, d := shape[0], shape[1]
			src := newBlock16(n, d, d+1, 2)
			next := 0
			src.Each(func(p *uint16) { *p = uint16(next); next++ })
			pc.run(t, src, n, d, 3, 1)
		}
	}
	// NaN stays NaN, checked directly as well.
	src := newBlock16(1, 1<<16, 1<<16, 1)
	next := 0
	src.Each(func(p *uint16) { *p = uint16(next); next++ })
	dst := make([]float32, 1<<16)
	arm.PackF16NEON(&dst[0], 1<<16, &src.S()[0], 1<<16, 1, 1<<16)
	for i, f := range dst {
		assert.Equal(t, fp16.Float16(i).IsNaN(), f != f, "binary16 %#04x", i)
	}
	arm.PackBF16NEON(&dst[0], 1<<16, &src.S()[0], 1<<16, 1, 1<<16)
	for i, f := range dst {
		assert.Equal(t, fp16.BFloat16(i).IsNaN(), f != f, "bfloat16 %#04x", i)
	}
}

func TestPackKTNEON(t *testing.T) {
	setImpl(t, NEON)
	rng := rand.New(rand.NewPCG(71, 72))
	check := func(n, d, off int) {
		src := newBlock(n, d, d+gapFor(rng), off)
		src.Each(func(p *float32) { *p = math.Float32frombits(rng.Uint32()) })
		dst := newBlock(d, n, n+gapFor(rng), 1+(off+n)%3)
		want := dst.Clone()
		arm.PackKTNEON(&dst.S()[0], dst.LD, &src.S()[0], src.LD, n, d)
		packKTGeneric(want.S(), want.LD, src.S(), src.LD, n, d)
		what := fmt.Sprintf("PackKT n %d d %d", n, d)
		dst.CheckOutside(t, what)
		requireSameBits(t, dst.Buf, want.Buf, "%s (the buffer, block from %d)", what, dst.Off)
	}
	for _, r := range neonRows {
		for ci, c := range neonCols(rng, 2) {
			check(c, r, 1+ci%3) // n keys, d = r components
			check(r, c, 1+(ci+1)%3)
		}
	}
	for _, n := range neonDims {
		for _, d := range neonDims {
			check(n, d, 1+(n+d)%3)
		}
	}
}

// Sizes of zero: the exported QKT lets d = 0 through (every score is
// scale·0), and no kernel may touch memory for an empty operand.
func TestNEONDegenerate(t *testing.T) {
	setImpl(t, NEON)
	for _, rows := range []int{1, 3, 4, 5} {
		for _, nc := range []int{1, 2, 3, 4, 5, 16, 17, 21} {
			s := newBlock(rows, nc, nc+1, 1)
			sg := s.Clone()
			var q, kt [1]float32
			arm.QktNEON(&s.S()[0], s.LD, &q[0], 1, &kt[0], nc, rows, nc, 0, 0.5)
			qktGeneric(sg.S(), sg.LD, nil, 0, nil, nc, rows, nc, 0, 0.5) // ldQ 0: qktGeneric slices q rows even when d = 0
			s.CheckOutside(t, "QKT d = 0")
			requireSameBits(t, s.Buf, sg.Buf, "QKT d = 0 rows %d cols %d", rows, nc)
		}
	}
	g := newBlock(1, 8, 8, 1)
	p := &g.S()[0]
	h := make([]uint16, 8)
	untouched := func(what string) {
		t.Helper()
		for _, v := range g.S() {
			require.Equal(t, uint32(neonGuardBits), math.Float32bits(v), what)
		}
	}
	for _, sz := range [][3]int{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}, {0, 0, 0}} {
		arm.PvNEON(p, 8, p, 8, p, 8, sz[0], sz[1], sz[2])
		untouched("PV")
		if sz[2] != 0 {
			arm.QktNEON(p, 8, p, 8, p, 8, sz[0], sz[1], sz[2], 1)
			untouched("QKT")
		}
	}
	assert.Zero(t, arm.ExpSumNEON(p, p, 0, 1))
	untouched("ExpSum")
	assert.True(t, math.IsInf(float64(arm.MaxNEON(p, 0)), -1))
	arm.ScaleNEON(p, p, 0, 2)
	untouched("Scale")
	for _, nd := range [][2]int{{0, 3}, {3, 0}} {
		arm.PackKTNEON(p, 8, p, 8, nd[0], nd[1])
		arm.PackKTF16NEON(p, 8, &h[0], 8, nd[0], nd[1])
		arm.PackKTBF16NEON(p, 8, &h[0], 8, nd[0], nd[1])
		arm.PackF16NEON(p, 8, &h[0], 8, nd[0], nd[1])
		arm.PackBF16NEON(p, 8, &h[0], 8, nd[0], nd[1])
		untouched("packs")
	}
}
