//go:build amd64 && !purego

package kernel

import "golang.org/x/sys/cpu"

// The CPU features of every row of the amd64 table, read here once. The
// AVX2 path also converts fp16 with F16C and multiplies with FMA; amxErr
// (amx_asm.go) says whether the AMX tiles can run.
var (
	hasAVX512     = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL
	hasAVX2       = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C
	hasAVX512BF16 = hasAVX512 && cpu.X86.HasAVX512BF16
	hasVNNI       = hasAVX512 && cpu.X86.HasAVX512VNNI // VPDPBUSD on 512-bit vectors
	hasAVXVNNI    = hasAVX2 && cpu.X86.HasAVXVNNI      // the VEX form, on 256-bit vectors
)

func available() []impl {
	var a []impl
	if amxErr == nil { // AMX, AVX-512 with BF16, and the OS's permission
		a = append(a, implAMX)
	}
	if hasAVX512BF16 {
		a = append(a, implAVX512BF16)
	}
	if hasAVX512 {
		a = append(a, implAVX512)
	}
	if hasAVX2 {
		a = append(a, implAVX2)
	}
	return append(a, implGeneric)
}

// defaultDot returns the integer kernel that goes with the float32 level
// f: VPDPBUSD where the CPU has AVX512-VNNI (at the avx512 level) or, on
// 256-bit vectors, AVX-VNNI, else AVX2's VPMADDUBSW; none (the Go loop)
// at the generic level.
func defaultDot(f impl) *dotRow {
	switch {
	case f != implAVX512 && f != implAVX2:
		return nil
	case hasVNNI && f == implAVX512:
		return dotAVX512VNNI
	case hasAVXVNNI:
		return dotAVXVNNI
	}
	return dotAVX2
}
