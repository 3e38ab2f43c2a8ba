package gguf

import (
	"bytes"
	"testing"

	"github.com/flashgo/flashgo/model/internal/ggufwrite"
)

// fuzzSeeds are the generated seed corpus of FuzzGGUF: valid files of every
// shape the writer makes, and broken ones derived from them.
func fuzzSeeds() [][]byte {
	valid := [][]byte{
		sampleFile(),
		ggufwrite.File{Version: 2, KVs: allTypesKVs(), Tensors: allTypesTensors()}.Bytes(),
		ggufwrite.File{Alignment: 64, KVs: append(allTypesKVs(), ggufwrite.KV{Key: "general.alignment", Type: ggufwrite.ValueUint32, Val: uint32(64)}), Tensors: allTypesTensors()}.Bytes(),
		ggufwrite.File{KVs: allTypesKVs(), Tensors: []ggufwrite.Tensor{ggufwrite.F32Tensor("token_embd.weight", 32, 4), ggufwrite.Q8Tensor("blk.0.attn_q.weight", 32, 2)}}.Bytes(),
		ggufwrite.File{}.Bytes(),
	}
	seeds := append([][]byte(nil), valid...)
	for _, c := range brokenFiles() {
		seeds = append(seeds, c.data)
	}
	// Truncations and single-byte corruptions of the valid files.
	for _, v := range valid {
		for _, n := range []int{len(v) / 3, len(v) / 2, len(v) - 1} {
			seeds = append(seeds, v[:n])
		}
		for _, at := range []int{8, 16, 24, 40, len(v) / 2} {
			if at < len(v) {
				d := bytes.Clone(v)
				d[at] ^= 0xff
				seeds = append(seeds, d)
			}
		}
	}
	return seeds
}

// FuzzGGUF feeds arbitrary bytes to Read. It asserts that nothing panics
// and that when Read succeeds every accessor works: metadata getters return
// without panicking, and every tensor lies in the data section and, if of a
// dequantisable type, reads in full. Package model's FuzzLoad goes on from
// here: it builds a tokenizer, a config and a model from the same bytes.
func FuzzGGUF(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		exercise(t, file)
	})
}

// exercise calls every accessor of a successfully read File.
func exercise(t *testing.T, f *File) {
	for _, key := range f.Keys() {
		v, ok := f.Value(key)
		if !ok {
			t.Fatalf("key %q listed but not found", key)
		}
		_ = v.String()
		_, _ = v.Any(), v.Len()
		_, _ = f.String(key)
		_, _ = f.Int(key)
		_, _ = f.Uint32(key)
		_, _ = f.Uint64(key)
		_, _ = f.Float32(key)
		_, _ = f.Bool(key)
		_, _ = f.StringArray(key)
		_, _ = f.Float32Array(key)
		_, _ = f.Int32Array(key)
	}
	for _, ti := range f.Tensors() {
		if ti.Offset < f.DataOffset() || ti.Offset+ti.Size() > f.Size() || ti.Offset%f.Alignment() != 0 {
			t.Fatalf("tensor %v: %d bytes at %d outside the data section [%d, %d)", ti, ti.Size(), ti.Offset, f.DataOffset(), f.Size())
		}
		raw, err := f.RawData(ti.Name)
		if err != nil || int64(len(raw)) != ti.Size() {
			t.Fatalf("RawData(%q): %d bytes, %v; want %d", ti.Name, len(raw), err, ti.Size())
		}
		vals, err := f.Float32s(ti.Name)
		if ti.Type.CanDequantize() && (err != nil || len(vals) != ti.NumElements()) {
			t.Fatalf("Float32s(%q): %d values, %v; want %d", ti.Name, len(vals), err, ti.NumElements())
		}
	}
}
