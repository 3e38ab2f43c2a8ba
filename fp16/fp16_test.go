package fp16

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x448/float16"
)

const numPatterns = 1 << 16

// numRandom is the number of random float32 bit patterns fed to each
// narrowing test. 1<<20 keeps the suite well under a second normally while
// still hitting every exponent many times over.
const numRandom = 1 << 20

// refHalfValue is the binary16 definition evaluated independently in
// float64: (-1)^s × 2^(e-15) × (1 + m/1024) for normals, (-1)^s × 2^-14 ×
// m/1024 for subnormals, ±Inf and NaN. It shares no code with the package
// or with x448.
func refHalfValue(bits uint16) float64 {
	s := 1.0
	if bits&0x8000 != 0 {
		s = -1.0
	}
	e := int(bits>>10) & 0x1f
	m := float64(bits & 0x3ff)
	switch {
	case e == 0x1f && m == 0:
		return math.Inf(int(s))
	case e == 0x1f:
		return math.NaN()
	case e == 0:
		return s * math.Ldexp(m/1024, -14)
	default:
		return s * math.Ldexp(1+m/1024, e-15)
	}
}

// halfMagnitudes[i] is the value of the non-negative binary16 pattern i for
// i in [0, 0x7bff]; entry 0x7c00 holds 2^16, the value the next pattern
// would have with an unbounded exponent. RNE decides overflow against that
// value, which is why 65520 (the midpoint of 65504 and 65536) becomes Inf.
var halfMagnitudes = func() []float64 {
	v := make([]float64, 0x7c01)
	for i := range 0x7c00 {
		v[i] = refHalfValue(uint16(i))
	}
	v[0x7c00] = 65536
	return v
}()

// refFromFloat32 narrows a non-NaN f to binary16 by brute force: it finds
// the two representable magnitudes around |f| by binary search over all
// binary16 values and picks the nearer one, breaking ties towards the even
// bit pattern (whose last bit is the mantissa LSB, also across binade
// boundaries). All differences are exact in float64.
func refFromFloat32(f float32) uint16 {
	a := math.Abs(float64(f))
	var sign uint16
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	// i is the largest index with halfMagnitudes[i] <= a.
	i := sort.Search(len(halfMagnitudes), func(k int) bool { return halfMagnitudes[k] > a }) - 1
	if i >= 0x7c00 {
		return sign | 0x7c00
	}
	lo, hi := halfMagnitudes[i], halfMagnitudes[i+1]
	switch dl, dh := a-lo, hi-a; {
	case dl < dh:
		return sign | uint16(i)
	case dh < dl:
		return sign | uint16(i+1) // i+1 == 0x7c00 is +Inf: overflow
	case i&1 == 0:
		return sign | uint16(i)
	default:
		return sign | uint16(i+1)
	}
}

// refBFloat16FromFloat32 narrows a non-NaN f to bfloat16 by comparing the
// two candidate neighbours in float64 arithmetic: the truncation lo (toward
// zero) and the next bfloat16 away from zero hi. When hi is the Inf pattern
// its value for the comparison is 2^128, as RNE with an unbounded exponent
// requires. Ties go to the even mantissa.
func refBFloat16FromFloat32(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff == 0x7f800000 {
		return uint16(u >> 16)
	}
	loBits := u &^ 0xffff
	hiBits := loBits + 0x10000 // magnitude increases for either sign
	a := math.Abs(float64(f))
	lo := math.Abs(float64(math.Float32frombits(loBits)))
	hi := math.Ldexp(1, 128)
	if hiBits&0x7fffffff != 0x7f800000 {
		hi = math.Abs(float64(math.Float32frombits(hiBits)))
	}
	switch dl, dh := a-lo, hi-a; {
	case dl < dh:
		return uint16(loBits >> 16)
	case dh < dl:
		return uint16(hiBits >> 16)
	case loBits&0x10000 == 0:
		return uint16(loBits >> 16)
	default:
		return uint16(hiBits >> 16)
	}
}

