// Package ggufwrite writes GGUF files for the tests of packages gguf and
// model: valid files with metadata of every type and tensors of every type
// the reader dequantises, tiny models and vocabularies, and, from its
// low-level [Encoder], broken files.
//
// The writer follows the GGUF format on its own: it has its own type codes
// ([ValueType], [TensorType]) and does not import package gguf, so that
// package gguf's in-package tests can use it and so that a wrong code in the
// reader does not go unnoticed by being shared with the writer. Convert
// between the writer's and the reader's codes with a type conversion: both
// are the uint32 codes of the format.
package ggufwrite

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/flashgo/flashgo/fp16"
)

const (
	// Magic is "GGUF" read as a little-endian uint32: a file's first four
	// bytes.
	Magic = 0x46554747
	// DefaultAlignment is the alignment of the tensor data section and of
	// every tensor in it when a file has no general.alignment key.
	DefaultAlignment = 32
)

// ValueType is the type code of a GGUF metadata value.
type ValueType uint32

// The GGUF metadata value types, with the codes the format gives them.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

// TensorType is the ggml type code of a tensor's data.
type TensorType uint32

// The ggml tensor types that the writer builds, or lays out as filler
// ([RawTensor]), with the codes GGUF stores.
const (
	TypeF32  TensorType = 0
	TypeF16  TensorType = 1
	TypeQ8_0 TensorType = 8
	TypeQ4_K TensorType = 12
	TypeBF16 TensorType = 30
)

// blockLayouts holds, for each tensor type the writer knows, the values per
// block and the bytes per block (gguf-py's GGML_QUANT_SIZES).
var blockLayouts = map[TensorType][2]int{
	TypeF32:  {1, 4},
	TypeF16:  {1, 2},
	TypeQ8_0: {32, 2 + 32},
	TypeQ4_K: {256, 2 + 2 + 256/2 + 12},
	TypeBF16: {1, 2},
}

// Encoder appends little-endian GGUF primitives to B.
type Encoder struct{ B []byte }

// U8 appends x.
func (e *Encoder) U8(x uint8) { e.B = append(e.B, x) }

// U16 appends x, little-endian.
func (e *Encoder) U16(x uint16) { e.B = binary.LittleEndian.AppendUint16(e.B, x) }

// U32 appends x, little-endian.
func (e *Encoder) U32(x uint32) { e.B = binary.LittleEndian.AppendUint32(e.B, x) }

// U64 appends x, little-endian.
func (e *Encoder) U64(x uint64) { e.B = binary.LittleEndian.AppendUint64(e.B, x) }

// Str appends a GGUF string: its uint64 length, then its bytes.
func (e *Encoder) Str(s string) {
	e.U64(uint64(len(s)))
	e.B = append(e.B, s...)
}

// Array is a metadata array for the writer: Items hold Go values of the
// element type (uint8 … float64, bool, string) or, for arrays of arrays,
// Array values.
type Array struct {
	Elem  ValueType
	Items []any
}

// Value appends the payload of a value of type t (without its type code).
// x must be the Go value of that type: uint8 for [ValueUint8] and so on,
// string for [ValueString] and an [Array] for [ValueArray]. It panics on a
// type code it does not know.
func (e *Encoder) Value(t ValueType, x any) {
	switch t {
	case ValueUint8:
		e.U8(x.(uint8))
	case ValueInt8:
		e.U8(uint8(x.(int8)))
	case ValueUint16:
		e.U16(x.(uint16))
	case ValueInt16:
		e.U16(uint16(x.(int16)))
	case ValueUint32:
		e.U32(x.(uint32))
	case ValueInt32:
		e.U32(uint32(x.(int32)))
	case ValueFloat32:
		e.U32(math.Float32bits(x.(float32)))
	case ValueBool:
		if x.(bool) {
			e.U8(1)
		} else {
			e.U8(0)
		}
	case ValueString:
		e.Str(x.(string))
	case ValueUint64:
		e.U64(x.(uint64))
	case ValueInt64:
		e.U64(uint64(x.(int64)))
	case ValueFloat64:
		e.U64(math.Float64bits(x.(float64)))
	case ValueArray:
		a := x.(Array)
		e.U32(uint32(a.Elem))
		e.U64(uint64(len(a.Items)))
		for _, it := range a.Items {
			e.Value(a.Elem, it)
		}
	default:
		panic(fmt.Sprintf("ggufwrite: value type %d", uint32(t)))
	}
}

// KV is one metadata pair for the writer; Val is as for [Encoder.Value].
type KV struct {
	Key  string
	Type ValueType
	Val  any
}

// Tensor is one tensor for the writer: its raw data and, for the tests,
// the float32 values that reading it back must give (nil for a type the
// reader does not dequantise).
type Tensor struct {
	Name string
	Type TensorType
	Dims []uint64
	Data []byte
	Want []float32
}

