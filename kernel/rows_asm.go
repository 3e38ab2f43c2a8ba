//go:build (amd64 || arm64) && !purego

package kernel

import (
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
)

// The Go side of the row kernels on the architectures that have them: it
// cuts the rows into register blocks and hands each block to the kernel of
// the element type at the active level (qkRowsBlock and pvRowsBlock, in
// rows_asm_amd64.go and rows_arm64.go, with the blocking, rowBlock).

// rowKind is the element type of K or V rows, as the kernels are named.
type rowKind int

const (
	rowF32 rowKind = iota
	rowF16
	rowBF16
	rowQ8
)

func kindOf[T RowElem](x []T) rowKind {
	switch any(x).(type) {
	case []fp16.Float16:
		return rowF16
	case []fp16.BFloat16:
		return rowBF16
	case []int8:
		return rowQ8
	}
	return rowF32
}

// rowBlocking returns the rows of the active assembly's register block and
// the components of rows of d elements of x's type that it handles: whole
// vectors, or whole Q8 blocks for int8. dv is 0 where there is no assembly.
func rowBlocking[T RowElem](x []T, d int) (mr, dv int) {
	mr, lanes := rowBlock()
	if mr == 0 {
		return 0, 0
	}
	if kindOf(x) == rowQ8 {
		lanes = Q8Block
	}
	return mr, d &^ (lanes - 1)
}

// pvBlocking is rowBlocking for the PVRows kernels: where they take rows
// of any width (pvAnyWidth: AVX-512, whose last vector of a row goes
// through an opmask), dv is all of d.
func pvBlocking[T RowElem](x []T, d int) (mr, dv int) {
	mr, dv = rowBlocking(x, d)
	if mr > 0 && pvAnyWidth() {
		dv = d
	}
	return mr, dv
}

// qkRowsAsm computes the first dv components of QKRows in assembly and
// returns dv (0 when the generic code must do everything). The arguments
// are checked and every size is >= 1.
func qkRowsAsm[T RowElem](s []float32, ldS int, q []float32, ldQ int, k []T, scales []float32, ldK int, rows, cols, d int, scale float32, ahead int) int {
	mr, dv := rowBlocking(k, d)
	if dv == 0 {
		return 0
	}
	kind := kindOf(k)
	ahead *= int(unsafe.Sizeof(k[0])) // in bytes
	var ks *float32
	if kind == rowQ8 {
		ks = &scales[0]
	}
	kp := unsafe.Pointer(unsafe.SliceData(k))
	for i0 := 0; i0 < rows; i0 += mr {
		qkRowsBlock(kind, &s[i0*ldS], ldS, &q[i0*ldQ], ldQ, kp, ldK, ks, min(mr, rows-i0), cols, dv, scale, ahead)
	}
	return dv
}

// pvRowsAsm computes the first dv output columns of PVRows in assembly and
// returns dv (the caller adds the others with pvRowsTail). float32 values
// go to the PV kernel, which reads row-major V.
func pvRowsAsm[T RowElem](o []float32, ldO int, p []float32, ldP int, v []T, scales []float32, ldV int, rows, cols, d, ahead int) int {
	if f, ok := any(v).([]float32); ok {
		pv(o, ldO, p, ldP, f, ldV, rows, cols, d)
		return d
	}
	mr, dv := pvBlocking(v, d)
	if dv == 0 {
		return 0
	}
	kind := kindOf(v)
	ahead *= int(unsafe.Sizeof(v[0])) // in bytes
	var vs *float32
	if kind == rowQ8 {
		vs = &scales[0]
	}
	vp := unsafe.Pointer(unsafe.SliceData(v))
	for i0 := 0; i0 < rows; i0 += mr {
		pvRowsBlock(kind, &o[i0*ldO], ldO, &p[i0*ldP], ldP, vp, ldV, vs, min(mr, rows-i0), cols, dv, ahead)
	}
	return dv
}
