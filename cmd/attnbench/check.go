package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	registry "github.com/flashgo/flashgo/internal/impl"
	"github.com/flashgo/flashgo/kernel"
)

// checkShape is one problem of the accuracy grid.
type checkShape struct {
	batch, heads, kvHeads, dim, nq, nkv int
	causal                              bool
	window                              int     // causal sliding window in keys, 0 for none
	softCap                             float32 // logit soft-cap, 0 for none
}

// shape is the case as a benchmark shape, which gives its reference
// parameters and engine options.
func (s checkShape) shape() shape {
	return shape{batch: s.batch, heads: s.heads, kvHeads: s.kvHeads, dim: s.dim, nq: s.nq, nkv: s.nkv, causal: s.causal,
		window: s.window, softCap: s.softCap}
}

func (s checkShape) params() reference.Params { return s.shape().params() }

func (s checkShape) String() string {
	mask := "full"
	if s.causal {
		mask = "causal"
	}
	str := fmt.Sprintf("B%d Hq%d Hkv%d d%d Nq%d Nkv%d %s", s.batch, s.heads, s.kvHeads, s.dim, s.nq, s.nkv, mask)
	if s.window > 0 {
		str += fmt.Sprintf(" window%d", s.window)
	}
	if s.softCap > 0 {
		str += fmt.Sprintf(" softcap%g", s.softCap)
	}
	return str
}

// checkGrid lists the accuracy grid: sequence lengths that are not
// multiples of the tiles (1 included, Nq < Nkv and Nq > Nkv, more query
// rows than one tile holds), head dimensions 8, 40, 64 and 128, multi-head,
// grouped-query (4:1) and multi-query heads with two batch entries, causal
// and not; then causal sliding windows (a decode row, windows narrower and
// wider than a tile, Nq > Nkv, one of a single key), two with Gemma 2's
// logit soft-cap of 50. short keeps a handful of them for quick runs.
func checkGrid(short bool) []checkShape {
	seqs := [][2]int{{1, 1}, {1, 77}, {77, 1}, {13, 150}, {150, 13}, {100, 100}, {129, 67}, {67, 129}, {257, 300}}
	dims := []int{8, 40, 64, 128}
	heads := [][3]int{{1, 2, 2}, {1, 8, 2}, {2, 3, 1}} // batch, Hq, Hkv
	if short {
		seqs = [][2]int{{1, 77}, {77, 1}, {67, 129}}
		dims = []int{8, 40}
		heads = [][3]int{{1, 8, 2}}
	}
	type windowCase struct {
		nq, nkv, window int
		softCap         float32
	}
	windows := []windowCase{{1, 77, 16, 0}, {67, 129, 16, 0}, {150, 13, 5, 0}, {100, 100, 1, 0}, {77, 100, 33, 50}, {257, 300, 64, 50}}
	if short {
		windows = []windowCase{windows[0], windows[1], windows[4]}
	}
	var grid []checkShape
	for _, h := range heads {
		for _, d := range dims {
			for _, sq := range seqs {
				for _, causal := range []bool{false, true} {
					grid = append(grid, checkShape{batch: h[0], heads: h[1], kvHeads: h[2], dim: d, nq: sq[0], nkv: sq[1], causal: causal})
				}
			}
		}
	}
	for _, h := range heads {
		for _, d := range dims {
			for _, w := range windows {
				grid = append(grid, checkShape{batch: h[0], heads: h[1], kvHeads: h[2], dim: d, nq: w.nq, nkv: w.nkv, causal: true,
					window: w.window, softCap: w.softCap})
			}
		}
	}
	return grid
}

// checkOutcome is the result of one case of the grid.
type checkOutcome struct {
	name        string
	errs        reference.Errors
	naiveMaxAbs float64
	eb          float64 // the bfloat16 rule's E_b (0 in float32)
	tolerance   float64
}

func (o checkOutcome) pass() bool { return o.errs.MaxAbs <= o.tolerance }

// ratio is how much of its tolerance the case used.
func (o checkOutcome) ratio() float64 { return o.errs.MaxAbs / o.tolerance }

func (o checkOutcome) String() string {
	if o.eb != 0 {
		return fmt.Sprintf("%s: max abs %.2e, tolerance %.2e (2 × naive %.2e + 1e-6 + 2·E_b %.2e), max rel %.2e", o.name, o.errs.MaxAbs, o.tolerance, o.naiveMaxAbs, o.eb, o.errs.MaxRel)
	}
	return fmt.Sprintf("%s: max abs %.2e, tolerance %.2e (2 × naive %.2e + 1e-6), max rel %.2e", o.name, o.errs.MaxAbs, o.tolerance, o.naiveMaxAbs, o.errs.MaxRel)
}

