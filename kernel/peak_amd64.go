//go:build amd64 && !purego

package kernel

import "github.com/flashgo/flashgo/kernel/internal/x86"

// Flops of one iteration of the FMA peak loops: 24 zmm FMAs of 16 lanes and
// 12 ymm FMAs of 8 lanes, two flops a lane.
const (
	fmaPeakFlopsAVX512 = 24 * 16 * 2
	fmaPeakFlopsAVX2   = 12 * 8 * 2
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
