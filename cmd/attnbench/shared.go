package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/kernel"
)

// -shared-prefix times one decode step of a batch of sequences that share
// a prefix (parallel sampling, a system prompt shared by many requests):
// Engine.ForwardSharedPrefix, which reads the prefix once for every
// sequence and query head, against Engine.ForwardPagedKV over each whole
// sequence (the prefix's blocks listed in every block table), on the same
// paged pools. It also times ForwardSharedPrefix with the prefix packed
// once beforehand (SharedPrefixKV.Packed), as a decode loop over one
// prefix would run it.

// sharedSpec is the case -shared-prefix runs: seqs sequences of prefix
// shared positions followed by suffix positions of their own, one query
// each, heads query heads over kvHeads K/V heads of dimension dim, in
// paged pools of blocks of block positions.
type sharedSpec struct {
	prefix, suffix, seqs int
	heads, kvHeads, dim  int
	block                int
}

// Defaults of -shared-prefix's suffix and sequence count, and of its block
// size without -paged: the target case of ForwardSharedPrefix.
const (
	sharedDefaultSuffix = 256
	sharedDefaultSeqs   = 16
	sharedDefaultBlock  = 16
)

// sharedExclusive are the flags that describe the shapes of the standard
// run, which -shared-prefix replaces by its own.
var sharedExclusive = []string{"shape", "preset", "batch", "nq", "nkv", "causal", "window", "mode", "sweep", "plot", "kvlayout", "naive"}

// parseSharedSpec reads -shared-prefix's value: PREFIX[,SUFFIX[,SEQS]].
func parseSharedSpec(s string) (prefix, suffix, seqs int, err error) {
	var xs []int
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return 0, 0, 0, fmt.Errorf("-shared-prefix has %q; want PREFIX[,SUFFIX[,SEQS]], whole numbers", strings.TrimSpace(f))
		}
		xs = append(xs, x)
	}
	if len(xs) > 3 {
		return 0, 0, 0, fmt.Errorf("-shared-prefix has %d numbers; want PREFIX[,SUFFIX[,SEQS]]", len(xs))
	}
	prefix, suffix, seqs = xs[0], sharedDefaultSuffix, sharedDefaultSeqs
	if len(xs) > 1 {
		suffix = xs[1]
	}
	if len(xs) > 2 {
		seqs = xs[2]
	}
	switch {
	case prefix < 1:
		return 0, 0, 0, fmt.Errorf("-shared-prefix has a prefix of %d positions; want >= 1", prefix)
	case suffix < 1:
		// The step's query is the newest position of its sequence, which
		// is one of its own.
		return 0, 0, 0, fmt.Errorf("-shared-prefix has a suffix of %d positions; want >= 1 (the query's own position is one)", suffix)
	case seqs < 1:
		return 0, 0, 0, fmt.Errorf("-shared-prefix has %d sequences; want >= 1", seqs)
	}
	return prefix, suffix, seqs, nil
}

