//go:build purego || !amd64

package kernel

import "github.com/flashgo/flashgo/fp16"

// Without bf16 assembly (arm64, other architectures, the purego tag) the
// bf16 entry points are the generic twins.

func qktBF16(s []float32, ldS int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, rows, cols, d int, scale float32) {
	qktBF16Generic(s, ldS, q, ldQ, kp, ldK, rows, cols, d, scale)
}

func pvBF16(o []float32, ldO int, p []fp16.BFloat16, ldP int, vp []fp16.BFloat16, ldV int, rows, cols, d int) {
	pvBF16Generic(o, ldO, p, ldP, vp, ldV, rows, cols, d)
}

func softmaxBF16(s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols int, scale float32, m, z, alpha []float32) {
	softmaxBF16Generic(s, ldS, p, ldP, rows, cols, scale, m, z, alpha)
}

func roundRowBF16(dst []fp16.BFloat16, src []float32) { roundRowBF16Generic(dst, src) }
