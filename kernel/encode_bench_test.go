package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/fp16"
)

// BenchmarkEncode runs the encoders from float32 rows of a K/V head (128
// values) and of 4096 values, in cache, under every implementation;
// MB/s counts the float32 bytes read.
func BenchmarkEncode(b *testing.B) {
	benchAllImpls(b, func(b *testing.B) {
		for _, n := range []int{128, 4096} {
			rng := rand.New(rand.NewPCG(1, 2))
			src := make([]float32, n)
			for i := range src {
				src[i] = float32(rng.NormFloat64())
			}
			h, bf := make([]fp16.Float16, n), make([]fp16.BFloat16, n)
			e4, e5 := make([]fp16.Float8E4M3, n), make([]fp16.Float8E5M2, n)
			q, qs := make([]int8, n), make([]float32, n/Q8Block)
			for _, c := range []struct {
				name string
				f    func()
			}{
				{"f16", func() { EncodeFloat16(h, src) }},
				{"bf16", func() { EncodeBFloat16(bf, src) }},
				{"e4m3", func() { EncodeFloat8(e4, src, 0.02) }},
				{"e5m2", func() { EncodeFloat8(e5, src, 0.0003) }},
				{"q8", func() { _ = QuantizeQ8(q, qs, src) }},
			} {
				b.Run(fmt.Sprintf("%s/%d", c.name, n), func(b *testing.B) {
					b.SetBytes(int64(4 * n))
					for b.Loop() {
						c.f()
					}
				})
			}
		}
	})
}
