package kernel

import (
	"fmt"
	"math"

	"github.com/flashgo/flashgo/fp16"
)

// The decode kernels. Decoding a token reads every cached key and value
// once, so a kernel that first packs a K tile into a transposed panel (what
// QKT needs to reuse it across many query rows) spends as long packing as
// multiplying. QKRows and PVRows instead read K and V rows where they lie,
// in float32, binary16, bfloat16 or Q8, and convert each vector in
// registers; they are the kernels of few query rows (a decode step's
// grouped heads, a handful of draft tokens).

// Q8Block is the number of consecutive values of a Q8 tensor that share one
// float32 scale: element e of the int8 data stands for
// float32(data[e])·scales[e/Q8Block], as llama.cpp's Q8_0.
const Q8Block = 32

// RowElem is an element type that QKRows and PVRows read: float32,
// binary16, bfloat16, int8 (Q8, with its scales), or an 8-bit float
// (E4M3FN or E5M2, with one scale for every element).
type RowElem interface {
	float32 | fp16.Float16 | fp16.BFloat16 | int8 | fp16.Float8E4M3 | fp16.Float8E5M2
}

// isFP8 reports whether x holds 8-bit floats, whose single scale is
// scales[0].
func isFP8[T RowElem](x []T) bool {
	switch any(x).(type) {
	case []fp16.Float8E4M3, []fp16.Float8E5M2:
		return true
	}
	return false
}

// rowScalesOf returns the scales that a row of x starting at element e
// reads: for int8 its Q8 blocks' (rowScales), for 8-bit floats all of
// scales (scales[0] is every element's), nil for the other types.
func rowScalesOf[T RowElem](x []T, scales []float32, e int) []float32 {
	switch any(x).(type) {
	case []int8:
		return rowScales(scales, e)
	case []fp16.Float8E4M3, []fp16.Float8E5M2:
		return scales
	}
	return nil
}

// QKRows computes the scaled dot products of rows query rows with cols key
// rows read in place (no transposed panel), converting each key element to
// float32 exactly (binary16, bfloat16) or dequantising it (int8, with
// scales):
//
//	for i := 0; i < rows; i++ {
//		for j := 0; j < cols; j++ {
//			var acc float32
//			for c := 0; c < d; c++ {
//				acc += q[i*ldQ+c] * K(j*ldK + c)
//			}
//			s[i*ldS+j] = scale * acc
//		}
//	}
//
// where K(e) is float32(k[e]) for float32, binary16 and bfloat16 keys and
// float32(k[e])·scales[e/Q8Block] for int8 keys. For 8-bit float keys
// (E4M3FN, E5M2) K(e) is k[e].Float32() and the keys' one scale,
// scales[0] (a tensor's or a K/V head's), is folded into the score scale:
// each sum is multiplied by scale·scales[0], rounded once, which costs the
// kernels nothing per element. scales is read only for int8 and 8-bit
// floats and may be nil otherwise; for int8, ldK must be a multiple of
// Q8Block so that every row starts a block. The order of the additions is
// not part of the contract.
func QKRows[T RowElem](s []float32, ldS int, q []float32, ldQ int, k []T, scales []float32, ldK int, rows, cols, d int, scale float32) error {
	return qkRowsPrefetch(s, ldS, q, ldQ, k, scales, ldK, rows, cols, d, scale, prefetchRows*ldK)
}

// prefetchRows is how many rows ahead of the one they read QKRows and
// PVRows prefetch into the L2 cache. A decode
// step reads every cached row once, and on one core the hardware
// prefetcher alone leaves the kernels well short of the memory's read
// bandwidth.
const prefetchRows = 64

