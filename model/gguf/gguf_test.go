package gguf

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/flashgo/flashgo/model/internal/ggufwrite"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readBytes(data []byte) (*File, error) {
	return Read(bytes.NewReader(data), int64(len(data)))
}

func mustRead(t *testing.T, data []byte) *File {
	t.Helper()
	f, err := readBytes(data)
	require.NoError(t, err)
	return f
}

func TestReadHeader(t *testing.T) {
	data := sampleFile()
	f := mustRead(t, data)
	assert.Equal(t, uint32(3), f.Version())
	assert.Equal(t, int64(32), f.Alignment())
	assert.Equal(t, int64(len(data)), f.Size())
	assert.Zero(t, f.DataOffset()%32)
	assert.NoError(t, f.Close(), "Close of a File from Read does nothing")

	want := make([]string, 0)
	for _, p := range allTypesKVs() {
		want = append(want, p.Key)
	}
	assert.Equal(t, want, f.Keys(), "keys in file order")
}

func TestMetadataEveryType(t *testing.T) {
	f := mustRead(t, sampleFile())

	// Every pair reads back with its type and Go value.
	for _, p := range allTypesKVs() {
		v, ok := f.Value(p.Key)
		require.True(t, ok, p.Key)
		assert.Equal(t, ValueType(p.Type), v.Type(), p.Key)
		assert.NotEmpty(t, v.String(), p.Key)
		if p.Type != ggufwrite.ValueArray {
			assert.Equal(t, p.Val, v.Any(), p.Key)
			assert.Zero(t, v.Len(), p.Key)
			continue
		}
		a := p.Val.(ggufwrite.Array)
		assert.Equal(t, ValueType(a.Elem), v.ElemType(), p.Key)
		assert.Equal(t, len(a.Items), v.Len(), p.Key)
	}

	v, _ := f.Value("a.u16")
	assert.Equal(t, []uint16{1, 65535}, v.Any())
	v, _ = f.Value("a.bool")
	assert.Equal(t, []bool{true, false, true}, v.Any())
	v, _ = f.Value("a.f64")
	assert.Equal(t, []float64{0.25, -8}, v.Any())
	v, _ = f.Value("a.empty")
	assert.Equal(t, 0, v.Len())
	assert.Equal(t, "[0×float32]", v.String())

	// Nested arrays come back as []Value.
	v, _ = f.Value("a.nested")
	nested, ok := v.Any().([]Value)
	require.True(t, ok)
	require.Len(t, nested, 3)
	assert.Equal(t, []int32{1, 2}, nested[0].Any())
	assert.Equal(t, []string{"x"}, nested[1].Any())
	assert.Equal(t, ValueArray, nested[2].ElemType())
	inner := nested[2].Any().([]Value)
	assert.Equal(t, []uint8{9}, inner[0].Any())
	assert.Equal(t, "[3×array: [2×int32: 1 2] [1×string: \"x\"] [1×array: [1×uint8: 9]]]", v.String())

	// Typed getters.
	s, err := f.String("t.string")
	assert.NoError(t, err)
	assert.Equal(t, "héllo ▁ world", s)
	s, err = f.String("t.empty")
	assert.NoError(t, err)
	assert.Equal(t, "", s)

	for key, want := range map[string]int{"t.u8": 200, "t.i8": -100, "t.u16": 60000, "t.i16": -30000, "t.u32": 4000000000, "t.i32": -2000000000, "t.i64": math.MinInt64} {
		got, err := f.Int(key)
		assert.NoError(t, err, key)
		assert.Equal(t, want, got, key)
	}
	u32, err := f.Uint32("t.u32")
	assert.NoError(t, err)
	assert.Equal(t, uint32(4000000000), u32)
	u64, err := f.Uint64("t.u64")
	assert.NoError(t, err)
	assert.Equal(t, uint64(math.MaxUint64), u64)
	f32, err := f.Float32("t.f32")
	assert.NoError(t, err)
	assert.Equal(t, float32(1.5), f32)
	f32, err = f.Float32("t.f64")
	assert.NoError(t, err)
	assert.Equal(t, float32(math.Pi), f32)
	b, err := f.Bool("t.bool")
	assert.NoError(t, err)
	assert.True(t, b)
	b, err = f.Bool("t.false")
	assert.NoError(t, err)
	assert.False(t, b)

	ss, err := f.StringArray("a.string")
	assert.NoError(t, err)
	assert.Equal(t, []string{"a", "", "▁b"}, ss)
	fs, err := f.Float32Array("a.f32")
	assert.NoError(t, err)
	assert.Equal(t, []float32{-0.5, 2}, fs)
	fs, err = f.Float32Array("a.f64")
	assert.NoError(t, err)
	assert.Equal(t, []float32{0.25, -8}, fs)
	fs, err = f.Float32Array("a.empty")
	assert.NoError(t, err)
	assert.Empty(t, fs)
	is, err := f.Int32Array("a.i32")
	assert.NoError(t, err)
	assert.Equal(t, []int32{-7, 42}, is)
	is, err = f.Int32Array("a.u16")
	assert.NoError(t, err)
	assert.Equal(t, []int32{1, 65535}, is)

	// Getters return copies: changing one does not change the File.
	ss[0] = "changed"
	ss2, _ := f.StringArray("a.string")
	assert.Equal(t, "a", ss2[0])
}

