// Package impltest is the test harness of the module's implementations,
// after crypto/internal/cryptotest: Run runs a test (or a benchmark) once
// per row of an axis of the registry (internal/impl) — every kernel level,
// bfloat16 product or integer dot kernel the package knows —, selected,
// and reports each row this machine or build cannot run as a skip that
// names what it lacks; Select does the same for one row. kernel's and
// attention's tests use it, so every implementation is tested the same way
// in both (attnbench's tests select rows through internal/impl directly).
// It also holds the helpers those tests share: guarded buffers and blocks
// (Block), bitwise comparison, the ULP distance and size, and random
// inputs.
package impltest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/internal/impl"
)

// A Runner is *testing.T or *testing.B: what Run runs subtests or
// sub-benchmarks of.
type Runner[R any] interface {
	testing.TB
	Run(name string, f func(R)) bool
}

// Run runs f as a subtest (or sub-benchmark) once per row of the axis
// (impl.Kernel, impl.BF16, impl.Int8Dot), under that row; rows this
// machine cannot run are skipped with what they lack, and so are the
// kernel levels that the tier leaves out (see Policy and Levels). The
// selection is restored after each subtest. Subtests must not run in
// parallel with other tests that select implementations.
func Run[R Runner[R]](t R, axis string, f func(R)) {
	t.Helper()
	rows := impl.Rows(axis)
	if len(rows) == 0 {
		t.Fatalf("impltest: no axis %q is registered (import the package that registers it)", axis)
	}
	RunRows(t, axis, rows, f)
}

