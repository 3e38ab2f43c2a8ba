//go:build amd64 && !purego

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
	"github.com/flashgo/flashgo/internal/tier"
	"github.com/flashgo/flashgo/kernel/internal/x86"
)

// Tests of the vector kernels in vec_amd64.s against their generic twins.
// Every buffer is framed by guard elements and every gap between rows is
// filled with a NaN sentinel that no kernel produces, so an out-of-bounds
// write shows up as a changed guard and an out-of-bounds read as a
// sentinel (or NaN) in the output.

type packFunc func(dst *float32, ldDst int, src *uint16, ldSrc int, n, d int)

// vecISA is one instruction-set variant of the vector kernels.
type vecISA struct {
	name       string
	expSum     func(dst, src *float32, n int, max float32) float32
	max        func(x *float32, n int) float32
	scale      func(dst, src *float32, n int, a float32)
	packKT     func(dst *float32, ldDst int, src *float32, ldSrc int, n, d int)
	packKTF16  packFunc
	packKTBF16 packFunc
	packF16    packFunc
	packBF16   packFunc
}

var vecISAs = []vecISA{
	{AVX512, x86.ExpSumAVX512, x86.MaxAVX512, x86.ScaleAVX512, x86.PackKTAVX512, x86.PackKTF16AVX512, x86.PackKTBF16AVX512, x86.PackF16AVX512, x86.PackBF16AVX512},
	{AVX2, x86.ExpSumAVX2, x86.MaxAVX2, x86.ScaleAVX2, x86.PackKTAVX2, x86.PackKTF16AVX2, x86.PackKTBF16AVX2, x86.PackF16AVX2, x86.PackBF16AVX2},
}

// vecEach runs f once per variant, as testImpls does, skipping those
// this machine cannot run.
func vecEach(t *testing.T, f func(t *testing.T, v vecISA)) {
	var names []string
	for _, v := range vecISAs {
		names = append(names, v.name)
	}
	testImpls(t, names, func(t *testing.T) { f(t, vecISANamed(t, Implementation())) })
}

// vecISANamed returns the named variant, under which tb runs from now on
// (setImpl), or skips tb, naming what this machine lacks, if it cannot run
// it.
func vecISANamed(tb testing.TB, name string) vecISA {
	tb.Helper()
	setImpl(tb, name)
	for _, v := range vecISAs {
		if v.name == name {
			return v
		}
	}
	tb.Fatalf("no vector variant %s", name)
	return vecISA{}
}

// vecSizes returns 1..65, 127, 128, 129 and a few random sizes up to 1100.
func vecSizes(rng *rand.Rand) []int {
	var s []int
	for n := 1; n <= 65; n++ {
		s = append(s, n)
	}
	s = append(s, 127, 128, 129)
	for range 6 {
		s = append(s, 66+rng.IntN(1035))
	}
	return s
}

const (
	vecGuard    = 7          // guard elements before every buffer (blockTrail after)
	vecSentinel = 0x7fa5a5a5 // float32 NaN in guards and gaps
	vecSent16   = 0x7e5a     // binary16 NaN (and a bfloat16 NaN) in gaps
)

// vecBuf returns a guarded buffer of n float32 at offset off (0..3) after
// the leading guards, all set to the sentinel (a one-row impltest.Block),
// and the view of the n elements.
func vecBuf(n, off int) (buf, view []float32) {
	b := impltest.NewBlock(1, n, n, vecGuard+off, blockTrail, math.Float32frombits(vecSentinel))
	return b.Buf, b.S()
}

// vecBuf16 is vecBuf for 16-bit elements, with vecGuard guards after them.
func vecBuf16(n, off int) (buf, view []uint16) {
	b := impltest.NewBlock(1, n, n, vecGuard+off, vecGuard, uint16(vecSent16))
	return b.Buf, b.S()
}

