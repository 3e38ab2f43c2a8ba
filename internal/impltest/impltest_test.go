package impltest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/flashgo/flashgo/fp16"
)

// fakeTB records the first failure of a check, which ends the goroutine
// it runs on as Fatalf does.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fails reports whether check fails.
func fails(check func(tb testing.TB)) bool {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(f)
	}()
	<-done
	return f.failed != ""
}

// TestBlock checks the layout of a Block and that CheckOutside sees a
// write to any guard (before, after, in the gap between rows), and only
// there, bit for bit: a NaN other than the guard counts as a write.
func TestBlock(t *testing.T) {
	const guard = 0x7fa0beef // signalling NaN: its bits must survive
	b := NewBlock(3, 4, 6, 2, 7, math.Float32frombits(guard))
	if len(b.Buf) != 2+(2*6+4)+7 || b.Span() != 16 || len(b.S()) != 16 || &b.S()[0] != &b.Buf[2] || b.At(2, 3) != &b.Buf[2+2*6+3] {
		t.Fatalf("layout: len %d span %d", len(b.Buf), b.Span())
	}
	for i, v := range b.Buf {
		if math.Float32bits(v) != guard {
			t.Fatalf("element %d is %#x, want the guard %#x", i, math.Float32bits(v), guard)
		}
	}
	FillBlock(rand.New(rand.NewPCG(1, 2)), b)
	n := 0
	b.Each(func(p *float32) {
		if *p != *p {
			t.Fatalf("element %d of the block not filled", n)
		}
		n++
	})
	if n != 12 || fails(func(tb testing.TB) { b.CheckOutside(tb, "filled") }) {
		t.Fatalf("a filled block (%d elements) fails CheckOutside", n)
	}
	for _, idx := range []int{0, 1, 2 + 4, 2 + 5, 2 + 6 + 4, 2 + 16, len(b.Buf) - 1} {
		c := b.Clone()
		c.Buf[idx] = float32(math.NaN())
		if !fails(func(tb testing.TB) { c.CheckOutside(tb, "written") }) {
			t.Errorf("a write to element %d of the buffer is not seen", idx)
		}
		if fails(func(tb testing.TB) { b.CheckOutside(tb, "clone written") }) {
			t.Fatalf("Clone shares the buffer")
		}
	}
	h := NewBlock(2, 3, 5, 1, 1, uint16(0x7d5a))
	h.Each(func(p *uint16) { *p = 0 })
	if fails(func(tb testing.TB) { h.CheckOutside(tb, "16-bit") }) {
		t.Fatal("a filled 16-bit block fails CheckOutside")
	}
	h.Buf[1+3] = 0x7d5b
	if !fails(func(tb testing.TB) { h.CheckOutside(tb, "16-bit gap") }) {
		t.Fatal("a write to the gap of a 16-bit block is not seen")
	}
}

// TestGuarded checks Guarded, GuardedBF16 and their checks: guards on
// both sides, and a write outside the middle (or, for CheckOutside, the
// block in it) is seen.
func TestGuarded(t *testing.T) {
	buf, mid := Guarded(10)
	if len(buf) != 10+2*Pad || len(mid) != 10 || &mid[0] != &buf[Pad] {
		t.Fatalf("Guarded(10): len %d, middle %d", len(buf), len(mid))
	}
	for i := range mid {
		mid[i] = 1
	}
	if fails(func(tb testing.TB) { CheckGuards(tb, buf, "ok") }) {
		t.Fatal("CheckGuards fails an untouched buffer")
	}
	for _, idx := range []int{0, Pad - 1, Pad + 10, len(buf) - 1} {
		b := append([]float32(nil), buf...)
		b[idx] = 0
		if !fails(func(tb testing.TB) { CheckGuards(tb, b, "written") }) {
			t.Errorf("CheckGuards misses a write to element %d", idx)
		}
	}
	// Two rows of 3, 4 apart: element 3 of the middle is a gap.
	buf, mid = Guarded(7)
	for _, e := range []int{0, 1, 2, 4, 5, 6} {
		mid[e] = 1
	}
	if fails(func(tb testing.TB) { CheckOutside(tb, buf, 4, 2, 3, "ok") }) {
		t.Fatal("CheckOutside fails an untouched buffer")
	}
	mid[3] = 1
	if !fails(func(tb testing.TB) { CheckOutside(tb, buf, 4, 2, 3, "gap") }) {
		t.Fatal("CheckOutside misses a write to the gap")
	}
	hb, hm := GuardedBF16(4)
	if len(hb) != 4+2*Pad || hb[0] != GuardBF16 || hm[3] != GuardBF16 {
		t.Fatal("GuardedBF16 layout")
	}
	hm[3] = 0
	if fails(func(tb testing.TB) { CheckGuardsBF16(tb, hb, "ok") }) {
		t.Fatal("CheckGuardsBF16 fails an untouched buffer")
	}
	hb[len(hb)-Pad] = fp16.BFloat16(0)
	if !fails(func(tb testing.TB) { CheckGuardsBF16(tb, hb, "written") }) {
		t.Fatal("CheckGuardsBF16 misses a write after the middle")
	}
}

// TestSameBits checks the bitwise comparisons: NaN equals itself, +0 and
// -0 differ, and so do slices of different lengths.
func TestSameBits(t *testing.T) {
	nan := float32(math.NaN())
	x := []float32{1, nan, 0}
	for _, c := range []struct {
		y    []float32
		same bool
	}{
		{[]float32{1, nan, 0}, true},
		{[]float32{1, nan, float32(math.Copysign(0, -1))}, false},
		{[]float32{1, math.Float32frombits(0x7fc00001), 0}, false},
		{[]float32{1, nan}, false},
	} {
		if SameBits(x, c.y) != c.same {
			t.Errorf("SameBits(%v, %v) = %v", x, c.y, !c.same)
		}
		if fails(func(tb testing.TB) { RequireSameBits(tb, c.y, x, "case %v", c.y) }) == c.same {
			t.Errorf("RequireSameBits(%v, %v) fails: %v", c.y, x, c.same)
		}
	}
}

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
		if got := ULPs(c.a, c.b); got != c.want {
			t.Errorf("ULPs(%v, %v) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestULP pins the size of an ulp.
func TestULP(t *testing.T) {
	for _, c := range []struct {
		x    float32
		want float64
	}{
		{1, 0x1p-23},
		{-1, 0x1p-23},
		{1.5, 0x1p-23},
		{2, 0x1p-22},
		{0, math.SmallestNonzeroFloat32},
		{math.SmallestNonzeroFloat32, math.SmallestNonzeroFloat32},
		{0x1p-126, 0x1p-149},
		{math.MaxFloat32, math.Inf(1)},
	} {
		if got := ULP(c.x); got != c.want {
			t.Errorf("ULP(%v) = %v, want %v", c.x, got, c.want)
		}
	}
}

// TestRandom checks that the random helpers draw the same normals.
func TestRandom(t *testing.T) {
	x := RandnF64(rand.New(rand.NewPCG(3, 4)), 100)
	y := Randn(rand.New(rand.NewPCG(3, 4)), 100)
	for i := range x {
		if float32(x[i]) != y[i] {
			t.Fatalf("element %d: %v and %v", i, x[i], y[i])
		}
	}
}

func BenchmarkCheckOutside(b *testing.B) {
	blk := NewBlock(64, 64, 70, 16, 16, float32(math.NaN()))
	FillBlock(rand.New(rand.NewPCG(1, 1)), blk)
	b.ReportAllocs()
	for b.Loop() {
		blk.CheckOutside(b, "bench")
	}
}
