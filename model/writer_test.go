package model

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/model/gguf"

	"github.com/stretchr/testify/require"
)

// This file holds a small GGUF writer for the tests: it builds the models
// and vocabularies of the tests and rewrites files with edited metadata.
// It is a copy of the writer in package gguf's tests (which also makes
// files with metadata and tensors of every type, and broken ones) with the
// model-level helpers added: package gguf's tests cannot share test files
// with this package.

// ggufMagic is "GGUF" read as a little-endian uint32.
const ggufMagic = 0x46554747

// mustRead reads a file the writer made.
func mustRead(t *testing.T, data []byte) *gguf.File {
	t.Helper()
	f, err := gguf.Read(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	return f
}

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
	elem  gguf.ValueType
	items []any
}

// value writes the payload of a value of type t (without its type code).
func (e *enc) value(t gguf.ValueType, x any) {
	switch t {
	case gguf.ValueUint8:
		e.u8(x.(uint8))
	case gguf.ValueInt8:
		e.u8(uint8(x.(int8)))
	case gguf.ValueUint16:
		e.u16(x.(uint16))
	case gguf.ValueInt16:
		e.u16(uint16(x.(int16)))
	case gguf.ValueUint32:
		e.u32(x.(uint32))
	case gguf.ValueInt32:
		e.u32(uint32(x.(int32)))
	case gguf.ValueFloat32:
		e.u32(math.Float32bits(x.(float32)))
	case gguf.ValueBool:
		if x.(bool) {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case gguf.ValueString:
		e.str(x.(string))
	case gguf.ValueUint64:
		e.u64(x.(uint64))
	case gguf.ValueInt64:
		e.u64(uint64(x.(int64)))
	case gguf.ValueFloat64:
		e.u64(math.Float64bits(x.(float64)))
	case gguf.ValueArray:
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
	typ gguf.ValueType
	val any
}

// tensorSpec is one tensor for the writer: its raw data and, for the tests,
// the float32 values that reading it back must give.
type tensorSpec struct {
	name string
	typ  gguf.TensorType
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
		align = gguf.DefaultAlignment
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
	return tensorSpec{name: name, typ: gguf.TypeF32, dims: dims, data: e.b, want: want}
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
	return tensorSpec{name: name, typ: gguf.TypeQ8_0, dims: dims, data: e.b, want: want}
}

// rawTensor builds a tensor of a type the package cannot dequantise, with
// filler data of the right size.
func rawTensor(name string, typ gguf.TensorType, dims ...uint64) tensorSpec {
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

// tokenizerKVs is the metadata of a tiny llama vocabulary: the three
// specials, all 256 byte tokens, then the given pieces with their scores.
func tokenizerKVs(pieces []string, scores []float32) []kv {
	toks := []any{"<unk>", "<s>", "</s>"}
	sc := []any{float32(0), float32(0), float32(0)}
	types := []any{int32(TokenUnknown), int32(TokenControl), int32(TokenControl)}
	for b := range 256 {
		toks = append(toks, fmt.Sprintf("<0x%02X>", b))
		sc = append(sc, float32(0))
		types = append(types, int32(TokenByte))
	}
	for i, p := range pieces {
		toks = append(toks, p)
		sc = append(sc, scores[i])
		types = append(types, int32(TokenNormal))
	}
	return []kv{
		{"tokenizer.ggml.model", gguf.ValueString, "llama"},
		{"tokenizer.ggml.tokens", gguf.ValueArray, arr{gguf.ValueString, toks}},
		{"tokenizer.ggml.scores", gguf.ValueArray, arr{gguf.ValueFloat32, sc}},
		{"tokenizer.ggml.token_type", gguf.ValueArray, arr{gguf.ValueInt32, types}},
		{"tokenizer.ggml.bos_token_id", gguf.ValueUint32, uint32(1)},
		{"tokenizer.ggml.eos_token_id", gguf.ValueUint32, uint32(2)},
		{"tokenizer.ggml.unknown_token_id", gguf.ValueUint32, uint32(0)},
	}
}

// configKVs is the llama metadata of a tiny model; extra pairs replace or
// extend it.
func configKVs(extra ...kv) []kv {
	base := []kv{
		{"general.architecture", gguf.ValueString, "llama"},
		{"llama.context_length", gguf.ValueUint32, uint32(128)},
		{"llama.embedding_length", gguf.ValueUint32, uint32(32)},
		{"llama.feed_forward_length", gguf.ValueUint32, uint32(96)},
		{"llama.block_count", gguf.ValueUint32, uint32(2)},
		{"llama.attention.head_count", gguf.ValueUint32, uint32(4)},
		{"llama.attention.head_count_kv", gguf.ValueUint32, uint32(2)},
		{"llama.rope.dimension_count", gguf.ValueUint32, uint32(8)},
		{"llama.attention.layer_norm_rms_epsilon", gguf.ValueFloat32, float32(1e-6)},
	}
	for _, x := range extra {
		replaced := false
		for i := range base {
			if base[i].key == x.key {
				base[i], replaced = x, true
			}
		}
		if !replaced {
			base = append(base, x)
		}
	}
	return base
}

// withoutKey drops key from kvs.
func withoutKey(kvs []kv, key string) []kv {
	var out []kv
	for _, x := range kvs {
		if x.key != key {
			out = append(out, x)
		}
	}
	return out
}

// writerValue converts a metadata value read from a file back to the
// writer's form: its type and a Go value (arr for arrays).
func writerValue(v gguf.Value) (gguf.ValueType, any) {
	if v.Type() != gguf.ValueArray {
		return v.Type(), v.Any()
	}
	a := arr{elem: v.ElemType(), items: make([]any, v.Len())}
	items := reflect.ValueOf(v.Any()) // []uint8 … []float64, []bool, []string or []Value
	for i := range a.items {
		item := items.Index(i).Interface()
		if sub, ok := item.(gguf.Value); ok {
			_, item = writerValue(sub)
		}
		a.items[i] = item
	}
	return gguf.ValueArray, a
}

// splitFile returns the builder that writes f again: its metadata in the
// writer's form and its tensors as they are, laid out afresh.
func splitFile(f *gguf.File) (builder, error) {
	var kvs []kv
	for _, key := range f.Keys() {
		v, _ := f.Value(key)
		typ, x := writerValue(v)
		kvs = append(kvs, kv{key, typ, x})
	}
	var tensors []tensorSpec
	for _, ti := range f.Tensors() {
		data, err := f.RawData(ti.Name)
		if err != nil {
			return builder{}, err
		}
		dims := make([]uint64, len(ti.Dims))
		for i, d := range ti.Dims {
			dims[i] = uint64(d)
		}
		tensors = append(tensors, tensorSpec{name: ti.Name, typ: ti.Type, dims: dims, data: data})
	}
	return builder{version: f.Version(), alignment: int(f.Alignment()), kvs: kvs, tensors: tensors}, nil
}

// rebuild writes f again, with its metadata passed through edit (which may
// change, drop or add pairs).
func rebuild(f *gguf.File, edit func([]kv) []kv) ([]byte, error) {
	b, err := splitFile(f)
	if err != nil {
		return nil, err
	}
	b.kvs = edit(b.kvs)
	return b.bytes(), nil
}

// setKV returns an edit for rebuild that sets key to a value of type typ,
// adding the pair if the file lacks it.
func setKV(key string, typ gguf.ValueType, x any) func([]kv) []kv {
	return func(kvs []kv) []kv {
		out := withoutKey(kvs, key)
		return append(out, kv{key, typ, x})
	}
}
