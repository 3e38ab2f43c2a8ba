package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/fp16"
)

// The bf16 row's conversions (widen, widenPairs, and the rounding
// roundRowBF16 takes) and addScale of every implementation, against their
// Go twins bit for bit: the widening on every bfloat16 pattern, the
// rounding on every high half with the low halves that decide it and on
// random and special float32s; each on every length 1..70 from several
// offsets, with nothing written outside the destination.

// widenGuard is the NaN frame around the destinations of these tests: a
// whole AVX-512 vector and more on each side.
const widenGuard = 40

// guardedAt returns a NaN-filled float32 buffer holding widenGuard+off
// elements before a view of n elements and widenGuard after, and the view.
func guardedAt(off, n int) (buf, mid []float32) {
	buf, _ = guarded(2*widenGuard + off + n - 2*pad)
	return buf, buf[widenGuard+off:][:n]
}

// checkOutsideView fails t if an element of buf outside the n elements
// from start is no longer NaN.
func checkOutsideView(t *testing.T, buf []float32, start, n int, what string) {
	t.Helper()
	checkGuards(t, buf, what)
	for i, x := range buf {
		if (i < start || i >= start+n) && x == x {
			t.Fatalf("%s: element %d outside the destination written (%v)", what, i-start, x)
		}
	}
}

// widenPatterns returns n bfloat16s from rng, a quarter of them zeros,
// subnormals, infinities or NaNs.
func widenPatterns(rng *rand.Rand, n int) []fp16.BFloat16 {
	specials := []fp16.BFloat16{0, 0x8000, 0x0001, 0x807f, 0x0040, 0x0080, 0x8080, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81, 0x7f7f}
	x := make([]fp16.BFloat16, n)
	for i := range x {
		if rng.IntN(4) == 0 {
			x[i] = specials[rng.IntN(len(specials))]
		} else {
			x[i] = fp16.BFloat16(rng.Uint32())
		}
	}
	return x
}

func TestWidenBF16(t *testing.T) { testAllImpls(t, testWidenBF16) }

func testWidenBF16(t *testing.T) {
	r := cur.bf16
	// Every pattern, in one call.
	all := make([]fp16.BFloat16, 1<<16)
	for i := range all {
		all[i] = fp16.BFloat16(i)
	}
	buf, dst := guardedAt(0, len(all))
	r.widen(&dst[0], bits16(all), len(all))
	checkOutsideView(t, buf, widenGuard, len(all), "widen")
	for i, b := range all {
		if got, want := math.Float32bits(dst[i]), math.Float32bits(bf16Value(b)); got != want {
			t.Fatalf("widen(%#04x) = %#08x, want %#08x", uint16(b), got, want)
		}
	}
	// Every length and offset.
	rng := rand.New(rand.NewPCG(21, 21))
	for n := 1; n <= 70; n++ {
		for off := range 8 {
			src := widenPatterns(rng, off+n)[off:]
			buf, dst := guardedAt((off*3)%8, n)
			r.widen(&dst[0], bits16(src), n)
			checkOutsideView(t, buf, widenGuard+(off*3)%8, n, "widen")
			for i, b := range src {
				if got, want := math.Float32bits(dst[i]), math.Float32bits(bf16Value(b)); got != want {
					t.Fatalf("n %d off %d: widen(%#04x) at %d = %#08x, want %#08x", n, off, uint16(b), i, got, want)
				}
			}
		}
	}
}

func TestWidenPairsBF16(t *testing.T) { testAllImpls(t, testWidenPairsBF16) }

func testWidenPairsBF16(t *testing.T) {
	r := cur.bf16
	// Every pattern as the first and as the second element of a pair.
	all := make([]fp16.BFloat16, 1<<16+2)
	for i := range all {
		all[i] = fp16.BFloat16(i)
	}
	for shift := range 2 {
		src := all[shift:][:1<<16]
		n := len(src) / 2
		bufE, even := guardedAt(0, n)
		bufO, odd := guardedAt(0, n)
		r.widenPairs(&even[0], &odd[0], bits16(src), n)
		checkOutsideView(t, bufE, widenGuard, n, "widenPairs even")
		checkOutsideView(t, bufO, widenGuard, n, "widenPairs odd")
		for j := range n {
			for k, got := range []float32{even[j], odd[j]} {
				b := src[2*j+k]
				if g, want := math.Float32bits(got), math.Float32bits(bf16Value(b)); g != want {
					t.Fatalf("widenPairs element %d of pair %d (%#04x) = %#08x, want %#08x", k, j, uint16(b), g, want)
				}
			}
		}
	}
	// Every length and offset, against the Go twin.
	rng := rand.New(rand.NewPCG(22, 22))
	for n := 1; n <= 70; n++ {
		for off := range 8 {
			src := widenPatterns(rng, off+2*n)[off:]
			oe, oo := off%4, (off*5)%8
			bufE, even := guardedAt(oe, n)
			bufO, odd := guardedAt(oo, n)
			r.widenPairs(&even[0], &odd[0], bits16(src), n)
			checkOutsideView(t, bufE, widenGuard+oe, n, "widenPairs even")
			checkOutsideView(t, bufO, widenGuard+oo, n, "widenPairs odd")
			we, wo := make([]float32, n), make([]float32, n)
			widenPairsGeneric(&we[0], &wo[0], bits16(src), n)
			for j := range n {
				if math.Float32bits(even[j]) != math.Float32bits(we[j]) || math.Float32bits(odd[j]) != math.Float32bits(wo[j]) {
					t.Fatalf("n %d off %d: pair %d (%#04x, %#04x) widens to (%#08x, %#08x), want (%#08x, %#08x)", n, off, j,
						uint16(src[2*j]), uint16(src[2*j+1]), math.Float32bits(even[j]), math.Float32bits(odd[j]),
						math.Float32bits(we[j]), math.Float32bits(wo[j]))
				}
			}
		}
	}
}

