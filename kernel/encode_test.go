package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/fp16"
)

// The encoders of every level against fp16's scalar conversions and
// QuantizeQ8's Go loop, bit for bit: every binary16 and bfloat16 source
// pattern; every float32 high half with the low halves that decide its
// rounding to bfloat16 and fp8; the value of every binary16 and fp8
// pattern, the midpoints between neighbours and the float32s on either
// side of them (every rounding boundary of those formats, the overflow
// thresholds included); random, subnormal, ±Inf and NaN inputs; fp8
// scales per tensor and per head. Each also on every length 1..70 (and
// a few longer) from several offsets, with nothing written outside the
// destination. Q8: random blocks of every magnitude, blocks of zeros, with
// a NaN or an ±Inf, of subnormal scale (QuantizeQ8's rare branch, which
// the kernels leave to the Go loop) and next to overflow, and quotients at
// exactly half, in every order.

// encInputs returns the float32 inputs of the element encoders: every
// high half with the low halves that decide a rounding, the value of every
// binary16 and of every E4M3 and E5M2 pattern with its midpoints to its
// neighbours and the float32s beside them, and random bits.
func encInputs(rng *rand.Rand) []float32 {
	lows := []uint32{0, 1, 0x7fff, 0x8000, 0x8001, 0xffff}
	var x []float32
	for h := range uint32(1 << 16) {
		for _, l := range lows {
			x = append(x, math.Float32frombits(h<<16|l))
		}
		x = append(x, math.Float32frombits(h<<16|rng.Uint32()&0xffff))
	}
	// Values of a format (as float32 bit patterns of the non-negative
	// finite ones, in order), each with the midpoint to the next and the
	// float32s around both, of either sign.
	around := func(vals []float32) {
		for i, v := range vals {
			pts := []float32{v, math.Nextafter32(v, 0), math.Nextafter32(v, float32(math.Inf(1)))}
			if i+1 < len(vals) {
				mid := v + (vals[i+1]-v)/2 // exact: one more bit than the format's
				pts = append(pts, mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, float32(math.Inf(1))))
			} else {
				// Past the largest: the midpoint to the next value the
				// exponent would allow, where saturation (or overflow to
				// Inf) starts.
				mid := v + (v-vals[i-1])/2
				pts = append(pts, mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, float32(math.Inf(1))), 2*v)
			}
			for _, p := range pts {
				x = append(x, p, -p)
			}
		}
	}
	var f16, e4, e5 []float32
	for h := range uint16(0x7c00) {
		f16 = append(f16, fp16.Float16(h).Float32())
	}
	for c := range uint8(0x7f) {
		e4 = append(e4, fp16.Float8E4M3(c).Float32())
		if c < 0x7c {
			e5 = append(e5, fp16.Float8E5M2(c).Float32())
		}
	}
	around(f16)
	around(e4)
	around(e5)
	for range 1 << 14 {
		x = append(x, math.Float32frombits(rng.Uint32()), float32(rng.NormFloat64()))
	}
	return x
}

// encLengths are the lengths the encoders run on with guards around: 1..70
// (every AVX-512 tail and unrolled loop), and a few longer.
var encLengths = func() []int {
	var n []int
	for i := 1; i <= 70; i++ {
		n = append(n, i)
	}
	return append(n, 127, 128, 129, 255, 1000)
}()

// checkEncoder runs enc over all of src, then over every length of
// encLengths from offsets 0..3 of a destination framed by the guard g,
// comparing each output element with want and the frame with g.
func checkEncoder[S, D comparable](t *testing.T, what string, src []S, g D, want func(S) D, enc func(dst []D, src []S) int) {
	t.Helper()
	dst := make([]D, len(src))
	if n := enc(dst, src); n != len(src) {
		t.Fatalf("%s: returned %d for %d elements", what, n, len(src))
	}
	for i, s := range src {
		if w := want(s); dst[i] != w {
			t.Fatalf("%s: element %d (%#v): got %#v, want %#v", what, i, s, dst[i], w)
		}
	}
	const frame = 40
	for _, n := range encLengths {
		for off := range 4 {
			s := src[(n*7+off*131)%(len(src)-n-off):][off:][:n]
			buf := make([]D, 2*frame+n+off)
			for i := range buf {
				buf[i] = g
			}
			d := buf[frame+off:][:n]
			if got := enc(d, s); got != n {
				t.Fatalf("%s n %d: returned %d", what, n, got)
			}
			for i, b := range buf {
				inside := i >= frame+off && i < frame+off+n
				if !inside && b != g {
					t.Fatalf("%s n %d off %d: element %d outside the destination written (%#v)", what, n, off, i-frame-off, b)
				}
				if inside {
					if w := want(s[i-frame-off]); b != w {
						t.Fatalf("%s n %d off %d: element %d (%#v): got %#v, want %#v", what, n, off, i-frame-off, s[i-frame-off], b, w)
					}
				}
			}
		}
	}
}

