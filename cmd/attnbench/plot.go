package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/flashgo/flashgo/attention"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// writePlot draws a sweep: GFLOP/s (GB/s of K and V for decode) against
// the sequence length, one line per K/V type and thread count for flashgo
// and one per thread count for the naive baseline, on logarithmic axes.
// The file's extension (.svg or .png) picks the format.
func writePlot(c config, rep *report) error {
	if len(rep.results) == 0 {
		return fmt.Errorf("plot: no results")
	}
	base := rep.results[0].shape
	decode := base.decode()
	// The naive baseline always reads float32 K and V, whatever the row's type.
	rate := func(r result, t timing, naive bool) float64 {
		if decode {
			dt := r.kv
			if naive {
				dt = attention.F32
			}
			return r.shape.kvBytes(dt) / t.median.Seconds() / 1e9
		}
		return r.shape.flops() / t.median.Seconds() / 1e9
	}

	var series []any // name, plotter.XYs, name, plotter.XYs, ...
	add := func(name string, naive bool, pick func(r result) (timing, bool)) {
		var xys plotter.XYs
		for _, r := range rep.results {
			if t, ok := pick(r); ok {
				xys = append(xys, plotter.XY{X: float64(r.shape.nkv), Y: rate(r, t, naive)})
			}
		}
		if len(xys) > 0 {
			series = append(series, name, xys)
		}
	}
	kvs := c.kvFor(base)
	for _, dt := range kvs {
		for _, n := range c.threads {
			add(fmt.Sprintf("flashgo %v K/V, %d thread%s", dt, n, plural(n)), false, func(r result) (timing, bool) {
				return r.flash, r.kv == dt && r.threads == n
			})
		}
	}
	if c.naive {
		for _, n := range c.threads {
			// The baseline is float32 whatever the K/V type: one line per thread count.
			add(fmt.Sprintf("naive float32, %d thread%s", n, plural(n)), true, func(r result) (timing, bool) {
				if r.naive == nil || r.kv != kvs[0] || r.threads != n {
					return timing{}, false
				}
				return *r.naive, true
			})
		}
	}

	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	p := plot.New()
	// The kernels that ran the plotted rows (rowKernel), not the level's name.
	var kernels []string
	for _, r := range rep.results {
		if !slices.Contains(kernels, r.kernel) {
			kernels = append(kernels, r.kernel)
		}
	}
	p.Title.Text = fmt.Sprintf("attnbench %s, kernel %s, %s", base.describe(), strings.Join(kernels, ", "), rep.start.UTC().Format("2006-01-02"))
	p.X.Label.Text = "sequence length (Nq = Nkv)"
	p.Y.Label.Text = "effective GFLOP/s"
	if decode {
		p.X.Label.Text = "context length (Nkv, Nq = 1)"
		p.Y.Label.Text = "GB/s of K and V read"
		if decode && c.naive {
			p.Y.Label.Text += " (naive: as float32)"
		}
	}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = lengthTicks(c.sweep)
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	if err := plotutil.AddLinePoints(p, series...); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	// Room above the highest line for the legend.
	p.Y.Max *= 3
	if err := p.Save(9*vg.Inch, 5.5*vg.Inch, c.plot); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// lengthTicks labels the swept lengths themselves.
func lengthTicks(lengths []int) plot.ConstantTicks {
	ls := slices.Clone(lengths)
	slices.Sort(ls)
	ticks := make(plot.ConstantTicks, len(ls))
	for i, n := range ls {
		ticks[i] = plot.Tick{Value: float64(n), Label: strconv.Itoa(n)}
	}
	if len(ls) == 1 { // a log axis needs a range
		ticks = append(ticks, plot.Tick{Value: math.Max(1, float64(ls[0])/2)}, plot.Tick{Value: float64(ls[0]) * 2})
	}
	return ticks
}