func TestFloat16DecodeAllPatterns(t *testing.T) {
	for i := range numPatterns {
		h := Float16(i)
		got := h.Float32()
		want := float16.Frombits(uint16(i)).Float32()
		def := refHalfValue(uint16(i))

		// The checks are guarded by plain comparisons so that testify's
		// formatting only runs on failure; it would otherwise dominate the
		// run time over 65,536 iterations.

		// Bitwise equality with x448 covers NaN payload/quiet bit and -0.
		if math.Float32bits(want) != math.Float32bits(got) {
			require.Equalf(t, math.Float32bits(want), math.Float32bits(got), "pattern %#04x", i)
		}
		if sign := i&0x8000 != 0; sign != math.Signbit(float64(got)) {
			require.Equalf(t, sign, math.Signbit(float64(got)), "sign of %#04x", i)
		}
		if math.IsNaN(def) {
			if !math.IsNaN(float64(got)) || !math.IsNaN(float64(want)) || !h.IsNaN() {
				require.Failf(t, "NaN pattern not NaN", "%#04x: got %g, x448 %g, IsNaN %v", i, got, want, h.IsNaN())
			}
			continue
		}
		// float64(got) is exact, so this compares values exactly; the
		// signbit check above distinguishes -0 from +0.
		if h.IsNaN() || def != float64(got) {
			require.Failf(t, "value differs from definition", "%#04x: got %g (IsNaN %v), want %g", i, got, h.IsNaN(), def)
		}
	}
}

func TestFloat16SpecialValues(t *testing.T) {
	assert.Equal(t, float32(1), Float16(0x3c00).Float32())
	assert.Equal(t, float32(-2), Float16(0xc000).Float32())
	assert.Equal(t, float32(65504), Float16(0x7bff).Float32())
	assert.Equal(t, float32(math.Ldexp(1, -24)), Float16(0x0001).Float32())
	assert.Equal(t, float32(math.Ldexp(1023, -24)), Float16(0x03ff).Float32())
	assert.Equal(t, float32(math.Ldexp(1, -14)), Float16(0x0400).Float32())
	assert.True(t, math.IsInf(float64(Float16(0x7c00).Float32()), 1))
	assert.True(t, math.IsInf(float64(Float16(0xfc00).Float32()), -1))
	assert.Equal(t, uint32(0x80000000), math.Float32bits(Float16(0x8000).Float32()))
	// A signalling binary16 NaN widens to a quiet float32 NaN.
	assert.Equal(t, uint32(0x7fc02000), math.Float32bits(Float16(0x7c01).Float32()))
	assert.Equal(t, uint32(0xffc02000), math.Float32bits(Float16(0xfc01).Float32()))
	assert.Equal(t, uint16(0x3c00), Float16(0x3c00).Bits())
}

func TestFloat16RoundTrip(t *testing.T) {
	for i := range numPatterns {
		h := Float16(i)
		if h.IsNaN() {
			// NaN must stay NaN with its sign; the payload need not survive.
			back := FromFloat32(h.Float32())
			require.Truef(t, back.IsNaN(), "%#04x", i)
			require.Equalf(t, h&0x8000, back&0x8000, "%#04x", i)
			continue
		}
		if back := FromFloat32(h.Float32()); back != h {
			require.Equalf(t, h, back, "pattern %#04x", i)
		}
	}
}

// halfBoundaryInputs returns, for every finite binary16 value and both
// signs, the float32 midpoint to the next larger magnitude (2^16 after
// 65504) and the float32 values one ulp either side of it. Midpoints need 12
// significant bits, so they are exact in float32.
func halfBoundaryInputs() []float32 {
	out := make([]float32, 0, 0x7c00*6)
	for i := range 0x7c00 {
		mid := float32((halfMagnitudes[i] + halfMagnitudes[i+1]) / 2)
		for _, s := range []float32{1, -1} {
			m := s * mid
			out = append(out, m,
				math.Nextafter32(m, float32(math.Inf(1))),
				math.Nextafter32(m, float32(math.Inf(-1))))
		}
	}
	return out
}

func TestFromFloat32Boundaries(t *testing.T) {
	in := halfBoundaryInputs()
	require.Len(t, in, 0x7c00*6)
	for _, f := range in {
		got := FromFloat32(f)
		if x := float16.Fromfloat32(f).Bits(); x != got.Bits() {
			require.Equalf(t, x, got.Bits(), "x448 vs FromFloat32(%g) (%#08x)", f, math.Float32bits(f))
		}
		if r := refFromFloat32(f); r != got.Bits() {
			require.Equalf(t, r, got.Bits(), "reference vs FromFloat32(%g) (%#08x)", f, math.Float32bits(f))
		}
	}
}

