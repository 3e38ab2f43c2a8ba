// Package tier splits the module's tests into two tiers. The fast tier is
// what `go test ./...` runs: every test, with the largest grids sampled, so
// that the whole module passes in minutes on two cores. The long tier,
// FLASHGO_TEST_LONG=1 in the environment, runs every cell of every grid.
// No cell runs in neither tier: a cell the fast tier leaves out is one the
// long tier runs (docs/testing.md lists what each tier covers).
//
// The tier is an environment variable, not a build tag, because the go
// command keys its test cache on the variables a test reads (a cached fast
// run is never reported for a long one), one setting reaches every package
// of `./...` without a rebuild, and vet, staticcheck and the generators
// see one build of the tests, not two.
//
// A grid samples its cells with Keep (a cell inside one test) or Run (a
// cell that is a subtest). The choice is a hash of the test's full name and
// the cell's key: the same cells run on every run and every machine, a cell
// keeps its fate when cells are added around it, and, since the kernel
// level is part of a test's name under internal/impltest's Run, each level
// runs a different slice of the grid.
package tier

import (
	"fmt"
	"hash/fnv"
	"os"
	"testing"
)

// Env is the environment variable that selects the long tier: "1" runs
// it; anything else, or nothing, the fast tier.
const Env = "FLASHGO_TEST_LONG"

// Long reports whether the long tier runs: FLASHGO_TEST_LONG=1, and not
// -short (which always asks for the fast tier).
func Long() bool {
	return os.Getenv(Env) == "1" && !testing.Short()
}

// Keep reports whether the cell of tb named key runs in this tier: every
// cell in the long tier; in the fast tier, about one cell in n, chosen by
// a hash of tb.Name() and key. n <= 1 keeps every cell, and so does the
// race detector: it runs the concurrency tests alone (make test-race),
// whose grids are sized for it by their own trims, and a sample could
// leave a test no cell that starts its goroutines.
func Keep(tb testing.TB, key string, n int) bool {
	if n <= 1 || Long() || raceEnabled {
		return true
	}
	return chosen(tb.Name()+"/"+key, n)
}

// chosen reports whether the cell of the full name is among the one in n
// that the fast tier keeps. FNV-1a: stable across Go releases and
// machines, and every byte of the name moves the result.
func chosen(name string, n int) bool {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()%uint64(n) == 0
}

// Run runs f as subtest name of t when Keep(t, name, n) says so, and
// otherwise creates the subtest and skips it, naming the long tier: the
// cell shows in `go test -v` as a skip in the fast tier and runs in the
// long one. It returns what t.Run returns.
func Run(t *testing.T, name string, n int, f func(t *testing.T)) bool {
	t.Helper()
	if Keep(t, name, n) {
		return t.Run(name, f)
	}
	return t.Run(name, func(t *testing.T) { t.Skip(SkipReason(n)) })
}

// SkipReason is the reason a cell the fast tier leaves out is skipped
// with: which tier runs it.
func SkipReason(n int) string {
	return fmt.Sprintf("long tier (%s=1): the fast tier runs 1 in %d of these cells", Env, n)
}
