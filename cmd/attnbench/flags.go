package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/kernel"
)

// config is what the flags of a benchmark run ask for, validated.
type config struct {
	shapes     []shape           // in the order asked, after -mode and -sweep
	kv         []attention.DType // K/V types: -kv's for every shape, or without -kv those of the prefill shapes
	decodeKV   []attention.DType // without -kv, the K/V types of the decode shapes (see kvFor); nil with -kv
	threads    []int
	reps       int
	naive      bool
	check      bool
	format     string // table, json or csv
	sweep      []int  // sequence lengths, or nil
	plot       string // output file of the sweep plot, or ""
	cpuprofile string
	kernel     string                // kernel implementation to switch to, or "" for the default
	precisions []attention.Precision // -precision: the compute precisions each case runs in

	// warm times every decode run on one K/V cache (-warm) rather than
	// rotating over copies that together exceed twice llc (see kvCaches).
	warm bool
	llc  llcInfo // the last-level cache, read from sysfs at parse time

	// paged is the block size of the PagedCache that every run reads K/V
	// through (Engine.ForwardPaged, a sequence per batch entry), or 0 for
	// contiguous tensors (Engine.Forward).
	paged int

	// kvBSHD lays K and V out as [batch, seq, K/V heads, dim] (-kvlayout
	// bshd: llama.cpp's cache, a flat [seq][kvHeads·headDim] one) instead
	// of [batch, K/V heads, seq, dim].
	kvBSHD bool

	// shared is the case of -shared-prefix, which replaces the shapes by
	// one decode step of sequences that share a prefix (shared.go), or nil.
	shared *sharedSpec

	// write is the case of -write, which replaces the shapes by the pool
	// write of a serving step (PagedKV.Write, write.go), or nil.
	write *writeSpec

	// avail is the memory the run may use in bytes (availableMemory, read
	// once at parse time) and availSource where that figure comes from.
	avail       float64
	availSource string
}

// The K/V storage types run without -kv: q8 only for decode, the case it
// is meant for (a q8 prefill spends its time dequantising K and V).
const (
	defaultKV       = "f32,f16"
	defaultDecodeKV = "f32,f16,q8"
)

// kvFor is the list of K/V types shape s runs with: -kv's, or without -kv
// the default of the shape's mode, less q8 where the head dimension is not
// a multiple of attention.Q8Block (q8 scales whole blocks of a row).
func (c config) kvFor(s shape) []attention.DType {
	if !s.decode() || c.decodeKV == nil {
		return c.kv
	}
	if s.dim%attention.Q8Block == 0 {
		return c.decodeKV
	}
	return slices.DeleteFunc(slices.Clone(c.decodeKV), func(dt attention.DType) bool { return dt == attention.Q8 })
}

// cases is the number of rows the run measures: shapes × their K/V types ×
// precisions × thread counts.
func (c config) cases() int {
	n := 0
	for _, s := range c.shapes {
		for _, dt := range c.kvFor(s) {
			for _, p := range c.precisions {
				if runsWith(p, dt) {
					n += len(c.threads)
				}
			}
		}
	}
	return n
}

// onOff is a boolean flag written as a value: -naive off, -naive=on, and
// the usual true and false. It is not a bool flag, so "-naive off" reads
// "off" as the flag's value rather than as a stray argument.
type onOff bool

func (b *onOff) String() string {
	if b != nil && bool(*b) {
		return "on"
	}
	return "off"
}

func (b *onOff) Set(s string) error {
	switch strings.ToLower(s) {
	case "on", "true", "1", "yes":
		*b = true
	case "off", "false", "0", "no":
		*b = false
	default:
		return fmt.Errorf("want on or off")
	}
	return nil
}

// customFlags are the flags that describe -shape custom; presetFlags are
// those of them that also size -preset's shapes.
var (
	customFlags = []string{"batch", "heads", "kv-heads", "dim", "nq", "nkv", "causal"}
	presetFlags = []string{"batch", "nq", "nkv"}
)

