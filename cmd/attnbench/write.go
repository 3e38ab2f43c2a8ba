package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unsafe"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel"
)

// -write times the pool write of a serving step: PagedKV.Write (vLLM's
// reshape_and_cache) of a step's new keys and values, float32 rows in a
// projection's layout [tokens, Hkv, d], into caller-owned pools in vLLM's
// layout [blocks, block size, Hkv, d] of each K/V type, at slots scattered
// over the pools. With several threads the tokens are split between as
// many goroutines, each writing its share with a Write call of its own
// (disjoint slots), as a runtime writes several sequences or layers at
// once. The figure is the bytes stored per second, against the
// streaming-read bandwidth measured at start with as many threads (the
// read loop of the decode rows' %BW).

// writeSpec is the case -write runs: steps of each of tokens new tokens,
// kvHeads K/V heads of dimension dim, into pools of blocks of block
// positions.
type writeSpec struct {
	tokens       []int
	kvHeads, dim int
	block        int
}

// writeDefaultBlock is the block size of -write's pools without -paged
// (vLLM's default).
const writeDefaultBlock = 16

// writeDefaultKV are the pool types -write runs without -kv: every one.
const writeDefaultKV = "f32,f16,bf16,q8,fp8e4m3,fp8e5m2"

// writeExclusive are the flags that describe the attention calls of the
// other runs, which -write replaces by its own case.
var writeExclusive = []string{"shape", "preset", "batch", "heads", "nq", "nkv", "causal", "window", "mode", "sweep", "plot",
	"kvlayout", "naive", "check", "precision", "shared-prefix"}

// parseWrite finishes the configuration of a -write run: c holds the
// flags every run reads (threads, reps, format, kernel, -warm); set says
// which flags were given.
func parseWrite(c config, spec string, set map[string]bool, kvHeads, dim int) (config, error) {
	for _, f := range writeExclusive {
		if set[f] {
			return config{}, fmt.Errorf("-%s does not apply to -write, which times PagedKV.Write of its own rows (-kv-heads, -dim, -paged size them)", f)
		}
	}
	tokens, err := parseInts("-write", spec)
	if err != nil {
		return config{}, err
	}
	if kvHeads < 1 || dim < 1 {
		return config{}, fmt.Errorf("-write with -kv-heads %d, -dim %d; want positive numbers", kvHeads, dim)
	}
	if c.format == "csv" {
		return config{}, fmt.Errorf("-format csv is not available with -write; want table or json")
	}
	if !set["kv"] {
		c.kv, _ = parseDTypes(writeDefaultKV)
		if dim%attention.Q8Block != 0 {
			c.kv = slices.DeleteFunc(c.kv, func(dt attention.DType) bool { return dt == attention.Q8 })
		}
	}
	c.decodeKV = nil
	block, err := poolShape(c, set, dim, writeDefaultBlock, "-write")
	if err != nil {
		return config{}, err
	}
	if c.cpuprofile != "" {
		if err := checkWritable(c.cpuprofile); err != nil {
			return config{}, fmt.Errorf("-cpuprofile %q: %w", c.cpuprofile, err)
		}
	}
	c.write = &writeSpec{tokens: tokens, kvHeads: kvHeads, dim: dim, block: block}
	c.llc = lastLevelCache(sysfsCPU)
	c.avail, c.availSource = availableMemory()
	if need := c.write.memoryNeed(c); need > c.avail {
		return config{}, fmt.Errorf("-write %s with -kv-heads %d, -dim %d needs about %s but only %s is available (%s)",
			spec, kvHeads, dim, gib(need), gib(c.avail), c.availSource)
	}
	if need := float64(bandwidthBytes(slices.Max(c.threads), c.llc.bytes)); need > c.avail {
		return config{}, fmt.Errorf("measuring the read bandwidth needs %s (at least 4 × the %s last-level cache) but only %s is available (%s)",
			gib(need), gib(float64(c.llc.bytes)), gib(c.avail), c.availSource)
	}
	return c, nil
}

// rowElems is the number of elements of one position's rows of every head
// (K's or V's).
func (s *writeSpec) rowElems() int { return s.kvHeads * s.dim }

