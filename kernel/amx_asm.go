//go:build amd64 && !purego

package kernel

import (
	"errors"
	"fmt"

	"golang.org/x/sys/cpu"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel/internal/x86"
)

// AMX: the bf16 products on Intel's tile unit (TDPBF16PS), from Sapphire
// Rapids on. The amx implementation is available only when
//
//   - CPUID reports AMX-TILE and AMX-BF16 (leaf 7, EDX bits 24 and 22; x/sys/cpu
//     reads them, without looking at XCR0), and AVX-512 F, BW, VL and BF16,
//     which every AMX CPU has and the float32 kernels of the level use;
//   - the OS has enabled the tile configuration and the tile data in XCR0
//     (bits 17 and 18, read with XGETBV);
//   - the OS has granted the process the tile data (requestAMXPermission:
//     on Linux, without it the first tile instruction kills the process).
//
// All three are settled at package initialisation, before the level is
// chosen (cpu.go's level depends on available, which reads amxErr), so no
// tile instruction can run before the permission is granted.

// xcr0Tiles are XCR0's XTILECFG (17) and XTILEDATA (18) bits.
const xcr0Tiles = 1<<17 | 1<<18

// amxErr is nil when the AMX kernels can run here, or says what is missing.
var amxErr = enableAMX()

var errNoAMX = errors.New("this machine has no AMX-BF16")

func enableAMX() error {
	switch {
	case !cpu.X86.HasAMXTile || !cpu.X86.HasAMXBF16:
		return errNoAMX
	case !hasAVX512 || !cpu.X86.HasAVX512BF16:
		// hasAVX512 also says the OS saves the AVX-512 state, which
		// implies OSXSAVE: XGETBV below does not fault.
		return errors.New("this machine has AMX but not AVX-512 F, BW, VL and BF16")
	}
	if x := x86.AmxXCR0(); x&xcr0Tiles != xcr0Tiles {
		return fmt.Errorf("the OS has not enabled the AMX tile state (XCR0 = %#x)", x)
	}
	if err := requestAMXPermission(); err != nil {
		return fmt.Errorf("the OS did not grant AMX permission: %w", err)
	}
	return nil
}

// Flags of x86.AmxTiles (the generator's flagLoadC and flagScale).
const (
	amxLoadC = 1 // start each tile of C from memory rather than from zero
	amxScale = 2 // multiply C by the scale once stored
)

// amxConfig returns the tile configuration (palette 1) of x86.AmxTiles for
// tiles of C of m rows × n columns and k steps of kp bfloat16 pairs: C in
// tmm0–3 (m rows of 4n bytes), A in tmm4–5 (m rows of 4kp bytes), B in
// tmm6–7 (kp rows of 4n bytes). The layout is the SDM's: byte 0 the
// palette, bytes 16–31 the bytes per row of tiles 0–7 (uint16), bytes 48–55
// their rows; every other byte must be zero.
func amxConfig(m, n, kp int) (cfg [64]byte) {
	cfg[0] = 1
	set := func(t, rows, colsb int) {
		cfg[16+2*t] = byte(colsb)
		cfg[16+2*t+1] = byte(colsb >> 8)
		cfg[48+t] = byte(rows)
	}
	for t := range 4 {
		set(t, m, 4*n)
	}
	set(4, m, 4*kp)
	set(5, m, 4*kp)
	set(6, kp, 4*n)
	set(7, kp, 4*n)
	return cfg
}

// amxPart is a run of tiles of one size along a side of a product: tiles
// tiles of size elements (rows, columns or pairs), from element off on.
type amxPart struct{ off, tiles, size int }

// amxSplit cuts a side of n >= 1 elements into tiles of at most 16: the
// whole tiles, then the partial one. It returns one or two parts.
func amxSplit(n int) (parts [2]amxPart, k int) {
	if n >= 16 {
		parts[k] = amxPart{0, n / 16, 16}
		k++
	}
	if r := n % 16; r > 0 {
		parts[k] = amxPart{n - r, 1, r}
		k++
	}
	return parts, k
}