const usageHead = `usage: attnbench [flags]
       attnbench check [-short] [-kernel NAMES] [-precision LIST] [-threads N] [-v]
       attnbench generate -model FILE [flags]
       attnbench compare [-rounds N] [-python CMD] [-out FILE] [flags]

attnbench measures flashgo's fused attention engine: for each shape, K/V
storage type and thread count it prints the median time over -reps runs
(after one warm-up) with the fastest and slowest, the effective GFLOP/s
(FLOPs = 4·B·Hq·Nq·Nkv·d; without -window a causal shape's FLOPs follow
the shape suite's convention and are halved, but decode rows (Nq = 1) are
not halved; with -window only the visible (query, key) pairs count,
4·B·Hq·d × their number) and its share of the machine's peak (prefill
rows: the float32 FMA peak for f32 precision, the bf16 product peak, AMX
or AVX512-BF16, for bf16 precision), or the K/V bytes read per
second and their share of the measured streaming-read bandwidth (decode,
Nq = 1), the speed-up over the naive float32 baseline (Sgemm, softmax,
Sgemm) and the error against the float64 oracle. The FMA and bf16 product
peaks of one core and the read bandwidth at each thread count (over
buffers of at least 4 × the last-level cache) are measured at start.

Decode runs are cold, as a model's layers are: each timed run reads the
next of several copies of the K/V cache, as many as it takes for them
to exceed 2 × the last-level cache (at least 2, within 3/4 of the
available memory), so that no run finds its K/V still cached; the header
says how many and the cache size assumed (cpu0's last level in sysfs, or
64 MiB). -warm times every run on one cache instead.

Without flags it runs the standard shape suite (P1, P2, P3 at half its
sequence length, D1, D2) with f32 and f16 K/V (f32, f16 and q8 for
decode) on 1 thread and GOMAXPROCS threads: about 35 s on an idle
two-core machine (minutes on a busy one), with about 1 GiB of memory at
its peak, most of it the copies of the K/V cache that cold decode reads.

-shared-prefix PREFIX[,SUFFIX[,SEQS]] replaces the shapes by one decode
step of SEQS sequences (default 16) sharing a prefix of PREFIX positions,
SUFFIX (default 256) of their own each: ForwardSharedPrefix, and the same
with the prefix packed once beforehand (PackedPrefix, packed on the row's
threads by Engine.PackPrefix, whose time is reported, in the precision of
the step, where its prefix product packs tiles at all: not where it
stacks 16 rows or fewer a K/V head, which read K and V in place), against
ForwardPagedKV over each whole sequence, timed in turn, with the ratio.

-write TOKENS[,TOKENS...] replaces the shapes by the pool write of a serving
step: PagedKV.Write (vLLM's reshape_and_cache) of TOKENS new tokens' float32
keys and values into pools of each -kv type (default all six) in vLLM's
layout, at slots scattered over pools of at least 2 × the last-level cache
(-warm: one step), the bytes stored per second against the read loop's
bandwidth; -threads N splits the tokens between N Write calls at once.

"attnbench check" runs a grid of shapes, masks, K/V types and every kernel
implementation of the machine against the float64 oracle and exits 1 if any
case is less accurate than the project's rule allows (max abs error <=
2 × the naive baseline's in the same precision + 1e-6, + 2·E_b in bf16,
docs/math.md); "attnbench check -h" says more.
"attnbench generate" runs a GGUF model with the engine and reports its
prefill and decode rates; "attnbench generate -h" says more.
"attnbench compare" times the same cases with PyTorch's
scaled_dot_product_attention in interleaved rounds and prints the ratios;
"attnbench compare -h" says more.

Examples:
  attnbench -shape P1 -threads 1,2 -kv f32,f16,bf16
  attnbench -mode decode -kv f16,q8 -warm
  attnbench -shape D2 -kv f16 -paged 16
  attnbench -shape D2 -kv f16,q8 -precision f32,q8q -threads 1
  attnbench -shape D2 -kv f16 -kvlayout bshd
  attnbench -shape P1,P3 -kv bf16 -precision f32,bf16 -threads 1
  attnbench -shape custom -heads 16 -kv-heads 4 -dim 64 -nq 1 -nkv 4096
  attnbench -preset llama3-8b,gemma2-9b -mode decode
  attnbench -shape P1,D1 -window 512
  attnbench -shared-prefix 8192,256,16 -precision f32,bf16 -threads 1,max
  attnbench -write 64,512 -kv f16,q8,fp8e4m3 -threads 1,max
  attnbench -shape P2 -sweep 128,256,512,1024,2048 -plot p2.svg
  attnbench -format json -naive=off > results.json

Flags:
`

