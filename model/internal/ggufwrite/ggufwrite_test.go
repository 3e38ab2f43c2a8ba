package ggufwrite_test

import (
	"testing"

	"github.com/flashgo/flashgo/model/gguf"
	"github.com/flashgo/flashgo/model/internal/ggufwrite"
)

// TestCodesMatchReader checks the writer's type codes, magic, default
// alignment and block layouts against package gguf's, which the writer
// does not import.
func TestCodesMatchReader(t *testing.T) {
	for w, r := range map[ggufwrite.ValueType]gguf.ValueType{
		ggufwrite.ValueUint8: gguf.ValueUint8, ggufwrite.ValueInt8: gguf.ValueInt8,
		ggufwrite.ValueUint16: gguf.ValueUint16, ggufwrite.ValueInt16: gguf.ValueInt16,
		ggufwrite.ValueUint32: gguf.ValueUint32, ggufwrite.ValueInt32: gguf.ValueInt32,
		ggufwrite.ValueFloat32: gguf.ValueFloat32, ggufwrite.ValueBool: gguf.ValueBool,
		ggufwrite.ValueString: gguf.ValueString, ggufwrite.ValueArray: gguf.ValueArray,
		ggufwrite.ValueUint64: gguf.ValueUint64, ggufwrite.ValueInt64: gguf.ValueInt64,
		ggufwrite.ValueFloat64: gguf.ValueFloat64,
	} {
		if uint32(w) != uint32(r) {
			t.Errorf("value type %v: writer code %d, reader code %d", r, uint32(w), uint32(r))
		}
	}
	for w, r := range map[ggufwrite.TensorType]gguf.TensorType{
		ggufwrite.TypeF32: gguf.TypeF32, ggufwrite.TypeF16: gguf.TypeF16, ggufwrite.TypeBF16: gguf.TypeBF16,
		ggufwrite.TypeQ8_0: gguf.TypeQ8_0, ggufwrite.TypeQ4_K: gguf.TypeQ4_K,
	} {
		if uint32(w) != uint32(r) {
			t.Errorf("tensor type %v: writer code %d, reader code %d", r, uint32(w), uint32(r))
		}
		// 512 values fill whole blocks of every type.
		if got, want := len(ggufwrite.RawTensor("t", w, 512).Data), 512/r.BlockSize()*r.TypeSize(); got != want {
			t.Errorf("tensor type %v: RawTensor of 512 values has %d bytes, want %d", r, got, want)
		}
	}
	if ggufwrite.DefaultAlignment != gguf.DefaultAlignment {
		t.Errorf("DefaultAlignment %d, reader's %d", ggufwrite.DefaultAlignment, gguf.DefaultAlignment)
	}
	data := ggufwrite.File{}.Bytes()
	if string(data[:4]) != "GGUF" {
		t.Errorf("file starts with %q, want \"GGUF\"", data[:4])
	}
}
