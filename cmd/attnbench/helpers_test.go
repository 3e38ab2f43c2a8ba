package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention/reference"
)

// oracle runs the float64 oracle and narrows its output to float32.
func oracle(t *testing.T, p reference.Params, q, k, v []float32) []float32 {
	t.Helper()
	out, _, err := reference.Attention(p, reference.Float64s(q), reference.Float64s(k), reference.Float64s(v))
	require.NoError(t, err)
	o := make([]float32, len(out))
	for i, x := range out {
		o[i] = float32(x)
	}
	return o
}

func TestProgressOnlyOnFiles(t *testing.T) {
	assert.Nil(t, newProgress(&bytes.Buffer{}))
	var p *progress // a nil bar ignores everything
	p.setTotal(3)
	p.phase("x")
	p.beginCase(2)
	p.start("y", 2)
	p.tick()
	p.done()
	p.stop()
}

// TestProgressLines: on a file that is not a terminal (stderr sent to a
// log), a line per finished case, and nothing else.
func TestProgressLines(t *testing.T) {
	name := filepath.Join(t.TempDir(), "stderr")
	f, err := os.Create(name)
	require.NoError(t, err)
	defer f.Close()
	p := newProgress(f)
	require.NotNil(t, p)
	p.setTotal(2)
	p.phase("measuring the FMA peak")
	p.beginCase(1)
	p.start("shared prefix f16 f32, 1 thread", 3)
	p.tick()
	p.done()
	p.beginCase(1)
	p.start("shared prefix f16 bf16, 1 thread", 3)
	p.done()
	p.stop()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	require.Len(t, lines, 2, "%q", b)
	assert.Contains(t, lines[0], "1/2 done: shared prefix f16 f32, 1 thread")
	assert.Contains(t, lines[1], "2/2 done: shared prefix f16 bf16, 1 thread")
	assert.NotContains(t, string(b), "\r")
}

func TestProgressDraw(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf, begin: time.Now()}
	p.setTotal(2)
	p.beginCase(2)
	p.start("P1 f32 1T flashgo", 2)
	assert.Empty(t, buf.String(), "silent for the first seconds")
	p.begin = p.begin.Add(-showAfter) // pretend the run has been going for a while
	p.tick()
	assert.InDelta(t, 0.125, p.fraction(), 1e-9) // half of the first part of the first of two cases
	p.tick()
	p.start("P1 f32 1T naive", 4)
	assert.Contains(t, buf.String(), "0/2 P1 f32 1T naive")
	assert.Contains(t, buf.String(), " 25%")
	p.done()
	assert.Contains(t, buf.String(), " 50% 1/2")
	p.stop()
	assert.True(t, strings.HasSuffix(buf.String(), "\r\x1b[K"))
}

func TestWrap(t *testing.T) {
	got := wrap("aaa bbb ccc ddd", 9, "  ")
	assert.Equal(t, "aaa bbb\n  ccc ddd", got)
}
