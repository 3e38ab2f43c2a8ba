// Command attnbench measures flashgo's attention on the standard shape suite
// and checks its accuracy against the float64 oracle.
//
// Usage:
//
//	go run ./cmd/attnbench [-shape P2] [-kv f32] [-reps 5] [-naive=true] [-check=true]
//
// It prints the median time of the fused engine over the repetitions, its
// effective GFLOP/s (FLOPs = 4·Hq·Nq·Nkv·d, halved for causal masks), the
// same for the naive float32 baseline (two Sgemm calls around a softmax),
// and the engine's maximum absolute and relative error against the float64
// oracle.
package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is what the flags ask for.
type config struct {
	shapes  []shape
	kv      attention.DType
	reps    int
	threads []int
	naive   bool
	peak    float64 // GFLOP/s of one core, measured at start
	check   bool
}

func parse(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("attnbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	shapeName := fs.String("shape", "P2", "comma-separated shapes from the standard suite: "+shapeNames())
	kvName := fs.String("kv", "f32", "storage type of K and V: f32, f16 or bf16")
	reps := fs.Int("reps", 5, "timed repetitions after one warm-up (the median is reported)")
	naive := fs.Bool("naive", true, "also time the naive float32 baseline (Sgemm, softmax, Sgemm)")
	check := fs.Bool("check", true, "compare the output with the float64 oracle")
	threads := fs.String("threads", "", "comma-separated thread counts to run, e.g. 1,2 (default: GOMAXPROCS)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: attnbench [flags]\n\nRuns one shape of the standard suite through flashgo and reports speed and accuracy.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var shapes []shape
	for _, name := range strings.Split(*shapeName, ",") {
		s, err := lookupShape(strings.TrimSpace(name))
		if err != nil {
			return config{}, err
		}
		shapes = append(shapes, s)
	}
	if *reps < 1 {
		return config{}, fmt.Errorf("-reps is %d; want >= 1", *reps)
	}
	c := config{shapes: shapes, reps: *reps, naive: *naive, check: *check}
	var err error
	if c.threads, err = parseThreads(*threads); err != nil {
		return config{}, err
	}
	switch *kvName {
	case "f32":
		c.kv = attention.F32
	case "f16":
		c.kv = attention.F16
	case "bf16":
		c.kv = attention.BF16
	default:
		return config{}, fmt.Errorf("-kv is %q; want f32, f16 or bf16", *kvName)
	}
	return c, nil
}

// parseThreads reads a comma-separated list of thread counts.
func parseThreads(s string) ([]int, error) {
	if s == "" {
		return []int{runtime.GOMAXPROCS(0)}, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-threads has %q; want positive integers separated by commas", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stderr)
	if err == flag.ErrHelp {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "attnbench:", err)
		return 2
	}
	if err := bench(c, stdout); err != nil {
		fmt.Fprintln(stderr, "attnbench:", err)
		return 1
	}
	return 0
}

func bench(c config, w io.Writer) error {
	peak, isa := kernel.Peak(200 * time.Millisecond)
	c.peak = peak
	fmt.Fprintf(w, "FMA peak %.1f GFLOP/s per core (%s loop, measured now); kernel %s\n\n", peak, isa, kernel.Implementation())
	for i, s := range c.shapes {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := benchShape(c, s, w); err != nil {
			return err
		}
	}
	return nil
}

func benchShape(c config, s shape, w io.Writer) error {
	p := reference.Params{Batch: 1, HeadsQ: s.heads, HeadsKV: s.kvHeads, SeqQ: s.nq, SeqKV: s.nkv, Dim: s.dim, Causal: s.causal}
	rng := rand.New(rand.NewPCG(1, 2))
	q, k, v := randn(rng, p.QLen()), randn(rng, p.KVLen()), randn(rng, p.KVLen())
	qT := attention.F32Tensor(q, attention.BHSD(1, s.heads, s.nq, s.dim))
	kvLayout := attention.BHSD(1, s.kvHeads, s.nkv, s.dim)
	var kT, vT attention.Tensor
	switch c.kv {
	case attention.F16:
		kh, vh := fp16.Float16s(k), fp16.Float16s(v)
		fp16.DecodeFloat16(k, kh) // the oracle sees the stored values
		fp16.DecodeFloat16(v, vh)
		kT, vT = attention.F16Tensor(kh, kvLayout), attention.F16Tensor(vh, kvLayout)
	case attention.BF16:
		kh, vh := fp16.BFloat16s(k), fp16.BFloat16s(v)
		fp16.DecodeBFloat16(k, kh)
		fp16.DecodeBFloat16(v, vh)
		kT, vT = attention.BF16Tensor(kh, kvLayout), attention.BF16Tensor(vh, kvLayout)
	default:
		kT, vT = attention.F32Tensor(k, kvLayout), attention.F32Tensor(v, kvLayout)
	}
	out := make([]float32, p.QLen())
	outT := attention.F32Tensor(out, qT.Layout)
	opts := attention.Options{Causal: s.causal}
	fmt.Fprintf(w, "shape %s (%s): Hq %d, Hkv %d, d %d, Nq %d, Nkv %d, causal %v; K/V %v; %d reps\n",
		s.name, s.what, s.heads, s.kvHeads, s.dim, s.nq, s.nkv, s.causal, c.kv, c.reps)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "path\tthreads\tmedian ms\tmin ms\tmax ms\tGFLOP/s\t%% peak\tvs naive\t\n")
	row := func(name string, threads int, t timing, ratio string) {
		gf := s.flops() / t.median.Seconds() / 1e9
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.2f\t%.1f\t%s\t\n", name, threads, ms(t.median), ms(t.min), ms(t.max), gf, 100*gf/(c.peak*float64(threads)), ratio)
	}
	// GOMAXPROCS is set to the thread count for both paths, so that the
	// naive baseline (gonum spreads large products over goroutines) gets
	// the same cores as the engine.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, threads := range c.threads {
		runtime.GOMAXPROCS(threads)
		eng, err := attention.NewEngine(attention.Config{Threads: threads})
		if err != nil {
			return err
		}
		flash, err := timeIt(c.reps, func() error { return eng.Forward(outT, qT, kT, vT, opts) })
		if err != nil {
			return err
		}
		if !c.naive {
			row("flashgo", threads, flash, "-")
			continue
		}
		var n reference.Naive
		nout := make([]float32, p.QLen())
		naive, err := timeIt(c.reps, func() error { return n.Attention(p, nout, q, k, v) })
		if err != nil {
			return err
		}
		row("flashgo", threads, flash, fmt.Sprintf("%.2fx", naive.median.Seconds()/flash.median.Seconds()))
		row("naive f32", threads, naive, "1.00x")
	}
	tw.Flush()
	if c.check {
		want, _, err := reference.Attention(p, reference.Float64s(q), reference.Float64s(k), reference.Float64s(v))
		if err != nil {
			return err
		}
		errs := reference.Compare(out, want)
		fmt.Fprintf(w, "accuracy vs float64 oracle: max abs %.3g, max rel %.3g, RMS %.3g\n", errs.MaxAbs, errs.MaxRel, errs.RMS)
	}
	return nil
}

type timing struct{ median, min, max time.Duration }

// timeIt runs f once to warm up, then reps times, and returns the median,
// minimum and maximum.
func timeIt(reps int, f func() error) (timing, error) {
	if err := f(); err != nil {
		return timing{}, err
	}
	ds := make([]time.Duration, reps)
	for i := range ds {
		t0 := time.Now()
		if err := f(); err != nil {
			return timing{}, err
		}
		ds[i] = time.Since(t0)
	}
	slices.Sort(ds)
	return timing{median: ds[len(ds)/2], min: ds[0], max: ds[len(ds)-1]}, nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func randn(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}