// parseShared finishes the configuration of a -shared-prefix run: c holds
// the flags every run reads (threads, reps, precisions, format, kernel);
// set says which flags were given.
func parseShared(c config, spec string, set map[string]bool, heads, kvHeads, dim int) (config, error) {
	for _, f := range sharedExclusive {
		if set[f] {
			return config{}, fmt.Errorf("-%s does not apply to -shared-prefix, which times a decode step of its own shape (-heads, -kv-heads, -dim, -paged size it)", f)
		}
	}
	prefix, suffix, seqs, err := parseSharedSpec(spec)
	if err != nil {
		return config{}, err
	}
	if heads < 1 || kvHeads < 1 || dim < 1 || heads%kvHeads != 0 {
		return config{}, fmt.Errorf("-shared-prefix with -heads %d, -kv-heads %d, -dim %d; want positive numbers, -heads a multiple of -kv-heads", heads, kvHeads, dim)
	}
	if c.format == "csv" {
		return config{}, fmt.Errorf("-format csv is not available with -shared-prefix; want table or json")
	}
	for _, p := range c.precisions {
		if p == precQ8Query {
			return config{}, fmt.Errorf("-precision q8q is not available with -shared-prefix; want f32 or bf16")
		}
	}
	if !set["kv"] {
		c.kv, c.decodeKV = []attention.DType{attention.F16}, nil
	}
	block, err := poolShape(c, set, dim, sharedDefaultBlock, "-shared-prefix")
	if err != nil {
		return config{}, err
	}
	if prefix%block != 0 {
		// See newSharedPools: the unshared tables would see the unused
		// tail of the prefix's last block as positions of their own.
		return config{}, fmt.Errorf("-shared-prefix has a prefix of %d positions, which does not fill blocks of %d; want a multiple of the block size (-paged)", prefix, block)
	}
	if c.cpuprofile != "" {
		if err := checkWritable(c.cpuprofile); err != nil {
			return config{}, fmt.Errorf("-cpuprofile %q: %w", c.cpuprofile, err)
		}
	}
	c.shared = &sharedSpec{prefix: prefix, suffix: suffix, seqs: seqs, heads: heads, kvHeads: kvHeads, dim: dim, block: block}
	c.llc = lastLevelCache(sysfsCPU)
	c.avail, c.availSource = availableMemory()
	if need := c.shared.memoryNeed(c); need > c.avail {
		return config{}, fmt.Errorf("-shared-prefix %d,%d,%d needs about %s but only %s is available (%s)",
			prefix, suffix, seqs, gib(need), gib(c.avail), c.availSource)
	}
	return c, nil
}

// Blocks of the prefix and of each suffix, and of the pools.
func (s *sharedSpec) prefixBlocks() int { return ceilDiv(s.prefix, s.block) }
func (s *sharedSpec) suffixBlocks() int { return ceilDiv(s.suffix, s.block) }
func (s *sharedSpec) poolBlocks() int   { return s.prefixBlocks() + s.seqs*s.suffixBlocks() }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// poolElems is the number of elements of one pool (K or V).
func (s *sharedSpec) poolElems() int { return s.poolBlocks() * s.block * s.kvHeads * s.dim }

// copies is the number of copies of the pools that the timed runs rotate
// over: enough for them to exceed twice the last-level cache (at most 8),
// so that no run finds the prefix cached by the run before, as a model's
// layers would not; 1 under -warm.
func (s *sharedSpec) copies(c config, dt attention.DType) int {
	if c.warm {
		return 1
	}
	pools := 2 * float64(s.poolElems()) * elemBytes(dt)
	return max(1, min(8, int(2*float64(c.llc.bytes)/pools)+1))
}

// memoryNeed is about how many bytes a run takes at most: the float32
// values of the pools, the stored copies with their packed prefixes, and
// the oracle's float64 sequence under -check.
func (s *sharedSpec) memoryNeed(c config) float64 {
	var most float64
	for _, dt := range c.kv {
		copies := float64(s.copies(c, dt))
		n := float64(s.poolElems())
		packed := float64(2 * s.prefix * s.kvHeads * s.dim * 4) // float32 K and V panels (bfloat16's take half)
		need := 2*n*4*2 + copies*(2*n*elemBytes(dt)+packed)
		if c.check {
			need += 2 * float64((s.prefix+s.suffix)*s.kvHeads*s.dim) * (8 + 4)
		}
		most = max(most, need)
	}
	return most
}

// sharedResult is one row of a -shared-prefix run: a K/V type, precision
// and thread count.
type sharedResult struct {
	kv       attention.DType
	prec     attention.Precision
	threads  int
	kernel   string
	shared   timing
	packed   *timing // with the prefix packed beforehand; nil where the prefix product reads no panels (few rows)
	unshared timing
	pack     time.Duration // PackedPrefix.Pack of one copy, once (with packed)
	copies   int
	acc      *accuracy // of the shared step's output; nil with -check=off
	accPack  *accuracy // of the packed step's output; nil without packed or -check
}

// speedup is the unshared step's median time over the shared step's.
func (r sharedResult) speedup() float64 {
	return r.unshared.median.Seconds() / r.shared.median.Seconds()
}