// parse reads the flags of a benchmark run. Any error it returns is a
// usage error, which run reports with exit code 2 before any work starts;
// for -h it prints the usage to help and returns flag.ErrHelp.
func parse(args []string, help io.Writer) (config, error) {
	fs := flag.NewFlagSet("attnbench", flag.ContinueOnError)
	maxThreads := runtime.GOMAXPROCS(0)
	defThreads := "1"
	if maxThreads > 1 {
		defThreads = fmt.Sprintf("1,%d", maxThreads)
	}
	shapeList := fs.String("shape", defaultShapes, "comma-separated `list` of shapes: the suite's "+suiteNames()+"; NAME/k divides the sequence\n"+
		"lengths by k (only Nkv for decode); \"full\" is the suite at full size; \"custom\" takes its sizes\n"+
		"from -batch, -heads, -kv-heads, -dim, -nq, -nkv and -causal")
	batch := fs.Int("batch", 1, "custom and preset shapes: batch size")
	heads := fs.Int("heads", 32, "custom shape: query heads (Hq), a multiple of -kv-heads")
	kvHeads := fs.Int("kv-heads", 8, "custom shape: key/value heads (Hkv)")
	dim := fs.Int("dim", 128, "custom shape: head dimension (d)")
	nq := fs.Int("nq", 1024, "custom and preset shapes: query rows (Nq); 1 makes it a decode shape")
	nkv := fs.Int("nkv", 1024, "custom and preset shapes: keys (Nkv)")
	causal := fs.Bool("causal", true, "custom shape: causal mask, aligned to the bottom right (query i sees key j iff j <= i + Nkv - Nq)")
	kvList := fs.String("kv", "", "comma-separated storage `types` of K and V: f32, f16, bf16, q8 (int8 with a float32 scale per\n"+
		"32 values of a row; the head dim must be a multiple of 32), fp8e4m3 and fp8e5m2 (OCP 8-bit floats with\n"+
		"one float32 scale per tensor, as vLLM's fp8 caches; attnbench's K and V both use 0.02 for E4M3 and\n"+
		"0.0003 for E5M2, x/scale rounded to nearest even, saturating) (default "+defaultKV+", and "+defaultDecodeKV+" for\n"+
		"decode shapes, less q8 where the head dim is not a multiple of 32)")
	warm := fs.Bool("warm", false, "decode: time every run on the same K/V cache, which may stay in the last-level cache,\n"+
		"instead of rotating over copies that together exceed 2 × that cache")
	paged := fs.Int("paged", 0, "read K and V through an attention.PagedCache of blocks of `N` positions (ForwardPaged, one\n"+
		"sequence per batch entry, grown a block at a time beside another sequence, so that no two of its\n"+
		"blocks are neighbours) instead of contiguous tensors (0)")
	kvLayout := fs.String("kvlayout", "bhsd", "`layout` of the K and V tensors: bhsd ([batch, K/V heads, seq, dim], each head's rows\n"+
		"together) or bshd ([batch, seq, K/V heads, dim], every head of a position together: llama.cpp's cache)")
	threadList := fs.String("threads", defThreads, "comma-separated thread `counts`; each sets GOMAXPROCS and the engine's Threads (\"max\" = GOMAXPROCS)")
	reps := fs.Int("reps", 5, "timed repetitions after one warm-up; the median, fastest and slowest are reported")
	mode := fs.String("mode", "all", "shapes to run, by `mode`: prefill (Nq > 1), decode (Nq = 1) or all")
	naive := onOff(true)
	fs.Var(&naive, "naive", "time the naive float32 baseline (on or off); it runs at ~5 GFLOP/s, so a shape where one\n"+
		"run takes over a second is timed once, cold, and others with as many runs (up to -reps)\n"+
		"as fit in two seconds")
	check := onOff(true)
	fs.Var(&check, "check", "compare the output with the float64 oracle (on or off); big shapes are checked on a\n"+
		"sub-problem: the last batch entry, the last 2 K/V heads with their query heads and\n"+
		"the last 64 query rows, against all the keys")
	format := fs.String("format", "table", "output `format`: table, json or csv (json and csv put only data on stdout)")
	sweep := fs.String("sweep", "", "comma-separated sequence `lengths` to run one shape over (Nq = Nkv for prefill, Nkv for decode)")
	plotFile := fs.String("plot", "", "with -sweep: draw GFLOP/s (GB/s for decode) against sequence length for flashgo and the naive\n"+
		"baseline into `file`, an .svg or .png; -plot alone (followed by another flag or by nothing) writes\n"+
		"attnbench-SHAPE.svg in the current directory")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run to `file` (go tool pprof reads it)")
	presetList := fs.String("preset", "", "comma-separated model `presets` to run as custom-style shapes with the model's Hq, Hkv and d,\n"+
		"and the window, soft-cap and scale of its layer 0; B, Nq and Nkv come from -batch, -nq and -nkv\n"+
		fmt.Sprintf("(under -mode decode they default to Nq %d, Nkv %d). Without -shape only the presets run. Names:", presetDecodeNq, presetDecodeNkv)+
		presetHelp())
	window := fs.Int("window", 0, "apply a causal sliding window of `N` keys, the query's own included (key j is hidden from query\n"+
		"i iff i' - j >= N, i' = i + Nkv - Nq), to every shape, a preset's own included; GFLOP/s then counts\n"+
		"the visible query-key pairs exactly and GB/s the keys some query sees (default: none)")
	precList := fs.String("precision", "f32", "comma-separated compute `precisions` of the products Q·Kᵀ and P·V: f32 (float32 FMA) and bf16\n"+
		"(bfloat16 operands, float32 accumulation: AMX or AVX512-BF16 where the CPU has them, else the float32\n"+
		"kernels on operands widened to float32), and q8q (float32 with the queries quantised to Q8 and Q·Kᵀ in\n"+
		"integer dot products, Options.QuantizeQuery: VPDPBUSD on AVX512-VNNI or AVX-VNNI, VPMADDUBSW on AVX2; only with -kv q8);\n"+
		"each runs every case")
	sharedPrefix := fs.String("shared-prefix", "", "time a decode step of sequences that share a prefix, `PREFIX[,SUFFIX[,SEQS]]`: SEQS sequences\n"+
		"(default 16) of PREFIX shared positions (a multiple of the block size) and SUFFIX (default 256) of their own;\n"+
		"ForwardSharedPrefix, also with the prefix packed once (PackedPrefix), against ForwardPagedKV over each whole\n"+
		"sequence; sized by -heads, -kv-heads, -dim, -kv (default f16) and -paged (the block size, default 16)")
	writeList := fs.String("write", "", "time the pool write of a serving step instead, `TOKENS[,TOKENS…]` new tokens a step: PagedKV.Write of\n"+
		"float32 rows [tokens, Hkv, d] into pools in vLLM's layout at scattered slots, the bytes stored per second against\n"+
		"the streaming-read bandwidth; sized by -kv-heads, -dim, -kv (default every type) and -paged (the block size,\n"+
		"default 16); -threads splits the tokens between as many Write calls at once")
	kernelName := fs.String("kernel", "", "run with the kernel implementation `name`: one of "+strings.Join(kernel.Implementations(), ", ")+" (default: the best, "+kernel.Implementation()+")")
	// The flag package prints its own errors and the usage on any error;
	// run prints one line instead, and the usage only when asked for it.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(barePlot(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(help)
			fmt.Fprint(help, usageHead)
			fs.PrintDefaults()
			return config{}, err
		}
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q (flags come before arguments; the subcommands are check, generate and compare, given first)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	c := config{reps: *reps, naive: bool(naive), check: bool(check), cpuprofile: *cpuprofile, warm: *warm, paged: *paged}
	switch strings.ToLower(*kvLayout) {
	case "bhsd":
	case "bshd":
		c.kvBSHD = true
		if c.paged > 0 {
			return c, fmt.Errorf("-kvlayout bshd and -paged %d: a paged cache has a layout of its own", c.paged)
		}
	default:
		return c, fmt.Errorf("-kvlayout is %q; want bhsd or bshd", *kvLayout)
	}
	if c.reps < 1 {
		return config{}, fmt.Errorf("-reps is %d; want >= 1", c.reps)
	}
	if c.paged < 0 {
		return config{}, fmt.Errorf("-paged is %d; want a block size >= 1, or 0 for contiguous K/V", c.paged)
	}
	var err error
	if set["kv"] {
		if c.kv, err = parseDTypes(*kvList); err != nil {
			return config{}, err
		}
	} else {
		c.kv, _ = parseDTypes(defaultKV)
		c.decodeKV, _ = parseDTypes(defaultDecodeKV)
	}
	if c.precisions, err = parsePrecisions(*precList, true); err != nil {
		return config{}, err
	}
	if c.threads, err = parseThreads(*threadList, maxThreads); err != nil {
		return config{}, err
	}
	switch c.format = strings.ToLower(*format); c.format {
	case "table", "json", "csv":
	default:
		return config{}, fmt.Errorf("-format is %q; want table, json or csv", *format)
	}
	if *kernelName != "" {
		if !slices.Contains(kernel.Implementations(), *kernelName) {
			return config{}, fmt.Errorf("-kernel is %q; this machine has %s", *kernelName, strings.Join(kernel.Implementations(), ", "))
		}
		c.kernel = *kernelName
	}

	if set["shared-prefix"] && set["write"] {
		return config{}, fmt.Errorf("-shared-prefix and -write are two runs of their own; want one of them")
	}
	if set["shared-prefix"] {
		return parseShared(c, *sharedPrefix, set, *heads, *kvHeads, *dim)
	}
	if set["write"] {
		return parseWrite(c, *writeList, set, *kvHeads, *dim)
	}
	if set["window"] && *window < 1 {
		return config{}, fmt.Errorf("-window is %d; want a window of >= 1 keys (the query's own included)", *window)
	}
	custom := shape{name: "custom", batch: *batch, heads: *heads, kvHeads: *kvHeads, dim: *dim, nq: *nq, nkv: *nkv, causal: *causal, scaled: 1}
	list := *shapeList
	var presets []shape
	if set["preset"] {
		pnq, pnkv := *nq, *nkv
		if strings.EqualFold(*mode, "decode") {
			if !set["nq"] {
				pnq = presetDecodeNq
			}
			if !set["nkv"] {
				pnkv = presetDecodeNkv
			}
		}
		if presets, err = presetShapes(*presetList, *batch, pnq, pnkv); err != nil {
			return config{}, err
		}
		if !set["shape"] {
			list = ""
		}
	}
	if c.shapes, err = resolveShapes(list, custom, presets, set); err != nil {
		return config{}, err
	}
	if *window > 0 {
		for i := range c.shapes {
			c.shapes[i].window = *window
		}
	}
	if c.shapes, err = filterMode(c.shapes, *mode, strings.Join(shapeNames(c.shapes), ",")); err != nil {
		return config{}, err
	}
	if *sweep != "" {
		if c.sweep, err = parseInts("-sweep", *sweep); err != nil {
			return config{}, err
		}
		if c.shapes, err = sweepShapes(c.shapes, c.sweep); err != nil {
			return config{}, err
		}
	}
	if set["plot"] {
		if c.sweep == nil {
			return config{}, fmt.Errorf("-plot draws a sweep; add -sweep with the sequence lengths, e.g. -sweep 256,512,1024")
		}
		file := *plotFile
		if file == "" {
			file = defaultPlotFile(c.shapes[0])
		}
		switch strings.ToLower(filepath.Ext(file)) {
		case ".svg", ".png":
		default:
			return config{}, fmt.Errorf("-plot %q: want a file name ending in .svg or .png", file)
		}
		c.plot = file
	}
	for _, f := range []struct{ flag, path string }{{"-cpuprofile", c.cpuprofile}, {"-plot", c.plot}} {
		if f.path == "" {
			continue
		}
		if err := checkWritable(f.path); err != nil {
			return config{}, fmt.Errorf("%s %q: %w", f.flag, f.path, err)
		}
	}
	if c.decodeKV == nil && slices.Contains(c.kv, attention.Q8) {
		for _, s := range c.shapes {
			if s.dim%attention.Q8Block != 0 {
				return config{}, fmt.Errorf("-kv q8 needs a head dim that is a multiple of %d; shape %s has d %d", attention.Q8Block, s.name, s.dim)
			}
		}
	}
	if err := checkQ8Query(c); err != nil {
		return config{}, err
	}
	c.llc = lastLevelCache(sysfsCPU)
	c.avail, c.availSource = availableMemory()
	if err := checkMemory(c); err != nil {
		return config{}, err
	}
	return c, nil
}

