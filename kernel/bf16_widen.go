package kernel

import "github.com/flashgo/flashgo/fp16"

// The bfloat16 products on CPUs without bf16 instructions (AVX2, AVX-512
// without AVX512-BF16, NEON): the operands are widened to float32, exactly
// (a bfloat16 is a float32 with its low 16 bits zero, subnormals flushed to
// zero as the bf16 instructions read them), a block at a time into stack
// buffers, and multiplied by the float32 FMA kernels of the level. The
// product of two bfloat16 values is exact in float32, so this computes what
// QKTBF16 and PVBF16 specify, float32 accumulation included; only the order
// of the additions differs from the generic twins (chunks of widenBlock).
// Widening is scalar Go: on P1/4 in bf16 precision with avx2 (Zen 4,
// benchmarks.md) it took about 30 % of the time against 22 % for the
// products, 16–18 × faster in all than the generic twins and 2.1–2.6 ×
// float32 precision's time.

// widenBlock is the rows, columns and reduction length of the blocks the
// widening products take at a time: 3 buffers of 64 × 64 float32s, 48 KiB
// of stack.
const widenBlock = 64

// qktBF16Widen is QKTBF16 through qkt on widened blocks: for each block of
// 64 rows, the d components go 64 at a time (the first block of scores
// written by qkt, the later ones added), and the scale multiplies the
// whole sum once, as in the twin: qkt applies it where one block covers d,
// the last addition where it does not. Each block of q is widened once,
// each block of the panel once per 64 rows.
func qktBF16Widen(r *f32Row, s []float32, ldS int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, rows, cols, d int, scale float32) {
	const w = widenBlock
	var ktA, qfA, partA [w * w]float32
	kt, qf, part := stackF32(ktA[:]), stackF32(qfA[:]), stackF32(partA[:])
	for i0 := 0; i0 < rows; i0 += w {
		nr := min(w, rows-i0)
		for k0 := 0; k0 < d; k0 += w {
			nk := min(w, d-k0) // even: d is
			for ii := range nr {
				widenBF16(qf[ii*w:][:nk], q[(i0+ii)*ldQ+k0:][:nk])
			}
			for j0 := 0; j0 < cols; j0 += w {
				nc := min(w, cols-j0)
				for kk := 0; kk < nk; kk += 2 {
					widenPairs(kt[kk*w:][:nc], kt[(kk+1)*w:][:nc], kp[((k0+kk)/2)*ldK+2*j0:][:2*nc])
				}
				last := k0+nk == d
				if k0 == 0 {
					sc := float32(1)
					if last {
						sc = scale
					}
					r.qkt(s[i0*ldS+j0:], ldS, qf[:], w, kt[:], w, nr, nc, nk, sc)
					continue
				}
				r.qkt(part[:], w, qf[:], w, kt[:], w, nr, nc, nk, 1)
				for ii := range nr {
					dst := s[(i0+ii)*ldS+j0:][:nc]
					for j, x := range part[ii*w:][:nc] {
						if last {
							dst[j] = scale * (dst[j] + x)
						} else {
							dst[j] += x
						}
					}
				}
			}
		}
	}
}

// pvBF16Widen is PVBF16 through pv on widened blocks of 64 rows, 64 keys
// and 64 output columns; pv accumulates into o, key by key in order. Each
// block of p is widened once, each block of the panel once per 64 rows.
func pvBF16Widen(r *f32Row, o []float32, ldO int, p []fp16.BFloat16, ldP int, vp []fp16.BFloat16, ldV int, rows, cols, d int) {
	const w = widenBlock
	var vfA, pfA [w * w]float32
	vf, pf := stackF32(vfA[:]), stackF32(pfA[:])
	for i0 := 0; i0 < rows; i0 += w {
		nr := min(w, rows-i0)
		for j0 := 0; j0 < cols; j0 += w {
			nj := min(w, cols-j0) // even: cols is
			for ii := range nr {
				widenBF16(pf[ii*w:][:nj], p[(i0+ii)*ldP+j0:][:nj])
			}
			for c0 := 0; c0 < d; c0 += w {
				nd := min(w, d-c0)
				for jj := 0; jj < nj; jj += 2 {
					widenPairs(vf[jj*w:][:nd], vf[(jj+1)*w:][:nd], vp[((j0+jj)/2)*ldV+2*c0:][:2*nd])
				}
				r.pv(o[i0*ldO+c0:], ldO, pf[:], w, vf[:], w, nr, nj, nd)
			}
		}
	}
}

// widenBF16 writes bf16Value of each element of src into dst (len(dst) =
// len(src)).
func widenBF16(dst []float32, src []fp16.BFloat16) {
	src = src[:len(dst)]
	for i, b := range src {
		dst[i] = bf16Value(b)
	}
}

// widenPairs writes bf16Value of the first and second element of each pair
// of src into even and odd (len(even) = len(odd) = len(src)/2).
func widenPairs(even, odd []float32, src []fp16.BFloat16) {
	odd = odd[:len(even)]
	src = src[:2*len(even)]
	for j := range even {
		even[j], odd[j] = bf16Value(src[2*j]), bf16Value(src[2*j+1])
	}
}
