package kernel

// The test harness of the package, in the manner of cryptotest's
// TestAllImplementations: one runner that runs a test once per
// implementation the package knows, reporting those this machine cannot
// run as skipped with what it lacks (and failing where the machine has
// what an implementation needs but the package refuses it); one set of
// NaN-guarded buffers and blocks; one ULP distance; one set of random
// inputs. All are internal/impltest's, shared with attention's tests. The
// CPU features the tests check the registry's account against are in
// harness_<arch>_test.go (cpuLacks).

import (
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
// (impltest.Select): the tests and benchmarks that call an
// implementation's kernels directly rather than through the dispatch run
// under it.
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
	impltest.RunRows(t, registry.Kernel, names, f)
}

// benchAllImpls is testAllImpls for benchmarks.
func benchAllImpls(b *testing.B, f func(b *testing.B)) { impltest.Run(b, registry.Kernel, f) }

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
	randn           = impltest.Randn
	ulps            = impltest.ULPs
	requireSameBits = impltest.RequireSameBits
)
