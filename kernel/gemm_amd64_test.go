//go:build amd64 && !purego

package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/internal/impltest"
	"github.com/flashgo/flashgo/internal/tier"
	"github.com/flashgo/flashgo/kernel/internal/x86"
)

// The assembly QKT and PV kernels are checked against qktGeneric and
// pvGeneric on blocks that sit at odd offsets inside NaN-filled buffers,
// with leading dimensions longer than the rows (NaN in the gaps) and NaN
// guards on both sides: an element read from outside its block makes a NaN
// reach the result, and one written outside its block replaces a NaN. (A
// read that only fills a vector lane no result uses stays invisible here;
// TestGuardPages, in guard_linux_test.go because it needs Linux, turns
// such a read into a fault.) QKT's score block starts as NaN, so a
// kernel that read s before writing it would fail too.

type (
	gemmQKTFunc func(s []float32, ldS int, q []float32, ldQ int, kt []float32, ldK int, rows, cols, d int, scale float32)
	gemmPVFunc  func(o []float32, ldO int, p []float32, ldP int, v []float32, ldV int, rows, cols, d int)
)

type gemmVariant struct {
	name string
	qkt  gemmQKTFunc
	pv   gemmPVFunc
}

var gemmVariants = []gemmVariant{
	{
		name: AVX512,
		qkt: func(s []float32, ldS int, q []float32, ldQ int, kt []float32, ldK int, rows, cols, d int, scale float32) {
			x86.QktAVX512(&s[0], ldS, &q[0], ldQ, &kt[0], ldK, rows, cols, d, scale)
		},
		pv: func(o []float32, ldO int, p []float32, ldP int, v []float32, ldV int, rows, cols, d int) {
			x86.PvAVX512(&o[0], ldO, &p[0], ldP, &v[0], ldV, rows, cols, d)
		},
	},
	{
		name: AVX2,
		qkt: func(s []float32, ldS int, q []float32, ldQ int, kt []float32, ldK int, rows, cols, d int, scale float32) {
			x86.QktAVX2(&s[0], ldS, &q[0], ldQ, &kt[0], ldK, rows, cols, d, scale)
		},
		pv: func(o []float32, ldO int, p []float32, ldP int, v []float32, ldV int, rows, cols, d int) {
			x86.PvAVX2(&o[0], ldO, &p[0], ldP, &v[0], ldV, rows, cols, d)
		},
	},
}

func gemmVariantNamed(t testing.TB, name string) gemmVariant {
	t.Helper()
	for _, v := range gemmVariants {
		if v.name == name {
			setImpl(t, name)
			return v
		}
	}
	t.Fatalf("no variant %s", name)
	return gemmVariant{}
}

const gemmGuard = 16 // NaN elements before every block (and blockTrail after)

// gemmMat is a block at an odd offset inside a NaN-guarded buffer.
type gemmMat = guardedBlock

// newGemmMat lays out a block at a random offset (1..3) with a random gap
// (0..3) after each row; with fill the block holds unit normals, otherwise
// NaN like everything around it.
func newGemmMat(rng *rand.Rand, rows, cols int, fill bool) *gemmMat {
	ld := cols + rng.IntN(4)
	m := impltest.NewBlock(rows, cols, ld, gemmGuard+1+rng.IntN(3), blockTrail, float32(math.NaN()))
	if fill {
		impltest.FillBlock(rng, m)
	}
	return m
}

// absProduct returns the rows×cols matrix of Σ_k |a[i,k]|·|b[k,j]|, the
// sum of the absolute values of the terms of (a·b)[i,j].
func absProduct(a, b *gemmMat) []float64 {
	rows, n, cols := a.Rows, a.Cols, b.Cols
	out := make([]float64, rows*cols)
	brow := make([]float64, cols)
	for k := range n {
		for j := range cols {
			brow[j] = math.Abs(float64(*b.At(k, j)))
		}
		for i := range rows {
			x := math.Abs(float64(*a.At(i, k)))
			o := out[i*cols : (i+1)*cols]
			for j, y := range brow {
				o[j] += x * y
			}
		}
	}
	return out
}

// gemmCheck compares got with want where each element's tolerance is
// 4·(n+1)·2⁻²⁴ times absSum, the sum of the absolute values of its terms, n
// being the length of the sum.
func gemmCheck(t testing.TB, what string, got, want *gemmMat, n int, absSum []float64) {
	t.Helper()
	for i := range got.Rows {
		for j := range got.Cols {
			g, w := *got.At(i, j), *want.At(i, j)
			tol := 4 * float64(n+1) * 0x1p-24 * absSum[i*got.Cols+j]
			if math.IsNaN(float64(g)) || math.Abs(float64(g)-float64(w)) > tol {
				t.Fatalf("%s: [%d,%d] = %v, want %v (±%.3g)", what, i, j, g, w, tol)
			}
		}
	}
	got.CheckOutside(t, what)
}

