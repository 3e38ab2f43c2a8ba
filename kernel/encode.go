package kernel

import (
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
)

// The encoders: float32, binary16 or bfloat16 rows converted to the
// element types a K/V cache or pool stores (binary16, bfloat16, 8-bit
// floats with a scale, Q8), as attention's writes store new keys and
// values (PagedKV.Write, KVCache.Append, PagedCache.Append) and its reads
// convert them back into another type. Each gives the bits of the scalar
// conversion it names (fp16's, QuantizeQ8's Go loop), whatever the level:
// the avx512 and avx2 levels run vector kernels (kernel/_asm/encode), the
// others the Go loops below, which the kernels are tested against.
// They never allocate, and unlike the other exported kernels their
// arguments do not escape (stackSlice: the kernels keep no pointer past
// the call), so a caller may pass buffers on its stack.

// EncodeElem is an element type the encoders read: float32, or binary16
// or bfloat16, each widened exactly to float32 first.
type EncodeElem interface {
	float32 | fp16.Float16 | fp16.BFloat16
}

// encSrc indexes the encoders of a level by source type.
type encSrc int

const (
	encF32 encSrc = iota
	encF16
	encBF16
	numEncSrc
)

// encRow holds the encoders of a level, indexed by source type, each
// for n >= 1 elements (blocks >= 1 for q8, which returns the blocks it
// quantised: see quantizeQ8); a nil entry runs the Go loop.
type encRow struct {
	f16, bf16  [numEncSrc]func(dst *uint16, src unsafe.Pointer, n int)
	e4m3, e5m2 [numEncSrc]func(dst *uint8, src unsafe.Pointer, n int, scale float32)
	q8         [numEncSrc]func(dst *int8, scales *float32, src unsafe.Pointer, blocks int) int
}

// encSrcOf returns the source index of S.
func encSrcOf[S EncodeElem]() encSrc {
	var z S
	switch any(z).(type) {
	case fp16.Float16:
		return encF16
	case fp16.BFloat16:
		return encBF16
	}
	return encF32
}

// encoders returns the encoders of the level in use, or nil.
func encoders() *encRow { return cur.f32.enc }

// EncodeFloat16 converts min(len(dst), len(src)) elements of src to
// binary16 in dst, as fp16.FromFloat32 converts their float32 values (to
// nearest even, ±Inf beyond the range, subnormals kept, NaN quiet with its
// sign), and returns that count. A binary16 src is copied. Like copy, it
// leaves the rest of dst untouched; it does not allocate. dst and src must
// not overlap.
func EncodeFloat16[S EncodeElem](dst []fp16.Float16, src []S) int {
	n := min(len(dst), len(src))
	if n == 0 {
		return 0
	}
	// New variables: escape analysis does not follow the stack slices
	// (reassigning the parameters would leave them escaping).
	d, x := stackSlice(dst[:n]), stackSlice(src[:n])
	s := encSrcOf[S]()
	if s == encF16 {
		copy(d, asFloat16s(x))
		return n
	}
	if r := encoders(); r != nil && r.f16[s] != nil {
		r.f16[s](bits16(d), unsafe.Pointer(&x[0]), n)
		return n
	}
	encodeFloat16Generic(d, x)
	return n
}

// EncodeBFloat16 converts min(len(dst), len(src)) elements of src to
// bfloat16 in dst, as fp16.BFloat16FromFloat32 converts their float32
// values (to nearest even, subnormals rounded rather than flushed, NaN
// quiet with its sign), and returns that count, as EncodeFloat16. A
// bfloat16 src is copied.
func EncodeBFloat16[S EncodeElem](dst []fp16.BFloat16, src []S) int {
	n := min(len(dst), len(src))
	if n == 0 {
		return 0
	}
	d, x := stackSlice(dst[:n]), stackSlice(src[:n])
	s := encSrcOf[S]()
	if s == encBF16 {
		copy(d, asBFloat16s(x))
		return n
	}
	if r := encoders(); r != nil && r.bf16[s] != nil {
		r.bf16[s](bits16(d), unsafe.Pointer(&x[0]), n)
		return n
	}
	encodeBFloat16Generic(d, x)
	return n
}

// EncodeFloat8 converts min(len(dst), len(src)) elements of src to the
// 8-bit float T, each float32 value divided by scale in float32 and then
// rounded as fp16.Float8E4M3FromFloat32 or Float8E5M2FromFloat32 rounds
// (to nearest even, saturating at the largest finite value, NaN to NaN):
//
//	dst[i] = fp16.Float8E4M3FromFloat32(float32(src[i]) / scale)
//
// and returns that count, as EncodeFloat16. It is how a K/V cache or
// pool of 8-bit floats stores a row (a tensor's or a K/V head's scale).
func EncodeFloat8[T Float8, S EncodeElem](dst []T, src []S, scale float32) int {
	n := min(len(dst), len(src))
	if n == 0 {
		return 0
	}
	d, x := stackSlice(dst[:n]), stackSlice(src[:n])
	s := encSrcOf[S]()
	if r := encoders(); r != nil {
		k := r.e5m2[s]
		if isE4M3[T]() {
			k = r.e4m3[s]
		}
		if k != nil {
			k((*uint8)(unsafe.Pointer(&d[0])), unsafe.Pointer(&x[0]), n, scale)
			return n
		}
	}
	encodeFloat8Generic(d, x, scale)
	return n
}

