package kernel

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	registry "github.com/flashgo/flashgo/internal/impl"
)

// Generic, AVX2, AVX512, AVX512BF16, AMX and NEON are the names of the
// kernel implementations. Each is a level of instruction set: amx and
// avx512bf16 run the float32 kernels with AVX-512 and add their own
// bfloat16 products (QKTBF16, PVBF16); avx512, avx2 and neon run the
// bfloat16 products through their float32 kernels on operands widened
// exactly to float32, and generic runs the Go loops.
const (
	Generic    = "generic"    // pure Go, everywhere
	AVX2       = "avx2"       // amd64 with AVX2, FMA and F16C
	AVX512     = "avx512"     // amd64 with AVX-512 F, BW and VL
	AVX512BF16 = "avx512bf16" // avx512, and AVX512-BF16 (VDPBF16PS) for the bf16 products
	AMX        = "amx"        // avx512, and AMX-BF16 tiles (TDPBF16PS) for the bf16 products
	NEON       = "neon"       // arm64 Advanced SIMD
)

// impl identifies a level: a row of the implementation table.
type impl uint8

const (
	implGeneric impl = iota
	implAVX2
	implAVX512
	implNEON
	implAVX512BF16
	implAMX
	numImpl
)

var implNames = [...]string{implGeneric: Generic, implAVX2: AVX2, implAVX512: AVX512, implNEON: NEON,
	implAVX512BF16: AVX512BF16, implAMX: AMX}

// needs describes what a machine needs to run each level, for the error
// of one it cannot run.
var needs = [...]string{
	implGeneric:    " (it is not built in: the purego tag)",
	implAVX2:       " (it needs amd64 with AVX2, FMA and F16C)",
	implAVX512:     " (it needs amd64 with AVX-512 F, BW and VL)",
	implAVX512BF16: " (it needs amd64 with AVX-512 F, BW, VL and BF16)",
	implAMX:        " (it needs amd64 with AVX-512, AMX-TILE and AMX-BF16, the tile state enabled in XCR0 and the kernel's permission)",
	implNEON:       " (it needs arm64)",
}

// The table's rows built into this binary (table_<arch>.go), indexed by
// level: nil where the build has none, and then the generic rows run.
var tableF32, tableBF16, tableDot = archTable()

// selection is the row of each axis in use.
type selection struct {
	level impl
	f32   *f32Row
	bf16  *bf16Row
	bf16L impl    // the level whose bf16 row runs
	dot   *dotRow // nil: the Go loop
}

// cur is the selection, made once at start-up (FLASHGO_KERNEL, or the best
// this machine has) and changed only by the test hooks. Every kernel call
// reads it; reading two words costs nothing next to a tile.
var cur, envErr = fromEnv(os.Getenv("FLASHGO_KERNEL"))

// split returns the levels of the float32 kernels and of the bfloat16
// products of a level.
func split(l impl) (f32, bf16 impl) {
	switch l {
	case implAMX, implAVX512BF16:
		return implAVX512, l
	}
	return l, l
}

func f32RowOf(l impl) *f32Row {
	if r := tableF32[l]; r != nil {
		return r
	}
	return genericF32
}

func bf16RowOf(l impl) *bf16Row {
	if r := tableBF16[l]; r != nil {
		return r
	}
	return genericBF16
}

// selectLevel returns the selection of a level: its float32 and bfloat16
// rows and the best integer kernel that goes with it.
func selectLevel(l impl) selection {
	f, b := split(l)
	return selection{level: l, f32: f32RowOf(f), bf16: bf16RowOf(b), bf16L: b, dot: defaultDot(f)}
}

// fromEnv makes the start-up selection from FLASHGO_KERNEL: a level,
// optionally followed by ",bf16=ROW" and ",int8dot=ROW" to pick the rows
// of those axes (see BF16Implementation and int8DotImplementation). What
// it cannot follow is reported in the error, and the best the machine has
// is used instead.
func fromEnv(env string) (selection, error) {
	parts := strings.Split(env, ",")
	l, err := chooseImpl(available(), parts[0])
	sel := selectLevel(l)
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.ToLower(strings.TrimSpace(v))
		var e error
		switch k {
		case "bf16":
			var b impl
			if b, e = chooseImpl(bf16Available(), v); e == nil {
				sel.bf16, sel.bf16L = bf16RowOf(b), b
			}
		case "int8dot":
			var d *dotRow
			if d, e = chooseDot(v); e == nil {
				sel.dot = d
			}
		default:
			e = fmt.Errorf("FLASHGO_KERNEL: %q is not LEVEL, bf16=ROW or int8dot=ROW", strings.TrimSpace(p))
		}
		err = errors.Join(err, e)
	}
	return sel, err
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
			env, env, needs[want], names(avail), implNames[avail[0]])
	}
	return impl(want), nil
}

