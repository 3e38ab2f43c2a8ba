package asmkit

import (
	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Elem is an element type of a K or V tile or cache row, which the
// kernels widen to float32.
type Elem int

const (
	F32  Elem = iota
	F16       // IEEE binary16, widened exactly by VCVTPH2PS
	BF16      // bfloat16: the high half of a float32
	Q8        // int8 with a float32 scale per block of 32 elements
	E5M2      // OCP fp8 E5M2 (the top byte of a binary16), with one float32 scale
	E4M3      // OCP fp8 E4M3FN, with one float32 scale
)

// Size is the element size in bytes.
func (t Elem) Size() int { return [...]int{4, 2, 2, 1, 1, 1}[t] }

// Shift is log2 of Size.
func (t Elem) Shift() uint8 { return [...]uint8{2, 1, 1, 0, 0, 0}[t] }

// Name is the element type's part of a kernel name.
func (t Elem) Name() string { return [...]string{"F32", "F16", "BF16", "Q8", "E5M2", "E4M3"}[t] }

// GoType is the type of a pointer to the elements in a Go stub.
func (t Elem) GoType() string {
	return [...]string{"*float32", "*uint16", "*uint16", "*int8", "*uint8", "*uint8"}[t]
}

// IsFP8 reports whether t is one of the 8-bit float types, whose kernels
// widen in steps of their own (the decode generator's) and multiply by a
// single scale.
func (t Elem) IsFP8() bool { return t == E5M2 || t == E4M3 }

// Widen converts the vector of t elements at m (memory, or a register
// holding them) to float32 lanes in dst. Q8 values come out unscaled: the
// caller multiplies by their block's scale.
func (t Elem) Widen(m operand.Op, dst Register) {
	switch t {
	case F32:
		VMOVUPS(m, dst)
	case F16:
		VCVTPH2PS(m, dst)
	case BF16:
		VPMOVZXWD(m, dst)
		VPSLLD(operand.U8(16), dst, dst)
	case Q8:
		VPMOVSXBD(m, dst)
		VCVTDQ2PS(dst, dst)
	default:
		panic("asmkit: Widen of " + t.Name() + " (the decode generator widens fp8)")
	}
}

// WidenScalar copies one t element at (s) to the float32 at (d).
func (t Elem) WidenScalar(s, d Register) {
	v := GP32()
	switch t {
	case F32:
		MOVL(operand.Mem{Base: s}, v)
		MOVL(v, operand.Mem{Base: d})
	case F16:
		MOVWLZX(operand.Mem{Base: s}, v)
		x := XMM()
		VMOVD(v, x)
		VCVTPH2PS(x, x)
		VMOVSS(x, operand.Mem{Base: d})
	case BF16:
		MOVWLZX(operand.Mem{Base: s}, v)
		SHLL(operand.U8(16), v)
		MOVL(v, operand.Mem{Base: d})
	default:
		panic("asmkit: no scalar widening of " + t.Name())
	}
}
