package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	registry "github.com/flashgo/flashgo/internal/impl"
	"github.com/flashgo/flashgo/kernel"
)

// The tests of this file cover problems users reported: the kernel
// column, %peak of bf16 rows, where -plot writes, generate's usage line,
// singular counts and the FLASHGO_KERNEL warning.

// f32Kernels and bf16Kernels are what the kernel column says at each
// kernel level: the float32 products of amx and avx512bf16 run on the
// avx512 kernels (kernel/cpu.go), and the bf16 products run on the float32
// kernels of the level, on widened operands, where it has no bf16
// instructions.
var (
	f32Kernels = map[string]string{
		kernel.AMX: kernel.AVX512, kernel.AVX512BF16: kernel.AVX512, kernel.AVX512: kernel.AVX512,
		kernel.AVX2: kernel.AVX2, kernel.NEON: kernel.NEON, kernel.Generic: kernel.Generic,
	}
	bf16Kernels = map[string]string{
		kernel.AMX: "amx", kernel.AVX512BF16: "avx512bf16", kernel.AVX512: "avx512 (widened)",
		kernel.AVX2: "avx2 (widened)", kernel.NEON: "neon (widened)", kernel.Generic: "generic",
	}
)

// setKernel switches the kernels to impl for the rest of the test.
func setKernel(t *testing.T, impl string) {
	t.Helper()
	restore, err := registry.Select(registry.Kernel, impl)
	require.NoError(t, err)
	t.Cleanup(restore)
}

// TestRowKernelNames checks the kernel column's name of each kind of row
// at every level this machine has: an f32 row never names amx or
// avx512bf16, a bf16 row names the implementation of its products.
func TestRowKernelNames(t *testing.T) {
	p1, d1 := suite[0], suite[3]
	require.Equal(t, "P1", p1.name)
	require.Equal(t, "D1", d1.name)
	for _, impl := range kernel.Implementations() {
		t.Run(impl, func(t *testing.T) {
			setKernel(t, impl)
			f32, bf16 := f32Kernels[impl], bf16Kernels[impl]
			require.NotEmpty(t, f32)
			for _, dt := range []attention.DType{attention.F32, attention.F16, attention.BF16, attention.Q8} {
				for _, s := range []shape{p1, d1} {
					assert.Equal(t, f32, rowKernel(s, dt, attention.PrecisionFloat32), "%s %v f32", s.name, dt)
				}
				assert.Equal(t, bf16, rowKernel(p1, dt, attention.PrecisionBFloat16), "P1 %v bf16", dt)
			}
			assert.NotContains(t, f32, "amx")
			assert.NotContains(t, f32, "bf16")
			// A decode row is computed in float32 where the row kernels
			// are SIMD, whatever its K/V type.
			decode := bf16
			if kernel.Current().RowKernels {
				decode = f32
			}
			for _, dt := range []attention.DType{attention.F32, attention.F16, attention.BF16, attention.Q8} {
				assert.Equal(t, decode, rowKernel(d1, dt, attention.PrecisionBFloat16), "D1 %v bf16", dt)
			}
			assert.Equal(t, f32+"+"+registry.Current(registry.Int8Dot), rowKernel(d1, attention.Q8, precQ8Query))
		})
	}
}

// tableRow is a result row of the table: its shape, K/V type, precision,
// kernel cell (which may hold a space: "avx2 (widened)") and %peak cell,
// read from the right, where the columns are single fields.
type tableRow struct {
	shape, kv, prec, kernel, pctPeak string
}

func tableRows(out string) []tableRow {
	var rows []tableRow
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if !isRow(f) {
			continue
		}
		n := len(f) // ... kernel, ms (min-max), GFLOP/s, %peak, GB/s, %BW, vs naive, max abs, max rel
		rows = append(rows, tableRow{shape: f[0], kv: f[3], prec: f[4], kernel: strings.Join(f[6:n-9], " "), pctPeak: f[n-6]})
	}
	return rows
}

// hasBF16Unit reports whether this machine has a bf16 product unit, which
// kernel measures the bf16 peak of: AMX or AVX512-BF16.
func hasBF16Unit() bool {
	bf16 := registry.List(registry.BF16)
	return slices.Contains(bf16, kernel.AMX) || slices.Contains(bf16, kernel.AVX512BF16)
}

