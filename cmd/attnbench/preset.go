package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flashgo/flashgo/model"
)

// Sequence lengths of a preset's shape when -nq and -nkv are not given
// under -mode decode: one query row against a 4K cache.
const (
	presetDecodeNq  = 1
	presetDecodeNkv = 4096
)

// presetShapes turns the -preset list into shapes: each takes the model's
// heads, K/V heads and head dimension, and the mask, sliding window,
// soft-cap and scale of its layer 0 (model.Preset.AttentionOptions), with
// the batch and sequence lengths given. Repeats are dropped.
func presetShapes(list string, batch, nq, nkv int) ([]shape, error) {
	var out []shape
	for _, name := range splitList(list) {
		p, ok := model.LookupPreset(name)
		if !ok {
			return nil, fmt.Errorf("unknown preset %q; want one of %s (attnbench -h describes them)", name, strings.Join(presetNames(), ", "))
		}
		if slices.ContainsFunc(out, func(s shape) bool { return s.name == p.Name }) {
			continue
		}
		o := p.AttentionOptions(0)
		what := p.Title
		if p.Sliding(0) && !p.Sliding(1) {
			what += ", a sliding-window layer"
		}
		s := shape{name: p.Name, what: what, batch: batch, heads: p.Heads, kvHeads: p.KVHeads, dim: p.HeadDim, nq: nq, nkv: nkv,
			causal: o.Causal, softCap: o.SoftCap, scale: o.Scale, scaled: 1}
		if o.Window != nil {
			s.window = o.Window.Left + 1
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-preset is empty; want one of %s", strings.Join(presetNames(), ", "))
	}
	return out, nil
}

func presetNames() []string {
	var names []string
	for _, p := range model.Presets() {
		names = append(names, p.Name)
	}
	return names
}

// presetHelp lists the presets for the usage, one line each.
func presetHelp() string {
	var b strings.Builder
	for _, p := range model.Presets() {
		fmt.Fprintf(&b, "\n  %-12s %s: Hq %d, Hkv %d, d %d, context %d", p.Name, p.Title, p.Heads, p.KVHeads, p.HeadDim, p.Context)
		if p.Window > 0 {
			fmt.Fprintf(&b, ", window %d", p.Window)
			if p.Sliding(0) && !p.Sliding(1) {
				b.WriteString(" (even layers)")
			}
		}
		if p.SoftCap > 0 {
			fmt.Fprintf(&b, ", soft-cap %g", p.SoftCap)
		}
		if p.Scale != 0 {
			fmt.Fprintf(&b, ", scale %g", p.Scale)
		}
	}
	return b.String()
}
