package attention

import (
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel"
)

// DType is the element type of a Tensor.
type DType uint8

// The element types the engine reads and writes. Queries and outputs may
// be F32, F16 or BF16; keys and values may be any of them.
const (
	F32  DType = iota + 1 // IEEE binary32 (float32)
	F16                   // IEEE binary16 (fp16.Float16)
	BF16                  // bfloat16 (fp16.BFloat16)
	// Q8 is 8-bit integers with a float32 scale per block of Q8Block
	// consecutive values of a row, as llama.cpp's Q8_0 (which stores the
	// scale as fp16): value = int8 · scale. See Q8Tensor.
	Q8
	// FP8E4M3 is OCP E4M3FN 8-bit floats (fp16.Float8E4M3) with a float32
	// scale for the whole tensor or per head, as vLLM's and SGLang's
	// fp8_e4m3 KV caches with their k_scale and v_scale: value =
	// float32(x) · scale. See FP8E4M3Tensor.
	FP8E4M3
	// FP8E5M2 is OCP E5M2 8-bit floats (fp16.Float8E5M2) with scales as
	// FP8E4M3's. See FP8E5M2Tensor.
	FP8E5M2
)

// Q8Block is the number of consecutive values of a row that share one
// scale in a Q8 tensor: the kernels' block (kernel.Q8Block), which reads
// such rows in place.
const Q8Block = kernel.Q8Block

// String returns the usual short name of the type: "f32", "f16", "bf16",
// "q8", "fp8e4m3" or "fp8e5m2".
func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	case Q8:
		return "q8"
	case FP8E4M3:
		return "fp8e4m3"
	case FP8E5M2:
		return "fp8e5m2"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size returns the size of one element in bytes (0 for an unknown type),
// not counting the scales of Q8 (4 bytes per Q8Block elements) and of the
// fp8 types (4 bytes per tensor or head).
func (d DType) Size() int {
	switch d {
	case Q8, FP8E4M3, FP8E5M2:
		return 1
	case F32:
		return 4
	case F16, BF16:
		return 2
	}
	return 0
}

// Layout describes a 4-D array [batch, heads, seq, dim] laid out in a flat
// slice: element (b, h, s, k) lives at b·BatchStride + h·HeadStride +
// s·SeqStride + k. The head dimension is always contiguous; the other
// strides are free, so one Layout type covers the [batch, heads, seq, dim]
// layout, the [batch, seq, heads, dim] layout that a projection produces,
// and a view into a larger buffer such as a KV cache, without copies.
type Layout struct {
	Batch, Heads, Seq, Dim             int
	BatchStride, HeadStride, SeqStride int
}

// BHSD returns the contiguous layout [batch, heads, seq, dim]. A shape
// with more elements than an int can count gets strides that Validate
// rejects (a stride that does not fit is math.MaxInt), never strides that
// wrapped around.
func BHSD(batch, heads, seq, dim int) Layout {
	return Layout{
		Batch: batch, Heads: heads, Seq: seq, Dim: dim,
		BatchStride: satMul(heads, seq, dim), HeadStride: satMul(seq, dim), SeqStride: dim,
	}
}

// BSHD returns the contiguous layout [batch, seq, heads, dim], the one in
// which a projection x·W writes the heads of a token side by side. The
// Layout still reports the dimensions in the order batch, heads, seq, dim.
// Like BHSD, a shape too large for an int gets strides that Validate
// rejects.
func BSHD(batch, seq, heads, dim int) Layout {
	return Layout{
		Batch: batch, Heads: heads, Seq: seq, Dim: dim,
		BatchStride: satMul(seq, heads, dim), HeadStride: dim, SeqStride: satMul(heads, dim),
	}
}

// Offset returns the index of element (b, h, s, 0).
func (l Layout) Offset(b, h, s int) int {
	return b*l.BatchStride + h*l.HeadStride + s*l.SeqStride
}

// Span returns the number of elements a slice needs to hold the array: one
// past the index of its last element, or 0 when any dimension is 0. It is
// only meaningful for a layout that Validate accepts.
func (l Layout) Span() int {
	if l.Batch == 0 || l.Heads == 0 || l.Seq == 0 || l.Dim == 0 {
		return 0
	}
	return l.Offset(l.Batch-1, l.Heads-1, l.Seq-1) + l.Dim
}

// Validate reports whether the layout is well formed: no negative size or
// stride, and a span that fits in an int.
func (l Layout) Validate() error {
	for _, f := range [...]struct {
		name string
		v    int
	}{
		{"Batch", l.Batch}, {"Heads", l.Heads}, {"Seq", l.Seq}, {"Dim", l.Dim},
		{"BatchStride", l.BatchStride}, {"HeadStride", l.HeadStride}, {"SeqStride", l.SeqStride},
	} {
		if f.v < 0 {
			return fmt.Errorf("%s is %d; want >= 0", f.name, f.v)
		}
	}
	span := uint64(l.Dim)
	for _, p := range [...][2]int{{l.Batch, l.BatchStride}, {l.Heads, l.HeadStride}, {l.Seq, l.SeqStride}} {
		if p[0] == 0 {
			continue
		}
		hi, lo := bits.Mul64(uint64(p[0]-1), uint64(p[1]))
		span += lo
		if hi != 0 || lo > math.MaxInt || span > math.MaxInt {
			return fmt.Errorf("layout of shape [%d %d %d %d] with strides [%d %d %d 1] spans more elements than an int can index; want a smaller shape or strides",
				l.Batch, l.Heads, l.Seq, l.Dim, l.BatchStride, l.HeadStride, l.SeqStride)
		}
	}
	return nil
}

