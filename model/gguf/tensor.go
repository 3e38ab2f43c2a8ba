package gguf

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/flashgo/flashgo/fp16"
)

// TensorType is the ggml type code of a tensor's data. [File.Float32s] can
// dequantise [TypeF32], [TypeF16], [TypeBF16] and [TypeQ8_0]; the other
// types are known by their block layout only, so that files holding them
// can still be opened.
type TensorType uint32

// The ggml tensor types, with the codes GGUF stores (ggml.h). Codes 4, 5 and
// 31 to 33 and 36 to 38 belong to removed types and are rejected.
const (
	TypeF32     TensorType = 0  // float32
	TypeF16     TensorType = 1  // IEEE binary16
	TypeQ4_0    TensorType = 2  // 4-bit, blocks of 32 with an fp16 scale
	TypeQ4_1    TensorType = 3  // 4-bit, blocks of 32 with fp16 scale and min
	TypeQ5_0    TensorType = 6  // 5-bit, blocks of 32
	TypeQ5_1    TensorType = 7  // 5-bit, blocks of 32 with a min
	TypeQ8_0    TensorType = 8  // 8-bit, blocks of 32: fp16 scale d, 32 int8 q; value d·q
	TypeQ8_1    TensorType = 9  // 8-bit, blocks of 32 with a sum
	TypeQ2_K    TensorType = 10 // k-quant, 2-bit, super-blocks of 256
	TypeQ3_K    TensorType = 11 // k-quant, 3-bit
	TypeQ4_K    TensorType = 12 // k-quant, 4-bit
	TypeQ5_K    TensorType = 13 // k-quant, 5-bit
	TypeQ6_K    TensorType = 14 // k-quant, 6-bit
	TypeQ8_K    TensorType = 15 // k-quant, 8-bit
	TypeIQ2_XXS TensorType = 16 // i-quant
	TypeIQ2_XS  TensorType = 17 // i-quant
	TypeIQ3_XXS TensorType = 18 // i-quant
	TypeIQ1_S   TensorType = 19 // i-quant
	TypeIQ4_NL  TensorType = 20 // i-quant, blocks of 32
	TypeIQ3_S   TensorType = 21 // i-quant
	TypeIQ2_S   TensorType = 22 // i-quant
	TypeIQ4_XS  TensorType = 23 // i-quant
	TypeI8      TensorType = 24 // int8
	TypeI16     TensorType = 25 // int16
	TypeI32     TensorType = 26 // int32
	TypeI64     TensorType = 27 // int64
	TypeF64     TensorType = 28 // float64
	TypeIQ1_M   TensorType = 29 // i-quant
	TypeBF16    TensorType = 30 // bfloat16
	TypeTQ1_0   TensorType = 34 // ternary
	TypeTQ2_0   TensorType = 35 // ternary
	TypeMXFP4   TensorType = 39 // microscaling FP4, blocks of 32
	TypeNVFP4   TensorType = 40 // FP4, blocks of 64
	TypeQ1_0    TensorType = 41 // 1-bit, blocks of 128
)

// typeInfo is the block layout of a tensor type: values per block and bytes
// per block (gguf-py's GGML_QUANT_SIZES).
type typeInfo struct {
	name      string
	block     int
	blockSize int
}

const qkK = 256 // k-quant super-block