// expInput returns an argument for the exponential tests: mostly scores
// near the softmax range, with the special values mixed in.
func expInput(rng *rand.Rand) float32 {
	switch rng.IntN(20) {
	case 0:
		specials := []float32{
			float32(math.NaN()), math.Float32frombits(0x7f800001), math.Float32frombits(0xffc01234),
			float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
			math.MaxFloat32, -math.MaxFloat32, 1e-40, -1e-40,
			expMin, expMax, math.Nextafter32(expMin, 0), math.Nextafter32(expMin, -1),
			math.Nextafter32(expMax, 0), math.Nextafter32(expMax, 100), 88.37, 88.38, -87.0, -86.99,
			-103.9, -104, 1000, -1000,
		}
		return specials[rng.IntN(len(specials))]
	case 1:
		return float32(rng.Float64()*200 - 100)
	case 2:
		return math.Float32frombits(rng.Uint32())
	}
	return float32(rng.NormFloat64() * 8)
}

// checkExpSum runs fn on src (copied into a fresh guarded buffer at offset
// off) and compares it with expSumGeneric, also in place.
func checkExpSum(t testing.TB, fn func(dst, src *float32, n int, max float32) float32, src []float32, off int, mx float32) {
	t.Helper()
	n := len(src)
	sBuf, s := vecBuf(n, off)
	copy(s, src)
	sOrig := append([]float32(nil), sBuf...)
	dBuf, d := vecBuf(n, (off+1)%4)
	wBuf, w := vecBuf(n, (off+1)%4)
	sum := fn(&d[0], &s[0], n, mx)
	want := expSumGeneric(w, s, mx)
	requireSameBits(t, sBuf, sOrig, "expSum n %d: src changed", n)
	for i := range n {
		if u := ulps(d[i], w[i]); u > 1 || (w[i] != w[i] && math.Float32bits(d[i]) != math.Float32bits(w[i])) {
			t.Fatalf("expSum n %d max %v: Exp(%v) = %v (%#08x), generic %v (%#08x)", n, mx, s[i]-mx, d[i], math.Float32bits(d[i]), w[i], math.Float32bits(w[i]))
		}
		d[i], w[i] = 0, 0
	}
	requireSameBits(t, dBuf, wBuf, "expSum n %d: writes outside dst", n)
	checkSum(t, n, sum, want)

	// In place.
	sum2 := fn(&s[0], &s[0], n, mx)
	for i := range n {
		if u := ulps(s[i], expSumGeneric(w[i:i+1], src[i:i+1], mx)); u > 1 {
			t.Fatalf("expSum in place n %d: element %d is %v, want %v", n, i, s[i], w[i])
		}
	}
	checkSum(t, n, sum2, want)
}

func checkSum(t testing.TB, n int, got, want float32) {
	t.Helper()
	switch {
	case want != want:
		require.True(t, got != got, "n %d: sum %v, want NaN", n, got)
	case math.IsInf(float64(want), 0):
		require.Equal(t, want, got, "n %d: sum", n)
	default:
		tol := 1e-6*float64(n)*math.Abs(float64(want)) + 1e-40
		require.InDelta(t, float64(want), float64(got), tol, "n %d: sum", n)
	}
}

func TestExpSumAsm(t *testing.T) {
	vecEach(t, func(t *testing.T, v vecISA) {
		rng := rand.New(rand.NewPCG(11, 11))
		for _, n := range vecSizes(rng) {
			for off := range 4 {
				src := make([]float32, n)
				for i := range src {
					src[i] = expInput(rng)
				}
				for _, mx := range []float32{0, 2.5, -3, float32(rng.NormFloat64() * 10)} {
					checkExpSum(t, v.expSum, src, off, mx)
				}
				// A softmax row: finite scores, masked keys, no specials.
				for i := range src {
					src[i] = float32(rng.NormFloat64() * 4)
					if rng.IntN(8) == 0 {
						src[i] = float32(math.Inf(-1))
					}
				}
				checkExpSum(t, v.expSum, src, off, slicesMax(src))
			}
		}
		// Special maxima.
		src := []float32{0, 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 50, -50, 3, 4, 5, 6, 7, 8, 9, 10, 11}
		for _, mx := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32} {
			checkExpSum(t, v.expSum, src, 1, mx)
		}
	})
}