func TestMetadataGetterErrors(t *testing.T) {
	f := mustRead(t, sampleFile())
	assert.False(t, f.Has("no.such.key"))
	_, ok := f.Value("no.such.key")
	assert.False(t, ok)

	notFound := []func() error{
		func() error { _, err := f.String("missing"); return err },
		func() error { _, err := f.Int("missing"); return err },
		func() error { _, err := f.Uint32("missing"); return err },
		func() error { _, err := f.Uint64("missing"); return err },
		func() error { _, err := f.Float32("missing"); return err },
		func() error { _, err := f.Bool("missing"); return err },
		func() error { _, err := f.StringArray("missing"); return err },
		func() error { _, err := f.Float32Array("missing"); return err },
		func() error { _, err := f.Int32Array("missing"); return err },
	}
	for i, fn := range notFound {
		assert.ErrorIs(t, fn(), ErrNotFound, "getter %d", i)
	}

	wrongType := map[string]func() error{
		"String of int":          func() error { _, err := f.String("t.u32"); return err },
		"Int of string":          func() error { _, err := f.Int("t.string"); return err },
		"Int of float":           func() error { _, err := f.Int("t.f32"); return err },
		"Int of huge uint64":     func() error { _, err := f.Int("t.u64"); return err },
		"Uint32 of negative":     func() error { _, err := f.Uint32("t.i8"); return err },
		"Uint32 of huge":         func() error { _, err := f.Uint32("t.u64"); return err },
		"Uint64 of negative":     func() error { _, err := f.Uint64("t.i64"); return err },
		"Float32 of int":         func() error { _, err := f.Float32("t.u8"); return err },
		"Bool of int":            func() error { _, err := f.Bool("t.u8"); return err },
		"StringArray of scalar":  func() error { _, err := f.StringArray("t.string"); return err },
		"StringArray of ints":    func() error { _, err := f.StringArray("a.i32"); return err },
		"Float32Array of ints":   func() error { _, err := f.Float32Array("a.i32"); return err },
		"Int32Array of strings":  func() error { _, err := f.Int32Array("a.string"); return err },
		"Int32Array of floats":   func() error { _, err := f.Int32Array("a.empty"); return err },
		"Int32Array of big u32":  func() error { _, err := f.Int32Array("a.u32"); return err },
		"Int32Array of big i64":  func() error { _, err := f.Int32Array("a.i64"); return err },
		"Int32Array of nested":   func() error { _, err := f.Int32Array("a.nested"); return err },
		"Float32Array of scalar": func() error { _, err := f.Float32Array("t.f32"); return err },
	}
	for name, fn := range wrongType {
		assert.ErrorIs(t, fn(), ErrFormat, name)
	}
}

