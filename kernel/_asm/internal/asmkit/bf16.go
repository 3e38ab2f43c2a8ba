package asmkit

import (
	"fmt"

	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/x86enc"
)

// Vdpbf16ps emits VDPBF16PS dst, src1, src2 (Intel order): dst += the
// products of the bfloat16 pairs of src1 and src2, lane by lane. Go's
// assembler has no mnemonic for it: x86enc encodes it and it is emitted as
// BYTE directives after a comment naming it, so the register allocator
// cannot see its registers, which must be physical.
func Vdpbf16ps(dst, src1, src2 VecPhysical) {
	x86enc.Emit(fmt.Sprintf("VDPBF16PS %s, %s, %s", dst.Asm(), src1.Asm(), src2.Asm()),
		x86enc.VDPBF16PS(x86enc.Num(dst), x86enc.Num(src1), x86enc.Num(src2)))
}
