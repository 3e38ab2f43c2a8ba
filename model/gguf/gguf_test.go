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
		want = append(want, p.key)
	}
	assert.Equal(t, want, f.Keys(), "keys in file order")
}

func TestMetadataEveryType(t *testing.T) {
	f := mustRead(t, sampleFile())

	// Every pair reads back with its type and Go value.
	for _, p := range allTypesKVs() {
		v, ok := f.Value(p.key)
		require.True(t, ok, p.key)
		assert.Equal(t, p.typ, v.Type(), p.key)
		assert.NotEmpty(t, v.String(), p.key)
		if p.typ != ValueArray {
			assert.Equal(t, p.val, v.Any(), p.key)
			assert.Zero(t, v.Len(), p.key)
			continue
		}
		a := p.val.(arr)
		assert.Equal(t, a.elem, v.ElemType(), p.key)
		assert.Equal(t, len(a.items), v.Len(), p.key)
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
		assert.Equal(t, s.name, ti.Name)
		assert.Equal(t, s.typ, ti.Type, s.name)
		dims := make([]int, len(s.dims))
		for j, d := range s.dims {
			dims[j] = int(d)
		}
		assert.Equal(t, dims, ti.Dims, s.name)
		assert.Equal(t, numel(s.dims), ti.NumElements(), s.name)
		assert.Equal(t, int64(len(s.data)), ti.Size(), s.name)
		assert.Zero(t, ti.Offset%32, "%s offset %d aligned", s.name, ti.Offset)
		assert.GreaterOrEqual(t, ti.Offset, f.DataOffset())

		byName, ok := f.Tensor(s.name)
		require.True(t, ok)
		assert.Equal(t, ti, byName)

		raw, err := f.RawData(s.name)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(s.data, raw), s.name)

		got, err := f.Float32s(s.name)
		if !s.typ.CanDequantize() {
			assert.ErrorIs(t, err, ErrUnsupported, s.name)
			continue
		}
		require.NoError(t, err, s.name)
		assert.Len(t, got, ti.NumElements())
		if len(s.want) > 0 {
			assert.Equal(t, s.want, got, s.name)
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
	var e enc
	e.u16(0x3800) // 0.5 in binary16
	for j := range 32 {
		e.u8(uint8(int8(j*8 - 128)))
	}
	data := builder{tensors: []tensorSpec{{name: "q", typ: TypeQ8_0, dims: []uint64{32}, data: e.b}}}.bytes()
	f := mustRead(t, data)
	got, err := f.Float32s("q")
	require.NoError(t, err)
	for j := range 32 {
		assert.Equal(t, 0.5*float32(j*8-128), got[j], "element %d", j)
	}
}

// TestLargeTensorChunks reads tensors bigger than the dequantisation chunk.
func TestLargeTensorChunks(t *testing.T) {
	specs := []tensorSpec{
		f32Tensor("f32", 64, 1000),
		f16Tensor("f16", 128, 600),
		bf16Tensor("bf16", 100, 700),
		q8Tensor("q8", 32*64, 40),
	}
	f := mustRead(t, builder{tensors: specs}.bytes())
	for _, s := range specs {
		got, err := f.Float32s(s.name)
		require.NoError(t, err)
		assert.Equal(t, s.want, got, s.name)
	}
}

func TestVersion2(t *testing.T) {
	f := mustRead(t, builder{version: 2, kvs: allTypesKVs(), tensors: allTypesTensors()}.bytes())
	assert.Equal(t, uint32(2), f.Version())
	got, err := f.Float32s("q8.weight")
	require.NoError(t, err)
	assert.Equal(t, q8Tensor("q8.weight", 64, 3).want, got)
}

func TestAlignment(t *testing.T) {
	for _, align := range []int{1, 8, 64, 4096} {
		kvs := append(allTypesKVs(), kv{"general.alignment", ValueUint32, uint32(align)})
		f := mustRead(t, builder{alignment: align, kvs: kvs, tensors: allTypesTensors()}.bytes())
		assert.Equal(t, int64(align), f.Alignment())
		assert.Zero(t, f.DataOffset()%int64(align))
		for _, s := range allTypesTensors() {
			ti, _ := f.Tensor(s.name)
			assert.Zero(t, ti.Offset%int64(align), "align %d %s", align, s.name)
			if s.typ.CanDequantize() {
				got, err := f.Float32s(s.name)
				require.NoError(t, err)
				assert.Len(t, got, ti.NumElements())
			}
		}
	}

	// A file laid out for 32 but declaring 64 has misaligned tensors.
	kvs := append(allTypesKVs(), kv{"general.alignment", ValueUint32, uint32(64)})
	_, err := readBytes(builder{alignment: 32, kvs: kvs, tensors: allTypesTensors()}.bytes())
	assert.ErrorIs(t, err, ErrFormat)

	for name, bad := range map[string]kv{
		"zero":          {"general.alignment", ValueUint32, uint32(0)},
		"not pow2":      {"general.alignment", ValueUint32, uint32(48)},
		"string":        {"general.alignment", ValueString, "32"},
		"negative":      {"general.alignment", ValueInt32, int32(-32)},
		"beyond uint32": {"general.alignment", ValueUint64, uint64(1) << 40},
		"float":         {"general.alignment", ValueFloat32, float32(32)},
	} {
		_, err := readBytes(builder{kvs: []kv{bad}, tensors: allTypesTensors()}.bytes())
		assert.ErrorIs(t, err, ErrFormat, name)
	}
}

// header starts a file by hand: magic, version and counts.
func header(version uint32, nTensors, nKV uint64) *enc {
	e := &enc{}
	e.u32(ggufMagic)
	e.u32(version)
	e.u64(nTensors)
	e.u64(nKV)
	return e
}

// oneTensor is a file holding a single tensor info, written by hand so its
// fields can be anything, followed by data bytes of zeros.
func oneTensor(name string, dims []uint64, typ uint32, offset uint64, data int) []byte {
	e := header(3, 1, 0)
	e.str(name)
	e.u32(uint32(len(dims)))
	for _, d := range dims {
		e.u64(d)
	}
	e.u32(typ)
	e.u64(offset)
	e.b = append(e.b, make([]byte, int(alignUp(uint64(len(e.b)), 32))-len(e.b)+data)...)
	return e.b
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
		"version 1":    {header(1, 0, 0).b, ErrUnsupported},
		"version 4":    {header(4, 0, 0).b, ErrUnsupported},
		"version 0":    {header(0, 0, 0).b, ErrUnsupported},
		"big endian":   {header(3<<24, 0, 0).b, ErrUnsupported},
		"no counts":    {header(3, 0, 0).b[:12], ErrFormat},
		"huge kv n":    {header(3, 0, math.MaxUint64).b, ErrFormat},
		"huge tens n":  {header(3, math.MaxUint64, 0).b, ErrFormat},
		"kv n > bytes": {header(3, 0, 1).b, ErrFormat},
		"both n big": {func() []byte {
			e := header(3, 1, 1)
			e.b = append(e.b, make([]byte, 30)...) // room for one of the two, not both
			return e.b
		}(), ErrFormat},
	}
	kvFile := func(build func(e *enc)) []byte {
		e := header(3, 0, 1)
		build(e)
		return e.b
	}
	m["huge key length"] = c{kvFile(func(e *enc) { e.u64(math.MaxUint64); e.b = append(e.b, "key"...) }), ErrFormat}
	m["key past end"] = c{kvFile(func(e *enc) { e.u64(100); e.b = append(e.b, "key......"...) }), ErrFormat}
	m["unknown value type"] = c{kvFile(func(e *enc) { e.str("k"); e.u32(13); e.u64(0) }), ErrFormat}
	m["huge value type"] = c{kvFile(func(e *enc) { e.str("k"); e.u32(math.MaxUint32); e.u64(0) }), ErrFormat}
	m["bad bool"] = c{kvFile(func(e *enc) { e.str("k"); e.u32(uint32(ValueBool)); e.u8(2); e.u64(0) }), ErrFormat}
	m["bad bool in array"] = c{kvFile(func(e *enc) {
		e.str("k")
		e.u32(uint32(ValueArray))
		e.u32(uint32(ValueBool))
		e.u64(2)
		e.u8(1)
		e.u8(7)
	}), ErrFormat}
	m["huge string"] = c{kvFile(func(e *enc) { e.str("k"); e.u32(uint32(ValueString)); e.u64(1 << 62); e.b = append(e.b, "abc"...) }), ErrFormat}
	m["string past end"] = c{kvFile(func(e *enc) { e.str("k"); e.u32(uint32(ValueString)); e.u64(4); e.b = append(e.b, "abc"...) }), ErrFormat}
	m["huge array"] = c{kvFile(func(e *enc) {
		e.str("k")
		e.u32(uint32(ValueArray))
		e.u32(uint32(ValueUint64))
		e.u64(1 << 61)
		e.u64(1)
	}), ErrFormat}
	m["array of strings past end"] = c{kvFile(func(e *enc) {
		e.str("k")
		e.u32(uint32(ValueArray))
		e.u32(uint32(ValueString))
		e.u64(3)
		e.str("a")
		e.u64(1)
		e.u64(1)
	}), ErrFormat}
	m["array of unknown type"] = c{kvFile(func(e *enc) { e.str("k"); e.u32(uint32(ValueArray)); e.u32(42); e.u64(0) }), ErrFormat}
	m["arrays nested too deep"] = c{kvFile(func(e *enc) {
		e.str("k")
		e.u32(uint32(ValueArray))
		for range MaxArrayDepth {
			e.u32(uint32(ValueArray))
			e.u64(1)
		}
		e.u32(uint32(ValueUint8))
		e.u64(0)
	}), ErrFormat}
	m["duplicate key"] = c{func() []byte {
		e := header(3, 0, 2)
		for range 2 {
			e.str("k")
			e.u32(uint32(ValueUint8))
			e.u8(1)
		}
		return e.b
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
	m["duplicate tensor"] = c{builder{tensors: []tensorSpec{f32Tensor("t", 2), f32Tensor("t", 2)}}.bytes(), ErrFormat}
	// Tensors whose data overlap: every tensor of a file could name the
	// same bytes, and loading would then allocate each of them afresh.
	m["overlapping tensors"] = c{func() []byte {
		e := header(3, 2, 0)
		for _, t := range []struct {
			name   string
			offset uint64
		}{{"a", 0}, {"b", 32}} {
			e.str(t.name)
			e.u32(1)
			e.u64(16) // 64 bytes of F32
			e.u32(uint32(TypeF32))
			e.u64(t.offset)
		}
		e.b = append(e.b, make([]byte, int(alignUp(uint64(len(e.b)), 32))-len(e.b)+96)...)
		return e.b
	}(), ErrFormat}
	m["tensor name past end"] = c{func() []byte {
		e := header(3, 1, 0)
		e.u64(1 << 40)
		e.b = append(e.b, make([]byte, 40)...)
		return e.b
	}(), ErrFormat}
	// n_dims = 2^32-1, with enough bytes after it to pass the count check.
	m["n_dims huge"] = c{func() []byte {
		e := header(3, 1, 0)
		e.str("t")
		e.u32(math.MaxUint32)
		e.b = append(e.b, make([]byte, 64)...)
		return e.b
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
	e.str("k")
	e.u32(uint32(ValueArray))
	e.u32(uint32(ValueUint64))
	e.u64(1 << 27)
	e.b = append(e.b, make([]byte, 100)...)
	cases["1 GiB array"] = e.b

	// A reader far shorter than the size it claims: the counts fit the
	// claimed size, so only incremental allocation keeps memory small.
	for name, data := range map[string][]byte{"1 GiB array, lying size": e.b, "1 GiB string, lying size": func() []byte {
		e := header(3, 0, 1)
		e.str("k")
		e.u32(uint32(ValueString))
		e.u64(1 << 30)
		return append(e.b, "abc"...)
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
	assert.Equal(t, f32Tensor("f32.weight", 4, 3).want, got)
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
