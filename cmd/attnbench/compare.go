package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashgo/flashgo/attention"
)

// torchScript is the peer of attnbench compare: PyTorch's CPU
// scaled_dot_product_attention on the cases of a round, read as JSON on
// stdin (peers/torch_sdpa.py says the protocol).
//
//go:embed peers/torch_sdpa.py
var torchScript []byte

const compareUsage = `usage: attnbench compare [-rounds N] [-python CMD] [-out FILE] [benchmark flags]

compare times flashgo and PyTorch's scaled_dot_product_attention on the
same cases, in interleaved rounds: each round runs every case of flashgo
(in this process, measured as the benchmark measures it) and then every
case of PyTorch (the script peers/torch_sdpa.py, built into attnbench and
run with -python), so that a machine's slow spells fall on both. It
prints, per case, each side's median time over the rounds (the median of
each round's median of -reps runs, with the fastest and slowest round)
and PyTorch's time over flashgo's: the median of the rounds' ratios, with
their min-max. A ratio is only ever computed from one round's pair.

The cases are the benchmark's (the flags after compare's own: -shape,
-kv, -precision, -threads, -reps, -warm, -paged, -kvlayout; attnbench -h
lists them), with -naive and -check off unless given. PyTorch computes in
the K/V storage type (f32: float32, f16: float16, bf16: bfloat16; its
queries too); q8 and fp8 rows have no PyTorch counterpart and are
skipped. A causal shape with Nq < Nkv is aligned to the bottom right on
both sides; decode rows read cold K/V on both sides (copies over 2 × the
last-level cache) unless -warm. Pin one-thread runs from outside, e.g.
taskset -c 2 attnbench compare -threads 1.

Flags:
`

// compareConfig is what the flags of attnbench compare ask for.
type compareConfig struct {
	bench  config
	rounds int
	python string
	out    string
}

func parseCompare(args []string, stdout io.Writer) (compareConfig, error) {
	fs := flag.NewFlagSet("attnbench compare", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var c compareConfig
	fs.IntVar(&c.rounds, "rounds", 3, "interleaved rounds of both sides")
	fs.StringVar(&c.python, "python", "python3", "the `command` that runs PyTorch's side (a Python with torch)")
	fs.StringVar(&c.out, "out", "", "write every round's figures as JSON to `file`")
	// compare's own flags come first; the first flag it does not know
	// starts the benchmark's.
	own, rest := splitOwnFlags(fs, args)
	if err := fs.Parse(own); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprint(stdout, compareUsage)
			fs.PrintDefaults()
		}
		return c, err
	}
	if c.rounds < 1 {
		return c, fmt.Errorf("-rounds is %d; want >= 1", c.rounds)
	}
	if c.out != "" {
		if err := checkWritable(c.out); err != nil {
			return c, fmt.Errorf("-out %q: %w", c.out, err)
		}
	}
	for _, a := range rest {
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") && name == "shared-prefix" {
			return c, errors.New("-shared-prefix has no PyTorch counterpart; compare takes the benchmark's shapes")
		}
	}
	var err error
	if c.bench, err = parse(append([]string{"-naive=off", "-check=off"}, rest...), stdout); err != nil {
		return c, err
	}
	switch {
	case c.bench.sweep != nil:
		return c, errors.New("-sweep is not compared; name the lengths as shapes (-shape custom -nq N -nkv N)")
	}
	for _, s := range c.bench.shapes {
		if s.window > 0 || s.softCap > 0 {
			return c, fmt.Errorf("shape %s has a sliding window or a soft-cap, which the PyTorch side does not compute", s.name)
		}
	}
	if len(c.cases()) == 0 {
		return c, errors.New("no case has a PyTorch counterpart: PyTorch runs f32, f16 and bf16 K/V; add one of them to -kv")
	}
	return c, nil
}

