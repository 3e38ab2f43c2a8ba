package main

import (
	"github.com/flashgo/flashgo/attention"
	registry "github.com/flashgo/flashgo/internal/impl"
	"github.com/flashgo/flashgo/kernel"
)

// The kernel column names the implementation that ran a row's products,
// which is not always the kernel level (kernel.Implementation): the amx
// and avx512bf16 levels differ from avx512 only in the bfloat16 products
// (QKTBF16, PVBF16; kernel/cpu.go), so their float32 products run on the
// avx512 kernels, and where the CPU has no bf16 instructions the bf16
// products run on the float32 kernels of the level, on operands widened
// exactly to float32. Each function reads the level set now, so call them
// after -kernel's selection.

// f32Kernel is the implementation of the float32 products (QKT, PV, the
// row kernels): the level, or avx512 for amx and avx512bf16.
func f32Kernel() string {
	switch l := kernel.Implementation(); l {
	case kernel.AMX, kernel.AVX512BF16:
		return kernel.AVX512
	default:
		return l
	}
}

// widened labels the float32 kernels of level l running bf16 products on
// operands widened to float32; the generic level's bf16 products are Go
// loops of their own (kernel's generic twins), named plainly.
func widened(l string) string {
	if l == kernel.Generic {
		return l
	}
	return l + " (widened)"
}

// bf16Kernel is the implementation of the packed bf16 products
// (kernel.QKTBF16 and PVBF16): "amx" (TDPBF16PS tiles), "avx512bf16"
// (VDPBF16PS), "generic", or "avx512 (widened)", "avx2 (widened)" and
// "neon (widened)": the float32 FMA kernels of that level on widened
// operands.
func bf16Kernel() string {
	switch b := kernel.BF16Implementation(); b {
	case kernel.AMX, kernel.AVX512BF16:
		return b
	default:
		return widened(b)
	}
}

// rowKernel is the kernel column of a row of shape s with K/V type dt in
// precision prec: f32 rows name the float32 kernels, q8q rows them and the
// int8 dot product of their Q·Kᵀ ("avx512+avx512vnni"), bf16 rows the bf16
// products, or the float32 kernels where the call is computed in float32
// (attention.ComputedPrecision: decode, few query rows).
func rowKernel(s shape, dt attention.DType, prec attention.Precision) string {
	switch prec {
	case attention.PrecisionBFloat16:
		if attention.ComputedPrecision(attention.Options{Precision: prec}, s.heads, s.kvHeads, s.nq) == attention.PrecisionFloat32 {
			return f32Kernel()
		}
		return bf16Kernel()
	case precQ8Query:
		return f32Kernel() + "+" + registry.Current(registry.Int8Dot)
	}
	return f32Kernel()
}
