package kernel

import (
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
)

// The bfloat16 products on CPUs without bf16 instructions (AVX2, AVX-512
// without AVX512-BF16, NEON): the operands are widened to float32, exactly
// (a bfloat16 is a float32 with its low 16 bits zero, subnormals flushed to
// zero as the bf16 instructions read them), a block at a time into stack
// buffers, and multiplied by the float32 FMA kernels of the level. The
// product of two bfloat16 values is exact in float32, so this computes what
// QKTBF16 and PVBF16 specify, float32 accumulation included; only the order
// of the additions differs from the generic twins (chunks of widenBlock).
// The widening is the bf16 row's: vector kernels at avx512 and avx2
// (WidenBF16AVX512 and the others of internal/x86, a row or a row of pairs
// a call, the subnormal flush a few integer instructions a vector), the Go
// loops widenBF16Generic and widenPairsGeneric on NEON, which the vector
// kernels are tested against bit for bit.

// widenBlock is the rows, columns and reduction length of the blocks the
// widening products take at a time: 3 buffers of 64 × 64 float32s, 48 KiB
// of stack.
const widenBlock = 64

// qktBF16Widen is QKTBF16 through qkt on widened blocks: for each block of
// 64 rows, the d components go 64 at a time (the first block of scores
// written by qkt, the later ones added by the bf16 row's addScale), and the
// scale multiplies the whole sum once, as in the twin: qkt applies it where
// one block covers d, the last addition where it does not. Each block of q is widened once,
// each block of the panel once per 64 rows.
func qktBF16Widen(r *f32Row, b *bf16Row, s []float32, ldS int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, rows, cols, d int, scale float32) {
	const w = widenBlock
	var ktA, qfA, partA [w * w]float32
	kt, qf, part := stackF32(ktA[:]), stackF32(qfA[:]), stackF32(partA[:])
	for i0 := 0; i0 < rows; i0 += w {
		nr := min(w, rows-i0)
		for k0 := 0; k0 < d; k0 += w {
			nk := min(w, d-k0) // even: d is
			for ii := range nr {
				b.widen(&qf[ii*w:][:nk][0], bits16(q[(i0+ii)*ldQ+k0:][:nk]), nk)
			}
			for j0 := 0; j0 < cols; j0 += w {
				nc := min(w, cols-j0)
				for kk := 0; kk < nk; kk += 2 {
					b.widenPairs(&kt[kk*w:][:nc][0], &kt[(kk+1)*w:][:nc][0], bits16(kp[((k0+kk)/2)*ldK+2*j0:][:2*nc]), nc)
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
				a := float32(1) // 1·(s + part) is s + part, exactly
				if last {
					a = scale
				}
				for ii := range nr {
					b.addScale(&s[(i0+ii)*ldS+j0:][:nc][0], &part[ii*w:][:nc][0], nc, a)
				}
			}
		}
	}
}

// pvBF16Widen is PVBF16 through pv on widened blocks of 64 rows, 64 keys
// and 64 output columns; pv accumulates into o, key by key in order. Each
// block of p is widened once, each block of the panel once per 64 rows.
func pvBF16Widen(r *f32Row, b *bf16Row, o []float32, ldO int, p []fp16.BFloat16, ldP int, vp []fp16.BFloat16, ldV int, rows, cols, d int) {
	const w = widenBlock
	var vfA, pfA [w * w]float32
	vf, pf := stackF32(vfA[:]), stackF32(pfA[:])
	for i0 := 0; i0 < rows; i0 += w {
		nr := min(w, rows-i0)
		for j0 := 0; j0 < cols; j0 += w {
			nj := min(w, cols-j0) // even: cols is
			for ii := range nr {
				b.widen(&pf[ii*w:][:nj][0], bits16(p[(i0+ii)*ldP+j0:][:nj]), nj)
			}
			for c0 := 0; c0 < d; c0 += w {
				nd := min(w, d-c0)
				for jj := 0; jj < nj; jj += 2 {
					b.widenPairs(&vf[jj*w:][:nd][0], &vf[(jj+1)*w:][:nd][0], bits16(vp[((j0+jj)/2)*ldV+2*c0:][:2*nd]), nd)
				}
				r.pv(o[i0*ldO+c0:], ldO, pf[:], w, vf[:], w, nr, nj, nd)
			}
		}
	}
}

// widenBF16Generic writes bf16Value of each of n bfloat16s at src into
// dst: the Go twin of the bf16 row's widen.
func widenBF16Generic(dst *float32, src *uint16, n int) {
	d, x := unsafe.Slice(dst, n), unsafe.Slice((*fp16.BFloat16)(unsafe.Pointer(src)), n)
	for i, b := range x {
		d[i] = bf16Value(b)
	}
}

// widenPairsGeneric writes bf16Value of the first and second element of
// each of n pairs of bfloat16s at src into even and odd: the Go twin of
// the bf16 row's widenPairs.
func widenPairsGeneric(even, odd *float32, src *uint16, n int) {
	e, o := unsafe.Slice(even, n), unsafe.Slice(odd, n)
	x := unsafe.Slice((*fp16.BFloat16)(unsafe.Pointer(src)), 2*n)
	for j := range e {
		e[j], o[j] = bf16Value(x[2*j]), bf16Value(x[2*j+1])
	}
}

// addScaleGeneric sets dst[i] = a·(dst[i] + src[i]) for n float32s: the
// Go twin of the bf16 row's addScale.
func addScaleGeneric(dst, src *float32, n int, a float32) {
	d, x := unsafe.Slice(dst, n), unsafe.Slice(src, n)
	for i, v := range x {
		d[i] = a * (d[i] + v)
	}
}