// poolBlocks is the number of blocks of the pools of a step of tokens new
// tokens: room for the warm-up and every timed run on slots of their own,
// and cold (without -warm) pools that together exceed twice the
// last-level cache, so that no run finds the rows it writes cached; under
// -warm, room for one step, which every run writes again.
func (s *writeSpec) poolBlocks(c config, dt attention.DType, tokens int) int {
	if c.warm {
		return ceilDiv(tokens, s.block)
	}
	blockBytes := 2 * float64(s.block*s.rowElems()) * elemBytes(dt) // K and V
	return max(ceilDiv(tokens*(c.reps+1), s.block), int(2*float64(c.llc.bytes)/blockBytes)+1)
}

// memoryNeed is about how many bytes a run takes at most: the largest
// pools with the step's float32 rows.
func (s *writeSpec) memoryNeed(c config) float64 {
	var most float64
	for _, dt := range c.kv {
		for _, n := range s.tokens {
			pools := 2 * float64(s.poolBlocks(c, dt, n)*s.block*s.rowElems()) * elemBytes(dt)
			most = max(most, pools+2*4*float64(n*s.rowElems()))
		}
	}
	return most
}

// writeResult is one row of a -write run: a K/V type, step and thread
// count.
type writeResult struct {
	kv      attention.DType
	tokens  int
	threads int
	blocks  int // the pools' blocks
	time    timing
	bw      float64 // the read bandwidth with as many threads, GB/s
}

// stored is the bytes a step stores: K and V elements, Q8 scales
// included.
func (r writeResult) stored(s writeSpec) float64 {
	return 2 * float64(r.tokens*s.rowElems()) * elemBytes(r.kv)
}

// gbps is the bytes stored per second of the median run, in GB/s; moved
// adds the float32 rows read.
func (r writeResult) gbps(s writeSpec) float64 { return r.stored(s) / r.time.median.Seconds() / 1e9 }
func (r writeResult) moved(s writeSpec) float64 {
	return (r.stored(s) + 2*4*float64(r.tokens*s.rowElems())) / r.time.median.Seconds() / 1e9
}

// writeReport is a whole -write run.
type writeReport struct {
	start     time.Time
	spec      writeSpec
	cpu       string
	cpus      int
	kernel    string
	reps      int
	warm      bool
	llc       llcInfo
	bandwidth map[int]float64
	results   []writeResult
}

// newPool returns a pool of blocks blocks in vLLM's layout, of type dt
// (fp8 with attnbench's scale, per pool), every page of it touched: the
// pages of fresh memory are mapped at their first write, which would
// otherwise fall on the timed runs.
func (s *writeSpec) newPool(dt attention.DType, blocks int) attention.Tensor {
	l := attention.BSHD(blocks, s.block, s.kvHeads, s.dim)
	n := l.Span()
	switch dt {
	case attention.F16:
		return attention.F16Tensor(touched(make([]fp16.Float16, n), 0x3c00), l)
	case attention.BF16:
		return attention.BF16Tensor(touched(make([]fp16.BFloat16, n), 0x3f80), l)
	case attention.Q8:
		return attention.Q8Tensor(touched(make([]int8, n), 1), touched(make([]float32, n/attention.Q8Block), 1), l)
	case attention.FP8E4M3:
		return attention.FP8E4M3Tensor(touched(make([]fp16.Float8E4M3, n), 0x38), fp8Scale(dt), l)
	case attention.FP8E5M2:
		return attention.FP8E5M2Tensor(touched(make([]fp16.Float8E5M2, n), 0x3c), fp8Scale(dt), l)
	}
	return attention.F32Tensor(touched(make([]float32, n), 1), l)
}

// touched writes x into every 4 KiB page of s (at least one element in
// each) and returns s.
func touched[T any](s []T, x T) []T {
	step := max(1, 4096/int(unsafe.Sizeof(x)))
	for i := 0; i < len(s); i += step {
		s[i] = x
	}
	return s
}

