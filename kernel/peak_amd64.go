//go:build amd64 && !purego

package kernel

import "github.com/flashgo/flashgo/kernel/internal/x86"

// Flops of one iteration of the FMA peak loops: 24 zmm FMAs of 16 lanes and
// 12 ymm FMAs of 8 lanes, two flops a lane.
const (
	fmaPeakFlopsAVX512 = 24 * 16 * 2
	fmaPeakFlopsAVX2   = 12 * 8 * 2
)

// Flops of one iteration of the bf16 peak loops: 4 TDPBF16PS of 16 × 16
// float32 sums over 16 pairs, and 24 zmm VDPBF16PS of 16 lanes over a
// pair; two flops a product.
const (
	bf16PeakFlopsAMX    = 4 * 16 * 16 * 32 * 2
	bf16PeakFlopsAVX512 = 24 * 16 * 2 * 2
)

// peakLoop returns the widest FMA loop this CPU runs, whatever
// implementation the kernels are set to: the peak is the machine's.
func peakLoop() (run func(n int), flops int, isa string) {
	switch {
	case hasAVX512:
		return x86.FmaPeakAVX512, fmaPeakFlopsAVX512, AVX512
	case hasAVX2:
		return x86.FmaPeakAVX2, fmaPeakFlopsAVX2, AVX2
	}
	return goPeak, goPeakFlops, "go"
}

// bf16PeakLoop returns the loop of the widest bf16 product unit this CPU
// can run (the AMX tiles only once the OS has granted them: amxErr), or nil
// where it has none.
func bf16PeakLoop() (run func(n int), flops int, isa string) {
	switch {
	case amxErr == nil:
		return x86.Tdpbf16psPeakAMX, bf16PeakFlopsAMX, AMX
	case hasAVX512BF16:
		return x86.Vdpbf16psPeakAVX512, bf16PeakFlopsAVX512, AVX512BF16
	}
	return nil, 0, ""
}
