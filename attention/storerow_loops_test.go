package attention

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/flashgo/flashgo/fp16"
	registry "github.com/flashgo/flashgo/internal/impl"
	"github.com/flashgo/flashgo/internal/impltest"
	"github.com/flashgo/flashgo/kernel"
)

// The storage conversions as they were before the encoders were vector
// kernels (kernel.EncodeFloat16, EncodeBFloat16, EncodeFloat8 and the
// vector QuantizeQ8): fp16's Go loops, a float32 chunk at a time. The
// widening side (loadRow, widenRow) is the package's own, unchanged.
// TestStoreRowMatchesLoops holds storeRow to their bits.

// storeRowLoops writes d elements of src at soff, a row of head h, into dst at
// doff, in dst's type: copied where the types agree (for fp8, and the
// scales of head h), otherwise widened to float32 (exactly) and rounded to
// dst's type: to nearest even for F16 and BF16, per block for Q8
// (QuantizeQ8), divided by the scale and saturated for fp8. The callers
// have checked the types (checkAppend, checkRows): one of them is F32, F16,
// BF16 or the other's type.
func storeRowLoops(dst *Tensor, doff int, src *Tensor, soff, h, d int) {
	switch {
	case src.dtype == dst.dtype && (!dst.dtype.isFP8() || src.fp8Scale(h)[0] == dst.fp8Scale(h)[0]):
		copyElems(dst, doff, src, soff, d)
	case dst.dtype.isFP8():
		quantizeFP8RowLoops(dst, doff, src, soff, h, d)
	case src.dtype == F32:
		encodeRowLoops(dst, doff, src.f32[soff:soff+d])
	case dst.dtype == F32:
		widenRow(dst.f32[doff:doff+d], src, soff, h)
	default:
		// Through float32 a stack chunk at a time: no allocation. The
		// chunk is a whole number of Q8 blocks, so a Q8 row is quantised
		// block by block as in one call.
		var buf [64]float32
		for c0 := 0; c0 < d; c0 += len(buf) {
			w := buf[:min(len(buf), d-c0)]
			loadRow(w, src, soff+c0, h)
			encodeRowLoops(dst, doff+c0, w)
		}
	}
}

// encodeRowLoops writes x to dst at doff, rounded to dst's type (F32, F16,
// BF16 or Q8, len(x) then a whole number of blocks from a block start).
func encodeRowLoops(dst *Tensor, doff int, x []float32) {
	d := len(x)
	switch dst.dtype {
	case F32:
		copy(dst.f32[doff:doff+d], x)
	case F16:
		fp16.EncodeFloat16(dst.f16[doff:doff+d], x)
	case BF16:
		fp16.EncodeBFloat16(dst.bf16[doff:doff+d], x)
	case Q8:
		_ = kernel.QuantizeQ8(dst.i8[doff:doff+d], dst.q8s[doff/Q8Block:(doff+d)/Q8Block], x)
	}
}

// quantizeFP8RowLoops writes d elements of src at soff (F32, F16, BF16 or fp8)
// into the fp8 tensor dst at doff, a row of head h: each value divided by
// dst's scale of head h in float32, then rounded to nearest even,
// saturating (fp16.Float8E4M3FromFloat32), as NewKVCacheFP8 documents. It
// widens the row a stack chunk at a time, so it does not allocate.
func quantizeFP8RowLoops(dst *Tensor, doff int, src *Tensor, soff, h, d int) {
	sc := dst.fp8Scale(h)[0]
	var buf [64]float32
	for c0 := 0; c0 < d; c0 += len(buf) {
		n := min(len(buf), d-c0)
		w := buf[:n]
		loadRow(w, src, soff+c0, h)
		for i, x := range w {
			w[i] = x / sc
		}
		switch dst.dtype {
		case FP8E4M3:
			fp16.EncodeFloat8E4M3(dst.e4m3[doff+c0:][:n], w)
		case FP8E5M2:
			fp16.EncodeFloat8E5M2(dst.e5m2[doff+c0:][:n], w)
		}
	}
}

// storeTypes are the element types of the rows storeRow moves.
var storeTypes = []DType{F32, F16, BF16, Q8, FP8E4M3, FP8E5M2}

// storeInput returns n float32s: mostly normal values of the magnitudes a
// K/V row has, with zeros, subnormals, huge values, ±Inf and NaN mixed in.
func storeInput(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		switch rng.IntN(24) {
		case 0:
			x[i] = float32(math.Inf(rng.IntN(2)*2 - 1))
		case 1:
			x[i] = math.Float32frombits(0x7f800001 | rng.Uint32())
		case 2:
			x[i] = math.Float32frombits(rng.Uint32() & 0x807fffff)
		case 3:
			x[i] = math.Float32frombits(rng.Uint32())
		case 4:
			x[i] = float32(math.Copysign(0, float64(rng.IntN(2)*2-1)))
		default:
			x[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(16)-8))
		}
	}
	return x
}

