package main

import (
	"fmt"
	"sort"
	"strings"
)

// shape is one entry of the standard shape suite (../shared/anchors/SHAPES.md):
// batch 1, scale 1/sqrt(d).
type shape struct {
	name, what          string
	heads, kvHeads, dim int
	nq, nkv             int
	causal              bool
}

var shapes = map[string]shape{
	"P1": {"P1", "Llama-3-8B-like prefill (GQA 4:1)", 32, 8, 128, 1024, 1024, true},
	"P2": {"P2", "GPT-2-like prefill (MHA)", 12, 12, 64, 1024, 1024, true},
	"P3": {"P3", "long prefill", 32, 8, 128, 4096, 4096, true},
	"D1": {"D1", "decode, 8K context", 32, 8, 128, 1, 8192, false},
	"D2": {"D2", "decode, 32K context", 32, 8, 128, 1, 32768, false},
}

func shapeNames() string {
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func lookupShape(name string) (shape, error) {
	s, ok := shapes[strings.ToUpper(name)]
	if !ok {
		return shape{}, fmt.Errorf("unknown shape %q; want one of %s", name, shapeNames())
	}
	return s, nil
}

// flops is the shape suite's convention: 4·Hq·Nq·Nkv·d, halved for causal.
func (s shape) flops() float64 {
	f := 4 * float64(s.heads) * float64(s.nq) * float64(s.nkv) * float64(s.dim)
	if s.causal {
		f /= 2
	}
	return f
}
