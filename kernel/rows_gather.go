package kernel

import "fmt"

// The gathering decode kernels: QKRows and PVRows over rows that lie
// anywhere in a slice, each at its own offset. A paged KV cache keeps a
// sequence's positions in blocks of a few positions scattered over a pool;
// with the plain row kernels a tile of such a cache costs a call (and its
// checks and set-up) per block, with these one call per tile, whatever the
// blocks.

// QKRowsGather is QKRows over key rows that lie anywhere in k: key j's row
// is the d elements from off[j] on (for int8, with the scales of those
// elements, scales[off[j]/Q8Block] on; off[j] must then be a multiple of
// Q8Block; for 8-bit floats, scales[0] is every row's scale):
//
//	for i := 0; i < rows; i++ {
//		for j := 0; j < cols; j++ {
//			var acc float32
//			for c := 0; c < d; c++ {
//				acc += q[i*ldQ+c] * K(off[j] + c)
//			}
//			s[i*ldS+j] = scale * acc
//		}
//	}
//
// with K as for QKRows. off must hold at least cols offsets; any after
// the first cols are those of the keys that follow (a caller's block
// table beyond the tile), whose rows the kernels fetch into the cache
// while they compute, which changes the speed, never the result. The
// result is the same as QKRows's on the same rows laid out at a constant
// stride, bit for bit, where both run the same implementation.
func QKRowsGather[T RowElem](s []float32, ldS int, q []float32, ldQ int, k []T, scales []float32, off []int, rows, cols, d int, scale float32) error {
	return qkRowsGather(s, ldS, q, ldQ, k, scales, off, rows, cols, d, scale, gatherAhead(off, cols))
}

// gatherAhead is the prefetch distance, in keys, of the gathering kernels
// over the offsets off of cols keys and the keys after them: the row
// kernels' distance, or as far as off reaches.
func gatherAhead(off []int, cols int) int { return max(0, min(prefetchRows, len(off)-cols)) }

