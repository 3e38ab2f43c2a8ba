package gguf

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"slices"
)

// Errors returned (wrapped) by the GGUF reader and, through it, by package
// model's decoder. Test with
// [errors.Is]. Their own texts carry no package prefix: every error the
// package returns starts with "gguf: " once, whatever it wraps.
var (
	// ErrFormat reports a file that is not valid GGUF: a bad magic number,
	// truncated data, counts, lengths or offsets that do not fit the file,
	// unknown type codes, duplicate names or metadata of an unexpected type.
	ErrFormat = errors.New("invalid GGUF")
	// ErrUnsupported reports a valid feature this package does not handle:
	// GGUF version 1 or a version newer than 3, big-endian files, or
	// dequantising a tensor type other than F32, F16, BF16 and Q8_0.
	ErrUnsupported = errors.New("unsupported GGUF feature")
	// ErrNotFound reports a metadata key or tensor name that the file lacks.
	ErrNotFound = errors.New("not found")
)

const (
	// ggufMagic is "GGUF" read as a little-endian uint32.
	ggufMagic = 0x46554747
	// DefaultAlignment is the alignment of the tensor data section and of
	// every tensor in it when the file has no general.alignment key.
	DefaultAlignment = 32
	// MaxArrayDepth is the deepest nesting of metadata arrays that the
	// reader accepts: an array of arrays has depth 2. Deeper files are
	// rejected with ErrFormat so that recursion stays bounded.
	MaxArrayDepth = 8
	// MaxDims is the largest number of dimensions a tensor may have, as in
	// ggml (GGML_MAX_DIMS).
	MaxDims = 4
)

// File is an opened GGUF file: its metadata and tensor directory, held in
// memory, and a reader for the tensor data, which is read on demand. A File
// is safe for concurrent use once opened if its [io.ReaderAt] is (an
// [*os.File] is).
type File struct {
	r      io.ReaderAt
	closer io.Closer
	size   int64

	version    uint32
	alignment  int64
	dataOffset int64

	keys    []string
	values  map[string]Value
	tensors []TensorInfo
	byName  map[string]int
}

// Open opens the GGUF file at path and parses its header, metadata and tensor
// directory. The file stays open for tensor reads until [File.Close].
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := read(fh, st.Size())
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	f.closer = fh
	return f, nil
}

// Read parses a GGUF file of size bytes read through r. Tensor data is not
// read until asked for, so r must stay usable for as long as the File is.
func Read(r io.ReaderAt, size int64) (*File, error) {
	if r == nil {
		return nil, errors.New("gguf: Read: nil io.ReaderAt; want a reader of the GGUF file")
	}
	f, err := read(r, size)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	return f, nil
}

// read is Read with errors that lack the package prefix.
func read(r io.ReaderAt, size int64) (*File, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: negative size %d", ErrFormat, size)
	}
	d := &decoder{
		br:   bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 64<<10),
		size: size,
	}
	f := &File{r: r, size: size}
	if err := f.parse(d); err != nil {
		var re *readError
		if errors.As(err, &re) {
			// Not the file's fault: report the I/O error alone.
			return nil, fmt.Errorf("reading GGUF header at byte %d: %w", d.pos, re.err)
		}
		return nil, err
	}
	return f, nil
}

// Close closes the underlying file if the File came from [Open]; otherwise it
// does nothing. Tensor reads fail after Close.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	c := f.closer
	f.closer = nil
	return c.Close()
}

// Version returns the GGUF version of the file (2 or 3).
func (f *File) Version() uint32 { return f.version }

// Alignment returns the alignment in bytes of the tensor data section and of
// each tensor in it: general.alignment, or [DefaultAlignment].
func (f *File) Alignment() int64 { return f.alignment }

// DataOffset returns the file offset at which the tensor data section starts.
func (f *File) DataOffset() int64 { return f.dataOffset }

// Size returns the size of the file in bytes, as given to [Read].
func (f *File) Size() int64 { return f.size }

