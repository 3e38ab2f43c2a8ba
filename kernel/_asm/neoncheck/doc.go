// Package neoncheck holds no code: its test checks the hand-encoded NEON
// instructions of kernel/internal/arm/neon_arm64.s.
//
// The Go assembler has no mnemonic for several AdvSIMD instructions that
// the hand-written arm64 kernels use, so neon_arm64.s writes them as WORD
// directives, each followed by a comment holding the instruction it
// encodes in GNU syntax. The test requires that comment on every WORD,
// assembles the instructions with GNU as for arm64 and compares each
// encoding with the WORD's value:
//
//	cd kernel/_asm && go test ./neoncheck/
//
// It needs aarch64-linux-gnu-as and aarch64-linux-gnu-objdump (Debian's
// binutils-aarch64-linux-gnu) and skips without them. (The WORDs of
// rows_arm64.s are generated from GNU as by _asm/neonrows, and CI checks
// that regenerating changes nothing.)
package neoncheck
