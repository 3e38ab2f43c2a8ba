package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/internal/testmodel"
)

// storiesModel is the shared test model (README.md, "The test model").
var storiesModel = testmodel.Candidate()

func needStories(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(storiesModel); err != nil {
		t.Skipf("test model %s not available (%v); it lives outside the repository: set FLASHGO_MODEL to its path, or README.md (\"The test model\") says how to download it", storiesModel, err)
	}
}

func TestGenerateStories(t *testing.T) {
	needStories(t)
	var stdout, stderr bytes.Buffer
	code := run([]string{"generate", "-model", storiesModel, "-prompt", "Once upon a time", "-n", "20", "-threads", "1"}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	assert.True(t, strings.HasPrefix(stdout.String(), "Once upon a time, there was a little girl named Lily."), "stdout: %q", stdout.String())
	for _, want := range []string{"prefill: 5 tokens", "decode:  19 tokens", "tokens/s", "stop: length", "RoPE normal"} {
		assert.Contains(t, stderr.String(), want)
	}

	// Seeded sampling is reproducible; --double-dash flags work too.
	args := []string{"generate", "--model", storiesModel, "--prompt", "Lily", "-n", "20", "--temp", "0.9", "--top-k", "40", "--top-p", "0.95", "--seed", "5"}
	var a, b bytes.Buffer
	require.Equal(t, 0, run(args, &a, &stderr))
	require.Equal(t, 0, run(args, &b, &stderr))
	assert.Equal(t, a.String(), b.String())
	assert.True(t, strings.HasPrefix(a.String(), "Lily"))
}

func TestGenerateErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-model", "x.gguf", "-n", "-1"},
		{"-model", "x.gguf", "-temp", "-1"},
		{"-model", "x.gguf", "-top-p", "2"},
		{"-model", "x.gguf", "-threads", "-2"},
		{"-model", "x.gguf", "stray"},
		{"-bogus"},
	} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, run(append([]string{"generate"}, args...), &stdout, &stderr), "%v", args)
		assert.Contains(t, stderr.String(), "attnbench generate:")
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 1, run([]string{"generate", "-model", filepath.Join(t.TempDir(), "missing.gguf")}, &stdout, &stderr))
	assert.Equal(t, 0, run([]string{"generate", "-h"}, &stdout, &stderr))
	assert.Contains(t, stdout.String(), "usage: attnbench generate")
}

// TestGenerateFailure checks that a generation that fails prints its error
// and no rates (not "stop: length, 0 tokens/s").
func TestGenerateFailure(t *testing.T) {
	needStories(t)
	var stdout, stderr bytes.Buffer
	code := run([]string{"generate", "-model", storiesModel, "-ctx", "4", "-prompt", "Once upon a time, there was a girl", "-threads", "1"}, &stdout, &stderr)
	assert.Equal(t, 1, code, "stderr: %s", stderr.String())
	assert.Contains(t, stderr.String(), "attnbench generate: model: context overflow")
	for _, unwanted := range []string{"stop:", "tokens/s", "prefill:"} {
		assert.NotContains(t, stderr.String(), unwanted)
	}
	assert.Equal(t, 1, strings.Count(stderr.String(), "model:"), "stderr: %s", stderr.String())
}

// TestGenerateInterrupted checks that an interrupted generation still
// prints the rates, says it was interrupted rather than giving a stop
// reason it did not reach, and exits 1.
func TestGenerateInterrupted(t *testing.T) {
	needStories(t)
	old := generateContext
	t.Cleanup(func() { generateContext = old })
	generateContext = func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"generate", "-model", storiesModel, "-n", "5", "-threads", "1"}, &stdout, &stderr)
	assert.Equal(t, 1, code, "stderr: %s", stderr.String())
	assert.Contains(t, stderr.String(), "prefill:")
	assert.Contains(t, stderr.String(), "stop: interrupted")
	assert.NotContains(t, stderr.String(), "stop: length")
	assert.Contains(t, stderr.String(), "attnbench generate: interrupted")
}

// TestGenerateHostileContext runs generate with the default -ctx on
// stories260K whose llama.context_length claims 2^29 positions: the KV
// cache grows with the tokens instead of being allocated whole up front
// (64 GiB).
func TestGenerateHostileContext(t *testing.T) {
	needStories(t)
	data, err := os.ReadFile(storiesModel)
	require.NoError(t, err)
	// The pair is the key's length and bytes, the type code 4 (uint32) and
	// the value.
	key := "llama.context_length"
	at := bytes.Index(data, []byte(key))
	require.Positive(t, at, "the key is in the file")
	at += len(key)
	require.Equal(t, uint32(4), binary.LittleEndian.Uint32(data[at:]), "a uint32 value")
	binary.LittleEndian.PutUint32(data[at+4:], 1<<29)
	path := filepath.Join(t.TempDir(), "hostile.gguf")
	require.NoError(t, os.WriteFile(path, data, 0o644))

	var stdout, stderr bytes.Buffer
	var code int
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code = run([]string{"generate", "-model", path, "-n", "5", "-threads", "1"}, &stdout, &stderr)
	runtime.ReadMemStats(&after)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	assert.Contains(t, stderr.String(), "stop: length")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "bytes allocated")
}
