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
	"testing"

	registry "github.com/flashgo/flashgo/internal/impl"
	"github.com/flashgo/flashgo/internal/impltest"
)

// allImpls is every implementation the package knows, on any
// architecture, best first and generic last.
var allImpls = allLevels

// implLacks says why this machine (or this build) cannot run the named
// implementation, by the tests' own feature table (harness_<arch>_test.go),
// or returns "" if it can.
func implLacks(name string) string {
	for im, n := range implNames {
		if n == name {
			return cpuLacks(impl(im))
		}
	}
	return "the package has no implementation of that name"
}

// TestFeatureTableAgrees checks the package's own account of which levels
// this machine runs (the registry's, which the shared runner skips by)
// against the tests' feature table, level by level.
func TestFeatureTableAgrees(t *testing.T) {
	for _, name := range allImpls {
		tests, pkg := implLacks(name), registry.Lacks(registry.Kernel, name)
		if (tests == "") != (pkg == "") {
			t.Errorf("%s: the tests' feature table says %q, the package %q", name, tests, pkg)
		}
	}
}

// setImpl switches the kernels to the named implementation for the rest of
// the test or benchmark, or skips it with what the machine lacks
// (impltest.Select).
func setImpl(tb testing.TB, name string) {
	tb.Helper()
	impltest.Select(tb, registry.Kernel, name)
}

// testAllImpls runs f as a subtest once per implementation the package
// knows, under that implementation; those this machine cannot run are
// skipped, naming what it lacks (impltest.Run).
func testAllImpls(t *testing.T, f func(t *testing.T)) { impltest.Run(t, registry.Kernel, f) }

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

// The shared helpers (internal/impltest), under the names the package's
// tests use.
const pad = impltest.Pad

var (
	guarded         = impltest.Guarded
	guardedBF16     = impltest.GuardedBF16
	checkGuards     = impltest.CheckGuards
	checkGuardsBF16 = impltest.CheckGuardsBF16
	checkOutside    = impltest.CheckOutside
	fill            = impltest.Fill
	ulps            = impltest.ULPs
)

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