// RunRows is Run for the named rows of the axis only (those that have the
// kernels a test calls directly).
func RunRows[R Runner[R]](t R, axis string, rows []string, f func(R)) {
	t.Helper()
	_, bench := any(t).(*testing.B)
	for _, row := range rows {
		t.Run(row, func(t R) {
			if why := leftOut(axis, row, bench); why != "" {
				t.Skip(why)
			}
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

// Filled returns n elements, each g: a buffer of guards (or sentinels)
// that a test lays its operands out in.
func Filled[T any](n int, g T) []T {
	buf := make([]T, n)
	for i := range buf {
		buf[i] = g
	}
	return buf
}

// Elem is the type of the elements of a Block: float32, or a 16-bit type
// (binary16, bfloat16, their bits) compared by its bits.
type Elem interface{ float32 | ~uint16 }

// A Block is a Rows×Cols block of elements, rows LD elements apart, whose
// element (0, 0) is Buf[Off], in a buffer every other element of which
// (the guards before and after it, the gaps between its rows) holds Guard,
// a NaN (or a sentinel) no kernel produces: a write outside the block
// changes a guard, which CheckOutside sees, and a read of one brings a NaN
// into a result.
type Block[T Elem] struct {
	Buf                 []T
	Off, LD, Rows, Cols int
	Guard               T
}

// NewBlock returns a block of guards only, with pre guard elements before
// it and post after it.
func NewBlock[T Elem](rows, cols, ld, pre, post int, guard T) *Block[T] {
	b := &Block[T]{Off: pre, LD: ld, Rows: rows, Cols: cols, Guard: guard}
	b.Buf = Filled(pre+b.Span()+post, guard)
	return b
}

// Span is the number of elements from the first of the block to its last.
func (b *Block[T]) Span() int { return max(0, (b.Rows-1)*b.LD+b.Cols) }

// S is the slice a kernel is passed: from the first element of the block
// to its last.
func (b *Block[T]) S() []T { return b.Buf[b.Off : b.Off+b.Span()] }

// At returns element (i, j) of the block.
func (b *Block[T]) At(i, j int) *T { return &b.Buf[b.Off+i*b.LD+j] }

// Each calls f on every element of the block, row by row.
func (b *Block[T]) Each(f func(*T)) {
	for i := range b.Rows {
		for j := range b.Cols {
			f(b.At(i, j))
		}
	}
}

// Clone returns a copy of the block and its buffer.
func (b *Block[T]) Clone() *Block[T] {
	c := *b
	c.Buf = append([]T(nil), b.Buf...)
	return &c
}

// CheckOutside fails tb unless every element of the buffer outside the
// block still holds the guard bits.
func (b *Block[T]) CheckOutside(tb testing.TB, what string) {
	tb.Helper()
	g := bitsOf(b.Guard)
	for idx, v := range b.Buf {
		k := idx - b.Off
		if k >= 0 && k < b.Span() && k%b.LD < b.Cols {
			continue
		}
		if bitsOf(v) != g {
			tb.Fatalf("%s: element %d outside the block (offset %d, ld %d, %d×%d) was written: %#x (%v)",
				what, k, b.Off, b.LD, b.Rows, b.Cols, bitsOf(v), v)
		}
	}
}

// bitsOf returns the bits of x.
func bitsOf[T Elem](x T) uint32 {
	if f, ok := any(x).(float32); ok {
		return math.Float32bits(f)
	}
	return uint32(x)
}

// FillBlock sets the elements of b to standard normal values from rng, row
// by row.
func FillBlock(rng *rand.Rand, b *Block[float32]) {
	b.Each(func(p *float32) { *p = float32(rng.NormFloat64()) })
}

// Pad is the number of guard elements on each side of the buffers of
// Guarded and GuardedBF16.
const Pad = 5

// guardBits is the float32 NaN in the guards of Guarded (the quiet NaN
// float32(math.NaN()) is).
const guardBits = 0x7fc00000

// GuardBF16 is the bfloat16 NaN in the guards of GuardedBF16.
const GuardBF16 fp16.BFloat16 = 0x7fc0

// Guarded returns a buffer of n elements framed by Pad NaN guards on each
// side, and the view of its middle, itself filled with NaN: a kernel that
// reads past a view gets NaN into its results, one that writes past it is
// caught by CheckGuards (a one-row Block).
func Guarded(n int) (buf, mid []float32) {
	b := NewBlock(1, n, n, Pad, Pad, math.Float32frombits(guardBits))
	return b.Buf, b.S()
}

// GuardedBF16 is Guarded for bfloat16 buffers.
func GuardedBF16(n int) (buf, mid []fp16.BFloat16) {
	b := NewBlock(1, n, n, Pad, Pad, GuardBF16)
	return b.Buf, b.S()
}

// middle is the Block of a buffer from Guarded or GuardedBF16: rows rows
// of n elements, ld apart, from Pad on.
func middle[T Elem](buf []T, ld, rows, n int, guard T) *Block[T] {
	return &Block[T]{Buf: buf, Off: Pad, LD: ld, Rows: rows, Cols: n, Guard: guard}
}

// CheckGuards fails tb if a write landed outside the middle of a buffer
// from Guarded.
func CheckGuards(tb testing.TB, buf []float32, what string) {
	tb.Helper()
	n := len(buf) - 2*Pad
	middle(buf, n, 1, n, math.Float32frombits(guardBits)).CheckOutside(tb, what)
}

// CheckGuardsBF16 is CheckGuards for a buffer from GuardedBF16.
func CheckGuardsBF16(tb testing.TB, buf []fp16.BFloat16, what string) {
	tb.Helper()
	n := len(buf) - 2*Pad
	middle(buf, n, 1, n, GuardBF16).CheckOutside(tb, what)
}

// CheckOutside fails tb if an element of buf, a buffer from Guarded,
// outside the block (rows rows of n elements, ld apart, from Pad on) no
// longer holds the guard NaN.
func CheckOutside(tb testing.TB, buf []float32, ld, rows, n int, what string) {
	tb.Helper()
	middle(buf, ld, rows, n, math.Float32frombits(guardBits)).CheckOutside(tb, what)
}

// SameBits reports whether x and y hold the same float32 bit patterns (so
// NaN guards compare equal to themselves).
func SameBits(x, y []float32) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
			return false
		}
	}
	return true
}

// RequireSameBits fails tb unless got and want hold the same float32 bit
// patterns; format and args say what is compared.
func RequireSameBits(tb testing.TB, got, want []float32, format string, args ...any) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("%s: %d elements, want %d", fmt.Sprintf(format, args...), len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			tb.Fatalf("%s: element %d (of %d) is %#08x (%v), want %#08x (%v) bit for bit", fmt.Sprintf(format, args...),
				i, len(want), math.Float32bits(got[i]), got[i], math.Float32bits(want[i]), want[i])
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

// ULP returns the spacing of float32 values at |x|: the gap from |x|
// (rounded to float32) to the next float32 away from zero, at least the
// smallest subnormal.
func ULP(x float32) float64 {
	a := math.Abs(float64(x))
	if a < math.SmallestNonzeroFloat32 {
		return math.SmallestNonzeroFloat32
	}
	b := math.Float32bits(float32(a))
	return float64(math.Float32frombits(b+1)) - float64(math.Float32frombits(b))
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

// RandnF64 returns n standard normal float64 values from rng (the draws
// Randn rounds to float32).
func RandnF64(rng *rand.Rand, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	return x
}