var typeInfos = map[TensorType]typeInfo{
	TypeF32:     {"F32", 1, 4},
	TypeF16:     {"F16", 1, 2},
	TypeQ4_0:    {"Q4_0", 32, 2 + 16},
	TypeQ4_1:    {"Q4_1", 32, 2 + 2 + 16},
	TypeQ5_0:    {"Q5_0", 32, 2 + 4 + 16},
	TypeQ5_1:    {"Q5_1", 32, 2 + 2 + 4 + 16},
	TypeQ8_0:    {"Q8_0", 32, 2 + 32},
	TypeQ8_1:    {"Q8_1", 32, 4 + 4 + 32},
	TypeQ2_K:    {"Q2_K", qkK, 2 + 2 + qkK/16 + qkK/4},
	TypeQ3_K:    {"Q3_K", qkK, 2 + qkK/4 + qkK/8 + 12},
	TypeQ4_K:    {"Q4_K", qkK, 2 + 2 + qkK/2 + 12},
	TypeQ5_K:    {"Q5_K", qkK, 2 + 2 + qkK/2 + qkK/8 + 12},
	TypeQ6_K:    {"Q6_K", qkK, 2 + qkK/2 + qkK/4 + qkK/16},
	TypeQ8_K:    {"Q8_K", qkK, 4 + qkK + qkK/8},
	TypeIQ2_XXS: {"IQ2_XXS", qkK, 2 + qkK/4},
	TypeIQ2_XS:  {"IQ2_XS", qkK, 2 + qkK/4 + qkK/32},
	TypeIQ3_XXS: {"IQ3_XXS", qkK, 2 + qkK/4 + qkK/8},
	TypeIQ1_S:   {"IQ1_S", qkK, 2 + qkK/8 + qkK/16},
	TypeIQ4_NL:  {"IQ4_NL", 32, 2 + 16},
	TypeIQ3_S:   {"IQ3_S", qkK, 2 + qkK/4 + qkK/8 + qkK/32 + 4},
	TypeIQ2_S:   {"IQ2_S", qkK, 2 + qkK/4 + qkK/16},
	TypeIQ4_XS:  {"IQ4_XS", qkK, 2 + 2 + qkK/2 + qkK/64},
	TypeI8:      {"I8", 1, 1},
	TypeI16:     {"I16", 1, 2},
	TypeI32:     {"I32", 1, 4},
	TypeI64:     {"I64", 1, 8},
	TypeF64:     {"F64", 1, 8},
	TypeIQ1_M:   {"IQ1_M", qkK, qkK/8 + qkK/16 + qkK/32},
	TypeBF16:    {"BF16", 1, 2},
	TypeTQ1_0:   {"TQ1_0", qkK, 2 + 4*13},
	TypeTQ2_0:   {"TQ2_0", qkK, 2 + 64},
	TypeMXFP4:   {"MXFP4", 32, 1 + 16},
	TypeNVFP4:   {"NVFP4", 64, 4 + 32},
	TypeQ1_0:    {"Q1_0", 128, 2 + 16},
}

// String returns the ggml name of the type, such as "Q8_0", or
// "TensorType(N)" for an unknown code.
func (t TensorType) String() string {
	if ti, ok := typeInfos[t]; ok {
		return ti.name
	}
	return fmt.Sprintf("TensorType(%d)", uint32(t))
}

// BlockSize returns the number of values in one block of the type (1 for
// the plain types, 32 for Q8_0), or 0 for an unknown type.
func (t TensorType) BlockSize() int { return typeInfos[t].block }

// TypeSize returns the number of bytes one block of the type takes, or 0
// for an unknown type.
func (t TensorType) TypeSize() int { return typeInfos[t].blockSize }

// CanDequantize reports whether [File.Float32s] can convert tensors of type
// t to float32.
func (t TensorType) CanDequantize() bool {
	switch t {
	case TypeF32, TypeF16, TypeBF16, TypeQ8_0:
		return true
	}
	return false
}

// TensorInfo describes one tensor of a GGUF file.
type TensorInfo struct {
	// Name is the tensor's name, such as "blk.0.attn_q.weight".
	Name string
	// Type is the type of the stored data.
	Type TensorType
	// Dims is the shape in ggml order: Dims[0] is the innermost, contiguous
	// dimension (the length of a row). At most MaxDims entries.
	Dims []int
	// Offset is the absolute offset of the tensor's data in the file.
	Offset int64

	n    int   // number of elements
	size int64 // bytes of data
}

// NumElements returns the number of values in the tensor: the product of
// its dimensions.
func (t TensorInfo) NumElements() int { return t.n }

// Size returns the number of bytes the tensor's data takes in the file.
func (t TensorInfo) Size() int64 { return t.size }

// String formats the tensor as name, type and shape, for people to read.
func (t TensorInfo) String() string {
	return fmt.Sprintf("%s %v %v", t.Name, t.Type, t.Dims)
}

func (t TensorInfo) clone() TensorInfo {
	t.Dims = append([]int(nil), t.Dims...)
	return t
}

// Tensors returns the tensor directory in file order.
func (f *File) Tensors() []TensorInfo {
	out := make([]TensorInfo, len(f.tensors))
	for i, t := range f.tensors {
		out[i] = t.clone()
	}
	return out
}

// NumTensors returns the number of tensors in the directory, without the
// copy that [File.Tensors] makes.
func (f *File) NumTensors() int { return len(f.tensors) }

