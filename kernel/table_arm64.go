//go:build arm64 && !purego

package kernel

import (
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel/internal/arm"
)

// The arm64 row of the implementation table: the NEON float32 kernels
// (rows of 16 lanes, 4 a block, no gathering kernels: a gather runs the
// row kernels over each run of evenly spaced rows), its bf16 products on
// operands widened by the Go loops (with the generic softmax and
// rounding), and no integer kernel.

func archTable() (f32 [numImpl]*f32Row, bf16 [numImpl]*bf16Row, dot []*dotRow) {
	n := neonRow()
	f32[implNEON] = n
	bf16[implNEON] = widenBF16Row(n, &bf16Row{widen: widenBF16Generic, widenPairs: widenPairsGeneric, addScale: addScaleGeneric})
	return f32, bf16, nil
}

func neonRow() *f32Row {
	return &f32Row{
		qkt: func(s []float32, ldS int, q []float32, ldQ int, kt []float32, ldK int, rows, cols, d int, scale float32) {
			arm.QktNEON(&s[0], ldS, &q[0], ldQ, &kt[0], ldK, rows, cols, d, scale)
		},
		pv: func(o []float32, ldO int, p []float32, ldP int, v []float32, ldV int, rows, cols, d int) {
			arm.PvNEON(&o[0], ldO, &p[0], ldP, &v[0], ldV, rows, cols, d)
		},
		expSum: func(dst, src []float32, max float32) float32 { return arm.ExpSumNEON(&dst[0], &src[0], len(dst), max) },
		max:    func(x []float32) float32 { return arm.MaxNEON(&x[0], len(x)) },
		softCap: func(dst, src []float32, c, inv float32) {
			// Whole vectors of 4 in the kernel, the rest in Go.
			if n4 := len(dst) &^ 3; n4 > 0 {
				arm.SoftCapNEON(&dst[0], &src[0], n4, c, inv)
				dst, src = dst[n4:], src[n4:len(dst)]
			}
			softCapGeneric(dst, src, c, inv)
		},
		scale: func(dst, src []float32, a float32) { arm.ScaleNEON(&dst[0], &src[0], len(dst), a) },
		packKT: func(dst []float32, ldDst int, src []float32, ldSrc int, n, d int) {
			arm.PackKTNEON(&dst[0], ldDst, &src[0], ldSrc, n, d)
		},
		packKTFloat16: func(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) {
			arm.PackKTF16NEON(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		},
		packKTBFloat16: func(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) {
			arm.PackKTBF16NEON(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		},
		packFloat16: func(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) {
			arm.PackF16NEON(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		},
		packBFloat16: func(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) {
			arm.PackBF16NEON(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		},
		matMulColumns: 16,
		mr:            4, lanes: 16,
		qkRows: [numRowKinds]qkRowsFunc{
			rowF32: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				arm.QkRowsF32NEON(s, ldS, q, ldQ, (*float32)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
			rowF16: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				arm.QkRowsF16NEON(s, ldS, q, ldQ, (*uint16)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
			rowBF16: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				arm.QkRowsBF16NEON(s, ldS, q, ldQ, (*uint16)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
			rowQ8: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				arm.QkRowsQ8NEON(s, ldS, q, ldQ, (*int8)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
			rowE5M2: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				arm.QkRowsE5M2NEON(s, ldS, q, ldQ, (*uint8)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
			rowE4M3: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				arm.QkRowsE4M3NEON(s, ldS, q, ldQ, (*uint8)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
		},
		pvRows: [numRowKinds]pvRowsFunc{
			rowF16: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int) {
				arm.PvRowsF16NEON(o, ldO, p, ldP, (*uint16)(v), ldV, vs, rows, cols, dv, ahead)
			},
			rowBF16: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int) {
				arm.PvRowsBF16NEON(o, ldO, p, ldP, (*uint16)(v), ldV, vs, rows, cols, dv, ahead)
			},
			rowQ8: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int) {
				arm.PvRowsQ8NEON(o, ldO, p, ldP, (*int8)(v), ldV, vs, rows, cols, dv, ahead)
			},
			rowE5M2: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int) {
				arm.PvRowsE5M2NEON(o, ldO, p, ldP, (*uint8)(v), ldV, vs, rows, cols, dv, ahead)
			},
			rowE4M3: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int) {
				arm.PvRowsE4M3NEON(o, ldO, p, ldP, (*uint8)(v), ldV, vs, rows, cols, dv, ahead)
			},
		},
	}
}