// injective reports whether no two elements of the layout share an index,
// which an output must satisfy. It checks the usual sufficient condition:
// ordered by stride, each dimension steps past everything the smaller ones
// span.
func (l Layout) injective() bool {
	if l.Span() == 0 {
		return true // no elements, none to collide (BHSD gives zero strides)
	}
	dims := [4][2]int{{l.Dim, 1}, {l.Seq, l.SeqStride}, {l.Heads, l.HeadStride}, {l.Batch, l.BatchStride}}
	// Insertion sort by stride; dimensions of size 1 never collide.
	for i := 1; i < len(dims); i++ {
		for j := i; j > 0 && dims[j][1] < dims[j-1][1]; j-- {
			dims[j], dims[j-1] = dims[j-1], dims[j]
		}
	}
	extent := 0 // the largest index reached by the dimensions so far
	for _, d := range dims {
		if d[0] <= 1 {
			continue
		}
		if d[1] <= extent {
			return false
		}
		extent += (d[0] - 1) * d[1]
	}
	return true
}

// isFP8 reports whether d is one of the 8-bit float types.
func (d DType) isFP8() bool { return d == FP8E4M3 || d == FP8E5M2 }

// Tensor is a strided view of a 4-D array of float32, fp16, bfloat16,
// 8-bit quantised or 8-bit float values (see Layout, Q8Tensor and
// FP8E4M3Tensor). It does not own its data: the engine reads queries, keys
// and values through it and writes outputs through it, in place.
type Tensor struct {
	Layout
	dtype DType
	f32   []float32
	f16   []fp16.Float16
	bf16  []fp16.BFloat16
	i8    []int8    // Q8 values
	q8s   []float32 // Q8 scales: element i has scale q8s[i/Q8Block]
	e4m3  []fp16.Float8E4M3
	e5m2  []fp16.Float8E5M2
	f8s   []float32 // fp8 scales: one, or one per head (fp8Scale)
}

// F32Tensor returns a float32 view of data with layout l.
func F32Tensor(data []float32, l Layout) Tensor { return Tensor{Layout: l, dtype: F32, f32: data} }

// F16Tensor returns a binary16 view of data with layout l.
func F16Tensor(data []fp16.Float16, l Layout) Tensor {
	return Tensor{Layout: l, dtype: F16, f16: data}
}

// BF16Tensor returns a bfloat16 view of data with layout l.
func BF16Tensor(data []fp16.BFloat16, l Layout) Tensor {
	return Tensor{Layout: l, dtype: BF16, bf16: data}
}

// Q8Tensor returns a view of 8-bit quantised data with layout l: element i
// of data (in the slice's own numbering) stands for float32(data[i]) ·
// scales[i/Q8Block]. The layout's Dim and strides must be multiples of
// Q8Block, so that each block of Q8Block values lies within one row, and
// scales must hold one entry per block of the span. The engine converts Q8
// keys and values to float32 once per tile, like fp16, or, in a call of few
// query rows on amd64, dequantises them in registers where they lie
// (kernel.QKRows).
func Q8Tensor(data []int8, scales []float32, l Layout) Tensor {
	return Tensor{Layout: l, dtype: Q8, i8: data, q8s: scales}
}

// FP8E4M3Tensor returns a view of E4M3FN data with layout l and its
// scales: element (b, h, s, k) stands for data[l.Offset(b, h, s)+k].Float32()
// · scales[h] when scales holds one entry per head (len(scales) ==
// l.Heads), or · scales[0] for the whole tensor (len(scales) == 1). These
// are vLLM's k_scale and v_scale: the factor by which a value was divided
// before it was rounded to fp8 (KVCache.Append and PagedCache.Append
// quantise so). Every scale must be positive and finite. The engine reads
// fp8 keys and values where they lie in a call of few query rows, and
// converts them to float32 (times the scale, rounded once) a tile at a
// time otherwise, as it does Q8.
func FP8E4M3Tensor(data []fp16.Float8E4M3, scales []float32, l Layout) Tensor {
	return Tensor{Layout: l, dtype: FP8E4M3, e4m3: data, f8s: scales}
}

// FP8E5M2Tensor returns a view of E5M2 data with layout l and its scales,
// as FP8E4M3Tensor.
func FP8E5M2Tensor(data []fp16.Float8E5M2, scales []float32, l Layout) Tensor {
	return Tensor{Layout: l, dtype: FP8E5M2, e5m2: data, f8s: scales}
}

