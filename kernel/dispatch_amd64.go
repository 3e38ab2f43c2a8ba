//go:build amd64 && !purego

package kernel

import (
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
)

// Each entry point picks the implementation chosen at start-up (see cpu.go).
// Arguments are checked by the exported wrappers: every size is >= 1 here,
// so taking the address of element 0 is safe.

func qkt(s []float32, ldS int, q []float32, ldQ int, kt []float32, ldK int, rows, cols, d int, scale float32) {
	switch active {
	case implAVX512:
		qktAVX512(&s[0], ldS, &q[0], ldQ, &kt[0], ldK, rows, cols, d, scale)
		return
	case implAVX2:
		qktAVX2(&s[0], ldS, &q[0], ldQ, &kt[0], ldK, rows, cols, d, scale)
		return
	}
	qktGeneric(s, ldS, q, ldQ, kt, ldK, rows, cols, d, scale)
}

func pv(o []float32, ldO int, p []float32, ldP int, v []float32, ldV int, rows, cols, d int) {
	switch active {
	case implAVX512:
		pvAVX512(&o[0], ldO, &p[0], ldP, &v[0], ldV, rows, cols, d)
		return
	case implAVX2:
		pvAVX2(&o[0], ldO, &p[0], ldP, &v[0], ldV, rows, cols, d)
		return
	}
	pvGeneric(o, ldO, p, ldP, v, ldV, rows, cols, d)
}

func expSum(dst, src []float32, max float32) float32 {
	switch active {
	case implAVX512:
		return expSumAVX512(&dst[0], &src[0], len(dst), max)
	case implAVX2:
		return expSumAVX2(&dst[0], &src[0], len(dst), max)
	}
	return expSumGeneric(dst, src, max)
}

func maxOf(x []float32) float32 {
	if len(x) == 0 {
		return maxGeneric(x)
	}
	switch active {
	case implAVX512:
		return maxAVX512(&x[0], len(x))
	case implAVX2:
		return maxAVX2(&x[0], len(x))
	}
	return maxGeneric(x)
}

func softCap(dst, src []float32, c, inv float32) {
	switch active {
	case implAVX512:
		softCapAVX512(&dst[0], &src[0], len(dst), c, inv)
		return
	case implAVX2:
		softCapAVX2(&dst[0], &src[0], len(dst), c, inv)
		return
	}
	softCapGeneric(dst, src, c, inv)
}

func scale(dst, src []float32, a float32) {
	switch active {
	case implAVX512:
		scaleAVX512(&dst[0], &src[0], len(dst), a)
		return
	case implAVX2:
		scaleAVX2(&dst[0], &src[0], len(dst), a)
		return
	}
	scaleGeneric(dst, src, a)
}

func packKT(dst []float32, ldDst int, src []float32, ldSrc int, n, d int) {
	switch active {
	case implAVX512:
		packKTAVX512(&dst[0], ldDst, &src[0], ldSrc, n, d)
		return
	case implAVX2:
		packKTAVX2(&dst[0], ldDst, &src[0], ldSrc, n, d)
		return
	}
	packKTGeneric(dst, ldDst, src, ldSrc, n, d)
}

func packKTFloat16(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) {
	switch active {
	case implAVX512:
		packKTF16AVX512(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		return
	case implAVX2:
		packKTF16AVX2(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		return
	}
	packKTFloat16Generic(dst, ldDst, src, ldSrc, n, d)
}

func packKTBFloat16(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) {
	switch active {
	case implAVX512:
		packKTBF16AVX512(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		return
	case implAVX2:
		packKTBF16AVX2(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		return
	}
	packKTBFloat16Generic(dst, ldDst, src, ldSrc, n, d)
}

func packFloat16(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) {
	switch active {
	case implAVX512:
		packF16AVX512(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		return
	case implAVX2:
		packF16AVX2(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		return
	}
	packFloat16Generic(dst, ldDst, src, ldSrc, n, d)
}

func packBFloat16(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) {
	switch active {
	case implAVX512:
		packBF16AVX512(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		return
	case implAVX2:
		packBF16AVX2(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		return
	}
	packBFloat16Generic(dst, ldDst, src, ldSrc, n, d)
}

// bits16 returns the address of the first 16-bit pattern of a half-precision slice.
func bits16[T fp16.Float16 | fp16.BFloat16](x []T) *uint16 {
	return (*uint16)(unsafe.Pointer(unsafe.SliceData(x)))
}
