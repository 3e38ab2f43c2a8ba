//go:build amd64 && !purego

package kernel

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasVNNI reports AVX512-VNNI (VPDPBUSD on 512-bit vectors).
var hasVNNI = cpu.X86.HasAVX512VNNI

// hasAVXVNNI reports AVX-VNNI (the VEX form of VPDPBUSD, on 256-bit
// vectors): the QKRowsQ8Dot kernel of the avx2 level where the CPU has it.
// Tests turn it off to run the VPMADDUBSW kernel on such CPUs too.
var hasAVXVNNI = cpu.X86.HasAVXVNNI

// int8DotBuilt reports whether this build has the VNNI kernel, so that
// Q8Query prepares its layout.
const int8DotBuilt = true

// int8Dot reports whether QKRowsQ8Dot runs on integer dot products here
// (Capabilities.Int8Dot): VPDPBUSD where the CPU has AVX512-VNNI (or, on
// 256-bit vectors, AVX-VNNI), else AVX2's VPMADDUBSW.
func int8Dot() bool { return active == implAVX512 || active == implAVX2 }

func int8DotName() string {
	switch {
	case !int8Dot():
		return "generic"
	case hasVNNI && active == implAVX512:
		return "avx512vnni"
	case hasAVXVNNI:
		return "avxvnni"
	}
	return "avx2"
}

// qkRowsQ8DotAsm computes the first dv components of QKRowsQ8Dot with the
// VNNI kernel and returns dv (0 where the generic code must do
// everything). The arguments are checked and every size is >= 1.
func qkRowsQ8DotAsm(s []float32, ldS int, q *Q8Query, k []int8, kScales []float32, ldK int, cols int, scale float32, ahead int) int {
	dv := q.d &^ 63
	if !int8Dot() || dv == 0 {
		return 0
	}
	kp := unsafe.SliceData(k)
	if hasVNNI && active == implAVX512 {
		const mr = 4
		for i0 := 0; i0 < q.rows; i0 += mr {
			qkRowsQ8DotAVX512(&s[i0*ldS], ldS, &q.prep[i0*q.prepLd], q.prepLd, kp, ldK, &kScales[0], min(mr, q.rows-i0), cols, dv, scale, ahead)
		}
		return dv
	}
	const mr = 2
	if hasAVXVNNI {
		for i0 := 0; i0 < q.rows; i0 += mr {
			qkRowsQ8DotAVXVNNI(&s[i0*ldS], ldS, &q.prep[i0*q.prepLd], q.prepLd, kp, ldK, &kScales[0], min(mr, q.rows-i0), cols, dv, scale, ahead)
		}
		return dv
	}
	for i0 := 0; i0 < q.rows; i0 += mr {
		qkRowsQ8DotAVX2(&s[i0*ldS], ldS, &q.prep[i0*q.prepLd], q.prepLd, kp, ldK, &kScales[0], min(mr, q.rows-i0), cols, dv, scale, ahead)
	}
	return dv
}

// qkRowsQ8DotGatherAsm is qkRowsQ8DotAsm for QKRowsQ8DotGather: key j's
// row at element off[j] of k, the row at pfo[j] prefetched.
func qkRowsQ8DotGatherAsm(s []float32, ldS int, q *Q8Query, k []int8, kScales []float32, off, pfo []int, cols int, scale float32) int {
	dv := q.d &^ 63
	if !int8Dot() || dv == 0 {
		return 0
	}
	kp, ks, op, po := unsafe.SliceData(k), unsafe.SliceData(kScales), &off[0], &pfo[0]
	mr, kern := 2, qkRowsQ8DotGatherAVX2
	switch {
	case hasVNNI && active == implAVX512:
		mr, kern = 4, qkRowsQ8DotGatherAVX512
	case hasAVXVNNI:
		kern = qkRowsQ8DotGatherAVXVNNI
	}
	for i0 := 0; i0 < q.rows; i0 += mr {
		kern(&s[i0*ldS], ldS, &q.prep[i0*q.prepLd], q.prepLd, kp, op, po, ks, min(mr, q.rows-i0), cols, dv, scale)
	}
	return dv
}
