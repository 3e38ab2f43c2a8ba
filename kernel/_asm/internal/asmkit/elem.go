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
)

// Size is the element size in bytes.
func (t Elem) Size() int { return [...]int{4, 2, 2, 1}[t] }

// Shift is log2 of Size.
func (t Elem) Shift() uint8 { return [...]uint8{2, 1, 1, 0}[t] }

// Name is the element type's part of a kernel name.
func (t Elem) Name() string { return [...]string{"F32", "F16", "BF16", "Q8"}[t] }

// GoType is the type of a pointer to the elements in a Go stub.
func (t Elem) GoType() string { return [...]string{"*float32", "*uint16", "*uint16", "*int8"}[t] }

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