// splitOwnFlags returns the leading arguments that are fs's flags (with
// their values) and the rest, from the first argument that is not one.
func splitOwnFlags(fs *flag.FlagSet, args []string) (own, rest []string) {
	i := 0
	for i < len(args) {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "h" && name != "help" && fs.Lookup(name) == nil {
			break
		}
		i++
		if !hasValue && name != "h" && name != "help" && i < len(args) {
			i++ // the flag's value
		}
	}
	return args[:i], args[i:]
}

// peerDType is PyTorch's dtype for rows of K/V type dt, or "" where it
// has none.
func peerDType(dt attention.DType) string {
	switch dt {
	case attention.F32:
		return "float32"
	case attention.F16:
		return "float16"
	case attention.BF16:
		return "bfloat16"
	}
	return ""
}

// peerCase is one case of PyTorch's side, as peers/torch_sdpa.py reads it.
type peerCase struct {
	Shape   string  `json:"shape"`
	Batch   int     `json:"batch"`
	Heads   int     `json:"heads"`
	KVHeads int     `json:"kv_heads"`
	Dim     int     `json:"dim"`
	Nq      int     `json:"nq"`
	Nkv     int     `json:"nkv"`
	Causal  bool    `json:"causal"`
	Scale   float64 `json:"scale"`
	DType   string  `json:"dtype"`
	Threads int     `json:"threads"`
	Reps    int     `json:"reps"`
	Copies  int     `json:"copies"`
}

func (p peerCase) key() string { return fmt.Sprintf("%s %s %d", p.Shape, p.DType, p.Threads) }

// cases returns PyTorch's cases: one per shape, dtype and thread count
// that some flashgo row compares with, in the benchmark's order.
func (c compareConfig) cases() []peerCase {
	var out []peerCase
	for _, s := range c.bench.shapes {
		for _, dt := range c.bench.kvFor(s) {
			name := peerDType(dt)
			if name == "" {
				continue
			}
			for _, th := range c.bench.threads {
				scale := float64(s.scale)
				if scale == 0 {
					scale = 1 / math.Sqrt(float64(s.dim))
				}
				copies, _ := kvCaches(c.bench, s, dt)
				pc := peerCase{Shape: s.name, Batch: s.batch, Heads: s.heads, KVHeads: s.kvHeads, Dim: s.dim, Nq: s.nq, Nkv: s.nkv,
					Causal: s.causal, Scale: scale, DType: name, Threads: th, Reps: c.bench.reps, Copies: copies}
				if !slices.ContainsFunc(out, func(p peerCase) bool { return p.key() == pc.key() }) {
					out = append(out, pc)
				}
			}
		}
	}
	return out
}

// peerResult is one line of the script's output.
type peerResult struct {
	Shape   string    `json:"shape"`
	DType   string    `json:"dtype"`
	Threads int       `json:"threads"`
	MS      []float64 `json:"ms"`
}

// runPeer runs PyTorch's side of a round: the script under python with
// the cases on stdin. It returns the results by case key and the peer's
// first line (its versions).
func runPeer(python, script string, cases []peerCase, stderr io.Writer) (map[string]timing, string, error) {
	in, err := json.Marshal(cases)
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(python, script)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = stderr
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("-python %s: %w", python, err)
	}
	sc := bufio.NewScanner(outPipe)
	var version string
	got := map[string]timing{}
	for sc.Scan() {
		line := sc.Bytes()
		if version == "" {
			var v struct{ Torch, Python string }
			if err := json.Unmarshal(line, &v); err != nil || v.Torch == "" {
				cmd.Wait()
				return nil, "", fmt.Errorf("PyTorch's side began with %q; want its versions", line)
			}
			version = fmt.Sprintf("%s (Python %s)", v.Torch, v.Python)
			continue
		}
		var r peerResult
		if err := json.Unmarshal(line, &r); err != nil {
			cmd.Wait()
			return nil, "", fmt.Errorf("PyTorch's side printed %q: %w", line, err)
		}
		if len(r.MS) == 0 {
			cmd.Wait()
			return nil, "", fmt.Errorf("PyTorch's side timed no runs of %s %s %d threads", r.Shape, r.DType, r.Threads)
		}
		ds := make([]time.Duration, len(r.MS))
		for i, ms := range r.MS {
			ds[i] = time.Duration(ms * float64(time.Millisecond))
		}
		got[peerCase{Shape: r.Shape, DType: r.DType, Threads: r.Threads}.key()] = summarize(ds)
	}
	if err := cmd.Wait(); err != nil {
		return nil, "", fmt.Errorf("PyTorch's side (%s %s) failed: %w (is torch installed for it? -python picks the interpreter)", python, filepath.Base(script), err)
	}
	for _, pc := range cases {
		if _, ok := got[pc.key()]; !ok {
			return nil, "", fmt.Errorf("PyTorch's side printed nothing for %s", pc.key())
		}
	}
	return got, version, nil
}