func TestFromFloat32Random(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range numRandom {
		u := r.Uint32()
		f := math.Float32frombits(u)
		got := FromFloat32(f)
		if x := float16.Fromfloat32(f).Bits(); x != got.Bits() {
			require.Equalf(t, x, got.Bits(), "x448 vs FromFloat32, input %#08x", u)
		}
		if math.IsNaN(float64(f)) {
			if !got.IsNaN() {
				require.Failf(t, "NaN lost", "input %#08x gave %#04x", u, got.Bits())
			}
			continue
		}
		if r := refFromFloat32(f); r != got.Bits() {
			require.Equalf(t, r, got.Bits(), "reference vs FromFloat32, input %#08x", u)
		}
	}
}

func TestFromFloat32Special(t *testing.T) {
	cases := []struct {
		name string
		in   float32
		want uint16
	}{
		{"max finite", 65504, 0x7bff},
		{"just below overflow midpoint", 65519.99, 0x7bff},
		{"overflow midpoint ties to Inf", 65520, 0x7c00},
		{"negative overflow", -65520, 0xfc00},
		{"huge", math.MaxFloat32, 0x7c00},
		{"+Inf", float32(math.Inf(1)), 0x7c00},
		{"-Inf", float32(math.Inf(-1)), 0xfc00},
		{"+0", 0, 0x0000},
		{"-0", float32(math.Copysign(0, -1)), 0x8000},
		{"one", 1, 0x3c00},
		{"tie to even down", 1 + 1.0/2048, 0x3c00},
		{"tie to even up", 1 + 3.0/2048, 0x3c02},
		{"min subnormal", float32(math.Ldexp(1, -24)), 0x0001},
		{"half min subnormal ties to zero", float32(math.Ldexp(1, -25)), 0x0000},
		{"above half min subnormal", math.Nextafter32(float32(math.Ldexp(1, -25)), 1), 0x0001},
		{"negative underflow", -float32(math.Ldexp(1, -26)), 0x8000},
		{"smallest float32", math.SmallestNonzeroFloat32, 0x0000},
		{"max subnormal to min normal", float32(math.Ldexp(2047, -25)), 0x0400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, FromFloat32(c.in).Bits())
			assert.Equal(t, c.want, float16.Fromfloat32(c.in).Bits())
		})
	}
	for _, u := range []uint32{0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fbfffff, 0x7fffffff} {
		h := FromFloat32(math.Float32frombits(u))
		assert.Truef(t, h.IsNaN(), "NaN input %#08x", u)
		assert.Equalf(t, uint16(u>>16)&0x8000, h.Bits()&0x8000, "sign of NaN input %#08x", u)
	}
}

func TestBFloat16DecodeAllPatterns(t *testing.T) {
	for i := range numPatterns {
		b := BFloat16(i)
		got := b.Float32()
		if uint32(i)<<16 != math.Float32bits(got) {
			require.Equalf(t, uint32(i)<<16, math.Float32bits(got), "pattern %#04x", i)
		}
		if math.IsNaN(float64(got)) != b.IsNaN() || b.Bits() != uint16(i) {
			require.Failf(t, "IsNaN/Bits mismatch", "pattern %#04x: IsNaN %v, Bits %#04x", i, b.IsNaN(), b.Bits())
		}
	}
	assert.True(t, BFloat16(0x7f81).IsNaN())
	assert.True(t, BFloat16(0xffc0).IsNaN())
	assert.False(t, BFloat16(0x7f80).IsNaN())
	assert.False(t, BFloat16(0xff80).IsNaN())
}

func TestBFloat16RoundTrip(t *testing.T) {
	for i := range numPatterns {
		b := BFloat16(i)
		back := BFloat16FromFloat32(b.Float32())
		if b.IsNaN() {
			if !back.IsNaN() || b&0x8000 != back&0x8000 {
				require.Failf(t, "NaN not preserved", "%#04x came back as %#04x", i, back.Bits())
			}
			continue
		}
		if b != back {
			require.Equalf(t, b, back, "pattern %#04x", i)
		}
	}
}