// packedSpeedup is the unshared step's median time over the packed one's.
func (r sharedResult) packedSpeedup() float64 {
	return r.unshared.median.Seconds() / r.packed.median.Seconds()
}

// sharedReport is a whole -shared-prefix run.
type sharedReport struct {
	start   time.Time
	spec    sharedSpec
	cpu     string
	cpus    int
	kernel  string
	reps    int
	warm    bool
	llc     llcInfo
	results []sharedResult
}

// sharedPools is one copy of the pools in one storage type, with the
// SharedPrefixKV and the PagedKV of the whole sequences that read it.
type sharedPools struct {
	shared   attention.SharedPrefixKV
	unshared attention.PagedKV
	packed   attention.PackedPrefix
}

// sharedTables returns the block table of the whole sequences, [seqs][pb+sb]
// as a runtime keeps one: the prefix takes the pool's first blocks, which
// every row lists first, and sequence b's own positions the blocks after
// them. The prefix's and the suffixes' tables are views of it.
func (s *sharedSpec) sharedTables() (whole []int32) {
	pb, sb := s.prefixBlocks(), s.suffixBlocks()
	whole = make([]int32, s.seqs*(pb+sb))
	for b := range s.seqs {
		for i := range pb {
			whole[b*(pb+sb)+i] = int32(i)
		}
		for i := range sb {
			whole[b*(pb+sb)+pb+i] = int32(pb + b*sb + i)
		}
	}
	return whole
}

// newSharedPools wraps pool tensors k and v in the step's two views. The
// suffixes start on blocks of their own, as a paged cache shares only
// whole blocks, so the prefix must fill its blocks (parseShared checks
// it): the unshared tables would see the unused tail of a last block that
// it does not fill as positions of their own.
func (s *sharedSpec) newSharedPools(k, v attention.Tensor) *sharedPools {
	wt := s.sharedTables()
	pb, sb := s.prefixBlocks(), s.suffixBlocks()
	sl, wl := make([]int32, s.seqs), make([]int32, s.seqs)
	for b := range s.seqs {
		sl[b], wl[b] = int32(s.suffix), int32(s.prefixBlocks()*s.block+s.suffix)
	}
	return &sharedPools{
		shared: attention.SharedPrefixKV{
			// The first row's first pb columns, and the column slice
			// after them (a view, PagedKV.BlockStride: no copy).
			Prefix: attention.PagedKV{K: k, V: v, BlockTable: wt, MaxBlocks: pb, SeqLens: []int32{int32(s.prefix)}},
			Suffix: attention.PagedKV{K: k, V: v, BlockTable: wt[pb:], MaxBlocks: sb, BlockStride: pb + sb, SeqLens: sl},
		},
		unshared: attention.PagedKV{K: k, V: v, BlockTable: wt, MaxBlocks: pb + sb, SeqLens: wl},
	}
}

// sequence returns sequence b's keys or values (prefix then suffix) from
// the float32 values of a pool, canonical [1, Hkv, n, d].
func (s *sharedSpec) sequence(pool []float32, b int) []float32 {
	l := attention.BSHD(s.poolBlocks(), s.block, s.kvHeads, s.dim)
	n := s.prefix + s.suffix
	out := make([]float32, s.kvHeads*n*s.dim)
	pb, sb := s.prefixBlocks(), s.suffixBlocks()
	for pos := range n {
		blk, slot := pos/s.block, pos%s.block
		if pos >= s.prefix {
			blk, slot = pb+b*sb+(pos-s.prefix)/s.block, (pos-s.prefix)%s.block
		}
		for h := range s.kvHeads {
			copy(out[(h*n+pos)*s.dim:][:s.dim], pool[l.Offset(blk, h, slot):][:s.dim])
		}
	}
	return out
}

