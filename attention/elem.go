package attention

import (
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel"
)

// elemKernels are the kernels that read K or V rows of one element type,
// looked up once per call (plan.kOps, plan.vOps: kvKernels[dtype]) so that
// the tile loop never asks which type it reads. off is the element offset
// of the first row in the tensor's slice; rows are t.SeqStride apart. h is
// the K/V head the rows belong to, which picks an fp8 tensor's scale.
type elemKernels struct {
	// qkDirect writes the scores of rows query rows of q against n keys
	// of k from element off on, read in place (kernel.QKRows).
	qkDirect func(s []float32, ldS int, q []float32, ldQ int, k *Tensor, h, off, n, rows, d int, scale float32) error
	// pvDirect accumulates rows probability rows times n value rows of v
	// from element off on, read in place (kernel.PVRows).
	pvDirect func(o []float32, ldO int, p []float32, ldP int, v *Tensor, h, off, n, rows, d int) error
	// qkGather writes the scores of rows query rows of q against the n keys
	// of k whose rows start at the elements off[:n], prefetching the rows
	// the offsets after them list (kernel.QKRowsGather).
	qkGather func(s []float32, ldS int, q []float32, ldQ int, k *Tensor, h int, off []int, rows, n, d int, scale float32) error
	// pvGather accumulates rows probability rows times the n value rows of
	// v that start at the elements off[:n] (kernel.PVRowsGather).
	pvGather func(o []float32, ldO int, p []float32, ldP int, v *Tensor, h int, off []int, rows, n, d int) error
	// packK converts n keys from element off of k into the transposed
	// float32 panel dst (leading dimension ld).
	packK func(dst []float32, ld int, k *Tensor, h, off, n, d int) error
	// packV converts (or copies) n value rows from element off of v into
	// the row-major float32 panel dst (leading dimension ld).
	packV func(dst []float32, ld int, v *Tensor, h, off, n, d int) error
	// packKPairs packs n keys from element off of k into a bfloat16 K pair
	// panel (kernel.PackKPairs).
	packKPairs func(dst []fp16.BFloat16, ld int, k *Tensor, h, off, n, d int) error
	// packVPairs packs n value rows from element off of v into a bfloat16
	// V pair panel and reports whether every value was finite
	// (kernel.PackVPairs).
	packVPairs func(dst []fp16.BFloat16, ld int, v *Tensor, h, off, n, d int) (bool, error)
}

// kvKernels holds the kernels of each K/V element type.
var kvKernels = [...]elemKernels{
	F32: rowKernels(func(t *Tensor) []float32 { return t.f32 }, noScales,
		func(dst []float32, ld int, k *Tensor, _, off, n, d int) error {
			return kernel.PackKT(dst, ld, k.f32[off:], k.SeqStride, n, d)
		},
		func(dst []float32, ld int, v *Tensor, _, off, n, d int) error {
			for j := range n {
				copy(dst[j*ld:j*ld+d], v.f32[off+j*v.SeqStride:][:d])
			}
			return nil
		}),
	F16: rowKernels(func(t *Tensor) []fp16.Float16 { return t.f16 }, noScales,
		func(dst []float32, ld int, k *Tensor, _, off, n, d int) error {
			return kernel.PackKTFloat16(dst, ld, k.f16[off:], k.SeqStride, n, d)
		},
		func(dst []float32, ld int, v *Tensor, _, off, n, d int) error {
			return kernel.PackFloat16(dst, ld, v.f16[off:], v.SeqStride, n, d)
		}),
	BF16: rowKernels(func(t *Tensor) []fp16.BFloat16 { return t.bf16 }, noScales,
		func(dst []float32, ld int, k *Tensor, _, off, n, d int) error {
			return kernel.PackKTBFloat16(dst, ld, k.bf16[off:], k.SeqStride, n, d)
		},
		func(dst []float32, ld int, v *Tensor, _, off, n, d int) error {
			return kernel.PackBFloat16(dst, ld, v.bf16[off:], v.SeqStride, n, d)
		}),
	Q8: rowKernels(func(t *Tensor) []int8 { return t.i8 }, q8Scales,
		func(dst []float32, ld int, k *Tensor, _, off, n, d int) error {
			return kernel.PackKTQ8(dst, ld, k.i8[off:], k.q8s[off/Q8Block:], k.SeqStride, n, d)
		},
		func(dst []float32, ld int, v *Tensor, _, off, n, d int) error {
			return kernel.PackQ8(dst, ld, v.i8[off:], v.q8s[off/Q8Block:], v.SeqStride, n, d)
		}),
	FP8E4M3: fp8Kernels(func(t *Tensor) []fp16.Float8E4M3 { return t.e4m3 }),
	FP8E5M2: fp8Kernels(func(t *Tensor) []fp16.Float8E5M2 { return t.e5m2 }),
}

// The scales the kernels read of rows of tensor t of head h from element
// off on: none, Q8's blocks, an fp8 tensor's scale of the head.
func noScales(*Tensor, int, int) []float32     { return nil }
func q8Scales(t *Tensor, _, off int) []float32 { return t.q8s[off/Q8Block:] }
func fp8Scale(t *Tensor, h, _ int) []float32   { return t.fp8Scale(h) }

