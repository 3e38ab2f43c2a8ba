package gguf

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNilReader checks that Read returns an error for a nil reader instead
// of panicking.
func TestNilReader(t *testing.T) {
	require.NotPanics(t, func() {
		f, err := Read(nil, 100)
		assert.Nil(t, f)
		assert.ErrorContains(t, err, "nil")
	})
}

// prefixWord matches a word that ends an error prefix, as in "gguf: ".
var prefixWord = regexp.MustCompile(`\b(\w+): `)

// repeatsPrefix reports whether msg has a prefix twice in a row, with at
// most one word between, as in "gguf: gguf:" or "gguf: tensor "t" gguf:".
func repeatsPrefix(msg string) bool {
	m := prefixWord.FindAllStringSubmatchIndex(msg, -1)
	for i := 1; i < len(m); i++ {
		prev, cur := msg[m[i-1][2]:m[i-1][3]], msg[m[i][2]:m[i][3]]
		between := msg[m[i-1][1]:m[i][0]]
		if prev == cur && strings.Count(between, " ") <= 1 {
			return true
		}
	}
	return false
}

// assertPrefixedOnce checks that err names the package once, at its start
// (after a file name for Open), and repeats no other prefix. (The test
// files are not named *.gguf, whose "gguf: " would count.)
func assertPrefixedOnce(t *testing.T, err error, what string) {
	t.Helper()
	if !assert.Error(t, err, what) {
		return
	}
	msg := err.Error()
	assert.Equal(t, 1, strings.Count(msg, "gguf:"), "%s: %q names the package more than once", what, msg)
	assert.True(t, strings.HasPrefix(msg, "gguf: "), "%s: %q does not start with the package", what, msg)
	assert.False(t, repeatsPrefix(msg), "%s: %q repeats a prefix", what, msg)
}

// TestErrorsNamePackageOnce collects the errors of the reader, the metadata
// getters and the tensor reads, and checks that each names the package
// once (package model's test of the same name covers the layers above).
func TestErrorsNamePackageOnce(t *testing.T) {
	errs := map[string]error{}
	add := func(name string, err error) { errs[name] = err }

	// The reader.
	add("Read nil", errOf(Read(nil, 1)))
	add("Read negative size", errOf(Read(bytes.NewReader(nil), -1)))
	add("Read bad magic", errOf(Read(bytes.NewReader([]byte("GGUX\x03\x00\x00\x00")), 8)))
	data := sampleFile()
	add("Read failing reader", errOf(Read(errReaderAt{data, 40}, int64(len(data)))))
	add("Open missing", errOf(Open(filepath.Join(t.TempDir(), "missing.bin"))))
	bad := filepath.Join(t.TempDir(), "bad.bin")
	require.NoError(t, os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00"), 0o644))
	add("Open bad", errOf(Open(bad)))
	for name, c := range brokenFiles() {
		add("broken "+name, errOf(readBytes(c.data)))
	}

	// Metadata and tensors.
	f := mustRead(t, data)
	add("String missing", errOf(f.String("nope")))
	add("Int string", errOf(f.Int("t.string")))
	add("StringArray int", errOf(f.StringArray("t.u8")))
	add("Float32s missing", errOf(f.Float32s("nope")))
	add("Float32s Q4_K", errOf(f.Float32s("q4k.weight")))
	add("RawData missing", errOf(f.RawData("nope")))

	for name, err := range errs {
		assertPrefixedOnce(t, err, name)
	}
	// The sentinels still match through the rewording.
	assert.ErrorIs(t, errs["Open bad"], ErrFormat)
}

// errOf returns the error of a two-result call.
func errOf[T any](_ T, err error) error { return err }

// allocated returns the bytes that f allocates (all goroutines', so the
// callers run nothing else meanwhile).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestLyingSizeTensorRead reads a tensor that the size given to Read
// covers but the reader does not hold: Float32s and RawData fail before
// allocating the tensor's size.
func TestLyingSizeTensorRead(t *testing.T) {
	const n = 1 << 26 // 256 MiB of F32
	data := oneTensor("t", []uint64{n}, uint32(TypeF32), 0, 64)
	f, err := Read(bytes.NewReader(data), int64(len(data))+4*n)
	require.NoError(t, err, "the tensor fits the size Read was given")
	for name, read := range map[string]func() error{
		"Float32s": func() error { _, err := f.Float32s("t"); return err },
		"RawData":  func() error { _, err := f.RawData("t"); return err },
	} {
		var err error
		mem := allocated(func() { err = read() })
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, name)
		assert.Less(t, mem, uint64(1<<20), "%s allocated %d bytes for a tensor the reader does not hold", name, mem)
	}
}
