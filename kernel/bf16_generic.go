//go:build purego || !amd64

package kernel

import "github.com/flashgo/flashgo/fp16"

// Without bf16 assembly (arm64, other architectures, the purego tag) the
// bf16 products widen their operands for the float32 kernels where those
// are NEON (bf16_widen.go), and are the generic twins otherwise; the
// softmax and the rounding are the twins.

func qktBF16(s []float32, ldS int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, rows, cols, d int, scale float32) {
	if activeBF16 == implNEON {
		qktBF16Widen(s, ldS, q, ldQ, kp, ldK, rows, cols, d, scale)
		return
	}
	qktBF16Generic(s, ldS, q, ldQ, kp, ldK, rows, cols, d, scale)
}

func pvBF16(o []float32, ldO int, p []fp16.BFloat16, ldP int, vp []fp16.BFloat16, ldV int, rows, cols, d int) {
	if activeBF16 == implNEON {
		pvBF16Widen(o, ldO, p, ldP, vp, ldV, rows, cols, d)
		return
	}
	pvBF16Generic(o, ldO, p, ldP, vp, ldV, rows, cols, d)
}

func softmaxBF16(s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols int, scale float32, m, z, alpha []float32) {
	softmaxBF16Generic(s, ldS, p, ldP, rows, cols, scale, m, z, alpha)
}

func roundRowBF16(dst []fp16.BFloat16, src []float32) { roundRowBF16Generic(dst, src) }