// checkQKT runs one QKT case on every variant in vs.
func checkQKT(t testing.TB, rng *rand.Rand, vs []gemmVariant, rows, cols, d int) {
	t.Helper()
	q := newGemmMat(rng, rows, d, true)
	kt := newGemmMat(rng, d, cols, true)
	s := newGemmMat(rng, rows, cols, false) // NaN: the kernel must not read s before writing it
	scale := float32(1 / math.Sqrt(float64(d)))
	if rng.IntN(2) == 0 {
		scale = float32(rng.Float64()*4 - 2)
	}
	want := s.Clone()
	want.Each(func(x *float32) { *x = 0 })
	qktGeneric(want.S(), want.LD, q.S(), q.LD, kt.S(), kt.LD, rows, cols, d, scale)
	absSum := absProduct(q, kt)
	for i := range absSum {
		absSum[i] *= math.Abs(float64(scale))
	}
	for _, v := range vs {
		got := s.Clone()
		v.qkt(got.S(), got.LD, q.S(), q.LD, kt.S(), kt.LD, rows, cols, d, scale)
		what := fmt.Sprintf("qkt %s rows=%d cols=%d d=%d ldS=%d ldQ=%d ldK=%d", v.name, rows, cols, d, s.LD, q.LD, kt.LD)
		gemmCheck(t, what, got, want, d, absSum)
		q.CheckOutside(t, what+" (q)")
		kt.CheckOutside(t, what+" (kt)")
	}
}

// checkPV runs one PV case on every variant in vs.
func checkPV(t testing.TB, rng *rand.Rand, vs []gemmVariant, rows, cols, d int) {
	t.Helper()
	p := newGemmMat(rng, rows, cols, true)
	v := newGemmMat(rng, cols, d, true)
	o := newGemmMat(rng, rows, d, true)
	want := o.Clone()
	pvGeneric(want.S(), want.LD, p.S(), p.LD, v.S(), v.LD, rows, cols, d)
	absSum := absProduct(p, v)
	for i := range rows {
		for k := range d {
			absSum[i*d+k] += math.Abs(float64(*o.At(i, k)))
		}
	}
	for _, vr := range vs {
		got := o.Clone()
		vr.pv(got.S(), got.LD, p.S(), p.LD, v.S(), v.LD, rows, cols, d)
		what := fmt.Sprintf("pv %s rows=%d cols=%d d=%d ldO=%d ldP=%d ldV=%d", vr.name, rows, cols, d, o.LD, p.LD, v.LD)
		gemmCheck(t, what, got, want, cols, absSum)
		p.CheckOutside(t, what+" (p)")
		v.CheckOutside(t, what+" (v)")
	}
}

// gemmEach runs f once per assembly variant, as testImpls does, skipping
// those this machine cannot run.
func gemmEach(t *testing.T, f func(t *testing.T, v gemmVariant)) {
	var names []string
	for _, v := range gemmVariants {
		names = append(names, v.name)
	}
	testImpls(t, names, func(t *testing.T) { f(t, gemmVariantNamed(t, Implementation())) })
}

var (
	gemmTestRows = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17, 64, 65}
	gemmTestD    = []int{1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 256}
)

func gemmTestCols() []int {
	var cols []int
	for c := 1; c <= 65; c++ {
		cols = append(cols, c)
	}
	return append(cols, 127, 128, 129)
}

// gemmGrid calls f on the test grid: every row count with every column
// count for every d, except that the two largest row counts, which only
// repeat the row loop of the smaller ones more times, take the column
// counts around multiples of 16; then on random sizes. In the fast tier the
// columns are thinned for d > 33 too.
func gemmGrid(t *testing.T, f func(rng *rand.Rand, rows, cols, d int)) {
	rng := rand.New(rand.NewPCG(1, 2))
	edge := func(cols int) bool { return cols%16 <= 1 || cols%16 == 15 }
	for _, d := range gemmTestD {
		for _, rows := range gemmTestRows {
			for _, cols := range gemmTestCols() {
				if (rows >= 64 || !tier.Long() && d > 33) && !edge(cols) {
					continue
				}
				f(rng, rows, cols, d)
			}
		}
		if t.Failed() {
			return
		}
	}
	for range 200 {
		f(rng, 1+rng.IntN(100), 1+rng.IntN(200), 1+rng.IntN(300))
	}
}