// roundSpecials are float32 bit patterns of every class the rounding
// treats apart: zeros, subnormals, the normals next to them, values that
// round up to ±Inf or to the next binade, ties to even either way,
// infinities, and quiet and signalling NaNs (some with their payload only
// in the low half).
var roundSpecials = []uint32{
	0, 0x80000000, 0x00000001, 0x80000001, 0x00400000, 0x007fffff, 0x807fffff, 0x00800000, 0x80800000, 0x0080ffff,
	0x00ff8000, 0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0xff7f8000, 0x7f7f7fff, 0x7f7e8000, 0x3f7fffff, 0x3f7f8000,
	0x3f808000, 0x3f818000, 0x3f808001, 0x3f817fff, 0xbf818000, 0x477fe000,
	0x7f800000, 0xff800000, 0x7f800001, 0xff800001, 0x7f80ffff, 0x7fbfffff, 0x7fc00000, 0xffc00000, 0x7fffffff, 0xffffffff, 0x7f810000,
}

// roundInputs returns n float32s from rng: a quarter from roundSpecials,
// a quarter subnormal, the rest random bits.
func roundInputs(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		var u uint32
		switch rng.IntN(4) {
		case 0:
			u = roundSpecials[rng.IntN(len(roundSpecials))]
		case 1:
			u = rng.Uint32() & 0x807fffff
		default:
			u = rng.Uint32()
		}
		x[i] = math.Float32frombits(u)
	}
	return x
}

func TestRoundRowBF16(t *testing.T) { testAllImpls(t, testRoundRowBF16) }

func testRoundRowBF16(t *testing.T) {
	check := func(what string, dst []fp16.BFloat16, src []float32) {
		t.Helper()
		for i, x := range src {
			if want := RoundBF16(x); dst[i] != want {
				t.Fatalf("%s: RoundBF16(%#08x) at %d = %#04x, want %#04x", what, math.Float32bits(x), i, uint16(dst[i]), uint16(want))
			}
		}
	}
	// Every high half with the low halves that decide its rounding.
	lows := []uint32{0, 1, 0x7fff, 0x8000, 0x8001, 0xffff}
	rng := rand.New(rand.NewPCG(23, 23))
	src := make([]float32, 0, (1<<16)*(len(lows)+1))
	for h := range uint32(1 << 16) {
		for _, l := range lows {
			src = append(src, math.Float32frombits(h<<16|l))
		}
		src = append(src, math.Float32frombits(h<<16|rng.Uint32()&0xffff))
	}
	buf, dst := guardedBF16(len(src))
	roundRowBF16(dst, src)
	checkGuardsBF16(t, buf, "roundRowBF16")
	check("every high half", dst, src)
	// Every length and offset, with the whole frame unwritten.
	const g = 2 * widenGuard
	for n := 1; n <= 70; n++ {
		for off := range 8 {
			src := roundInputs(rng, off+n)[off:]
			od := (off * 3) % 8
			buf, _ := guardedBF16(2*g + od + n - 2*pad)
			dst := buf[g+od:][:n]
			roundRowBF16(dst, src)
			checkGuardsBF16(t, buf, "roundRowBF16")
			for i, b := range buf {
				if (i < g+od || i >= g+od+n) && b != 0x7fc0 {
					t.Fatalf("n %d off %d: element %d outside the destination written (%#04x)", n, off, i-g-od, uint16(b))
				}
			}
			check(fmt.Sprintf("n %d off %d", n, off), dst, src)
		}
	}
}

func TestAddScale(t *testing.T) { testAllImpls(t, testAddScale) }

func testAddScale(t *testing.T) {
	r := cur.bf16
	rng := rand.New(rand.NewPCG(24, 24))
	inf := float32(math.Inf(1))
	specials := []float32{0, float32(math.Copysign(0, -1)), inf, -inf, float32(math.NaN()), math.MaxFloat32, math.SmallestNonzeroFloat32}
	val := func() float32 {
		if rng.IntN(8) == 0 {
			return specials[rng.IntN(len(specials))]
		}
		return float32(rng.NormFloat64())
	}
	for n := 1; n <= 70; n++ {
		for off := range 8 {
			for _, a := range []float32{1, 0.088388346, -3} {
				src := make([]float32, off+n)
				for i := range src {
					src[i] = val()
				}
				src = src[off:]
				od := (off * 5) % 8
				buf, dst := guardedAt(od, n)
				for i := range dst {
					dst[i] = val()
				}
				want := make([]float32, n)
				copy(want, dst)
				addScaleGeneric(&want[0], &src[0], n, a)
				r.addScale(&dst[0], &src[0], n, a)
				checkOutsideView(t, buf, widenGuard+od, n, "addScale")
				for i := range n {
					if math.Float32bits(dst[i]) != math.Float32bits(want[i]) && !(dst[i] != dst[i] && want[i] != want[i]) {
						t.Fatalf("n %d off %d a %v: element %d = %v, want %v", n, off, a, i, dst[i], want[i])
					}
				}
			}
		}
	}
}