// qktBF16AMX is QKTBF16 on the tiles (sizes >= 1, d even): one x86.AmxTiles
// call for each part of the rows, of the keys and of the d/2 pairs. The
// first pair part of a block starts from zero, the second adds to the
// sums the first stored, and the last applies the scale: each score is
// summed pair by pair in qktBF16Generic's order, then scaled.
func qktBF16AMX(s []float32, ldS int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, rows, cols, d int, scale float32) {
	rp, nr := amxSplit(rows)
	cp, nc := amxSplit(cols)
	tp, nt := amxSplit(d / 2)
	for _, r := range rp[:nr] {
		for _, c := range cp[:nc] {
			for i, t := range tp[:nt] {
				var flags uint8
				if i > 0 {
					flags |= amxLoadC
				}
				if i == nt-1 && scale != 1 { // 1·x is x: no pass
					flags |= amxScale
				}
				cfg := amxConfig(r.size, c.size, t.size)
				x86.AmxTiles(&cfg, &s[r.off*ldS+c.off], ldS, bits16(q[r.off*ldQ+2*t.off:]), ldQ,
					bits16(kp[t.off*ldK+2*c.off:]), ldK, r.tiles, c.tiles, t.tiles, r.size, c.size, t.size, flags, scale)
			}
		}
	}
}

// pvBF16AMX is PVBF16 on the tiles (sizes >= 1, cols even): one x86.AmxTiles
// call for each part of the rows, of the d output columns and of the
// cols/2 key pairs, each adding to o.
func pvBF16AMX(o []float32, ldO int, p []fp16.BFloat16, ldP int, vp []fp16.BFloat16, ldV int, rows, cols, d int) {
	rp, nr := amxSplit(rows)
	cp, nc := amxSplit(d)
	tp, nt := amxSplit(cols / 2)
	for _, r := range rp[:nr] {
		for _, c := range cp[:nc] {
			for _, t := range tp[:nt] {
				cfg := amxConfig(r.size, c.size, t.size)
				x86.AmxTiles(&cfg, &o[r.off*ldO+c.off], ldO, bits16(p[r.off*ldP+2*t.off:]), ldP,
					bits16(vp[t.off*ldV+2*c.off:]), ldV, r.tiles, c.tiles, t.tiles, r.size, c.size, t.size, amxLoadC, 1)
			}
		}
	}
}

// foldChunkAMX and foldChunkAVX512 are FoldChunkBF16 in one call of the
// level's fused kernel (cols, d and dv multiples of 32, a positive finite
// scale: fusesChunk), whose row tiles are 16 and 12 rows.
var (
	foldChunkAMX    = fusedChunk(x86.FoldChunkAMX, 16)
	foldChunkAVX512 = fusedChunk(x86.FoldChunkBF16AVX512, 12)
)

// fusedChunk returns FoldChunkBF16 on the fused kernel k, whose row tiles
// are tileRows rows.
func fusedChunk(k func(q *uint16, ldQ int, kp *uint16, ldK int, vp *uint16, ldV int, o *float32, ldO int, s *float32, ldS int,
	p *uint16, ldP int, rows, cols, d, dv, piece int, scale float32, m, z, alpha *float32, lo, vis *int), tileRows int) foldChunkFunc {
	return func(o []float32, ldO int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, vp []fp16.BFloat16, ldV int,
		s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols, d, dv int, scale float32, m, z, alpha []float32, lo, vis []int) {
		var lp, vq *int
		if lo != nil {
			lp, vq = &lo[0], &vis[0]
		}
		k(bits16(q), ldQ, bits16(kp), ldK, bits16(vp), ldV, &o[0], ldO, &s[0], ldS, bits16(p), ldP,
			rows, cols, d, dv, chunkPiece(cols, tileRows), scale, &m[0], &z[0], &alpha[0], lp, vq)
	}
}
