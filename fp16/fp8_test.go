package fp16

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// fp8Spec describes an 8-bit format by its fields, for the references
// below, which share no code with the package.
type fp8Spec struct {
	name       string
	exp, mant  int
	bias       int
	ieee       bool    // all-ones exponent is Inf/NaN (E5M2); else only S.1111.111 is NaN (E4M3FN)
	maxFinite  float64 // largest finite magnitude
	nextPast   float64 // the magnitude after it with an unbounded exponent
	encode     func(float32) uint8
	decode     func(uint8) float32
	isNaN      func(uint8) bool
	encodeBulk func(dst []uint8, src []float32) int
	decodeBulk func(dst []float32, src []uint8) int
}

var fp8Specs = []fp8Spec{
	{
		name: "e4m3", exp: 4, mant: 3, bias: 7, maxFinite: 448, nextPast: 480,
		encode: func(f float32) uint8 { return uint8(Float8E4M3FromFloat32(f)) },
		decode: func(x uint8) float32 { return Float8E4M3(x).Float32() },
		isNaN:  func(x uint8) bool { return Float8E4M3(x).IsNaN() },
		encodeBulk: func(dst []uint8, src []float32) int {
			d := make([]Float8E4M3, len(dst))
			n := EncodeFloat8E4M3(d, src)
			for i, x := range d[:n] {
				dst[i] = uint8(x)
			}
			return n
		},
		decodeBulk: func(dst []float32, src []uint8) int {
			return DecodeFloat8E4M3(dst, castSlice[Float8E4M3](src))
		},
	},
	{
		name: "e5m2", exp: 5, mant: 2, bias: 15, ieee: true, maxFinite: 57344, nextPast: 65536,
		encode: func(f float32) uint8 { return uint8(Float8E5M2FromFloat32(f)) },
		decode: func(x uint8) float32 { return Float8E5M2(x).Float32() },
		isNaN:  func(x uint8) bool { return Float8E5M2(x).IsNaN() },
		encodeBulk: func(dst []uint8, src []float32) int {
			d := make([]Float8E5M2, len(dst))
			n := EncodeFloat8E5M2(d, src)
			for i, x := range d[:n] {
				dst[i] = uint8(x)
			}
			return n
		},
		decodeBulk: func(dst []float32, src []uint8) int {
			return DecodeFloat8E5M2(dst, castSlice[Float8E5M2](src))
		},
	},
}

func castSlice[T ~uint8](x []uint8) []T {
	out := make([]T, len(x))
	for i, v := range x {
		out[i] = T(v)
	}
	return out
}

// value is the definition of pattern x: (−1)^s·2^(e−bias)·(1+m/2^mant) for
// normals, (−1)^s·2^(1−bias)·m/2^mant for subnormals, and the special
// values; ok is false for NaN.
func (s fp8Spec) value(x uint8) (v float64, ok bool) {
	sign := 1.0
	if x&0x80 != 0 {
		sign = -1
	}
	e := int(x>>s.mant) & (1<<s.exp - 1)
	m := int(x) & (1<<s.mant - 1)
	allOnes := e == 1<<s.exp-1
	switch {
	case s.ieee && allOnes && m == 0:
		return math.Inf(int(sign)), true
	case s.ieee && allOnes, !s.ieee && allOnes && m == 1<<s.mant-1:
		return math.NaN(), false
	case e == 0:
		return sign * math.Ldexp(float64(m), 1-s.bias-s.mant), true
	}
	return sign * math.Ldexp(1+float64(m)/float64(int(1)<<s.mant), e-s.bias), true
}

// magnitudes returns the finite non-negative values in pattern order
// (pattern i has value mags[i]) and then nextPast.
func (s fp8Spec) magnitudes() []float64 {
	var mags []float64
	for i := range 0x80 {
		v, ok := s.value(uint8(i))
		if !ok || math.IsInf(v, 0) {
			break
		}
		mags = append(mags, v)
	}
	return append(mags, s.nextPast)
}

// ref narrows a non-NaN f by brute force: the nearer of the two
// magnitudes around |f|, ties to the even pattern, with the exponent
// unbounded (nextPast) and then saturated to the largest finite pattern.
func (s fp8Spec) ref(f float32) uint8 {
	mags := s.magnitudes()
	maxPat := len(mags) - 2
	var sign uint8
	if math.Signbit(float64(f)) {
		sign = 0x80
	}
	a := math.Abs(float64(f))
	i := sort.Search(len(mags), func(k int) bool { return mags[k] > a }) - 1
	if i > maxPat {
		return sign | uint8(maxPat)
	}
	lo, hi := mags[i], mags[i+1]
	pick := i
	switch dl, dh := a-lo, hi-a; {
	case dh < dl, dh == dl && i&1 == 1:
		pick = i + 1
	}
	return sign | uint8(min(pick, maxPat))
}