func TestTensors(t *testing.T) {
	f := mustRead(t, sampleFile())
	specs := allTypesTensors()
	infos := f.Tensors()
	require.Len(t, infos, len(specs))
	for i, s := range specs {
		ti := infos[i]
		assert.Equal(t, s.Name, ti.Name)
		assert.Equal(t, TensorType(s.Type), ti.Type, s.Name)
		dims := make([]int, len(s.Dims))
		for j, d := range s.Dims {
			dims[j] = int(d)
		}
		assert.Equal(t, dims, ti.Dims, s.Name)
		assert.Equal(t, ggufwrite.Numel(s.Dims), ti.NumElements(), s.Name)
		assert.Equal(t, int64(len(s.Data)), ti.Size(), s.Name)
		assert.Zero(t, ti.Offset%32, "%s offset %d aligned", s.Name, ti.Offset)
		assert.GreaterOrEqual(t, ti.Offset, f.DataOffset())

		byName, ok := f.Tensor(s.Name)
		require.True(t, ok)
		assert.Equal(t, ti, byName)

		raw, err := f.RawData(s.Name)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(s.Data, raw), s.Name)

		got, err := f.Float32s(s.Name)
		if !TensorType(s.Type).CanDequantize() {
			assert.ErrorIs(t, err, ErrUnsupported, s.Name)
			continue
		}
		require.NoError(t, err, s.Name)
		assert.Len(t, got, ti.NumElements())
		if len(s.Want) > 0 {
			assert.Equal(t, s.Want, got, s.Name)
		}
	}
	assert.Equal(t, "q8.weight Q8_0 [64 3]", infos[3].String())

	// Tensor returns a copy.
	ti, _ := f.Tensor("f32.weight")
	ti.Dims[0] = 99
	ti, _ = f.Tensor("f32.weight")
	assert.Equal(t, 4, ti.Dims[0])

	_, ok := f.Tensor("nope")
	assert.False(t, ok)
	_, err := f.Float32s("nope")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = f.RawData("nope")
	assert.ErrorIs(t, err, ErrNotFound)
}

// TestQ8_0Dequantize checks one block by hand: d = 0.5, q = -128 … 127.
func TestQ8_0Dequantize(t *testing.T) {
	var e ggufwrite.Encoder
	e.U16(0x3800) // 0.5 in binary16
	for j := range 32 {
		e.U8(uint8(int8(j*8 - 128)))
	}
	data := ggufwrite.File{Tensors: []ggufwrite.Tensor{{Name: "q", Type: ggufwrite.TypeQ8_0, Dims: []uint64{32}, Data: e.B}}}.Bytes()
	f := mustRead(t, data)
	got, err := f.Float32s("q")
	require.NoError(t, err)
	for j := range 32 {
		assert.Equal(t, 0.5*float32(j*8-128), got[j], "element %d", j)
	}
}

// TestLargeTensorChunks reads tensors bigger than the dequantisation chunk.
func TestLargeTensorChunks(t *testing.T) {
	specs := []ggufwrite.Tensor{
		ggufwrite.F32Tensor("f32", 64, 1000),
		ggufwrite.F16Tensor("f16", 128, 600),
		ggufwrite.BF16Tensor("bf16", 100, 700),
		ggufwrite.Q8Tensor("q8", 32*64, 40),
	}
	f := mustRead(t, ggufwrite.File{Tensors: specs}.Bytes())
	for _, s := range specs {
		got, err := f.Float32s(s.Name)
		require.NoError(t, err)
		assert.Equal(t, s.Want, got, s.Name)
	}
}

func TestVersion2(t *testing.T) {
	f := mustRead(t, ggufwrite.File{Version: 2, KVs: allTypesKVs(), Tensors: allTypesTensors()}.Bytes())
	assert.Equal(t, uint32(2), f.Version())
	got, err := f.Float32s("q8.weight")
	require.NoError(t, err)
	assert.Equal(t, ggufwrite.Q8Tensor("q8.weight", 64, 3).Want, got)
}

