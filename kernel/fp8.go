package kernel

import "github.com/flashgo/flashgo/fp16"

// Float8 is an 8-bit floating-point element type of K and V rows: OCP
// E4M3FN or E5M2, with one float32 scale for every element a call reads.
type Float8 interface {
	fp16.Float8E4M3 | fp16.Float8E5M2
}

// fp8Table returns the float32 values of T's 256 patterns.
func fp8Table[T Float8]() *[256]float32 {
	var z T
	if _, ok := any(z).(fp16.Float8E4M3); ok {
		return fp16.Float8E4M3Table()
	}
	return fp16.Float8E5M2Table()
}

// PackKTFloat8 converts n 8-bit float key rows of d components into a
// transposed float32 panel, as PackKT packs float32 ones:
//
//	for j := 0; j < n; j++ {
//		for k := 0; k < d; k++ {
//			dst[k*ldDst+j] = src[j*ldSrc+k].Float32() * scale
//		}
//	}
//
// The product is rounded to float32 once, as QKRows and PVRows round it
// in registers, so a key widened here and one read by them are the same
// float32. It is a Go loop on every implementation.
func PackKTFloat8[T Float8](dst []float32, ldDst int, src []T, scale float32, ldSrc int, n, d int) error {
	if err := checkPack("PackKTFloat8", len(dst), ldDst, len(src), ldSrc, n, d, true); err != nil {
		return err
	}
	if n == 0 || d == 0 {
		return nil
	}
	t := fp8Table[T]()
	// packKBlock keys at a time, so that each panel row is written a
	// cache line at a time rather than one element per row.
	for j0 := 0; j0 < n; j0 += packKBlock {
		nb := min(packKBlock, n-j0)
		for k := range d {
			o := dst[k*ldDst+j0:][:nb]
			for jj := range o {
				o[jj] = t[src[(j0+jj)*ldSrc+k]] * scale
			}
		}
	}
	return nil
}

// PackFloat8 converts n 8-bit float value rows of d components into a
// row-major float32 panel:
//
//	for j := 0; j < n; j++ {
//		for k := 0; k < d; k++ {
//			dst[j*ldDst+k] = src[j*ldSrc+k].Float32() * scale
//		}
//	}
//
// rounded as PackKTFloat8 rounds. It is a Go loop on every implementation.
func PackFloat8[T Float8](dst []float32, ldDst int, src []T, scale float32, ldSrc int, n, d int) error {
	if err := checkPack("PackFloat8", len(dst), ldDst, len(src), ldSrc, n, d, false); err != nil {
		return err
	}
	if n == 0 || d == 0 {
		return nil
	}
	t := fp8Table[T]()
	for j := range n {
		out := dst[j*ldDst:][:d]
		for c, x := range src[j*ldSrc:][:d] {
			out[c] = t[x] * scale
		}
	}
	return nil
}
