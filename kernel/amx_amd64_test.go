//go:build amd64 && !purego && linux

package kernel

// Tests of the AMX kernel that the implementation-generic tests of
// bf16_test.go do not make: every partial-tile shape, blocks against
// inaccessible pages, the tile configuration as the CPU reads it, no tile
// state left after a call, and many goroutines at once. They skip, naming
// what is missing, where AMX cannot run (every CI machine so far).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel/internal/x86"
)

// TestAMXDetection checks what the detection says against CPUID: without
// AMX the error must say so, and with it only XCR0 or the OS can refuse.
func TestAMXDetection(t *testing.T) {
	t.Logf("AMX: %v", amxErr)
	if amxErr == nil {
		require.Contains(t, Implementations(), AMX)
		require.Equal(t, AMX, Implementations()[0])
		return
	}
	require.NotContains(t, Implementations(), AMX)
}

// bf16Rand fills the elements of a block (rows × width, rows ld apart) of
// a NaN-filled buffer with random bfloat16s.
func bf16Rand(rng *rand.Rand, x []fp16.BFloat16, ld, rows, width int) {
	for i := range rows {
		for j := range width {
			x[i*ld+j] = randBF16(rng)
		}
	}
}

// amxCase is one product on operands framed by NaN guards.
type amxCase struct {
	rows, cols, d int // QKT: scores rows × cols, reduction d; PV: output rows × d, reduction cols
	gap           int // extra elements in every leading dimension
}

// checkAMXBlock fails unless the block of c (rows × width, rows ld apart, in
// the middle of buf, from guarded) is near want (float64 sums, with the
// magnitudes of their terms in mag) and every element of buf outside it is
// still NaN. It returns how many elements equal the generic twin's, gen,
// bit for bit.
func checkAMXBlock(t *testing.T, what string, buf, c []float32, ld, rows, width int, want, mag []float64, gen []float32, n int) (same int) {
	t.Helper()
	checkOutside(t, buf, ld, rows, width, what)
	for i := range rows {
		for j := range width {
			x, k := c[i*ld+j], i*width+j
			if !near(x, want[k], mag[k], n) {
				t.Fatalf("%s: [%d,%d] = %v, want %v (generic %v)", what, i, j, x, want[k], gen[k])
			}
			if math.Float32bits(x) == math.Float32bits(gen[k]) {
				same++
			}
		}
	}
	return same
}

func testAMXQKT(t *testing.T, rng *rand.Rand, c amxCase) (same, total int) {
	rows, cols, d := c.rows, c.cols, c.d
	ldS, ldQ, ldK := cols+c.gap, d+c.gap, 2*cols+c.gap
	sBuf, s := guarded((rows-1)*ldS + cols)
	_, q := guardedBF16((rows-1)*ldQ + d)
	_, kp := guardedBF16((d/2-1)*ldK + 2*cols)
	bf16Rand(rng, q, ldQ, rows, d)
	bf16Rand(rng, kp, ldK, d/2, 2*cols)
	const scale = 0.37
	want, mag := make([]float64, rows*cols), make([]float64, rows*cols)
	for i := range rows {
		for j := range cols {
			for k := range d {
				p := float64(q[i*ldQ+k].Float32()) * float64(kp[(k/2)*ldK+2*j+k%2].Float32())
				want[i*cols+j] += scale * p
				mag[i*cols+j] += scale * math.Abs(p)
			}
		}
	}
	gen := make([]float32, rows*cols)
	qktBF16Generic(gen, cols, q, ldQ, kp, ldK, rows, cols, d, scale)
	qktBF16AMX(s, ldS, q, ldQ, kp, ldK, rows, cols, d, scale)
	what := fmt.Sprintf("QKT rows %d cols %d d %d gap %d", rows, cols, d, c.gap)
	return checkAMXBlock(t, what, sBuf, s, ldS, rows, cols, want, mag, gen, d), rows * cols
}

