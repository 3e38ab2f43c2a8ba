// Package asmkit holds what flashgo's avo generators share: the
// description of the vector instruction sets (ISA), of the element types
// the kernels read and widen to float32 (Elem), the tail-mask tables
// that let a kernel touch only the first n lanes of a vector, and the
// register-blocked product that drives the matrix kernels of gemm and
// bf16 (Product).
//
// Every generated .s file is its own translation unit and its DATA symbols
// are file-local (name<>), so a generator that needs a table emits it under
// its own name; what is shared is the one function that writes it.
package asmkit

import (
	"strings"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	"github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
	"github.com/mmcloughlin/avo/x86"
)

// ISA describes one x86 vector instruction set as the kernels use it.
type ISA struct {
	Name     string // suffix of the Go functions: AVX512 or AVX2
	Doc      string // name in documentation
	VecBytes int    // bytes in one vector register
}

var (
	// AVX512 is AVX-512 (F, and VL/BW/DQ where a kernel says so): 32 zmm
	// registers and opmask tails.
	AVX512 = &ISA{Name: "AVX512", Doc: "AVX-512", VecBytes: 64}
	// AVX2 is AVX2 with FMA and F16C: 16 ymm registers and VMASKMOVPS
	// tails.
	AVX2 = &ISA{Name: "AVX2", Doc: "AVX2", VecBytes: 32}
)

// IsAVX512 says whether x has zmm registers and opmasks.
func (x *ISA) IsAVX512() bool { return x.VecBytes == 64 }

// Lanes is the number of float32 lanes of a vector.
func (x *ISA) Lanes() int { return x.VecBytes / 4 }

// NumRegs is the number of vector registers.
func (x *ISA) NumRegs() int {
	if x.IsAVX512() {
		return 32
	}
	return 16
}

// Vec returns a new virtual vector register of x's width.
func (x *ISA) Vec() VecVirtual {
	if x.IsAVX512() {
		return ZMM()
	}
	return YMM()
}

// Reg returns the physical vector register i (Zi or Yi).
func (x *ISA) Reg(i int) VecPhysical {
	if x.IsAVX512() {
		return zmm[i]
	}
	return ymm[i]
}

var zmm = []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
	Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31}

var ymm = []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}

// Zero clears v: VPXORD with AVX-512 (VXORPS on a zmm needs AVX512DQ),
// VXORPS otherwise.
func (x *ISA) Zero(v Register) {
	if x.IsAVX512() {
		VPXORD(v, v, v)
	} else {
		VXORPS(v, v, v)
	}
}

// ZeroIdiom clears v as Zero does, and tells avo that the instruction
// reads nothing: a register XORed with itself is the zeroing idiom, whose
// result does not depend on the register's value, but avo takes VPXORD's
// (and VXORPS's zmm) sources as read. A kernel that mixes the fixed
// registers of Product with avo's allocated ones needs it: a register
// "read" before it is written is live from the function's entry, and
// would take that physical register from the allocator everywhere.
func (x *ISA) ZeroIdiom(v Register) {
	var i *ir.Instruction
	var err error
	if x.IsAVX512() {
		i, err = x86.VPXORD(v, v, v)
	} else {
		i, err = x86.VXORPS(v, v, v)
	}
	if err != nil {
		panic(err)
	}
	i.CancellingInputs = true
	Instruction(i)
}

// Ret leaves the function with the upper halves of the vector registers
// cleared, so that the SSE code the Go compiler emits pays no transition
// penalty.
func Ret() {
	VZEROUPPER()
	RET()
}

// ParamAddr returns the stack address of the named argument, for an
// instruction that takes it as a memory operand.
func ParamAddr(name string) operand.Mem {
	c, err := Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	return c.Addr
}

// Export returns the name of a kernel as its package exports it: the
// kernels live in kernel/internal/x86, whose functions kernel calls, so
// each name starts with a capital letter.
func Export(name string) string {
	if name == "" {
		return name
	}
	return strings.ToUpper(name[:1]) + name[1:]
}