// every16 returns every 16-bit pattern as T.
func every16[T ~uint16]() []T {
	x := make([]T, 1<<16)
	for i := range x {
		x[i] = T(i)
	}
	return x
}

func TestEncodeFloat16(t *testing.T) { testAllImpls(t, testEncodeFloat16) }

func testEncodeFloat16(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 1))
	checkEncoder(t, "from f32", encInputs(rng), fp16.Float16(0x7e5a), fp16.FromFloat32, EncodeFloat16[float32])
	checkEncoder(t, "from bf16", every16[fp16.BFloat16](), fp16.Float16(0x7e5a),
		func(b fp16.BFloat16) fp16.Float16 { return fp16.FromFloat32(b.Float32()) }, EncodeFloat16[fp16.BFloat16])
	checkEncoder(t, "from f16", every16[fp16.Float16](), fp16.Float16(0x7e5a),
		func(h fp16.Float16) fp16.Float16 { return h }, EncodeFloat16[fp16.Float16])
}

func TestEncodeBFloat16(t *testing.T) { testAllImpls(t, testEncodeBFloat16) }

func testEncodeBFloat16(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 2))
	checkEncoder(t, "from f32", encInputs(rng), fp16.BFloat16(0x7fa5), fp16.BFloat16FromFloat32, EncodeBFloat16[float32])
	checkEncoder(t, "from f16", every16[fp16.Float16](), fp16.BFloat16(0x7fa5),
		func(h fp16.Float16) fp16.BFloat16 { return fp16.BFloat16FromFloat32(h.Float32()) }, EncodeBFloat16[fp16.Float16])
	checkEncoder(t, "from bf16", every16[fp16.BFloat16](), fp16.BFloat16(0x7fa5),
		func(b fp16.BFloat16) fp16.BFloat16 { return b }, EncodeBFloat16[fp16.BFloat16])
}

// fp8Scales are the scales the fp8 encoders run with: 1 (the formats'
// own boundaries), the scales of the attention tests and benchmarks, a
// power of two, scales that put the inputs' midpoints off the grid, a
// huge and a tiny one, and a negative one.
var fp8Scales = []float32{1, 0.02, 0.0003, 0.5, 0.01, 3.7e-3, 1.3, 448, 1e30, 1e-30, -0.75}

func TestEncodeFloat8(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		testEncodeFloat8[fp16.Float8E4M3](t, fp16.Float8E4M3FromFloat32)
		testEncodeFloat8[fp16.Float8E5M2](t, fp16.Float8E5M2FromFloat32)
	})
}