// storeTensor returns a [1, heads, n, d] view of type dt holding x (stored
// as fp16's conversions store it; Q8 quantised), with the fp8 scales sc.
func storeTensor(dt DType, x []float32, sc []float32, heads, n, d int) Tensor {
	l := BHSD(1, heads, n, d)
	switch dt {
	case F16:
		return F16Tensor(fp16.Float16s(x), l)
	case BF16:
		return BF16Tensor(fp16.BFloat16s(x), l)
	case Q8:
		q, qs := make([]int8, len(x)), make([]float32, len(x)/Q8Block)
		quantizeQ8Loop(q, qs, x)
		return Q8Tensor(q, qs, l)
	case FP8E4M3:
		e := make([]fp16.Float8E4M3, len(x))
		for i, v := range x {
			e[i] = fp16.Float8E4M3FromFloat32(v / sc[min(i/(n*d), len(sc)-1)])
		}
		return FP8E4M3Tensor(e, sc, l)
	case FP8E5M2:
		e := make([]fp16.Float8E5M2, len(x))
		for i, v := range x {
			e[i] = fp16.Float8E5M2FromFloat32(v / sc[min(i/(n*d), len(sc)-1)])
		}
		return FP8E5M2Tensor(e, sc, l)
	}
	return F32Tensor(slices.Clone(x), l)
}

// quantizeQ8Loop is QuantizeQ8 at the generic level: the Go loop.
func quantizeQ8Loop(q []int8, qs []float32, x []float32) {
	restore, err := registry.Select(registry.Kernel, kernel.Generic)
	if err != nil {
		panic(err)
	}
	defer restore()
	if err := kernel.QuantizeQ8(q, qs, x); err != nil {
		panic(err)
	}
}

// TestStoreRowMatchesLoops holds storeRow, which KVCache.Append,
// PagedCache.Append, PagedKV.Write and the caches' Read run, to the bits
// of the Go loops it ran before the encoders were vector kernels
// (storeRowLoops, at the generic level, where every kernel it calls is a
// Go loop): every pair of element types a write or a read converts
// between, fp8 rows of the destination's scale and of another, heads of
// their own fp8 scales, rows of every length the types allow, on random
// rows with zeros, subnormals, huge values, ±Inf and NaN. Every level.
func TestStoreRowMatchesLoops(t *testing.T) {
	const heads = 2
	impltest.Run(t, registry.Kernel, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(37, 5))
		for _, dt := range storeTypes {
			for _, st := range storeTypes {
				if st != dt && !slices.Contains([]DType{F32, F16, BF16}, st) && !slices.Contains([]DType{F32, F16, BF16}, dt) {
					continue // no write or read converts between them
				}
				for _, d := range []int{1, 7, 16, 31, 32, 33, 64, 65, 96, 128, 129, 200, 256} {
					if (dt == Q8 || st == Q8) && d%Q8Block != 0 {
						continue
					}
					for _, same := range []bool{true, false} {
						if !same && (st != dt || !dt.isFP8()) {
							continue
						}
						t.Run(fmt.Sprintf("%v from %v d %d same scale %v", dt, st, d, same), func(t *testing.T) {
							const n = 3
							dsc, ssc := []float32{0.02, 0.37}, []float32{0.02, 0.37}
							if !same {
								ssc = []float32{0.5, 3e-3}
							}
							if dt == FP8E5M2 {
								dsc = []float32{0.0003}
							}
							if st == FP8E5M2 && same {
								ssc = dsc
							}
							src := storeTensor(st, storeInput(rng, heads*n*d), ssc, heads, n, d)
							dx := storeInput(rng, heads*n*d)
							want := storeTensor(dt, dx, dsc, heads, n, d)
							got := storeTensor(dt, dx, dsc, heads, n, d)
							restore, err := registry.Select(registry.Kernel, kernel.Generic)
							if err != nil {
								t.Fatal(err)
							}
							for h := range heads {
								for i := range n {
									storeRowLoops(&want, want.Offset(0, h, (i+1)%n), &src, src.Offset(0, h, i), h, d)
								}
							}
							restore()
							for h := range heads {
								for i := range n {
									storeRow(&got, got.Offset(0, h, (i+1)%n), &src, src.Offset(0, h, i), h, d)
								}
							}
							for i, w := range memoryOfTensor(want) {
								if g := memoryOfTensor(got)[i]; !slices.Equal(g, w) {
									j := 0
									for k := range g {
										if g[k] != w[k] {
											j = k
											break
										}
									}
									t.Fatalf("memory %d of the destination (of %d), byte %d: %#02x, want %#02x", i, len(memoryOfTensor(want)), j, g[j], w[j])
								}
							}
						})
					}
				}
			}
		}
	})
}

// memoryOfTensor returns the memory of t's elements and scales.
func memoryOfTensor(t Tensor) [][]byte {
	return [][]byte{memoryOf(t.f32), memoryOf(t.f16), memoryOf(t.bf16), memoryOf(t.i8), memoryOf(t.q8s),
		memoryOf(t.e4m3), memoryOf(t.e5m2), memoryOf(t.f8s)}
}
