//go:build amd64 && !purego

package kernel

import (
	"math"

	"github.com/flashgo/flashgo/fp16"
)

// The bf16 entry points pick the bf16 implementation chosen at start-up
// (activeBF16, see cpu.go). Arguments are checked by the exported wrappers
// and every size is >= 1.

func qktBF16(s []float32, ldS int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, rows, cols, d int, scale float32) {
	switch activeBF16 {
	case implAMX:
		qktBF16AMX(s, ldS, q, ldQ, kp, ldK, rows, cols, d, scale)
		return
	case implAVX512BF16:
		qktBF16AVX512(&s[0], ldS, (*uint16)(&q[0]), ldQ, (*uint16)(&kp[0]), ldK, rows, cols, d, scale)
		return
	case implAVX512, implAVX2:
		qktBF16Widen(s, ldS, q, ldQ, kp, ldK, rows, cols, d, scale)
		return
	}
	qktBF16Generic(s, ldS, q, ldQ, kp, ldK, rows, cols, d, scale)
}

func pvBF16(o []float32, ldO int, p []fp16.BFloat16, ldP int, vp []fp16.BFloat16, ldV int, rows, cols, d int) {
	switch activeBF16 {
	case implAMX:
		pvBF16AMX(o, ldO, p, ldP, vp, ldV, rows, cols, d)
		return
	case implAVX512BF16:
		pvBF16AVX512(&o[0], ldO, (*uint16)(&p[0]), ldP, (*uint16)(&vp[0]), ldV, rows, cols, d)
		return
	case implAVX512, implAVX2:
		pvBF16Widen(o, ldO, p, ldP, vp, ldV, rows, cols, d)
		return
	}
	pvBF16Generic(o, ldO, p, ldP, vp, ldV, rows, cols, d)
}

func softmaxBF16(s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols int, scale float32, m, z, alpha []float32) {
	// The vector paths take the maximum of the scores before scaling
	// them, so they need a scale that keeps the order and makes no NaN
	// (+Inf·0): a positive finite one.
	finite := scale > 0 && scale <= math.MaxFloat32
	if (activeBF16 == implAMX || activeBF16 == implAVX512BF16) && finite && cols > 0 {
		softmaxBF16AVX512(&s[0], ldS, bits16(p), ldP, rows, cols, scale, &m[0], &z[0], &alpha[0])
		return
	}
	if active == implGeneric || !finite {
		softmaxBF16Generic(s, ldS, p, ldP, rows, cols, scale, m, z, alpha)
		return
	}
	softmaxBF16Vec(s, ldS, p, ldP, rows, cols, scale, m, z, alpha)
}

// roundRowBF16 rounds len(dst) = len(src) >= 1 float32s to bfloat16
// (RoundBF16): with VCVTNEPS2BF16 where the bf16 level has AVX512-BF16.
func roundRowBF16(dst []fp16.BFloat16, src []float32) {
	switch activeBF16 {
	case implAMX, implAVX512BF16:
		roundBF16AVX512(bits16(dst), &src[0], len(dst))
		return
	}
	roundRowBF16Generic(dst, src)
}