func (f *File) parse(d *decoder) error {
	magic, err := d.u32()
	if err != nil {
		return fmt.Errorf("%w: reading magic: %w", ErrFormat, err)
	}
	if magic != ggufMagic {
		return fmt.Errorf("%w: bad magic %#08x (not a GGUF file)", ErrFormat, magic)
	}
	version, err := d.u32()
	if err != nil {
		return fmt.Errorf("%w: reading version: %w", ErrFormat, err)
	}
	switch {
	case version == 2 || version == 3:
	case bits.ReverseBytes32(version) == 2 || bits.ReverseBytes32(version) == 3:
		return fmt.Errorf("%w: big-endian GGUF (version %d)", ErrUnsupported, bits.ReverseBytes32(version))
	default:
		return fmt.Errorf("%w: GGUF version %d (want 2 or 3)", ErrUnsupported, version)
	}
	f.version = version

	nTensors, err := d.u64()
	if err != nil {
		return fmt.Errorf("%w: reading tensor count: %w", ErrFormat, err)
	}
	nKV, err := d.u64()
	if err != nil {
		return fmt.Errorf("%w: reading metadata count: %w", ErrFormat, err)
	}
	// Each metadata pair takes at least 13 bytes (key length, value type, a
	// one-byte value); each tensor info at least 24 (name length, n_dims,
	// type, offset). Check both counts against the bytes left before
	// allocating anything for them.
	const minKV, minTensor = 8 + 4 + 1, 8 + 4 + 4 + 8
	if nKV > uint64(d.remaining())/minKV {
		return fmt.Errorf("%w: %d metadata pairs cannot fit in %d bytes", ErrFormat, nKV, d.remaining())
	}
	if nTensors > uint64(d.remaining())/minTensor {
		return fmt.Errorf("%w: %d tensors cannot fit in %d bytes", ErrFormat, nTensors, d.remaining())
	}
	if nKV > (uint64(d.remaining())-nTensors*minTensor)/minKV {
		return fmt.Errorf("%w: %d metadata pairs and %d tensors cannot fit in %d bytes", ErrFormat, nKV, nTensors, d.remaining())
	}

	// Capacities are capped: the counts are only known to fit the size the
	// caller gave, and the reader may hold fewer bytes than that.
	f.keys = make([]string, 0, min(nKV, prealloc))
	f.values = make(map[string]Value, min(nKV, prealloc))
	for i := uint64(0); i < nKV; i++ {
		key, err := d.str()
		if err != nil {
			return fmt.Errorf("%w: metadata pair %d: key: %w", ErrFormat, i, err)
		}
		if _, dup := f.values[key]; dup {
			return fmt.Errorf("%w: duplicate metadata key %q", ErrFormat, key)
		}
		t, err := d.u32()
		if err != nil {
			return fmt.Errorf("%w: metadata %q: type: %w", ErrFormat, key, err)
		}
		v, err := d.value(ValueType(t), 0)
		if err != nil {
			return fmt.Errorf("%w: metadata %q: %w", ErrFormat, key, err)
		}
		f.keys = append(f.keys, key)
		f.values[key] = v
	}

	f.alignment = DefaultAlignment
	if v, ok := f.values["general.alignment"]; ok {
		a, ok := v.uint64()
		if !ok || a == 0 || a > math.MaxUint32 || a&(a-1) != 0 {
			return fmt.Errorf("%w: general.alignment %v is not a power of two of type uint32", ErrFormat, v)
		}
		f.alignment = int64(a)
	}

	f.tensors = make([]TensorInfo, 0, min(nTensors, prealloc))
	f.byName = make(map[string]int, min(nTensors, prealloc))
	for i := uint64(0); i < nTensors; i++ {
		t, err := d.tensorInfo()
		if err != nil {
			return fmt.Errorf("%w: tensor %d: %w", ErrFormat, i, err)
		}
		if _, dup := f.byName[t.Name]; dup {
			return fmt.Errorf("%w: duplicate tensor %q", ErrFormat, t.Name)
		}
		f.byName[t.Name] = len(f.tensors)
		f.tensors = append(f.tensors, t)
	}

	// The data section starts at the next multiple of the alignment. pos is
	// at most size, and alignment at most 2^32, so this cannot overflow.
	f.dataOffset = (d.pos + f.alignment - 1) / f.alignment * f.alignment
	for i := range f.tensors {
		t := &f.tensors[i]
		rel := uint64(t.Offset) // still relative to the data section here
		if rel%uint64(f.alignment) != 0 {
			return fmt.Errorf("%w: tensor %q: offset %d is not a multiple of the alignment %d", ErrFormat, t.Name, rel, f.alignment)
		}
		room := f.size - f.dataOffset // may be negative if the file ends early
		if room < 0 || rel > uint64(room) || uint64(t.size) > uint64(room)-rel {
			return fmt.Errorf("%w: tensor %q: %d bytes at data offset %d run past the end of the file (%d bytes of data)",
				ErrFormat, t.Name, t.size, rel, max(room, 0))
		}
		t.Offset = f.dataOffset + int64(rel)
	}
	// No two tensors may share bytes (as in llama.cpp, whose tensors lie
	// one after another): a tensor's data is then read once, and what
	// reading every tensor allocates is bounded by the file's size.
	order := make([]int, 0, len(f.tensors))
	for i := range f.tensors {
		if f.tensors[i].size > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(i, j int) int { return cmp.Compare(f.tensors[i].Offset, f.tensors[j].Offset) })
	for k := 1; k < len(order); k++ {
		a, b := &f.tensors[order[k-1]], &f.tensors[order[k]]
		if a.Offset+a.size > b.Offset {
			return fmt.Errorf("%w: tensor %q (%d bytes at data offset %d) overlaps tensor %q at data offset %d; want tensors that share no bytes",
				ErrFormat, a.Name, a.size, a.Offset-f.dataOffset, b.Name, b.Offset-f.dataOffset)
		}
	}
	return nil
}

