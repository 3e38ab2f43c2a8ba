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

	"github.com/flashgo/flashgo/kernel"
)

func TestSummarizeMedian(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range xs {
			ds = append(ds, time.Duration(x)*time.Millisecond)
		}
		return ds
	}
	assert.Equal(t, 3*time.Millisecond, summarize(ms(5, 1, 3)).median)
	assert.Equal(t, 3*time.Millisecond, summarize(ms(4, 2)).median, "two runs: the mean, not the max")
	two := summarize(ms(4, 2))
	assert.Equal(t, 2*time.Millisecond, two.min)
	assert.Equal(t, 4*time.Millisecond, two.max)
	assert.Equal(t, 25*time.Millisecond/10, summarize(ms(1, 2, 3, 4)).median)
}

// TestProgressStopRace runs the ticker and stops the bar twice; under -race
// it checks that stop and the ticker do not race, and that nothing is drawn
// after stop.
func TestProgressStopRace(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf, begin: time.Now().Add(-showAfter), quit: make(chan struct{})}
	go p.tickle(p.quit)
	p.setTotal(1)
	time.Sleep(2 * redrawEvery)
	p.stop()
	p.stop()
	n := buf.Len()
	assert.True(t, strings.HasSuffix(buf.String(), "\r\x1b[K"))
	p.phase("after")
	time.Sleep(2 * redrawEvery)
	p.mu.Lock()
	defer p.mu.Unlock()
	assert.Equal(t, n, buf.Len(), "nothing drawn after stop")
}

func TestCheckDedupesKernels(t *testing.T) {
	impl := kernel.Implementations()[0]
	var stdout, stderr bytes.Buffer
	code := run([]string{"check", "-short", "-kernel", impl + "," + impl}, &stdout, &stderr)
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
	assert.Equal(t, 1, strings.Count(stdout.String(), impl+": 180 cases, 0 failed"), stdout.String())
}

func TestRunBadOutputDir(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, args := range [][]string{
		{"-shape", "P2", "-sweep", "128", "-plot", filepath.Join(missing, "x.svg")},
		{"-cpuprofile", filepath.Join(missing, "cpu.out")},
	} {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		assert.Equal(t, 2, code, "stderr: %s", stderr.String())
		assert.Contains(t, stderr.String(), "missing")
		assert.Empty(t, stdout.String())
	}
}

// TestRunUnwritableOutput checks that an output path that exists but
// cannot be written (a directory, a read-only directory's entry) fails
// before the run, with status 2, rather than after the sweep.
func TestRunUnwritableOutput(t *testing.T) {
	dir := t.TempDir()
	isDir := filepath.Join(dir, "taken.svg")
	require.NoError(t, os.Mkdir(isDir, 0o755))
	cases := [][]string{
		{"-shape", "P2", "-sweep", "16", "-plot", isDir},
		{"-cpuprofile", isDir},
	}
	if os.Geteuid() != 0 { // root writes through permissions
		ro := filepath.Join(dir, "ro")
		require.NoError(t, os.Mkdir(ro, 0o555))
		cases = append(cases, []string{"-shape", "P2", "-sweep", "16", "-plot", filepath.Join(ro, "x.svg")})
	}
	for _, args := range cases {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		assert.Equal(t, 2, code, "%v: stderr: %s", args, stderr.String())
		assert.Contains(t, stderr.String(), "may not be written", "%v", args)
		assert.Empty(t, stdout.String(), "%v", args)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, len(cases)-1, "the check leaves no file behind")
}

func TestThreadPeak(t *testing.T) {
	m := machine{peak: 10, bf16Peak: 30, cpus: 2}
	assert.Equal(t, 10.0, m.threadPeak(m.peak, 1))
	assert.Equal(t, 20.0, m.threadPeak(m.peak, 2))
	assert.Equal(t, 20.0, m.threadPeak(m.peak, 8), "no more cores than the machine has")
	assert.Equal(t, 60.0, m.threadPeak(m.bf16Peak, 8))
	assert.Equal(t, 0.0, machine{cpus: 2}.threadPeak(0, 2), "no bf16 product unit: no peak")
}

func TestNaiveMarked(t *testing.T) {
	assert.False(t, naiveMarked(result{}, 3))
	assert.True(t, naiveMarked(result{naive: &timing{n: 2}}, 3))
	assert.False(t, naiveMarked(result{naive: &timing{n: 3}}, 3))
	assert.False(t, naiveMarked(result{naive: &timing{n: 1}}, 1))
	assert.True(t, naiveMarked(result{naive: &timing{n: 1, cold: true}}, 1), "a cold single run under -reps 1")
}

// TestErrorsPrefixedOnce checks that failing command lines name each
// prefix ("attnbench", "model") at most once a line (never "model: model:
// context overflow").
func TestErrorsPrefixedOnce(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	require.NoError(t, os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00"), 0o644))
	for _, args := range [][]string{
		{"-shape", "X"},
		{"-kv", "q9"},
		{"-shape", "P2", "-sweep", "16", "-plot", filepath.Join(t.TempDir(), "missing", "x.svg")},
		{"check", "-kernel", "nope"},
		{"generate", "-model", bad},
		{"generate", "-model", filepath.Join(t.TempDir(), "missing.gguf")},
	} {
		var stdout, stderr bytes.Buffer
		assert.NotZero(t, run(args, &stdout, &stderr), "%v", args)
		for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
			for _, prefix := range []string{"attnbench", "model:"} {
				assert.LessOrEqual(t, strings.Count(line, prefix), 1, "%v: %q", args, line)
			}
		}
	}
}
