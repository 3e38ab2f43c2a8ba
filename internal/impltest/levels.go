package impltest

import (
	"os"
	"slices"
	"strings"

	"github.com/flashgo/flashgo/internal/impl"
	"github.com/flashgo/flashgo/internal/tier"
)

// A Policy says which kernel levels Run runs in the fast tier (package
// tier); the long tier runs every level under either policy.
type Policy int

const (
	// EveryLevel runs every level in both tiers: kernel's own tests, where
	// the levels are what is under test.
	EveryLevel Policy = iota
	// BestAndGeneric runs two levels in the fast tier: the best this
	// machine has, and generic, the specification (under the race
	// detector, the best alone). attention's tests: the engine above the
	// kernels is the same Go code at every level, the kernels themselves
	// are tested at every level by kernel's tests, and the best and the
	// generic level are the two a user runs (the default, and purego).
	BestAndGeneric
)

// policy is the test binary's Policy; SetPolicy changes it.
var policy = EveryLevel

// SetPolicy sets the Policy of every Run of the kernel axis in this test
// binary. A package's tests call it once, from an init function of a test
// file (attention: BestAndGeneric); the default is EveryLevel.
func SetPolicy(p Policy) { policy = p }

// Levels returns the kernel levels Run runs in this tier, best first: the
// one FLASHGO_KERNEL names if it names a level this machine runs (one
// package at one level, in either tier and under either policy); else
// every level the machine has in the long tier or under EveryLevel; else
// those of BestAndGeneric.
func Levels() []string {
	avail := impl.List(impl.Kernel)
	if pin := pinned(); pin != "" {
		return []string{pin}
	}
	if policy == EveryLevel || tier.Long() {
		return avail
	}
	levels := slices.Clone(avail[:min(1, len(avail))])
	if !raceEnabled && len(avail) > 1 && slices.Contains(avail, "generic") {
		levels = append(levels, "generic")
	}
	return levels
}

// pinned returns the level FLASHGO_KERNEL names (its first field, as
// kernel reads it) if this machine runs it, or "".
func pinned() string {
	level, _, _ := strings.Cut(os.Getenv("FLASHGO_KERNEL"), ",")
	level = strings.ToLower(strings.TrimSpace(level))
	if level == "" || !slices.Contains(impl.List(impl.Kernel), level) {
		return ""
	}
	return level
}

// leftOut says why Run skips the row of the axis in this tier, or returns
// "". Benchmarks run every row: a benchmark is run by name, on purpose.
func leftOut(axis, row string, bench bool) string {
	if bench || axis != impl.Kernel || impl.Lacks(axis, row) != "" || slices.Contains(Levels(), row) {
		return ""
	}
	if pin := pinned(); pin != "" {
		return "FLASHGO_KERNEL=" + os.Getenv("FLASHGO_KERNEL") + " runs " + pin + " alone"
	}
	if raceEnabled {
		return "under the race detector the fast tier runs the best level alone; the long tier (" + tier.Env + "=1) runs " + row
	}
	return "the fast tier runs " + strings.Join(Levels(), " and ") + "; the long tier (" + tier.Env + "=1) runs " + row
}
