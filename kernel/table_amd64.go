//go:build amd64 && !purego

package kernel

import (
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel/internal/x86"
)

// The amd64 rows of the implementation table: the float32 kernels of the
// avx512 and avx2 levels (which amx and avx512bf16 share with avx512),
// the bf16 products of each level, and the three integer kernels.

var (
	dotAVX512VNNI = &dotRow{name: "avx512vnni", needs: " (it needs AVX-512 F, BW, VL and VNNI)", ok: hasVNNI, mr: 4, rows: x86.QkRowsQ8DotAVX512, gather: x86.QkRowsQ8DotGatherAVX512}
	dotAVXVNNI    = &dotRow{name: "avxvnni", needs: " (it needs AVX2, FMA, F16C and AVX-VNNI)", ok: hasAVXVNNI, mr: 2, rows: x86.QkRowsQ8DotAVXVNNI, gather: x86.QkRowsQ8DotGatherAVXVNNI}
	dotAVX2       = &dotRow{name: "avx2", needs: " (it needs AVX2, FMA and F16C)", ok: hasAVX2, mr: 2, rows: x86.QkRowsQ8DotAVX2, gather: x86.QkRowsQ8DotGatherAVX2}
)

func archTable() (f32 [numImpl]*f32Row, bf16 [numImpl]*bf16Row, dot []*dotRow) {
	z, y := avx512Row(), avx2Row()
	z.enc, y.enc = avx512Encoders(), avx2Encoders()
	f32[implAVX512], f32[implAVX2] = z, y
	bf16[implAVX512] = widenBF16Row(z, &bf16Row{vecSoftmax: true, round: x86.RoundBF16BitsAVX512,
		widen: x86.WidenBF16AVX512, widenPairs: x86.WidenPairsBF16AVX512, addScale: x86.AddScaleAVX512,
		packKPairs: x86.PackKPairsBF16AVX512, packVPairs: x86.PackVPairsBF16AVX512})
	bf16[implAVX2] = widenBF16Row(y, &bf16Row{vecSoftmax: true, round: x86.RoundBF16BitsAVX2,
		widen: x86.WidenBF16AVX2, widenPairs: x86.WidenPairsBF16AVX2, addScale: x86.AddScaleAVX2})
	bf16[implAVX512BF16] = &bf16Row{
		qkt: func(s []float32, ldS int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, rows, cols, d int, scale float32) {
			x86.QktBF16AVX512(&s[0], ldS, bits16(q), ldQ, bits16(kp), ldK, rows, cols, d, scale)
		},
		pv: func(o []float32, ldO int, p []fp16.BFloat16, ldP int, vp []fp16.BFloat16, ldV int, rows, cols, d int) {
			x86.PvBF16AVX512(&o[0], ldO, bits16(p), ldP, bits16(vp), ldV, rows, cols, d)
		},
		chunk:   foldChunkAVX512,
		softmax: x86.SoftmaxBF16AVX512, vecSoftmax: true, round: x86.RoundBF16AVX512,
		widen: x86.WidenBF16AVX512, widenPairs: x86.WidenPairsBF16AVX512, addScale: x86.AddScaleAVX512,
		packKPairs: x86.PackKPairsBF16AVX512, packVPairs: x86.PackVPairsBF16AVX512,
	}
	bf16[implAMX] = &bf16Row{qkt: qktBF16AMX, pv: pvBF16AMX, chunk: foldChunkAMX, softmax: x86.SoftmaxBF16AVX512, vecSoftmax: true, round: x86.RoundBF16AVX512,
		widen: x86.WidenBF16AVX512, widenPairs: x86.WidenPairsBF16AVX512, addScale: x86.AddScaleAVX512,
		packKPairs: x86.PackKPairsBF16AVX512, packVPairs: x86.PackVPairsBF16AVX512}
	return f32, bf16, []*dotRow{dotAVX512VNNI, dotAVXVNNI, dotAVX2}
}

