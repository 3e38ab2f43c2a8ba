package kernel

import "unsafe"

// The integer kernels of QKRowsQ8Dot: the dotRow selected (cur.dot; nil
// where QKRowsQ8Dot is the Go loop).

// int8DotBuilt reports whether this build has an integer kernel, so that
// Q8Query prepares its layout.
var int8DotBuilt = len(tableDot) > 0

// qkRowsQ8DotAsm computes the first dv components of QKRowsQ8Dot with the
// integer kernel of the active level and returns dv (0 where the generic
// code must do everything). The arguments are checked and every size is
// >= 1.
func qkRowsQ8DotAsm(s []float32, ldS int, q *Q8Query, k []int8, kScales []float32, ldK int, cols int, scale float32, ahead int) int {
	dv := q.d &^ 63
	kd := cur.dot
	if kd == nil || dv == 0 {
		return 0
	}
	kern, mr := kd.rows, kd.mr
	kp := unsafe.SliceData(k)
	for i0 := 0; i0 < q.rows; i0 += mr {
		kern(&s[i0*ldS], ldS, &q.prep[i0*q.prepLd], q.prepLd, kp, ldK, &kScales[0], min(mr, q.rows-i0), cols, dv, scale, ahead)
	}
	return dv
}

// qkRowsQ8DotGatherAsm is qkRowsQ8DotAsm for QKRowsQ8DotGather: key j's
// row at element off[j] of k, the row at pfo[j] prefetched.
func qkRowsQ8DotGatherAsm(s []float32, ldS int, q *Q8Query, k []int8, kScales []float32, off, pfo []int, cols int, scale float32) int {
	dv := q.d &^ 63
	kd := cur.dot
	if kd == nil || dv == 0 {
		return 0
	}
	kern, mr := kd.gather, kd.mr
	kp, ks, op, po := unsafe.SliceData(k), unsafe.SliceData(kScales), &off[0], &pfo[0]
	for i0 := 0; i0 < q.rows; i0 += mr {
		kern(&s[i0*ldS], ldS, &q.prep[i0*q.prepLd], q.prepLd, kp, op, po, ks, min(mr, q.rows-i0), cols, dv, scale)
	}
	return dv
}