func TestFloat8DecodeAllPatterns(t *testing.T) {
	for _, s := range fp8Specs {
		nans := 0
		for i := range 256 {
			x := uint8(i)
			got := s.decode(x)
			want, ok := s.value(x)
			if math.Signbit(float64(got)) != (x&0x80 != 0) {
				t.Fatalf("%s %#02x: %v has the wrong sign", s.name, x, got)
			}
			if !ok {
				nans++
				if got == got || !s.isNaN(x) {
					t.Fatalf("%s %#02x: got %v (IsNaN %v); want NaN", s.name, x, got, s.isNaN(x))
				}
				if math.Float32bits(got)&0x00400000 == 0 {
					t.Fatalf("%s %#02x: NaN %#x is not quiet", s.name, x, math.Float32bits(got))
				}
				continue
			}
			if s.isNaN(x) || float64(got) != want {
				t.Fatalf("%s %#02x: got %v (IsNaN %v); want %v", s.name, x, got, s.isNaN(x), want)
			}
		}
		wantNaNs := 2
		if s.ieee {
			wantNaNs = 2 * (1<<s.mant - 1)
		}
		if nans != wantNaNs {
			t.Fatalf("%s: %d NaN patterns; want %d", s.name, nans, wantNaNs)
		}
	}
}

func TestFloat8SpecialValues(t *testing.T) {
	checks := []struct {
		got, want float32
	}{
		{Float8E4M3(0x7e).Float32(), 448},
		{Float8E4M3(0xfe).Float32(), -448},
		{Float8E4M3(0x01).Float32(), 0x1p-9},
		{Float8E4M3(0x07).Float32(), 7 * 0x1p-9},
		{Float8E4M3(0x08).Float32(), 0x1p-6},
		{Float8E4M3(0x38).Float32(), 1},
		{Float8E4M3(0x77).Float32(), 240},
		{Float8E5M2(0x7b).Float32(), 57344},
		{Float8E5M2(0x01).Float32(), 0x1p-16},
		{Float8E5M2(0x04).Float32(), 0x1p-14},
		{Float8E5M2(0x3c).Float32(), 1},
		{Float8E5M2(0x7c).Float32(), float32(math.Inf(1))},
		{Float8E5M2(0xfc).Float32(), float32(math.Inf(-1))},
	}
	for i, c := range checks {
		if c.got != c.want {
			t.Errorf("check %d: got %v, want %v", i, c.got, c.want)
		}
	}
	if b := math.Float32bits(Float8E4M3(0x80).Float32()); b != 0x80000000 {
		t.Errorf("E4M3 -0 widens to %#x", b)
	}
	if b := math.Float32bits(Float8E5M2(0x80).Float32()); b != 0x80000000 {
		t.Errorf("E5M2 -0 widens to %#x", b)
	}
	// Encoding the special inputs.
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	for _, c := range []struct {
		name      string
		got, want uint8
	}{
		{"e4m3(+Inf)", uint8(Float8E4M3FromFloat32(inf)), 0x7e},
		{"e4m3(-Inf)", uint8(Float8E4M3FromFloat32(-inf)), 0xfe},
		{"e4m3(1e30)", uint8(Float8E4M3FromFloat32(1e30)), 0x7e},
		{"e4m3(463.99)", uint8(Float8E4M3FromFloat32(463.99)), 0x7e},
		{"e4m3(464)", uint8(Float8E4M3FromFloat32(464)), 0x7e},
		{"e4m3(480)", uint8(Float8E4M3FromFloat32(480)), 0x7e},
		{"e4m3(NaN)", uint8(Float8E4M3FromFloat32(nan)), 0x7f},
		{"e4m3(-NaN)", uint8(Float8E4M3FromFloat32(-nan)), 0xff},
		{"e4m3(-0)", uint8(Float8E4M3FromFloat32(float32(math.Copysign(0, -1)))), 0x80},
		{"e4m3(2^-10)", uint8(Float8E4M3FromFloat32(0x1p-10)), 0x00},                     // tie to even (0)
		{"e4m3(-2^-10)", uint8(Float8E4M3FromFloat32(-0x1p-10)), 0x80},                   // a zero of the sign
		{"e4m3(3·2^-10)", uint8(Float8E4M3FromFloat32(3 * 0x1p-10)), 0x02},               // tie to even (2)
		{"e4m3(15·2^-10)", uint8(Float8E4M3FromFloat32(15 * 0x1p-10)), 0x08},             // largest subnormal tie → min normal
		{"e5m2(+Inf)", uint8(Float8E5M2FromFloat32(inf)), 0x7b},                          // saturating
		{"e5m2(-Inf)", uint8(Float8E5M2FromFloat32(-inf)), 0xfb},                         // saturating
		{"e5m2(61439)", uint8(Float8E5M2FromFloat32(61439)), 0x7b},                       // below the tie
		{"e5m2(61440)", uint8(Float8E5M2FromFloat32(61440)), 0x7b},                       // the tie would be Inf: saturated
		{"e5m2(NaN)", uint8(Float8E5M2FromFloat32(nan)), 0x7e},                           // quiet NaN
		{"e5m2(2^-17)", uint8(Float8E5M2FromFloat32(0x1p-17)), 0x00},                     // tie to even (0)
		{"e5m2(1+2^-3)", uint8(Float8E5M2FromFloat32(1 + 0x1p-3)), 0x3c},                 // tie to even (1)
		{"e5m2(1+3·2^-3)", uint8(Float8E5M2FromFloat32(1 + 3*0x1p-3)), 0x3e},             // tie to even (1.5)
		{"e4m3(1+2^-4)", uint8(Float8E4M3FromFloat32(1 + 0x1p-4)), 0x38},                 // tie to even (1)
		{"e4m3(1+2^-4+2^-20)", uint8(Float8E4M3FromFloat32(1 + 0x1p-4 + 0x1p-20)), 0x39}, // above the tie
	} {
		if c.got != c.want {
			t.Errorf("%s = %#02x; want %#02x", c.name, c.got, c.want)
		}
	}
}