func avx512Row() *f32Row {
	return &f32Row{
		qkt: func(s []float32, ldS int, q []float32, ldQ int, kt []float32, ldK int, rows, cols, d int, scale float32) {
			x86.QktAVX512(&s[0], ldS, &q[0], ldQ, &kt[0], ldK, rows, cols, d, scale)
		},
		pv: func(o []float32, ldO int, p []float32, ldP int, v []float32, ldV int, rows, cols, d int) {
			x86.PvAVX512(&o[0], ldO, &p[0], ldP, &v[0], ldV, rows, cols, d)
		},
		expSum: func(dst, src []float32, max float32) float32 {
			return x86.ExpSumAVX512(&dst[0], &src[0], len(dst), max)
		},
		max:     func(x []float32) float32 { return x86.MaxAVX512(&x[0], len(x)) },
		fold:    x86.FoldTileAVX512,
		softCap: func(dst, src []float32, c, inv float32) { x86.SoftCapAVX512(&dst[0], &src[0], len(dst), c, inv) },
		scale:   func(dst, src []float32, a float32) { x86.ScaleAVX512(&dst[0], &src[0], len(dst), a) },
		packKT: func(dst []float32, ldDst int, src []float32, ldSrc int, n, d int) {
			x86.PackKTAVX512(&dst[0], ldDst, &src[0], ldSrc, n, d)
		},
		packKTFloat16: func(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) {
			x86.PackKTF16AVX512(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		},
		packKTBFloat16: func(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) {
			x86.PackKTBF16AVX512(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		},
		packFloat16: func(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) {
			x86.PackF16AVX512(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		},
		packBFloat16: func(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) {
			x86.PackBF16AVX512(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		},
		matMulColumns: 64,
		mr:            4, lanes: 16, pvAnyWidth: true,
		qkRows: [numRowKinds]qkRowsFunc{
			rowF32: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				x86.QkRowsF32AVX512(s, ldS, q, ldQ, (*float32)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
			rowF16: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				x86.QkRowsF16AVX512(s, ldS, q, ldQ, (*uint16)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
			rowBF16: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				x86.QkRowsBF16AVX512(s, ldS, q, ldQ, (*uint16)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
			rowQ8: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				x86.QkRowsQ8AVX512(s, ldS, q, ldQ, (*int8)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
			rowE5M2: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				x86.QkRowsE5M2AVX512(s, ldS, q, ldQ, (*uint8)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
			rowE4M3: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				x86.QkRowsE4M3AVX512(s, ldS, q, ldQ, (*uint8)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
		},
		pvRows: [numRowKinds]pvRowsFunc{
			rowF16: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int) {
				x86.PvRowsF16AVX512(o, ldO, p, ldP, (*uint16)(v), ldV, vs, rows, cols, dv, ahead)
			},
			rowBF16: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int) {
				x86.PvRowsBF16AVX512(o, ldO, p, ldP, (*uint16)(v), ldV, vs, rows, cols, dv, ahead)
			},
			rowQ8: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int) {
				x86.PvRowsQ8AVX512(o, ldO, p, ldP, (*int8)(v), ldV, vs, rows, cols, dv, ahead)
			},
			rowE5M2: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int) {
				x86.PvRowsE5M2AVX512(o, ldO, p, ldP, (*uint8)(v), ldV, vs, rows, cols, dv, ahead)
			},
			rowE4M3: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int) {
				x86.PvRowsE4M3AVX512(o, ldO, p, ldP, (*uint8)(v), ldV, vs, rows, cols, dv, ahead)
			},
		},
		qkGather: [numRowKinds]qkGatherFunc{
			rowF32: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, off, pfo *int, ks *float32, rows, cols, dv int, scale float32) {
				x86.QkRowsGatherF32AVX512(s, ldS, q, ldQ, (*float32)(k), off, pfo, ks, rows, cols, dv, scale)
			},
			rowF16: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, off, pfo *int, ks *float32, rows, cols, dv int, scale float32) {
				x86.QkRowsGatherF16AVX512(s, ldS, q, ldQ, (*uint16)(k), off, pfo, ks, rows, cols, dv, scale)
			},
			rowBF16: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, off, pfo *int, ks *float32, rows, cols, dv int, scale float32) {
				x86.QkRowsGatherBF16AVX512(s, ldS, q, ldQ, (*uint16)(k), off, pfo, ks, rows, cols, dv, scale)
			},
			rowQ8: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, off, pfo *int, ks *float32, rows, cols, dv int, scale float32) {
				x86.QkRowsGatherQ8AVX512(s, ldS, q, ldQ, (*int8)(k), off, pfo, ks, rows, cols, dv, scale)
			},
			rowE5M2: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, off, pfo *int, ks *float32, rows, cols, dv int, scale float32) {
				x86.QkRowsGatherE5M2AVX512(s, ldS, q, ldQ, (*uint8)(k), off, pfo, ks, rows, cols, dv, scale)
			},
			rowE4M3: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, off, pfo *int, ks *float32, rows, cols, dv int, scale float32) {
				x86.QkRowsGatherE4M3AVX512(s, ldS, q, ldQ, (*uint8)(k), off, pfo, ks, rows, cols, dv, scale)
			},
		},
		pvGather: [numRowKinds]pvGatherFunc{
			rowF32: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, off, pfo *int, vs *float32, rows, cols, dv int) {
				x86.PvRowsGatherF32AVX512(o, ldO, p, ldP, (*float32)(v), off, pfo, vs, rows, cols, dv)
			},
			rowF16: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, off, pfo *int, vs *float32, rows, cols, dv int) {
				x86.PvRowsGatherF16AVX512(o, ldO, p, ldP, (*uint16)(v), off, pfo, vs, rows, cols, dv)
			},
			rowBF16: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, off, pfo *int, vs *float32, rows, cols, dv int) {
				x86.PvRowsGatherBF16AVX512(o, ldO, p, ldP, (*uint16)(v), off, pfo, vs, rows, cols, dv)
			},
			rowQ8: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, off, pfo *int, vs *float32, rows, cols, dv int) {
				x86.PvRowsGatherQ8AVX512(o, ldO, p, ldP, (*int8)(v), off, pfo, vs, rows, cols, dv)
			},
			rowE5M2: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, off, pfo *int, vs *float32, rows, cols, dv int) {
				x86.PvRowsGatherE5M2AVX512(o, ldO, p, ldP, (*uint8)(v), off, pfo, vs, rows, cols, dv)
			},
			rowE4M3: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, off, pfo *int, vs *float32, rows, cols, dv int) {
				x86.PvRowsGatherE4M3AVX512(o, ldO, p, ldP, (*uint8)(v), off, pfo, vs, rows, cols, dv)
			},
		},
	}
}

