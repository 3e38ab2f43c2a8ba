package kernel

import (
	"runtime"
	"slices"
	"time"
)

// peak measures the float32 multiply-add throughput of one core, in
// GFLOP/s: the yardstick that flashgo's "percent of peak" figures divide
// by. On amd64 it runs a loop of independent fused multiply-add chains in
// the widest instruction set the CPU has (24 zmm chains with AVX-512, 12
// ymm chains with AVX2), which is the most any kernel can reach; isa names
// it ("avx512" or "avx2"). Elsewhere, or built with the purego tag, it runs
// a pure-Go loop of independent multiply-adds and isa is "go": that figure
// measures what Go code gets from the core, not the hardware's limit.
//
// It runs for about d (at least 20 short runs after a warm-up) and returns
// the median run, so that a moment of contention on a shared machine does
// not drag the figure down. Run it on an otherwise idle goroutine; it uses
// one core.
func peak(d time.Duration) (gflops float64, isa string) {
	run, flops, isa := peakLoop()
	return measurePeak(run, flops, d), isa
}

// bf16Peak measures the bfloat16 product throughput of one core, in
// GFLOP/s (a product of a bfloat16 pair added into a float32 sum counts
// two flops): the yardstick of the bf16 rows' percent of peak. It runs
// independent products on the widest bf16 unit the CPU has, whatever
// implementation the kernels are set to: the AMX tiles (4 independent
// TDPBF16PS on 16 × 16 tiles; isa "amx") where the amx level can run, else
// 24 independent VDPBF16PS on zmm registers (isa "avx512bf16") where the
// CPU has AVX512-BF16. Where it has neither (other CPUs and
// architectures, or built with the purego tag) it returns 0 and "": the
// bf16 products then run on the float32 units, and there is no bf16
// product peak to measure.
//
// It measures as peak does: the median of at least 20 runs over about d.
func bf16Peak(d time.Duration) (gflops float64, isa string) {
	run, flops, isa := bf16PeakLoop()
	if run == nil {
		return 0, ""
	}
	return measurePeak(run, flops, d), isa
}

// measurePeak returns the rate in GFLOP/s of run, a loop of flops flops
// an iteration, over about d: the median of at least 20 runs of ~1 ms each,
// after a calibration that also lets the core settle at its vector clock.
func measurePeak(run func(n int), flops int, d time.Duration) float64 {
	rate := func(n int) float64 {
		start := time.Now()
		run(n)
		return float64(n) * float64(flops) / time.Since(start).Seconds() / 1e9
	}
	// Calibrate: grow the iteration count until one run takes ~1 ms.
	n := 1024
	for {
		start := time.Now()
		run(n)
		if time.Since(start) >= time.Millisecond {
			break
		}
		n *= 2
	}
	runs := max(20, int(d/time.Millisecond))
	r := make([]float64, runs)
	for i := range r {
		r[i] = rate(n)
	}
	slices.Sort(r)
	return r[runs/2]
}

// goPeakFlops is the work of one iteration of goPeak: eight multiply-adds.
const goPeakFlops = 8 * 2

// goPeak runs n iterations of eight independent multiply-add chains in Go.
//
//go:noinline
func goPeak(n int) {
	a0, a1, a2, a3 := float32(1), float32(2), float32(3), float32(4)
	a4, a5, a6, a7 := float32(5), float32(6), float32(7), float32(8)
	const m, c = 0.999999, 1e-7
	for range n {
		a0 = a0*m + c
		a1 = a1*m + c
		a2 = a2*m + c
		a3 = a3*m + c
		a4 = a4*m + c
		a5 = a5*m + c
		a6 = a6*m + c
		a7 = a7*m + c
	}
	// Keep the chains' results alive so the compiler cannot drop them.
	runtime.KeepAlive(a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7)
}
