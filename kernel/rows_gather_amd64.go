//go:build amd64 && !purego

package kernel

import "unsafe"

// qkRowsGatherAsm computes the first dv components of QKRowsGather with
// the gathering kernels of the active level and returns dv (0 where there
// are none). The arguments are checked and every size is >= 1.
func qkRowsGatherAsm[T RowElem](s []float32, ldS int, q []float32, ldQ int, k []T, scales []float32, off, pfo []int, rows, cols, d int, scale float32) int {
	mr, dv := rowBlocking(k, d)
	if dv == 0 {
		return 0
	}
	z := active == implAVX512
	kp := unsafe.Pointer(unsafe.SliceData(k))
	var ks *float32
	if kindOf(k) == rowQ8 {
		ks = unsafe.SliceData(scales)
	}
	op, po := &off[0], &pfo[0]
	for i0 := 0; i0 < rows; i0 += mr {
		sp, qp, r := &s[i0*ldS], &q[i0*ldQ], min(mr, rows-i0)
		switch kindOf(k) {
		case rowF32:
			if z {
				qkRowsGatherF32AVX512(sp, ldS, qp, ldQ, (*float32)(kp), op, po, ks, r, cols, dv, scale)
			} else {
				qkRowsGatherF32AVX2(sp, ldS, qp, ldQ, (*float32)(kp), op, po, ks, r, cols, dv, scale)
			}
		case rowF16:
			if z {
				qkRowsGatherF16AVX512(sp, ldS, qp, ldQ, (*uint16)(kp), op, po, ks, r, cols, dv, scale)
			} else {
				qkRowsGatherF16AVX2(sp, ldS, qp, ldQ, (*uint16)(kp), op, po, ks, r, cols, dv, scale)
			}
		case rowBF16:
			if z {
				qkRowsGatherBF16AVX512(sp, ldS, qp, ldQ, (*uint16)(kp), op, po, ks, r, cols, dv, scale)
			} else {
				qkRowsGatherBF16AVX2(sp, ldS, qp, ldQ, (*uint16)(kp), op, po, ks, r, cols, dv, scale)
			}
		case rowQ8:
			if z {
				qkRowsGatherQ8AVX512(sp, ldS, qp, ldQ, (*int8)(kp), op, po, ks, r, cols, dv, scale)
			} else {
				qkRowsGatherQ8AVX2(sp, ldS, qp, ldQ, (*int8)(kp), op, po, ks, r, cols, dv, scale)
			}
		}
	}
	return dv
}

// pvRowsGatherAsm computes the first dv output columns of PVRowsGather
// and returns dv, as qkRowsGatherAsm (all d with AVX-512, pvBlocking).
func pvRowsGatherAsm[T RowElem](o []float32, ldO int, p []float32, ldP int, v []T, scales []float32, off, pfo []int, rows, cols, d int) int {
	mr, dv := pvBlocking(v, d)
	if dv == 0 {
		return 0
	}
	z := active == implAVX512
	vp := unsafe.Pointer(unsafe.SliceData(v))
	var vs *float32
	if kindOf(v) == rowQ8 {
		vs = unsafe.SliceData(scales)
	}
	op, po := &off[0], &pfo[0]
	for i0 := 0; i0 < rows; i0 += mr {
		oo, pp, r := &o[i0*ldO], &p[i0*ldP], min(mr, rows-i0)
		switch kindOf(v) {
		case rowF32:
			if z {
				pvRowsGatherF32AVX512(oo, ldO, pp, ldP, (*float32)(vp), op, po, vs, r, cols, dv)
			} else {
				pvRowsGatherF32AVX2(oo, ldO, pp, ldP, (*float32)(vp), op, po, vs, r, cols, dv)
			}
		case rowF16:
			if z {
				pvRowsGatherF16AVX512(oo, ldO, pp, ldP, (*uint16)(vp), op, po, vs, r, cols, dv)
			} else {
				pvRowsGatherF16AVX2(oo, ldO, pp, ldP, (*uint16)(vp), op, po, vs, r, cols, dv)
			}
		case rowBF16:
			if z {
				pvRowsGatherBF16AVX512(oo, ldO, pp, ldP, (*uint16)(vp), op, po, vs, r, cols, dv)
			} else {
				pvRowsGatherBF16AVX2(oo, ldO, pp, ldP, (*uint16)(vp), op, po, vs, r, cols, dv)
			}
		case rowQ8:
			if z {
				pvRowsGatherQ8AVX512(oo, ldO, pp, ldP, (*int8)(vp), op, po, vs, r, cols, dv)
			} else {
				pvRowsGatherQ8AVX2(oo, ldO, pp, ldP, (*int8)(vp), op, po, vs, r, cols, dv)
			}
		}
	}
	return dv
}