func TestAlignment(t *testing.T) {
	for _, align := range []int{1, 8, 64, 4096} {
		kvs := append(allTypesKVs(), ggufwrite.KV{Key: "general.alignment", Type: ggufwrite.ValueUint32, Val: uint32(align)})
		f := mustRead(t, ggufwrite.File{Alignment: align, KVs: kvs, Tensors: allTypesTensors()}.Bytes())
		assert.Equal(t, int64(align), f.Alignment())
		assert.Zero(t, f.DataOffset()%int64(align))
		for _, s := range allTypesTensors() {
			ti, _ := f.Tensor(s.Name)
			assert.Zero(t, ti.Offset%int64(align), "align %d %s", align, s.Name)
			if TensorType(s.Type).CanDequantize() {
				got, err := f.Float32s(s.Name)
				require.NoError(t, err)
				assert.Len(t, got, ti.NumElements())
			}
		}
	}

	// A file laid out for 32 but declaring 64 has misaligned tensors.
	kvs := append(allTypesKVs(), ggufwrite.KV{Key: "general.alignment", Type: ggufwrite.ValueUint32, Val: uint32(64)})
	_, err := readBytes(ggufwrite.File{Alignment: 32, KVs: kvs, Tensors: allTypesTensors()}.Bytes())
	assert.ErrorIs(t, err, ErrFormat)

	for name, bad := range map[string]ggufwrite.KV{
		"zero":          {Key: "general.alignment", Type: ggufwrite.ValueUint32, Val: uint32(0)},
		"not pow2":      {Key: "general.alignment", Type: ggufwrite.ValueUint32, Val: uint32(48)},
		"string":        {Key: "general.alignment", Type: ggufwrite.ValueString, Val: "32"},
		"negative":      {Key: "general.alignment", Type: ggufwrite.ValueInt32, Val: int32(-32)},
		"beyond uint32": {Key: "general.alignment", Type: ggufwrite.ValueUint64, Val: uint64(1) << 40},
		"float":         {Key: "general.alignment", Type: ggufwrite.ValueFloat32, Val: float32(32)},
	} {
		_, err := readBytes(ggufwrite.File{KVs: []ggufwrite.KV{bad}, Tensors: allTypesTensors()}.Bytes())
		assert.ErrorIs(t, err, ErrFormat, name)
	}
}

// header starts a file by hand: magic, version and counts.
func header(version uint32, nTensors, nKV uint64) *ggufwrite.Encoder {
	e := &ggufwrite.Encoder{}
	e.U32(ggufMagic)
	e.U32(version)
	e.U64(nTensors)
	e.U64(nKV)
	return e
}

// oneTensor is a file holding a single tensor info, written by hand so its
// fields can be anything, followed by data bytes of zeros.
func oneTensor(name string, dims []uint64, typ uint32, offset uint64, data int) []byte {
	e := header(3, 1, 0)
	e.Str(name)
	e.U32(uint32(len(dims)))
	for _, d := range dims {
		e.U64(d)
	}
	e.U32(typ)
	e.U64(offset)
	e.B = append(e.B, make([]byte, int(ggufwrite.AlignUp(uint64(len(e.B)), 32))-len(e.B)+data)...)
	return e.B
}

