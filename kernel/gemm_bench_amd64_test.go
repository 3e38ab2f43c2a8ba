//go:build amd64 && !purego

package kernel

// The benchmarks of the assembly QKT and PV.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flashgo/flashgo/kernel/internal/x86"
)

// The matrix benchmarks report GFLOP/s and two shares of the FMA peak of
// the same instruction set, both measured in the benchmark's process:
//
//   - %peak: the benchmark's GFLOP/s over the peak measured once per
//     process (the median of 40 runs of about 1 ms, after a warm-up);
//   - %peak-paired: the median, over 100 pairs of a ~0.1 ms run of the
//     peak loop and a ~0.1 ms run of the kernel back to back, of the
//     kernel's rate over the peak's.
//
// The paired figure is the steadier one where the clock or a neighbour on
// the host changes the speed of the core from one second to the next: both
// halves of a pair see the same machine. Generic Go is measured against
// the AVX-512 peak when the CPU has it.

type fmaPeak struct {
	name  string
	ok    bool
	run   func(n int)
	flops int // per iteration
}

var (
	peakAVX512 = fmaPeak{"avx512", hasAVX512, x86.FmaPeakAVX512, fmaPeakFlopsAVX512}
	peakAVX2   = fmaPeak{"avx2", hasAVX2, x86.FmaPeakAVX2, fmaPeakFlopsAVX2}
)

// gflops runs n iterations of the peak loop and returns its GFLOP/s.
func (p fmaPeak) gflops(n int) float64 {
	start := time.Now()
	p.run(n)
	return float64(n) * float64(p.flops) / time.Since(start).Seconds() / 1e9
}

// itersFor returns how many iterations take about d at 100 GFLOP/s.
func (p fmaPeak) itersFor(d time.Duration) int {
	return max(1, int(d.Seconds()*100e9/float64(p.flops)))
}

var peakOnce struct {
	sync.Once
	avx512, avx2 float64
}

// measuredPeak returns the FMA peak in GFLOP/s, measured once per process.
func measuredPeak(p fmaPeak) float64 {
	peakOnce.Do(func() {
		measure := func(p fmaPeak) float64 {
			if !p.ok {
				return 0
			}
			p.gflops(p.itersFor(10 * time.Millisecond)) // warm-up: let the core settle at its AVX clock
			var r []float64
			for range 40 {
				r = append(r, p.gflops(p.itersFor(time.Millisecond)))
			}
			slices.Sort(r)
			return r[len(r)/2]
		}
		peakOnce.avx512 = measure(peakAVX512)
		peakOnce.avx2 = measure(peakAVX2)
	})
	if p.name == "avx512" {
		return peakOnce.avx512
	}
	return peakOnce.avx2
}

// pairedShare returns the median over 100 back-to-back pairs of the
// kernel's rate (flops per call of f) over the peak's.
func pairedShare(p fmaPeak, f func(), flops int) float64 {
	n := p.itersFor(100 * time.Microsecond)
	calls := max(1, int(100e-6*100e9/float64(flops))) // ~0.1 ms at 100 GFLOP/s
	var r []float64
	for range 100 {
		pk := p.gflops(n)
		start := time.Now()
		for range calls {
			f()
		}
		k := float64(calls) * float64(flops) / time.Since(start).Seconds() / 1e9
		r = append(r, k/pk)
	}
	slices.Sort(r)
	return r[len(r)/2]
}