// TestBFloat16Reference pins down the reference itself on hand-worked
// values, so a broken reference cannot silently agree with a broken
// implementation.
func TestBFloat16Reference(t *testing.T) {
	cases := []struct {
		in   uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // 1 + 2^-8: tie, 0x3f80 is even
		{0x3f818000, 0x3f82}, // tie, 0x3f81 is odd: round up
		{0x3f808001, 0x3f81}, // just above the midpoint
		{0x3f817fff, 0x3f81}, // just below the midpoint
		{0xbf808001, 0xbf81}, // negative mirrors positive
		{0x7f7fffff, 0x7f80}, // MaxFloat32 is above the last midpoint: +Inf
		{0x7f7f8000, 0x7f80}, // last midpoint: 0x7f7f is odd, so +Inf
		{0x7f7f7fff, 0x7f7f}, // just below it stays finite
		{0xff7fffff, 0xff80}, // -MaxFloat32 → -Inf
		{0x00000001, 0x0000}, // smallest subnormal → +0
		{0x80008000, 0x8000}, // tie at the bottom goes to -0 (even)
		{0x00018000, 0x0002}, // tie between subnormals 1 and 2
		{0x007fffff, 0x0080}, // largest subnormal rounds up to min normal
	}
	for _, c := range cases {
		f := math.Float32frombits(c.in)
		assert.Equalf(t, c.want, refBFloat16FromFloat32(f), "reference on %#08x", c.in)
		assert.Equalf(t, c.want, BFloat16FromFloat32(f).Bits(), "BFloat16FromFloat32(%#08x)", c.in)
	}
}

func TestBFloat16FromFloat32Boundaries(t *testing.T) {
	// For every bfloat16 pattern (finite or not, both signs) take the low
	// halves that matter for rounding: the exact midpoint, one ulp either
	// side, and the extremes.
	lows := []uint32{0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff}
	for i := range numPatterns {
		for _, lo := range lows {
			u := uint32(i)<<16 | lo
			f := math.Float32frombits(u)
			got := BFloat16FromFloat32(f)
			if math.IsNaN(float64(f)) {
				if !got.IsNaN() || uint16(u>>16)&0x8000 != got.Bits()&0x8000 {
					require.Failf(t, "NaN not preserved", "input %#08x gave %#04x", u, got.Bits())
				}
				continue
			}
			if r := refBFloat16FromFloat32(f); r != got.Bits() {
				require.Equalf(t, r, got.Bits(), "input %#08x", u)
			}
		}
	}
}

func TestBFloat16FromFloat32Random(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range numRandom {
		u := r.Uint32()
		f := math.Float32frombits(u)
		got := BFloat16FromFloat32(f)
		if math.IsNaN(float64(f)) {
			if !got.IsNaN() || uint16(u>>16)&0x8000 != got.Bits()&0x8000 {
				require.Failf(t, "NaN not preserved", "input %#08x gave %#04x", u, got.Bits())
			}
			continue
		}
		if r := refBFloat16FromFloat32(f); r != got.Bits() {
			require.Equalf(t, r, got.Bits(), "input %#08x", u)
		}
	}
}

func TestBFloat16FromFloat32Special(t *testing.T) {
	// Signalling NaNs whose payload sits only in the dropped 16 bits would
	// truncate to Inf; they must come out as (quiet) NaN.
	for _, u := range []uint32{0x7f800001, 0xff800001, 0x7f80ffff, 0x7fc00000, 0xffc00000, 0x7fffffff, 0xffffffff, 0x7fbfffff} {
		b := BFloat16FromFloat32(math.Float32frombits(u))
		assert.Truef(t, b.IsNaN(), "NaN input %#08x gave %#04x", u, b.Bits())
		assert.Truef(t, math.IsNaN(float64(b.Float32())), "NaN input %#08x", u)
		assert.Equalf(t, uint16(u>>16)&0x8000, b.Bits()&0x8000, "sign of NaN input %#08x", u)
		assert.NotZerof(t, b.Bits()&0x0040, "quiet bit for %#08x", u)
	}
	assert.Equal(t, uint16(0x7f80), BFloat16FromFloat32(float32(math.Inf(1))).Bits())
	assert.Equal(t, uint16(0xff80), BFloat16FromFloat32(float32(math.Inf(-1))).Bits())
	maxF := float32(math.MaxFloat32)
	assert.Equal(t, refBFloat16FromFloat32(maxF), BFloat16FromFloat32(maxF).Bits())
	assert.Equal(t, uint16(0x7f80), BFloat16FromFloat32(maxF).Bits())
	assert.Equal(t, uint16(0x8000), BFloat16FromFloat32(float32(math.Copysign(0, -1))).Bits())
	assert.Equal(t, uint16(0x3f80), BFloat16FromFloat32(1).Bits())
}

