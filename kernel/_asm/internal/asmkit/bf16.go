package asmkit

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
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

// BF16Regs is the register block of the AVX512-BF16 products (QKTBF16,
// PVBF16 and the fused fold's): 6 rows × 4 zmm of accumulators Z0–Z23,
// B's vectors at the current pair in Z24–Z27, the A pairs broadcast
// alternately into Z28 and Z29.
var BF16Regs = &RegBlock{
	ISA: AVX512, MR: 6, NV: 4,
	Acc: func(r, v int) VecPhysical { return AVX512.Reg(r*4 + v) },
	B:   func(v int) VecPhysical { return AVX512.Reg(24 + v) },
	A:   func(r int) VecPhysical { return AVX512.Reg(28 + r%2) },
}

// BF16Product returns the driver of an AVX512-BF16 product named name on
// BF16Regs: bfloat16 A and B, each row's pair of A broadcast by
// VPBROADCASTD and multiplied in by VDPBF16PS, body the micro-kernel's;
// mask16 is the opmask table of its masked blocks (none: the zero Mem).
func BF16Product(name string, args ProductArgs, mask16 operand.Mem, body func(p *Product, rows int, b Block)) *Product {
	return &Product{
		RegBlock: BF16Regs, Name: name, Args: args, ElemShift: 1,
		Mask16:    mask16,
		Broadcast: func(m operand.Mem, dst VecPhysical) { VPBROADCASTD(m, dst) },
		MulAdd:    func(acc, b, a VecPhysical) { Vdpbf16ps(acc, b, a) },
		Body:      body,
	}
}
