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

// BenchmarkFoldChunkPiece times the fused kernels (x86.FoldChunkAMX,
// x86.FoldChunkBF16AVX512) on the chunk of BenchmarkFoldChunkBF16 with the
// softmax rows taken after each key block of the next row tile's products
// set by hand: 0 computes all the next tile's scores first, then the
// current tile's softmax; a whole tile's rows (16, 12) all of it after the
// first block; chunkPiece(256, tile rows) spreads it evenly (the kernels'
// choice). GFLOP/s and %peak as BenchmarkFoldChunkBF16.
func BenchmarkFoldChunkPiece(b *testing.B) {
	const rows, cols, d = 64, 256, 128
	ldQ, ldK, ldV, ldO, ldS, ldP := d, 2*cols+32, 2*d+32, d, cols+16, cols+32
	for _, k := range []struct {
		level  string
		pieces []int
		fold   func(q, kp, vp *uint16, o, s *float32, p *uint16, piece int, m, z, alpha *float32)
	}{
		{AMX, []int{0, 1, 2, 4, 8, 16}, func(q, kp, vp *uint16, o, s *float32, p *uint16, piece int, m, z, alpha *float32) {
			x86.FoldChunkAMX(q, ldQ, kp, ldK, vp, ldV, o, ldO, s, ldS, p, ldP, rows, cols, d, d, piece, 0.0883883, m, z, alpha, nil, nil)
		}},
		{AVX512BF16, []int{0, 1, 2, 3, 6, 12}, func(q, kp, vp *uint16, o, s *float32, p *uint16, piece int, m, z, alpha *float32) {
			x86.FoldChunkBF16AVX512(q, ldQ, kp, ldK, vp, ldV, o, ldO, s, ldS, p, ldP, rows, cols, d, d, piece, 0.0883883, m, z, alpha, nil, nil)
		}},
	} {
		b.Run(k.level, func(b *testing.B) {
			setImpl(b, k.level)
			peakRate, _ := bf16Peak(200 * time.Millisecond)
			rng := rand.New(rand.NewPCG(38, 38))
			q := randnBF16(rng, rows*ldQ, 1)
			kp := randnBF16(rng, d/2*ldK, 1.5)
			vp := randnBF16(rng, cols/2*ldV, 1)
			o := make([]float32, rows*ldO)
			s, p := make([]float32, 32*ldS), make([]fp16.BFloat16, 16*ldP)
			m, z, alpha := make([]float32, rows), make([]float32, rows), make([]float32, rows)
			for _, piece := range k.pieces {
				b.Run(fmt.Sprintf("piece=%d", piece), func(b *testing.B) {
					for i := range rows {
						m[i], z[i] = 0, 1
					}
					for b.Loop() {
						k.fold(bits16(q), bits16(kp), bits16(vp), &o[0], &s[0], bits16(p), piece, &m[0], &z[0], &alpha[0])
					}
					rate := float64(b.N) * 4 * rows * cols * d / b.Elapsed().Seconds() / 1e9
					b.ReportMetric(rate, "GFLOP/s")
					if peakRate > 0 {
						b.ReportMetric(100*rate/peakRate, "%peak")
					}
				})
			}
		})
	}
}