// encodeInputs returns one float32 per 16-bit pattern i, with i in both the
// high half (covering every sign/exponent/top-mantissa combination) and the
// low half (exercising the rounding bits), plus every binary16 boundary.
func encodeInputs() []float32 {
	in := make([]float32, numPatterns, numPatterns+0x7c00*6)
	for i := range numPatterns {
		in[i] = math.Float32frombits(uint32(i)<<16 | uint32(i))
	}
	return append(in, halfBoundaryInputs()...)
}

func TestBulkMatchesScalar(t *testing.T) {
	halves := make([]Float16, numPatterns)
	bfs := make([]BFloat16, numPatterns)
	for i := range numPatterns {
		halves[i] = Float16(i)
		bfs[i] = BFloat16(i)
	}
	out := make([]float32, numPatterns)

	require.Equal(t, numPatterns, DecodeFloat16(out, halves))
	for i, h := range halves {
		if math.Float32bits(h.Float32()) != math.Float32bits(out[i]) {
			require.Equalf(t, math.Float32bits(h.Float32()), math.Float32bits(out[i]), "DecodeFloat16 %#04x", i)
		}
	}
	require.Equal(t, numPatterns, DecodeBFloat16(out, bfs))
	for i, b := range bfs {
		if math.Float32bits(b.Float32()) != math.Float32bits(out[i]) {
			require.Equalf(t, math.Float32bits(b.Float32()), math.Float32bits(out[i]), "DecodeBFloat16 %#04x", i)
		}
	}

	in := encodeInputs()
	h16 := make([]Float16, len(in))
	require.Equal(t, len(in), EncodeFloat16(h16, in))
	for i, f := range in {
		if FromFloat32(f) != h16[i] {
			require.Equalf(t, FromFloat32(f), h16[i], "EncodeFloat16 %#08x", math.Float32bits(f))
		}
	}
	require.Equal(t, h16, Float16s(in))

	b16 := make([]BFloat16, len(in))
	require.Equal(t, len(in), EncodeBFloat16(b16, in))
	for i, f := range in {
		if BFloat16FromFloat32(f) != b16[i] {
			require.Equalf(t, BFloat16FromFloat32(f), b16[i], "EncodeBFloat16 %#08x", math.Float32bits(f))
		}
	}
	require.Equal(t, b16, BFloat16s(in))
}

// TestDecodeFloat16Tails checks every length around the 4-way unrolled
// main loop and its scalar tail, at every start offset modulo 4, on input
// that mixes normals with the rare-branch cases (zero, subnormals, Inf, NaN).
func TestDecodeFloat16Tails(t *testing.T) {
	src := []Float16{0x3c00, 0x0001, 0x8000, 0x7c00, 0xfc01, 0x03ff, 0x7bff, 0x7e00, 0x0400, 0xc000, 0x8200, 0x7c01, 0x0000}
	for off := range 4 {
		for n := range len(src) - off + 1 {
			dst := make([]float32, n+1)
			dst[n] = -7
			require.Equal(t, n, DecodeFloat16(dst[:n], src[off:off+n]))
			for i := range n {
				require.Equalf(t, math.Float32bits(src[off+i].Float32()), math.Float32bits(dst[i]), "off %d n %d i %d", off, n, i)
			}
			require.Equal(t, float32(-7), dst[n])
		}
	}
}