// File lays out a GGUF file: header, metadata, tensor infos, padding to the
// alignment, then each tensor's data at the next aligned offset. Nothing
// follows the last tensor, so every strict prefix of the file is truncated.
type File struct {
	Version   uint32 // GGUF version; 0 means 3
	Alignment int    // layout alignment, 0 for DefaultAlignment; add general.alignment to KVs to declare another
	KVs       []KV
	Tensors   []Tensor
}

// Bytes returns the file's bytes.
func (b File) Bytes() []byte {
	version, align := b.Version, b.Alignment
	if version == 0 {
		version = 3
	}
	if align == 0 {
		align = DefaultAlignment
	}
	var e Encoder
	e.U32(Magic)
	e.U32(version)
	e.U64(uint64(len(b.Tensors)))
	e.U64(uint64(len(b.KVs)))
	for _, p := range b.KVs {
		e.Str(p.Key)
		e.U32(uint32(p.Type))
		e.Value(p.Type, p.Val)
	}
	offsets := make([]uint64, len(b.Tensors))
	var off uint64
	for i, t := range b.Tensors {
		off = AlignUp(off, uint64(align))
		offsets[i] = off
		off += uint64(len(t.Data))
	}
	for i, t := range b.Tensors {
		e.Str(t.Name)
		e.U32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.U64(d)
		}
		e.U32(uint32(t.Type))
		e.U64(offsets[i])
	}
	if len(b.Tensors) > 0 {
		e.B = append(e.B, make([]byte, AlignUp(uint64(len(e.B)), uint64(align))-uint64(len(e.B)))...)
		start := len(e.B)
		for i, t := range b.Tensors {
			e.B = append(e.B, make([]byte, start+int(offsets[i])-len(e.B))...)
			e.B = append(e.B, t.Data...)
		}
	}
	return e.B
}

// AlignUp rounds x up to a multiple of a.
func AlignUp(x, a uint64) uint64 { return (x + a - 1) / a * a }

// Values returns n deterministic float32 values that are exactly
// representable in binary16 and bfloat16 (small multiples of 1/8); seed
// varies them.
func Values(n int, seed int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((i*7+seed*13)%41-20) / 8
	}
	return v
}

// F32Tensor builds an F32 tensor of [Values].
func F32Tensor(name string, dims ...uint64) Tensor {
	want := Values(Numel(dims), len(name))
	var e Encoder
	for _, x := range want {
		e.U32(math.Float32bits(x))
	}
	return Tensor{Name: name, Type: TypeF32, Dims: dims, Data: e.B, Want: want}
}

// F16Tensor builds an F16 tensor of [Values].
func F16Tensor(name string, dims ...uint64) Tensor {
	want := Values(Numel(dims), len(name)+1)
	var e Encoder
	for _, h := range fp16.Float16s(want) {
		e.U16(uint16(h))
	}
	return Tensor{Name: name, Type: TypeF16, Dims: dims, Data: e.B, Want: want}
}

// BF16Tensor builds a BF16 tensor of [Values].
func BF16Tensor(name string, dims ...uint64) Tensor {
	want := Values(Numel(dims), len(name)+2)
	var e Encoder
	for _, h := range fp16.BFloat16s(want) {
		e.U16(uint16(h))
	}
	return Tensor{Name: name, Type: TypeBF16, Dims: dims, Data: e.B, Want: want}
}

// Q8Tensor builds a Q8_0 tensor whose blocks use scales 0.5, -0.25, 3, …
// and int8 values covering -128 … 127.
func Q8Tensor(name string, dims ...uint64) Tensor {
	n := Numel(dims)
	scales := []float32{0.5, -0.25, 3, 0.125, 1e-3}
	var e Encoder
	want := make([]float32, 0, n)
	for b := 0; b < n/32; b++ {
		d := fp16.FromFloat32(scales[b%len(scales)])
		e.U16(uint16(d))
		for j := range 32 {
			q := int8((b*32 + j*37) % 256)
			e.U8(uint8(q))
			want = append(want, d.Float32()*float32(q))
		}
	}
	return Tensor{Name: name, Type: TypeQ8_0, Dims: dims, Data: e.B, Want: want}
}

// RawTensor builds a tensor of type typ (typically one the reader cannot
// dequantise) with filler data of the right size and no Want. It panics
// for a type whose block layout the writer does not know.
func RawTensor(name string, typ TensorType, dims ...uint64) Tensor {
	layout, ok := blockLayouts[typ]
	if !ok {
		panic(fmt.Sprintf("ggufwrite: no block layout for tensor type %d", uint32(typ)))
	}
	n := Numel(dims) / layout[0] * layout[1]
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i)
	}
	return Tensor{Name: name, Type: typ, Dims: dims, Data: data}
}

// Numel returns the number of elements of a tensor of the given dimensions.
func Numel(dims []uint64) int {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	return n
}