func BenchmarkFMAPeak(b *testing.B) {
	for _, p := range []fmaPeak{peakAVX512, peakAVX2} {
		b.Run(p.name, func(b *testing.B) {
			setImpl(b, p.name)
			const iters = 1000
			for b.Loop() {
				p.run(iters)
			}
			b.ReportMetric(float64(b.N)*iters*float64(p.flops)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// gemmBenchVariants are the implementations benchmarked, generic Go first,
// each with the peak it is measured against.
func gemmBenchVariants() []struct {
	gemmVariant
	peak fmaPeak
} {
	generic := peakAVX512
	if !generic.ok {
		generic = peakAVX2
	}
	return []struct {
		gemmVariant
		peak fmaPeak
	}{
		{gemmVariant{name: Generic, qkt: qktGeneric, pv: pvGeneric}, generic},
		{gemmVariants[0], peakAVX512},
		{gemmVariants[1], peakAVX2},
	}
}

func gemmRandom(n int, scale float32) []float32 {
	x := randn(rand.New(rand.NewPCG(3, uint64(n))), n)
	for i := range x {
		x[i] *= scale
	}
	return x
}

// benchGemm times f (2·rows·cols·d flops a call) and reports its rate and
// its shares of the peak.
func benchGemm(b *testing.B, name string, p fmaPeak, flops int, f func()) {
	setImpl(b, name)
	peak := 0.0
	if p.ok {
		peak = measuredPeak(p)
	}
	f()
	for b.Loop() {
		f()
	}
	gflops := float64(b.N) * float64(flops) / b.Elapsed().Seconds() / 1e9
	b.ReportMetric(gflops, "GFLOP/s")
	if peak > 0 {
		b.ReportMetric(100*gflops/peak, "%peak")
		b.ReportMetric(100*pairedShare(p, f, flops), "%peak-paired")
	}
}

func benchQKT(b *testing.B, v gemmVariant, p fmaPeak, rows, cols, d int) {
	s := make([]float32, rows*cols)
	q := gemmRandom(rows*d, 1)
	kt := gemmRandom(d*cols, 1)
	benchGemm(b, v.name, p, 2*rows*cols*d, func() { v.qkt(s, cols, q, d, kt, cols, rows, cols, d, 0.125) })
}

func benchPV(b *testing.B, v gemmVariant, p fmaPeak, rows, cols, d int) {
	o := make([]float32, rows*d)
	pr := gemmRandom(rows*cols, 1e-3) // small, so that o grows slowly over the iterations
	vv := gemmRandom(cols*d, 1)
	benchGemm(b, v.name, p, 2*rows*cols*d, func() { v.pv(o, d, pr, cols, vv, d, rows, cols, d) })
}

// BenchmarkQKT and BenchmarkPV run the engine's tile: 64 query rows and 64
// keys, with contiguous (64-byte aligned) blocks.
func BenchmarkQKT(b *testing.B) {
	for _, v := range gemmBenchVariants() {
		for _, d := range []int{64, 128} {
			b.Run(fmt.Sprintf("%s/d=%d", v.name, d), func(b *testing.B) { benchQKT(b, v.gemmVariant, v.peak, 64, 64, d) })
		}
	}
}

func BenchmarkPV(b *testing.B) {
	for _, v := range gemmBenchVariants() {
		for _, d := range []int{64, 128} {
			b.Run(fmt.Sprintf("%s/d=%d", v.name, d), func(b *testing.B) { benchPV(b, v.gemmVariant, v.peak, 64, 64, d) })
		}
	}
}

// BenchmarkTileSizes sweeps the tile (BlockQ rows × BlockKV keys) for the
// best instruction set, to choose the engine's blocking.
func BenchmarkTileSizes(b *testing.B) {
	v := gemmBenchVariants()[1]
	if implLacks(v.name) != "" {
		v = gemmBenchVariants()[2]
	}
	for _, d := range []int{64, 128} {
		for _, rows := range []int{32, 64, 96, 128} {
			for _, cols := range []int{32, 48, 64, 96, 128} {
				name := fmt.Sprintf("%s/d=%d/rows=%d/cols=%d", v.name, d, rows, cols)
				b.Run("QKT/"+name, func(b *testing.B) { benchQKT(b, v.gemmVariant, v.peak, rows, cols, d) })
				b.Run("PV/"+name, func(b *testing.B) { benchPV(b, v.gemmVariant, v.peak, rows, cols, d) })
			}
		}
	}
}