func avx2Row() *f32Row {
	return &f32Row{
		qkt: func(s []float32, ldS int, q []float32, ldQ int, kt []float32, ldK int, rows, cols, d int, scale float32) {
			x86.QktAVX2(&s[0], ldS, &q[0], ldQ, &kt[0], ldK, rows, cols, d, scale)
		},
		pv: func(o []float32, ldO int, p []float32, ldP int, v []float32, ldV int, rows, cols, d int) {
			x86.PvAVX2(&o[0], ldO, &p[0], ldP, &v[0], ldV, rows, cols, d)
		},
		expSum:  func(dst, src []float32, max float32) float32 { return x86.ExpSumAVX2(&dst[0], &src[0], len(dst), max) },
		max:     func(x []float32) float32 { return x86.MaxAVX2(&x[0], len(x)) },
		softCap: func(dst, src []float32, c, inv float32) { x86.SoftCapAVX2(&dst[0], &src[0], len(dst), c, inv) },
		scale:   func(dst, src []float32, a float32) { x86.ScaleAVX2(&dst[0], &src[0], len(dst), a) },
		packKT: func(dst []float32, ldDst int, src []float32, ldSrc int, n, d int) {
			x86.PackKTAVX2(&dst[0], ldDst, &src[0], ldSrc, n, d)
		},
		packKTFloat16: func(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) {
			x86.PackKTF16AVX2(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		},
		packKTBFloat16: func(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) {
			x86.PackKTBF16AVX2(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		},
		packFloat16: func(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) {
			x86.PackF16AVX2(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		},
		packBFloat16: func(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) {
			x86.PackBF16AVX2(&dst[0], ldDst, bits16(src), ldSrc, n, d)
		},
		matMulColumns: 16,
		mr:            2, lanes: 8,
		qkRows: [numRowKinds]qkRowsFunc{
			rowF32: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				x86.QkRowsF32AVX2(s, ldS, q, ldQ, (*float32)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
			rowF16: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				x86.QkRowsF16AVX2(s, ldS, q, ldQ, (*uint16)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
			rowBF16: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				x86.QkRowsBF16AVX2(s, ldS, q, ldQ, (*uint16)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
			rowQ8: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				x86.QkRowsQ8AVX2(s, ldS, q, ldQ, (*int8)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
			rowE5M2: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				x86.QkRowsE5M2AVX2(s, ldS, q, ldQ, (*uint8)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
			rowE4M3: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
				x86.QkRowsE4M3AVX2(s, ldS, q, ldQ, (*uint8)(k), ldK, ks, rows, cols, dv, scale, ahead)
			},
		},
		pvRows: [numRowKinds]pvRowsFunc{
			rowF16: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int) {
				x86.PvRowsF16AVX2(o, ldO, p, ldP, (*uint16)(v), ldV, vs, rows, cols, dv, ahead)
			},
			rowBF16: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int) {
				x86.PvRowsBF16AVX2(o, ldO, p, ldP, (*uint16)(v), ldV, vs, rows, cols, dv, ahead)
			},
			rowQ8: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int) {
				x86.PvRowsQ8AVX2(o, ldO, p, ldP, (*int8)(v), ldV, vs, rows, cols, dv, ahead)
			},
			rowE5M2: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int) {
				x86.PvRowsE5M2AVX2(o, ldO, p, ldP, (*uint8)(v), ldV, vs, rows, cols, dv, ahead)
			},
			rowE4M3: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int) {
				x86.PvRowsE4M3AVX2(o, ldO, p, ldP, (*uint8)(v), ldV, vs, rows, cols, dv, ahead)
			},
		},
		qkGather: [numRowKinds]qkGatherFunc{
			rowF32: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, off, pfo *int, ks *float32, rows, cols, dv int, scale float32) {
				x86.QkRowsGatherF32AVX2(s, ldS, q, ldQ, (*float32)(k), off, pfo, ks, rows, cols, dv, scale)
			},
			rowF16: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, off, pfo *int, ks *float32, rows, cols, dv int, scale float32) {
				x86.QkRowsGatherF16AVX2(s, ldS, q, ldQ, (*uint16)(k), off, pfo, ks, rows, cols, dv, scale)
			},
			rowBF16: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, off, pfo *int, ks *float32, rows, cols, dv int, scale float32) {
				x86.QkRowsGatherBF16AVX2(s, ldS, q, ldQ, (*uint16)(k), off, pfo, ks, rows, cols, dv, scale)
			},
			rowQ8: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, off, pfo *int, ks *float32, rows, cols, dv int, scale float32) {
				x86.QkRowsGatherQ8AVX2(s, ldS, q, ldQ, (*int8)(k), off, pfo, ks, rows, cols, dv, scale)
			},
			rowE5M2: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, off, pfo *int, ks *float32, rows, cols, dv int, scale float32) {
				x86.QkRowsGatherE5M2AVX2(s, ldS, q, ldQ, (*uint8)(k), off, pfo, ks, rows, cols, dv, scale)
			},
			rowE4M3: func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, off, pfo *int, ks *float32, rows, cols, dv int, scale float32) {
				x86.QkRowsGatherE4M3AVX2(s, ldS, q, ldQ, (*uint8)(k), off, pfo, ks, rows, cols, dv, scale)
			},
		},
		pvGather: [numRowKinds]pvGatherFunc{
			rowF32: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, off, pfo *int, vs *float32, rows, cols, dv int) {
				x86.PvRowsGatherF32AVX2(o, ldO, p, ldP, (*float32)(v), off, pfo, vs, rows, cols, dv)
			},
			rowF16: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, off, pfo *int, vs *float32, rows, cols, dv int) {
				x86.PvRowsGatherF16AVX2(o, ldO, p, ldP, (*uint16)(v), off, pfo, vs, rows, cols, dv)
			},
			rowBF16: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, off, pfo *int, vs *float32, rows, cols, dv int) {
				x86.PvRowsGatherBF16AVX2(o, ldO, p, ldP, (*uint16)(v), off, pfo, vs, rows, cols, dv)
			},
			rowQ8: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, off, pfo *int, vs *float32, rows, cols, dv int) {
				x86.PvRowsGatherQ8AVX2(o, ldO, p, ldP, (*int8)(v), off, pfo, vs, rows, cols, dv)
			},
			rowE5M2: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, off, pfo *int, vs *float32, rows, cols, dv int) {
				x86.PvRowsGatherE5M2AVX2(o, ldO, p, ldP, (*uint8)(v), off, pfo, vs, rows, cols, dv)
			},
			rowE4M3: func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, off, pfo *int, vs *float32, rows, cols, dv int) {
				x86.PvRowsGatherE4M3AVX2(o, ldO, p, ldP, (*uint8)(v), off, pfo, vs, rows, cols, dv)
			},
		},
	}
}