// compareRow is one flashgo row with its PyTorch counterpart over the
// rounds: each side's median time a round, and the rounds' ratios.
type compareRow struct {
	shape   shape
	kv      attention.DType
	prec    attention.Precision
	threads int
	kernel  string
	flash   []time.Duration // a round's median
	peer    []time.Duration
}

func (r *compareRow) peerKey() string {
	return peerCase{Shape: r.shape.name, DType: peerDType(r.kv), Threads: r.threads}.key()
}

// ratios are PyTorch's time over flashgo's, round by round.
func (r *compareRow) ratios() []float64 {
	out := make([]float64, len(r.flash))
	for i := range r.flash {
		out[i] = r.peer[i].Seconds() / r.flash[i].Seconds()
	}
	return out
}

// runCompare is the compare subcommand.
func runCompare(args []string, stdout, stderr io.Writer) int {
	c, err := parseCompare(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "attnbench compare:", err)
		fmt.Fprintln(stderr, "run attnbench compare -h for the flags")
		return 2
	}
	dir, err := os.MkdirTemp("", "attnbench-compare")
	if err != nil {
		fmt.Fprintln(stderr, "attnbench compare:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "torch_sdpa.py")
	if err := os.WriteFile(script, torchScript, 0o644); err != nil {
		fmt.Fprintln(stderr, "attnbench compare:", err)
		return 1
	}
	rows, rep, version, err := compareRounds(c, script, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "attnbench compare:", err)
		return 1
	}
	if c.out != "" {
		if err := writeCompareJSON(c, rows, rep, version); err != nil {
			fmt.Fprintln(stderr, "attnbench compare:", err)
			return 1
		}
	}
	writeCompare(c, rows, rep, version, stdout)
	return 0
}

// compareRounds runs the rounds: flashgo's cases, then PyTorch's, each
// round. It returns the rows (flashgo rows with a counterpart), the first
// round's report (its machine and kernels) and PyTorch's version line.
func compareRounds(c compareConfig, script string, stderr io.Writer) ([]*compareRow, *report, string, error) {
	var rows []*compareRow
	var first *report
	var version string
	cases := c.cases()
	prog := newProgress(stderr)
	defer prog.stop()
	prog.setTotal(2 * c.rounds)
	for round := range c.rounds {
		prog.beginCase(1)
		prog.start(fmt.Sprintf("round %d of %d: flashgo", round+1, c.rounds), 1)
		rep, err := bench(c.bench, nil)
		if err != nil {
			return nil, nil, "", fmt.Errorf("round %d, flashgo: %w", round+1, err)
		}
		prog.done()
		prog.beginCase(1)
		prog.start(fmt.Sprintf("round %d of %d: PyTorch", round+1, c.rounds), 1)
		peer, v, err := runPeer(c.python, script, cases, stderr)
		if err != nil {
			return nil, nil, "", fmt.Errorf("round %d: %w", round+1, err)
		}
		prog.done()
		if first == nil {
			first, version = rep, v
			for _, r := range rep.results {
				if peerDType(r.kv) != "" {
					rows = append(rows, &compareRow{shape: r.shape, kv: r.kv, prec: r.prec, threads: r.threads, kernel: r.kernel})
				}
			}
		}
		k := 0
		for _, r := range rep.results {
			if peerDType(r.kv) == "" {
				continue
			}
			row := rows[k]
			k++
			row.flash = append(row.flash, r.flash.median)
			row.peer = append(row.peer, peer[row.peerKey()].median)
		}
	}
	return rows, first, version, nil
}