// barePlot returns args with a bare -plot, one followed by another flag
// or by nothing, written as -plot= (an empty file name, which parse
// replaces by defaultPlotFile), so that -plot FILE still takes the next
// argument as its file. It walks the flags as fs will parse them, a flag
// that is not boolean and has no "=value" taking the next argument as its
// value, and stops where fs stops: at "--" or the first argument that is
// not a flag.
func barePlot(fs *flag.FlagSet, args []string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		switch {
		case hasValue:
		case name == "plot":
			if i+1 == len(out) || strings.HasPrefix(out[i+1], "-") {
				out[i] = "-plot="
			} else {
				i++ // the file
			}
		default:
			if f := fs.Lookup(name); f != nil {
				if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
					i++ // the flag's value
				}
			}
		}
	}
	return out
}

// defaultPlotFile is the file of a bare -plot: attnbench-SHAPE.svg in the
// current directory, the shape's name in lower case with any character
// other than a letter, digit, '.', '-' or '_' replaced by '-' ("P3/2":
// attnbench-p3-2.svg).
func defaultPlotFile(s shape) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '-'
	}, strings.ToLower(s.name))
	return "attnbench-" + name + ".svg"
}

// checkWritable reports whether the file path may be written, so that a
// bad output path fails before the run rather than after it: its directory
// must exist, and the file must be one that opens for writing (an existing
// one is left as it is) or, if there is none, one that can be created there
// (it is created and removed).
func checkWritable(path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("may not be written: directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("may not be written: %s is not a directory", dir)
	}
	fi, err = os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return errors.New("may not be written: it is a directory; want a file name")
	case err == nil:
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("may not be written: %w", err)
		}
		return f.Close()
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("may not be written: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return fmt.Errorf("may not be written: %w", err)
	}
	f.Close()
	return os.Remove(path)
}