// Tensor returns the description of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.tensors[i].clone(), true
}

func (f *File) tensor(name string) (*TensorInfo, error) {
	i, ok := f.byName[name]
	if !ok {
		return nil, fmt.Errorf("gguf: tensor %q: %w", name, ErrNotFound)
	}
	return &f.tensors[i], nil
}

// RawData reads the named tensor's bytes as stored in the file.
func (f *File) RawData(name string) ([]byte, error) {
	t, err := f.tensor(name)
	if err != nil {
		return nil, err
	}
	if t.size > math.MaxInt {
		return nil, fmt.Errorf("gguf: tensor %q: %d bytes do not fit in memory", name, t.size)
	}
	if err := f.probe(t); err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	b := make([]byte, t.size)
	if err := f.readAt(b, t.Offset); err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	return b, nil
}

// Float32s reads the named tensor and returns its values as float32, in
// storage order (row by row, Dims[0] values a row). F32, F16 and BF16 convert
// exactly; Q8_0 blocks give d·q for each of their 32 int8 values q, with the
// fp16 scale d widened to float32. Other types give an error wrapping
// [ErrUnsupported].
func (f *File) Float32s(name string) ([]float32, error) {
	t, err := f.tensor(name)
	if err != nil {
		return nil, err
	}
	if !t.Type.CanDequantize() {
		return nil, fmt.Errorf("gguf: tensor %q: dequantising %v: %w", name, t.Type, ErrUnsupported)
	}
	if err := f.probe(t); err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	out := make([]float32, t.n)
	if err := f.dequantize(t, out); err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	return out, nil
}

// chunkBytes bounds the scratch buffer dequantisation reads through.
const chunkBytes = 64 << 10

func (f *File) dequantize(t *TensorInfo, out []float32) error {
	block, typeSize := t.Type.BlockSize(), t.Type.TypeSize()
	blocksPerChunk := max(1, chunkBytes/typeSize)
	nBlocks := t.n / block
	buf := make([]byte, min(nBlocks, blocksPerChunk)*typeSize)
	var f16 []fp16.Float16
	var bf16 []fp16.BFloat16
	switch t.Type {
	case TypeF16:
		f16 = make([]fp16.Float16, len(buf)/2)
	case TypeBF16:
		bf16 = make([]fp16.BFloat16, len(buf)/2)
	}
	for b0 := 0; b0 < nBlocks; b0 += blocksPerChunk {
		nb := min(blocksPerChunk, nBlocks-b0)
		raw := buf[:nb*typeSize]
		if err := f.readAt(raw, t.Offset+int64(b0)*int64(typeSize)); err != nil {
			return err
		}
		dst := out[b0*block : (b0+nb)*block]
		switch t.Type {
		case TypeF32:
			for i := range dst {
				dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		case TypeF16:
			h := f16[:nb]
			for i := range h {
				h[i] = fp16.Float16(binary.LittleEndian.Uint16(raw[2*i:]))
			}
			fp16.DecodeFloat16(dst, h)
		case TypeBF16:
			h := bf16[:nb]
			for i := range h {
				h[i] = fp16.BFloat16(binary.LittleEndian.Uint16(raw[2*i:]))
			}
			fp16.DecodeBFloat16(dst, h)
		case TypeQ8_0:
			dequantizeQ8_0(dst, raw)
		}
	}
	return nil
}

// dequantizeQ8_0 expands Q8_0 blocks (an fp16 scale d and 32 int8 values q)
// to d·q.
func dequantizeQ8_0(dst []float32, raw []byte) {
	for b := 0; len(raw) >= 34; b++ {
		d := fp16.Float16(binary.LittleEndian.Uint16(raw)).Float32()
		q := raw[2:34]
		o := dst[32*b : 32*b+32]
		for j := range o {
			o[j] = d * float32(int8(q[j]))
		}
		raw = raw[34:]
	}
}

// probe reads the last byte of t's data, so that a reader holding fewer
// bytes than the size given to Read fails before memory is allocated for
// the whole tensor.
func (f *File) probe(t *TensorInfo) error {
	if t.size == 0 {
		return nil
	}
	var b [1]byte
	return f.readAt(b[:], t.Offset+t.size-1)
}

// readAt fills b from offset off of the file.
func (f *File) readAt(b []byte, off int64) error {
	n, err := f.r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
