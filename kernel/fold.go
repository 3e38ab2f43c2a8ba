package kernel

import (
	"fmt"
	"unsafe"
)

// FoldTileCols is the widest tile FoldTile takes: 64 keys, one register
// block of scores in the AVX-512 kernel.
const FoldTileCols = 64

// FoldTile folds a tile of cols keys into the online softmax of rows query
// rows and their output accumulators. Row for row, it computes the bits of
// the four calls
//
//	QKT(s, ldS, q, ldQ, kt, ldK, rows, cols, d, scale)
//	OnlineSoftmax(s, ldS, rows, cols, m, z, alpha)
//	ScaleRows(o, ldO, alpha, rows, dv)
//	PV(o, ldO, s, ldS, v, ldV, rows, cols, dv)
//
// under the same implementation, without a score tile s: where it runs in
// one SIMD kernel (Current().FoldTile), a group of rows' scores stay in a
// scratch the size of a few KiB from the product that writes them to the
// product that reads them as probabilities, instead of being written and
// read back for every row of the block by each call. A NaN result may
// differ from theirs in its payload.
//
// With vis non-nil, row i sees keys [0, vis[i]) of the tile only (a tile
// that a causal diagonal crosses): it is folded as by
//
//	if vis[i] == 0 {
//		alpha[i] = 1
//	} else {
//		OnlineSoftmax(s[i*ldS:], ldS, 1, vis[i], m[i:], z[i:], alpha[i:])
//	}
//	s[i*ldS+vis[i] : i*ldS+cols] = 0
//
// in place of the OnlineSoftmax call over the whole tile, the other three
// calls as above; each vis[i] must be in [0, cols]. The first cols rows of
// v must then be finite: the kernel may skip the keys that no row of a
// group sees, where the calls add their zero probabilities times the
// values (0·Inf is NaN).
//
// cols is at most FoldTileCols. The other sizes and the slices are those
// of the four calls, and m, z and alpha (and vis) hold at least rows
// elements.
func FoldTile(o []float32, ldO int, q []float32, ldQ int, kt []float32, ldK int, v []float32, ldV int,
	rows, cols, d, dv int, scale float32, m, z, alpha []float32, vis []int) error {
	if err := checkFoldTile(o, ldO, q, ldQ, kt, ldK, v, ldV, rows, cols, d, dv, m, z, alpha, vis); err != nil {
		return err
	}
	if rows == 0 {
		return nil
	}
	if f := cur.f32.fold; f != nil && cols > 0 && d > 0 && dv > 0 {
		foldTileAsm(f, o, ldO, q, ldQ, kt, ldK, v, ldV, rows, cols, d, dv, scale, m, z, alpha, vis)
		return nil
	}
	foldTileGeneric(cur.f32, o, ldO, q, ldQ, kt, ldK, v, ldV, rows, cols, d, dv, scale, m, z, alpha, vis)
	return nil
}

func checkFoldTile(o []float32, ldO int, q []float32, ldQ int, kt []float32, ldK int, v []float32, ldV int,
	rows, cols, d, dv int, m, z, alpha []float32, vis []int) error {
	const fn = "FoldTile"
	if rows < 0 || cols < 0 || d < 0 || dv < 0 {
		return fmt.Errorf("kernel.FoldTile: negative size (rows %d, cols %d, d %d, dv %d); want sizes >= 0", rows, cols, d, dv)
	}
	if cols > FoldTileCols {
		return fmt.Errorf("kernel.FoldTile: cols is %d; want at most FoldTileCols (%d)", cols, FoldTileCols)
	}
	for _, b := range []struct {
		name              string
		n, ld, rows, cols int
	}{
		{"o", len(o), ldO, rows, dv}, {"q", len(q), ldQ, rows, d}, {"kt", len(kt), ldK, d, cols}, {"v", len(v), ldV, cols, dv},
	} {
		if err := checkBlock(fn, b.name, b.n, b.ld, b.rows, b.cols); err != nil {
			return err
		}
	}
	if len(m) < rows || len(z) < rows || len(alpha) < rows {
		return fmt.Errorf("kernel.FoldTile: m, z and alpha have %d, %d and %d elements; want >= %d (rows)", len(m), len(z), len(alpha), rows)
	}
	if vis != nil {
		if len(vis) < rows {
			return fmt.Errorf("kernel.FoldTile: vis has %d elements; want >= %d (rows)", len(vis), rows)
		}
		for i, n := range vis[:rows] {
			if n < 0 || n > cols {
				return fmt.Errorf("kernel.FoldTile: vis[%d] is %d; want 0 to cols (%d)", i, n, cols)
			}
		}
	}
	return nil
}