// TestFloat8Midpoints encodes every midpoint between consecutive
// magnitudes (and to the value past the largest), the float32 values
// either side of each, and every pattern's own value, with both signs,
// against the brute-force reference.
func TestFloat8Midpoints(t *testing.T) {
	for _, s := range fp8Specs {
		mags := s.magnitudes()
		var in []float32
		for i := range len(mags) - 1 {
			mid := float32((mags[i] + mags[i+1]) / 2) // few significant bits: exact
			if float64(mid) != (mags[i]+mags[i+1])/2 {
				t.Fatalf("%s: midpoint %d not exact in float32", s.name, i)
			}
			for _, sg := range []float32{1, -1} {
				m := sg * mid
				in = append(in, m, math.Nextafter32(m, float32(math.Inf(1))), math.Nextafter32(m, float32(math.Inf(-1))),
					sg*float32(mags[i]))
			}
		}
		for _, f := range in {
			if got, want := s.encode(f), s.ref(f); got != want {
				t.Fatalf("%s: encode(%v = %#x) = %#02x; want %#02x", s.name, f, math.Float32bits(f), got, want)
			}
		}
	}
}

func TestFloat8Random(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range fp8Specs {
		for range 1 << 18 {
			u := r.Uint32()
			if r.IntN(2) == 0 {
				// Mostly inside the format's range: exponents around 0.
				u = u&0x807fffff | uint32(127-20+r.IntN(40))<<23
			}
			f := math.Float32frombits(u)
			got := s.encode(f)
			if f != f {
				if !s.isNaN(got) || got&0x80 != uint8(u>>24)&0x80 {
					t.Fatalf("%s: encode(NaN %#x) = %#02x", s.name, u, got)
				}
				continue
			}
			if want := s.ref(f); got != want {
				t.Fatalf("%s: encode(%v = %#x) = %#02x; want %#02x", s.name, f, u, got, want)
			}
		}
	}
}

func TestFloat8RoundTrip(t *testing.T) {
	for _, s := range fp8Specs {
		for i := range 256 {
			x := uint8(i)
			v := s.decode(x)
			back := s.encode(v)
			switch {
			case s.isNaN(x):
				if !s.isNaN(back) || back&0x80 != x&0x80 {
					t.Fatalf("%s: NaN %#02x → %v → %#02x", s.name, x, v, back)
				}
			case math.IsInf(float64(v), 0):
				if back != x&0x80|0x7b {
					t.Fatalf("%s: %v → %#02x; want saturated", s.name, v, back)
				}
			case back != x:
				t.Fatalf("%s: %#02x → %v → %#02x", s.name, x, v, back)
			}
		}
	}
}