// benchShared runs every K/V type, precision and thread count of c's
// -shared-prefix case.
func benchShared(c config, prog *progress) (*sharedReport, error) {
	s := c.shared
	rep := &sharedReport{start: time.Now(), spec: *s, cpu: cpuModel(), cpus: runtime.NumCPU(), reps: c.reps, warm: c.warm, llc: c.llc}
	restore, err := selectKernel(c.kernel)
	if err != nil {
		return nil, err
	}
	defer restore()
	rep.kernel = kernel.Implementation()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	prog.setTotal(len(c.kv) * len(c.precisions) * len(c.threads))
	rng := rand.New(rand.NewPCG(1, 2))
	l := attention.BSHD(s.poolBlocks(), s.block, s.kvHeads, s.dim)
	k32, v32 := randn(rng, l.Span()), randn(rng, l.Span())
	ql := attention.BHSD(s.seqs, s.heads, 1, s.dim)
	q := randn(rng, ql.Span())
	for _, dt := range c.kv {
		runtime.GC() // drop the previous type's pools before storing these
		prog.phase(fmt.Sprintf("shared prefix %v: storing the pools", dt))
		k, v, err := storeKVPair(k32, v32, dt, l)
		if err != nil {
			return nil, err
		}
		pools := []*sharedPools{s.newSharedPools(k.t, v.t)}
		for range s.copies(c, dt) - 1 {
			pools = append(pools, s.newSharedPools(k.clone(), v.clone()))
		}
		var or yardstick
		if c.check {
			prog.phase(fmt.Sprintf("shared prefix %v: float64 oracle", dt))
			if or, err = s.oracle(c, q, k.values, v.values); err != nil {
				return nil, err
			}
		}
		for _, prec := range c.precisions {
			for _, threads := range c.threads {
				label := fmt.Sprintf("shared prefix %v %s, %d thread%s", dt, precName(prec), threads, plural(threads))
				prog.beginCase(1)
				prog.start(label, 1+c.reps)
				r, err := s.benchCase(c, pools, q, ql, dt, prec, threads, or, prog)
				if err != nil {
					return nil, fmt.Errorf("shared prefix %v %s %d threads: %w", dt, precName(prec), threads, err)
				}
				rep.results = append(rep.results, r)
				prog.done()
			}
		}
	}
	return rep, nil
}

// oracle computes the yardstick of sequence 0's query rows: the float64
// oracle of its whole sequence, and the naive baseline's error in each
// precision.
func (s *sharedSpec) oracle(c config, q, k, v []float32) (yardstick, error) {
	or := yardstick{naiveErr: map[attention.Precision]float64{}}
	n := s.prefix + s.suffix
	p := reference.Params{Batch: 1, HeadsQ: s.heads, HeadsKV: s.kvHeads, SeqQ: 1, SeqKV: n, Dim: s.dim, Causal: true}
	sq, sk, sv := q[:s.heads*s.dim], s.sequence(k, 0), s.sequence(v, 0)
	var err error
	if or.want, _, err = reference.Attention(p, reference.Float64s(sq), reference.Float64s(sk), reference.Float64s(sv)); err != nil {
		return or, err
	}
	for _, prec := range c.precisions {
		nv := reference.Naive{BFloat16: prec == attention.PrecisionBFloat16}
		out := make([]float32, p.QLen())
		if err := nv.Attention(p, out, sq, sk, sv); err != nil {
			return or, err
		}
		or.naiveErr[prec] = reference.Compare(out, or.want).MaxAbs
		if prec == attention.PrecisionBFloat16 {
			if or.eb, err = reference.WeightCondition(p, reference.Float64s(sq), reference.Float64s(sk), reference.Float64s(sv)); err != nil {
				return or, err
			}
		}
	}
	return or, nil
}

