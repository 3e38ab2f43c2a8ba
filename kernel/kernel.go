package kernel

import (
	"fmt"
	"math"

	"github.com/flashgo/flashgo/fp16"
)

// QKT computes a score tile from a block of query rows and a packed,
// transposed K panel, with the scale fused:
//
//	for i := 0; i < rows; i++ {
//		for j := 0; j < cols; j++ {
//			var acc float32
//			for k := 0; k < d; k++ {
//				acc += q[i*ldQ+k] * kt[k*ldK+j]
//			}
//			s[i*ldS+j] = scale * acc
//		}
//	}
//
// The panel kt holds key j's component k at kt[k*ldK+j] (see PackKT), so
// that consecutive keys are adjacent in memory and a SIMD kernel can load a
// vector of keys for one component. The order of the additions is not part
// of the contract.
func QKT(s []float32, ldS int, q []float32, ldQ int, kt []float32, ldK int, rows, cols, d int, scale float32) error {
	if err := checkDims("QKT", rows, cols, d); err != nil {
		return err
	}
	if err := checkBlock("QKT", "s", len(s), ldS, rows, cols); err != nil {
		return err
	}
	if err := checkBlock("QKT", "q", len(q), ldQ, rows, d); err != nil {
		return err
	}
	if err := checkBlock("QKT", "kt", len(kt), ldK, d, cols); err != nil {
		return err
	}
	qktRow(cur.f32, s, ldS, q, ldQ, kt, ldK, rows, cols, d, scale)
	return nil
}

// MatMul computes the matrix product C = A·B of a row-major m×k block A
// and a row-major k×n block B into the m×n block C:
//
//	for i := 0; i < m; i++ {
//		for j := 0; j < n; j++ {
//			var acc float32
//			for t := 0; t < k; t++ {
//				acc += a[i*ldA+t] * b[t*ldB+j]
//			}
//			c[i*ldC+j] = acc
//		}
//	}
//
// It is the entry point for a runtime's dense products (a model's
// projections keep each weight matrix as B, its rows the inputs and its
// columns the outputs, as PackKT writes a transposed matrix). It runs on
// the same SIMD kernels as QKT, with the same rounding: each element is
// independent of the others, so a product cut into column slices (see
// MatMulSlice) gives the same bits as the whole. The order of the
// additions is not part of the contract.
func MatMul(c []float32, ldC int, a []float32, ldA int, b []float32, ldB int, m, n, k int) error {
	if m < 0 || n < 0 || k < 0 {
		return fmt.Errorf("kernel.MatMul: negative size (m %d, n %d, k %d); want sizes >= 0", m, n, k)
	}
	if err := checkBlock("MatMul", "c", len(c), ldC, m, n); err != nil {
		return err
	}
	if err := checkBlock("MatMul", "a", len(a), ldA, m, k); err != nil {
		return err
	}
	if err := checkBlock("MatMul", "b", len(b), ldB, k, n); err != nil {
		return err
	}
	switch {
	case m == 0 || n == 0:
	case k == 0:
		for i := range m {
			clear(c[i*ldC:][:n])
		}
	default:
		qkt(c, ldC, a, ldA, b, ldB, m, n, k, 1)
	}
	return nil
}

// MatMulSlice returns the width of the column slices in which parts
// goroutines may compute one MatMul of n output columns, a MatMul call per
// slice (the last one narrower), with the bits of a single call: about
// n/parts, rounded up to a multiple of the columns the kernels compute
// together. A width >= n means one call.
func MatMulSlice(n, parts int) int {
	step := cur.f32.matMulColumns
	w := (n + max(parts, 1) - 1) / max(parts, 1)
	return (w + step - 1) / step * step
}

// PV accumulates the product of a probability tile and a V panel into an
// output block:
//
//	for i := 0; i < rows; i++ {
//		for k := 0; k < d; k++ {
//			acc := o[i*ldO+k]
//			for j := 0; j < cols; j++ {
//				acc += p[i*ldP+j] * v[j*ldV+k]
//			}
//			o[i*ldO+k] = acc
//		}
//	}
//
// Only the first cols keys are read: a caller that must keep keys out of a
// row (a masked key whose value may be NaN) passes a smaller cols rather
// than a zero probability, since 0·NaN is NaN. The order of the additions is
// not part of the contract.
func PV(o []float32, ldO int, p []float32, ldP int, v []float32, ldV int, rows, cols, d int) error {
	if err := checkDims("PV", rows, cols, d); err != nil {
		return err
	}
	if err := checkBlock("PV", "o", len(o), ldO, rows, d); err != nil {
		return err
	}
	if err := checkBlock("PV", "p", len(p), ldP, rows, cols); err != nil {
		return err
	}
	if err := checkBlock("PV", "v", len(v), ldV, cols, d); err != nil {
		return err
	}
	if rows == 0 || cols == 0 || d == 0 {
		return nil
	}
	pv(o, ldO, p, ldP, v, ldV, rows, cols, d)
	return nil
}