// parseThreads reads a comma-separated list of thread counts; "max" stands
// for GOMAXPROCS. Repeats are dropped.
func parseThreads(s string, maxThreads int) ([]int, error) {
	fields, err := splitFlag("-threads", s)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range fields {
		n := maxThreads
		if f != "max" {
			var err error
			n, err = strconv.Atoi(f)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("-threads has %q; want positive integers (or max) separated by commas", f)
			}
			if n > 1024 {
				return nil, fmt.Errorf("-threads has %d; want at most 1024", n)
			}
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-threads is empty; want positive integers separated by commas")
	}
	return out, nil
}

// parseInts reads a comma-separated list of distinct positive integers.
func parseInts(flagName, s string) ([]int, error) {
	fields, err := splitFlag(flagName, s)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s has %q; want positive integers separated by commas", flagName, f)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("%s has %d twice", flagName, n)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s is empty; want positive integers separated by commas", flagName)
	}
	return out, nil
}

// resolveShapes turns the -shape list into shapes: suite names (scaled or
// not), the aliases, and "custom" from the custom-shape flags, followed by
// the presets' shapes. A custom-shape flag is refused when no custom shape
// (or, for -batch, -nq and -nkv, no preset) is asked for. Every shape is
// validated.
func resolveShapes(list string, custom shape, presets []shape, set map[string]bool) ([]shape, error) {
	names, err := splitFlag("-shape", list)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 && len(presets) == 0 {
		return nil, fmt.Errorf("-shape is empty")
	}
	var shapes []shape
	hasCustom := false
	for _, name := range names {
		if alias, ok := shapeAliases[strings.ToLower(name)]; ok {
			for _, n := range splitList(alias) {
				s, err := lookupShape(n)
				if err != nil {
					return nil, err
				}
				shapes = append(shapes, s)
			}
			continue
		}
		if strings.EqualFold(name, "custom") {
			hasCustom = true
			shapes = append(shapes, custom)
			continue
		}
		s, err := lookupShape(name)
		if err != nil {
			return nil, err
		}
		shapes = append(shapes, s)
	}
	shapes = append(shapes, presets...)
	if !hasCustom {
		for _, f := range customFlags {
			if !set[f] || (len(presets) > 0 && slices.Contains(presetFlags, f)) {
				continue
			}
			if len(presets) > 0 {
				return nil, fmt.Errorf("-%s describes a custom shape; add -shape custom (a preset's heads, head dim and mask are the model's)", f)
			}
			return nil, fmt.Errorf("-%s describes a custom shape; add -shape custom (the suite's shapes have fixed sizes)", f)
		}
	}
	for _, s := range shapes {
		if err := s.validate(); err != nil {
			return nil, err
		}
	}
	return shapes, nil
}

