//go:build amd64 && !purego

package kernel

import (
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
)

// rowKernels reports whether QKRows and PVRows run in assembly here
// (Capabilities.RowKernels).
func rowKernels() bool { return active == implAVX512 || active == implAVX2 }

// rowBlocking returns the rows of the active assembly's register block and
// the components of rows of d elements of x's type that it handles: whole
// vectors, or whole Q8 blocks for int8. dv is 0 where there is no assembly.
func rowBlocking[T RowElem](x []T, d int) (mr, dv int) {
	mr, lanes := 4, 16
	switch active {
	case implAVX512:
	case implAVX2:
		mr, lanes = 2, 8
	default:
		return 0, 0
	}
	if _, ok := any(x).([]int8); ok {
		lanes = Q8Block
	}
	return mr, d &^ (lanes - 1)
}

// qkRowsAsm computes the first dv components of QKRows in assembly and
// returns dv (0 when the generic code must do everything). The arguments
// are checked and every size is >= 1.
func qkRowsAsm[T RowElem](s []float32, ldS int, q []float32, ldQ int, k []T, scales []float32, ldK int, rows, cols, d int, scale float32, ahead int) int {
	mr, dv := rowBlocking(k, d)
	if dv == 0 {
		return 0
	}
	ahead *= int(unsafe.Sizeof(k[0])) // in bytes
	var ks *float32
	if _, ok := any(k).([]int8); ok {
		ks = &scales[0]
	}
	kp := unsafe.Pointer(unsafe.SliceData(k))
	for i0 := 0; i0 < rows; i0 += mr {
		rb := min(mr, rows-i0)
		sp, qp := &s[i0*ldS], &q[i0*ldQ]
		switch any(k).(type) {
		case []float32:
			if active == implAVX512 {
				qkRowsF32AVX512(sp, ldS, qp, ldQ, (*float32)(kp), ldK, ks, rb, cols, dv, scale, ahead)
			} else {
				qkRowsF32AVX2(sp, ldS, qp, ldQ, (*float32)(kp), ldK, ks, rb, cols, dv, scale, ahead)
			}
		case []int8:
			if active == implAVX512 {
				qkRowsQ8AVX512(sp, ldS, qp, ldQ, (*int8)(kp), ldK, ks, rb, cols, dv, scale, ahead)
			} else {
				qkRowsQ8AVX2(sp, ldS, qp, ldQ, (*int8)(kp), ldK, ks, rb, cols, dv, scale, ahead)
			}
		default:
			_, bf := any(k).([]fp16.BFloat16)
			switch {
			case active == implAVX512 && bf:
				qkRowsBF16AVX512(sp, ldS, qp, ldQ, (*uint16)(kp), ldK, ks, rb, cols, dv, scale, ahead)
			case active == implAVX512:
				qkRowsF16AVX512(sp, ldS, qp, ldQ, (*uint16)(kp), ldK, ks, rb, cols, dv, scale, ahead)
			case bf:
				qkRowsBF16AVX2(sp, ldS, qp, ldQ, (*uint16)(kp), ldK, ks, rb, cols, dv, scale, ahead)
			default:
				qkRowsF16AVX2(sp, ldS, qp, ldQ, (*uint16)(kp), ldK, ks, rb, cols, dv, scale, ahead)
			}
		}
	}
	return dv
}

// pvRowsAsm computes the first dv output columns of PVRows in assembly and
// returns dv. float32 values go to the PV kernel, which reads row-major V.
func pvRowsAsm[T RowElem](o []float32, ldO int, p []float32, ldP int, v []T, scales []float32, ldV int, rows, cols, d, ahead int) int {
	if f, ok := any(v).([]float32); ok {
		pv(o, ldO, p, ldP, f, ldV, rows, cols, d)
		return d
	}
	mr, dv := rowBlocking(v, d)
	if dv == 0 {
		return 0
	}
	ahead *= int(unsafe.Sizeof(v[0])) // in bytes
	var vs *float32
	if _, ok := any(v).([]int8); ok {
		vs = &scales[0]
	}
	vp := unsafe.Pointer(unsafe.SliceData(v))
	for i0 := 0; i0 < rows; i0 += mr {
		rb := min(mr, rows-i0)
		op, pp := &o[i0*ldO], &p[i0*ldP]
		switch any(v).(type) {
		case []int8:
			if active == implAVX512 {
				pvRowsQ8AVX512(op, ldO, pp, ldP, (*int8)(vp), ldV, vs, rb, cols, dv, ahead)
			} else {
				pvRowsQ8AVX2(op, ldO, pp, ldP, (*int8)(vp), ldV, vs, rb, cols, dv, ahead)
			}
		case []fp16.BFloat16:
			if active == implAVX512 {
				pvRowsBF16AVX512(op, ldO, pp, ldP, (*uint16)(vp), ldV, vs, rb, cols, dv, ahead)
			} else {
				pvRowsBF16AVX2(op, ldO, pp, ldP, (*uint16)(vp), ldV, vs, rb, cols, dv, ahead)
			}
		default:
			if active == implAVX512 {
				pvRowsF16AVX512(op, ldO, pp, ldP, (*uint16)(vp), ldV, vs, rb, cols, dv, ahead)
			} else {
				pvRowsF16AVX2(op, ldO, pp, ldP, (*uint16)(vp), ldV, vs, rb, cols, dv, ahead)
			}
		}
	}
	return dv
}
