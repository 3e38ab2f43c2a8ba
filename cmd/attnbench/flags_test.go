package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
)

func TestParseDefaults(t *testing.T) {
	c, err := parse(nil, &bytes.Buffer{})
	require.NoError(t, err)
	var names []string
	for _, s := range c.shapes {
		names = append(names, s.name)
	}
	assert.Equal(t, []string{"P1", "P2", "P3/2", "D1", "D2"}, names)
	p3 := c.shapes[2]
	assert.Equal(t, 2048, p3.nq)
	assert.Equal(t, 2048, p3.nkv)
	assert.Equal(t, 2, p3.scaled)
	assert.Equal(t, []attention.DType{attention.F32, attention.F16}, c.kv)
	assert.Equal(t, []attention.DType{attention.F32, attention.F16}, c.kvFor(p3), "prefill: no q8 by default")
	assert.Equal(t, []attention.DType{attention.F32, attention.F16, attention.Q8}, c.kvFor(c.shapes[3]), "decode: q8 too")
	assert.False(t, c.warm)
	want := []int{1}
	if n := runtime.GOMAXPROCS(0); n > 1 {
		want = append(want, n)
	}
	assert.Equal(t, want, c.threads)
	assert.Equal(t, 5, c.reps)
	assert.True(t, c.naive)
	assert.True(t, c.check)
	assert.Equal(t, "table", c.format)
	assert.Nil(t, c.sweep)
}

