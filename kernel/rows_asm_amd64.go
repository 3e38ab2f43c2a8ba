//go:build !purego

package kernel

import "unsafe"

// rowKernels reports whether QKRows and PVRows run in assembly here
// (Capabilities.RowKernels).
func rowKernels() bool { return active == implAVX512 || active == implAVX2 }

// rowBlock returns the rows and the float32 lanes of the active level's
// register block, or 0 rows where the level has no row kernels.
func rowBlock() (mr, lanes int) {
	switch active {
	case implAVX512:
		return 4, 16
	case implAVX2:
		return 2, 8
	}
	return 0, 0
}

// pvAnyWidth reports whether the PVRows kernels of the active level take
// rows of any width (AVX-512: the columns past the last whole vector in
// one more, through an opmask) rather than whole vectors.
func pvAnyWidth() bool { return active == implAVX512 }

// qkRowsBlock runs the QKRows kernel of kind and the active level on one
// register block of rows.
func qkRowsBlock(kind rowKind, s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int) {
	z := active == implAVX512
	switch kind {
	case rowF32:
		if z {
			qkRowsF32AVX512(s, ldS, q, ldQ, (*float32)(k), ldK, ks, rows, cols, dv, scale, ahead)
		} else {
			qkRowsF32AVX2(s, ldS, q, ldQ, (*float32)(k), ldK, ks, rows, cols, dv, scale, ahead)
		}
	case rowF16:
		if z {
			qkRowsF16AVX512(s, ldS, q, ldQ, (*uint16)(k), ldK, ks, rows, cols, dv, scale, ahead)
		} else {
			qkRowsF16AVX2(s, ldS, q, ldQ, (*uint16)(k), ldK, ks, rows, cols, dv, scale, ahead)
		}
	case rowBF16:
		if z {
			qkRowsBF16AVX512(s, ldS, q, ldQ, (*uint16)(k), ldK, ks, rows, cols, dv, scale, ahead)
		} else {
			qkRowsBF16AVX2(s, ldS, q, ldQ, (*uint16)(k), ldK, ks, rows, cols, dv, scale, ahead)
		}
	case rowQ8:
		if z {
			qkRowsQ8AVX512(s, ldS, q, ldQ, (*int8)(k), ldK, ks, rows, cols, dv, scale, ahead)
		} else {
			qkRowsQ8AVX2(s, ldS, q, ldQ, (*int8)(k), ldK, ks, rows, cols, dv, scale, ahead)
		}
	}
}

// pvRowsBlock runs the PVRows kernel of kind (not float32: that is PV) and
// the active level on one register block of rows.
func pvRowsBlock(kind rowKind, o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int) {
	z := active == implAVX512
	switch kind {
	case rowF16:
		if z {
			pvRowsF16AVX512(o, ldO, p, ldP, (*uint16)(v), ldV, vs, rows, cols, dv, ahead)
		} else {
			pvRowsF16AVX2(o, ldO, p, ldP, (*uint16)(v), ldV, vs, rows, cols, dv, ahead)
		}
	case rowBF16:
		if z {
			pvRowsBF16AVX512(o, ldO, p, ldP, (*uint16)(v), ldV, vs, rows, cols, dv, ahead)
		} else {
			pvRowsBF16AVX2(o, ldO, p, ldP, (*uint16)(v), ldV, vs, rows, cols, dv, ahead)
		}
	case rowQ8:
		if z {
			pvRowsQ8AVX512(o, ldO, p, ldP, (*int8)(v), ldV, vs, rows, cols, dv, ahead)
		} else {
			pvRowsQ8AVX2(o, ldO, p, ldP, (*int8)(v), ldV, vs, rows, cols, dv, ahead)
		}
	}
}