// TestRunKernelColumnAndPeak runs f32 and bf16 rows at every kernel level:
// the kernel column names what ran each row's products, and the prefill
// rows have a %peak, f32 rows over the FMA peak and bf16 rows over the bf16
// product peak, whatever the level (bf16 rows once had a %FMA, and went
// over 100 % on the bf16 units), but a bf16 row has none ("-") where the
// machine has no bf16 product unit.
func TestRunKernelColumnAndPeak(t *testing.T) {
	quick(t)
	for _, impl := range kernel.Implementations() {
		t.Run(impl, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append(slices.Clone(tiny), "-precision", "f32,bf16", "-threads", "1", "-naive", "off", "-kernel", impl)
			require.Equal(t, 0, run(args, &stdout, &stderr), "stderr: %s", stderr.String())
			out := stdout.String()
			assert.Contains(t, out, "kernel "+impl+": float32 products "+f32Kernels[impl]+", bf16 products "+bf16Kernels[impl])
			flat := strings.Join(strings.Fields(out), " ") // undo the wrapping
			assert.Contains(t, flat, "%peak: f32 rows over the float32 FMA peak of one core × min(threads, CPUs)")
			if hasBF16Unit() {
				assert.Contains(t, flat, "; bf16 rows over the bf16 product peak (")
				assert.Contains(t, flat, ", bf16 product peak ")
			} else {
				assert.Contains(t, flat, "; bf16 rows: -, this machine has no bf16 product unit")
				assert.Contains(t, flat, "; no bf16 product unit")
			}
			assert.Contains(t, flat, "kernel: the implementation of the row's products: f32 rows, the float32 FMA kernels")
			rows := tableRows(out)
			require.Len(t, rows, 8)
			setKernel(t, impl)
			decode := bf16Kernels[impl] // a decode row: computed in float32 where the row kernels are SIMD
			if kernel.Current().RowKernels {
				decode = f32Kernels[impl]
			}
			for _, r := range rows {
				switch r.prec {
				case "f32":
					assert.Equal(t, f32Kernels[impl], r.kernel, "%+v", r)
				case "bf16":
					if r.shape == "D1/64" {
						assert.Equal(t, decode, r.kernel, "%+v", r)
					} else {
						assert.Equal(t, bf16Kernels[impl], r.kernel, "%+v", r)
					}
				}
				if r.shape == "custom" && (r.prec == "f32" || hasBF16Unit()) {
					x, err := strconv.ParseFloat(r.pctPeak, 64)
					assert.NoError(t, err, "%+v", r)
					assert.GreaterOrEqual(t, x, 0.0, "%+v", r) // 0.0 for generic under -race
				} else {
					assert.Equal(t, "-", r.pctPeak, "%+v", r)
				}
			}
		})
	}
}

