package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/model"
)

func TestParsePresetAndWindow(t *testing.T) {
	tests := []struct {
		args  []string
		check func(t *testing.T, c config)
	}{
		{[]string{"-preset", "llama-3-8b"}, func(t *testing.T, c config) {
			require.Len(t, c.shapes, 1, "without -shape only the presets run")
			assert.Equal(t, shape{name: "llama3-8b", what: "Llama 3 8B", batch: 1, heads: 32, kvHeads: 8, dim: 128, nq: 1024, nkv: 1024,
				causal: true, scaled: 1}, c.shapes[0])
		}},
		{[]string{"-preset", "gemma2-9b, Gemma 2 9B,stories260k", "-mode", "decode"}, func(t *testing.T, c config) {
			require.Len(t, c.shapes, 2, "repeats are dropped")
			g := c.shapes[0]
			assert.Equal(t, "gemma2-9b", g.name)
			assert.Equal(t, [3]int{16, 8, 256}, [3]int{g.heads, g.kvHeads, g.dim})
			assert.Equal(t, [2]int{1, 4096}, [2]int{g.nq, g.nkv}, "decode defaults")
			assert.Equal(t, 4096, g.window)
			assert.Equal(t, float32(50), g.softCap)
			assert.Equal(t, "stories260k", c.shapes[1].name)
			assert.Zero(t, c.shapes[1].window)
		}},
		{[]string{"-preset", "stories260k", "-batch", "2", "-nq", "64", "-nkv", "128", "-mode", "prefill"}, func(t *testing.T, c config) {
			require.Len(t, c.shapes, 1)
			s := c.shapes[0]
			assert.Equal(t, [6]int{2, 8, 4, 8, 64, 128}, [6]int{s.batch, s.heads, s.kvHeads, s.dim, s.nq, s.nkv})
		}},
		{[]string{"-shape", "P1,custom", "-heads", "4", "-kv-heads", "2", "-preset", "gpt2", "-window", "16"}, func(t *testing.T, c config) {
			require.Len(t, c.shapes, 3)
			assert.Equal(t, []string{"P1", "custom", "gpt2"}, shapeNames(c.shapes))
			assert.Equal(t, 4, c.shapes[1].heads, "-heads sizes the custom shape")
			for _, s := range c.shapes {
				assert.Equal(t, 16, s.window, s.name)
			}
		}},
		{[]string{"-preset", "mistral-7b", "-window", "8"}, func(t *testing.T, c config) {
			assert.Equal(t, 8, c.shapes[0].window, "-window overrides the preset's")
		}},
		{[]string{"-shape", "D1/64", "-window", "1", "-sweep", "100,200"}, func(t *testing.T, c config) {
			require.Len(t, c.shapes, 2)
			assert.Equal(t, 1, c.shapes[1].window, "a swept shape keeps its window")
			assert.Equal(t, 200, c.shapes[1].nkv)
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

func TestRunBadPresetAndWindow(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-preset", "llama9"}, `unknown preset "llama9"; want one of llama3-8b, llama3-70b,`},
		{[]string{"-preset", " , "}, "-preset is empty"},
		{[]string{"-preset", "gpt2", "-heads", "4"}, "-heads describes a custom shape"},
		{[]string{"-preset", "gpt2", "-causal=false"}, "-causal describes a custom shape"},
		{[]string{"-preset", "gpt2", "-mode", "decode", "-nq", "4"}, "leaves none of the shapes gpt2"},
		{[]string{"-window", "0"}, "-window is 0; want a window of >= 1 keys"},
		{[]string{"-window", "-3"}, "-window is -3"},
		{[]string{"-window", "x"}, "-window"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, 2, run(tt.args, &stdout, &stderr), "stderr: %s", stderr.String())
			assert.Contains(t, stderr.String(), tt.want)
			assert.Empty(t, stdout.String())
		})
	}
}

func TestHelpListsPresets(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"-h"}, &stdout, &stderr))
	for _, p := range model.Presets() {
		assert.Contains(t, stdout.String(), p.Name)
	}
	assert.Contains(t, stdout.String(), "window 4096 (even layers), soft-cap 50")
}