// benchCase times one precision and thread count: the shared step, the
// packed one (where it applies) and the unshared one, in rounds (one run
// of each per round, each run on the next copy of the pools), so that a
// machine's slow spells fall on all of them alike.
func (s *sharedSpec) benchCase(c config, pools []*sharedPools, q []float32, ql attention.Layout, dt attention.DType,
	prec attention.Precision, threads int, or yardstick, prog *progress) (sharedResult, error) {
	runtime.GOMAXPROCS(threads)
	e, err := attention.NewEngine(attention.Config{Threads: threads})
	if err != nil {
		return sharedResult{}, err
	}
	// The kernel of the prefix product: the stacked rows of every
	// sequence, as a call of seqs query positions.
	r := sharedResult{kv: dt, prec: prec, threads: threads, kernel: rowKernel(shape{heads: s.heads, kvHeads: s.kvHeads, nq: s.seqs}, dt, prec), copies: len(pools)}
	opts := attention.Options{Causal: true, Precision: prec}
	// A prefix product of few rows (all sequences' query rows of a K/V
	// head stacked, one position each) reads K and V rows where they lie
	// in float32 and no panels: ComputedPrecision says float32 for it even
	// in bf16.
	packs := attention.ComputedPrecision(attention.Options{Precision: attention.PrecisionBFloat16}, s.heads, s.kvHeads, s.seqs) == attention.PrecisionBFloat16
	if packs {
		for _, p := range pools {
			if err := e.PackPrefix(&p.packed, p.shared.Prefix, prec); err != nil {
				return r, err
			}
		}
		// The time of a pack (on the case's threads, Engine.PackPrefix) is
		// that of packing again into the memory the first pack allocated:
		// what a runtime pays per prefix once its PackedPrefix is warm,
		// without the first touch of fresh pages (which made the first
		// case's figure 20 times the others').
		t0 := time.Now()
		if err := e.PackPrefix(&pools[0].packed, pools[0].shared.Prefix, prec); err != nil {
			return r, err
		}
		r.pack = time.Since(t0)
	}
	qT := attention.F32Tensor(q, ql)
	outs := [3][]float32{make([]float32, ql.Span()), make([]float32, ql.Span()), make([]float32, ql.Span())}
	steps := []func(p *sharedPools) error{
		func(p *sharedPools) error {
			return e.ForwardSharedPrefix(attention.F32Tensor(outs[0], ql), qT, p.shared, opts)
		},
		func(p *sharedPools) error {
			return e.ForwardPagedKV(attention.F32Tensor(outs[1], ql), qT, p.unshared, opts)
		},
	}
	if packs {
		steps = append(steps, func(p *sharedPools) error {
			kv := p.shared
			kv.Packed = &p.packed
			return e.ForwardSharedPrefix(attention.F32Tensor(outs[2], ql), qT, kv, opts)
		})
	}
	times := make([][]time.Duration, len(steps))
	next := 0
	for rep := -1; rep < c.reps; rep++ { // round -1 is the warm-up
		for i, f := range steps {
			p := pools[next%len(pools)]
			next++
			t0 := time.Now()
			if err := f(p); err != nil {
				return r, err
			}
			if rep >= 0 {
				times[i] = append(times[i], time.Since(t0))
			}
		}
		prog.tick() // a round of every step
	}
	r.shared, r.unshared = summarize(times[0]), summarize(times[1])
	if packs {
		t := summarize(times[2])
		r.packed = &t
	}
	if c.check {
		tol := tolerance(or.naiveErr[prec], or.bf16Floor(prec))
		// Sequence 0's rows: the first Hq of the [seqs, Hq, 1, d] output.
		got := func(out []float32) *accuracy {
			return &accuracy{errs: reference.Compare(out[:s.heads*s.dim], or.want), naiveMaxAbs: or.naiveErr[prec], tolerance: tol}
		}
		r.acc = got(outs[0])
		if packs {
			r.accPack = got(outs[2])
		}
	}
	return r, nil
}

// failed is the number of rows outside the accuracy tolerance.
func (rep *sharedReport) failed() int {
	n := 0
	for _, r := range rep.results {
		if (r.acc != nil && !r.acc.pass()) || (r.accPack != nil && !r.accPack.pass()) {
			n++
		}
	}
	return n
}

// describe is the case in words.
func (s sharedSpec) describe() string {
	return fmt.Sprintf("shared prefix: %d sequences of %d shared + %d own positions, one query each; Hq %d, Hkv %d, d %d; paged blocks of %d",
		s.seqs, s.prefix, s.suffix, s.heads, s.kvHeads, s.dim, s.block)
}

// writeShared prints rep as a table or as JSON.
func writeShared(c config, rep *sharedReport, w io.Writer) error {
	if c.format == "json" {
		return writeSharedJSON(rep, w)
	}
	return writeSharedTable(rep, w)
}