// foldTileFunc is a level's FoldTile kernel (f32Row.fold): the calls'
// work but the new sums, which it leaves to foldTileAsm. sizes >= 1,
// cols <= FoldTileCols; vis nil or rows entries; scratch
// foldScratchFloats float32s.
type foldTileFunc func(o *float32, ldO int, q *float32, ldQ int, kt *float32, ldK int, v *float32, ldV int,
	rows, cols, d, dv int, scale float32, m, alpha, sum *float32, vis *int, scratch *float32)

const (
	// foldScratchFloats is the scratch of the AVX-512 kernel: a group of
	// 48 rows of 64 scores, 16 vectors of a batch's row reductions and
	// one of its maxima, and 16 floats more to align it to 64 bytes.
	foldScratchFloats = 48*FoldTileCols + 17*16 + 16
	// foldCallRows is the most rows foldTileAsm hands the kernel a call:
	// the rows of its stack buffer of sums (a multiple of the kernel's
	// group of 48, and more than the 256 rows of the default block).
	foldCallRows = 288
)

// foldTileAsm runs a level's kernel f (checked arguments, sizes >= 1) up to
// foldCallRows rows a call, then folds the sums it leaves into z as
// OnlineSoftmax does, with the same Go expression: the compiler rounds it
// alike in both (fusing its multiply-add or not).
func foldTileAsm(f foldTileFunc, o []float32, ldO int, q []float32, ldQ int, kt []float32, ldK int, v []float32, ldV int,
	rows, cols, d, dv int, scale float32, m, z, alpha []float32, vis []int) {
	var sumA [foldCallRows]float32
	var scrA [foldScratchFloats]float32
	sums, scr := stackF32(sumA[:]), stackF32(scrA[:])
	for r0 := 0; r0 < rows; r0 += foldCallRows {
		n := min(foldCallRows, rows-r0)
		var vp *int
		if vis != nil {
			vp = (*int)(noescape(unsafe.Pointer(&vis[r0])))
		}
		f(&o[r0*ldO], ldO, &q[r0*ldQ], ldQ, &kt[0], ldK, &v[0], ldV, n, cols, d, dv, scale, &m[r0], &alpha[r0], &sums[0], vp, &scr[0])
		mc, zc, ac := m[r0:r0+n], z[r0:r0+n], alpha[r0:r0+n]
		for i, s := range sums[:n] {
			if mc[i] != negInf {
				zc[i] = ac[i]*zc[i] + s
			}
		}
	}
}

// foldTileRows is the rows a step of foldTileGeneric takes, through a score
// tile on its stack.
const foldTileRows = 16

// foldTileGeneric is FoldTile's specification and the twin of the kernels:
// the four calls on the kernels of row r, foldTileRows rows at a time
// (each row's results are independent of the others'), with vis's
// per-row softmax.
func foldTileGeneric(r *f32Row, o []float32, ldO int, q []float32, ldQ int, kt []float32, ldK int, v []float32, ldV int,
	rows, cols, d, dv int, scale float32, m, z, alpha []float32, vis []int) {
	var sA [foldTileRows * FoldTileCols]float32
	s, ldS := stackF32(sA[:]), max(cols, 1)
	for r0 := 0; r0 < rows; r0 += foldTileRows {
		n := min(foldTileRows, rows-r0)
		qktRow(r, s, ldS, q[r0*ldQ:], ldQ, kt, ldK, n, cols, d, scale)
		mc, zc, ac := m[r0:], z[r0:], alpha[r0:]
		if vis == nil {
			onlineSoftmax(r, s, ldS, n, cols, mc, zc, ac)
		} else {
			for i, c := range vis[r0 : r0+n] {
				row := s[i*ldS:][:cols]
				if c == 0 {
					ac[i] = 1
				} else {
					onlineSoftmax(r, row, ldS, 1, c, mc[i:], zc[i:], ac[i:])
				}
				clear(row[c:])
			}
		}
		scaleRows(r, o[r0*ldO:], ldO, ac, n, dv)
		if cols > 0 && dv > 0 {
			r.pv(o[r0*ldO:], ldO, s, ldS, v, ldV, n, cols, dv)
		}
	}
}

// qktRow is QKT on the kernels of row r, arguments checked.
func qktRow(r *f32Row, s []float32, ldS int, q []float32, ldQ int, kt []float32, ldK int, rows, cols, d int, scale float32) {
	switch {
	case rows == 0 || cols == 0:
	case d == 0: // empty dot products: q and kt may be empty
		for i := range rows {
			row := s[i*ldS:][:cols]
			for j := range row {
				row[j] = scale * 0
			}
		}
	default:
		r.qkt(s, ldS, q, ldQ, kt, ldK, rows, cols, d, scale)
	}
}
