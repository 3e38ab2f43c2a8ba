package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
)

// shape is one attention problem to benchmark: batch, heads, head dimension,
// sequence lengths and mask, with the scale 1/sqrt(d) as in the standard
// shape suite (shared/anchors/SHAPES.md) unless a model preset says
// otherwise.
type shape struct {
	name string // suite name ("P1"), "custom", or "P3/2" for a scaled entry
	what string // one-line description

	batch, heads, kvHeads, dim int
	nq, nkv                    int
	causal                     bool

	// window is the causal sliding window in keys, the query's own
	// included (llama.cpp's count, as modelPreset.Window), or 0 for none;
	// softCap is the logit soft-cap and scale the softmax scale (0:
	// 1/sqrt(d)), both from a model preset.
	window  int
	softCap float32
	scale   float32

	// scaled is the divisor applied to the suite's sequence lengths (1 for
	// the full size); swept is set when -sweep chose the lengths.
	scaled int
	swept  bool
}

// suite is the standard shape suite, batch 1.
var suite = []shape{
	{name: "P1", what: "Llama-3-8B-like prefill (GQA 4:1)", batch: 1, heads: 32, kvHeads: 8, dim: 128, nq: 1024, nkv: 1024, causal: true, scaled: 1},
	{name: "P2", what: "GPT-2-like prefill (MHA)", batch: 1, heads: 12, kvHeads: 12, dim: 64, nq: 1024, nkv: 1024, causal: true, scaled: 1},
	{name: "P3", what: "long prefill", batch: 1, heads: 32, kvHeads: 8, dim: 128, nq: 4096, nkv: 4096, causal: true, scaled: 1},
	{name: "D1", what: "decode, 8K context", batch: 1, heads: 32, kvHeads: 8, dim: 128, nq: 1, nkv: 8192, scaled: 1},
	{name: "D2", what: "decode, 32K context", batch: 1, heads: 32, kvHeads: 8, dim: 128, nq: 1, nkv: 32768, scaled: 1},
}

// defaultShapes is what a run without -shape measures: the whole suite,
// with P3 at half its sequence length so that the default run (two K/V
// types, two thread counts, the naive baseline) stays under a minute on a
// two-core machine.
const defaultShapes = "P1,P2,P3/2,D1,D2"

// shapeAliases are names that stand for a list of shapes.
var shapeAliases = map[string]string{
	"default": defaultShapes,
	"full":    "P1,P2,P3,D1,D2",
}

