package model

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/flashgo/flashgo/model/gguf"
	"github.com/flashgo/flashgo/model/internal/ggufwrite"

	"github.com/stretchr/testify/require"
)

// This file holds the model-level helpers of the tests around package
// ggufwrite, which writes the files: the metadata of tiny models and
// vocabularies, and the rewriting of a file with edited metadata.

// mustRead reads a file the writer made.
func mustRead(t *testing.T, data []byte) *gguf.File {
	t.Helper()
	f, err := gguf.Read(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err)
	return f
}

// tokenizerKVs is the metadata of a tiny llama vocabulary: the three
// specials, all 256 byte tokens, then the given pieces with their scores.
func tokenizerKVs(pieces []string, scores []float32) []ggufwrite.KV {
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
	return []ggufwrite.KV{
		{Key: "tokenizer.ggml.model", Type: ggufwrite.ValueString, Val: "llama"},
		{Key: "tokenizer.ggml.tokens", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueString, Items: toks}},
		{Key: "tokenizer.ggml.scores", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueFloat32, Items: sc}},
		{Key: "tokenizer.ggml.token_type", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueInt32, Items: types}},
		{Key: "tokenizer.ggml.bos_token_id", Type: ggufwrite.ValueUint32, Val: uint32(1)},
		{Key: "tokenizer.ggml.eos_token_id", Type: ggufwrite.ValueUint32, Val: uint32(2)},
		{Key: "tokenizer.ggml.unknown_token_id", Type: ggufwrite.ValueUint32, Val: uint32(0)},
	}
}

// configKVs is the llama metadata of a tiny model; extra pairs replace or
// extend it.
func configKVs(extra ...ggufwrite.KV) []ggufwrite.KV {
	base := []ggufwrite.KV{
		{Key: "general.architecture", Type: ggufwrite.ValueString, Val: "llama"},
		{Key: "llama.context_length", Type: ggufwrite.ValueUint32, Val: uint32(128)},
		{Key: "llama.embedding_length", Type: ggufwrite.ValueUint32, Val: uint32(32)},
		{Key: "llama.feed_forward_length", Type: ggufwrite.ValueUint32, Val: uint32(96)},
		{Key: "llama.block_count", Type: ggufwrite.ValueUint32, Val: uint32(2)},
		{Key: "llama.attention.head_count", Type: ggufwrite.ValueUint32, Val: uint32(4)},
		{Key: "llama.attention.head_count_kv", Type: ggufwrite.ValueUint32, Val: uint32(2)},
		{Key: "llama.rope.dimension_count", Type: ggufwrite.ValueUint32, Val: uint32(8)},
		{Key: "llama.attention.layer_norm_rms_epsilon", Type: ggufwrite.ValueFloat32, Val: float32(1e-6)},
	}
	for _, x := range extra {
		replaced := false
		for i := range base {
			if base[i].Key == x.Key {
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
func withoutKey(kvs []ggufwrite.KV, key string) []ggufwrite.KV {
	var out []ggufwrite.KV
	for _, x := range kvs {
		if x.Key != key {
			out = append(out, x)
		}
	}
	return out
}

// writerValue converts a metadata value read from a file back to the
// writer's form: its type and a Go value (an Array for arrays).
func writerValue(v gguf.Value) (ggufwrite.ValueType, any) {
	if v.Type() != gguf.ValueArray {
		return ggufwrite.ValueType(v.Type()), v.Any()
	}
	a := ggufwrite.Array{Elem: ggufwrite.ValueType(v.ElemType()), Items: make([]any, v.Len())}
	items := reflect.ValueOf(v.Any()) // []uint8 … []float64, []bool, []string or []Value
	for i := range a.Items {
		item := items.Index(i).Interface()
		if sub, ok := item.(gguf.Value); ok {
			_, item = writerValue(sub)
		}
		a.Items[i] = item
	}
	return ggufwrite.ValueArray, a
}

// splitFile returns the ggufwrite.File that writes f again: its metadata
// in the writer's form and its tensors as they are, laid out afresh.
func splitFile(f *gguf.File) (ggufwrite.File, error) {
	var kvs []ggufwrite.KV
	for _, key := range f.Keys() {
		v, _ := f.Value(key)
		typ, x := writerValue(v)
		kvs = append(kvs, ggufwrite.KV{Key: key, Type: typ, Val: x})
	}
	var tensors []ggufwrite.Tensor
	for _, ti := range f.Tensors() {
		data, err := f.RawData(ti.Name)
		if err != nil {
			return ggufwrite.File{}, err
		}
		dims := make([]uint64, len(ti.Dims))
		for i, d := range ti.Dims {
			dims[i] = uint64(d)
		}
		tensors = append(tensors, ggufwrite.Tensor{Name: ti.Name, Type: ggufwrite.TensorType(ti.Type), Dims: dims, Data: data})
	}
	return ggufwrite.File{Version: f.Version(), Alignment: int(f.Alignment()), KVs: kvs, Tensors: tensors}, nil
}

// rebuild writes f again, with its metadata passed through edit (which may
// change, drop or add pairs).
func rebuild(f *gguf.File, edit func([]ggufwrite.KV) []ggufwrite.KV) ([]byte, error) {
	b, err := splitFile(f)
	if err != nil {
		return nil, err
	}
	b.KVs = edit(b.KVs)
	return b.Bytes(), nil
}

// setKV returns an edit for rebuild that sets key to a value of type typ,
// adding the pair if the file lacks it.
func setKV(key string, typ ggufwrite.ValueType, x any) func([]ggufwrite.KV) []ggufwrite.KV {
	return func(kvs []ggufwrite.KV) []ggufwrite.KV {
		out := withoutKey(kvs, key)
		return append(out, ggufwrite.KV{Key: key, Type: typ, Val: x})
	}
}
