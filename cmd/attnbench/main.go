// Command attnbench measures flashgo's attention engine and checks its
// accuracy.
//
// Usage:
//
//	attnbench [flags]               benchmark (the standard shape suite by default)
//	attnbench check [flags]         accuracy grid against the float64 oracle
//	attnbench generate [flags]      run a GGUF model with the engine, report its token rates
//
// Without flags the benchmark runs the standard shape suite
// (shared/anchors/SHAPES.md: P1, P2, P3 at half its sequence length, D1,
// D2) with float32 and fp16 K/V (and q8, int8 with a scale per 32 values,
// for decode), on one thread and on GOMAXPROCS threads, and prints one
// table: median time over the repetitions with the fastest and slowest,
// effective GFLOP/s (FLOPs = 4·B·Hq·Nq·Nkv·d, halved for causal masks) and
// its share of the peak measured at start (prefill rows: the float32 FMA
// peak in float32 precision, the bf16 product peak of the AMX tiles or
// AVX512-BF16 in bf16 precision, none on a machine without either), or
// the K/V bytes read per second and their share of the read bandwidth
// measured at start over buffers of at least 4 × the last-level cache
// (decode), the speed-up over the naive float32 baseline (Sgemm, softmax,
// Sgemm) and the error against the float64 oracle.
//
// Decode runs are cold: each timed run reads the next of several copies of
// the K/V cache, together over twice the last-level cache (read from sysfs,
// 64 MiB when unknown), as a model's layers read theirs; -warm reuses one
// cache, which may then be served from the last-level cache.
//
// -preset NAME[,NAME…] benchmarks the attention of well-known models
// (modelPresets in preset.go: Llama 3, Mistral, Qwen 2.5, Gemma 2, GPT-2, stories260K)
// with their heads, K/V heads, head dimension, sliding window and soft-cap,
// at the sequence lengths of -nq and -nkv (Nq 1, Nkv 4096 under -mode
// decode). -window N applies a causal sliding window of N keys to every
// shape; the oracle and the naive baseline use the same window, and the
// FLOP count covers only the (query, key) pairs it shows.
//
// -shared-prefix PREFIX[,SUFFIX[,SEQS]] times one decode step of SEQS
// sequences (16 by default) that share a prefix of PREFIX positions and
// have SUFFIX (256 by default) of their own, in paged pools:
// Engine.ForwardSharedPrefix, with the prefix packed once beforehand in bf16
// precision (SharedPrefixKV.Packed), against Engine.ForwardPagedKV over each
// whole sequence, the steps timed in turn, with their ratio and the error of
// sequence 0 against the float64 oracle (-format table or json).
//
// -write TOKENS[,TOKENS…] times the pool write of a serving step:
// attention.PagedKV.Write of TOKENS new tokens' float32 keys and values
// into caller-owned pools of each K/V type in vLLM's layout, at slots
// scattered over pools of at least twice the last-level cache, the bytes
// stored per second against the streaming-read bandwidth measured at
// start (-format table or json); -threads splits the tokens between as
// many Write calls at once.
//
// -format json and -format csv print only data on stdout; -sweep runs one
// shape over several sequence lengths and -plot draws the result. The check
// subcommand runs a grid of shapes, masks (sliding windows and a soft-cap
// included), K/V types and every kernel implementation the machine has, and
// exits 1 if any case breaks the project's accuracy rule (max abs error <=
// 2 × the naive baseline's in the same precision + 1e-6, + 2·E_b in bf16).
// The generate subcommand runs a
// Llama-family GGUF model with the engine, printing the text and then the
// prefill and decode rates. Bad flags and impossible or oversized shapes
// exit 2 before any work starts. Run with -h (or check -h, generate -h) for
// every flag.
package main

import (
	"errors"
	"flag"
	"fmt"
	registry "github.com/flashgo/flashgo/internal/impl"
	"io"
	"os"
	"runtime/pprof"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command: it returns the exit status (0 success, 1 a
// failed run or accuracy check, 2 a bad command line).
func run(args []string, stdout, stderr io.Writer) int {
	// A benchmark of a kernel other than the one asked for would be
	// quietly wrong: an unusable FLASHGO_KERNEL is fatal here. The reason
	// is printed here, once, whether or not the kernel package also
	// reports it at start-up.
	if err := registry.EnvError(); err != nil {
		fmt.Fprintln(stderr, "attnbench:", err)
		return 2
	}
	if len(args) > 0 && args[0] == "check" {
		return runCheck(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "generate" {
		return runGenerate(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "compare" {
		return runCompare(args[1:], stdout, stderr)
	}
	c, err := parse(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "attnbench:", err)
		fmt.Fprintln(stderr, "run attnbench -h for the flags")
		return 2
	}
	if c.cpuprofile != "" {
		stop, err := startProfile(c.cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, "attnbench: -cpuprofile:", err)
			return 2
		}
		defer stop()
	}
	if c.shared != nil {
		return runShared(c, stdout, stderr)
	}
	if c.write != nil {
		return runWrite(c, stdout, stderr)
	}
	prog := newProgress(stderr)
	rep, err := bench(c, prog)
	prog.stop()
	if err != nil {
		fmt.Fprintln(stderr, "attnbench:", err)
		return 1
	}
	if err := write(c, rep, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "attnbench:", err)
		return 1
	}
	if c.plot != "" {
		if err := writePlot(c, rep); err != nil {
			fmt.Fprintln(stderr, "attnbench:", err)
			return 1
		}
		if c.format == "table" {
			fmt.Fprintf(stdout, "plot written to %s\n", c.plot)
		}
	}
	failed := 0
	for _, r := range rep.results {
		if r.acc != nil && !r.acc.pass() {
			failed++
		}
	}
	if failed > 0 {
		verb := "are"
		if failed == 1 {
			verb = "is"
		}
		fmt.Fprintf(stderr, "attnbench: %d of %d row%s %s outside the accuracy tolerance\n", failed, len(rep.results), plural(len(rep.results)), verb)
		return 1
	}
	return 0
}

// runShared is run for -shared-prefix: the benchmark of c.shared, its
// report, and exit status 1 if a row is outside the accuracy tolerance.
func runShared(c config, stdout, stderr io.Writer) int {
	prog := newProgress(stderr)
	rep, err := benchShared(c, prog)
	prog.stop()
	if err != nil {
		fmt.Fprintln(stderr, "attnbench:", err)
		return 1
	}
	if err := writeShared(c, rep, stdout); err != nil {
		fmt.Fprintln(stderr, "attnbench:", err)
		return 1
	}
	if n := rep.failed(); n > 0 {
		fmt.Fprintf(stderr, "attnbench: %d of %d row%s outside the accuracy tolerance\n", n, len(rep.results), plural(len(rep.results)))
		return 1
	}
	return 0
}

// runWrite is run for -write: the benchmark of c.write and its report.
func runWrite(c config, stdout, stderr io.Writer) int {
	prog := newProgress(stderr)
	rep, err := benchWrite(c, prog)
	prog.stop()
	if err != nil {
		fmt.Fprintln(stderr, "attnbench:", err)
		return 1
	}
	if err := writeWrite(c, rep, stdout); err != nil {
		fmt.Fprintln(stderr, "attnbench:", err)
		return 1
	}
	return 0
}

// startProfile starts a CPU profile into file and returns the function
// that stops it.
func startProfile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
