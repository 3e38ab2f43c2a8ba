// Package x86enc encodes the few x86-64 instructions that the kernel
// generators need and that neither Go's assembler nor avo knows: the
// AVX512-BF16 products and conversions, the AMX tile instructions, and the
// VEX form of AVX-VNNI's VPDPBUSD. A
// generator emits their bytes as BYTE directives with Emit.
//
// Registers are numbered as the hardware numbers them: general-purpose
// registers 0–15 (RAX=0, RCX=1, RDX=2, RBX=3, RSP=4, RBP=5, RSI=6, RDI=7,
// R8–R15=8–15), vector registers 0–31 and tile registers 0–7; Num maps an
// avo register to its number. Operands are given in Intel order
// (destination first), as the Intel SDM writes the instructions.
//
// Every function returns the bytes of one instruction and panics on a
// register number out of range or an operand the instruction cannot encode:
// both are mistakes of the generator, found when it runs.
//
// The encodings (EVEX for the AVX512-BF16 instructions, three-byte VEX for
// AMX and AVX-VNNI) follow the Intel SDM; the package's test compares them with the GNU
// assembler's for registers of every encoding class.
package x86enc

import (
	"fmt"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Hardware numbers of the general-purpose registers that addressing treats
// specially.
const (
	rsp = 4 // as a base it needs a SIB byte; it cannot be an index
	rbp = 5 // as a base (and R13) it needs a displacement
)

// Mandatory prefixes, as the pp field of VEX and EVEX encodes them.
const (
	ppNP = 0
	pp66 = 1
	ppF3 = 2
	ppF2 = 3
)

// mm0F38 is the opcode map 0F38 in VEX's m-mmmmm and EVEX's mm fields.
const mm0F38 = 2

// VPDPBUSDVEX returns the AVX-VNNI (VEX) form of VPDPBUSD ydst, ysrc1,
// ysrc2 (VEX.256.66.0F38.W0 50 /r): for each of the 8 int32 lanes, ydst +=
// the four products of the unsigned bytes of ysrc1 with the signed bytes
// of ysrc2 in that lane. Go's assembler knows only the EVEX form, which
// needs AVX512-VNNI and AVX512VL; the VEX form runs on CPUs with AVX-VNNI
// (Alder Lake, Sapphire Rapids, Zen 5) with or without AVX-512. VEX
// reaches registers 0–15 only.
func VPDPBUSDVEX(ydst, ysrc1, ysrc2 int) []byte {
	checkVec(ydst, ysrc1, ysrc2)
	if ydst > 15 || ysrc1 > 15 || ysrc2 > 15 {
		panic(fmt.Sprintf("x86enc: VEX VPDPBUSD reaches Y0–Y15, not Y%d, Y%d, Y%d", ydst, ysrc1, ysrc2))
	}
	b := vexReg(pp66, 0x50, ydst, ysrc1, ysrc2)
	b[2] |= 1 << 2 // L = 1: 256 bits
	return b
}

// VDPBF16PS returns VDPBF16PS zdst, zsrc1, zsrc2 (EVEX.512.F3.0F38.W0 52 /r):
// for each of the 16 float32 lanes, zdst += zsrc1.bf16[2i]·zsrc2.bf16[2i] +
// zsrc1.bf16[2i+1]·zsrc2.bf16[2i+1].
func VDPBF16PS(zdst, zsrc1, zsrc2 int) []byte {
	checkVec(zdst, zsrc1, zsrc2)
	return evexReg(ppF3, 0x52, zdst, zsrc1, zsrc2)
}

// VDPBF16PSBcst returns VDPBF16PS zdst, zsrc1, m32bcst with the broadcast
// memory operand dword [base+disp]{1to16} (EVEX.b = 1): the bfloat16 pair at
// base+disp multiplies the pairs of every lane of zsrc1. The displacement is
// encoded in 8 bits (scaled by 4, EVEX's disp8·N) where it is a multiple of
// 4 in [−512, 508], otherwise in 32.
func VDPBF16PSBcst(zdst, zsrc1, base int, disp int32) []byte {
	checkVec(zdst, zsrc1)
	checkGPR(base)
	return evexMem(ppF3, 0x52, zdst, zsrc1, base, disp, 4)
}

// VCVTNE2PS2BF16 returns VCVTNE2PS2BF16 zdst, zsrc1, zsrc2
// (EVEX.512.F2.0F38.W0 72 /r): the 32 bfloat16 of zdst are zsrc2's 16
// float32 rounded (the low half) then zsrc1's (the high half).
func VCVTNE2PS2BF16(zdst, zsrc1, zsrc2 int) []byte {
	checkVec(zdst, zsrc1, zsrc2)
	return evexReg(ppF2, 0x72, zdst, zsrc1, zsrc2)
}

// VCVTNEPS2BF16 returns VCVTNEPS2BF16 ydst, zsrc (EVEX.512.F3.0F38.W0 72
// /r): the 16 float32 of zsrc rounded to bfloat16 into the ymm ydst.
func VCVTNEPS2BF16(ydst, zsrc int) []byte {
	checkVec(ydst, zsrc)
	return evexReg(ppF3, 0x72, ydst, 0, zsrc) // vvvv unused: encoded as 1111, V' as 1
}

// LDTILECFG returns LDTILECFG [base] (VEX.128.NP.0F38.W0 49 /0): loads the
// 64-byte tile configuration at base.
func LDTILECFG(base int) []byte {
	checkGPR(base)
	return vexMem(ppNP, 0x49, 0, base, -1)
}

// STTILECFG returns STTILECFG [base] (VEX.128.66.0F38.W0 49 /0): stores the
// tile configuration into the 64 bytes at base.
func STTILECFG(base int) []byte {
	checkGPR(base)
	return vexMem(pp66, 0x49, 0, base, -1)
}

// TILELOADD returns TILELOADD tdst, [base+index*1] (VEX.128.F2.0F38.W0 4B
// /r): loads tile tdst from rows index bytes apart starting at base. The
// index cannot be RSP.
func TILELOADD(tdst, base, index int) []byte {
	checkTile(tdst)
	checkGPR(base, index)
	return vexMem(ppF2, 0x4b, tdst, base, index)
}

// TILELOADDT1 returns TILELOADDT1 tdst, [base+index*1] (VEX.128.66.0F38.W0
// 4B /r): TILELOADD with the hint that the data need not stay in the
// nearest caches.
func TILELOADDT1(tdst, base, index int) []byte {
	checkTile(tdst)
	checkGPR(base, index)
	return vexMem(pp66, 0x4b, tdst, base, index)
}

// TILESTORED returns TILESTORED [base+index*1], tsrc (VEX.128.F3.0F38.W0 4B
// /r): stores tile tsrc as rows index bytes apart starting at base. The
// index cannot be RSP.
func TILESTORED(base, index, tsrc int) []byte {
	checkTile(tsrc)
	checkGPR(base, index)
	return vexMem(ppF3, 0x4b, tsrc, base, index)
}

// TILEZERO returns TILEZERO t (VEX.128.F2.0F38.W0 49 11:rrr:000): zeroes
// tile t.
func TILEZERO(t int) []byte {
	checkTile(t)
	return vexReg(ppF2, 0x49, t, 0, 0)
}

// TDPBF16PS returns TDPBF16PS tdst, ta, tb (VEX.128.F3.0F38.W0 5C
// 11:rrr:bbb, vvvv = tb): tdst += ta·tb, with ta's rows holding bfloat16
// pairs of the reduction side and tb's rows pairs of the columns. The three
// tiles must be distinct (the instruction faults otherwise).
func TDPBF16PS(tdst, ta, tb int) []byte {
	checkTile(tdst, ta, tb)
	if tdst == ta || tdst == tb || ta == tb {
		panic(fmt.Sprintf("x86enc: TDPBF16PS tmm%d, tmm%d, tmm%d: the tiles must be distinct", tdst, ta, tb))
	}
	return vexReg(ppF3, 0x5c, tdst, tb, ta)
}

// TILERELEASE returns TILERELEASE (C4 E2 78 49 C0): returns the tiles to
// their initial, unconfigured state.
func TILERELEASE() []byte {
	return vexReg(ppNP, 0x49, 0, 0, 0)
}

// Emit adds the bytes b to the active avo function as BYTE directives, one
// a byte, after a comment naming the instruction they encode (in Intel
// operand order, e.g. "VDPBF16PS Z3, Z28, Z0").
func Emit(comment string, b []byte) {
	build.Comment(comment)
	for _, x := range b {
		build.Instruction(&ir.Instruction{Opcode: "BYTE", Operands: []operand.Op{operand.U8(x)}})
	}
}

// Num returns the hardware number of an avo physical register: 0–15 for a
// general-purpose register of any width, 0–31 for X, Y and Z registers.
func Num(r reg.Physical) int { return int(r.PhysicalIndex()) }

// bit returns bit i of x, inverted when inv (VEX and EVEX store the register
// extension bits and vvvv inverted).
func bit(x, i int, inv bool) byte {
	b := byte(x>>i) & 1
	if inv {
		b ^= 1
	}
	return b
}

func modrm(mod, reg, rm int) byte { return byte(mod<<6 | (reg&7)<<3 | rm&7) }

// evexReg encodes a 512-bit, W0, map 0F38, unmasked EVEX instruction whose
// operands are the registers reg (ModRM.reg), vvvv and rm (ModRM.rm).
func evexReg(pp byte, op byte, reg, vvvv, rm int) []byte {
	p0 := bit(reg, 3, true)<<7 | bit(rm, 4, true)<<6 | bit(rm, 3, true)<<5 | bit(reg, 4, true)<<4 | mm0F38
	p1 := byte(^vvvv&15)<<3 | 1<<2 | pp
	p2 := byte(2)<<5 | bit(vvvv, 4, true)<<3 // L'L = 10 (512 bits), b = 0, aaa = 0
	return []byte{0x62, p0, p1, p2, op, modrm(3, reg, rm)}
}

// evexMem encodes the EVEX instruction of evexReg with a 32-bit broadcast
// memory operand [base+disp] in place of rm; n is the scale of disp8.
func evexMem(pp byte, op byte, reg, vvvv, base int, disp int32, n int32) []byte {
	p0 := bit(reg, 3, true)<<7 | 1<<6 | bit(base, 3, true)<<5 | bit(reg, 4, true)<<4 | mm0F38 // X: no index
	p1 := byte(^vvvv&15)<<3 | 1<<2 | pp
	p2 := byte(2)<<5 | 1<<4 | bit(vvvv, 4, true)<<3 // L'L = 10, b = 1: {1to16}
	return append([]byte{0x62, p0, p1, p2, op}, memDisp(reg, base, -1, disp, n)...)
}

// vexReg encodes a three-byte VEX, 128-bit, W0, map 0F38 instruction
// whose operands are the registers reg (ModRM.reg), vvvv and rm (ModRM.rm,
// mod = 11).
func vexReg(pp byte, op byte, reg, vvvv, rm int) []byte {
	b1 := bit(reg, 3, true)<<7 | 1<<6 | bit(rm, 3, true)<<5 | mm0F38
	b2 := byte(^vvvv&15)<<3 | pp // W = 0, L = 0
	return []byte{0xc4, b1, b2, op, modrm(3, reg, rm)}
}

// vexMem encodes the VEX instruction of vexReg with the memory operand
// [base] (index < 0) or [base+index*1] in place of rm; vvvv is unused
// (1111).
func vexMem(pp byte, op byte, reg, base, index int) []byte {
	x := byte(1) // no index
	if index >= 0 {
		x = bit(index, 3, true)
	}
	b1 := bit(reg, 3, true)<<7 | x<<6 | bit(base, 3, true)<<5 | mm0F38
	b2 := byte(15)<<3 | pp
	return append([]byte{0xc4, b1, b2, op}, memDisp(reg, base, index, 0, 1)...)
}

// memDisp returns the ModRM, SIB and displacement of [base+index*1+disp]
// (no index when index < 0) with reg in ModRM.reg, disp8 scaled by n.
func memDisp(reg, base, index int, disp int32, n int32) []byte {
	if index == rsp {
		panic("x86enc: RSP cannot be an index register")
	}
	var d []byte
	mod := 0
	switch {
	case disp == 0 && base&7 != rbp:
	case disp%n == 0 && disp/n >= -128 && disp/n <= 127:
		mod, d = 1, []byte{byte(int8(disp / n))}
	default:
		mod, d = 2, []byte{byte(disp), byte(disp >> 8), byte(disp >> 16), byte(disp >> 24)}
	}
	var out []byte
	if index < 0 && base&7 != rsp {
		out = []byte{modrm(mod, reg, base)}
	} else {
		idx := rsp // SIB index 100: none
		if index >= 0 {
			idx = index
		}
		out = []byte{modrm(mod, reg, 4), byte((idx&7)<<3 | base&7)} // scale 1
	}
	return append(out, d...)
}

func checkGPR(r ...int) {
	for _, x := range r {
		if x < 0 || x > 15 {
			panic(fmt.Sprintf("x86enc: general-purpose register %d out of range 0–15", x))
		}
	}
}

func checkVec(r ...int) {
	for _, x := range r {
		if x < 0 || x > 31 {
			panic(fmt.Sprintf("x86enc: vector register %d out of range 0–31", x))
		}
	}
}

func checkTile(r ...int) {
	for _, x := range r {
		if x < 0 || x > 7 {
			panic(fmt.Sprintf("x86enc: tile register %d out of range 0–7", x))
		}
	}
}