// benchWrite measures the read bandwidth at each thread count, then runs
// every K/V type, step and thread count of c's -write case.
func benchWrite(c config, prog *progress) (*writeReport, error) {
	s := c.write
	rep := &writeReport{start: time.Now(), spec: *s, cpu: cpuModel(), cpus: runtime.NumCPU(), reps: c.reps, warm: c.warm, llc: c.llc,
		bandwidth: map[int]float64{}}
	for _, n := range c.threads {
		prog.phase(fmt.Sprintf("measuring the read bandwidth with %d thread%s", n, plural(n)))
		rep.bandwidth[n] = measureBandwidth(n, c.llc.bytes)
	}
	restore, err := selectKernel(c.kernel)
	if err != nil {
		return nil, err
	}
	defer restore()
	rep.kernel = kernel.Implementation()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	prog.setTotal(len(c.kv) * len(s.tokens) * len(c.threads))
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range c.kv {
		for _, n := range s.tokens {
			runtime.GC() // drop the previous case's pools before allocating these
			blocks := s.poolBlocks(c, dt, n)
			kv := attention.PagedKV{K: s.newPool(dt, blocks), V: s.newPool(dt, blocks)}
			rl := attention.BSHD(1, n, s.kvHeads, s.dim)
			k, v := randn(rng, rl.Span()), randn(rng, rl.Span())
			// The slots of every run: the first n of a permutation of the
			// pools' slots for the warm-up, the next n for the first timed
			// run, and so on (under -warm the same n every run).
			perm := rng.Perm(blocks * s.block)
			slots := make([]int32, len(perm))
			for i, p := range perm {
				slots[i] = int32(p)
			}
			for _, threads := range c.threads {
				label := fmt.Sprintf("write %v, %d tokens, %d thread%s", dt, n, threads, plural(threads))
				prog.beginCase(1)
				prog.start(label, 1+c.reps)
				t, err := s.benchCase(c, kv, k, v, slots, n, threads, prog)
				if err != nil {
					return nil, fmt.Errorf("write %v %d tokens %d threads: %w", dt, n, threads, err)
				}
				rep.results = append(rep.results, writeResult{kv: dt, tokens: n, threads: threads, blocks: blocks, time: t, bw: rep.bandwidth[threads]})
				prog.done()
			}
		}
	}
	return rep, nil
}