// brokenFiles are hand-made invalid files and the error each must give.
func brokenFiles() map[string]struct {
	data []byte
	want error
} {
	type c = struct {
		data []byte
		want error
	}
	valid := sampleFile()
	corrupt := func(at int, b byte) []byte {
		d := bytes.Clone(valid)
		d[at] = b
		return d
	}
	m := map[string]c{
		"empty":        {nil, ErrFormat},
		"magic only":   {[]byte("GGUF"), ErrFormat},
		"bad magic":    {corrupt(0, 'X'), ErrFormat},
		"version 1":    {header(1, 0, 0).B, ErrUnsupported},
		"version 4":    {header(4, 0, 0).B, ErrUnsupported},
		"version 0":    {header(0, 0, 0).B, ErrUnsupported},
		"big endian":   {header(3<<24, 0, 0).B, ErrUnsupported},
		"no counts":    {header(3, 0, 0).B[:12], ErrFormat},
		"huge kv n":    {header(3, 0, math.MaxUint64).B, ErrFormat},
		"huge tens n":  {header(3, math.MaxUint64, 0).B, ErrFormat},
		"kv n > bytes": {header(3, 0, 1).B, ErrFormat},
		"both n big": {func() []byte {
			e := header(3, 1, 1)
			e.B = append(e.B, make([]byte, 30)...) // room for one of the two, not both
			return e.B
		}(), ErrFormat},
	}
	kvFile := func(build func(e *ggufwrite.Encoder)) []byte {
		e := header(3, 0, 1)
		build(e)
		return e.B
	}
	m["huge key length"] = c{kvFile(func(e *ggufwrite.Encoder) { e.U64(math.MaxUint64); e.B = append(e.B, "key"...) }), ErrFormat}
	m["key past end"] = c{kvFile(func(e *ggufwrite.Encoder) { e.U64(100); e.B = append(e.B, "key......"...) }), ErrFormat}
	m["unknown value type"] = c{kvFile(func(e *ggufwrite.Encoder) { e.Str("k"); e.U32(13); e.U64(0) }), ErrFormat}
	m["huge value type"] = c{kvFile(func(e *ggufwrite.Encoder) { e.Str("k"); e.U32(math.MaxUint32); e.U64(0) }), ErrFormat}
	m["bad bool"] = c{kvFile(func(e *ggufwrite.Encoder) { e.Str("k"); e.U32(uint32(ValueBool)); e.U8(2); e.U64(0) }), ErrFormat}
	m["bad bool in array"] = c{kvFile(func(e *ggufwrite.Encoder) {
		e.Str("k")
		e.U32(uint32(ValueArray))
		e.U32(uint32(ValueBool))
		e.U64(2)
		e.U8(1)
		e.U8(7)
	}), ErrFormat}
	m["huge string"] = c{kvFile(func(e *ggufwrite.Encoder) {
		e.Str("k")
		e.U32(uint32(ValueString))
		e.U64(1 << 62)
		e.B = append(e.B, "abc"...)
	}), ErrFormat}
	m["string past end"] = c{kvFile(func(e *ggufwrite.Encoder) {
		e.Str("k")
		e.U32(uint32(ValueString))
		e.U64(4)
		e.B = append(e.B, "abc"...)
	}), ErrFormat}
	m["huge array"] = c{kvFile(func(e *ggufwrite.Encoder) {
		e.Str("k")
		e.U32(uint32(ValueArray))
		e.U32(uint32(ValueUint64))
		e.U64(1 << 61)
		e.U64(1)
	}), ErrFormat}
	m["array of strings past end"] = c{kvFile(func(e *ggufwrite.Encoder) {
		e.Str("k")
		e.U32(uint32(ValueArray))
		e.U32(uint32(ValueString))
		e.U64(3)
		e.Str("a")
		e.U64(1)
		e.U64(1)
	}), ErrFormat}
	m["array of unknown type"] = c{kvFile(func(e *ggufwrite.Encoder) { e.Str("k"); e.U32(uint32(ValueArray)); e.U32(42); e.U64(0) }), ErrFormat}
	m["arrays nested too deep"] = c{kvFile(func(e *ggufwrite.Encoder) {
		e.Str("k")
		e.U32(uint32(ValueArray))
		for range MaxArrayDepth {
			e.U32(uint32(ValueArray))
			e.U64(1)
		}
		e.U32(uint32(ValueUint8))
		e.U64(0)
	}), ErrFormat}
	m["duplicate key"] = c{func() []byte {
		e := header(3, 0, 2)
		for range 2 {
			e.Str("k")
			e.U32(uint32(ValueUint8))
			e.U8(1)
		}
		return e.B
	}(), ErrFormat}

	m["5 dims"] = c{oneTensor("t", []uint64{1, 1, 1, 1, 1}, 0, 0, 4), ErrFormat}
	m["unknown tensor type"] = c{oneTensor("t", []uint64{1}, 4, 0, 64), ErrFormat}
	m["huge tensor type"] = c{oneTensor("t", []uint64{1}, math.MaxUint32, 0, 64), ErrFormat}
	m["dims overflow"] = c{oneTensor("t", []uint64{1 << 32, 1 << 32, 1 << 32}, 0, 0, 64), ErrFormat}
	m["dim > MaxInt64"] = c{oneTensor("t", []uint64{1 << 63}, 0, 0, 64), ErrFormat}
	m["bytes overflow"] = c{oneTensor("t", []uint64{1 << 31, 1 << 31}, 0, 0, 64), ErrFormat}
	m["data past end"] = c{oneTensor("t", []uint64{16}, 0, 0, 63), ErrFormat}
	m["offset past end"] = c{oneTensor("t", []uint64{1}, 0, 1<<20, 64), ErrFormat}
	m["offset overflows"] = c{oneTensor("t", []uint64{1}, 0, math.MaxUint64-31, 64), ErrFormat}
	m["offset > MaxInt64"] = c{oneTensor("t", []uint64{1}, 0, 1<<63, 64), ErrFormat}
	m["misaligned offset"] = c{oneTensor("t", []uint64{1}, 0, 4, 64), ErrFormat}
	m["q8 row not whole blocks"] = c{oneTensor("t", []uint64{16, 2}, uint32(TypeQ8_0), 0, 64), ErrFormat}
	m["q8 scalar"] = c{oneTensor("t", nil, uint32(TypeQ8_0), 0, 64), ErrFormat}
	m["duplicate tensor"] = c{ggufwrite.File{Tensors: []ggufwrite.Tensor{ggufwrite.F32Tensor("t", 2), ggufwrite.F32Tensor("t", 2)}}.Bytes(), ErrFormat}
	// Tensors whose data overlap: every tensor of a file could name the
	// same bytes, and loading would then allocate each of them afresh.
	m["overlapping tensors"] = c{func() []byte {
		e := header(3, 2, 0)
		for _, t := range []struct {
			name   string
			offset uint64
		}{{"a", 0}, {"b", 32}} {
			e.Str(t.name)
			e.U32(1)
			e.U64(16) // 64 bytes of F32
			e.U32(uint32(TypeF32))
			e.U64(t.offset)
		}
		e.B = append(e.B, make([]byte, int(ggufwrite.AlignUp(uint64(len(e.B)), 32))-len(e.B)+96)...)
		return e.B
	}(), ErrFormat}
	m["tensor name past end"] = c{func() []byte {
		e := header(3, 1, 0)
		e.U64(1 << 40)
		e.B = append(e.B, make([]byte, 40)...)
		return e.B
	}(), ErrFormat}
	// n_dims = 2^32-1, with enough bytes after it to pass the count check.
	m["n_dims huge"] = c{func() []byte {
		e := header(3, 1, 0)
		e.Str("t")
		e.U32(math.MaxUint32)
		e.B = append(e.B, make([]byte, 64)...)
		return e.B
	}(), ErrFormat}
	return m
}

