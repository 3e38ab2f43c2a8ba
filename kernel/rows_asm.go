package kernel

import (
	"math"
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
)

// The Go side of the row kernels: it cuts the rows into register blocks
// and hands each block to the kernel of the element type in the selected
// float32 row (f32Row.qkRows, pvRows, qkGather, pvGather). Where the row
// has none (mr 0) every function here returns 0 and the generic loops do
// everything.

// rowKind is the element type of K or V rows, as the kernels are named.
// rowQ8 and the kinds after it come with scales, which the kernels take a
// pointer to.
type rowKind int

const (
	rowF32 rowKind = iota
	rowF16
	rowBF16
	rowQ8
	rowE4M3 // fp16.Float8E4M3
	rowE5M2 // fp16.Float8E5M2

	numRowKinds
)

func kindOf[T RowElem](x []T) rowKind {
	switch any(x).(type) {
	case []fp16.Float16:
		return rowF16
	case []fp16.BFloat16:
		return rowBF16
	case []int8:
		return rowQ8
	case []fp16.Float8E4M3:
		return rowE4M3
	case []fp16.Float8E5M2:
		return rowE5M2
	}
	return rowF32
}

// rowBlocking returns the rows of the active assembly's register block and
// the components of rows of d elements of x's type that it handles: whole
// vectors, or whole Q8 blocks for int8. dv is 0 where there is no assembly.
func rowBlocking[T RowElem](x []T, d int) (mr, dv int) {
	mr, lanes := cur.f32.mr, cur.f32.lanes
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
	if mr > 0 && cur.f32.pvAnyWidth {
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
	kern := cur.f32.qkRows[kind]
	if kern == nil || !asmScale(kind, scales, scale) {
		return 0
	}
	ahead *= int(unsafe.Sizeof(k[0])) // in bytes
	var ks *float32
	if kind >= rowQ8 {
		ks = &scales[0]
	}
	kp := unsafe.Pointer(unsafe.SliceData(k))
	for i0 := 0; i0 < rows; i0 += mr {
		kern(&s[i0*ldS], ldS, &q[i0*ldQ], ldQ, kp, ldK, ks, min(mr, rows-i0), cols, dv, scale, ahead)
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
	kern := cur.f32.pvRows[kind]
	if kern == nil || !pvAsmScale(kind, scales) {
		return 0
	}
	ahead *= int(unsafe.Sizeof(v[0])) // in bytes
	var vs *float32
	if kind >= rowQ8 {
		vs = &scales[0]
	}
	vp := unsafe.Pointer(unsafe.SliceData(v))
	for i0 := 0; i0 < rows; i0 += mr {
		kern(&o[i0*ldO], ldO, &p[i0*ldP], ldP, vp, ldV, vs, min(mr, rows-i0), cols, dv, ahead)
	}
	return dv
}

// asmScale reports whether the QK assembly can take the key scales of
// rows of kind with the score scale: any but E4M3 scales whose product
// with scale, times 2^8, leaves the normal float32 range (the E4M3 kernels
// widen to the value times 2^−8 and fold 2^8 into the scale, which leaves
// every rounding as it is only inside that range); the generic code takes
// those.
func asmScale(kind rowKind, scales []float32, scale float32) bool {
	if kind != rowE4M3 {
		return true
	}
	const hi, lo = math.MaxFloat32 / 512, 0x1p-100
	ks := math.Abs(float64(scales[0]))
	f := math.Abs(float64(scale) * float64(scales[0]))
	return ks <= hi && (f == 0 || (f >= lo && f <= hi))
}

// pvAsmScale reports whether the PV assembly widens rows of kind as the
// scales say (PVRows passes 8-bit float values the widening scale of
// fp8ValueScale): the E4M3 assembly gives the values times 2^−8, so it
// runs only where that is the scale asked for.
func pvAsmScale(kind rowKind, scales []float32) bool {
	return kind != rowE4M3 || scales[0] == 0x1p-8
}

// rowKernels reports whether QKRows and PVRows run in assembly here
// (Capabilities.RowKernels).
func rowKernels() bool { return cur.f32.mr > 0 }

// qkRowsGatherAsm computes the first dv components of QKRowsGather with
// the gathering kernels of the selected row and returns dv (0 where there
// are none). The arguments are checked and every size is >= 1.
func qkRowsGatherAsm[T RowElem](s []float32, ldS int, q []float32, ldQ int, k []T, scales []float32, off, pfo []int, rows, cols, d int, scale float32) int {
	r := cur.f32
	if r.mr == 0 {
		return 0
	}
	kind := kindOf(k)
	if !asmScale(kind, scales, scale) {
		return 0
	}
	kern := r.qkGather[kind]
	if kern == nil {
		return qkRowsGatherRuns(s, ldS, q, ldQ, k, scales, off, pfo, rows, cols, d, scale)
	}
	mr, dv := rowBlocking(k, d)
	if dv == 0 {
		return 0
	}
	kp := unsafe.Pointer(unsafe.SliceData(k))
	var ks *float32
	if kind >= rowQ8 {
		ks = unsafe.SliceData(scales)
	}
	op, po := &off[0], &pfo[0]
	for i0 := 0; i0 < rows; i0 += mr {
		kern(&s[i0*ldS], ldS, &q[i0*ldQ], ldQ, kp, op, po, ks, min(mr, rows-i0), cols, dv, scale)
	}
	return dv
}

// pvRowsGatherAsm computes the first dv output columns of PVRowsGather
// and returns dv, as qkRowsGatherAsm (all d with AVX-512, pvBlocking).
func pvRowsGatherAsm[T RowElem](o []float32, ldO int, p []float32, ldP int, v []T, scales []float32, off, pfo []int, rows, cols, d int) int {
	r := cur.f32
	if r.mr == 0 {
		return 0
	}
	kind := kindOf(v)
	if !pvAsmScale(kind, scales) {
		return 0
	}
	kern := r.pvGather[kind]
	if kern == nil {
		return pvRowsGatherRuns(o, ldO, p, ldP, v, scales, off, pfo, rows, cols, d)
	}
	mr, dv := pvBlocking(v, d)
	if dv == 0 {
		return 0
	}
	vp := unsafe.Pointer(unsafe.SliceData(v))
	var vs *float32
	if kind >= rowQ8 {
		vs = unsafe.SliceData(scales)
	}
	op, po := &off[0], &pfo[0]
	for i0 := 0; i0 < rows; i0 += mr {
		kern(&o[i0*ldO], ldO, &p[i0*ldP], ldP, vp, op, po, vs, min(mr, rows-i0), cols, dv)
	}
	return dv
}