// chooseDot returns the integer kernel of the name (nil for "generic").
func chooseDot(name string) (*dotRow, error) {
	if name == Generic {
		return nil, nil
	}
	for _, d := range tableDot {
		if d.name == name {
			if !d.ok {
				return nil, fmt.Errorf("FLASHGO_KERNEL: this machine cannot run int8dot=%s%s", name, d.needs)
			}
			return d, nil
		}
	}
	return nil, fmt.Errorf("FLASHGO_KERNEL: int8dot=%q is not an integer kernel; want one of %v", name, dotNames(false))
}

func init() {
	// The reason FLASHGO_KERNEL was not followed goes to the registry,
	// where a command finds it (attnbench prints it); the package writes
	// nothing to standard error.
	registry.SetEnvError(envErr)
	registry.RegisterPeak(peak)
	registry.RegisterPeakBF16(bf16Peak)
	registry.Register(registry.Kernel, registry.Axis{
		Rows:      func() []string { return allLevels },
		Lacks:     func(row string) string { return levelLacks(available(), row) },
		Available: Implementations,
		Current:   Implementation,
		Select: func(name string) func() {
			prev := cur
			cur = selectLevel(impl(slices.Index(implNames[:], name)))
			return func() { cur = prev }
		},
	})
	registry.Register(registry.BF16, registry.Axis{
		Rows:      func() []string { return allLevels },
		Lacks:     func(row string) string { return levelLacks(bf16Available(), row) },
		Available: func() []string { return names(bf16Available()) },
		Current:   BF16Implementation,
		Select: func(name string) func() {
			prev := cur
			b := impl(slices.Index(implNames[:], name))
			cur.bf16, cur.bf16L = bf16RowOf(b), b
			return func() { cur = prev }
		},
	})
	registry.Register(registry.Int8Dot, registry.Axis{
		Rows:      func() []string { return dotNames(false) },
		Lacks:     dotLacks,
		Available: func() []string { return dotNames(true) },
		Current:   int8DotImplementation,
		Select: func(name string) func() {
			prev := cur
			cur.dot, _ = chooseDot(name)
			return func() { cur = prev }
		},
	})
}

// allLevels is every level the package knows, on any machine, best
// first.
var allLevels = []string{AMX, AVX512BF16, AVX512, AVX2, NEON, Generic}

// levelLacks says why the named level is not among avail: what running it
// needs.
func levelLacks(avail []impl, name string) string {
	im := slices.Index(implNames[:], name)
	switch {
	case im < 0:
		return "the package has no level " + name
	case slices.Contains(avail, impl(im)):
		return ""
	}
	return "this machine or build cannot run it" + needs[im]
}

// dotLacks says why the named integer kernel cannot run here, or "".
func dotLacks(name string) string {
	if name == Generic {
		return ""
	}
	_, err := chooseDot(name)
	if err != nil {
		return err.Error()
	}
	return ""
}

func names(avail []impl) []string {
	var n []string
	for _, im := range avail {
		n = append(n, implNames[im])
	}
	return n
}

// bf16Available returns the levels whose bfloat16 products this machine
// can run, best first.
func bf16Available() []impl {
	var b []impl
	for _, l := range available() {
		if _, bl := split(l); !slices.Contains(b, bl) {
			b = append(b, bl)
		}
	}
	return b
}

// dotNames returns the names of the integer kernels this build has (those
// this machine can run, if runnable), best first, and "generic".
func dotNames(runnable bool) []string {
	var n []string
	for _, d := range tableDot {
		if d.ok || !runnable {
			n = append(n, d.name)
		}
	}
	return append(n, Generic)
}

// Implementation returns the name of the implementation the kernels use:
// "amx", "avx512bf16", "avx512", "avx2", "neon" or "generic".
func Implementation() string { return implNames[cur.level] }

// BF16Implementation returns the name of the implementation of the
// bfloat16 products (QKTBF16, PVBF16): "amx" or "avx512bf16" (bf16
// instructions), "avx512", "avx2" or "neon" (the float32 FMA kernels of
// that level on operands widened exactly to float32), or "generic".
func BF16Implementation() string { return implNames[cur.bf16L] }

// int8DotImplementation returns the name of the implementation of
// QKRowsQ8Dot: "avx512vnni" (VPDPBUSD on 512-bit vectors), "avxvnni" (the
// VEX form of VPDPBUSD on 256-bit vectors, at the avx2 level of a CPU with
// AVX-VNNI, or the avx512 level of one without AVX512-VNNI), "avx2"
// (VPMADDUBSW, on CPUs with neither) or "generic" (a Go loop).
func int8DotImplementation() string {
	if cur.dot == nil {
		return Generic
	}
	return cur.dot.name
}

// Implementations returns the names of the implementations this machine
// can run, best first; "generic" is always last. Built with the purego tag,
// only "generic" is available.
func Implementations() []string {
	return names(available())
}

// setImplementation switches every kernel to the named implementation and
// returns a function that restores the previous one. It is meant for tests
// and benchmarks that compare implementations, and must not be called while
// kernels are running on other goroutines. It returns an error if the name
// is unknown or the machine cannot run it.
func setImplementation(name string) (restore func(), err error) {
	return registry.Select(registry.Kernel, name)
}
