package tier

import (
	"fmt"
	"testing"
)

// TestChosen checks that the sample is a stable function of the name, and
// keeps close to one in n of many cells.
func TestChosen(t *testing.T) {
	for _, n := range []int{2, 3, 4, 8} {
		kept := 0
		const cells = 4000
		for i := range cells {
			name := fmt.Sprintf("TestGrid/avx512/cell %d", i)
			c := chosen(name, n)
			if c != chosen(name, n) {
				t.Fatalf("%s: the choice changes between calls", name)
			}
			if c {
				kept++
			}
		}
		if want := cells / n; kept < want*8/10 || kept > want*12/10 {
			t.Errorf("1 in %d: kept %d of %d cells, want about %d", n, kept, cells, want)
		}
	}
	// Pinned: the fast tier runs the same cells on every machine.
	if !chosen("TestPromises/generic/float32/F16/inputs never modified/ForwardPaged", 3) {
		t.Error("the pinned cell is no longer chosen: the hash changed")
	}
}

// TestKeep checks the fast tier's sample through Keep and Run: n <= 1
// keeps everything, and Run skips exactly the cells Keep leaves out.
func TestKeep(t *testing.T) {
	if Long() || raceEnabled {
		t.Skip("the fast tier's sample; the long tier and the race detector keep every cell")
	}
	if !Keep(t, "any", 1) || !Keep(t, "any", 0) {
		t.Error("n <= 1 must keep every cell")
	}
	for i := range 20 {
		key := fmt.Sprint("cell ", i)
		want := Keep(t, key, 3)
		ran := false
		Run(t, key, 3, func(t *testing.T) { ran = true })
		if ran != want {
			t.Errorf("%s: Run ran it: %v; Keep: %v", key, ran, want)
		}
	}
}

// TestLong checks the variable: only "1" selects the long tier.
func TestLong(t *testing.T) {
	for _, c := range []struct {
		val  string
		long bool
	}{{"1", !testing.Short()}, {"0", false}, {"", false}, {"yes", false}} {
		t.Setenv(Env, c.val)
		if Long() != c.long {
			t.Errorf("%s=%q: Long() = %v", Env, c.val, !c.long)
		}
		if c.long && !Keep(t, "every cell", 1000) {
			t.Errorf("%s=%q: the long tier left a cell out", Env, c.val)
		}
	}
}