func testAMXPV(t *testing.T, rng *rand.Rand, c amxCase) (same, total int) {
	rows, cols, d := c.rows, c.cols, c.d
	ldO, ldP, ldV := d+c.gap, cols+c.gap, 2*d+c.gap
	oBuf, o := guarded((rows-1)*ldO + d)
	_, p := guardedBF16((rows-1)*ldP + cols)
	_, vp := guardedBF16((cols/2-1)*ldV + 2*d)
	bf16Rand(rng, p, ldP, rows, cols)
	bf16Rand(rng, vp, ldV, cols/2, 2*d)
	want, mag := make([]float64, rows*d), make([]float64, rows*d)
	gen := make([]float32, rows*d)
	for i := range rows {
		for c := range d {
			x := float32(rng.NormFloat64())
			o[i*ldO+c], gen[i*d+c] = x, x
			want[i*d+c], mag[i*d+c] = float64(x), math.Abs(float64(x))
			for j := range cols {
				y := float64(p[i*ldP+j].Float32()) * float64(vp[(j/2)*ldV+2*c+j%2].Float32())
				want[i*d+c] += y
				mag[i*d+c] += math.Abs(y)
			}
		}
	}
	pvBF16Generic(gen, d, p, ldP, vp, ldV, rows, cols, d)
	pvBF16AMX(o, ldO, p, ldP, vp, ldV, rows, cols, d)
	what := fmt.Sprintf("PV rows %d cols %d d %d gap %d", rows, cols, d, c.gap)
	return checkAMXBlock(t, what, oBuf, o, ldO, rows, d, want, mag, gen, cols+1), rows * d
}

// TestAMXEdgeShapes runs every tile shape the kernel can meet: rows 1–40
// (0–2 whole row tiles and every partial one) by 1–70 columns (0–4 whole
// column tiles and every partial one), each with a reduction length that
// walks the even numbers 2–130 (0–4 whole k steps and every partial one)
// and with 64, against float64 sums and the generic twin.
func TestAMXEdgeShapes(t *testing.T) {
	setImpl(t, AMX)
	rng := rand.New(rand.NewPCG(11, 11))
	var qSame, qTotal, pSame, pTotal int
	for rows := 1; rows <= 40; rows++ {
		for cols := 1; cols <= 70; cols++ {
			walk := 2 + 2*((rows*7+cols*3)%65)
			for _, k := range []int{walk, 64} {
				gap := (rows + cols) % 2 * 3
				s, n := testAMXQKT(t, rng, amxCase{rows: rows, cols: cols, d: k, gap: gap})
				qSame, qTotal = qSame+s, qTotal+n
				// PV: cols is the output's d, k (even) the keys.
				s, n = testAMXPV(t, rng, amxCase{rows: rows, cols: k, d: cols, gap: gap})
				pSame, pTotal = pSame+s, pTotal+n
			}
		}
	}
	t.Logf("bitwise equal to the generic twin: QKT %d of %d, PV %d of %d", qSame, qTotal, pSame, pTotal)
}

// TestAMXGuardPages runs the kernel on blocks whose first or last element
// touches an inaccessible page, with tight and loose leading dimensions: a
// tile row read or written one element too far faults.
func TestAMXGuardPages(t *testing.T) {
	setImpl(t, AMX)
	var arenas [6]*guardedArena
	for i := range arenas {
		arenas[i] = newGuardedArena(t, 1<<18)
	}
	for _, atEnd := range []bool{false, true} {
		for _, gap := range []int{0, 3} {
			for _, rows := range []int{1, 2, 15, 16, 17, 31, 32, 33} {
				for _, cols := range []int{1, 2, 15, 16, 17, 31, 32, 33, 47, 64, 65} {
					for _, d := range []int{2, 4, 30, 32, 34, 64, 66, 128, 130} {
						ldS, ldQ, ldK := cols+gap, d+gap, 2*cols+gap
						s := arenas[0].block((rows-1)*ldS+cols, atEnd)
						q := arenas[1].bf16Block((rows-1)*ldQ+d, atEnd)
						kp := arenas[2].bf16Block((d/2-1)*ldK+2*cols, atEnd)
						qktBF16AMX(s, ldS, q, ldQ, kp, ldK, rows, cols, d, 1)
						require.Equal(t, float32(d)/4, s[(rows-1)*ldS+cols-1])
						// PV: d output columns (here cols), reduction d keys.
						ldO, ldP, ldV := cols+gap, d+gap, 2*cols+gap
						o := arenas[3].block((rows-1)*ldO+cols, atEnd)
						p := arenas[4].bf16Block((rows-1)*ldP+d, atEnd)
						vp := arenas[5].bf16Block((d/2-1)*ldV+2*cols, atEnd)
						pvBF16AMX(o, ldO, p, ldP, vp, ldV, rows, d, cols)
						require.Equal(t, 0.5+float32(d)/4, o[(rows-1)*ldO+cols-1])
					}
				}
			}
		}
	}
}

