package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/flashgo/flashgo/fp16"
)

// This file holds a small GGUF writer for the tests: it builds valid files
// with metadata of every type and tensors of every dequantisable type, and
// the low-level pieces (enc) from which the tests assemble broken ones.

// enc appends little-endian GGUF primitives to a byte slice.
type enc struct{ b []byte }

func (e *enc) u8(x uint8)   { e.b = append(e.b, x) }
func (e *enc) u16(x uint16) { e.b = binary.LittleEndian.AppendUint16(e.b, x) }
func (e *enc) u32(x uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, x) }
func (e *enc) u64(x uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, x) }
func (e *enc) str(s string) {
	e.u64(uint64(len(s)))
	e.b = append(e.b, s...)
}

// arr is a metadata array for the writer: items hold Go values of the element
// type (uint8 … float64, bool, string) or, for arrays of arrays, arr values.
type arr struct {
	elem  ValueType
	items []any
}

// value writes the payload of a value of type t (without its type code).
func (e *enc) value(t ValueType, x any) {
	switch t {
	case ValueUint8:
		e.u8(x.(uint8))
	case ValueInt8:
		e.u8(uint8(x.(int8)))
	case ValueUint16:
		e.u16(x.(uint16))
	case ValueInt16:
		e.u16(uint16(x.(int16)))
	case ValueUint32:
		e.u32(x.(uint32))
	case ValueInt32:
		e.u32(uint32(x.(int32)))
	case ValueFloat32:
		e.u32(math.Float32bits(x.(float32)))
	case ValueBool:
		if x.(bool) {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case ValueString:
		e.str(x.(string))
	case ValueUint64:
		e.u64(x.(uint64))
	case ValueInt64:
		e.u64(uint64(x.(int64)))
	case ValueFloat64:
		e.u64(math.Float64bits(x.(float64)))
	case ValueArray:
		a := x.(arr)
		e.u32(uint32(a.elem))
		e.u64(uint64(len(a.items)))
		for _, it := range a.items {
			e.value(a.elem, it)
		}
	default:
		panic(fmt.Sprintf("writer: value type %v", t))
	}
}

// kv is one metadata pair for the writer.
type kv struct {
	key string
	typ ValueType
	val any
}

// tensorSpec is one tensor for the writer: its raw data and, for the tests,
// the float32 values that reading it back must give.
type tensorSpec struct {
	name string
	typ  TensorType
	dims []uint64
	data []byte
	want []float32
}

// builder lays out a GGUF file: header, metadata, tensor infos, padding to
// the alignment, then each tensor's data at the next aligned offset. Nothing
// follows the last tensor, so every strict prefix of the file is truncated.
type builder struct {
	version   uint32
	alignment int // layout alignment; add general.alignment to kvs to declare another than 32
	kvs       []kv
	tensors   []tensorSpec
}

func (b builder) bytes() []byte {
	version, align := b.version, b.alignment
	if version == 0 {
		version = 3
	}
	if align == 0 {
		align = DefaultAlignment
	}
	var e enc
	e.u32(ggufMagic)
	e.u32(version)
	e.u64(uint64(len(b.tensors)))
	e.u64(uint64(len(b.kvs)))
	for _, p := range b.kvs {
		e.str(p.key)
		e.u32(uint32(p.typ))
		e.value(p.typ, p.val)
	}
	offsets := make([]uint64, len(b.tensors))
	var off uint64
	for i, t := range b.tensors {
		off = alignUp(off, uint64(align))
		offsets[i] = off
		off += uint64(len(t.data))
	}
	for i, t := range b.tensors {
		e.str(t.name)
		e.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			e.u64(d)
		}
		e.u32(uint32(t.typ))
		e.u64(offsets[i])
	}
	if len(b.tensors) > 0 {
		e.b = append(e.b, make([]byte, alignUp(uint64(len(e.b)), uint64(align))-uint64(len(e.b)))...)
		start := len(e.b)
		for i, t := range b.tensors {
			e.b = append(e.b, make([]byte, start+int(offsets[i])-len(e.b))...)
			e.b = append(e.b, t.data...)
		}
	}
	return e.b
}

func alignUp(x, a uint64) uint64 { return (x + a - 1) / a * a }

// testValues returns n deterministic float32 values that are exactly
// representable in binary16 and bfloat16 (small multiples of 1/8).
func testValues(n int, seed int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((i*7+seed*13)%41-20) / 8
	}
	return v
}

func f32Tensor(name string, dims ...uint64) tensorSpec {
	want := testValues(numel(dims), len(name))
	var e enc
	for _, x := range want {
		e.u32(math.Float32bits(x))
	}
	return tensorSpec{name: name, typ: TypeF32, dims: dims, data: e.b, want: want}
}

func f16Tensor(name string, dims ...uint64) tensorSpec {
	want := testValues(numel(dims), len(name)+1)
	var e enc
	for _, h := range fp16.Float16s(want) {
		e.u16(uint16(h))
	}
	return tensorSpec{name: name, typ: TypeF16, dims: dims, data: e.b, want: want}
}

