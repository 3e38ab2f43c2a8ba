package kernel

import (
	"math"

	"github.com/flashgo/flashgo/fp16"
)

// The generic kernels are the readable specification that the assembly is
// tested against, and they are also what runs where no assembly applies.
// They block four rows at a time so that each panel row loaded from memory
// feeds four accumulator rows, which is what lets the Go compiler keep them
// within a few times of the hardware without SIMD.

// qktChunk is the number of components summed into a fresh partial before
// the partial is added to the score: summing a long dot product in one
// float32 chain lets its rounding error grow with d, and chunking keeps it
// near that of a length-qktChunk sum, at the cost of one extra add per chunk
// (and, in the SIMD kernels, one pass over the score tile).
const qktChunk = 32

func qktGeneric(s []float32, ldS int, q []float32, ldQ int, kt []float32, ldK int, rows, cols, d int, scale float32) {
	var part [4][]float32
	var buf [4 * 64]float32
	for j0 := 0; j0 < cols; j0 += 64 {
		nc := min(64, cols-j0)
		for i := range 4 {
			part[i] = buf[i*64:][:nc]
		}
		i := 0
		for ; i < rows; i += 4 {
			nr := min(4, rows-i)
			var srow [4][]float32
			var qrow [4][]float32
			for r := range nr {
				srow[r] = s[(i+r)*ldS+j0:][:nc]
				qrow[r] = q[(i+r)*ldQ:][:d]
				clear(srow[r])
			}
			for k0 := 0; k0 < d; k0 += qktChunk {
				k1 := min(d, k0+qktChunk)
				for r := range nr {
					clear(part[r])
				}
				if nr == 4 {
					p0, p1, p2, p3 := part[0], part[1], part[2], part[3]
					for k := k0; k < k1; k++ {
						a0, a1, a2, a3 := qrow[0][k], qrow[1][k], qrow[2][k], qrow[3][k]
						krow := kt[k*ldK+j0:][:nc]
						for j, kv := range krow {
							p0[j] += a0 * kv
							p1[j] += a1 * kv
							p2[j] += a2 * kv
							p3[j] += a3 * kv
						}
					}
				} else {
					for r := range nr {
						pr := part[r]
						for k := k0; k < k1; k++ {
							a := qrow[r][k]
							krow := kt[k*ldK+j0:][:nc]
							for j, kv := range krow {
								pr[j] += a * kv
							}
						}
					}
				}
				for r := range nr {
					sr := srow[r]
					for j, x := range part[r] {
						sr[j] += x
					}
				}
			}
			for r := range nr {
				sr := srow[r]
				for j := range sr {
					sr[j] *= scale
				}
			}
		}
	}
}

func pvGeneric(o []float32, ldO int, p []float32, ldP int, v []float32, ldV int, rows, cols, d int) {
	i := 0
	for ; i+4 <= rows; i += 4 {
		o0 := o[i*ldO:][:d]
		o1 := o[(i+1)*ldO:][:d]
		o2 := o[(i+2)*ldO:][:d]
		o3 := o[(i+3)*ldO:][:d]
		p0 := p[i*ldP:][:cols]
		p1 := p[(i+1)*ldP:][:cols]
		p2 := p[(i+2)*ldP:][:cols]
		p3 := p[(i+3)*ldP:][:cols]
		for j := range cols {
			a0, a1, a2, a3 := p0[j], p1[j], p2[j], p3[j]
			vrow := v[j*ldV:][:d]
			for k, vv := range vrow {
				o0[k] += a0 * vv
				o1[k] += a1 * vv
				o2[k] += a2 * vv
				o3[k] += a3 * vv
			}
		}
	}
	for ; i < rows; i++ {
		orow := o[i*ldO:][:d]
		prow := p[i*ldP:][:cols]
		for j, a := range prow {
			vrow := v[j*ldV:][:d]
			for k, vv := range vrow {
				orow[k] += a * vv
			}
		}
	}
}

func expSumGeneric(dst, src []float32, max float32) float32 {
	var sum float32
	src = src[:len(dst)]
	for i, x := range src {
		e := Exp(x - max)
		dst[i] = e
		sum += e
	}
	return sum
}

func maxGeneric(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v != v {
			return v
		}
		if v > m {
			m = v
		}
	}
	return m
}

func softCapGeneric(dst, src []float32, c, inv float32) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] = c * Tanh(v*inv)
	}
}

func scaleGeneric(dst, src []float32, a float32) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] = a * v
	}
}

func packKTGeneric(dst []float32, ldDst int, src []float32, ldSrc int, n, d int) {
	for j := range n {
		row := src[j*ldSrc:][:d]
		for k, x := range row {
			dst[k*ldDst+j] = x
		}
	}
}

func packKTFloat16Generic(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) {
	for j := range n {
		row := src[j*ldSrc:][:d]
		for k, x := range row {
			dst[k*ldDst+j] = x.Float32()
		}
	}
}

func packKTBFloat16Generic(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) {
	for j := range n {
		row := src[j*ldSrc:][:d]
		for k, x := range row {
			dst[k*ldDst+j] = x.Float32()
		}
	}
}

func packFloat16Generic(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) {
	for j := range n {
		fp16.DecodeFloat16(dst[j*ldDst:][:d], src[j*ldSrc:][:d])
	}
}

func packBFloat16Generic(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) {
	for j := range n {
		fp16.DecodeBFloat16(dst[j*ldDst:][:d], src[j*ldSrc:][:d])
	}
}