// ExpSum writes the exponential of each element minus max and returns
// their sum:
//
//	var sum float32
//	for i := range n {
//		dst[i] = Exp(src[i] - max)
//		sum += dst[i]
//	}
//	return sum
//
// where n = min(len(dst), len(src)). dst and src may be the same slice.
// This is the softmax numerator of a score row once max is the row's
// running maximum: every argument is then <= 0, so nothing overflows. A
// −Inf score (a masked key) gives exactly 0; a NaN gives NaN. The order of
// the additions is not part of the contract.
func ExpSum(dst, src []float32, max float32) float32 {
	n := min(len(dst), len(src))
	if n == 0 {
		return 0
	}
	return expSum(dst[:n], src[:n], max)
}

// Max returns the largest element of x, −Inf for an empty x, and NaN if any
// element is NaN:
//
//	m := float32(math.Inf(-1))
//	for _, v := range x {
//		if v != v { return NaN }
//		m = max(m, v)
//	}
//	return m
//
// Propagating NaN matters to the attention fold: a row whose scores are all
// NaN must come out NaN, not be mistaken for a row with no visible key.
func Max(x []float32) float32 {
	return maxOf(x)
}

// Scale writes a times each element of src to dst and returns the number of
// elements written:
//
//	for i := range n {
//		dst[i] = a * src[i]
//	}
//	return n
//
// where n = min(len(dst), len(src)). dst and src may be the same slice. The
// attention engine uses it to rescale an output row by exp(m − m_new) and to
// normalise it by 1/z at the end.
func Scale(dst, src []float32, a float32) int {
	n := min(len(dst), len(src))
	if n == 0 {
		return 0
	}
	scale(dst[:n], src[:n], a)
	return n
}

// SoftCap caps each element of src smoothly to (−c, c) and writes it to
// dst, returning the number of elements written:
//
//	inv := 1 / c
//	for i := range n {
//		dst[i] = c * Tanh(src[i]*inv)
//	}
//	return n
//
// where n = min(len(dst), len(src)). dst and src may be the same slice.
// This is Gemma 2's logit soft-capping (attention.Options.SoftCap) of a row
// of scores; c is the cap, a finite number > 0 (others give what the
// formula gives). NaN stays NaN and ±Inf become ±c.
func SoftCap(dst, src []float32, c float32) int {
	n := min(len(dst), len(src))
	if n == 0 {
		return 0
	}
	softCap(dst[:n], src[:n], c, 1/c)
	return n
}

// PackKT packs n float32 key rows of d components into a transposed panel:
//
//	for j := 0; j < n; j++ {
//		for k := 0; k < d; k++ {
//			dst[k*ldDst+j] = src[j*ldSrc+k]
//		}
//	}
//
// The panel is the kt operand of QKT.
func PackKT(dst []float32, ldDst int, src []float32, ldSrc int, n, d int) error {
	if err := checkPack("PackKT", len(dst), ldDst, len(src), ldSrc, n, d, true); err != nil {
		return err
	}
	if n == 0 || d == 0 {
		return nil
	}
	packKT(dst, ldDst, src, ldSrc, n, d)
	return nil
}

// PackKTFloat16 is PackKT for binary16 keys, converting each to float32
// exactly: dst[k*ldDst+j] = src[j*ldSrc+k].Float32().
func PackKTFloat16(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) error {
	if err := checkPack("PackKTFloat16", len(dst), ldDst, len(src), ldSrc, n, d, true); err != nil {
		return err
	}
	if n == 0 || d == 0 {
		return nil
	}
	packKTFloat16(dst, ldDst, src, ldSrc, n, d)
	return nil
}

// PackKTBFloat16 is PackKT for bfloat16 keys, converting each to float32
// exactly: dst[k*ldDst+j] = src[j*ldSrc+k].Float32().
func PackKTBFloat16(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) error {
	if err := checkPack("PackKTBFloat16", len(dst), ldDst, len(src), ldSrc, n, d, true); err != nil {
		return err
	}
	if n == 0 || d == 0 {
		return nil
	}
	packKTBFloat16(dst, ldDst, src, ldSrc, n, d)
	return nil
}

