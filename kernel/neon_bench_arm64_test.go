//go:build arm64 && !purego

package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel/internal/arm"
)

// Benchmarks of the NEON kernels against their generic twins on tiles of
// the sizes the attention engine uses (64 keys, head dimension 64 or 128).
// Under qemu the timings mean nothing; run them on arm64 hardware:
//
//	go test -run '^$' -bench NEON ./kernel/

func benchRand(n int) []float32 { return randn(rand.New(rand.NewPCG(uint64(n), 1)), n) }

func BenchmarkNEONQKT(b *testing.B) {
	for _, sz := range []struct{ rows, cols, d int }{{16, 64, 64}, {16, 64, 128}, {5, 33, 65}} {
		s := make([]float32, sz.rows*sz.cols)
		q := benchRand(sz.rows * sz.d)
		kt := benchRand(sz.d * sz.cols)
		name := benchName(sz.rows, sz.cols, sz.d)
		flops := int64(2 * sz.rows * sz.cols * sz.d)
		b.Run("neon/"+name, func(b *testing.B) {
			b.SetBytes(flops) // "MB/s" reads as MFLOP/s
			for b.Loop() {
				arm.QktNEON(&s[0], sz.cols, &q[0], sz.d, &kt[0], sz.cols, sz.rows, sz.cols, sz.d, 0.125)
			}
		})
		b.Run("generic/"+name, func(b *testing.B) {
			b.SetBytes(flops)
			for b.Loop() {
				qktGeneric(s, sz.cols, q, sz.d, kt, sz.cols, sz.rows, sz.cols, sz.d, 0.125)
			}
		})
	}
}

func BenchmarkNEONPV(b *testing.B) {
	for _, sz := range []struct{ rows, cols, d int }{{16, 64, 64}, {16, 64, 128}, {5, 33, 65}} {
		o := make([]float32, sz.rows*sz.d)
		p := benchRand(sz.rows * sz.cols)
		v := benchRand(sz.cols * sz.d)
		name := benchName(sz.rows, sz.cols, sz.d)
		flops := int64(2 * sz.rows * sz.cols * sz.d)
		b.Run("neon/"+name, func(b *testing.B) {
			b.SetBytes(flops)
			for b.Loop() {
				arm.PvNEON(&o[0], sz.d, &p[0], sz.cols, &v[0], sz.d, sz.rows, sz.cols, sz.d)
			}
		})
		b.Run("generic/"+name, func(b *testing.B) {
			b.SetBytes(flops)
			for b.Loop() {
				pvGeneric(o, sz.d, p, sz.cols, v, sz.d, sz.rows, sz.cols, sz.d)
			}
		})
	}
}

func BenchmarkNEONVec(b *testing.B) {
	const n = 256
	src := benchRand(n)
	dst := make([]float32, n)
	b.Run("ExpSum/neon", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			arm.ExpSumNEON(&dst[0], &src[0], n, 3)
		}
	})
	b.Run("ExpSum/generic", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			expSumGeneric(dst, src, 3)
		}
	})
	b.Run("Max/neon", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			arm.MaxNEON(&src[0], n)
		}
	})
	b.Run("Max/generic", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			maxGeneric(src)
		}
	})
	b.Run("Scale/neon", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			arm.ScaleNEON(&dst[0], &src[0], n, 0.5)
		}
	})
	b.Run("Scale/generic", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			scaleGeneric(dst, src, 0.5)
		}
	})
}

func BenchmarkNEONPack(b *testing.B) {
	const n, d = 64, 128
	src := benchRand(n * d)
	h := fp16.Float16s(src)
	bh := fp16.BFloat16s(src)
	hp := (*uint16)(&h[0])
	bp := (*uint16)(&bh[0])
	dst := make([]float32, n*d)
	for _, c := range []struct {
		name string
		run  func()
	}{
		{"PackKT/neon", func() { arm.PackKTNEON(&dst[0], n, &src[0], d, n, d) }},
		{"PackKT/generic", func() { packKTGeneric(dst, n, src, d, n, d) }},
		{"PackKTFloat16/neon", func() { arm.PackKTF16NEON(&dst[0], n, hp, d, n, d) }},
		{"PackKTFloat16/generic", func() { packKTFloat16Generic(dst, n, h, d, n, d) }},
		{"PackKTBFloat16/neon", func() { arm.PackKTBF16NEON(&dst[0], n, bp, d, n, d) }},
		{"PackKTBFloat16/generic", func() { packKTBFloat16Generic(dst, n, bh, d, n, d) }},
		{"PackFloat16/neon", func() { arm.PackF16NEON(&dst[0], d, hp, d, n, d) }},
		{"PackFloat16/generic", func() { packFloat16Generic(dst, d, h, d, n, d) }},
		{"PackBFloat16/neon", func() { arm.PackBF16NEON(&dst[0], d, bp, d, n, d) }},
		{"PackBFloat16/generic", func() { packBFloat16Generic(dst, d, bh, d, n, d) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(4 * n * d)
			for b.Loop() {
				c.run()
			}
		})
	}
}

func benchName(rows, cols, d int) string {
	return fmt.Sprintf("rows%d_cols%d_d%d", rows, cols, d)
}