func testEncodeFloat8[T Float8](t *testing.T, conv func(float32) T) {
	rng := rand.New(rand.NewPCG(37, 3))
	x := encInputs(rng)
	name := fmt.Sprintf("%T", T(0))
	g := T(0xa5)
	for i, sc := range fp8Scales {
		src := x
		if i > 0 {
			src = x[rng.IntN(len(x)/2):][:len(x)/4] // a quarter of the inputs for the other scales
		}
		checkEncoder(t, fmt.Sprintf("%s from f32, scale %g", name, sc), src, g,
			func(v float32) T { return conv(v / sc) },
			func(d []T, s []float32) int { return EncodeFloat8(d, s, sc) })
		checkEncoder(t, fmt.Sprintf("%s from f16, scale %g", name, sc), every16[fp16.Float16](), g,
			func(h fp16.Float16) T { return conv(h.Float32() / sc) },
			func(d []T, s []fp16.Float16) int { return EncodeFloat8(d, s, sc) })
		checkEncoder(t, fmt.Sprintf("%s from bf16, scale %g", name, sc), every16[fp16.BFloat16](), g,
			func(b fp16.BFloat16) T { return conv(b.Float32() / sc) },
			func(d []T, s []fp16.BFloat16) int { return EncodeFloat8(d, s, sc) })
	}
	// Every finite pattern comes back from its value (scale 1); the
	// saturating ones (±Inf of E5M2) and NaN give the encoder's own.
	codes := make([]float32, 256)
	for c := range codes {
		codes[c] = fp16.Float8E4M3(c).Float32()
		if name == "fp16.Float8E5M2" {
			codes[c] = fp16.Float8E5M2(c).Float32()
		}
	}
	got := make([]T, 256)
	EncodeFloat8(got, codes, 1)
	for c, v := range codes {
		if v != v || math.IsInf(float64(v), 0) {
			continue
		}
		if got[c] != T(c) {
			t.Fatalf("%s: pattern %#02x (%g) came back as %#02x", name, c, v, got[c])
		}
	}
}

// q8Block returns a block of Q8Block float32s of one kind (q8Kinds).
func q8Block(rng *rand.Rand, kind int) []float32 {
	x := make([]float32, Q8Block)
	scale := float32(math.Ldexp(1, rng.IntN(60)-30))
	for i := range x {
		x[i] = float32(rng.NormFloat64()) * scale
	}
	switch kind {
	case 1: // zeros of either sign
		for i := range x {
			x[i] = float32(math.Copysign(0, float64(rng.IntN(2)*2-1)))
		}
	case 2: // a NaN
		x[rng.IntN(Q8Block)] = math.Float32frombits(0x7f800000 | rng.Uint32()&0x807fffff | 1)
	case 3: // an ±Inf
		x[rng.IntN(Q8Block)] = float32(math.Inf(rng.IntN(2)*2 - 1))
	case 4: // a subnormal scale: amax below 127·2^−126
		for i := range x {
			x[i] = math.Float32frombits(rng.Uint32() & 0x80ffffff)
		}
	case 5: // next to the top of the range: 127·d may overflow
		for i := range x {
			x[i] = math.Float32frombits(0x7f7fff00 | rng.Uint32()&0x800000ff)
		}
	case 6: // quotients at exactly half: d a power of two
		d := float32(math.Ldexp(1, rng.IntN(40)-20))
		for i := range x {
			x[i] = (float32(rng.IntN(254)-127) + 0.5) * d
		}
		x[rng.IntN(Q8Block)] = 127 * d
	case 7: // one value and tiny others
		for i := range x {
			x[i] = math.Float32frombits(rng.Uint32() & 0x80000fff)
		}
		x[rng.IntN(Q8Block)] = float32(rng.NormFloat64())
	}
	return x
}

const q8Kinds = 8

func TestQuantizeQ8Encoders(t *testing.T) { testAllImpls(t, testQuantizeQ8Encoders) }