// benchCase times the write of n tokens with threads goroutines: a
// warm-up, then c.reps timed runs, each on the next n slots of slots
// (the first n every time under -warm).
func (s *writeSpec) benchCase(c config, kv attention.PagedKV, k, v []float32, slots []int32, n, threads int, prog *progress) (timing, error) {
	runtime.GOMAXPROCS(threads)
	parts := min(threads, n)
	errs := make([]error, parts)
	row := s.rowElems()
	step := func(run int) error {
		base := 0
		if !c.warm {
			base = run * n
		}
		var wg sync.WaitGroup
		for p := range parts {
			lo, hi := p*n/parts, (p+1)*n/parts
			l := attention.BSHD(1, hi-lo, s.kvHeads, s.dim)
			kp := attention.F32Tensor(k[lo*row:hi*row], l)
			vp := attention.F32Tensor(v[lo*row:hi*row], l)
			sl := slots[base+lo : base+hi]
			wg.Go(func() { errs[p] = kv.Write(kp, vp, sl) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := step(0); err != nil {
		return timing{}, err
	}
	prog.tick()
	times := make([]time.Duration, 0, c.reps)
	for run := 1; run <= c.reps; run++ {
		t0 := time.Now()
		if err := step(run); err != nil {
			return timing{}, err
		}
		times = append(times, time.Since(t0))
		prog.tick()
	}
	return summarize(times), nil
}

// describe is the case in words.
func (s writeSpec) describe() string {
	return fmt.Sprintf("pool write: PagedKV.Write of float32 rows [tokens, Hkv %d, d %d] into pools [blocks, %d, %d, %d] (vLLM's layout) at scattered slots",
		s.kvHeads, s.dim, s.block, s.kvHeads, s.dim)
}

// writeWrite prints rep as a table or as JSON.
func writeWrite(c config, rep *writeReport, w io.Writer) error {
	if c.format == "json" {
		return writeWriteJSON(rep, w)
	}
	return writeWriteTable(rep, w)
}

func writeWriteTable(rep *writeReport, w io.Writer) error {
	s := rep.spec
	fmt.Fprintln(w, wrap(fmt.Sprintf("attnbench %s · %s · %d CPU%s · %s %s/%s · kernel %s",
		rep.start.UTC().Format("2006-01-02 15:04 MST"), rep.cpu, rep.cpus, plural(rep.cpus), runtime.Version(), runtime.GOOS, runtime.GOARCH, rep.kernel), 110, "  "))
	fmt.Fprintln(w, wrap(s.describe(), 110, "  "))
	var bw []string
	for _, n := range sortedKeys(rep.bandwidth) {
		bw = append(bw, fmt.Sprintf("%.1f GB/s with %d thread%s", rep.bandwidth[n], n, plural(n)))
	}
	fmt.Fprintln(w, wrap("streaming read (the read loop, measured now): "+strings.Join(bw, ", "), 110, "  "))
	fmt.Fprintln(w, wrap(rep.runLine(), 110, "  "))
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	io.WriteString(tw, "K/V\ttokens\tthreads\tms (min-max)\tstored GB/s\t%BW\tmoved GB/s\tpool MiB\t\n")
	for _, r := range rep.results {
		pool := 2 * float64(r.blocks*s.block*s.rowElems()) * elemBytes(r.kv) / (1 << 20)
		fmt.Fprintf(tw, "%v\t%d\t%d\t%s\t%.2f\t%s\t%.2f\t%.0f\t\n", r.kv, r.tokens, r.threads, fmtTiming(r.time), r.gbps(s), pct(r.gbps(s), r.bw), r.moved(s), pool)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, wrap("stored GB/s: the bytes a step stores in the pools (2·tokens·Hkv·d·element size; 1.125 bytes for q8, its scales "+
		"included) over the median time; %BW: over the streaming-read bandwidth with as many threads (a read loop over buffers "+
		"of 4 × the last-level cache); moved GB/s: the float32 rows read and the bytes stored; with several threads the tokens "+
		"are split between as many goroutines, each a Write call of its own; pool MiB: K's and V's pools.", 100, "  "))
	return nil
}

// runLine says how the timed runs were taken.
func (rep *writeReport) runLine() string {
	how := fmt.Sprintf("cold: each run writes slots of its own, scattered over pools of at least 2 × the last-level cache (%s, %s)",
		gib(float64(rep.llc.bytes)), rep.llc.source)
	if rep.warm {
		how = "warm (-warm): every run writes the same slots of pools that hold one step"
	}
	return fmt.Sprintf("ms: median of %d run%s after a warm-up (fastest-slowest); %s", rep.reps, plural(rep.reps), how)
}

// The JSON schema of a -write run.
type (
	jsonWriteReport struct {
		jsonHeader
		Shape     jsonWriteShape    `json:"shape"`
		Bandwidth []jsonBandwidth   `json:"bandwidth"`
		LLC       jsonLLC           `json:"llc"`
		WarmKV    bool              `json:"warm_kv"`
		Reps      int               `json:"reps"`
		Results   []jsonWriteResult `json:"results"`
	}
	jsonWriteShape struct {
		KVHeads int `json:"kv_heads"`
		Dim     int `json:"dim"`
		Block   int `json:"block"`
	}
	jsonWriteResult struct {
		KV           string     `json:"kv"`
		Tokens       int        `json:"tokens"`
		Threads      int        `json:"threads"`
		Kernel       string     `json:"kernel"`
		PoolBlocks   int        `json:"pool_blocks"`
		Time         jsonTiming `json:"time_ms"`
		StoredBytes  float64    `json:"stored_bytes"`
		GBps         float64    `json:"gbps"`          // bytes stored per second
		PctBandwidth *float64   `json:"pct_bandwidth"` // null where the read loop measured nothing
		MovedGBps    float64    `json:"moved_gbps"`    // float32 rows read and bytes stored per second
	}
)

func writeWriteJSON(rep *writeReport, w io.Writer) error {
	s := rep.spec
	out := jsonWriteReport{
		jsonHeader: newJSONHeader("write", rep.start, rep.cpu, rep.cpus, rep.kernel),
		Shape:      jsonWriteShape{KVHeads: s.kvHeads, Dim: s.dim, Block: s.block},
		Bandwidth:  []jsonBandwidth{}, LLC: jsonLLC{Bytes: rep.llc.bytes, Source: rep.llc.source}, WarmKV: rep.warm, Reps: rep.reps,
		Results: []jsonWriteResult{},
	}
	for _, n := range sortedKeys(rep.bandwidth) {
		out.Bandwidth = append(out.Bandwidth, jsonBandwidth{Threads: n, GBps: rep.bandwidth[n]})
	}
	for _, r := range rep.results {
		jr := jsonWriteResult{KV: r.kv.String(), Tokens: r.tokens, Threads: r.threads, Kernel: rep.kernel,
			PoolBlocks: r.blocks, Time: jsonTime(r.time), StoredBytes: r.stored(s), GBps: r.gbps(s), MovedGBps: r.moved(s)}
		if r.bw > 0 {
			jr.PctBandwidth = ptr(100 * r.gbps(s) / r.bw)
		}
		out.Results = append(out.Results, jr)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