func slicesMax(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	return m
}

// TestExpAsmAccuracy sweeps [−87.3, 0] and measures the worst error of the
// vector exponential against math.Exp rounded to float32 (at most 2 ulp
// required) and against the scalar Exp (at most 1 ulp required).
func TestExpAsmAccuracy(t *testing.T) {
	vecEach(t, func(t *testing.T, v vecISA) {
		const chunk = 4096
		var src, dst [chunk]float32
		var worstRef, worstGo int64
		var atRef, atGo float32
		var exact, total int
		flush := func(n int) {
			v.expSum(&dst[0], &src[0], n, 0)
			for i := range n {
				x := src[i]
				ref := float32(math.Exp(float64(x)))
				g := Exp(x)
				if u := ulps(dst[i], ref); u > worstRef {
					worstRef, atRef = u, x
				}
				if u := ulps(dst[i], g); u > worstGo {
					worstGo, atGo = u, x
				}
				if math.Float32bits(dst[i]) == math.Float32bits(g) {
					exact++
				}
				total++
			}
		}
		n := 0
		add := func(x float32) {
			src[n] = x
			n++
			if n == chunk {
				flush(n)
				n = 0
			}
		}
		// Every 61st float32 in [−87.3, 0) (997th in the fast tier), every
		// float32 in [-1, -0.99] and around the ends of the range.
		lo := math.Float32bits(-87.3)
		stride := uint32(61)
		if !tier.Long() {
			stride = 997
		}
		for b := uint32(0x80000000); b <= lo; b += stride {
			add(math.Float32frombits(b))
		}
		for b := math.Float32bits(-0.99); b <= math.Float32bits(-1); b++ {
			add(math.Float32frombits(b))
		}
		for b := lo - 1<<16; b <= math.Float32bits(expMin); b++ {
			add(math.Float32frombits(b))
		}
		// The positive side up to overflow.
		for x := float32(0); x <= 88.8; x += 1.0 / 1024 {
			add(x)
		}
		for b := math.Float32bits(expMax) - 1<<12; b <= math.Float32bits(expMax)+16; b++ {
			add(math.Float32frombits(b))
		}
		flush(n)
		t.Logf("%s Exp: worst %d ulp vs math.Exp (at %v), worst %d ulp vs Exp (at %v); %.3f%% of %d bit-identical to Exp",
			v.name, worstRef, atRef, worstGo, atGo, 100*float64(exact)/float64(total), total)
		assert.LessOrEqual(t, worstRef, int64(2))
		assert.LessOrEqual(t, worstGo, int64(1))

		for _, c := range []struct{ x, want float32 }{
			{0, 1},
			{float32(math.Copysign(0, -1)), 1},
			{-87.34, 0},
			{-1000, 0},
			{float32(math.Inf(-1)), 0},
			{-math.MaxFloat32, 0},
			{89, float32(math.Inf(1))},
			{math.Nextafter32(expMax, 100), float32(math.Inf(1))},
			{math.MaxFloat32, float32(math.Inf(1))},
			{float32(math.Inf(1)), float32(math.Inf(1))},
		} {
			var d [1]float32
			s := [1]float32{c.x}
			v.expSum(&d[0], &s[0], 1, 0)
			assert.Equal(t, math.Float32bits(c.want), math.Float32bits(d[0]), "Exp(%v)", c.x)
		}
		var d [3]float32
		s := [3]float32{0, float32(math.NaN()), 0}
		assert.True(t, math.IsNaN(float64(v.expSum(&d[0], &s[0], 3, 0))))
		assert.True(t, math.IsNaN(float64(d[1])))
	})
}