// The encoders of the two levels (encode.go): binary16 through
// VCVTPS2PH, bfloat16, 8-bit floats and Q8 in integer instructions,
// from float32, binary16 and bfloat16 rows.

func avx512Encoders() *encRow {
	return &encRow{
		f16: [numEncSrc]func(dst *uint16, src unsafe.Pointer, n int){
			encF32:  func(dst *uint16, src unsafe.Pointer, n int) { x86.EncodeF16FromF32AVX512(dst, (*float32)(src), n) },
			encBF16: func(dst *uint16, src unsafe.Pointer, n int) { x86.EncodeF16FromBF16AVX512(dst, (*uint16)(src), n) },
		},
		bf16: [numEncSrc]func(dst *uint16, src unsafe.Pointer, n int){
			encF32: func(dst *uint16, src unsafe.Pointer, n int) { x86.EncodeBF16FromF32AVX512(dst, (*float32)(src), n) },
			encF16: func(dst *uint16, src unsafe.Pointer, n int) { x86.EncodeBF16FromF16AVX512(dst, (*uint16)(src), n) },
		},
		e4m3: [numEncSrc]func(dst *uint8, src unsafe.Pointer, n int, scale float32){
			encF32: func(dst *uint8, src unsafe.Pointer, n int, sc float32) {
				x86.EncodeE4M3FromF32AVX512(dst, (*float32)(src), n, sc)
			},
			encF16: func(dst *uint8, src unsafe.Pointer, n int, sc float32) {
				x86.EncodeE4M3FromF16AVX512(dst, (*uint16)(src), n, sc)
			},
			encBF16: func(dst *uint8, src unsafe.Pointer, n int, sc float32) {
				x86.EncodeE4M3FromBF16AVX512(dst, (*uint16)(src), n, sc)
			},
		},
		e5m2: [numEncSrc]func(dst *uint8, src unsafe.Pointer, n int, scale float32){
			encF32: func(dst *uint8, src unsafe.Pointer, n int, sc float32) {
				x86.EncodeE5M2FromF32AVX512(dst, (*float32)(src), n, sc)
			},
			encF16: func(dst *uint8, src unsafe.Pointer, n int, sc float32) {
				x86.EncodeE5M2FromF16AVX512(dst, (*uint16)(src), n, sc)
			},
			encBF16: func(dst *uint8, src unsafe.Pointer, n int, sc float32) {
				x86.EncodeE5M2FromBF16AVX512(dst, (*uint16)(src), n, sc)
			},
		},
		q8: [numEncSrc]func(dst *int8, scales *float32, src unsafe.Pointer, blocks int) int{
			encF32: func(dst *int8, scales *float32, src unsafe.Pointer, blocks int) int {
				return x86.QuantizeQ8FromF32AVX512(dst, scales, (*float32)(src), blocks)
			},
			encF16: func(dst *int8, scales *float32, src unsafe.Pointer, blocks int) int {
				return x86.QuantizeQ8FromF16AVX512(dst, scales, (*uint16)(src), blocks)
			},
			encBF16: func(dst *int8, scales *float32, src unsafe.Pointer, blocks int) int {
				return x86.QuantizeQ8FromBF16AVX512(dst, scales, (*uint16)(src), blocks)
			},
		},
	}
}