func TestParseGood(t *testing.T) {
	tests := []struct {
		args  []string
		check func(t *testing.T, c config)
	}{
		{[]string{"-shape", "custom", "-batch", "2", "-heads", "6", "-kv-heads", "3", "-dim", "40", "-nq", "7", "-nkv", "9", "-causal=false"}, func(t *testing.T, c config) {
			require.Len(t, c.shapes, 1)
			s := c.shapes[0]
			assert.Equal(t, shape{name: "custom", batch: 2, heads: 6, kvHeads: 3, dim: 40, nq: 7, nkv: 9, scaled: 1}, s)
		}},
		{[]string{"-shape", "p1, d2/4", "-kv", "bf16,f32,bf16", "-threads", "2,max,1", "-reps", "3"}, func(t *testing.T, c config) {
			require.Len(t, c.shapes, 2)
			assert.Equal(t, "P1", c.shapes[0].name)
			assert.Equal(t, "D2/4", c.shapes[1].name)
			assert.Equal(t, 1, c.shapes[1].nq)
			assert.Equal(t, 8192, c.shapes[1].nkv)
			assert.Equal(t, []attention.DType{attention.BF16, attention.F32}, c.kv)
			assert.Equal(t, 2, c.threads[0])
			assert.Contains(t, c.threads, 1)
			assert.Equal(t, 3, c.reps)
		}},
		{[]string{"-mode", "decode"}, func(t *testing.T, c config) {
			require.Len(t, c.shapes, 2)
			assert.Equal(t, "D1", c.shapes[0].name)
			assert.Equal(t, "D2", c.shapes[1].name)
		}},
		{[]string{"-mode", "prefill", "-shape", "full"}, func(t *testing.T, c config) {
			require.Len(t, c.shapes, 3)
			assert.Equal(t, "P3", c.shapes[2].name)
			assert.Equal(t, 4096, c.shapes[2].nq)
		}},
		{[]string{"-shape", "P3/2", "-sweep", "64,128", "-plot", "x.svg", "-naive=off", "-check", "off", "-format", "JSON"}, func(t *testing.T, c config) {
			require.Len(t, c.shapes, 2)
			for i, n := range []int{64, 128} {
				s := c.shapes[i]
				assert.Equal(t, "P3", s.name)
				assert.True(t, s.swept)
				assert.Equal(t, n, s.nq)
				assert.Equal(t, n, s.nkv)
			}
			assert.Equal(t, "x.svg", c.plot)
			assert.False(t, c.naive)
			assert.False(t, c.check)
			assert.Equal(t, "json", c.format)
		}},
		{[]string{"-shape", "D1", "-sweep", "100,200"}, func(t *testing.T, c config) {
			require.Len(t, c.shapes, 2)
			assert.Equal(t, 1, c.shapes[0].nq)
			assert.Equal(t, 100, c.shapes[0].nkv)
		}},
		{[]string{"-shape", "D2", "-kv", "q8", "-precision", "f32,q8q", "-kvlayout", "BSHD"}, func(t *testing.T, c config) {
			assert.Equal(t, []attention.Precision{attention.PrecisionFloat32, precQ8Query}, c.precisions)
			assert.True(t, c.kvBSHD)
			var o attention.Options
			setPrecision(&o, precQ8Query)
			assert.True(t, o.QuantizeQuery)
			assert.Equal(t, attention.PrecisionFloat32, o.Precision)
			assert.True(t, runsWith(precQ8Query, attention.Q8))
			assert.False(t, runsWith(precQ8Query, attention.F16))
		}},
		{[]string{"-kernel", "generic", "-naive", "on", "-check=false"}, func(t *testing.T, c config) {
			assert.Equal(t, "generic", c.kernel)
			assert.True(t, c.naive)
			assert.False(t, c.check)
		}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c, err := parse(tt.args, &bytes.Buffer{})
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

// TestRunBadFlags checks that every bad command line exits 2 with a message
// naming the problem, before any work (and so within milliseconds, with
// nothing on stdout).
func TestRunBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-bogus"}, "-bogus"},
		{[]string{"-reps", "0"}, "-reps is 0"},
		{[]string{"-paged", "-1"}, "-paged is -1; want a block size >= 1, or 0"},
		{[]string{"-reps", "x"}, "-reps"},
		{[]string{"-kv", "f8"}, `-kv has "f8"`},
		{[]string{"-kv", ","}, `-kv is ",", which has an empty entry`},
		{[]string{"-kv", ""}, "-kv is empty"},
		{[]string{"-threads", "1,,2"}, `-threads is "1,,2", which has an empty entry`},
		{[]string{"-threads", "1,"}, `-threads is "1,", which has an empty entry`},
		{[]string{"-shape", "P1,,P2"}, `-shape is "P1,,P2", which has an empty entry`},
		{[]string{"-precision", "f32,"}, `-precision is "f32,", which has an empty entry`},
		{[]string{"-sweep", ",128"}, `-sweep is ",128", which has an empty entry`},
		{[]string{"-precision", "q8q", "-kv", "f16", "-shape", "P2"}, "-precision q8q quantises the queries against Q8 keys, and no case here has them (K/V f16)"},
		{[]string{"-precision", "q8q", "-shape", "P2"}, "no case here has them (K/V f32, f16)"},
		{[]string{"-threads", "0"}, `-threads has "0"`},
		{[]string{"-threads", "two"}, `-threads has "two"`},
		{[]string{"-format", "xml"}, `-format is "xml"`},
		{[]string{"-mode", "train"}, `-mode is "train"`},
		{[]string{"-mode", "decode", "-shape", "P1"}, "leaves none of the shapes"},
		{[]string{"-shape", "P9"}, `unknown shape "P9"`},
		{[]string{"-shape", "P3/3"}, "not divisible by 3"},
		{[]string{"-shape", "P3/x"}, "divisor"},
		{[]string{"-shape", ""}, "-shape is empty"},
		{[]string{"-nq", "5"}, "-nq describes a custom shape"},
		{[]string{"-causal=false", "-shape", "P2"}, "-causal describes a custom shape"},
		{[]string{"-shape", "custom", "-heads", "6", "-kv-heads", "4"}, "-heads 6 is not a multiple of -kv-heads 4"},
		{[]string{"-shape", "custom", "-dim", "0"}, "-dim is 0"},
		{[]string{"-shape", "custom", "-nq", "-3"}, "-nq is -3"},
		{[]string{"-shape", "custom", "-kv-heads", "0"}, "-kv-heads is 0"},
		{[]string{"-shape", "custom", "-batch", "-1"}, "-batch is -1"},
		{[]string{"-shape", "custom", "-nq", "1000000", "-nkv", "1000000"}, "needs about"},
		{[]string{"-shape", "custom", "-batch", "1000000000", "-heads", "1000000000", "-kv-heads", "1", "-nq", "1000000", "-dim", "1000000"}, "too many"},
		{[]string{"-sweep", "128,256"}, "-sweep runs one shape"},
		{[]string{"-shape", "P2", "-sweep", "128,0"}, `-sweep has "0"`},
		{[]string{"-shape", "P2", "-sweep", "128,128"}, "-sweep has 128 twice"},
		{[]string{"-plot", "x.svg"}, "-plot draws a sweep"},
		{[]string{"-shape", "P2", "-sweep", "128", "-plot", "x.pdf"}, "want a file name ending in .svg or .png"},
		{[]string{"-kernel", "sse9"}, `-kernel is "sse9"`},
		{[]string{"-naive=maybe"}, "want on or off"},
		{[]string{"-check", "perhaps"}, "want on or off"},
		{[]string{"-naive"}, "-naive"},
		{[]string{"P1"}, `unexpected argument "P1"`},
		{[]string{"check", "-kernel", "sse9"}, `-kernel has "sse9"`},
		{[]string{"check", "-bogus"}, "-bogus"},
		{[]string{"check", "extra"}, `unexpected argument "extra"`},
		{[]string{"-kvlayout", "sbhd"}, `-kvlayout is "sbhd"; want bhsd or bshd`},
		{[]string{"-kvlayout", "bshd", "-paged", "16"}, "-kvlayout bshd and -paged 16"},
		{[]string{"-precision", "q4"}, `-precision has "q4"; want f32, bf16 or q8q`},
		{[]string{"check", "-precision", "q8q"}, "-precision has q8q, which only the benchmark runs (with -kv q8); want f32 or bf16"},
		{[]string{"check", "-precision", "q4"}, `-precision has "q4"; want f32 or bf16`},
		{[]string{"generate", "-model", "m.gguf", "-precision", "q8q"}, "-precision has q8q, which only the benchmark runs (with -kv q8); want f32 or bf16"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			assert.Equal(t, 2, code, "stderr: %s", stderr.String())
			assert.Contains(t, stderr.String(), tt.want)
			assert.Empty(t, stdout.String())
		})
	}
}