func TestMaxAsm(t *testing.T) {
	vecEach(t, func(t *testing.T, v vecISA) {
		rng := rand.New(rand.NewPCG(12, 12))
		check := func(x []float32, off int) {
			t.Helper()
			buf, view := vecBuf(len(x), off)
			// Guards hold the sentinel NaN: reading one gives NaN.
			copy(view, x)
			got := v.max(&view[0], len(view))
			want := maxGeneric(x)
			if want != want {
				require.Equal(t, math.Float32bits(want), math.Float32bits(got), "n %d: want the first NaN", len(x))
			} else {
				require.Equal(t, want, got, "n %d", len(x))
			}
			_ = buf
		}
		for _, n := range vecSizes(rng) {
			x := make([]float32, n)
			for off := range 4 {
				for i := range x {
					x[i] = float32(rng.NormFloat64() * 100)
				}
				check(x, off)
				// NaN everywhere (all positions for short rows), with a second
				// NaN of another payload further on.
				step := max(1, n/23)
				for at := 0; at < n; at += step {
					y := append([]float32(nil), x...)
					y[at] = math.Float32frombits(0x7fc00000 | uint32(at+1))
					if at+5 < n {
						y[at+5] = math.Float32frombits(0xffc0beef)
					}
					check(y, off)
					y[at] = float32(math.Inf(1))
					if at+5 < n {
						y[at+5] = 0
					}
					check(y, off)
				}
				neg := make([]float32, n)
				for i := range neg {
					neg[i] = float32(math.Inf(-1))
				}
				check(neg, off)
				neg[n-1] = -math.MaxFloat32
				check(neg, off)
				neg[0] = float32(math.Copysign(0, -1))
				check(neg, off)
			}
		}
	})
}

func TestScaleAsm(t *testing.T) {
	vecEach(t, func(t *testing.T, v vecISA) {
		rng := rand.New(rand.NewPCG(13, 13))
		for _, n := range vecSizes(rng) {
			for off := range 4 {
				for _, a := range []float32{1.5, -0.25, 0, 1e-30, float32(math.Inf(1)), float32(rng.NormFloat64())} {
					_, s := vecBuf(n, off)
					for i := range s {
						s[i] = expInput(rng)
					}
					dBuf, d := vecBuf(n, 3-off)
					wBuf, w := vecBuf(n, 3-off)
					v.scale(&d[0], &s[0], n, a)
					scaleGeneric(w, s, a)
					requireSameBits(t, dBuf, wBuf, "scale n %d a %v", n, a)
					// In place.
					v.scale(&s[0], &s[0], n, a)
					requireSameBits(t, s, w, "scale in place n %d a %v", n, a)
				}
			}
		}
	})
}

// packCase is one pack geometry: n keys (rows) of d elements, leading
// dimensions and buffer offsets.
type packCase struct {
	n, d, ldS, ldD, offS, offD int
}

func (c packCase) String() string {
	return fmt.Sprintf("n %d d %d ldSrc %d ldDst %d offsets %d,%d", c.n, c.d, c.ldS, c.ldD, c.offS, c.offD)
}

func packCases(rng *rand.Rand, transposed bool) []packCase {
	sizes := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 15, 16, 17, 19, 23, 24, 25, 31, 32, 33, 40, 47, 48, 49, 63, 64, 65, 127, 128, 129}
	for range 3 {
		sizes = append(sizes, 1+rng.IntN(200))
	}
	var cs []packCase
	for _, n := range sizes {
		for _, d := range sizes {
			c := packCase{n: n, d: d, ldS: d + rng.IntN(3), offS: rng.IntN(4), offD: rng.IntN(4)}
			if transposed {
				c.ldD = n + rng.IntN(3)
			} else {
				c.ldD = d + rng.IntN(3)
			}
			cs = append(cs, c)
		}
	}
	// Every n and d in 1..65 at least once, paired with a random partner.
	for s := 1; s <= 65; s++ {
		p := 1 + rng.IntN(129)
		cs = append(cs, packCase{n: s, d: p, ldS: p + 1, ldD: s + 2, offS: 1, offD: 3}, packCase{n: p, d: s, ldS: s + 2, ldD: p + 1, offS: 2, offD: 1})
	}
	if !transposed {
		for i := range cs {
			cs[i].ldD = max(cs[i].ldD, cs[i].d)
		}
	}
	return cs
}

