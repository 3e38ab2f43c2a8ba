package kernel

// The test harness of the package, in the manner of cryptotest's
// TestAllImplementations: one runner that runs a test once per
// implementation the package knows, reporting those this machine cannot
// run as skipped with what it lacks (and failing where the machine has
// what an implementation needs but the package refuses it); one set of
// NaN-guarded buffers; one ULP distance. The CPU features the tests ask
// about are in harness_<arch>_test.go (cpuLacks).

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/fp16"
)

// allImpls is every implementation the package knows, on any
// architecture, best first and generic last.
var allImpls = []string{AMX, AVX512BF16, AVX512, AVX2, NEON, Generic}

// implLacks says why this machine (or this build) cannot run the named
// implementation, or returns "" if it can.
func implLacks(name string) string {
	for im, n := range implNames {
		if n == name {
			return cpuLacks(impl(im))
		}
	}
	return "the package has no implementation of that name"
}

// setImpl switches the kernels to the named implementation for the rest of
// the test or benchmark, or skips it with what the machine lacks. The
// machine's features and the package's own list must agree.
func setImpl(tb testing.TB, name string) {
	tb.Helper()
	lacks := implLacks(name)
	restore, err := SetImplementation(name)
	switch {
	case lacks != "" && err == nil:
		restore()
		tb.Fatalf("%s: the package runs it, but the tests' feature table says: %s", name, lacks)
	case lacks != "":
		tb.Skipf("SKIP %s: %s", name, lacks)
	case err != nil:
		tb.Fatalf("%s: the tests' feature table says this machine can run it, but: %v", name, err)
	}
	tb.Cleanup(restore)
}

// testAllImpls runs f as a subtest once per implementation the package
// knows, under that implementation; those this machine cannot run are
// skipped, naming what it lacks.
func testAllImpls(t *testing.T, f func(t *testing.T)) { testImpls(t, allImpls, f) }

// testImpls is testAllImpls for the named implementations only (those that
// have the kernels a test calls directly).
func testImpls(t *testing.T, names []string, f func(t *testing.T)) {
	t.Helper()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			setImpl(t, name)
			f(t)
		})
	}
}

// benchAllImpls is testAllImpls for benchmarks.
func benchAllImpls(b *testing.B, f func(b *testing.B)) {
	b.Helper()
	for _, name := range allImpls {
		b.Run(name, func(b *testing.B) {
			setImpl(b, name)
			f(b)
		})
	}
}

const pad = 5 // NaN guard elements on each side of every guarded buffer

// bf16Guard is the bfloat16 NaN in the guards of guardedBF16.
const bf16Guard fp16.BFloat16 = 0x7fc0

// guarded returns a buffer of n elements framed by NaN guards, and the
// view of its middle, itself filled with NaN.
func guarded(n int) (buf, mid []float32) {
	buf = make([]float32, n+2*pad)
	for i := range buf {
		buf[i] = float32(math.NaN())
	}
	return buf, buf[pad : pad+n]
}

// guardedBF16 returns a bfloat16 buffer of n elements framed by NaN guards,
// and the view of its middle, itself filled with NaN.
func guardedBF16(n int) (buf, mid []fp16.BFloat16) {
	buf = make([]fp16.BFloat16, n+2*pad)
	for i := range buf {
		buf[i] = bf16Guard
	}
	return buf, buf[pad : pad+n]
}

// checkGuards fails if a write landed outside the middle of a buffer from
// guarded.
func checkGuards(t testing.TB, buf []float32, what string) {
	t.Helper()
	for i := range pad {
		if !math.IsNaN(float64(buf[i])) || !math.IsNaN(float64(buf[len(buf)-1-i])) {
			t.Fatalf("%s: guard element written", what)
		}
	}
}

// checkGuardsBF16 fails if a write landed outside the middle of a buffer
// from guardedBF16.
func checkGuardsBF16(t testing.TB, buf []fp16.BFloat16, what string) {
	t.Helper()
	for i := range pad {
		if buf[i] != bf16Guard || buf[len(buf)-1-i] != bf16Guard {
			t.Fatalf("%s: guard element written", what)
		}
	}
}

// checkOutside fails if an element of buf, a buffer from guarded, outside
// the block (rows rows of n elements, ld apart, at pad) is no longer NaN.
func checkOutside(t testing.TB, buf []float32, ld, rows, n int, what string) {
	t.Helper()
	for e, x := range buf {
		i, j := (e-pad)/ld, (e-pad)%ld
		if e >= pad && i < rows && j < n {
			continue
		}
		if x == x {
			t.Fatalf("%s: element %d outside the block written (%v)", what, e-pad, x)
		}
	}
}

func fill(rng *rand.Rand, x []float32) {
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
}

// ulps returns the distance between two float32 values in units in the
// last place, counting across zero (+0 and -0 are 0 apart); two NaNs are 0
// apart, and a NaN and a number math.MaxInt32.
func ulps(a, b float32) int64 {
	an, bn := a != a, b != b
	if an || bn {
		if an && bn {
			return 0
		}
		return math.MaxInt32
	}
	key := func(x float32) int64 {
		u := int64(math.Float32bits(x))
		if u&(1<<31) != 0 {
			return -(u &^ (1 << 31))
		}
		return u
	}
	d := key(a) - key(b)
	if d < 0 {
		d = -d
	}
	return d
}

// TestUlps pins the distance the tests bound their results with.
func TestUlps(t *testing.T) {
	one := math.Float32bits(1)
	negZero := float32(math.Copysign(0, -1))
	nan := float32(math.NaN())
	for _, c := range []struct {
		a, b float32
		want int64
	}{
		{1, 1, 0},
		{1, math.Float32frombits(one + 1), 1},
		{math.Float32frombits(one + 3), 1, 3},
		{0, negZero, 0},
		{math.Float32frombits(1), -math.Float32frombits(1), 2},
		{-1, -math.Float32frombits(one + 2), 2},
		{nan, nan, 0},
		{nan, 1, math.MaxInt32},
		{0, nan, math.MaxInt32},
	} {
		if got := ulps(c.a, c.b); got != c.want {
			t.Errorf("ulps(%v, %v) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