func TestRunMemoryLimit(t *testing.T) {
	saved := availableMemory
	t.Cleanup(func() { availableMemory = saved })
	availableMemory = func() (float64, string) { return 1 << 20, "test cap" }
	var stdout, stderr bytes.Buffer
	code := run([]string{"-shape", "P1"}, &stdout, &stderr)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr.String(), "shape P1 needs about")
	assert.Contains(t, stderr.String(), "1.0 MiB is available (test cap)")
	assert.Empty(t, stdout.String())
}

func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"-h"}, &stdout, &stderr))
	for _, f := range []string{"-shape", "-batch", "-heads", "-kv-heads", "-dim", "-nq", "-nkv", "-causal", "-kv", "-threads",
		"-reps", "-mode", "-naive", "-check", "-format", "-sweep", "-plot", "-cpuprofile", "-kernel", "-preset", "-window", "-warm", "q8",
		"-shared-prefix",
		"attnbench check", "attnbench generate"} {
		assert.Contains(t, stdout.String(), f)
	}
	stdout.Reset()
	require.Equal(t, 0, run([]string{"check", "-h"}, &stdout, &stderr))
	assert.Contains(t, stdout.String(), "-short")
}

func TestLookupShape(t *testing.T) {
	s, err := lookupShape("p3/2")
	require.NoError(t, err)
	assert.Equal(t, "P3/2", s.name)
	assert.Equal(t, 2048, s.nq)
	assert.Equal(t, 4.0*32*2048*2048*128/2, s.flops())
	d, err := lookupShape("D2/4")
	require.NoError(t, err)
	assert.True(t, d.decode())
	assert.Equal(t, 8192, d.nkv)
	assert.Equal(t, 2.0*8*8192*128*2, d.kvBytes(attention.F16))
	_, err = lookupShape("D1/0")
	assert.Error(t, err)

	// One query row sees every key under the bottom-right causal mask: no halving.
	dec := shape{batch: 1, heads: 8, kvHeads: 2, dim: 64, nq: 1, nkv: 100, causal: true}
	assert.Equal(t, 4.0*8*100*64, dec.flops())
}

func TestSwapHS(t *testing.T) {
	// [b=2][h=3][s=2][d=2] numbered by position, then swapped and back.
	x := make([]float32, 2*3*2*2)
	for i := range x {
		x[i] = float32(i)
	}
	y := swapHS(x, 2, 3, 2, 2)
	// Element (b, h, s, c) lands at ((b·2+s)·3+h)·2+c.
	for b := range 2 {
		for h := range 3 {
			for s := range 2 {
				for c := range 2 {
					assert.Equal(t, x[((b*3+h)*2+s)*2+c], y[((b*2+s)*3+h)*2+c])
				}
			}
		}
	}
	assert.Equal(t, x, swapHS(y, 2, 2, 3, 2))
}

func TestNaiveQueries(t *testing.T) {
	q := make([]float32, 2*64)
	for i := range q {
		q[i] = float32(i%7) - 3.3
	}
	same, err := naiveQueries(attention.PrecisionFloat32, q, 64)
	require.NoError(t, err)
	assert.Equal(t, q, same)
	got, err := naiveQueries(precQ8Query, q, 64)
	require.NoError(t, err)
	data, scales := make([]int8, 32), make([]float32, 1)
	want := make([]float32, 32)
	for b := 0; b < len(q); b += 32 {
		require.NoError(t, attention.QuantizeQ8(data, scales, q[b:b+32]))
		require.NoError(t, attention.DequantizeQ8(want, data, scales))
		assert.Equal(t, want, got[b:b+32], "block at %d", b)
	}
	assert.NotEqual(t, q, got, "the queries were not rounded")
}

// TestSweepDescription: a swept decode shape is described without the
// suite's context length, which the sweep replaces (the plot's title is
// its description).
func TestSweepDescription(t *testing.T) {
	for _, name := range []string{"D1", "D2"} {
		s, err := lookupShape(name)
		require.NoError(t, err)
		d := s.withSeq(4096).describe()
		assert.NotContains(t, d, "context", "%s swept: %s", name, d)
		assert.Contains(t, d, "(decode)")
	}
	s, err := lookupShape("P3")
	require.NoError(t, err)
	assert.Contains(t, s.withSeq(512).describe(), "(long prefill)")
}