func suiteNames() string {
	names := make([]string, len(suite))
	for i, s := range suite {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

// lookupShape returns the suite entry called name, which may carry a
// divisor ("P3/2": sequence lengths halved; for a decode shape only Nkv is
// divided, Nq stays 1).
func lookupShape(name string) (shape, error) {
	base, div, scaled := strings.Cut(name, "/")
	k := 1
	if scaled {
		var err error
		k, err = strconv.Atoi(div)
		if err != nil || k < 1 {
			return shape{}, fmt.Errorf("shape %q: the divisor after / must be a positive integer", name)
		}
	}
	for _, s := range suite {
		if !strings.EqualFold(s.name, base) {
			continue
		}
		if k == 1 {
			return s, nil
		}
		if s.nkv%k != 0 || (!s.decode() && s.nq%k != 0) {
			return shape{}, fmt.Errorf("shape %q: %s's sequence lengths are not divisible by %d", name, s.name, k)
		}
		s.name = fmt.Sprintf("%s/%d", s.name, k)
		s.scaled = k
		s.nkv /= k
		if !s.decode() {
			s.nq /= k
		}
		return s, nil
	}
	return shape{}, fmt.Errorf("unknown shape %q; want one of %s, a scaled one such as P3/2, \"custom\", \"default\" (%s) or \"full\"", name, suiteNames(), defaultShapes)
}

// decode reports whether the shape is a decoding step: one query row
// against a K/V cache, a problem bound by the memory bandwidth.
func (s shape) decode() bool { return s.nq == 1 }

// mode is "decode" or "prefill".
func (s shape) mode() string {
	if s.decode() {
		return "decode"
	}
	return "prefill"
}

// withSeq returns the shape with its sequence lengths set to n: Nq = Nkv = n
// for prefill, Nkv = n for decode.
func (s shape) withSeq(n int) shape {
	if i := strings.IndexByte(s.name, '/'); i >= 0 {
		s.name = s.name[:i]
	}
	s.scaled, s.swept = 1, true
	s.nkv = n
	if !s.decode() {
		s.nq = n
	} else if strings.HasPrefix(s.what, "decode") {
		s.what = "decode" // the suite's description names its context length, which the sweep replaces
	}
	return s
}

// params is the shape as the reference package describes it.
func (s shape) params() reference.Params {
	p := reference.Params{Batch: s.batch, HeadsQ: s.heads, HeadsKV: s.kvHeads, SeqQ: s.nq, SeqKV: s.nkv, Dim: s.dim, Causal: s.causal,
		Scale: float64(s.scale), SoftCap: float64(s.softCap)}
	if s.window > 0 {
		p.Window, p.WindowLeft, p.WindowRight = true, s.window-1, 0
	}
	return p
}

// options are the engine's options for the shape: the same mask, window,
// soft-cap and scale as params.
func (s shape) options() attention.Options {
	o := attention.Options{Causal: s.causal, SoftCap: s.softCap, Scale: s.scale}
	if s.window > 0 {
		o.Window = &attention.Window{Left: s.window - 1, Right: 0}
	}
	return o
}

// validate rejects shapes that cannot be benchmarked: zero or negative
// sizes, and query heads that are not a multiple of the K/V heads.
func (s shape) validate() error {
	for _, f := range []struct {
		flag string
		v    int
	}{{"batch", s.batch}, {"heads", s.heads}, {"kv-heads", s.kvHeads}, {"dim", s.dim}, {"nq", s.nq}, {"nkv", s.nkv}} {
		if f.v < 1 {
			return fmt.Errorf("shape %s: -%s is %d; want >= 1", s.name, f.flag, f.v)
		}
	}
	if s.heads%s.kvHeads != 0 {
		return fmt.Errorf("shape %s: -heads %d is not a multiple of -kv-heads %d (grouped-query attention shares each K/V head among Hq/Hkv query heads)", s.name, s.heads, s.kvHeads)
	}
	// Element counts must fit in an int (and so in a slice).
	const maxElems = 1 << 50
	q := float64(s.batch) * float64(s.heads) * float64(s.nq) * float64(s.dim)
	kv := float64(s.batch) * float64(s.kvHeads) * float64(s.nkv) * float64(s.dim)
	if q > maxElems || kv > maxElems {
		return fmt.Errorf("shape %s: %.3g query and %.3g key elements are too many to allocate", s.name, q, kv)
	}
	return s.params().Validate()
}

// flops is the shape suite's convention: 4·B·Hq·Nq·Nkv·d, halved for
// causal. A single query row (decode) sees every key under the
// bottom-right causal mask, so its count is not halved. With a sliding
// window it is exact instead: 4·B·Hq·d × the visible (query, key) pairs,
// since the engine skips the keys the window hides.
func (s shape) flops() float64 {
	if s.window > 0 {
		return 4 * float64(s.batch) * float64(s.heads) * float64(s.dim) * visiblePairs(s.nq, s.nkv, s.window)
	}
	f := 4 * float64(s.batch) * float64(s.heads) * float64(s.nq) * float64(s.nkv) * float64(s.dim)
	if s.causal && s.nq > 1 {
		f /= 2
	}
	return f
}

// kvBytes is the number of bytes of K and V a call reads once:
// 2·B·Hkv·Nkv·d·(bytes per element, 1 + 4/32 for q8 with its scales),
// where a sliding window counts only the keys some query sees.
func (s shape) kvBytes(dt attention.DType) float64 {
	keys := s.nkv
	if s.window > 0 {
		keys = visibleKeys(s.nq, s.nkv, s.window)
	}
	return 2 * float64(s.batch) * float64(s.kvHeads) * float64(keys) * float64(s.dim) * elemBytes(dt)
}

// visiblePairs counts the (query, key) pairs that a causal sliding window
// of w keys shows: with the bottom-right alignment, query i of nq has the
// diagonal position i' = i + nkv − nq and sees the keys j with
// i' − (w−1) <= j <= i', clipped to [0, nkv).
func visiblePairs(nq, nkv, w int) float64 {
	var n float64
	for i := range nq {
		d := i + nkv - nq
		if lo, hi := max(0, d-(w-1)), min(d, nkv-1); hi >= lo {
			n += float64(hi - lo + 1)
		}
	}
	return n
}

// visibleKeys counts the keys that at least one query sees under a causal
// sliding window of w keys: from the first query's lowest key to the last.
func visibleKeys(nq, nkv, w int) int {
	return nkv - max(0, nkv-nq-(w-1))
}

// describe is the shape's one-line description for legends and titles.
// A swept shape leaves out the lengths the sweep varies.
func (s shape) describe() string {
	var b strings.Builder
	b.WriteString(s.name)
	if s.what != "" {
		fmt.Fprintf(&b, " (%s)", s.what)
	}
	b.WriteString(":")
	if s.batch != 1 {
		fmt.Fprintf(&b, " B %d,", s.batch)
	}
	fmt.Fprintf(&b, " Hq %d, Hkv %d, d %d", s.heads, s.kvHeads, s.dim)
	switch {
	case !s.swept:
		fmt.Fprintf(&b, ", Nq %d, Nkv %d", s.nq, s.nkv)
	case s.decode():
		b.WriteString(", Nq 1")
	}
	if s.causal {
		b.WriteString(", causal")
	} else {
		b.WriteString(", no mask")
	}
	if s.window > 0 {
		fmt.Fprintf(&b, ", window %d", s.window)
	}
	if s.softCap > 0 {
		fmt.Fprintf(&b, ", soft-cap %g", s.softCap)
	}
	if s.scale != 0 {
		fmt.Fprintf(&b, ", scale %g", s.scale)
	}
	if s.scaled > 1 {
		fmt.Fprintf(&b, "; scaled: sequence lengths ÷%d", s.scaled)
	}
	return b.String()
}

// parseDTypes reads a comma-separated list of K/V storage types.
func parseDTypes(list string) ([]attention.DType, error) {
	fields, err := splitFlag("-kv", list)
	if err != nil {
		return nil, err
	}
	var out []attention.DType
	for _, f := range fields {
		var dt attention.DType
		switch strings.ToLower(f) {
		case "f32", "fp32", "float32":
			dt = attention.F32
		case "f16", "fp16", "float16":
			dt = attention.F16
		case "bf16", "bfloat16":
			dt = attention.BF16
		case "q8", "q8_0", "int8":
			dt = attention.Q8
		case "fp8e4m3", "fp8_e4m3", "e4m3", "fp8":
			dt = attention.FP8E4M3
		case "fp8e5m2", "fp8_e5m2", "e5m2":
			dt = attention.FP8E5M2
		default:
			return nil, fmt.Errorf("-kv has %q; want f32, f16, bf16, q8, fp8e4m3 or fp8e5m2, separated by commas", f)
		}
		if !slices.Contains(out, dt) {
			out = append(out, dt)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-kv is empty; want f32, f16, bf16, q8, fp8e4m3 or fp8e5m2, separated by commas")
	}
	return out, nil
}

// splitList splits a comma-separated list, trimming blanks around each
// entry and dropping empty ones: for lists the program writes itself (the
// shape aliases). A list a user wrote goes through splitFlag.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// splitFlag splits the comma-separated value of flag name (written with
// its dash, "-threads") as splitList does, but refuses an empty entry
// between, before or after the commas ("1,,2", "1,"): a list with a hole
// in it is more likely a typo than a wish for fewer entries. An empty
// value gives no entries, which each caller refuses in its own words.
func splitFlag(name, s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	fields := strings.Split(s, ",")
	for i, f := range fields {
		if fields[i] = strings.TrimSpace(f); fields[i] == "" {
			return nil, fmt.Errorf("%s is %q, which has an empty entry; want entries separated by single commas", name, s)
		}
	}
	return fields, nil
}