// isE4M3 reports whether T is E4M3FN (else E5M2).
func isE4M3[T Float8]() bool {
	var z T
	_, ok := any(z).(fp16.Float8E4M3)
	return ok
}

// quantizeQ8 quantises len(scales) blocks of src into dst and scales
// (QuantizeQ8 has checked the lengths): with the level's kernel, which
// stops at a block of QuantizeQ8's rare branches (a subnormal scale, or
// 127 times the scale overflowing) and returns the blocks done; the Go
// loop quantises that block, and the kernel goes on from the next.
func quantizeQ8[S EncodeElem](dst []int8, scales []float32, src []S) {
	blocks := len(scales)
	if blocks == 0 {
		return
	}
	q, sc, x := stackSlice(dst), stackSlice(scales), stackSlice(src)
	var k func(dst *int8, scales *float32, src unsafe.Pointer, blocks int) int
	if r := encoders(); r != nil {
		k = r.q8[encSrcOf[S]()]
	}
	if k == nil {
		quantizeQ8Generic(q, sc, x)
		return
	}
	for g := 0; g < blocks; {
		g += k(&q[g*Q8Block], &sc[g], unsafe.Pointer(&x[g*Q8Block]), blocks-g)
		if g < blocks {
			quantizeQ8Generic(q[g*Q8Block:][:Q8Block], sc[g:g+1], x[g*Q8Block:][:Q8Block])
			g++
		}
	}
}

// The generic encoders: the scalar conversions, element by element.

func encodeFloat16Generic[S EncodeElem](dst []fp16.Float16, src []S) {
	switch s := any(src).(type) {
	case []float32:
		fp16.EncodeFloat16(dst, s)
	case []fp16.Float16:
		copy(dst, s)
	case []fp16.BFloat16:
		for i, x := range s {
			dst[i] = fp16.FromFloat32(x.Float32())
		}
	}
}

func encodeBFloat16Generic[S EncodeElem](dst []fp16.BFloat16, src []S) {
	switch s := any(src).(type) {
	case []float32:
		fp16.EncodeBFloat16(dst, s)
	case []fp16.Float16:
		for i, x := range s {
			dst[i] = fp16.BFloat16FromFloat32(x.Float32())
		}
	case []fp16.BFloat16:
		copy(dst, s)
	}
}

func encodeFloat8Generic[T Float8, S EncodeElem](dst []T, src []S, scale float32) {
	if s, ok := any(src).([]float32); ok {
		encodeFloat8F32(dst, s, scale)
		return
	}
	var buf [64]float32
	for i := 0; i < len(dst); i += len(buf) {
		w := buf[:min(len(buf), len(dst)-i)]
		widenGeneric(w, src[i:])
		encodeFloat8F32(dst[i:][:len(w)], w, scale)
	}
}

func encodeFloat8F32[T Float8](dst []T, src []float32, scale float32) {
	switch d := any(dst).(type) {
	case []fp16.Float8E4M3:
		for i, x := range src {
			d[i] = fp16.Float8E4M3FromFloat32(x / scale)
		}
	case []fp16.Float8E5M2:
		for i, x := range src {
			d[i] = fp16.Float8E5M2FromFloat32(x / scale)
		}
	}
}

// widenGeneric widens the first len(dst) elements of src (binary16 or
// bfloat16) to float32, exactly.
func widenGeneric[S EncodeElem](dst []float32, src []S) {
	switch s := any(src).(type) {
	case []float32:
		copy(dst, s)
	case []fp16.Float16:
		fp16.DecodeFloat16(dst, s)
	case []fp16.BFloat16:
		fp16.DecodeBFloat16(dst, s)
	}
}

// quantizeQ8Generic is QuantizeQ8's Go loop on blocks of any source type:
// a float32 source as it is, the others widened a block at a time.
func quantizeQ8Generic[S EncodeElem](dst []int8, scales []float32, src []S) {
	if s, ok := any(src).([]float32); ok {
		quantizeQ8F32(dst, scales, s)
		return
	}
	var buf [Q8Block]float32
	for g := range scales {
		widenGeneric(buf[:], src[g*Q8Block:][:Q8Block])
		quantizeQ8F32(dst[g*Q8Block:][:Q8Block], scales[g:g+1], buf[:])
	}
}

// asFloat16s and asBFloat16s view a source already known to be of that
// type as such.
func asFloat16s[S EncodeElem](s []S) []fp16.Float16 {
	return unsafe.Slice((*fp16.Float16)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

func asBFloat16s[S EncodeElem](s []S) []fp16.BFloat16 {
	return unsafe.Slice((*fp16.BFloat16)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}