// packSrc16 returns a guarded uint16 source of n rows of d elements with
// the sentinel in the row gaps, filled by gen.
func packSrc16(c packCase, gen func() uint16) (buf, view []uint16) {
	buf, view = vecBuf16((c.n-1)*c.ldS+c.d, c.offS)
	for j := range c.n {
		for k := range c.d {
			view[j*c.ldS+k] = gen()
		}
	}
	return buf, view
}

// packDst returns two identical guarded destinations (for the kernel and
// for the generic twin) of rows×cols at ldD.
func packDst(c packCase, rows, cols int) (gotBuf, got, wantBuf, want []float32) {
	gotBuf, got = vecBuf((rows-1)*c.ldD+cols, c.offD)
	wantBuf, want = vecBuf((rows-1)*c.ldD+cols, c.offD)
	return
}

func u16p(s []uint16) *uint16 { return &s[0] }

// runPack16 checks one 16-bit pack kernel against its generic twin.
func runPack16(t testing.TB, c packCase, name string, fn packFunc, src []uint16, srcBuf []uint16) {
	t.Helper()
	rows, cols := c.d, c.n // transposed panel
	if name == "packF16" || name == "packBF16" {
		rows, cols = c.n, c.d
	}
	srcOrig := append([]uint16(nil), srcBuf...)
	gotBuf, got, wantBuf, want := packDst(c, rows, cols)
	fn(&got[0], c.ldD, u16p(src), c.ldS, c.n, c.d)
	switch name {
	case "packKTF16":
		packKTFloat16Generic(want, c.ldD, asF16(src), c.ldS, c.n, c.d)
	case "packKTBF16":
		packKTBFloat16Generic(want, c.ldD, asBF16(src), c.ldS, c.n, c.d)
	case "packF16":
		packFloat16Generic(want, c.ldD, asF16(src), c.ldS, c.n, c.d)
	case "packBF16":
		packBFloat16Generic(want, c.ldD, asBF16(src), c.ldS, c.n, c.d)
	}
	require.Equal(t, srcOrig, srcBuf, "%s %v: source changed", name, c)
	requireSameBits(t, gotBuf, wantBuf, "%s %v", name, c)
}

func TestPackKTAsm(t *testing.T) {
	vecEach(t, func(t *testing.T, v vecISA) {
		rng := rand.New(rand.NewPCG(14, 14))
		for _, c := range packCases(rng, true) {
			// float32: random values, some NaNs with payloads.
			sBuf, s := vecBuf((c.n-1)*c.ldS+c.d, c.offS)
			for j := range c.n {
				for k := range c.d {
					s[j*c.ldS+k] = float32(rng.NormFloat64())
					if rng.IntN(50) == 0 {
						s[j*c.ldS+k] = math.Float32frombits(rng.Uint32() | 0x7f800001)
					}
				}
			}
			sOrig := append([]float32(nil), sBuf...)
			gotBuf, got, wantBuf, want := packDst(c, c.d, c.n)
			v.packKT(&got[0], c.ldD, &s[0], c.ldS, c.n, c.d)
			packKTGeneric(want, c.ldD, s, c.ldS, c.n, c.d)
			requireSameBits(t, sBuf, sOrig, "packKT %v: source changed", c)
			requireSameBits(t, gotBuf, wantBuf, "packKT %v", c)

			hBuf, h := packSrc16(c, func() uint16 { return uint16(rng.Uint32()) })
			runPack16(t, c, "packKTF16", v.packKTF16, h, hBuf)
			runPack16(t, c, "packKTBF16", v.packKTBF16, h, hBuf)
		}
	})
}

func TestPackRowsAsm(t *testing.T) {
	vecEach(t, func(t *testing.T, v vecISA) {
		rng := rand.New(rand.NewPCG(15, 15))
		for _, c := range packCases(rng, false) {
			hBuf, h := packSrc16(c, func() uint16 { return uint16(rng.Uint32()) })
			runPack16(t, c, "packF16", v.packF16, h, hBuf)
			runPack16(t, c, "packBF16", v.packBF16, h, hBuf)
		}
	})
}

