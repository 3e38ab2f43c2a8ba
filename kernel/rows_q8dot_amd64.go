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

// dotKernel is which of the integer Q·Kᵀ kernels runs at the active
// level (int8Dot).
type dotKernel int

const (
	dotAVX2       dotKernel = iota // VPMADDUBSW
	dotAVXVNNI                     // VEX VPDPBUSD, 256-bit vectors
	dotAVX512VNNI                  // VPDPBUSD, 512-bit vectors
)

func activeDot() dotKernel {
	switch {
	case hasVNNI && active == implAVX512:
		return dotAVX512VNNI
	case hasAVXVNNI:
		return dotAVXVNNI
	}
	return dotAVX2
}

func int8DotName() string {
	if !int8Dot() {
		return "generic"
	}
	return [...]string{"avx2", "avxvnni", "avx512vnni"}[activeDot()]
}

// The kernels of each dotKernel, in place and gathering, with their rows
// per call.
var (
	dotRowsKernels   = [...]func(s *float32, ldS int, qp *byte, ldQP int, k *int8, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int){qkRowsQ8DotAVX2, qkRowsQ8DotAVXVNNI, qkRowsQ8DotAVX512}
	dotGatherKernels = [...]func(s *float32, ldS int, qp *byte, ldQP int, k *int8, off, pfo *int, ks *float32, rows, cols, dv int, scale float32){qkRowsQ8DotGatherAVX2, qkRowsQ8DotGatherAVXVNNI, qkRowsQ8DotGatherAVX512}
	dotKernelRows    = [...]int{2, 2, 4}
)

// qkRowsQ8DotAsm computes the first dv components of QKRowsQ8Dot with the
// integer kernel of the active level and returns dv (0 where the generic
// code must do everything). The arguments are checked and every size is
// >= 1.
func qkRowsQ8DotAsm(s []float32, ldS int, q *Q8Query, k []int8, kScales []float32, ldK int, cols int, scale float32, ahead int) int {
	dv := q.d &^ 63
	if !int8Dot() || dv == 0 {
		return 0
	}
	kd := activeDot()
	kern, mr := dotRowsKernels[kd], dotKernelRows[kd]
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
	if !int8Dot() || dv == 0 {
		return 0
	}
	kd := activeDot()
	kern, mr := dotGatherKernels[kd], dotKernelRows[kd]
	kp, ks, op, po := unsafe.SliceData(k), unsafe.SliceData(kScales), &off[0], &pfo[0]
	for i0 := 0; i0 < q.rows; i0 += mr {
		kern(&s[i0*ldS], ldS, &q.prep[i0*q.prepLd], q.prepLd, kp, op, po, ks, min(mr, q.rows-i0), cols, dv, scale)
	}
	return dv
}
