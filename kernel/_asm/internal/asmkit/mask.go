package asmkit

import (
	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Tail masks. A kernel that ends a row in a partial vector reads and
// writes its first n lanes only, through an opmask (AVX-512) or a
// VMASKMOVPS mask (AVX2) taken from one of these tables.

// Opmask16 emits the file-local table name of uint16 opmasks of first,
// first+1, ..., 16 lanes (entry i = 2^(first+i) − 1) and returns it.
func Opmask16(name string, first int) operand.Mem {
	m := GLOBL(name, RODATA|NOPTR)
	for i := 0; first+i <= 16; i++ {
		DATA(2*i, operand.U16(uint16(1<<(first+i)-1)))
	}
	return m
}

// Mask8 emits the file-local table name of eight int32 −1 then eight 0
// and returns it: the 32 bytes at 4·(8−n) are the VMASKMOVPS mask of the
// first n lanes, n in 0..8.
func Mask8(name string) operand.Mem {
	m := GLOBL(name, RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		v := operand.U32(0)
		if i < 8 {
			v = 0xffffffff
		}
		DATA(4*i, v)
	}
	return m
}

// LoadOpmask returns a new opmask of the first rem lanes (rem in 0..16)
// from an Opmask16 table whose first entry is 0 lanes.
func LoadOpmask(tbl operand.Mem, rem Register) Register {
	p := GP64()
	LEAQ(tbl, p)
	k := K()
	KMOVW(operand.Mem{Base: p, Index: rem, Scale: 2}, k)
	return k
}

// LoadMask8 returns a new ymm whose first rem int32 lanes are all ones
// (rem in 0..8), from a Mask8 table.
func LoadMask8(tbl operand.Mem, rem Register) VecVirtual {
	off := GP64()
	MOVQ(operand.U32(8), off)
	SUBQ(rem, off)
	p := GP64()
	LEAQ(tbl, p)
	m := YMM()
	VMOVDQU(operand.Mem{Base: p, Index: off, Scale: 4}, m)
	return m
}
