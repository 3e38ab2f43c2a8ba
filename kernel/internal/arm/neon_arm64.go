//go:build arm64 && !purego

package arm

// The NEON kernels in neon_arm64.s. Each has exactly the semantics of its
// generic twin in kernel's generic.go (kernel's neon_arm64_test.go compares
// them),
// takes raw pointers, leading dimensions in elements and sizes >= 1, and
// reads and writes only the elements that the reference loop names: tails
// of any length are handled without touching the gaps between rows or the
// memory past the last element. Sizes of 0 (or less) are also safe: nothing
// is read or written, except that QktNEON with d = 0 and rows, cols >= 1
// writes scale·0 like qktGeneric (the exported QKT lets d = 0 through).

// QktNEON computes a score tile, summing the d components in chunks of
// qktChunk like qktGeneric:
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
//go:noescape
func QktNEON(s *float32, ldS int, q *float32, ldQ int, kt *float32, ldK int, rows, cols, d int, scale float32)

// PvNEON accumulates a probability tile times a V panel into an output block:
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
//go:noescape
func PvNEON(o *float32, ldO int, p *float32, ldP int, v *float32, ldV int, rows, cols, d int)

// ExpSumNEON writes the exponential of each element minus max and returns
// their sum:
//
//	var sum float32
//	for i := 0; i < n; i++ {
//		dst[i] = Exp(src[i] - max)
//		sum += dst[i]
//	}
//	return sum
//
// Each dst[i] is computed as Exp computes it (the same reduction, polynomial
// and special cases); only the order of the additions into sum differs. dst
// and src may be the same pointer.
//
//go:noescape
func ExpSumNEON(dst, src *float32, n int, max float32) float32

// MaxNEON returns the largest of x[0:n], or the first NaN if any element is
// NaN, exactly as maxGeneric does (bit for bit, including which of -0 and +0
// and which NaN payload comes back):
//
//	m := float32(math.Inf(-1))
//	for i := 0; i < n; i++ {
//		v := x[i]
//		if v != v {
//			return v
//		}
//		if v > m {
//			m = v
//		}
//	}
//	return m
//
//go:noescape
func MaxNEON(x *float32, n int) float32

// ScaleNEON writes a times each element of src to dst; dst and src may be
// the same pointer:
//
//	for i := 0; i < n; i++ {
//		dst[i] = a * src[i]
//	}
//
//go:noescape
func ScaleNEON(dst, src *float32, n int, a float32)

// SoftCapNEON is SoftCap for n a multiple of 4 (the wrapper does the
// rest):
//
//	for i := range n {
//		dst[i] = c * Tanh(src[i]*inv)
//	}
//
// in Tanh's steps, both of its branches taken for every lane and blended.
//
//go:noescape
func SoftCapNEON(dst, src *float32, n int, c, inv float32)

// PackKTNEON packs n float32 rows of d components into a transposed panel:
//
//	for j := 0; j < n; j++ {
//		for k := 0; k < d; k++ {
//			dst[k*ldDst+j] = src[j*ldSrc+k]
//		}
//	}
//
//go:noescape
func PackKTNEON(dst *float32, ldDst int, src *float32, ldSrc int, n, d int)

// PackKTF16NEON is PackKTNEON for binary16 rows, widened with FCVTL:
//
//	for j := 0; j < n; j++ {
//		for k := 0; k < d; k++ {
//			dst[k*ldDst+j] = fp16.Float16(src[j*ldSrc+k]).Float32()
//		}
//	}
//
//go:noescape
func PackKTF16NEON(dst *float32, ldDst int, src *uint16, ldSrc int, n, d int)

// PackKTBF16NEON is PackKTNEON for bfloat16 rows, widened by a 16-bit shift:
//
//	for j := 0; j < n; j++ {
//		for k := 0; k < d; k++ {
//			dst[k*ldDst+j] = math.Float32frombits(uint32(src[j*ldSrc+k]) << 16)
//		}
//	}
//
//go:noescape
func PackKTBF16NEON(dst *float32, ldDst int, src *uint16, ldSrc int, n, d int)

// PackF16NEON converts n binary16 rows of d elements into a row-major
// float32 panel:
//
//	for j := 0; j < n; j++ {
//		for k := 0; k < d; k++ {
//			dst[j*ldDst+k] = fp16.Float16(src[j*ldSrc+k]).Float32()
//		}
//	}
//
//go:noescape
func PackF16NEON(dst *float32, ldDst int, src *uint16, ldSrc int, n, d int)

// PackBF16NEON converts n bfloat16 rows of d elements into a row-major
// float32 panel:
//
//	for j := 0; j < n; j++ {
//		for k := 0; k < d; k++ {
//			dst[j*ldDst+k] = math.Float32frombits(uint32(src[j*ldSrc+k]) << 16)
//		}
//	}
//
//go:noescape
func PackBF16NEON(dst *float32, ldDst int, src *uint16, ldSrc int, n, d int)
