package asmkit

import (
	"fmt"

	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/x86enc"
)

// The AMX tile instructions, which neither Go's assembler nor avo knows:
// x86enc encodes them and they are emitted as BYTE directives after a
// comment naming the instruction (Intel operand order). The register
// allocator cannot see the registers inside the bytes: an address or a
// stride must be in a physical register written just before the
// instruction (or kept live past it by a later read).

func tileMem(base, index GPPhysical) string {
	return fmt.Sprintf("[%s+%s*1]", base.Asm(), index.Asm())
}

// TileLoad emits TILELOADD tmm t, [base+index*1].
func TileLoad(t int, base, index GPPhysical) {
	x86enc.Emit(fmt.Sprintf("TILELOADD TMM%d, %s", t, tileMem(base, index)), x86enc.TILELOADD(t, x86enc.Num(base), x86enc.Num(index)))
}

// TileStore emits TILESTORED [base+index*1], tmm t.
func TileStore(base, index GPPhysical, t int) {
	x86enc.Emit(fmt.Sprintf("TILESTORED %s, TMM%d", tileMem(base, index), t), x86enc.TILESTORED(x86enc.Num(base), x86enc.Num(index), t))
}

// TileZero emits TILEZERO tmm t.
func TileZero(t int) {
	x86enc.Emit(fmt.Sprintf("TILEZERO TMM%d", t), x86enc.TILEZERO(t))
}

// TDPBF16PS emits TDPBF16PS tmm c, tmm a, tmm b: c += a·b over bfloat16
// pairs.
func TDPBF16PS(c, a, b int) {
	x86enc.Emit(fmt.Sprintf("TDPBF16PS TMM%d, TMM%d, TMM%d", c, a, b), x86enc.TDPBF16PS(c, a, b))
}

// LdTileCfg emits LDTILECFG [base].
func LdTileCfg(base GPPhysical) {
	x86enc.Emit(fmt.Sprintf("LDTILECFG [%s]", base.Asm()), x86enc.LDTILECFG(x86enc.Num(base)))
}

// StTileCfg emits STTILECFG [base].
func StTileCfg(base GPPhysical) {
	x86enc.Emit(fmt.Sprintf("STTILECFG [%s]", base.Asm()), x86enc.STTILECFG(x86enc.Num(base)))
}

// TileRelease emits TILERELEASE.
func TileRelease() {
	x86enc.Emit("TILERELEASE", x86enc.TILERELEASE())
}