func testQuantizeQ8Encoders(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 4))
	// Runs of blocks of random kinds, mostly ordinary ones.
	var src []float32
	for range 4000 {
		kind := 0
		if rng.IntN(3) == 0 {
			kind = rng.IntN(q8Kinds)
		}
		src = append(src, q8Block(rng, kind)...)
	}
	check := func(what string, n int, got []int8, gotS []float32, want []int8, wantS []float32) {
		t.Helper()
		for g := range n {
			if math.Float32bits(gotS[g]) != math.Float32bits(wantS[g]) {
				t.Fatalf("%s: block %d: scale %#08x, want %#08x", what, g, math.Float32bits(gotS[g]), math.Float32bits(wantS[g]))
			}
			for i := g * Q8Block; i < (g+1)*Q8Block; i++ {
				if got[i] != want[i] {
					t.Fatalf("%s: block %d element %d: %d, want %d", what, g, i%Q8Block, got[i], want[i])
				}
			}
		}
	}
	// run quantises all the blocks, then every count 1..12 of them from a
	// few first blocks into a destination framed by guards; quant
	// quantises the blocks [from, from+blocks) of its source.
	run := func(what string, quant func(d []int8, s []float32, from, blocks int)) {
		n := len(src) / Q8Block
		want, wantS := make([]int8, n*Q8Block), make([]float32, n)
		quantizeQ8F32(want, wantS, src)
		got, gotS := make([]int8, n*Q8Block), make([]float32, n)
		quant(got, gotS, 0, n)
		check(what, n, got, gotS, want, wantS)
		for blocks := 1; blocks <= 12; blocks++ {
			for _, from := range []int{0, 1, rng.IntN(n - blocks)} {
				const frame = 64
				buf := make([]int8, 2*frame+blocks*Q8Block)
				sbuf := make([]float32, 2+blocks)
				for i := range buf {
					buf[i] = -99
				}
				for i := range sbuf {
					sbuf[i] = 7
				}
				d, s := buf[frame:][:blocks*Q8Block], sbuf[1:][:blocks]
				quant(d, s, from, blocks)
				for i, b := range buf {
					if (i < frame || i >= frame+blocks*Q8Block) && b != -99 {
						t.Fatalf("%s %d blocks: int8 %d outside the destination written", what, blocks, i-frame)
					}
				}
				if sbuf[0] != 7 || sbuf[1+blocks] != 7 {
					t.Fatalf("%s %d blocks: a scale outside the destination written", what, blocks)
				}
				check(fmt.Sprintf("%s %d blocks from %d", what, blocks, from), blocks, d, s, want[from*Q8Block:], wantS[from:])
			}
		}
	}
	window := func(from, blocks int) (int, int) { return from * Q8Block, (from + blocks) * Q8Block }
	run("from f32", func(d []int8, s []float32, from, blocks int) {
		lo, hi := window(from, blocks)
		if err := QuantizeQ8(d, s, src[lo:hi]); err != nil {
			t.Fatal(err)
		}
	})
	// The binary16 and bfloat16 sources hold values of those types, whose
	// float32s are the twin's source.
	h, b := make([]fp16.Float16, len(src)), make([]fp16.BFloat16, len(src))
	for i, v := range src {
		h[i], b[i] = fp16.FromFloat32(v), fp16.BFloat16FromFloat32(v)
	}
	for i := range src {
		src[i] = h[i].Float32()
	}
	run("from f16", func(d []int8, s []float32, from, blocks int) {
		lo, hi := window(from, blocks)
		if err := QuantizeQ8(d, s, h[lo:hi]); err != nil {
			t.Fatal(err)
		}
	})
	for i := range src {
		src[i] = b[i].Float32()
	}
	run("from bf16", func(d []int8, s []float32, from, blocks int) {
		lo, hi := window(from, blocks)
		if err := QuantizeQ8(d, s, b[lo:hi]); err != nil {
			t.Fatal(err)
		}
	})
}

// TestEncodersDoNotAllocate runs every encoder on buffers on the stack:
// none allocates, and none makes its arguments escape (the buffers would
// then be allocated on every call).
func TestEncodersDoNotAllocate(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		allocs := testing.AllocsPerRun(20, func() {
			var x [4 * Q8Block]float32
			var h [4 * Q8Block]fp16.Float16
			var b [4 * Q8Block]fp16.BFloat16
			var e4 [4 * Q8Block]fp16.Float8E4M3
			var e5 [4 * Q8Block]fp16.Float8E5M2
			var q [4 * Q8Block]int8
			var qs [4]float32
			for i := range x {
				x[i] = float32(i) - 50
			}
			EncodeFloat16(h[:], x[:])
			EncodeBFloat16(b[:], x[:])
			EncodeBFloat16(b[:], h[:])
			EncodeFloat16(h[:], b[:])
			EncodeFloat8(e4[:], x[:], 0.5)
			EncodeFloat8(e5[:], h[:], 0.5)
			EncodeFloat8(e4[:], b[:], 0.5)
			_ = QuantizeQ8(q[:], qs[:], x[:])
			_ = QuantizeQ8(q[:], qs[:], h[:])
			_ = QuantizeQ8(q[:], qs[:], b[:])
		})
		if allocs != 0 {
			t.Fatalf("%v allocations a run; want 0", allocs)
		}
	})
}