// FP8Scales returns the scales of an FP8E4M3 or FP8E5M2 view (one, or one
// per head), or nil for other types. They are the caller's slice, not a
// copy.
func (t Tensor) FP8Scales() []float32 {
	if !t.dtype.isFP8() {
		return nil
	}
	return t.f8s
}

// fp8Scale returns the scale of head h of an fp8 view as a slice of one
// element, what the kernels take.
func (t *Tensor) fp8Scale(h int) []float32 {
	if len(t.f8s) == 1 {
		return t.f8s[:1]
	}
	return t.f8s[h : h+1]
}

// DType returns the element type of the view, or 0 for the zero Tensor.
func (t Tensor) DType() DType { return t.dtype }

// Len returns the length of the slice behind the view.
func (t Tensor) Len() int {
	switch t.dtype {
	case F32:
		return len(t.f32)
	case F16:
		return len(t.f16)
	case BF16:
		return len(t.bf16)
	case Q8:
		return len(t.i8)
	case FP8E4M3:
		return len(t.e4m3)
	case FP8E5M2:
		return len(t.e5m2)
	}
	return 0
}

// Validate reports whether the view is usable: a known element type, a
// valid layout, and a slice long enough for it.
func (t Tensor) Validate() error {
	if t.dtype == 0 {
		return fmt.Errorf("no data (zero Tensor); want a view made by F32Tensor, F16Tensor, BF16Tensor, Q8Tensor, FP8E4M3Tensor or FP8E5M2Tensor")
	}
	if err := t.Layout.Validate(); err != nil {
		return err
	}
	if t.dtype == Q8 {
		if t.Dim%Q8Block != 0 || t.SeqStride%Q8Block != 0 || t.HeadStride%Q8Block != 0 || t.BatchStride%Q8Block != 0 {
			return fmt.Errorf("q8 view has dim %d and strides [%d %d %d 1]; want multiples of %d", t.Dim, t.BatchStride, t.HeadStride, t.SeqStride, Q8Block)
		}
		if n, need := len(t.q8s), ceilDiv(t.Span(), Q8Block); n < need {
			return fmt.Errorf("q8 scales have %d elements; want >= %d (one per %d values)", n, need, Q8Block)
		}
	}
	if t.dtype.isFP8() {
		if n := len(t.f8s); n != 1 && (n != t.Heads || n == 0) {
			return fmt.Errorf("%v view has %d scales; want 1 (per tensor) or %d (per head)", t.dtype, n, t.Heads)
		}
		for i, sc := range t.f8s {
			if !(sc > 0 && sc <= math.MaxFloat32) {
				return fmt.Errorf("%v scale %d is %v; want a positive finite number", t.dtype, i, sc)
			}
		}
	}
	if n, need := t.Len(), t.Span(); n < need {
		return fmt.Errorf("slice has %d elements; want >= %d for shape [%d %d %d %d] with strides [%d %d %d 1]",
			n, need, t.Batch, t.Heads, t.Seq, t.Dim, t.BatchStride, t.HeadStride, t.SeqStride)
	}
	return nil
}

// byteRange returns the addresses [lo, hi) of the elements the view can
// touch, for overlap checks; an empty view gives lo == hi.
func (t Tensor) byteRange() (lo, hi uintptr) {
	n := t.Span()
	if n == 0 {
		return 0, 0
	}
	var p unsafe.Pointer
	switch t.dtype {
	case F32:
		p = unsafe.Pointer(unsafe.SliceData(t.f32))
	case F16:
		p = unsafe.Pointer(unsafe.SliceData(t.f16))
	case BF16:
		p = unsafe.Pointer(unsafe.SliceData(t.bf16))
	case Q8:
		p = unsafe.Pointer(unsafe.SliceData(t.i8))
	case FP8E4M3:
		p = unsafe.Pointer(unsafe.SliceData(t.e4m3))
	case FP8E5M2:
		p = unsafe.Pointer(unsafe.SliceData(t.e5m2))
	}
	lo = uintptr(p)
	return lo, lo + uintptr(n*t.dtype.Size())
}

// scaleRange returns the addresses [lo, hi) of the scales a Q8 or fp8 view
// can touch (lo == hi for other types and empty views).
func (t Tensor) scaleRange() (lo, hi uintptr) {
	switch {
	case t.Span() == 0:
		return 0, 0
	case t.dtype == Q8:
		return floatsRange(t.q8s[:ceilDiv(t.Span(), Q8Block)])
	case t.dtype.isFP8():
		return floatsRange(t.f8s)
	}
	return 0, 0
}

// scaled reports whether views of type d carry scales (Q8, the fp8 types).
func (d DType) scaled() bool { return d == Q8 || d.isFP8() }

func floatsRange(x []float32) (lo, hi uintptr) {
	if len(x) == 0 {
		return 0, 0
	}
	lo = uintptr(unsafe.Pointer(unsafe.SliceData(x)))
	return lo, lo + uintptr(len(x))*4
}

func overlaps(alo, ahi, blo, bhi uintptr) bool {
	return alo < ahi && blo < bhi && alo < bhi && blo < ahi
}