// decoder reads the GGUF header sequentially and knows how many bytes of
// the file are left, so that every length can be checked before allocating.
type decoder struct {
	br      *bufio.Reader
	pos     int64
	size    int64
	scratch [8]byte
}

// errTruncated reports a read past the end of the file.
var errTruncated = errors.New("unexpected end of file")

func (d *decoder) remaining() int64 { return d.size - d.pos }

func (d *decoder) fixed(n int) ([]byte, error) {
	if int64(n) > d.remaining() {
		return nil, errTruncated
	}
	b := d.scratch[:n]
	if _, err := io.ReadFull(d.br, b); err != nil {
		return nil, readErr(err)
	}
	d.pos += int64(n)
	return b, nil
}

// readError is an I/O error of the underlying reader, as opposed to a
// problem with the file's contents.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

func readErr(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return &readError{err}
}

// prealloc caps allocations sized from counts in the file before the
// corresponding bytes have been read.
const prealloc = 1 << 12

func (d *decoder) u8() (uint8, error) {
	b, err := d.fixed(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

func (d *decoder) u16() (uint16, error) {
	b, err := d.fixed(2)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint16(b), nil
}

func (d *decoder) u32() (uint32, error) {
	b, err := d.fixed(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64() (uint64, error) {
	b, err := d.fixed(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a GGUF string: a uint64 length and that many bytes.
func (d *decoder) str() (string, error) {
	n, err := d.u64()
	if err != nil {
		return "", err
	}
	if n > uint64(d.remaining()) {
		return "", fmt.Errorf("string of %d bytes with %d bytes left: %w", n, d.remaining(), errTruncated)
	}
	var b []byte
	if n <= prealloc {
		b = make([]byte, n)
		if _, err := io.ReadFull(d.br, b); err != nil {
			return "", readErr(err)
		}
	} else {
		// Long strings grow as their bytes arrive.
		if b, err = io.ReadAll(io.LimitReader(d.br, int64(n))); err != nil {
			return "", readErr(err)
		}
		if uint64(len(b)) != n {
			return "", readErr(io.ErrUnexpectedEOF)
		}
	}
	d.pos += int64(n)
	return string(b), nil
}

// value reads one metadata value of type t; depth is the number of arrays
// that enclose it.
func (d *decoder) value(t ValueType, depth int) (Value, error) {
	var x any
	var err error
	switch t {
	case ValueUint8:
		x, err = d.u8()
	case ValueInt8:
		var u uint8
		u, err = d.u8()
		x = int8(u)
	case ValueUint16:
		x, err = d.u16()
	case ValueInt16:
		var u uint16
		u, err = d.u16()
		x = int16(u)
	case ValueUint32:
		x, err = d.u32()
	case ValueInt32:
		var u uint32
		u, err = d.u32()
		x = int32(u)
	case ValueFloat32:
		var u uint32
		u, err = d.u32()
		x = math.Float32frombits(u)
	case ValueBool:
		x, err = d.boolean()
	case ValueString:
		x, err = d.str()
	case ValueUint64:
		x, err = d.u64()
	case ValueInt64:
		var u uint64
		u, err = d.u64()
		x = int64(u)
	case ValueFloat64:
		var u uint64
		u, err = d.u64()
		x = math.Float64frombits(u)
	case ValueArray:
		return d.array(depth + 1)
	default:
		return Value{}, fmt.Errorf("unknown value type %d", uint32(t))
	}
	if err != nil {
		return Value{}, err
	}
	return Value{typ: t, x: x}, nil
}

func (d *decoder) boolean() (bool, error) {
	b, err := d.u8()
	if err != nil {
		return false, err
	}
	if b > 1 {
		return false, fmt.Errorf("bool byte %d (want 0 or 1)", b)
	}
	return b == 1, nil
}

// array reads an array value (element type, count, elements) nested at the
// given depth.
func (d *decoder) array(depth int) (Value, error) {
	if depth > MaxArrayDepth {
		return Value{}, fmt.Errorf("arrays nested deeper than %d", MaxArrayDepth)
	}
	et, err := d.u32()
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	minSize := elem.minSize()
	if minSize == 0 {
		return Value{}, fmt.Errorf("array of unknown value type %d", et)
	}
	n, err := d.u64()
	if err != nil {
		return Value{}, err
	}
	if n > uint64(d.remaining())/uint64(minSize) {
		return Value{}, fmt.Errorf("array of %d %v needs at least %d bytes per element, %d bytes left: %w",
			n, elem, minSize, d.remaining(), errTruncated)
	}
	v := Value{typ: ValueArray, elem: elem}
	switch elem {
	case ValueUint8:
		v.x, err = readSlice(n, d.u8)
	case ValueInt8:
		v.x, err = readSlice(n, func() (int8, error) { u, err := d.u8(); return int8(u), err })
	case ValueUint16:
		v.x, err = readSlice(n, d.u16)
	case ValueInt16:
		v.x, err = readSlice(n, func() (int16, error) { u, err := d.u16(); return int16(u), err })
	case ValueUint32:
		v.x, err = readSlice(n, d.u32)
	case ValueInt32:
		v.x, err = readSlice(n, func() (int32, error) { u, err := d.u32(); return int32(u), err })
	case ValueFloat32:
		v.x, err = readSlice(n, func() (float32, error) { u, err := d.u32(); return math.Float32frombits(u), err })
	case ValueBool:
		v.x, err = readSlice(n, d.boolean)
	case ValueString:
		v.x, err = readSlice(n, d.str)
	case ValueUint64:
		v.x, err = readSlice(n, d.u64)
	case ValueInt64:
		v.x, err = readSlice(n, func() (int64, error) { u, err := d.u64(); return int64(u), err })
	case ValueFloat64:
		v.x, err = readSlice(n, func() (float64, error) { u, err := d.u64(); return math.Float64frombits(u), err })
	case ValueArray:
		v.x, err = readSlice(n, func() (Value, error) { return d.array(depth + 1) })
	}
	if err != nil {
		return Value{}, err
	}
	return v, nil
}

// readSlice reads n elements with next. The caller has checked n against the
// bytes left in the file; the slice still grows as elements arrive, so that
// a reader holding fewer bytes than its stated size cannot force a large
// allocation.
func readSlice[T any](n uint64, next func() (T, error)) ([]T, error) {
	s := make([]T, 0, min(n, prealloc))
	for range n {
		x, err := next()
		if err != nil {
			return nil, err
		}
		s = append(s, x)
	}
	return s, nil
}

// tensorInfo reads one tensor directory entry. Its Offset is left relative
// to the data section; parse makes it absolute once the section is known.
func (d *decoder) tensorInfo() (TensorInfo, error) {
	name, err := d.str()
	if err != nil {
		return TensorInfo{}, fmt.Errorf("name: %w", err)
	}
	nDims, err := d.u32()
	if err != nil {
		return TensorInfo{}, fmt.Errorf("%q: n_dims: %w", name, err)
	}
	if nDims > MaxDims {
		return TensorInfo{}, fmt.Errorf("%q: %d dimensions (at most %d)", name, nDims, MaxDims)
	}
	dims := make([]int, nDims)
	n := uint64(1)
	overflow := false
	for i := range dims {
		dim, err := d.u64()
		if err != nil {
			return TensorInfo{}, fmt.Errorf("%q: dimension %d: %w", name, i, err)
		}
		if dim > math.MaxInt64 || dim > math.MaxInt {
			return TensorInfo{}, fmt.Errorf("%q: dimension %d is %d", name, i, dim)
		}
		dims[i] = int(dim)
		hi, lo := bits.Mul64(n, dim)
		overflow = overflow || hi != 0
		n = lo
	}
	typ, err := d.u32()
	if err != nil {
		return TensorInfo{}, fmt.Errorf("%q: type: %w", name, err)
	}
	off, err := d.u64()
	if err != nil {
		return TensorInfo{}, fmt.Errorf("%q: offset: %w", name, err)
	}
	t := TensorType(typ)
	block, typeSize := t.BlockSize(), t.TypeSize()
	if block == 0 {
		return TensorInfo{}, fmt.Errorf("%q: unknown tensor type %d", name, typ)
	}
	if slices.Contains(dims, 0) {
		overflow, n = false, 0 // an empty tensor, whatever the other dimensions
	}
	if overflow || n > math.MaxInt64 || n > math.MaxInt {
		return TensorInfo{}, fmt.Errorf("%q: element count of %v overflows", name, dims)
	}
	if (len(dims) > 0 && dims[0]%block != 0) || n%uint64(block) != 0 {
		return TensorInfo{}, fmt.Errorf("%q: rows of %v are not a whole number of %v blocks of %d", name, dims, t, block)
	}
	hi, size := bits.Mul64(n/uint64(block), uint64(typeSize))
	if hi != 0 || size > math.MaxInt64 {
		return TensorInfo{}, fmt.Errorf("%q: byte size of %v %v overflows", name, dims, t)
	}
	if off > math.MaxInt64 {
		return TensorInfo{}, fmt.Errorf("%q: offset %d overflows", name, off)
	}
	return TensorInfo{Name: name, Type: t, Dims: dims, Offset: int64(off), n: int(n), size: int64(size)}, nil
}
