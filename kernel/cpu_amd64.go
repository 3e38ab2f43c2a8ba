//go:build amd64 && !purego

package kernel

import "golang.org/x/sys/cpu"

// The features each implementation needs, checked together: the AVX2 path
// also converts fp16 with F16C and multiplies with FMA.
var (
	hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL
	hasAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C
)

func available() []impl {
	var a []impl
	if amxErr == nil { // AMX, AVX-512 with BF16, and the OS's permission
		a = append(a, implAMX)
	}
	if hasAVX512 && cpu.X86.HasAVX512BF16 {
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