const checkUsage = `usage: attnbench check [-short] [-kernel NAMES] [-precision LIST] [-threads N] [-v]

check runs the engine on a grid of shapes against the float64 oracle:
Nq and Nkv that are not multiples of the tiles (1 included, in both
orders), head dimensions 8, 40, 64 and 128, multi-head, grouped-query and
multi-query heads, causal and not, causal sliding windows (some with a
logit soft-cap), f32, f16, bf16, fp8e4m3 and fp8e5m2 K/V (the fp8 ones
with one scale per tensor, the values the oracle sees being the fp8 values
times it), in float32 and bfloat16 compute
precision, with every kernel implementation the machine can run. A case
passes when its max abs error is at most 2 × that of the naive baseline in
the same precision on the same inputs (float32; or bfloat16 operands
rounded where the engine rounds them, with float32 accumulation), + 1e-6.
In bfloat16 it may also exceed that by 2·E_b, the rounding of the
weights (docs/math.md §8). Each case line reads: implementation, K/V
storage type, compute precision, shape. max rel, printed beside, divides
each error by its element's |value| floored at 1e-3 × the largest: an
output near 0 (outputs are averages of signed values) makes it large, 0.5
or more in bfloat16, where max abs is small; the pass rule is on max abs.
It prints every failing case and by how much it failed, and exits 1 if any
did.

Flags:
`

// runCheck is the check subcommand.
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("attnbench check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	short := fs.Bool("short", false, "run a small grid (a few seconds less thorough: d 8 and 40, GQA 4:1, three length pairs, three windows)")
	impls := fs.String("kernel", strings.Join(kernel.Implementations(), ","), "comma-separated kernel implementations to check")
	precList := fs.String("precision", "f32,bf16", "comma-separated compute `precisions` to check: f32 and bf16")
	threads := fs.Int("threads", 0, "threads of the engine (0: GOMAXPROCS)")
	verbose := fs.Bool("v", false, "print every case, not only the failures")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprint(stdout, checkUsage)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintln(stderr, "attnbench check:", err)
		fmt.Fprintln(stderr, "run attnbench check -h for the flags")
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "attnbench check: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *threads < 0 {
		fmt.Fprintf(stderr, "attnbench check: -threads is %d; want >= 0\n", *threads)
		return 2
	}
	var names []string
	for _, n := range splitList(*impls) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		fmt.Fprintln(stderr, "attnbench check: -kernel is empty")
		return 2
	}
	for _, n := range names {
		if !slices.Contains(kernel.Implementations(), n) {
			fmt.Fprintf(stderr, "attnbench check: -kernel has %q; this machine has %s\n", n, strings.Join(kernel.Implementations(), ", "))
			return 2
		}
	}
	precs, err := parsePrecisions(*precList, false)
	if err != nil {
		fmt.Fprintln(stderr, "attnbench check:", err)
		return 2
	}
	eng, err := attention.NewEngine(attention.Config{Threads: *threads})
	if err != nil {
		fmt.Fprintln(stderr, "attnbench check:", err)
		return 2
	}
	grid := checkGrid(*short)
	kvs := []attention.DType{attention.F32, attention.F16, attention.BF16, attention.FP8E4M3, attention.FP8E5M2}
	var pn []string
	for _, p := range precs {
		pn = append(pn, precName(p))
	}
	cases := len(grid) * len(kvs) * len(precs) * len(names)
	fmt.Fprintf(stdout, "check: %d shape%s × %d K/V type%s × %d precision%s (%s) × %d kernel%s (%s) = %d case%s against the float64 oracle\n",
		len(grid), plural(len(grid)), len(kvs), plural(len(kvs)), len(precs), plural(len(precs)), strings.Join(pn, ", "),
		len(names), plural(len(names)), strings.Join(names, ", "), cases, plural(cases))
	prog := newProgress(stderr)
	prog.setTotal(len(grid))
	results, err := checkAll(eng, grid, kvs, precs, names, prog)
	prog.stop()
	if err != nil {
		fmt.Fprintln(stderr, "attnbench check:", err)
		return 1
	}
	return reportCheck(results, names, *verbose, stdout)
}