// PackFloat16 converts n binary16 rows of d elements into a row-major
// float32 panel (the v operand of PV):
//
//	for j := 0; j < n; j++ {
//		for k := 0; k < d; k++ {
//			dst[j*ldDst+k] = src[j*ldSrc+k].Float32()
//		}
//	}
func PackFloat16(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) error {
	if err := checkPack("PackFloat16", len(dst), ldDst, len(src), ldSrc, n, d, false); err != nil {
		return err
	}
	if n == 0 || d == 0 {
		return nil
	}
	packFloat16(dst, ldDst, src, ldSrc, n, d)
	return nil
}

// PackBFloat16 is PackFloat16 for bfloat16 rows:
// dst[j*ldDst+k] = src[j*ldSrc+k].Float32().
func PackBFloat16(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) error {
	if err := checkPack("PackBFloat16", len(dst), ldDst, len(src), ldSrc, n, d, false); err != nil {
		return err
	}
	if n == 0 || d == 0 {
		return nil
	}
	packBFloat16(dst, ldDst, src, ldSrc, n, d)
	return nil
}

func checkDims(fn string, rows, cols, d int) error {
	if rows < 0 || cols < 0 || d < 0 {
		return fmt.Errorf("kernel.%s: negative size (rows %d, cols %d, d %d); want sizes >= 0", fn, rows, cols, d)
	}
	return nil
}

// checkBlock reports whether a slice of length n can hold a rows×cols block
// whose rows start ld elements apart.
func checkBlock(fn, name string, n, ld, rows, cols int) error {
	if rows == 0 || cols == 0 {
		return nil
	}
	if ld < cols {
		return fmt.Errorf("kernel.%s: leading dimension of %s is %d; want >= %d (the row length)", fn, name, ld, cols)
	}
	need := (rows-1)*ld + cols
	if n < need {
		return fmt.Errorf("kernel.%s: %s has %d elements; want >= %d for %d rows of %d with leading dimension %d", fn, name, n, need, rows, cols, ld)
	}
	return nil
}

func checkPack(fn string, nDst, ldDst, nSrc, ldSrc, n, d int, transpose bool) error {
	if n < 0 || d < 0 {
		return fmt.Errorf("kernel.%s: negative size (n %d, d %d); want sizes >= 0", fn, n, d)
	}
	if err := checkBlock(fn, "src", nSrc, ldSrc, n, d); err != nil {
		return err
	}
	if transpose {
		return checkBlock(fn, "dst", nDst, ldDst, d, n)
	}
	return checkBlock(fn, "dst", nDst, ldDst, n, d)
}

// PackKTQ8 dequantises n int8 key rows of d components into a transposed
// panel, as PackKT packs float32 ones:
//
//	for j := 0; j < n; j++ {
//		for k := 0; k < d; k++ {
//			e := j*ldSrc + k
//			dst[k*ldDst+j] = float32(src[e]) * scales[e/Q8Block]
//		}
//	}
//
// ldSrc must be a multiple of Q8Block (every row starts a block) and
// scales hold the scale of every block the rows reach, as for QKRows. The
// product is the one QKRows and PVRows take in registers, so a key
// dequantised here and one read by them are the same float32. It is a Go
// loop on every implementation for now.
func PackKTQ8(dst []float32, ldDst int, src []int8, scales []float32, ldSrc int, n, d int) error {
	if err := checkPack("PackKTQ8", len(dst), ldDst, len(src), ldSrc, n, d, true); err != nil {
		return err
	}
	if err := checkRows("PackKTQ8", "src", src, scales, ldSrc, n, d); err != nil {
		return err
	}
	for j := range n {
		for c0 := 0; c0 < d; c0 += Q8Block {
			e := j*ldSrc + c0
			s := scales[e/Q8Block]
			for c, x := range src[e : e+min(Q8Block, d-c0)] {
				dst[(c0+c)*ldDst+j] = float32(x) * s
			}
		}
	}
	return nil
}

// PackQ8 dequantises n int8 value rows of d components into a row-major
// panel:
//
//	for j := 0; j < n; j++ {
//		for k := 0; k < d; k++ {
//			e := j*ldSrc + k
//			dst[j*ldDst+k] = float32(src[e]) * scales[e/Q8Block]
//		}
//	}
//
// with PackKTQ8's conditions on ldSrc and scales. It is a Go loop on every
// implementation for now.
func PackQ8(dst []float32, ldDst int, src []int8, scales []float32, ldSrc int, n, d int) error {
	if err := checkPack("PackQ8", len(dst), ldDst, len(src), ldSrc, n, d, false); err != nil {
		return err
	}
	if err := checkRows("PackQ8", "src", src, scales, ldSrc, n, d); err != nil {
		return err
	}
	for j := range n {
		out := dst[j*ldDst : j*ldDst+d]
		for c0 := 0; c0 < d; c0 += Q8Block {
			e := j*ldSrc + c0
			s := scales[e/Q8Block]
			for c, x := range src[e : e+min(Q8Block, d-c0)] {
				out[c0+c] = float32(x) * s
			}
		}
	}
	return nil
}

