//go:build purego || !(amd64 || arm64)

package kernel

import "github.com/flashgo/flashgo/fp16"

// Without assembly (the purego tag, or an architecture flashgo has none
// for) every entry point is the generic kernel. Each has the contract of its
// exported namesake with the arguments already checked.

func qkt(s []float32, ldS int, q []float32, ldQ int, kt []float32, ldK int, rows, cols, d int, scale float32) {
	qktGeneric(s, ldS, q, ldQ, kt, ldK, rows, cols, d, scale)
}

func pv(o []float32, ldO int, p []float32, ldP int, v []float32, ldV int, rows, cols, d int) {
	pvGeneric(o, ldO, p, ldP, v, ldV, rows, cols, d)
}

func expSum(dst, src []float32, max float32) float32 { return expSumGeneric(dst, src, max) }

func maxOf(x []float32) float32 { return maxGeneric(x) }

func scale(dst, src []float32, a float32) { scaleGeneric(dst, src, a) }

func softCap(dst, src []float32, c, inv float32) { softCapGeneric(dst, src, c, inv) }

func packKT(dst []float32, ldDst int, src []float32, ldSrc int, n, d int) {
	packKTGeneric(dst, ldDst, src, ldSrc, n, d)
}

func packKTFloat16(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) {
	packKTFloat16Generic(dst, ldDst, src, ldSrc, n, d)
}

func packKTBFloat16(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) {
	packKTBFloat16Generic(dst, ldDst, src, ldSrc, n, d)
}

func packFloat16(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) {
	packFloat16Generic(dst, ldDst, src, ldSrc, n, d)
}

func packBFloat16(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) {
	packBFloat16Generic(dst, ldDst, src, ldSrc, n, d)
}