func TestRejectsBrokenFiles(t *testing.T) {
	for name, c := range brokenFiles() {
		t.Run(name, func(t *testing.T) {
			f, err := readBytes(c.data)
			assert.Nil(t, f)
			require.Error(t, err)
			assert.ErrorIs(t, err, c.want)
			t.Log(err)
		})
	}
}

// TestTruncatedPrefixes cuts the sample file at every length: each strict
// prefix is an error, never a panic.
func TestTruncatedPrefixes(t *testing.T) {
	data := sampleFile()
	for n := range len(data) {
		_, err := readBytes(data[:n])
		require.Error(t, err, "prefix of %d bytes", n)
		assert.ErrorIs(t, err, ErrFormat, "prefix of %d bytes", n)
	}
	_, err := readBytes(data)
	require.NoError(t, err)
}

// TestHostileCountsDoNotAllocate checks that lengths claiming far more than
// the file holds are refused before any allocation of that size.
func TestHostileCountsDoNotAllocate(t *testing.T) {
	cases := map[string][]byte{}
	for name, c := range brokenFiles() {
		cases[name] = c.data
	}
	// A large but plausible claim: 2^27 uint64s (1 GiB) in a tiny file.
	e := header(3, 0, 1)
	e.Str("k")
	e.U32(uint32(ValueArray))
	e.U32(uint32(ValueUint64))
	e.U64(1 << 27)
	e.B = append(e.B, make([]byte, 100)...)
	cases["1 GiB array"] = e.B

	// A reader far shorter than the size it claims: the counts fit the
	// claimed size, so only incremental allocation keeps memory small.
	for name, data := range map[string][]byte{"1 GiB array, lying size": e.B, "1 GiB string, lying size": func() []byte {
		e := header(3, 0, 1)
		e.Str("k")
		e.U32(uint32(ValueString))
		e.U64(1 << 30)
		return append(e.B, "abc"...)
	}()} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := Read(bytes.NewReader(data), 1<<40)
		runtime.ReadMemStats(&after)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, name)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), name)
	}

	for name, data := range cases {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := readBytes(data)
		runtime.ReadMemStats(&after)
		assert.Error(t, err, name)
		// The reader's own buffers are under 100 KiB; anything near the
		// claimed sizes would be gigabytes.
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), name)
	}
}

