package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/fp16"
)

// BenchmarkQKTBF16 and BenchmarkPVBF16 run tiles of the engine's shapes
// (64 or 256 query rows, as many keys, d = 128) through QKTBF16 and PVBF16
// under every implementation (those this machine lacks are skipped), and
// report GFLOP/s (2·rows·cols·d flops a call), to set next to BenchmarkQKT and
// BenchmarkPV's float32 figures.

func randomBF16(n int, scale float64) []fp16.BFloat16 {
	return randnBF16(rand.New(rand.NewPCG(9, uint64(n))), n, scale)
}

func reportGFLOPs(b *testing.B, flops int) {
	b.ReportMetric(float64(b.N)*float64(flops)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkQKTBF16(b *testing.B) {
	const d = 128
	benchAllImpls(b, func(b *testing.B) {
		for _, sz := range [][2]int{{64, 64}, {256, 256}} {
			rows, cols := sz[0], sz[1]
			b.Run(fmt.Sprintf("%dx%dxd=%d", rows, cols, d), func(b *testing.B) {
				s := make([]float32, rows*cols)
				q, kp := randomBF16(rows*d, 1), randomBF16(d*cols, 1)
				for b.Loop() {
					if err := QKTBF16(s, cols, q, d, kp, 2*cols, rows, cols, d, 0.125); err != nil {
						b.Fatal(err)
					}
				}
				reportGFLOPs(b, 2*rows*cols*d)
			})
		}
	})
}

func BenchmarkPVBF16(b *testing.B) {
	const d = 128
	benchAllImpls(b, func(b *testing.B) {
		for _, sz := range [][2]int{{64, 64}, {256, 256}} {
			rows, cols := sz[0], sz[1]
			b.Run(fmt.Sprintf("%dx%dxd=%d", rows, cols, d), func(b *testing.B) {
				o := make([]float32, rows*d)
				p := randomBF16(rows*cols, 1e-3) // small, so that o grows slowly over the iterations
				vp := randomBF16(cols*d, 1)
				for b.Loop() {
					if err := PVBF16(o, d, p, cols, vp, 2*d, rows, cols, d); err != nil {
						b.Fatal(err)
					}
				}
				reportGFLOPs(b, 2*rows*cols*d)
			})
		}
	})
}

// BenchmarkOnlineSoftmaxBF16 runs the bf16 softmax of one tile (64 query
// rows of 64 or 256 keys) under every implementation and reports the
// nanoseconds per score, next to the products' time per score
// (BenchmarkQKTBF16, BenchmarkPVBF16: 2·d flops a score each).
func BenchmarkOnlineSoftmaxBF16(b *testing.B) {
	const rows = 64
	benchAllImpls(b, func(b *testing.B) {
		for _, cols := range []int{64, 256} {
			b.Run(fmt.Sprintf("cols=%d", cols), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(3, uint64(cols)))
				s := make([]float32, rows*cols)
				fill(rng, s)
				p := make([]fp16.BFloat16, rows*cols)
				m, z, alpha := make([]float32, rows), make([]float32, rows), make([]float32, rows)
				for b.Loop() {
					for i := range m {
						m[i], z[i] = 4, 1 // the same work every call
					}
					if err := OnlineSoftmaxBF16(s, cols, p, cols, rows, cols, 0.125, m, z, alpha); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/float64(rows*cols), "ns/score")
			})
		}
	})
}
