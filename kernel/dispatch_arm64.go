//go:build arm64 && !purego

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
	case implNEON:
		qktNEON(&s[0], ldS, &q[0], ldQ, &kt[0], ldK, rows, cols, d, scale)
		return
	}
	qktGeneric(s, ldS, q, ldQ, kt, ldK, rows, cols, d, scale)
}

func pv(o []float32, ldO int, p []float32, ldP int, v []float32, ldV int, rows, cols, d int) {
	switch active {
	case implNEON:
		pvNEON(&o[0], ldO, &p[0], ldP, &v[0], ldV, rows, cols, d)
		return
	}
	pvGeneric(o, ldO, p, ldP, v, ldV, rows, cols, d)
}

func expSum(dst, src []float32, max float32) float32 {
	switch active {
	case implNEON:
		return expSumNEON(&dst[0], &src[0], len(dst), max)
	}
	return expSumGeneric(dst, src, max)
}

func maxOf(x []float32) float32 {
	if len(x) == 0 {
		return maxGeneric(x)
	}
	switch active {
	case implNEON:
		return maxNEON(&x[0], len(x))
	}
	return maxGeneric(x)
}

func softCap(dst, src []float32, c, inv float32) {
	if active == implNEON {
		if n4 := len(dst) &^ 3; n4 > 0 {
			softCapNEON(&dst[0], &src[0], n4, c, inv)
			dst, src = dst[n4:], src[n4:len(dst)]
		}
	}
	softCapGeneric(dst, src, c, inv)
}

func scale(dst, src []float32, a float32) {
	switch active {
	case implNEON:
		scaleNEON(&dst[0], &src[0], len(dst), a)
		return
	}
	scaleGeneric(dst, src, a)
}

func packKT(dst []float32, ldDst int, src []float32, ldSrc int, n, d int) {
	switch active {
	case implNEON:
		packKTNEON(&dst[0], ldDst, &src[0], ldSrc, n, d)
		return
	}
	packKTGeneric(dst, ldDst, src, ldSrc, n, d)
}

func packKTFloat16(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) {
	switch active {
	case implNEON:
		packKTF16NEON(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		return
	}
	packKTFloat16Generic(dst, ldDst, src, ldSrc, n, d)
}

func packKTBFloat16(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) {
	switch active {
	case implNEON:
		packKTBF16NEON(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		return
	}
	packKTBFloat16Generic(dst, ldDst, src, ldSrc, n, d)
}

func packFloat16(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) {
	switch active {
	case implNEON:
		packF16NEON(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		return
	}
	packFloat16Generic(dst, ldDst, src, ldSrc, n, d)
}

func packBFloat16(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) {
	switch active {
	case implNEON:
		packBF16NEON(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		return
	}
	packBFloat16Generic(dst, ldDst, src, ldSrc, n, d)
}

// bits16 returns the address of the first 16-bit pattern of a half-precision slice.
func bits16[T fp16.Float16 | fp16.BFloat16](x []T) *uint16 {
	return (*uint16)(unsafe.Pointer(unsafe.SliceData(x)))
}