func avx2Encoders() *encRow {
	return &encRow{
		f16: [numEncSrc]func(dst *uint16, src unsafe.Pointer, n int){
			encF32:  func(dst *uint16, src unsafe.Pointer, n int) { x86.EncodeF16FromF32AVX2(dst, (*float32)(src), n) },
			encBF16: func(dst *uint16, src unsafe.Pointer, n int) { x86.EncodeF16FromBF16AVX2(dst, (*uint16)(src), n) },
		},
		bf16: [numEncSrc]func(dst *uint16, src unsafe.Pointer, n int){
			encF32: func(dst *uint16, src unsafe.Pointer, n int) { x86.EncodeBF16FromF32AVX2(dst, (*float32)(src), n) },
			encF16: func(dst *uint16, src unsafe.Pointer, n int) { x86.EncodeBF16FromF16AVX2(dst, (*uint16)(src), n) },
		},
		e4m3: [numEncSrc]func(dst *uint8, src unsafe.Pointer, n int, scale float32){
			encF32: func(dst *uint8, src unsafe.Pointer, n int, sc float32) {
				x86.EncodeE4M3FromF32AVX2(dst, (*float32)(src), n, sc)
			},
			encF16: func(dst *uint8, src unsafe.Pointer, n int, sc float32) {
				x86.EncodeE4M3FromF16AVX2(dst, (*uint16)(src), n, sc)
			},
			encBF16: func(dst *uint8, src unsafe.Pointer, n int, sc float32) {
				x86.EncodeE4M3FromBF16AVX2(dst, (*uint16)(src), n, sc)
			},
		},
		e5m2: [numEncSrc]func(dst *uint8, src unsafe.Pointer, n int, scale float32){
			encF32: func(dst *uint8, src unsafe.Pointer, n int, sc float32) {
				x86.EncodeE5M2FromF32AVX2(dst, (*float32)(src), n, sc)
			},
			encF16: func(dst *uint8, src unsafe.Pointer, n int, sc float32) {
				x86.EncodeE5M2FromF16AVX2(dst, (*uint16)(src), n, sc)
			},
			encBF16: func(dst *uint8, src unsafe.Pointer, n int, sc float32) {
				x86.EncodeE5M2FromBF16AVX2(dst, (*uint16)(src), n, sc)
			},
		},
		q8: [numEncSrc]func(dst *int8, scales *float32, src unsafe.Pointer, blocks int) int{
			encF32: func(dst *int8, scales *float32, src unsafe.Pointer, blocks int) int {
				return x86.QuantizeQ8FromF32AVX2(dst, scales, (*float32)(src), blocks)
			},
			encF16: func(dst *int8, scales *float32, src unsafe.Pointer, blocks int) int {
				return x86.QuantizeQ8FromF16AVX2(dst, scales, (*uint16)(src), blocks)
			},
			encBF16: func(dst *int8, scales *float32, src unsafe.Pointer, blocks int) int {
				return x86.QuantizeQ8FromBF16AVX2(dst, scales, (*uint16)(src), blocks)
			},
		},
	}
}
