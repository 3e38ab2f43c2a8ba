//go:build amd64 && !purego && linux

package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel/internal/x86"
)

// BenchmarkFoldChunkAMXPiece times x86.FoldChunkAMX on the chunk of
// BenchmarkFoldChunkBF16 with the softmax rows taken after each key block
// of the next row tile's products set by hand: 0 computes all the next
// tile's scores first, then the current tile's softmax; 16 all of it
// after the first block; chunkPiece(256) = 4 spreads it evenly (the
// kernel's choice). GFLOP/s and %peak as BenchmarkFoldChunkBF16.
func BenchmarkFoldChunkAMXPiece(b *testing.B) {
	setImpl(b, AMX)
	peakRate, _ := bf16Peak(200 * time.Millisecond)
	rng := rand.New(rand.NewPCG(38, 38))
	const rows, cols, d = 64, 256, 128
	ldQ, ldK, ldV, ldO, ldS, ldP := d, 2*cols+32, 2*d+32, d, cols+16, cols+32
	q := randnBF16(rng, rows*ldQ, 1)
	kp := randnBF16(rng, d/2*ldK, 1.5)
	vp := randnBF16(rng, cols/2*ldV, 1)
	o := make([]float32, rows*ldO)
	s, p := make([]float32, 32*ldS), make([]fp16.BFloat16, 16*ldP)
	m, z, alpha := make([]float32, rows), make([]float32, rows), make([]float32, rows)
	for _, piece := range []int{0, 1, 2, 4, 8, 16} {
		b.Run(fmt.Sprintf("piece=%d", piece), func(b *testing.B) {
			for i := range rows {
				m[i], z[i] = 0, 1
			}
			for b.Loop() {
				x86.FoldChunkAMX(bits16(q), ldQ, bits16(kp), ldK, bits16(vp), ldV, &o[0], ldO, &s[0], ldS, bits16(p), ldP,
					rows, cols, d, d, piece, 0.0883883, &m[0], &z[0], &alpha[0], nil, nil)
			}
			rate := float64(b.N) * 4 * rows * cols * d / b.Elapsed().Seconds() / 1e9
			b.ReportMetric(rate, "GFLOP/s")
			if peakRate > 0 {
				b.ReportMetric(100*rate/peakRate, "%peak")
			}
		})
	}
}
