//go:build amd64 && !purego

package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
)

// Benchmarks of the vector kernels against the generic Go ones. Sizes are
// those of the attention engine: a 64-key score row (and a 1024-element
// one), and a 64-key × 128-component K or V tile.

// vecBenchISAs returns the variants to benchmark: generic, then every
// assembly variant (vecISANamed skips those this machine cannot run).
func vecBenchISAs() []string {
	names := []string{Generic}
	for i := len(vecISAs) - 1; i >= 0; i-- {
		names = append(names, vecISAs[i].name)
	}
	return names
}

// reportPerElem adds an ns/elem metric.
func reportPerElem(b *testing.B, n int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/elem")
}

func vecBenchRow(n int) []float32 {
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 3)
	}
	return x
}

var vecSink float32

func BenchmarkExpSum(b *testing.B) {
	for _, n := range []int{64, 1024} {
		src := vecBenchRow(n)
		mx := slicesMax(src)
		dst := make([]float32, n)
		for _, name := range vecBenchISAs() {
			b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
				b.SetBytes(int64(8 * n))
				var s float32
				if name == "generic" {
					for b.Loop() {
						s += expSumGeneric(dst, src, mx)
					}
				} else {
					fn := vecISANamed(b, name).expSum
					for b.Loop() {
						s += fn(&dst[0], &src[0], n, mx)
					}
				}
				vecSink = s
				reportPerElem(b, n)
			})
		}
	}
}

func BenchmarkMax(b *testing.B) {
	for _, n := range []int{64, 1024} {
		x := vecBenchRow(n)
		for _, name := range vecBenchISAs() {
			b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
				b.SetBytes(int64(4 * n))
				var s float32
				if name == "generic" {
					for b.Loop() {
						s += maxGeneric(x)
					}
				} else {
					fn := vecISANamed(b, name).max
					for b.Loop() {
						s += fn(&x[0], n)
					}
				}
				vecSink = s
				reportPerElem(b, n)
			})
		}
	}
}

func BenchmarkScale(b *testing.B) {
	for _, n := range []int{128, 1024} {
		x := vecBenchRow(n)
		for _, name := range vecBenchISAs() {
			b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
				b.SetBytes(int64(8 * n))
				if name == "generic" {
					for b.Loop() {
						scaleGeneric(x, x, 1)
					}
				} else {
					fn := vecISANamed(b, name).scale
					for b.Loop() {
						fn(&x[0], &x[0], n, 1)
					}
				}
				reportPerElem(b, n)
			})
		}
	}
}

// Pack benchmarks: n keys of d components at ldSrc = d, into a panel at
// ldDst = n (transposed) or d (row-major).
const (
	packBenchN = 64
	packBenchD = 128
)

func packBenchSrc() ([]float32, []uint16) {
	rng := rand.New(rand.NewPCG(2, 2))
	f := make([]float32, packBenchN*packBenchD)
	h := make([]uint16, len(f))
	for i := range f {
		f[i] = float32(rng.NormFloat64())
		h[i] = uint16(fp16.FromFloat32(f[i]))
		if math.IsNaN(float64(f[i])) {
			panic("NaN")
		}
	}
	return f, h
}

func benchPack(b *testing.B, elemBytes int, fn func()) {
	b.SetBytes(int64(packBenchN * packBenchD * (4 + elemBytes)))
	for b.Loop() {
		fn()
	}
	reportPerElem(b, packBenchN*packBenchD)
}

func BenchmarkPackKT(b *testing.B) {
	f, h := packBenchSrc()
	hf := unsafe.Slice((*fp16.Float16)(unsafe.Pointer(&h[0])), len(h))
	hb := unsafe.Slice((*fp16.BFloat16)(unsafe.Pointer(&h[0])), len(h))
	dst := make([]float32, packBenchN*packBenchD)
	const n, d = packBenchN, packBenchD
	for _, name := range vecBenchISAs() {
		b.Run("f32/"+name, func(b *testing.B) {
			if name == "generic" {
				benchPack(b, 4, func() { packKTGeneric(dst, n, f, d, n, d) })
				return
			}
			fn := vecISANamed(b, name).packKT
			benchPack(b, 4, func() { fn(&dst[0], n, &f[0], d, n, d) })
		})
	}
	for _, name := range vecBenchISAs() {
		b.Run("f16/"+name, func(b *testing.B) {
			if name == "generic" {
				benchPack(b, 2, func() { packKTFloat16Generic(dst, n, hf, d, n, d) })
				return
			}
			fn := vecISANamed(b, name).packKTF16
			benchPack(b, 2, func() { fn(&dst[0], n, &h[0], d, n, d) })
		})
	}
	for _, name := range vecBenchISAs() {
		b.Run("bf16/"+name, func(b *testing.B) {
			if name == "generic" {
				benchPack(b, 2, func() { packKTBFloat16Generic(dst, n, hb, d, n, d) })
				return
			}
			fn := vecISANamed(b, name).packKTBF16
			benchPack(b, 2, func() { fn(&dst[0], n, &h[0], d, n, d) })
		})
	}
}

func BenchmarkPackF16(b *testing.B) {
	_, h := packBenchSrc()
	hf := unsafe.Slice((*fp16.Float16)(unsafe.Pointer(&h[0])), len(h))
	dst := make([]float32, packBenchN*packBenchD)
	const n, d = packBenchN, packBenchD
	for _, name := range vecBenchISAs() {
		b.Run(name, func(b *testing.B) {
			if name == "generic" {
				benchPack(b, 2, func() { packFloat16Generic(dst, d, hf, d, n, d) })
				return
			}
			fn := vecISANamed(b, name).packF16
			benchPack(b, 2, func() { fn(&dst[0], d, &h[0], d, n, d) })
		})
	}
}

func BenchmarkPackBF16(b *testing.B) {
	_, h := packBenchSrc()
	hb := unsafe.Slice((*fp16.BFloat16)(unsafe.Pointer(&h[0])), len(h))
	dst := make([]float32, packBenchN*packBenchD)
	const n, d = packBenchN, packBenchD
	for _, name := range vecBenchISAs() {
		b.Run(name, func(b *testing.B) {
			if name == "generic" {
				benchPack(b, 2, func() { packBFloat16Generic(dst, d, hb, d, n, d) })
				return
			}
			fn := vecISANamed(b, name).packBF16
			benchPack(b, 2, func() { fn(&dst[0], d, &h[0], d, n, d) })
		})
	}
}
