package kernel

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Names of the kernel implementations. Each is a level of instruction set:
// amx and avx512bf16 run the float32 kernels with AVX-512 and add their own
// bfloat16 products (QKTBF16, PVBF16); every other level runs the bfloat16
// kernels as their generic twins.
const (
	Generic    = "generic"    // pure Go, everywhere
	AVX2       = "avx2"       // amd64 with AVX2, FMA and F16C
	AVX512     = "avx512"     // amd64 with AVX-512 F, BW and VL
	AVX512BF16 = "avx512bf16" // avx512, and AVX512-BF16 (VDPBF16PS) for the bf16 products
	AMX        = "amx"        // avx512, and AMX-BF16 tiles (TDPBF16PS) for the bf16 products
	NEON       = "neon"       // arm64 Advanced SIMD
)

// impl identifies the implementation the kernels dispatch to.
type impl uint8

const (
	implGeneric impl = iota
	implAVX2
	implAVX512
	implNEON
	implAVX512BF16
	implAMX
)

var implNames = [...]string{implGeneric: Generic, implAVX2: AVX2, implAVX512: AVX512, implNEON: NEON,
	implAVX512BF16: AVX512BF16, implAMX: AMX}

// level is the implementation chosen at start-up (FLASHGO_KERNEL, or the
// best this machine has) and changed only by SetImplementation. active is
// the implementation of the float32 kernels at that level and activeBF16
// that of the bfloat16 products. They are plain variables: every kernel
// call reads one, and reading a byte costs nothing next to a tile.
var (
	level, envErr      = chooseImpl(available(), os.Getenv("FLASHGO_KERNEL"))
	active, activeBF16 = split(level)
)

func init() {
	if envErr != nil {
		fmt.Fprintf(os.Stderr, "flashgo: %v\n", envErr)
	}
}

// split returns the float32 and bfloat16 implementations of a level.
func split(l impl) (f32, bf16 impl) {
	switch l {
	case implAMX, implAVX512BF16:
		return implAVX512, l
	}
	return l, l
}

// chooseImpl picks the best available implementation, or the one the
// FLASHGO_KERNEL environment variable names. An unknown name, or one this
// machine cannot run, is reported in the error and the best available
// implementation is used instead.
func chooseImpl(avail []impl, env string) (impl, error) {
	env = strings.ToLower(strings.TrimSpace(env))
	if env == "" {
		return avail[0], nil
	}
	want := slices.Index(implNames[:], env)
	if want < 0 {
		return avail[0], fmt.Errorf("FLASHGO_KERNEL=%q is not an implementation; want one of %v (using %s)", env, implNames, implNames[avail[0]])
	}
	if !slices.Contains(avail, impl(want)) {
		return avail[0], fmt.Errorf("FLASHGO_KERNEL=%q: this machine cannot run %s%s; it can run %v (using %s)",
			env, env, missing(impl(want)), names(avail), implNames[avail[0]])
	}
	return impl(want), nil
}

// EnvError returns the reason the FLASHGO_KERNEL environment variable was
// not followed (an unknown name, or an implementation this machine cannot
// run), or nil. The package has reported it on standard error at start-up
// and uses the best implementation available instead; a command can make
// it fatal.
func EnvError() error { return envErr }

func names(avail []impl) []string {
	var n []string
	for _, im := range avail {
		n = append(n, implNames[im])
	}
	return n
}

// Implementation returns the name of the implementation the kernels use:
// "amx", "avx512bf16", "avx512", "avx2", "neon" or "generic".
func Implementation() string { return implNames[level] }

// BF16Implementation returns the name of the implementation of the
// bfloat16 products (QKTBF16, PVBF16): "amx" or "avx512bf16" (bf16
// instructions), "avx512", "avx2" or "neon" (the float32 FMA kernels of
// that level on operands widened exactly to float32), or "generic".
func BF16Implementation() string { return implNames[activeBF16] }

// Int8DotImplementation returns the name of the implementation of
// QKRowsQ8Dot: "avx512vnni" (VPDPBUSD on 512-bit vectors), "avxvnni" (the
// VEX form of VPDPBUSD on 256-bit vectors, at the avx2 level of a CPU with
// AVX-VNNI, or the avx512 level of one without AVX512-VNNI), "avx2"
// (VPMADDUBSW, on CPUs with neither) or "generic" (a Go loop).
func Int8DotImplementation() string { return int8DotName() }

// Implementations returns the names of the implementations this machine
// can run, best first; "generic" is always last. Built with the purego tag,
// only "generic" is available.
func Implementations() []string {
	return names(available())
}

// SetImplementation switches every kernel to the named implementation and
// returns a function that restores the previous one. It is meant for tests
// and benchmarks that compare implementations, and must not be called while
// kernels are running on other goroutines. It returns an error if the name
// is unknown or the machine cannot run it.
func SetImplementation(name string) (restore func(), err error) {
	for _, im := range available() {
		if implNames[im] == name {
			prev := level
			level = im
			active, activeBF16 = split(im)
			return func() { level = prev; active, activeBF16 = split(prev) }, nil
		}
	}
	return nil, fmt.Errorf("kernel: implementation %q is not available here; want one of %v", name, Implementations())
}

// missing describes what a machine needs to run im, for the error of an
// implementation it cannot run.
func missing(im impl) string {
	switch im {
	case implAVX2:
		return " (it needs amd64 with AVX2, FMA and F16C)"
	case implAVX512:
		return " (it needs amd64 with AVX-512 F, BW and VL)"
	case implAVX512BF16:
		return " (it needs amd64 with AVX-512 F, BW, VL and BF16)"
	case implAMX:
		return " (it needs amd64 with AVX-512, AMX-TILE and AMX-BF16, the tile state enabled in XCR0 and the kernel's permission)"
	case implNEON:
		return " (it needs arm64)"
	}
	return " (it is not built in: the purego tag)"
}