// qkRowsPrefetch is QKRows with the prefetch distance given: while the
// assembly reads element e of k, it prefetches the cache line of element
// e+ahead into the L2 cache. QKRows passes prefetchRows·ldK; a caller whose
// later rows lie elsewhere (a paged cache's next blocks) passes where they
// are, as an offset in elements from the rows being read. A prefetch is a
// hint that never faults, so the target need not lie inside k (0 is a
// target that costs nothing); ahead changes the speed, never the result.
// The generic code and float32 values (read by PV) ignore it.
func qkRowsPrefetch[T RowElem](s []float32, ldS int, q []float32, ldQ int, k []T, scales []float32, ldK int, rows, cols, d int, scale float32, ahead int) error {
	if err := checkDims("QKRows", rows, cols, d); err != nil {
		return err
	}
	if err := checkBlock("QKRows", "s", len(s), ldS, rows, cols); err != nil {
		return err
	}
	if err := checkBlock("QKRows", "q", len(q), ldQ, rows, d); err != nil {
		return err
	}
	if err := checkRows("QKRows", "k", k, scales, ldK, cols, d); err != nil {
		return err
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	dv := 0
	if d > 0 {
		dv = qkRowsAsm(s, ldS, q, ldQ, k, scales, ldK, rows, cols, d, scale, ahead)
	}
	qkRowsGeneric(s, ldS, q, ldQ, k, scales, ldK, rows, cols, dv, d, scale)
	return nil
}

// PVRows accumulates the product of a probability tile and cols value rows
// read in place, converting or dequantising each value as QKRows does:
//
//	for i := 0; i < rows; i++ {
//		for c := 0; c < d; c++ {
//			acc := o[i*ldO+c]
//			for j := 0; j < cols; j++ {
//				acc += p[i*ldP+j] * V(j*ldV + c)
//			}
//			o[i*ldO+c] = acc
//		}
//	}
//
// For 8-bit float values V(e) is v[e].Float32() and each probability is
// first multiplied by the values' one scale, scales[0] (rounded once, into
// a buffer on the stack): o += (p·scales[0])·v, which costs the kernels
// nothing per element. As with PV, only the first cols values are read,
// so a caller keeps a key out of a row by passing a smaller cols. The
// order of the additions is not part of the contract, but a column's
// result does not depend on d: with any implementation, the call over the
// first d' < d columns of the same rows gives the bits of the call over d
// on those columns (V given as a view of the first components of wider
// rows, as MLA's absorbed decode reads K, gives the bits of the wider V).
func PVRows[T RowElem](o []float32, ldO int, p []float32, ldP int, v []T, scales []float32, ldV int, rows, cols, d int) error {
	return pvRowsPrefetch(o, ldO, p, ldP, v, scales, ldV, rows, cols, d, prefetchRows*ldV)
}

// pvRowsPrefetch is PVRows with the prefetch distance given, in elements
// of v, as for qkRowsPrefetch.
func pvRowsPrefetch[T RowElem](o []float32, ldO int, p []float32, ldP int, v []T, scales []float32, ldV int, rows, cols, d, ahead int) error {
	if err := checkDims("PVRows", rows, cols, d); err != nil {
		return err
	}
	if err := checkBlock("PVRows", "o", len(o), ldO, rows, d); err != nil {
		return err
	}
	if err := checkBlock("PVRows", "p", len(p), ldP, rows, cols); err != nil {
		return err
	}
	if err := checkRows("PVRows", "v", v, scales, ldV, cols, d); err != nil {
		return err
	}
	if rows == 0 || cols == 0 || d == 0 {
		return nil
	}
	if isFP8(v) {
		f, unit := fp8ValueScale(kindOf(v), scales[0])
		scaledProbs(p, ldP, rows, cols, f, func(pp []float32, ldPP, i0, m, j0, n int) {
			if dv := pvRowsAsm(o[i0*ldO:], ldO, pp, ldPP, v[j0*ldV:], unit, ldV, m, n, d, ahead); dv < d {
				pvRowsTail(o[i0*ldO:], ldO, pp, ldPP, v[j0*ldV:], unit, ldV, m, n, dv, d)
			}
		})
		return nil
	}
	if dv := pvRowsAsm(o, ldO, p, ldP, v, scales, ldV, rows, cols, d, ahead); dv < d {
		pvRowsTail(o, ldO, p, ldP, v, scales, ldV, rows, cols, dv, d)
	}
	return nil
}

// The scales by which the PV kernels of 8-bit floats widen: none, or
// 2^−8 (what the E4M3 assembly's widening gives).
var (
	unitScale = []float32{1}
	e4m3Scale = []float32{0x1p-8}
)

// fp8ValueScale returns the factor f by which the PV kernels of 8-bit
// float values of kind, scale sc, multiply the probabilities, and the
// scale by which they widen the values: sc and 1, or for E4M3 where the
// active level has its assembly sc·2^8 and 2^−8, so that the generic
// columns (pvRowsTail) widen as the assembly does and each product is the
// same real number, (p·sc)·v, rounded once by the FMA. A scale whose 2^8
// multiple would not be finite stays as it is, and then the assembly is
// not used (the kernel wrappers see the unit scale of 1).
func fp8ValueScale(kind rowKind, sc float32) (f float32, unit []float32) {
	if kind == rowE4M3 && cur.f32.pvRows[rowE4M3] != nil && math.Abs(float64(sc)) <= math.MaxFloat32/512 {
		return sc * 256, e4m3Scale
	}
	return sc, unitScale
}

// probChunk is the most probabilities scaledProbs scales at a time, on the
// stack: 8 KiB.
const probChunk = 2048

// scaledProbs calls f for blocks of the rows × cols probabilities p
// (rows ldP apart) multiplied by sc: rows [i0, i0+m) and keys [j0, j0+n)
// in pp, rows ldPP apart. The blocks cover p in order of their keys
// within each block of rows, so a caller that accumulates them adds each
// output's products in key order, as one call over all of p would.
func scaledProbs(p []float32, ldP, rows, cols int, sc float32, f func(pp []float32, ldPP, i0, m, j0, n int)) {
	var bufA [probChunk]float32
	buf := stackF32(bufA[:])
	const maxRows = 16
	for i0 := 0; i0 < rows; i0 += maxRows {
		m := min(maxRows, rows-i0)
		step := probChunk / m
		for j0 := 0; j0 < cols; j0 += step {
			n := min(step, cols-j0)
			for i := range m {
				row := p[(i0+i)*ldP+j0:][:n]
				out := buf[i*n:][:n]
				for j, x := range row {
					out[j] = x * sc
				}
			}
			f(buf, n, i0, m, j0, n)
		}
	}
}

// checkRows checks n rows of d elements ld apart, and for int8 and 8-bit
// floats their scales.
func checkRows[T RowElem](fn, name string, x []T, scales []float32, ld, n, d int) error {
	if err := checkBlock(fn, name, len(x), ld, n, d); err != nil {
		return err
	}
	if isFP8(x) && n > 0 && d > 0 && len(scales) < 1 {
		return fmt.Errorf("kernel.%s: 8-bit float %s has no scale; want scales[0], the scale of every element", fn, name)
	}
	if _, ok := any(x).([]int8); !ok || n == 0 || d == 0 {
		return nil
	}
	if ld%Q8Block != 0 {
		return fmt.Errorf("kernel.%s: leading dimension of int8 %s is %d; want a multiple of %d (rows start Q8 blocks)", fn, name, ld, Q8Block)
	}
	if need := ((n-1)*ld + d + Q8Block - 1) / Q8Block; len(scales) < need {
		return fmt.Errorf("kernel.%s: %s has %d scales; want >= %d for %d rows of %d with leading dimension %d", fn, name, len(scales), need, n, d, ld)
	}
	return nil
}

// widen converts elements e..e+len(dst)−1 of x to float32.
func widen[T RowElem](dst []float32, x []T, scales []float32, e int) {
	switch x := any(x).(type) {
	case []float32:
		copy(dst, x[e:])
	case []fp16.Float16:
		for i := range dst {
			dst[i] = x[e+i].Float32()
		}
	case []fp16.BFloat16:
		for i := range dst {
			dst[i] = x[e+i].Float32()
		}
	case []int8:
		for i := range dst {
			dst[i] = float32(x[e+i]) * scales[(e+i)/Q8Block]
		}
	case []fp16.Float8E4M3:
		widenFP8(dst, x[e:], scales[0], fp16.Float8E4M3Table())
	case []fp16.Float8E5M2:
		widenFP8(dst, x[e:], scales[0], fp16.Float8E5M2Table())
	}
}

// widenFP8 writes the len(dst) values of x, widened through their table
// and times sc, to dst.
func widenFP8[T ~uint8](dst []float32, x []T, sc float32, table *[256]float32) {
	x = x[:len(dst)]
	for i, b := range x {
		dst[i] = table[b] * sc
	}
}

// qkRowsGeneric is QKRows over components [c0, d): with c0 = 0 it writes
// the scores, otherwise it adds scale times the dot products over those
// components to scores that hold the first c0 components' already. It sums
// in chunks of qktChunk components, as qktGeneric does.
func qkRowsGeneric[T RowElem](s []float32, ldS int, q []float32, ldQ int, k []T, scales []float32, ldK int, rows, cols, c0, d int, scale float32) {
	if c0 >= d && c0 > 0 {
		return
	}
	if isFP8(k) {
		// The keys' scale goes into the score scale (QKRows).
		scale *= scales[0]
		scales = unitScale
	}
	var buf [qktChunk]float32
	for j := range cols {
		for i := range rows {
			var acc float32
			for cc := c0; cc < d; cc += qktChunk {
				n := min(qktChunk, d-cc)
				widen(buf[:n], k, scales, j*ldK+cc)
				var part float32
				for c, x := range buf[:n] {
					part += q[i*ldQ+cc+c] * x
				}
				acc += part
			}
			if c0 == 0 {
				s[i*ldS+j] = scale * acc
			} else {
				s[i*ldS+j] += scale * acc
			}
		}
	}
}

// pvRowsTail is PVRows over output columns [c0, d), those the assembly
// (pvRowsAsm) left. Where the active level has row kernels, it widens
// those columns of tailKeys value rows at a time into a float32 panel and
// hands it to the PV kernel, which adds each product with an FMA, key
// after key, from o, as the row kernels do: a column's bits do not depend
// on whether it fell in one of the row kernels' vectors or here, so V
// given as a view of the first Dv components of wider rows gives the bits
// of the wider call on those columns. (The widening is exact, and for Q8
// the one rounding of float32(x)·scale the kernels make.) Elsewhere it is
// pvRowsGeneric, which computes every column.
func pvRowsTail[T RowElem](o []float32, ldO int, p []float32, ldP int, v []T, scales []float32, ldV int, rows, cols, c0, d int) {
	if !rowKernels() {
		pvRowsGeneric(o, ldO, p, ldP, v, scales, ldV, rows, cols, c0, d)
		return
	}
	var bufA [tailKeys * qktChunk]float32
	buf := stackF32(bufA[:])
	for cc := c0; cc < d; cc += qktChunk {
		n := min(qktChunk, d-cc)
		for j0 := 0; j0 < cols; j0 += tailKeys {
			nk := min(tailKeys, cols-j0)
			for j := range nk {
				widen(buf[j*n:(j+1)*n], v, scales, (j0+j)*ldV+cc)
			}
			pv(o[cc:], ldO, p[j0:], ldP, buf[:nk*n], n, rows, nk, n)
		}
	}
}

// tailKeys is how many value rows pvRowsTail widens for one PV call.
const tailKeys = 32

// pvRowsGeneric is PVRows over output columns [c0, d).
func pvRowsGeneric[T RowElem](o []float32, ldO int, p []float32, ldP int, v []T, scales []float32, ldV int, rows, cols, c0, d int) {
	var buf [qktChunk]float32
	for cc := c0; cc < d; cc += qktChunk {
		n := min(qktChunk, d-cc)
		for j := range cols {
			widen(buf[:n], v, scales, j*ldV+cc)
			for i := range rows {
				pj := p[i*ldP+j]
				out := o[i*ldO+cc : i*ldO+cc+n]
				for c, x := range buf[:n] {
					out[c] += pj * x
				}
			}
		}
	}
}
