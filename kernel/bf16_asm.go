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

// softmaxBF16Vec is OnlineSoftmaxBF16 made of the vector kernels, for a
// positive finite scale: the row maximum (maxOf; scale·max is the maximum of the
// scaled scores, rounding being monotone), then per chunk of the row the
// scaled scores (scale), their exponentials and sum (expSum) and the
// rounding to bfloat16 (roundRowBF16). The probabilities are those of
// softmaxBF16Generic bit for bit where the vector exponential is the
// scalar one; the row sum adds them in another order.
func softmaxBF16Vec(s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols int, sc float32, m, z, alpha []float32) {
	// Pass 1: each row's new maximum, and in alpha the exponent m − m_new
	// of its rescale factor, whose exponentials pass 2 takes in one vector
	// call (as OnlineSoftmax does). Pass 3: the probabilities and sums.
	for i := range rows {
		mNew := m[i]
		if cols > 0 {
			mNew = max(mNew, sc*maxOf(s[i*ldS:][:cols]))
		}
		if mNew == negInf {
			alpha[i] = 0 // exp(0) = 1, and no NaN from −Inf + Inf
			continue
		}
		alpha[i] = m[i] - mNew
		m[i] = mNew
	}
	expSum(alpha[:rows], alpha[:rows], 0)
	var buf [256]float32
	for i := range rows {
		row := s[i*ldS:][:cols]
		prow := p[i*ldP:][:cols]
		if m[i] == negInf {
			clear(prow)
			continue
		}
		var sum float32
		for j := 0; j < cols; j += len(buf) {
			n := min(len(buf), cols-j)
			b := buf[:n]
			if sc == 1 {
				sum += expSum(b, row[j:j+n], m[i])
			} else {
				scale(b, row[j:j+n], sc)
				sum += expSum(b, b, m[i])
			}
			roundRowBF16(prow[j:j+n], b)
		}
		z[i] = alpha[i]*z[i] + sum
	}
}
