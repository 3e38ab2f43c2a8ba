package gguf

import (
	"math"

	"github.com/flashgo/flashgo/model/internal/ggufwrite"
)

// This file holds the fixtures of the tests, written with package
// ggufwrite: a valid file with metadata of every type and tensors of every
// type. The tests assemble broken files with [ggufwrite.Encoder].

// allTypesKVs is metadata with one key of every value type, arrays of every
// element type, nested arrays and empty values.
func allTypesKVs() []ggufwrite.KV {
	return []ggufwrite.KV{
		{Key: "general.architecture", Type: ggufwrite.ValueString, Val: "test"},
		{Key: "t.u8", Type: ggufwrite.ValueUint8, Val: uint8(200)},
		{Key: "t.i8", Type: ggufwrite.ValueInt8, Val: int8(-100)},
		{Key: "t.u16", Type: ggufwrite.ValueUint16, Val: uint16(60000)},
		{Key: "t.i16", Type: ggufwrite.ValueInt16, Val: int16(-30000)},
		{Key: "t.u32", Type: ggufwrite.ValueUint32, Val: uint32(4000000000)},
		{Key: "t.i32", Type: ggufwrite.ValueInt32, Val: int32(-2000000000)},
		{Key: "t.f32", Type: ggufwrite.ValueFloat32, Val: float32(1.5)},
		{Key: "t.bool", Type: ggufwrite.ValueBool, Val: true},
		{Key: "t.false", Type: ggufwrite.ValueBool, Val: false},
		{Key: "t.string", Type: ggufwrite.ValueString, Val: "héllo ▁ world"},
		{Key: "t.empty", Type: ggufwrite.ValueString, Val: ""},
		{Key: "t.u64", Type: ggufwrite.ValueUint64, Val: uint64(math.MaxUint64)},
		{Key: "t.i64", Type: ggufwrite.ValueInt64, Val: int64(math.MinInt64)},
		{Key: "t.f64", Type: ggufwrite.ValueFloat64, Val: float64(math.Pi)},
		{Key: "a.u8", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueUint8, Items: []any{uint8(1), uint8(255)}}},
		{Key: "a.i8", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueInt8, Items: []any{int8(-1), int8(127)}}},
		{Key: "a.u16", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueUint16, Items: []any{uint16(1), uint16(65535)}}},
		{Key: "a.i16", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueInt16, Items: []any{int16(-1), int16(32767)}}},
		{Key: "a.u32", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueUint32, Items: []any{uint32(7), uint32(math.MaxUint32)}}},
		{Key: "a.i32", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueInt32, Items: []any{int32(-7), int32(42)}}},
		{Key: "a.f32", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueFloat32, Items: []any{float32(-0.5), float32(2)}}},
		{Key: "a.bool", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueBool, Items: []any{true, false, true}}},
		{Key: "a.string", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueString, Items: []any{"a", "", "▁b"}}},
		{Key: "a.u64", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueUint64, Items: []any{uint64(0), uint64(1 << 40)}}},
		{Key: "a.i64", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueInt64, Items: []any{int64(-1 << 40), int64(3)}}},
		{Key: "a.f64", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueFloat64, Items: []any{0.25, -8.0}}},
		{Key: "a.empty", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueFloat32, Items: nil}},
		{Key: "a.nested", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueArray, Items: []any{
			ggufwrite.Array{Elem: ggufwrite.ValueInt32, Items: []any{int32(1), int32(2)}},
			ggufwrite.Array{Elem: ggufwrite.ValueString, Items: []any{"x"}},
			ggufwrite.Array{Elem: ggufwrite.ValueArray, Items: []any{ggufwrite.Array{Elem: ggufwrite.ValueUint8, Items: []any{uint8(9)}}}},
		}}},
	}
}

// allTypesTensors has tensors of each dequantisable type, a 1-D and an
// empty tensor, and one of a type the package only knows the layout of.
func allTypesTensors() []ggufwrite.Tensor {
	return []ggufwrite.Tensor{
		ggufwrite.F32Tensor("f32.weight", 4, 3),
		ggufwrite.F16Tensor("f16.weight", 8, 2),
		ggufwrite.BF16Tensor("bf16.weight", 5),
		ggufwrite.Q8Tensor("q8.weight", 64, 3),
		ggufwrite.F32Tensor("empty.weight", 0, 3),
		ggufwrite.RawTensor("q4k.weight", ggufwrite.TypeQ4_K, 256, 2),
		ggufwrite.F32Tensor("norm.weight", 7),
	}
}

// sampleFile is a valid GGUF v3 file with metadata of every type and
// tensors of every type.
func sampleFile() []byte {
	return ggufwrite.File{KVs: allTypesKVs(), Tensors: allTypesTensors()}.Bytes()
}