// qkRowsGather is QKRowsGather with its prefetch distance in keys: while
// the assembly reads key j it prefetches the row at off[j+ahead]; with
// fewer than cols+ahead offsets, or ahead <= 0, nothing further.
func qkRowsGather[T RowElem](s []float32, ldS int, q []float32, ldQ int, k []T, scales []float32, off []int, rows, cols, d int, scale float32, ahead int) error {
	if err := checkDims("QKRowsGather", rows, cols, d); err != nil {
		return err
	}
	if err := checkBlock("QKRowsGather", "s", len(s), ldS, rows, cols); err != nil {
		return err
	}
	if err := checkBlock("QKRowsGather", "q", len(q), ldQ, rows, d); err != nil {
		return err
	}
	if err := checkGather("QKRowsGather", "k", k, scales, off, cols, d); err != nil {
		return err
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	pfo := prefetchOffsets(off, cols, ahead)
	dv := 0
	if d > 0 {
		dv = qkRowsGatherAsm(s, ldS, q, ldQ, k, scales, off, pfo, rows, cols, d, scale)
	}
	if dv < d || d == 0 {
		qkRowsGatherGeneric(s, ldS, q, ldQ, k, scales, off, rows, cols, dv, d, scale)
	}
	return nil
}

// PVRowsGather is PVRows over value rows that lie anywhere in v: value j's
// row is the d elements from off[j] on, as for QKRowsGather:
//
//	for i := 0; i < rows; i++ {
//		for c := 0; c < d; c++ {
//			acc := o[i*ldO+c]
//			for j := 0; j < cols; j++ {
//				acc += p[i*ldP+j] * V(off[j] + c)
//			}
//			o[i*ldO+c] = acc
//		}
//	}
//
// The offsets after the first cols are prefetched, as for QKRowsGather. As with
// PVRows, only the first cols probabilities of a row are read, and a
// column's result does not depend on d.
func PVRowsGather[T RowElem](o []float32, ldO int, p []float32, ldP int, v []T, scales []float32, off []int, rows, cols, d int) error {
	return pvRowsGather(o, ldO, p, ldP, v, scales, off, rows, cols, d, gatherAhead(off, cols))
}

// pvRowsGather is PVRowsGather with its prefetch distance in keys, as
// qkRowsGather.
func pvRowsGather[T RowElem](o []float32, ldO int, p []float32, ldP int, v []T, scales []float32, off []int, rows, cols, d, ahead int) error {
	if err := checkDims("PVRowsGather", rows, cols, d); err != nil {
		return err
	}
	if err := checkBlock("PVRowsGather", "o", len(o), ldO, rows, d); err != nil {
		return err
	}
	if err := checkBlock("PVRowsGather", "p", len(p), ldP, rows, cols); err != nil {
		return err
	}
	if err := checkGather("PVRowsGather", "v", v, scales, off, cols, d); err != nil {
		return err
	}
	if rows == 0 || cols == 0 || d == 0 {
		return nil
	}
	pfo := prefetchOffsets(off, cols, ahead)
	if isFP8(v) {
		// The probabilities times the values' scale, as PVRows.
		f, unit := fp8ValueScale(kindOf(v), scales[0])
		scaledProbs(p, ldP, rows, cols, f, func(pp []float32, ldPP, i0, m, j0, n int) {
			if dv := pvRowsGatherAsm(o[i0*ldO:], ldO, pp, ldPP, v, unit, off[j0:], pfo[j0:], m, n, d); dv < d {
				pvRowsGatherTail(o[i0*ldO:], ldO, pp, ldPP, v, unit, off[j0:], m, n, dv, d)
			}
		})
		return nil
	}
	dv := pvRowsGatherAsm(o, ldO, p, ldP, v, scales, off, pfo, rows, cols, d)
	if dv >= d {
		return nil
	}
	if f, ok := any(v).([]float32); ok {
		// float32 values go to PV where they lie at a stride (PVRows), so
		// the columns the assembly left go to it too, a value row at a
		// time: the same bits.
		for j, e := range off[:cols] {
			pv(o[dv:], ldO, p[j:], ldP, f[e+dv:], d-dv, rows, 1, d-dv)
		}
		return nil
	}
	pvRowsGatherTail(o, ldO, p, ldP, v, scales, off, rows, cols, dv, d)
	return nil
}

// prefetchOffsets returns the offsets of the rows to prefetch while the
// kernels read keys 0..cols−1: off from ahead on, or off itself (the rows
// being read, which costs next to nothing) where it does not reach that
// far.
func prefetchOffsets(off []int, cols, ahead int) []int {
	if ahead > 0 && len(off)-ahead >= cols {
		return off[ahead:]
	}
	return off
}

// checkGather checks that off holds cols offsets of rows of d elements
// inside x, and for int8 that each starts a Q8 block with its scales in
// scales.
func checkGather[T RowElem](fn, name string, x []T, scales []float32, off []int, cols, d int) error {
	if cols == 0 {
		return nil
	}
	if len(off) < cols {
		return fmt.Errorf("kernel.%s: off has %d offsets; want >= %d (one per row)", fn, len(off), cols)
	}
	// One pass for the bounds (and Q8 alignment) of all the offsets; only
	// a table that fails it is searched for the offset to name.
	lo, hi, mis := off[0], off[0], 0
	for _, e := range off[:cols] {
		lo, hi, mis = min(lo, e), max(hi, e), mis|e
	}
	if isFP8(x) && d > 0 && len(scales) < 1 {
		return fmt.Errorf("kernel.%s: 8-bit float %s has no scale; want scales[0], the scale of every element", fn, name)
	}
	_, q8 := any(x).([]int8)
	last := len(x) - d
	if lo >= 0 && hi <= last && (!q8 || d == 0 || (mis%Q8Block == 0 && (hi+d+Q8Block-1)/Q8Block <= len(scales))) {
		return nil
	}
	for j, e := range off[:cols] {
		if e < 0 || e > last {
			return fmt.Errorf("kernel.%s: off[%d] is %d; want 0 to len(%s)-d = %d", fn, j, e, name, last)
		}
		if !q8 || d == 0 {
			continue
		}
		if e%Q8Block != 0 {
			return fmt.Errorf("kernel.%s: off[%d] is %d; want a multiple of %d for int8 %s (rows start Q8 blocks)", fn, j, e, Q8Block, name)
		}
		if need := (e + d + Q8Block - 1) / Q8Block; len(scales) < need {
			return fmt.Errorf("kernel.%s: %s has %d scales; want >= %d for the row at off[%d] = %d", fn, name, len(scales), need, j, e)
		}
	}
	return nil
}

// rowScales returns the scales of an int8 row that starts at element e (a
// multiple of Q8Block), or nil for other types. A row of no elements may
// start past the last scale: it gets none.
func rowScales(scales []float32, e int) []float32 {
	if scales == nil {
		return nil
	}
	return scales[min(e/Q8Block, len(scales)):]
}

// qkRowsGatherGeneric is QKRowsGather over components [c0, d), as
// qkRowsGeneric, one key at a time.
func qkRowsGatherGeneric[T RowElem](s []float32, ldS int, q []float32, ldQ int, k []T, scales []float32, off []int, rows, cols, c0, d int, scale float32) {
	for j, e := range off[:cols] {
		sc := rowScalesOf(k, scales, e)
		qkRowsGeneric(s[j:], ldS, q, ldQ, k[e:], sc, 0, rows, 1, c0, d, scale)
	}
}

// pvRowsGatherTail is PVRowsGather over output columns [c0, d), those
// the assembly left: as pvRowsTail (the PV kernel on the widened columns,
// the row kernels' FMAs) where the active level has row kernels,
// pvRowsGatherGeneric elsewhere.
func pvRowsGatherTail[T RowElem](o []float32, ldO int, p []float32, ldP int, v []T, scales []float32, off []int, rows, cols, c0, d int) {
	if !rowKernels() {
		pvRowsGatherGeneric(o, ldO, p, ldP, v, scales, off, rows, cols, c0, d)
		return
	}
	var bufA [tailKeys * qktChunk]float32
	buf := stackF32(bufA[:])
	for cc := c0; cc < d; cc += qktChunk {
		n := min(qktChunk, d-cc)
		for j0 := 0; j0 < cols; j0 += tailKeys {
			nk := min(tailKeys, cols-j0)
			for j, e := range off[j0 : j0+nk] {
				widen(buf[j*n:(j+1)*n], v, scales, e+cc)
			}
			pv(o[cc:], ldO, p[j0:], ldP, buf[:nk*n], n, rows, nk, n)
		}
	}
}

// pvRowsGatherGeneric is PVRowsGather over output columns [c0, d), one
// value row at a time (each output still sums the values in key order).
func pvRowsGatherGeneric[T RowElem](o []float32, ldO int, p []float32, ldP int, v []T, scales []float32, off []int, rows, cols, c0, d int) {
	for j, e := range off[:cols] {
		sc := rowScalesOf(v, scales, e)
		pvRowsGeneric(o, ldO, p[j:], ldP, v[e:], sc, 0, rows, 1, c0, d)
	}
}