// fp8Kernels returns the kernels of an fp8 element type whose values data
// returns.
func fp8Kernels[T kernel.Float8](data func(*Tensor) []T) elemKernels {
	return rowKernels(data, fp8Scale,
		func(dst []float32, ld int, k *Tensor, h, off, n, d int) error {
			return kernel.PackKTFloat8(dst, ld, data(k)[off:], k.fp8Scale(h)[0], k.SeqStride, n, d)
		},
		func(dst []float32, ld int, v *Tensor, h, off, n, d int) error {
			return kernel.PackFloat8(dst, ld, data(v)[off:], v.fp8Scale(h)[0], v.SeqStride, n, d)
		})
}

// rowKernels returns the kernels of the element type whose values data
// returns, with the scales that scales returns, and its float32 packs.
func rowKernels[T kernel.RowElem](data func(*Tensor) []T, scales func(t *Tensor, h, off int) []float32, packK, packV func(dst []float32, ld int, t *Tensor, h, off, n, d int) error) elemKernels {
	return elemKernels{
		qkDirect: func(s []float32, ldS int, q []float32, ldQ int, k *Tensor, h, off, n, rows, d int, scale float32) error {
			return kernel.QKRows(s, ldS, q, ldQ, data(k)[off:], scales(k, h, off), k.SeqStride, rows, n, d, scale)
		},
		pvDirect: func(o []float32, ldO int, p []float32, ldP int, v *Tensor, h, off, n, rows, d int) error {
			return kernel.PVRows(o, ldO, p, ldP, data(v)[off:], scales(v, h, off), v.SeqStride, rows, n, d)
		},
		qkGather: func(s []float32, ldS int, q []float32, ldQ int, k *Tensor, h int, off []int, rows, n, d int, scale float32) error {
			return kernel.QKRowsGather(s, ldS, q, ldQ, data(k), scales(k, h, 0), off, rows, n, d, scale)
		},
		pvGather: func(o []float32, ldO int, p []float32, ldP int, v *Tensor, h int, off []int, rows, n, d int) error {
			return kernel.PVRowsGather(o, ldO, p, ldP, data(v), scales(v, h, 0), off, rows, n, d)
		},
		packK: packK,
		packV: packV,
		packKPairs: func(dst []fp16.BFloat16, ld int, k *Tensor, h, off, n, d int) error {
			return kernel.PackKPairs(dst, ld, data(k)[off:], scales(k, h, off), k.SeqStride, n, d)
		},
		packVPairs: func(dst []fp16.BFloat16, ld int, v *Tensor, h, off, n, d int) (bool, error) {
			return kernel.PackVPairs(dst, ld, data(v)[off:], scales(v, h, off), v.SeqStride, n, d)
		},
	}
}

// rowIO reads query rows and writes output rows of one activation type,
// looked up once per call (plan.qIO, plan.outIO).
type rowIO struct {
	// load widens the d = len(dst) elements of t from offset off into dst.
	load func(dst []float32, t *Tensor, off int)
	// store writes src to the len(src) elements of t from offset off,
	// rounded to nearest even for binary16 and bfloat16 (IEEE
	// conversions: subnormals kept, overflow to ±Inf, NaN stays NaN).
	store func(t *Tensor, off int, src []float32)
}

// activationIO holds the row readers and writers of each activation type.
var activationIO = [...]rowIO{
	F32: {
		load:  func(dst []float32, t *Tensor, off int) { copy(dst, t.f32[off:][:len(dst)]) },
		store: func(t *Tensor, off int, src []float32) { copy(t.f32[off:][:len(src)], src) },
	},
	F16: {
		load: func(dst []float32, t *Tensor, off int) {
			d := len(dst)
			_ = kernel.PackFloat16(dst, d, t.f16[off:], d, 1, d)
		},
		store: func(t *Tensor, off int, src []float32) { fp16.EncodeFloat16(t.f16[off:][:len(src)], src) },
	},
	BF16: {
		load: func(dst []float32, t *Tensor, off int) {
			d := len(dst)
			_ = kernel.PackBFloat16(dst, d, t.bf16[off:], d, 1, d)
		},
		store: func(t *Tensor, off int, src []float32) { fp16.EncodeBFloat16(t.bf16[off:][:len(src)], src) },
	},
}

// maskKernels read an additive mask of one element type, looked up once
// per call (plan.maskOps).
type maskKernels struct {
	// add adds the len(row) mask entries of m from offset off to a row of
	// scores; a −Inf entry replaces the score (hides the key) instead, so
	// that a NaN score from a hidden key does not survive as NaN + (−Inf).
	add func(row []float32, m *Tensor, off int)
	// allNegInf reports whether the n mask entries of m at off are all
	// −Inf.
	allNegInf func(m *Tensor, off, n int) bool
}

// maskTypes holds the mask readers of each mask element type.
var maskTypes = [...]maskKernels{
	F32:  maskOf(func(t *Tensor) []float32 { return t.f32 }, func(x float32) float32 { return x }),
	F16:  maskOf(func(t *Tensor) []fp16.Float16 { return t.f16 }, fp16.Float16.Float32),
	BF16: maskOf(func(t *Tensor) []fp16.BFloat16 { return t.bf16 }, fp16.BFloat16.Float32),
}

func maskOf[T any](data func(*Tensor) []T, conv func(T) float32) maskKernels {
	return maskKernels{
		add: func(row []float32, m *Tensor, off int) {
			for t, x := range data(m)[off:][:len(row)] {
				if v := conv(x); v == negInf {
					row[t] = negInf
				} else {
					row[t] += v
				}
			}
		},
		allNegInf: func(m *Tensor, off, n int) bool {
			for _, x := range data(m)[off:][:n] {
				if conv(x) != negInf {
					return false
				}
			}
			return true
		},
	}
}