// TestAMXConfig loads configurations built by amxConfig and reads back
// what the CPU holds (STTILECFG): the layout is the CPU's, and nothing is
// left configured once the tiles are released.
func TestAMXConfig(t *testing.T) {
	setImpl(t, AMX)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var zero, out [64]byte
	for _, sh := range [][3]int{{16, 16, 16}, {1, 1, 1}, {5, 16, 3}, {16, 7, 16}} {
		cfg := amxConfig(sh[0], sh[1], sh[2])
		x86.AmxConfigRoundTrip(&cfg, &out)
		require.Equal(t, cfg, out, "configuration %v as the CPU holds it", sh)
		x86.AmxStoreConfig(&out)
		require.Equal(t, zero, out, "configuration after TILERELEASE")
	}
}

// TestAMXReleasesTiles checks that a kernel call leaves the thread's tiles
// unconfigured (their initial state: STTILECFG stores zeros), so no tile
// state outlives a call or costs the OS a larger context switch.
func TestAMXReleasesTiles(t *testing.T) {
	setImpl(t, AMX)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	rng := rand.New(rand.NewPCG(12, 12))
	var zero, out [64]byte
	for _, c := range []amxCase{{rows: 33, cols: 64, d: 64}, {rows: 7, cols: 34, d: 6}} {
		testAMXQKT(t, rng, c)
		x86.AmxStoreConfig(&out)
		require.Equal(t, zero, out, "after QKT %+v", c)
		testAMXPV(t, rng, c)
		x86.AmxStoreConfig(&out)
		require.Equal(t, zero, out, "after PV %+v", c)
	}
}

// TestAMXPeakRuns runs the AMX peak loop (bf16Peak's on this machine) and
// checks that it leaves the tiles released.
func TestAMXPeakRuns(t *testing.T) {
	setImpl(t, AMX)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var zero, out [64]byte
	for _, n := range []int{0, 1, 1000} {
		x86.Tdpbf16psPeakAMX(n)
		x86.AmxStoreConfig(&out)
		require.Equal(t, zero, out, "configuration after %d iterations", n)
	}
	_, _, isa := bf16PeakLoop()
	require.Equal(t, AMX, isa, "the bf16 peak loop where AMX can run")
}