func TestQKTAsm(t *testing.T) {
	gemmEach(t, func(t *testing.T, v gemmVariant) {
		gemmGrid(t, func(rng *rand.Rand, rows, cols, d int) { checkQKT(t, rng, []gemmVariant{v}, rows, cols, d) })
	})
}

func TestPVAsm(t *testing.T) {
	gemmEach(t, func(t *testing.T, v gemmVariant) {
		gemmGrid(t, func(rng *rand.Rand, rows, cols, d int) { checkPV(t, rng, []gemmVariant{v}, rows, cols, d) })
	})
}

// TestQKTAsmChunks checks that the assembly sums d in chunks of qktChunk,
// each into a fresh partial added to the score, as qktGeneric does. Every
// product is exact and so is every partial, whatever its order: chunk 0 sums
// to ±2^24, and each odd chunk holds two ones, one in each half, whose sum 2
// is added exactly as a whole partial, whereas added one at a time (no
// chunking, or chunks of 16) each 1 is lost to round-to-even at 2^24.
func TestQKTAsmChunks(t *testing.T) {
	gemmEach(t, func(t *testing.T, v gemmVariant) {
		vs := []gemmVariant{v}
		for _, d := range []int{32, 33, 48, 49, 63, 64, 65, 96, 100, 128, 256} {
			rows, cols := 7, 37
			q := make([]float32, rows*d)
			kt := make([]float32, d*cols)
			for i := range rows {
				for k := range d {
					q[i*d+k] = float32(1 - 2*(i%2))
				}
			}
			for j := range cols {
				for k := range 32 {
					kt[k*cols+j] = 0x1p19
				}
				for c := 32; c < d; c += 64 {
					for _, k := range []int{c + j%16, c + 16 + (j+5)%16} {
						if k < d {
							kt[k*cols+j] = 1
						}
					}
				}
			}
			want := make([]float32, rows*cols)
			qktGeneric(want, cols, q, d, kt, cols, rows, cols, d, 0.25)
			for _, v := range vs {
				got := make([]float32, rows*cols)
				v.qkt(got, cols, q, d, kt, cols, rows, cols, d, 0.25)
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("qkt %s d=%d: element %d = %v, want exactly %v", v.name, d, i, got[i], want[i])
					}
				}
			}
		}
	})
}

func TestFMAPeakRuns(t *testing.T) {
	if hasAVX512 {
		x86.FmaPeakAVX512(0)
		x86.FmaPeakAVX512(1)
		x86.FmaPeakAVX512(1000)
	}
	if hasAVX2 {
		x86.FmaPeakAVX2(0)
		x86.FmaPeakAVX2(1)
		x86.FmaPeakAVX2(1000)
	}
}

func fuzzGemmSizes(rows, cols, d uint16) (int, int, int) {
	return 1 + int(rows)%80, 1 + int(cols)%160, 1 + int(d)%300
}

func gemmFuzzSeeds(f *testing.F) {
	for _, c := range [][3]uint16{{0, 0, 0}, {63, 63, 127}, {64, 64, 128}, {5, 16, 31}, {6, 17, 32}, {12, 48, 64}, {1, 129, 257}} {
		f.Add(c[0], c[1], c[2], uint64(c[0])*31+uint64(c[2]))
	}
}

func FuzzQKTAVX512(f *testing.F) {
	gemmFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, r, c, d uint16, seed uint64) {
		v := gemmVariantNamed(t, "avx512")
		rows, cols, dd := fuzzGemmSizes(r, c, d)
		checkQKT(t, rand.New(rand.NewPCG(seed, 7)), []gemmVariant{v}, rows, cols, dd)
	})
}

func FuzzPVAVX512(f *testing.F) {
	gemmFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, r, c, d uint16, seed uint64) {
		v := gemmVariantNamed(t, "avx512")
		rows, cols, dd := fuzzGemmSizes(r, c, d)
		checkPV(t, rand.New(rand.NewPCG(seed, 7)), []gemmVariant{v}, rows, cols, dd)
	})
}

func FuzzQKTAVX2(f *testing.F) {
	gemmFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, r, c, d uint16, seed uint64) {
		v := gemmVariantNamed(t, "avx2")
		rows, cols, dd := fuzzGemmSizes(r, c, d)
		checkQKT(t, rand.New(rand.NewPCG(seed, 7)), []gemmVariant{v}, rows, cols, dd)
	})
}

func FuzzPVAVX2(f *testing.F) {
	gemmFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, r, c, d uint16, seed uint64) {
		v := gemmVariantNamed(t, "avx2")
		rows, cols, dd := fuzzGemmSizes(r, c, d)
		checkPV(t, rand.New(rand.NewPCG(seed, 7)), []gemmVariant{v}, rows, cols, dd)
	})
}