// errReaderAt fails every read after the first limit bytes.
type errReaderAt struct {
	data  []byte
	limit int64
}

var errDisk = errors.New("disk on fire")

func (r errReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > r.limit {
		n := 0
		if off < r.limit {
			n = copy(p, r.data[off:r.limit])
		}
		return n, errDisk
	}
	return copy(p, r.data[off:]), nil
}

func TestReaderErrors(t *testing.T) {
	data := sampleFile()
	// A failing header read reports the I/O error.
	_, err := Read(errReaderAt{data, 40}, int64(len(data)))
	assert.ErrorIs(t, err, errDisk)
	assert.NotErrorIs(t, err, ErrFormat, "an I/O error is not a format error")

	// A failing tensor read too: the header parses, the data does not.
	f, err := readBytes(data)
	require.NoError(t, err)
	ti, _ := f.Tensor("norm.weight")
	g, err := Read(errReaderAt{data, ti.Offset + 4}, int64(len(data)))
	require.NoError(t, err)
	_, err = g.Float32s("norm.weight")
	assert.ErrorIs(t, err, errDisk)
	_, err = g.RawData("norm.weight")
	assert.ErrorIs(t, err, errDisk)

	// A reader shorter than the size it was given.
	short := bytes.NewReader(data[:len(data)-4])
	g, err = Read(short, int64(len(data)))
	require.NoError(t, err)
	_, err = g.Float32s("norm.weight")
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = Read(bytes.NewReader(data[:100]), int64(len(data)))
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)

	_, err = Read(bytes.NewReader(data), -1)
	assert.ErrorIs(t, err, ErrFormat)
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sample.gguf")
	require.NoError(t, os.WriteFile(path, sampleFile(), 0o644))
	f, err := Open(path)
	require.NoError(t, err)
	got, err := f.Float32s("f32.weight")
	require.NoError(t, err)
	assert.Equal(t, ggufwrite.F32Tensor("f32.weight", 4, 3).Want, got)
	require.NoError(t, f.Close())
	assert.NoError(t, f.Close(), "second Close is a no-op")
	_, err = f.Float32s("f32.weight")
	assert.Error(t, err, "reads fail after Close")

	_, err = Open(filepath.Join(dir, "missing.gguf"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	bad := filepath.Join(dir, "bad.gguf")
	require.NoError(t, os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00"), 0o644))
	_, err = Open(bad)
	assert.ErrorIs(t, err, ErrFormat)
	assert.Contains(t, err.Error(), "bad.gguf")
}

func TestTypeNames(t *testing.T) {
	assert.Equal(t, "Q8_0", TypeQ8_0.String())
	assert.Equal(t, "BF16", TypeBF16.String())
	assert.Equal(t, "TensorType(4)", TensorType(4).String())
	assert.Equal(t, 32, TypeQ8_0.BlockSize())
	assert.Equal(t, 34, TypeQ8_0.TypeSize())
	assert.Equal(t, 144, TypeQ4_K.TypeSize())
	assert.Equal(t, 210, TypeQ6_K.TypeSize())
	assert.Zero(t, TensorType(99).BlockSize())
	assert.Equal(t, "float64", ValueFloat64.String())
	assert.Equal(t, "ValueType(13)", ValueType(13).String())
}