func TestFloat8Bulk(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range fp8Specs {
		src := make([]float32, 301)
		for i := range src {
			src[i] = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(30)-15))
		}
		src[7] = float32(math.NaN())
		src[8] = float32(math.Inf(-1))
		enc := make([]uint8, len(src))
		if n := s.encodeBulk(enc, src); n != len(src) {
			t.Fatalf("%s: encoded %d; want %d", s.name, n, len(src))
		}
		for i, f := range src {
			if x := s.encode(f); x != enc[i] {
				t.Fatalf("%s: encode[%d] = %#02x; want %#02x", s.name, i, enc[i], x)
			}
		}
		wide := make([]float32, len(enc)+2)
		wide[len(enc)], wide[len(enc)+1] = 9, 9
		if n := s.decodeBulk(wide[:len(enc)+2], enc); n != len(enc) {
			t.Fatalf("%s: decoded %d; want %d", s.name, n, len(enc))
		}
		for i, x := range enc {
			if w := s.decode(x); math.Float32bits(w) != math.Float32bits(wide[i]) {
				t.Fatalf("%s: decode[%d] = %v; want %v", s.name, i, wide[i], w)
			}
		}
		if wide[len(enc)] != 9 || wide[len(enc)+1] != 9 {
			t.Fatalf("%s: decode wrote past its count", s.name)
		}
	}
	// The typed helpers agree with the scalar ones and allocate only the result.
	src := []float32{0, 1, -2.5, 500, 1e-4}
	a, b := Float8E4M3s(src), Float8E5M2s(src)
	for i, f := range src {
		if a[i] != Float8E4M3FromFloat32(f) || b[i] != Float8E5M2FromFloat32(f) {
			t.Fatalf("Float8E4M3s/Float8E5M2s[%d] differ from the scalar conversions", i)
		}
	}
	dst4 := make([]Float8E4M3, 2)
	if n := EncodeFloat8E4M3(dst4, src); n != 2 {
		t.Fatalf("EncodeFloat8E4M3 into 2 returned %d", n)
	}
	if allocs := testing.AllocsPerRun(10, func() {
		EncodeFloat8E4M3(dst4, src)
		EncodeFloat8E5M2(b, src)
		DecodeFloat8E4M3(src, a)
		DecodeFloat8E5M2(src, b)
	}); allocs != 0 {
		t.Fatalf("bulk conversions allocate %v times", allocs)
	}
	if Float8E4M3Table()[0x38] != 1 || Float8E5M2Table()[0x3c] != 1 {
		t.Fatal("tables disagree with Float32")
	}
}

// FuzzFloat8Conversions checks float32 → E4M3FN / E5M2 for the bit
// patterns a and b and their neighbours against the brute-force
// reference, NaN staying NaN of its sign, monotonicity, and the slice
// encoders agreeing with the scalar conversions.
func FuzzFloat8Conversions(f *testing.F) {
	for _, s := range [][2]uint32{
		{0, 0x80000000},
		{0x43e80000, 0x43f00000}, // 464 (E4M3 saturation tie) and 480
		{0x47700000, 0x477fffff}, // 61440 (E5M2 saturation tie) and 65535.99
		{0x3a800000, 0x3b000000}, // 2^-10 and 2^-9: E4M3 subnormal edge
		{0x37000000, 0x37800000}, // 2^-17 and 2^-16: E5M2 subnormal edge
		{0x7fc00001, 0xff800000}, // NaN with payload; −Inf
		{0x3f880000, 0x3f900000}, // 1 + 2^-4 and 1 + 2^-3: ties to even
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b uint32) {
		var xs []float32
		for _, u := range []uint32{a, b} {
			xs = append(xs, math.Float32frombits(u), math.Float32frombits(u+1), math.Float32frombits(u-1),
				math.Float32frombits(u^0x80000000), math.Float32frombits(u&^0xfffff), math.Float32frombits(u&^0xfffff|0x80000))
		}
		for _, s := range fp8Specs {
			enc := make([]uint8, len(xs))
			s.encodeBulk(enc, xs)
			for i, x := range xs {
				got := s.encode(x)
				if got != enc[i] {
					t.Fatalf("%s: bulk encode(%#x) = %#02x, scalar %#02x", s.name, math.Float32bits(x), enc[i], got)
				}
				if x != x {
					if !s.isNaN(got) || got&0x80 != uint8(math.Float32bits(x)>>24)&0x80 {
						t.Fatalf("%s: encode(NaN %#x) = %#02x", s.name, math.Float32bits(x), got)
					}
					continue
				}
				if want := s.ref(x); got != want {
					t.Fatalf("%s: encode(%v = %#x) = %#02x; want %#02x", s.name, x, math.Float32bits(x), got, want)
				}
				if v := s.decode(got); math.Abs(float64(v)) > s.maxFinite {
					t.Fatalf("%s: encode(%v) = %v, not saturated", s.name, x, v)
				}
			}
			for i, x := range xs {
				for _, y := range xs[i+1:] {
					if x != x || y != y {
						continue
					}
					if x > y {
						x, y = y, x
					}
					if ex, ey := s.decode(s.encode(x)), s.decode(s.encode(y)); ex > ey {
						t.Fatalf("%s not monotone: %v <= %v but %v > %v", s.name, x, y, ex, ey)
					}
				}
			}
		}
	})
}