// spread returns the median, min and max of xs.
func spread(xs []float64) (med, lo, hi float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

func msOf(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Millisecond)
	}
	return out
}

// writeCompare prints the table of the rounds.
func writeCompare(c compareConfig, rows []*compareRow, rep *report, version string, w io.Writer) {
	fmt.Fprintf(w, "attnbench compare %s · %s · %d CPUs · kernel %s · PyTorch %s\n",
		rep.start.UTC().Format("2006-01-02 15:04 UTC"), rep.machine.cpu, rep.machine.cpus, rep.kernel, version)
	fmt.Fprintf(w, "%d interleaved round%s; a side's time is the median of -reps %d runs a round\n\n", c.rounds, plural(c.rounds), c.bench.reps)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	io.WriteString(tw, "shape\tNq\tNkv\tK/V\tprec\tthreads\tflashgo ms (min-max)\tPyTorch\tPyTorch ms (min-max)\tPyTorch/flashgo (min-max)\t\n")
	for _, r := range rows {
		fm, fl, fh := spread(msOf(r.flash))
		pm, pl, ph := spread(msOf(r.peer))
		qm, ql, qh := spread(r.ratios())
		fmt.Fprintf(tw, "%s\t%d\t%d\t%v\t%s\t%d\t%s (%s-%s)\t%s\t%s (%s-%s)\t%.2fx (%.2f-%.2f)\t\n",
			r.shape.name, r.shape.nq, r.shape.nkv, r.kv, precName(r.prec), r.threads,
			fmtMS(fm), fmtMS(fl), fmtMS(fh), peerDType(r.kv), fmtMS(pm), fmtMS(pl), fmtMS(ph), qm, ql, qh)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "PyTorch/flashgo: PyTorch's time over flashgo's in the same round (above 1: flashgo is faster); PyTorch computes in the K/V type, q, k and v alike")
}

// fmtMS formats milliseconds with three significant digits or more.
func fmtMS(ms float64) string {
	switch {
	case ms >= 100:
		return fmt.Sprintf("%.1f", ms)
	case ms >= 1:
		return fmt.Sprintf("%.2f", ms)
	}
	return fmt.Sprintf("%.3f", ms)
}

// writeCompareJSON writes every round's figures to c.out.
func writeCompareJSON(c compareConfig, rows []*compareRow, rep *report, version string) error {
	type jsonRow struct {
		Shape     string    `json:"shape"`
		Nq        int       `json:"nq"`
		Nkv       int       `json:"nkv"`
		KV        string    `json:"kv"`
		Precision string    `json:"precision"`
		Threads   int       `json:"threads"`
		Kernel    string    `json:"kernel"`
		PeerDType string    `json:"peer_dtype"`
		FlashMS   []float64 `json:"flashgo_ms"` // a round's median
		PeerMS    []float64 `json:"pytorch_ms"`
		Ratio     []float64 `json:"pytorch_over_flashgo"`
	}
	out := struct {
		Date    string    `json:"date"`
		CPU     string    `json:"cpu"`
		CPUs    int       `json:"cpus"`
		Kernel  string    `json:"kernel"`
		PyTorch string    `json:"pytorch"`
		Rounds  int       `json:"rounds"`
		Reps    int       `json:"reps"`
		Rows    []jsonRow `json:"rows"`
	}{rep.start.UTC().Format(time.RFC3339), rep.machine.cpu, rep.machine.cpus, rep.kernel, version, c.rounds, c.bench.reps, nil}
	for _, r := range rows {
		out.Rows = append(out.Rows, jsonRow{r.shape.name, r.shape.nq, r.shape.nkv, r.kv.String(), precName(r.prec), r.threads, r.kernel,
			peerDType(r.kv), msOf(r.flash), msOf(r.peer), r.ratios()})
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.out, append(b, '\n'), 0o644)
}