func TestBulkLengths(t *testing.T) {
	src32 := []float32{1, 2, 3, 4, 5}
	srcH := Float16s(src32)
	srcB := BFloat16s(src32)
	const sentinel32 = float32(-7)
	const sentinelH = Float16(0xabcd)
	const sentinelB = BFloat16(0xabcd)

	for _, dstLen := range []int{0, 1, 3, 5, 8} {
		for _, srcLen := range []int{0, 2, 5} {
			want := min(dstLen, srcLen)

			d32 := make([]float32, dstLen)
			for i := range d32 {
				d32[i] = sentinel32
			}
			require.Equal(t, want, DecodeFloat16(d32, srcH[:srcLen]))
			for i := range d32 {
				if i < want {
					assert.Equal(t, src32[i], d32[i])
				} else {
					assert.Equalf(t, sentinel32, d32[i], "DecodeFloat16 wrote past n at %d", i)
				}
			}

			for i := range d32 {
				d32[i] = sentinel32
			}
			require.Equal(t, want, DecodeBFloat16(d32, srcB[:srcLen]))
			for i := range d32 {
				if i < want {
					assert.Equal(t, src32[i], d32[i])
				} else {
					assert.Equalf(t, sentinel32, d32[i], "DecodeBFloat16 wrote past n at %d", i)
				}
			}

			dH := make([]Float16, dstLen)
			for i := range dH {
				dH[i] = sentinelH
			}
			require.Equal(t, want, EncodeFloat16(dH, src32[:srcLen]))
			for i := range dH {
				if i < want {
					assert.Equal(t, srcH[i], dH[i])
				} else {
					assert.Equalf(t, sentinelH, dH[i], "EncodeFloat16 wrote past n at %d", i)
				}
			}

			dB := make([]BFloat16, dstLen)
			for i := range dB {
				dB[i] = sentinelB
			}
			require.Equal(t, want, EncodeBFloat16(dB, src32[:srcLen]))
			for i := range dB {
				if i < want {
					assert.Equal(t, srcB[i], dB[i])
				} else {
					assert.Equalf(t, sentinelB, dB[i], "EncodeBFloat16 wrote past n at %d", i)
				}
			}
		}
	}

	// nil slices behave like empty ones.
	assert.Zero(t, DecodeFloat16(nil, srcH))
	assert.Zero(t, DecodeBFloat16(make([]float32, 3), nil))
	assert.Zero(t, EncodeFloat16(nil, nil))
	assert.Zero(t, EncodeBFloat16(nil, src32))
	assert.Empty(t, Float16s(nil))
	assert.Empty(t, BFloat16s(nil))
}

func TestBulkZeroAllocs(t *testing.T) {
	const n = 1024
	f32 := make([]float32, n)
	h := make([]Float16, n)
	b := make([]BFloat16, n)
	for i := range n {
		f32[i] = float32(i) * 0.25
	}
	assert.Zero(t, testing.AllocsPerRun(50, func() { DecodeFloat16(f32, h) }), "DecodeFloat16")
	assert.Zero(t, testing.AllocsPerRun(50, func() { DecodeBFloat16(f32, b) }), "DecodeBFloat16")
	assert.Zero(t, testing.AllocsPerRun(50, func() { EncodeFloat16(h, f32) }), "EncodeFloat16")
	assert.Zero(t, testing.AllocsPerRun(50, func() { EncodeBFloat16(b, f32) }), "EncodeBFloat16")
}

// benchN is the slice length used by the benchmarks: a typical head
// dimension × tile, small enough to stay in L1/L2 so the numbers measure
// conversion cost rather than memory bandwidth.
const benchN = 4096

// benchInputs returns activation-like values (normally distributed, a few
// orders of magnitude), which is what the kernels convert in practice.
func benchInputs() []float32 {
	r := rand.New(rand.NewPCG(5, 6))
	in := make([]float32, benchN)
	for i := range in {
		in[i] = float32(r.NormFloat64() * 4)
	}
	return in
}

// The benchmarks count 4 bytes per element (the float32 side) in SetBytes
// so that MB/s is comparable between encode and decode.

func BenchmarkDecodeFloat16(b *testing.B) {
	src := Float16s(benchInputs())
	dst := make([]float32, benchN)
	b.SetBytes(benchN * 4)
	b.ReportAllocs()
	for b.Loop() {
		DecodeFloat16(dst, src)
	}
}

func BenchmarkDecodeBFloat16(b *testing.B) {
	src := BFloat16s(benchInputs())
	dst := make([]float32, benchN)
	b.SetBytes(benchN * 4)
	b.ReportAllocs()
	for b.Loop() {
		DecodeBFloat16(dst, src)
	}
}

func BenchmarkEncodeFloat16(b *testing.B) {
	src := benchInputs()
	dst := make([]Float16, benchN)
	b.SetBytes(benchN * 4)
	b.ReportAllocs()
	for b.Loop() {
		EncodeFloat16(dst, src)
	}
}

func BenchmarkEncodeBFloat16(b *testing.B) {
	src := benchInputs()
	dst := make([]BFloat16, benchN)
	b.SetBytes(benchN * 4)
	b.ReportAllocs()
	for b.Loop() {
		EncodeBFloat16(dst, src)
	}
}