func bf16Tensor(name string, dims ...uint64) tensorSpec {
	want := testValues(numel(dims), len(name)+2)
	var e enc
	for _, h := range fp16.BFloat16s(want) {
		e.u16(uint16(h))
	}
	return tensorSpec{name: name, typ: TypeBF16, dims: dims, data: e.b, want: want}
}

// q8Tensor builds a Q8_0 tensor whose blocks use scales 0.5, -0.25, 3, … and
// int8 values covering -128 … 127.
func q8Tensor(name string, dims ...uint64) tensorSpec {
	n := numel(dims)
	scales := []float32{0.5, -0.25, 3, 0.125, 1e-3}
	var e enc
	want := make([]float32, 0, n)
	for b := 0; b < n/32; b++ {
		d := fp16.FromFloat32(scales[b%len(scales)])
		e.u16(uint16(d))
		for j := range 32 {
			q := int8((b*32 + j*37) % 256)
			e.u8(uint8(q))
			want = append(want, d.Float32()*float32(q))
		}
	}
	return tensorSpec{name: name, typ: TypeQ8_0, dims: dims, data: e.b, want: want}
}

// rawTensor builds a tensor of a type the package cannot dequantise, with
// filler data of the right size.
func rawTensor(name string, typ TensorType, dims ...uint64) tensorSpec {
	n := numel(dims) / typ.BlockSize() * typ.TypeSize()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i)
	}
	return tensorSpec{name: name, typ: typ, dims: dims, data: data}
}

func numel(dims []uint64) int {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	return n
}

// allTypesKVs is metadata with one key of every value type, arrays of every
// element type, nested arrays and empty values.
func allTypesKVs() []kv {
	return []kv{
		{"general.architecture", ValueString, "test"},
		{"t.u8", ValueUint8, uint8(200)},
		{"t.i8", ValueInt8, int8(-100)},
		{"t.u16", ValueUint16, uint16(60000)},
		{"t.i16", ValueInt16, int16(-30000)},
		{"t.u32", ValueUint32, uint32(4000000000)},
		{"t.i32", ValueInt32, int32(-2000000000)},
		{"t.f32", ValueFloat32, float32(1.5)},
		{"t.bool", ValueBool, true},
		{"t.false", ValueBool, false},
		{"t.string", ValueString, "héllo ▁ world"},
		{"t.empty", ValueString, ""},
		{"t.u64", ValueUint64, uint64(math.MaxUint64)},
		{"t.i64", ValueInt64, int64(math.MinInt64)},
		{"t.f64", ValueFloat64, float64(math.Pi)},
		{"a.u8", ValueArray, arr{ValueUint8, []any{uint8(1), uint8(255)}}},
		{"a.i8", ValueArray, arr{ValueInt8, []any{int8(-1), int8(127)}}},
		{"a.u16", ValueArray, arr{ValueUint16, []any{uint16(1), uint16(65535)}}},
		{"a.i16", ValueArray, arr{ValueInt16, []any{int16(-1), int16(32767)}}},
		{"a.u32", ValueArray, arr{ValueUint32, []any{uint32(7), uint32(math.MaxUint32)}}},
		{"a.i32", ValueArray, arr{ValueInt32, []any{int32(-7), int32(42)}}},
		{"a.f32", ValueArray, arr{ValueFloat32, []any{float32(-0.5), float32(2)}}},
		{"a.bool", ValueArray, arr{ValueBool, []any{true, false, true}}},
		{"a.string", ValueArray, arr{ValueString, []any{"a", "", "▁b"}}},
		{"a.u64", ValueArray, arr{ValueUint64, []any{uint64(0), uint64(1 << 40)}}},
		{"a.i64", ValueArray, arr{ValueInt64, []any{int64(-1 << 40), int64(3)}}},
		{"a.f64", ValueArray, arr{ValueFloat64, []any{0.25, -8.0}}},
		{"a.empty", ValueArray, arr{ValueFloat32, nil}},
		{"a.nested", ValueArray, arr{ValueArray, []any{
			arr{ValueInt32, []any{int32(1), int32(2)}},
			arr{ValueString, []any{"x"}},
			arr{ValueArray, []any{arr{ValueUint8, []any{uint8(9)}}}},
		}}},
	}
}

// allTypesTensors has tensors of each dequantisable type, a 1-D and an
// empty tensor, and one of a type the package only knows the layout of.
func allTypesTensors() []tensorSpec {
	return []tensorSpec{
		f32Tensor("f32.weight", 4, 3),
		f16Tensor("f16.weight", 8, 2),
		bf16Tensor("bf16.weight", 5),
		q8Tensor("q8.weight", 64, 3),
		f32Tensor("empty.weight", 0, 3),
		rawTensor("q4k.weight", TypeQ4_K, 256, 2),
		f32Tensor("norm.weight", 7),
	}
}

// sampleFile is a valid GGUF v3 file with metadata of every type and
// tensors of every type.
func sampleFile() []byte {
	return builder{kvs: allTypesKVs(), tensors: allTypesTensors()}.bytes()
}