// TestVisiblePairs checks the exact FLOP count of a windowed shape against
// hand-computed counts and against the reference's visibility rule.
func TestVisiblePairs(t *testing.T) {
	// Nq 9, Nkv 12, window 5: diagonals i' = 3..11 see 4, 5, then 5 keys
	// each (7 rows): 44 pairs.
	assert.Equal(t, 44.0, visiblePairs(9, 12, 5))
	// Nq 6 > Nkv 4, window 2: i' = -2..3 see 0, 0, 1, 2, 2, 2 keys.
	assert.Equal(t, 7.0, visiblePairs(6, 4, 2))
	assert.Equal(t, 1.0, visiblePairs(1, 100, 1))
	assert.Equal(t, 100.0, visiblePairs(1, 100, 4096), "a window wider than the cache")
	s := shape{batch: 2, heads: 3, kvHeads: 1, dim: 8, nq: 9, nkv: 12, causal: true, window: 5}
	assert.Equal(t, 4.0*2*3*8*44, s.flops())
	assert.Equal(t, 2.0*2*1*12*8*4, s.kvBytes(attention.F32), "every key is seen by some query")
	d := shape{batch: 1, heads: 8, kvHeads: 4, dim: 8, nq: 1, nkv: 100, causal: true, window: 16}
	assert.Equal(t, 2.0*4*16*8*2, d.kvBytes(attention.F16), "a decode row reads only its window")

	for _, c := range [][3]int{{1, 1, 1}, {9, 12, 5}, {12, 9, 5}, {33, 47, 16}, {64, 64, 1}, {5, 200, 300}} {
		s := shape{batch: 1, heads: 1, kvHeads: 1, dim: 1, nq: c[0], nkv: c[1], causal: true, window: c[2]}
		p := s.params()
		n := 0
		for i := range s.nq {
			for j := range s.nkv {
				if p.Visible(i, j) {
					n++
				}
			}
		}
		assert.Equal(t, float64(n), visiblePairs(s.nq, s.nkv, s.window), "%v", c)
		assert.Equal(t, attention.Window{Left: c[2] - 1, Right: 0}, *s.options().Window)
	}
}

// TestSubProblemWindow checks that the oracle's sub-problem of a big
// windowed, soft-capped shape keeps the window and the soft-cap.
func TestSubProblemWindow(t *testing.T) {
	s := shape{batch: 1, heads: 16, kvHeads: 8, dim: 256, nq: 1024, nkv: 1024, causal: true, window: 100, softCap: 50}
	sub := pickSub(s)
	require.False(t, sub.full)
	p := sub.params(s)
	assert.True(t, p.Window)
	assert.Equal(t, [2]int{99, 0}, [2]int{p.WindowLeft, p.WindowRight})
	assert.Equal(t, 50.0, p.SoftCap)
	assert.Equal(t, 64, p.SeqQ)
}

func TestRunPreset(t *testing.T) {
	quick(t)
	var stdout, stderr bytes.Buffer
	args := []string{"-preset", "stories260k", "-nq", "33", "-nkv", "47", "-kv", "f32,f16", "-threads", "1", "-reps", "2"}
	require.Equal(t, 0, run(args, &stdout, &stderr), "stderr: %s", stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "stories260k (TinyStories 260K): Hq 8, Hkv 4, d 8, Nq 33, Nkv 47, causal\n")
	assert.Contains(t, out, "within the project's tolerance")
	rows := 0
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[0] == "stories260k" && f[1] == "33" {
			rows++
			assert.NotContains(t, l, "!")
		}
	}
	assert.Equal(t, 2, rows)
}

// TestRunWindowJSON runs a windowed prefill (a preset's shape) and a
// windowed decode shape, checked against the oracle and timed against the
// naive baseline with the same window, and reads the exact FLOP and byte
// counts back from the JSON.
func TestRunWindowJSON(t *testing.T) {
	quick(t)
	var stdout, stderr bytes.Buffer
	args := []string{"-shape", "D1/64", "-preset", "stories260k", "-nq", "9", "-nkv", "12", "-window", "5", "-kv", "f32",
		"-threads", "1", "-reps", "1", "-format", "json"}
	require.Equal(t, 0, run(args, &stdout, &stderr), "stderr: %s", stderr.String())
	var doc struct {
		Results []map[string]any `json:"results"`
		Notes   []string         `json:"notes"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &doc))
	require.Len(t, doc.Results, 2)
	dec, pre := doc.Results[0], doc.Results[1]
	assert.Equal(t, "D1/64", dec["shape"])
	assert.Equal(t, 5.0, dec["window"])
	assert.Equal(t, 4.0*32*128*5, dec["flops"], "one row sees the 5 keys of its window")
	assert.Equal(t, 2.0*8*5*128*4, dec["kv_bytes"])
	assert.Equal(t, "stories260k", pre["shape"])
	assert.Equal(t, 5.0, pre["window"])
	assert.Nil(t, pre["softcap"])
	assert.Equal(t, 4.0*8*8*44, pre["flops"], "44 visible pairs, as in TestVisiblePairs")
	for _, r := range doc.Results {
		assert.Equal(t, true, r["check"].(map[string]any)["pass"])
		assert.NotNil(t, r["naive"])
	}
	assert.Contains(t, strings.Join(doc.Notes, "\n"), "the (query, key) pairs the window shows")
}
