package kernel

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Names of the kernel implementations.
const (
	Generic = "generic" // pure Go, everywhere
	AVX2    = "avx2"    // amd64 with AVX2, FMA and F16C
	AVX512  = "avx512"  // amd64 with AVX-512 F, BW and VL
	NEON    = "neon"    // arm64 Advanced SIMD
)

// impl identifies the implementation the kernels dispatch to.
type impl uint8

const (
	implGeneric impl = iota
	implAVX2
	implAVX512
	implNEON
)

var implNames = [...]string{implGeneric: Generic, implAVX2: AVX2, implAVX512: AVX512, implNEON: NEON}

// active is chosen once at start-up (see init below) and changed only by
// SetImplementation. It is a plain variable: every kernel call reads it, and
// reading a byte costs nothing next to a tile.
var active = chooseImpl(available(), os.Getenv("FLASHGO_KERNEL"))

// chooseImpl picks the best available implementation, or the one the
// FLASHGO_KERNEL environment variable names. A name this machine cannot run
// (avx512 on a CPU without AVX-512) falls back to the best available
// implementation below it in the list; an unknown name is ignored.
func chooseImpl(avail []impl, env string) impl {
	env = strings.ToLower(strings.TrimSpace(env))
	want := slices.Index(implNames[:], env)
	for _, im := range avail { // best first
		if want < 0 || im == impl(want) || (impl(want) > im && sameFamily(impl(want), im)) {
			return im
		}
	}
	return implGeneric
}

// sameFamily reports whether b can stand in for a: a lesser x86 level for
// an x86 one, and generic for anything.
func sameFamily(a, b impl) bool {
	if b == implGeneric {
		return true
	}
	return (a == implAVX512 || a == implAVX2) && (b == implAVX512 || b == implAVX2)
}

// Implementation returns the name of the implementation the kernels use:
// "avx512", "avx2", "neon" or "generic".
func Implementation() string { return implNames[active] }

// Implementations returns the names of the implementations this machine
// can run, best first; "generic" is always last. Built with the purego tag,
// only "generic" is available.
func Implementations() []string {
	var names []string
	for _, im := range available() {
		names = append(names, implNames[im])
	}
	return names
}

// SetImplementation switches every kernel to the named implementation and
// returns a function that restores the previous one. It is meant for tests
// and benchmarks that compare implementations, and must not be called while
// kernels are running on other goroutines. It returns an error if the name
// is unknown or the machine cannot run it.
func SetImplementation(name string) (restore func(), err error) {
	for _, im := range available() {
		if implNames[im] == name {
			prev := active
			active = im
			return func() { active = prev }, nil
		}
	}
	return nil, fmt.Errorf("kernel: implementation %q is not available here; want one of %v", name, Implementations())
}
