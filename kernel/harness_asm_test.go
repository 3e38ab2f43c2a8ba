//go:build (amd64 || arm64) && !purego

package kernel

import (
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/internal/impltest"
)

// The helpers of the tests of the assembly kernels (vec_amd64_test.go,
// gemm_amd64_test.go, neon_arm64_test.go), which lay their operands out in
// guarded blocks (impltest.Block).

// guardedBlock is a float32 block of those tests.
type guardedBlock = impltest.Block[float32]

// blockTrail is the number of guard elements after a block.
const blockTrail = 16

// asF16 and asBF16 view the 16-bit elements the pack kernels read as
// binary16 and bfloat16, for their generic twins.
func asF16(s []uint16) []fp16.Float16 {
	return unsafe.Slice((*fp16.Float16)(unsafe.Pointer(&s[0])), len(s))
}

func asBF16(s []uint16) []fp16.BFloat16 {
	return unsafe.Slice((*fp16.BFloat16)(unsafe.Pointer(&s[0])), len(s))
}