// checkAll runs every shape of the grid with every K/V type and kernel
// implementation, and returns the outcomes by implementation.
func checkAll(eng *attention.Engine, grid []checkShape, kvs []attention.DType, precs []attention.Precision, impls []string, prog *progress) (map[string][]checkOutcome, error) {
	results := map[string][]checkOutcome{}
	for i, s := range grid {
		p := s.params()
		rng := rand.New(rand.NewPCG(7, uint64(i)))
		q, k32, v32 := randn(rng, p.QLen()), randn(rng, p.KVLen()), randn(rng, p.KVLen())
		qLayout := attention.BHSD(s.batch, s.heads, s.nq, s.dim)
		kvLayout := attention.BHSD(s.batch, s.kvHeads, s.nkv, s.dim)
		prog.beginCase(1)
		prog.start(s.String(), len(kvs)*len(precs)*len(impls))
		for _, dt := range kvs {
			k, v, err := storeKVPair(k32, v32, dt, kvLayout)
			if err != nil {
				return nil, fmt.Errorf("%v %v: %w", dt, s, err)
			}
			want, _, err := reference.Attention(p, reference.Float64s(q), reference.Float64s(k.values), reference.Float64s(v.values))
			if err != nil {
				return nil, fmt.Errorf("%v %v: oracle: %w", dt, s, err)
			}
			for _, prec := range precs {
				// The yardstick: naive attention in the same precision.
				n := reference.Naive{BFloat16: prec == attention.PrecisionBFloat16}
				nout := make([]float32, p.QLen())
				if err := n.Attention(p, nout, q, k.values, v.values); err != nil {
					return nil, fmt.Errorf("%v %v: naive: %w", dt, s, err)
				}
				naiveErr := reference.Compare(nout, want).MaxAbs
				var eb float64
				if prec == attention.PrecisionBFloat16 {
					if eb, err = reference.WeightCondition(p, reference.Float64s(q), reference.Float64s(k.values), reference.Float64s(v.values)); err != nil {
						return nil, fmt.Errorf("%v %v: %w", dt, s, err)
					}
				}
				opts := s.shape().options()
				opts.Precision = prec // f32 or bf16: runCheck refuses q8q
				for _, impl := range impls {
					name := fmt.Sprintf("%s, K/V %v, precision %s: %v", impl, dt, precName(prec), s)
					errs, err := checkOne(eng, impl, &call{
						out: make([]float32, p.QLen()), qT: attention.F32Tensor(q, qLayout), kT: k.t, vT: v.t, opts: opts,
					}, qLayout, want)
					if err != nil {
						return nil, fmt.Errorf("%s: %w", name, err)
					}
					results[impl] = append(results[impl], checkOutcome{name: name, errs: errs, naiveMaxAbs: naiveErr, eb: eb, tolerance: tolerance(naiveErr, eb)})
					prog.tick()
				}
			}
		}
		prog.done()
	}
	return results, nil
}

// checkOne runs one call with the kernel implementation impl and compares
// its output with the oracle's.
func checkOne(eng *attention.Engine, impl string, c *call, l attention.Layout, want []float64) (reference.Errors, error) {
	restore, err := registry.Select(registry.Kernel, impl)
	if err != nil {
		return reference.Errors{}, err
	}
	defer restore()
	c.outT = attention.F32Tensor(c.out, l)
	if err := forward(eng, c); err != nil {
		return reference.Errors{}, err
	}
	errs := reference.Compare(c.out, want)
	if errs.N != len(want) {
		return errs, fmt.Errorf("compared %d elements, want %d", errs.N, len(want))
	}
	return errs, nil
}

// reportCheck prints the failures (every case with verbose) and a summary
// per implementation, and returns the exit status.
func reportCheck(results map[string][]checkOutcome, impls []string, verbose bool, w io.Writer) int {
	failed, total := 0, 0
	for _, impl := range impls {
		for _, o := range results[impl] {
			total++
			switch {
			case !o.pass():
				failed++
				fmt.Fprintf(w, "FAIL %v (%.1f × the tolerance)\n", o, o.ratio())
			case verbose:
				fmt.Fprintf(w, "ok   %v\n", o)
			}
		}
	}
	for _, impl := range impls {
		rs := results[impl]
		if len(rs) == 0 {
			continue
		}
		worst := slices.MaxFunc(rs, func(a, b checkOutcome) int {
			switch {
			case a.ratio() < b.ratio():
				return -1
			case a.ratio() > b.ratio():
				return 1
			}
			return 0
		})
		bad := 0
		for _, o := range rs {
			if !o.pass() {
				bad++
			}
		}
		fmt.Fprintf(w, "%s: %d case%s, %d failed; closest to its tolerance: %v\n", impl, len(rs), plural(len(rs)), bad, worst)
	}
	if failed > 0 {
		fmt.Fprintf(w, "check FAILED: %d of %d case%s outside the tolerance\n", failed, total, plural(total))
		return 1
	}
	fmt.Fprintf(w, "check passed: %d case%s within the tolerance (max abs <= 2 × naive in the same precision + 1e-6, + 2·E_b in bfloat16)\n", total, plural(total))
	return 0
}
