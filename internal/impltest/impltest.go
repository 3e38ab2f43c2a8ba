// Package impltest is the test harness of the module's implementations,
// after crypto/internal/cryptotest: Run runs a test once per row of an
// axis of the registry (internal/impl) — every kernel level, bfloat16
// product or integer dot kernel the package knows —, selected, and
// reports each row this machine or build cannot run as a skip that names
// what it lacks. kernel's and attention's tests use it, so every
// implementation is tested the same way in both (attnbench's tests select
// rows through internal/impl directly). It also holds the helpers those
// tests share: NaN-guarded buffers, the ULP distance and random inputs.
package impltest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/internal/impl"
)

// Run runs f as a subtest once per row of the axis (impl.Kernel,
// impl.BF16, impl.Int8Dot), under that row; rows this machine cannot run
// are skipped with what they lack. The selection is restored after each
// subtest. Subtests must not run in parallel with other tests that
// select implementations.
func Run(t *testing.T, axis string, f func(t *testing.T)) {
	t.Helper()
	rows := impl.Rows(axis)
	if len(rows) == 0 {
		t.Fatalf("impltest: no axis %q is registered (import the package that registers it)", axis)
	}
	for _, row := range rows {
		t.Run(row, func(t *testing.T) {
			Select(t, axis, row)
			f(t)
		})
	}
}

// Select switches the axis to row for the rest of tb (a test or a
// benchmark), or skips it naming what this machine lacks.
func Select(tb testing.TB, axis, row string) {
	tb.Helper()
	if lacks := impl.Lacks(axis, row); lacks != "" {
		tb.Skipf("SKIP %s: %s", row, lacks)
	}
	restore, err := impl.Select(axis, row)
	if err != nil {
		tb.Fatalf("%s: the registry says this machine can run it, but: %v", row, err)
	}
	tb.Cleanup(restore)
}

// Pad is the number of NaN guard elements on each side of a guarded
// buffer.
const Pad = 5

// GuardBF16 is the bfloat16 NaN in the guards of GuardedBF16.
const GuardBF16 fp16.BFloat16 = 0x7fc0

// Guarded returns a buffer of n elements framed by Pad NaN guards on each
// side, and the view of its middle, itself filled with NaN: a kernel that
// reads past a view gets NaN into its results, one that writes past it is
// caught by CheckGuards.
func Guarded(n int) (buf, mid []float32) {
	buf = make([]float32, n+2*Pad)
	for i := range buf {
		buf[i] = float32(math.NaN())
	}
	return buf, buf[Pad : Pad+n]
}

// GuardedBF16 is Guarded for bfloat16 buffers.
func GuardedBF16(n int) (buf, mid []fp16.BFloat16) {
	buf = make([]fp16.BFloat16, n+2*Pad)
	for i := range buf {
		buf[i] = GuardBF16
	}
	return buf, buf[Pad : Pad+n]
}

// CheckGuards fails tb if a write landed outside the middle of a buffer
// from Guarded.
func CheckGuards(tb testing.TB, buf []float32, what string) {
	tb.Helper()
	for i := range Pad {
		if !math.IsNaN(float64(buf[i])) || !math.IsNaN(float64(buf[len(buf)-1-i])) {
			tb.Fatalf("%s: guard element written", what)
		}
	}
}

// CheckGuardsBF16 is CheckGuards for a buffer from GuardedBF16.
func CheckGuardsBF16(tb testing.TB, buf []fp16.BFloat16, what string) {
	tb.Helper()
	for i := range Pad {
		if buf[i] != GuardBF16 || buf[len(buf)-1-i] != GuardBF16 {
			tb.Fatalf("%s: guard element written", what)
		}
	}
}

// CheckOutside fails tb if an element of buf, a buffer from Guarded,
// outside the block (rows rows of n elements, ld apart, from Pad on) is
// no longer NaN.
func CheckOutside(tb testing.TB, buf []float32, ld, rows, n int, what string) {
	tb.Helper()
	for e, x := range buf {
		i, j := (e-Pad)/ld, (e-Pad)%ld
		if e >= Pad && i < rows && j < n {
			continue
		}
		if x == x {
			tb.Fatalf("%s: element %d outside the block written (%v)", what, e-Pad, x)
		}
	}
}

// ULPs returns the distance between two float32 values in units in the
// last place, counting across zero (+0 and -0 are 0 apart); two NaNs are
// 0 apart, and a NaN and a number math.MaxInt32.
func ULPs(a, b float32) int64 {
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

// Randn returns n standard normal float32 values from rng.
func Randn(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	Fill(rng, x)
	return x
}

// Fill sets x to standard normal values from rng.
func Fill(rng *rand.Rand, x []float32) {
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
}
