// Package impl is the registry of the implementations the kernel package
// can switch between, after crypto/internal/impl: kernel registers each
// axis of its implementation table (the level, the bfloat16 products, the
// int8 dot products) and the module's tests and commands list and select
// rows through it, so that no switch is part of kernel's public API.
//
// Selecting is meant for tests and benchmarks: it must not happen while
// kernels run on other goroutines.
package impl

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// The axes kernel registers.
const (
	Kernel  = "kernel"         // the level: amx, avx512bf16, avx512, avx2, neon, generic
	BF16    = "kernel/bf16"    // the bfloat16 products (QKTBF16, PVBF16)
	Int8Dot = "kernel/int8dot" // the integer Q·Kᵀ kernels of QKRowsQ8Dot
)

// An Axis is one column of choices of a package's implementation table.
type Axis struct {
	// Rows returns the names of every row the package knows, on any
	// machine, best first.
	Rows func() []string
	// Lacks says why this machine or build cannot run the named row, or
	// returns "" if it can.
	Lacks func(row string) string
	// Available returns the names of the rows this machine and build can
	// run, best first.
	Available func() []string
	// Current returns the name of the row in use.
	Current func() string
	// Select switches to the named row, which Available lists, and
	// returns a function that restores the previous selection.
	Select func(name string) (restore func())
}

var (
	mu   sync.Mutex
	axes = map[string]Axis{}
)

// Register records an axis; a package calls it once, at initialisation.
func Register(name string, a Axis) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := axes[name]; dup {
		panic("impl: axis " + name + " registered twice")
	}
	axes[name] = a
}

func axis(name string) (Axis, bool) {
	mu.Lock()
	defer mu.Unlock()
	a, ok := axes[name]
	return a, ok
}

// List returns the names of the rows of the axis that this machine can
// run, best first (nil for an axis nobody registered).
func List(name string) []string {
	a, ok := axis(name)
	if !ok {
		return nil
	}
	return a.Available()
}

// Rows returns the names of every row of the axis the package knows, on
// any machine, best first (nil for an axis nobody registered).
func Rows(name string) []string {
	a, ok := axis(name)
	if !ok {
		return nil
	}
	return a.Rows()
}

// Lacks says why this machine or build cannot run the row of the axis, or
// returns "" if it can.
func Lacks(name, row string) string {
	a, ok := axis(name)
	if !ok {
		return "no axis " + name + " is registered"
	}
	return a.Lacks(row)
}

// Current returns the name of the row of the axis in use ("" for an axis
// nobody registered).
func Current(name string) string {
	a, ok := axis(name)
	if !ok {
		return ""
	}
	return a.Current()
}

// Select switches the axis to the named row and returns a function that
// restores the previous one, or an error if the axis is unknown or this
// machine cannot run that row.
func Select(name, row string) (restore func(), err error) {
	a, ok := axis(name)
	if !ok {
		return nil, fmt.Errorf("impl: no axis %q is registered", name)
	}
	if avail := a.Available(); !slices.Contains(avail, row) {
		return nil, fmt.Errorf("kernel: implementation %q is not available here; want one of %v", row, avail)
	}
	return a.Select(row), nil
}

var (
	envErr   error
	peak     peakFunc
	peakBF16 peakFunc
)

// SetEnvError records why the package's environment setting (kernel's
// FLASHGO_KERNEL) was not followed; the package calls it at
// initialisation, and falls back to the best implementation instead.
func SetEnvError(err error) {
	mu.Lock()
	defer mu.Unlock()
	envErr = err
}

// EnvError returns the reason the environment's implementation setting
// was not followed, or nil: a command prints it (attnbench makes it
// fatal); the library itself never writes to standard error.
func EnvError() error {
	mu.Lock()
	defer mu.Unlock()
	return envErr
}

// A peakFunc measures one core's throughput of some products for about
// d: GFLOP/s and the name of the instructions that reached it.
type peakFunc = func(d time.Duration) (gflops float64, isa string)

// RegisterPeak records the function that measures one core's float32
// multiply-add throughput (kernel registers its FMA loop).
func RegisterPeak(f func(time.Duration) (gflops float64, isa string)) { register(&peak, f) }

// Peak measures one core's float32 multiply-add throughput in GFLOP/s for
// about d, with the name of the instructions that reached it, through the
// registered function ("", 0 where none is registered): the yardstick of
// the percent-of-peak figures of benchmarks.
func Peak(d time.Duration) (gflops float64, isa string) { return measure(&peak, d) }

// RegisterPeakBF16 records the function that measures one core's bfloat16
// product throughput (kernel registers its AMX or AVX512-BF16 loop).
func RegisterPeakBF16(f func(time.Duration) (gflops float64, isa string)) { register(&peakBF16, f) }

// PeakBF16 measures one core's bfloat16 product throughput in GFLOP/s for
// about d, with the name of the instructions that reached it, through the
// registered function: the yardstick of the percent-of-peak figures of
// bfloat16 rows. It returns 0 and "" where the machine has no bfloat16
// product unit, or where none is registered.
func PeakBF16(d time.Duration) (gflops float64, isa string) { return measure(&peakBF16, d) }

func register(slot *peakFunc, f peakFunc) {
	mu.Lock()
	defer mu.Unlock()
	*slot = f
}

// measure runs the function in slot for about d, outside the lock; 0 and
// "" where none is registered.
func measure(slot *peakFunc, d time.Duration) (gflops float64, isa string) {
	mu.Lock()
	f := *slot
	mu.Unlock()
	if f == nil {
		return 0, ""
	}
	return f(d)
}