// TestRunPeakJSONAndCSV checks that json and csv agree with the table: a
// pct_peak for bf16 rows where the machine has a bf16 product unit, and
// the kernel of each row.
func TestRunPeakJSONAndCSV(t *testing.T) {
	quick(t)
	args := []string{"-shape", "custom", "-heads", "4", "-kv-heads", "2", "-dim", "16", "-nq", "33", "-nkv", "47",
		"-kv", "f32", "-threads", "1", "-reps", "1", "-naive", "off", "-precision", "f32,bf16"}
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(append(args, "-format", "json"), &stdout, &stderr), "stderr: %s", stderr.String())
	var doc struct {
		Notes   []string         `json:"notes"`
		Results []map[string]any `json:"results"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &doc))
	require.Len(t, doc.Results, 2)
	f32, bf16 := doc.Results[0], doc.Results[1]
	assert.Equal(t, "f32", f32["precision"])
	assert.Equal(t, f32Kernel(), f32["kernel"])
	assert.IsType(t, float64(0), f32["pct_peak"])
	assert.Equal(t, "bf16", bf16["precision"])
	assert.Equal(t, bf16Kernel(), bf16["kernel"])
	assert.Contains(t, bf16, "pct_peak")
	if hasBF16Unit() {
		assert.IsType(t, float64(0), bf16["pct_peak"], "a bf16 row is measured against the bf16 product peak")
	} else {
		assert.Nil(t, bf16["pct_peak"], "no bf16 product unit: no peak")
	}
	assert.Contains(t, strings.Join(doc.Notes, "\n"), "%peak: f32 rows over the float32 FMA peak")

	stdout.Reset()
	require.Equal(t, 0, run(append(args, "-format", "csv"), &stdout, &stderr), "stderr: %s", stderr.String())
	records, err := csv.NewReader(&stdout).ReadAll()
	require.NoError(t, err)
	require.Len(t, records, 3)
	col := map[string]int{}
	for i, h := range records[0] {
		col[h] = i
	}
	assert.Equal(t, f32Kernel(), records[1][col["kernel"]])
	assert.NotEmpty(t, records[1][col["pct_peak"]])
	assert.Equal(t, bf16Kernel(), records[2][col["kernel"]])
	assert.Equal(t, hasBF16Unit(), records[2][col["pct_peak"]] != "", "a bf16 row's pct_peak")
}

// TestRunPlotDefaultFile checks that a bare -plot writes
// attnbench-SHAPE.svg in the current directory, and -plot FILE writes FILE.
func TestRunPlotDefaultFile(t *testing.T) {
	quick(t)
	dir := t.TempDir()
	t.Chdir(dir)
	base := []string{"-shape", "custom", "-heads", "2", "-kv-heads", "1", "-dim", "8", "-kv", "f32", "-threads", "1",
		"-reps", "1", "-sweep", "8,16", "-naive", "off", "-check", "off"}
	for _, args := range [][]string{
		append(slices.Clone(base), "-plot"),                     // last
		append([]string{"-plot"}, base...),                      // followed by a flag
		append([]string{"--plot", "-format", "table"}, base...), // double dash
	} {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, "attnbench-custom.svg")))
		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, run(args, &stdout, &stderr), "%v: stderr: %s", args, stderr.String())
		assert.Contains(t, stdout.String(), "plot written to attnbench-custom.svg", "%v", args)
		data, err := os.ReadFile(filepath.Join(dir, "attnbench-custom.svg"))
		require.NoError(t, err, "%v", args)
		assert.Contains(t, string(data), "<svg")
	}
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(append([]string{"-plot", "given.svg"}, base...), &stdout, &stderr), "stderr: %s", stderr.String())
	assert.FileExists(t, filepath.Join(dir, "given.svg"))
	assert.NoDirExists(t, filepath.Join(dir, "docs"))

	assert.Equal(t, "attnbench-p3-2.svg", defaultPlotFile(shape{name: "P3/2"}))
	assert.Equal(t, "attnbench-llama3-8b.svg", defaultPlotFile(shape{name: "llama3-8b"}))
}

// TestBarePlot checks which -plot barePlot takes for a bare one, on a
// flag set like parse's: a string flag takes the next argument, even one
// that starts with "-", and a bool flag none.
func TestBarePlot(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	for _, name := range []string{"shape", "sweep", "plot", "cpuprofile"} {
		fs.String(name, "", "")
	}
	fs.Bool("warm", false, "")
	for _, tt := range []struct{ in, want string }{
		{"-plot", "-plot="},
		{"-plot x.svg", "-plot x.svg"},
		{"-plot=x.svg", "-plot=x.svg"},
		{"-shape P2 -plot -sweep 8", "-shape P2 -plot= -sweep 8"},
		{"-warm -plot", "-warm -plot="},                              // a bool flag takes no value
		{"-cpuprofile -plot -sweep 8", "-cpuprofile -plot -sweep 8"}, // -plot is -cpuprofile's value
		{"stray -plot", "stray -plot"},                               // parsing stops at the first argument
		{"-- -plot", "-- -plot"},
	} {
		assert.Equal(t, strings.Fields(tt.want), barePlot(fs, strings.Fields(tt.in)), tt.in)
	}
}

// TestPlotExamplesOutsideDocs checks that neither the usage nor the
// README's example writes a plot into docs/, where a tracked plot lies.
func TestPlotExamplesOutsideDocs(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"-h"}, &stdout, &stderr))
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	plot := regexp.MustCompile(`-plot\s+([^\s` + "`" + `]+)`)
	for _, text := range []string{stdout.String(), string(readme)} {
		for _, m := range plot.FindAllStringSubmatch(text, -1) {
			assert.NotContains(t, m[1], "docs/", "%q", m[0])
		}
	}
}

// TestGenerateUsageListsFlags checks that generate's usage line names
// every flag generate takes.
func TestGenerateUsageListsFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"generate", "-h"}, &stdout, &stderr))
	usage, defaults, ok := strings.Cut(stdout.String(), "\n\n")
	require.True(t, ok)
	assert.Contains(t, usage, "[-precision f32|bf16]")
	flags := regexp.MustCompile(`(?m)^  -([a-z-]+)`).FindAllStringSubmatch(defaults, -1)
	require.GreaterOrEqual(t, len(flags), 10)
	for _, f := range flags {
		assert.Regexp(t, `[\s\[]-`+regexp.QuoteMeta(f[1])+`[\s\]]`, usage, "usage line lacks -%s", f[1])
	}
}