func shapeNames(shapes []shape) []string {
	names := make([]string, len(shapes))
	for i, s := range shapes {
		names[i] = s.name
	}
	return names
}

// filterMode keeps the shapes of a -mode: prefill, decode or all.
func filterMode(shapes []shape, mode, list string) ([]shape, error) {
	switch m := strings.ToLower(mode); m {
	case "all":
		return shapes, nil
	case "prefill", "decode":
		var kept []shape
		for _, s := range shapes {
			if s.mode() == m {
				kept = append(kept, s)
			}
		}
		if len(kept) == 0 {
			return nil, fmt.Errorf("-mode %s leaves none of the shapes %s (decode shapes have Nq = 1)", m, list)
		}
		return kept, nil
	}
	return nil, fmt.Errorf("-mode is %q; want prefill, decode or all", mode)
}

// sweepShapes runs the one shape asked for over the swept lengths.
func sweepShapes(shapes []shape, lengths []int) ([]shape, error) {
	if len(shapes) != 1 {
		return nil, fmt.Errorf("-sweep runs one shape over several lengths; -shape gives %d (pick one with -shape NAME or -shape custom)", len(shapes))
	}
	out := make([]shape, 0, len(lengths))
	for _, n := range lengths {
		s := shapes[0].withSeq(n)
		if err := s.validate(); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// parsePrecisions reads the comma-separated value of a -precision flag,
// each precision at most once: f32 (or float32) and bf16 (or bfloat16),
// and where q8q is true also q8q (attnbench's float32 with quantised
// queries, which only the benchmark runs). Its errors list what the
// command takes.
func parsePrecisions(list string, q8q bool) ([]attention.Precision, error) {
	want := "f32 or bf16"
	if q8q {
		want = "f32, bf16 or q8q"
	}
	fields, err := splitFlag("-precision", list)
	if err != nil {
		return nil, err
	}
	var ps []attention.Precision
	for _, name := range fields {
		var p attention.Precision
		switch strings.ToLower(name) {
		case "f32", "float32":
			p = attention.PrecisionFloat32
		case "bf16", "bfloat16":
			p = attention.PrecisionBFloat16
		case "q8q":
			if !q8q {
				return nil, fmt.Errorf("-precision has q8q, which only the benchmark runs (with -kv q8); want %s", want)
			}
			p = precQ8Query
		default:
			return nil, fmt.Errorf("-precision has %q; want %s", name, want)
		}
		if slices.Contains(ps, p) {
			return nil, fmt.Errorf("-precision names %s twice", precName(p))
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("-precision is empty; want %s, separated by commas", want)
	}
	return ps, nil
}

// precName is the short name of a precision in flags and tables.
func precName(p attention.Precision) string {
	switch p {
	case attention.PrecisionBFloat16:
		return "bf16"
	case precQ8Query:
		return "q8q"
	}
	return "f32"
}

// precQ8Query is attnbench's precision q8q: float32 with
// Options.QuantizeQuery, the queries quantised to Q8 and Q·Kᵀ computed in
// integer dot products. It runs only with Q8 keys (-kv q8); its accuracy
// yardstick is naive float32 attention on the queries so quantised.
const precQ8Query = attention.Precision(0x80)

// setPrecision sets the options of precision p (one of parsePrecisions').
func setPrecision(o *attention.Options, p attention.Precision) {
	o.Precision, o.QuantizeQuery = p, false
	if p == precQ8Query {
		o.Precision, o.QuantizeQuery = attention.PrecisionFloat32, true
	}
}

// checkQ8Query refuses a run that asks for q8q where no case has Q8 keys:
// every q8q row would be dropped (runsWith), leaving an empty table.
func checkQ8Query(c config) error {
	if !slices.Contains(c.precisions, precQ8Query) {
		return nil
	}
	for _, s := range c.shapes {
		if slices.Contains(c.kvFor(s), attention.Q8) {
			return nil
		}
	}
	var kv []string
	for _, dt := range c.kv {
		kv = append(kv, dt.String())
	}
	return fmt.Errorf("-precision q8q quantises the queries against Q8 keys, and no case here has them (K/V %s); add q8 to -kv", strings.Join(kv, ", "))
}

// runsWith reports whether precision p runs with K/V type dt.
func runsWith(p attention.Precision, dt attention.DType) bool {
	return p != precQ8Query || dt == attention.Q8
}

// naiveQueries returns the queries that the naive yardstick of precision
// p reads: q, or for q8q every row of d values quantised to Q8 and back
// (d is a multiple of Q8Block wherever q8q runs).
func naiveQueries(p attention.Precision, q []float32, d int) ([]float32, error) {
	if p != precQ8Query {
		return q, nil
	}
	out := make([]float32, len(q))
	data, scales := make([]int8, d), make([]float32, (d+attention.Q8Block-1)/attention.Q8Block)
	for r := 0; r+d <= len(q); r += d {
		if err := attention.QuantizeQ8(data, scales, q[r:r+d]); err != nil {
			return nil, err
		}
		if err := attention.DequantizeQ8(out[r:r+d], data, scales); err != nil {
			return nil, err
		}
	}
	return out, nil
}