// OnlineSoftmax folds a tile of scores into the running maximum m and the
// running sum z of each of its rows (docs/math.md), leaving in s the
// unnormalised probabilities and in alpha the factor by which each row's
// output accumulator must be rescaled:
//
//	for i := 0; i < rows; i++ {
//		row := s[i*ldS : i*ldS+cols]
//		mNew := max(m[i], Max(row))
//		if mNew == −Inf { // nothing seen yet: no weight, and no NaN
//			clear(row)
//			alpha[i] = 1
//			continue
//		}
//		alpha[i] = Exp(m[i] − mNew)
//		z[i] = alpha[i]*z[i] + ExpSum(row, row, mNew)
//		m[i] = mNew
//	}
//
// A NaN score makes its row's m, z and alpha NaN, so the row's output is
// NaN, as the definition of softmax has it.
func OnlineSoftmax(s []float32, ldS int, rows, cols int, m, z, alpha []float32) error {
	if err := checkDims("OnlineSoftmax", rows, cols, 0); err != nil {
		return err
	}
	if err := checkBlock("OnlineSoftmax", "s", len(s), ldS, rows, cols); err != nil {
		return err
	}
	if len(m) < rows || len(z) < rows || len(alpha) < rows {
		return fmt.Errorf("kernel.OnlineSoftmax: m, z and alpha have %d, %d and %d elements; want >= %d (rows)", len(m), len(z), len(alpha), rows)
	}
	onlineSoftmax(cur.f32, s, ldS, rows, cols, m, z, alpha)
	return nil
}

// onlineSoftmax is OnlineSoftmax on the kernels of row r, arguments
// checked: the chain that FoldTile's twin runs on a level's row.
func onlineSoftmax(r *f32Row, s []float32, ldS int, rows, cols int, m, z, alpha []float32) {
	// Pass 1: each row's new maximum, and in alpha the exponent m − m_new
	// of its rescale factor. Pass 2 takes all the factors' exponentials in
	// one vector call rather than a scalar call a row. Pass 3 turns scores
	// into probabilities and folds their sums into z.
	for i := range rows {
		mNew := m[i]
		if cols > 0 {
			mNew = max(mNew, r.max(s[i*ldS:][:cols]))
		}
		if mNew == negInf {
			alpha[i] = 0 // exp(0) = 1, and no NaN from −Inf + Inf
			continue
		}
		alpha[i] = m[i] - mNew
		m[i] = mNew
	}
	if rows > 0 {
		r.expSum(alpha[:rows], alpha[:rows], 0)
	}
	for i := range rows {
		row := s[i*ldS:][:cols]
		if m[i] == negInf {
			clear(row)
			continue
		}
		sum := float32(0)
		if cols > 0 {
			sum = r.expSum(row, row, m[i])
		}
		z[i] = alpha[i]*z[i] + sum
	}
}

// ScaleRows multiplies each row of a block by its own factor:
//
//	for i := 0; i < rows; i++ {
//		for k := 0; k < d; k++ {
//			o[i*ldO+k] *= alpha[i]
//		}
//	}
//
// It is the rescale of the output accumulators by exp(m − m_new); rows
// whose factor is exactly 1 are left as they are, which changes nothing.
func ScaleRows(o []float32, ldO int, alpha []float32, rows, d int) error {
	if err := checkDims("ScaleRows", rows, d, 0); err != nil {
		return err
	}
	if err := checkBlock("ScaleRows", "o", len(o), ldO, rows, d); err != nil {
		return err
	}
	if len(alpha) < rows {
		return fmt.Errorf("kernel.ScaleRows: alpha has %d elements; want >= %d (rows)", len(alpha), rows)
	}
	scaleRows(cur.f32, o, ldO, alpha, rows, d)
	return nil
}

// scaleRows is ScaleRows on the kernels of row r, arguments checked.
func scaleRows(r *f32Row, o []float32, ldO int, alpha []float32, rows, d int) {
	if d == 0 {
		return
	}
	for i, a := range alpha[:rows] {
		if a != 1 {
			row := o[i*ldO:][:d]
			r.scale(row, row, a)
		}
	}
}

var negInf = float32(math.Inf(-1))