// pluralOfOne matches a count of one with a plural noun.
var pluralOfOne = regexp.MustCompile(`\b1 (threads|CPUs|runs|rows|cases|kernels|precisions|shapes|types|tokens|blocks|heads|keys)\b`)

// TestSingularCounts checks that counts of one take the singular: "1
// thread", "1 CPU", "1 run", "1 kernel", "1 row", "1 token".
func TestSingularCounts(t *testing.T) {
	rep := &report{start: time.Now(), reps: 1, kernel: "k", f32Kernel: "k", bf16Kernel: "k",
		machine: machine{cpu: "x", cpus: 1, peak: 1, peakISA: "go", bandwidth: map[int]float64{1: 1}}}
	h := strings.Join(rep.header(), "\n")
	for _, want := range []string{" 1 CPU ", "with 1 thread", "median of 1 run after"} {
		assert.Contains(t, h, want)
	}
	rep.machine.cpus, rep.reps, rep.machine.bandwidth = 2, 3, map[int]float64{2: 1}
	h = strings.Join(rep.header(), "\n")
	for _, want := range []string{" 2 CPUs ", "with 2 threads", "median of 3 runs after"} {
		assert.Contains(t, h, want)
	}

	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"check", "-short", "-kernel", "generic", "-precision", "f32"}, &stdout, &stderr), "stdout: %s", stdout.String())
	assert.Contains(t, stdout.String(), "× 1 precision (f32) × 1 kernel (generic) = 90 cases")

	// One row, outside the tolerance.
	quick(t)
	perturb(t, attention.F16)
	stdout.Reset()
	stderr.Reset()
	args := []string{"-shape", "custom", "-heads", "2", "-kv-heads", "1", "-dim", "8", "-nq", "5", "-nkv", "9", "-kv", "f16",
		"-threads", "1", "-reps", "1", "-naive", "off"}
	assert.Equal(t, 1, run(args, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "attnbench: 1 of 1 row is outside the accuracy tolerance")

	assert.NotRegexp(t, pluralOfOne, stdout.String()+stderr.String())
}

// TestGenerateSingularCounts runs generate from BOS alone on one thread:
// "prefill: 1 token", "1 thread".
func TestGenerateSingularCounts(t *testing.T) {
	needStories(t)
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"generate", "-model", storiesModel, "-n", "2", "-threads", "1"}, &stdout, &stderr), "stderr: %s", stderr.String())
	out := stderr.String()
	assert.Contains(t, out, "prefill: 1 token in")
	assert.Contains(t, out, "; 1 thread, kernels "+f32Kernel())
	assert.NotRegexp(t, pluralOfOne, out)
}

// TestKernelEnvError runs the command in a child process whose
// FLASHGO_KERNEL names no implementation: it prints the reason once, as
// "attnbench: ...", whether or not the kernel package also prints it, and
// exits 2 before any work.
func TestKernelEnvError(t *testing.T) {
	if args, ok := os.LookupEnv("ATTNBENCH_TEST_ARGS"); ok {
		os.Exit(run(strings.Fields(args), os.Stdout, os.Stderr))
	}
	for _, args := range []string{"-shape P2", "check -short", "generate -model x.gguf"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKernelEnvError$")
		cmd.Env = append(os.Environ(), "ATTNBENCH_TEST_ARGS="+args, "FLASHGO_KERNEL=sse9")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s: stderr: %s", args, stderr.String())
		assert.Equal(t, 2, exit.ExitCode(), args)
		assert.Empty(t, stdout.String(), args)
		var ours []string
		for _, l := range strings.Split(stderr.String(), "\n") {
			if strings.HasPrefix(l, "attnbench") {
				ours = append(ours, l)
			}
		}
		require.Len(t, ours, 1, "%s: stderr: %s", args, stderr.String())
		assert.True(t, strings.HasPrefix(ours[0], `attnbench: FLASHGO_KERNEL="sse9"`), ours[0])
	}
}