// TestPackAllBitsAsm converts every binary16 and bfloat16 bit pattern with
// each 16-bit pack and compares the results bit for bit (NaN payloads
// included) with the generic conversion.
func TestPackAllBitsAsm(t *testing.T) {
	vecEach(t, func(t *testing.T, v vecISA) {
		for _, shape := range [][2]int{{256, 256}, {4096, 16}, {16, 4096}, {1 << 16, 1}, {1, 1 << 16}, {13, 5041}} {
			c := packCase{n: shape[0], d: shape[1], offS: 1, offD: 2}
			c.ldS = c.d + 3
			next := uint32(0)
			hBuf, h := packSrc16(c, func() uint16 { next++; return uint16(next - 1) })
			require.Equal(t, uint32(c.n*c.d), next)
			for _, f := range []struct {
				name string
				fn   packFunc
			}{{"packKTF16", v.packKTF16}, {"packKTBF16", v.packKTBF16}, {"packF16", v.packF16}, {"packBF16", v.packBF16}} {
				c.ldD = c.n + 1
				if f.name == "packF16" || f.name == "packBF16" {
					c.ldD = c.d + 1
				}
				runPack16(t, c, f.name, f.fn, h, hBuf)
			}
		}
		// NaN stays NaN, and the conversion is the one of fp16.
		for b := range 1 << 16 {
			h := []uint16{uint16(b)}
			var got [1]float32
			v.packKTF16(&got[0], 1, &h[0], 1, 1, 1)
			want := fp16.Float16(b).Float32()
			require.Equal(t, math.Float32bits(want), math.Float32bits(got[0]), "f16 %#04x", b)
			require.Equal(t, fp16.Float16(b).IsNaN(), got[0] != got[0])
			v.packKTBF16(&got[0], 1, &h[0], 1, 1, 1)
			require.Equal(t, math.Float32bits(fp16.BFloat16(b).Float32()), math.Float32bits(got[0]), "bf16 %#04x", b)
		}
	})
}

func FuzzExpSumAVX512(f *testing.F) {
	setImpl(f, AVX512)
	f.Add([]byte{0, 0, 0x80, 0x3f, 0, 0, 0x80, 0xff, 0, 0, 0xc0, 0x7f}, float32(0), uint8(1))
	f.Add(make([]byte, 4*67), float32(2.5), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, mx float32, off uint8) {
		n := len(data) / 4
		if n == 0 {
			return
		}
		src := make([]float32, n)
		for i := range src {
			src[i] = math.Float32frombits(uint32(data[4*i]) | uint32(data[4*i+1])<<8 | uint32(data[4*i+2])<<16 | uint32(data[4*i+3])<<24)
		}
		checkExpSum(t, x86.ExpSumAVX512, src, int(off%4), mx)
	})
}

func FuzzPackKTF16AVX512(f *testing.F) {
	setImpl(f, AVX512)
	f.Add([]byte{0x00, 0x3c, 0x01, 0x7c, 0x00, 0x80}, uint8(17), uint8(5), uint8(1), uint8(2), uint8(3))
	f.Add([]byte{0xff}, uint8(64), uint8(128), uint8(0), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, n, d, gapS, gapD, offs uint8) {
		c := packCase{n: 1 + int(n)%80, d: 1 + int(d)%160, offS: int(offs) % 4, offD: int(offs/4) % 4}
		c.ldS = c.d + int(gapS)%4
		c.ldD = c.n + int(gapD)%4
		i := 0
		hBuf, h := packSrc16(c, func() uint16 {
			var b uint16
			if len(data) > 0 {
				b = uint16(data[i%len(data)]) | uint16(data[(i+1)%len(data)])<<8
			}
			i += 2
			return b ^ uint16(i*40503)
		})
		runPack16(t, c, "packKTF16", x86.PackKTF16AVX512, h, hBuf)
	})
}