func writeSharedTable(rep *sharedReport, w io.Writer) error {
	fmt.Fprintln(w, wrap(fmt.Sprintf("attnbench %s · %s · %d CPU%s · %s %s/%s · kernel %s",
		rep.start.UTC().Format("2006-01-02 15:04 MST"), rep.cpu, rep.cpus, plural(rep.cpus), runtime.Version(), runtime.GOOS, runtime.GOARCH, rep.kernel), 110, "  "))
	fmt.Fprintln(w, wrap(rep.spec.describe(), 110, "  "))
	fmt.Fprintln(w, wrap(rep.readLine(), 110, "  "))
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	io.WriteString(tw, "K/V\tprec\tthreads\tkernel\tshared ms (min-max)\tpacked ms (min-max)\tunshared ms (min-max)\tspeed-up\tpacked\tpack ms\tmax abs\ttolerance\t\n")
	for _, r := range rep.results {
		fmt.Fprintf(tw, "%v\t%s\t%d\t%s\t%s\t", r.kv, precName(r.prec), r.threads, r.kernel, fmtTiming(r.shared))
		if r.packed != nil {
			fmt.Fprintf(tw, "%s\t", fmtTiming(*r.packed))
		} else {
			fmt.Fprint(tw, "-\t")
		}
		fmt.Fprintf(tw, "%s\t%s\t", fmtTiming(r.unshared), fmtSpeedup(r.speedup()))
		if r.packed != nil {
			fmt.Fprintf(tw, "%s\t%s\t", fmtSpeedup(r.packedSpeedup()), fmtMs(r.pack))
		} else {
			fmt.Fprint(tw, "-\t-\t")
		}
		if r.acc == nil {
			fmt.Fprint(tw, "-\t-\t\n")
			continue
		}
		a := *r.acc
		if r.accPack != nil && r.accPack.errs.MaxAbs > a.errs.MaxAbs {
			a = *r.accPack
		}
		mark := ""
		if !a.pass() {
			mark = "!"
		}
		fmt.Fprintf(tw, "%.1e%s\t%.1e\t\n", a.errs.MaxAbs, mark, a.tolerance)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, l := range []string{
		"shared: ForwardSharedPrefix (the prefix read once for every sequence and query head); packed: the same with the prefix packed " +
			"once beforehand into the panels of the precision's products (SharedPrefixKV.Packed; none where the stacked rows are so few " +
			"that the product reads K and V rows in place), pack ms the time of that packing, once, on the row's threads " +
			"(Engine.PackPrefix); unshared: ForwardPagedKV over each " +
			"whole sequence. " +
			"speed-up: unshared median over shared median; packed: unshared median over packed median.",
		"max abs: the larger error of the shared and packed outputs of sequence 0 against the float64 oracle; tolerance: the project's " +
			"rule (2 × the naive baseline's error in the same precision + 1e-6, + 2·E_b in bf16); ! marks a row outside it.",
	} {
		fmt.Fprintln(w, wrap(l, 100, "  "))
	}
	return nil
}

// readLine says how the timed runs were taken.
func (rep *sharedReport) readLine() string {
	copies := 1
	if len(rep.results) > 0 {
		copies = rep.results[0].copies
	}
	how := fmt.Sprintf("cold: the runs rotate over %d cop%s of the pools (last-level cache %s, %s)",
		copies, map[bool]string{true: "y", false: "ies"}[copies == 1], gib(float64(rep.llc.bytes)), rep.llc.source)
	if rep.warm {
		how = "warm (-warm): every run reads the same pools"
	}
	return fmt.Sprintf("ms: median of %d run%s of each step after a warm-up (fastest-slowest), the steps taken in turn; %s",
		rep.reps, plural(rep.reps), how)
}

// fmtTiming formats a timing as the table's time columns do.
func fmtTiming(t timing) string {
	return fmt.Sprintf("%s (%s-%s)", fmtMs(t.median), fmtMs(t.min), fmtMs(t.max))
}

// The JSON schema of a -shared-prefix run. packed, packed_speedup and
// pack_ms are null on rows without a packed step, check and check_packed
// null with -check=off (check_packed also without a packed step).
type (
	jsonSharedReport struct {
		jsonHeader
		Shape   jsonSharedShape    `json:"shape"`
		LLC     jsonLLC            `json:"llc"`
		WarmKV  bool               `json:"warm_kv"`
		Reps    int                `json:"reps"`
		Results []jsonSharedResult `json:"results"`
	}
	jsonSharedShape struct {
		Prefix    int `json:"prefix"`
		Suffix    int `json:"suffix"`
		Sequences int `json:"sequences"`
		Heads     int `json:"heads"`
		KVHeads   int `json:"kv_heads"`
		Dim       int `json:"dim"`
		Block     int `json:"block"`
	}
	jsonSharedResult struct {
		KV            string      `json:"kv"`
		Precision     string      `json:"precision"`
		Threads       int         `json:"threads"`
		Kernel        string      `json:"kernel"`
		KVCopies      int         `json:"kv_copies"`
		Shared        jsonTiming  `json:"shared_ms"`
		Packed        *jsonTiming `json:"packed_ms"`
		Unshared      jsonTiming  `json:"unshared_ms"`
		Speedup       float64     `json:"speedup"`
		PackedSpeedup *float64    `json:"packed_speedup"`
		PackMs        *float64    `json:"pack_ms"`
		Check         *jsonCheck  `json:"check"`
		CheckPacked   *jsonCheck  `json:"check_packed"`
	}
)

func writeSharedJSON(rep *sharedReport, w io.Writer) error {
	s := rep.spec
	out := jsonSharedReport{
		jsonHeader: newJSONHeader("shared-prefix", rep.start, rep.cpu, rep.cpus, rep.kernel),
		Shape:      jsonSharedShape{Prefix: s.prefix, Suffix: s.suffix, Sequences: s.seqs, Heads: s.heads, KVHeads: s.kvHeads, Dim: s.dim, Block: s.block},
		LLC:        jsonLLC{Bytes: rep.llc.bytes, Source: rep.llc.source}, WarmKV: rep.warm, Reps: rep.reps, Results: []jsonSharedResult{},
	}
	check := func(a *accuracy) *jsonCheck {
		if a == nil {
			return nil
		}
		return &jsonCheck{Full: false, Batches: 1, KVHeads: s.kvHeads, Rows: s.heads, Elements: a.errs.N,
			MaxAbs: a.errs.MaxAbs, MaxRel: a.errs.MaxRel, RMS: a.errs.RMS, NaiveMaxAbs: a.naiveMaxAbs, Tolerance: a.tolerance, Pass: a.pass()}
	}
	for _, r := range rep.results {
		jr := jsonSharedResult{KV: r.kv.String(), Precision: precName(r.prec), Threads: r.threads, Kernel: r.kernel, KVCopies: r.copies,
			Shared: jsonTime(r.shared), Unshared: jsonTime(r.unshared), Speedup: r.speedup(), Check: check(r.acc), CheckPacked: check(r.accPack)}
		if r.packed != nil {
			t := jsonTime(*r.packed)
			jr.Packed, jr.PackedSpeedup, jr.PackMs = &t, ptr(r.packedSpeedup()), ptr(ms(r.pack))
		}
		out.Results = append(out.Results, jr)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// poolShape checks the K/V types of a run over paged pools (-shared-prefix,
// -write) against the head dim dim and returns the pools' block size: -paged
// if set, else def.
func poolShape(c config, set map[string]bool, dim, def int, mode string) (int, error) {
	for _, dt := range c.kv {
		if dt == attention.Q8 && dim%attention.Q8Block != 0 {
			return 0, fmt.Errorf("-kv q8 needs a head dim that is a multiple of %d; -dim is %d", attention.Q8Block, dim)
		}
	}
	block := def
	if set["paged"] {
		block = c.paged
	}
	if block < 1 {
		return 0, fmt.Errorf("-paged is %d; want a block size >= 1 for %s's pools", block, mode)
	}
	return block, nil
}