// TestAMXConcurrent runs products from many goroutines at once (more than
// there are threads, so goroutines migrate and share threads between
// calls): each result must equal, bit for bit, the same product computed
// alone.
func TestAMXConcurrent(t *testing.T) {
	setImpl(t, AMX)
	type job struct {
		rows, cols, d int
		q, kp, p, vp  []fp16.BFloat16
		o0            []float32
		s, o          []float32 // computed alone
	}
	rng := rand.New(rand.NewPCG(13, 13))
	jobs := make([]*job, 64)
	for i := range jobs {
		j := &job{rows: 1 + rng.IntN(80), cols: 2 + 2*rng.IntN(40), d: 2 + 2*rng.IntN(70)}
		mk := func(n int) []fp16.BFloat16 {
			x := make([]fp16.BFloat16, n)
			for k := range x {
				x[k] = randBF16(rng)
			}
			return x
		}
		j.q, j.kp = mk(j.rows*j.d), mk(j.d*j.cols)
		j.p, j.vp = mk(j.rows*j.cols), mk(j.cols*j.d)
		j.o0 = make([]float32, j.rows*j.d)
		fill(rng, j.o0)
		j.s = make([]float32, j.rows*j.cols)
		qktBF16AMX(j.s, j.cols, j.q, j.d, j.kp, 2*j.cols, j.rows, j.cols, j.d, 0.5)
		j.o = append([]float32(nil), j.o0...)
		pvBF16AMX(j.o, j.d, j.p, j.cols, j.vp, 2*j.d, j.rows, j.cols, j.d)
		jobs[i] = j
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4*runtime.GOMAXPROCS(0))
	for g := range cap(errs) {
		wg.Go(func() {
			for it := range 40 {
				j := jobs[(g*7+it)%len(jobs)]
				s := make([]float32, len(j.s))
				qktBF16AMX(s, j.cols, j.q, j.d, j.kp, 2*j.cols, j.rows, j.cols, j.d, 0.5)
				o := append([]float32(nil), j.o0...)
				runtime.Gosched()
				pvBF16AMX(o, j.d, j.p, j.cols, j.vp, 2*j.d, j.rows, j.cols, j.d)
				for k := range s {
					if math.Float32bits(s[k]) != math.Float32bits(j.s[k]) {
						errs <- fmt.Errorf("goroutine %d: QKT %d×%d×%d element %d = %v, alone %v", g, j.rows, j.cols, j.d, k, s[k], j.s[k])
						return
					}
				}
				for k := range o {
					if math.Float32bits(o[k]) != math.Float32bits(j.o[k]) {
						errs <- fmt.Errorf("goroutine %d: PV %d×%d×%d element %d = %v, alone %v", g, j.rows, j.cols, j.d, k, o[k], j.o[k])
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkAMX times QKTBF16 and PVBF16 on the engine's tile shapes (query
// blocks of 64 and 256 rows, 64 keys, d = 64 and 128) under each bf16
// implementation (skipped where this machine lacks it), and the float32
// kernels of the same shape under avx512 for comparison; one core, GFLOP/s
// at 2·rows·cols·d flops a call.
func BenchmarkAMX(b *testing.B) {
	rng := rand.New(rand.NewPCG(14, 14))
	mk := func(n int) []fp16.BFloat16 {
		x := make([]fp16.BFloat16, n)
		for k := range x {
			x[k] = randBF16(rng)
		}
		return x
	}
	const cols = 64
	for _, rows := range []int{64, 256} {
		for _, d := range []int{64, 128} {
			flops := float64(2 * rows * cols * d)
			report := func(b *testing.B) {
				b.ReportMetric(float64(b.N)*flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			}
			q, kp := mk(rows*d), mk(d*cols)
			p, vp := mk(rows*cols), mk(cols*d)
			s, o := make([]float32, rows*cols), make([]float32, rows*d)
			shape := fmt.Sprintf("rows=%d/d=%d", rows, d)
			for _, name := range []string{AMX, AVX512BF16} {
				b.Run("QKT/"+shape+"/"+name, func(b *testing.B) {
					setImpl(b, name)
					for b.Loop() {
						_ = QKTBF16(s, cols, q, d, kp, 2*cols, rows, cols, d, 0.125)
					}
					report(b)
				})
				b.Run("PV/"+shape+"/"+name, func(b *testing.B) {
					setImpl(b, name)
					clear(o)
					for b.Loop() {
						_ = PVBF16(o, d, p, cols, vp, 2*d, rows, cols, d)
					}
					report(b)
				})
			}
			qf, kt := gemmRandom(rows*d, 1), gemmRandom(d*cols, 1)
			pf, v := gemmRandom(rows*cols, 1e-3), gemmRandom(cols*d, 1)
			b.Run("QKT/"+shape+"/f32-avx512", func(b *testing.B) {
				setImpl(b, AVX512)
				for b.Loop() {
					x86.QktAVX512(&s[0], cols, &qf[0], d, &kt[0], cols, rows, cols, d, 0.125)
				}
				report(b)
			})
			b.Run("PV/"+shape+"/f32-avx512", func(b *testing.B) {
				setImpl(b, AVX512)
				clear(o)
				for b.Loop() {
					x86.PvAVX512(&o[0], d, &pf[0], cols, &v[0], d, rows, cols, d)
				}
				report(b)
			})
		}
	}
}

// BenchmarkAMXPeak measures TDPBF16PS at its best in this kernel: one
// x86.AmxTiles call of 4 × 4 tiles of 16 × 16 (four 2 × 2 blocks) over 16 k
// steps whose A and B (20 KiB) stay in the L1 cache. GFLOP/s at
// 2·64·64·32 flops a k step.
func BenchmarkAMXPeak(b *testing.B) {
	setImpl(b, AMX)
	const kt = 16
	cfg := amxConfig(16, 16, 16)
	c := make([]float32, 64*64)
	a := make([]uint16, 64*kt*32) // 64 rows of kt·32, rows 64 bytes apart: overlapping, all in 2 KiB + kt·64
	bb := make([]uint16, kt*16*32+4*32)
	for b.Loop() {
		x86.AmxTiles(&cfg, &c[0], 64, &a[0], 32, &bb[0], 32, 4, 4, kt, 16, 16, 16, 0, 1)
	}
	b.ReportMetric(float64(b.N)*float64(2*64*64*32*kt)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkAMXStrides times the AMX products of a 256 × 256 tile at d =
// 128 with the leading dimensions the engine uses and with each padded by
// one cache line, and with the K panel of a whole 1024-key call (a 4 KiB
// row stride, as attention's prepacked K of P1).
func BenchmarkAMXStrides(b *testing.B) {
	setImpl(b, AMX)
	const rows, cols, d = 256, 256, 128
	rng := rand.New(rand.NewPCG(15, 15))
	mk := func(n int) []fp16.BFloat16 {
		x := make([]fp16.BFloat16, n)
		for k := range x {
			x[k] = randBF16(rng)
		}
		return x
	}
	flops := float64(2 * rows * cols * d)
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.N)*flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	}
	for _, pad := range []int{0, 1} {
		for _, wideK := range []int{cols, 1024, 4096} {
			ldQ, ldK, ldS := d+32*pad, 2*wideK+32*pad, cols+16*pad
			q, kp, s := mk(rows*ldQ), mk(d/2*ldK), make([]float32, rows*ldS)
			b.Run(fmt.Sprintf("QKT/pad=%d/ldK=%d", pad, ldK), func(b *testing.B) {
				for b.Loop() {
					qktBF16AMX(s, ldS, q, ldQ, kp, ldK, rows, cols, d, 1)
				}
				report(b)
			})
		}
		ldP, ldV, ldO := cols+32*pad, 2*d+32*pad, d+16*pad
		p, vp, o := mk(rows*ldP), mk(cols/2*ldV), make([]float32, rows*ldO)
		b.Run(fmt.Sprintf("PV/pad=%d", pad), func(b *testing.B) {
			for b.Loop() {
				pvBF16AMX(o, ldO, p, ldP, vp, ldV, rows, cols, d)
			}
			report(b)
		})
	}
}

// BenchmarkAMXGrid times one AmxTiles call on grids of whole 16 × 16
// tiles with the operands in L1, from one tile and one k step (the cost
// of a call: configuration, C stored, tiles released) to attention's
// shapes: QKᵀ of a 64-row chunk against 256 keys at d = 128 (4 × 16 tiles,
// 4 k steps) and P·V of it (4 × 8 tiles, 8 k steps, C loaded first).
func BenchmarkAMXGrid(b *testing.B) {
	setImpl(b, AMX)
	for _, g := range []struct {
		name       string
		mt, nt, kt int
		flags      uint8
	}{
		{"1x1x1", 1, 1, 1, 0}, {"2x2x1", 2, 2, 1, 0}, {"2x2x4", 2, 2, 4, 0}, {"2x2x16", 2, 2, 16, 0}, {"2x2x64", 2, 2, 64, 0},
		{"qk-4x16x4", 4, 16, 4, 0}, {"pv-4x8x8", 4, 8, 8, 1}, {"4x4x16", 4, 4, 16, 0},
	} {
		b.Run(g.name, func(b *testing.B) {
			cfg := amxConfig(16, 16, 16)
			ldC, ldA, ldB := 16*g.nt, 32*g.kt, 32*g.nt
			c := make([]float32, 16*g.mt*ldC)
			a := make([]uint16, 16*g.mt*ldA)
			bb := make([]uint16, 16*g.kt*ldB)
			for b.Loop() {
				x86.AmxTiles(&cfg, &c[0], ldC, &a[0], ldA, &bb[0], ldB, g.mt, g.nt, g.kt, 16, 16, 16, g.flags, 1)
			}
			flops := float64(2 * 16 * g.mt * 16 * g.nt * 32 * g.kt)
			b.ReportMetric(float64(b.N)*flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N), "ns/call")
		})
	}
}
