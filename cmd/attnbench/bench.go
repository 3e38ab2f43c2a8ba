package main

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	registry "github.com/flashgo/flashgo/internal/impl"
	"github.com/flashgo/flashgo/kernel"
)

// result is one row of the benchmark: a shape, a K/V type and a thread count.
type result struct {
	shape   shape
	kv      attention.DType
	prec    attention.Precision
	threads int
	kernel  string
	flash   timing
	naive   *timing   // nil with -naive=off
	acc     *accuracy // nil with -check=off
	// peak is the GFLOP/s a prefill row is measured against (one core's
	// peak × min(threads, CPUs)): the float32 FMA peak for f32 rows and
	// for bf16 rows computed in float32 (attention.ComputedPrecision), the
	// bf16 product peak for other bf16 rows (whatever kernel runs their
	// products: the peak is the machine's); 0 (no %peak) for those where
	// the machine has no bf16 product unit, and for q8q rows, whose Q·Kᵀ
	// runs in integer dot products.
	peak   float64
	bw     float64 // GB/s the row is measured against (decode only)
	caches int     // K/V caches the timed runs rotate over (1: the same one every run)
	capped bool    // caches is fewer than cold reads want (kvCaches)
}

// gflops is the effective rate of the engine.
func (r result) gflops() float64 { return r.shape.flops() / r.flash.median.Seconds() / 1e9 }

// gbps is the rate at which the engine reads K and V.
func (r result) gbps() float64 { return r.shape.kvBytes(r.kv) / r.flash.median.Seconds() / 1e9 }

// speedup is the naive baseline's median time over the engine's.
func (r result) speedup() float64 { return r.naive.median.Seconds() / r.flash.median.Seconds() }

// accuracy is the comparison of one row's output with the float64 oracle.
type accuracy struct {
	sub         subProblem
	errs        reference.Errors
	naiveMaxAbs float64 // the naive baseline's max abs error on the same sub-problem, in the same precision
	tolerance   float64 // the project's pass rule: see tolerance
}

func (a accuracy) pass() bool { return a.errs.MaxAbs <= a.tolerance }

// tolerance is the project's accuracy rule (docs/math.md, Sections 5 and
// 8): at most twice the error of the naive baseline in the same precision
// (float32, or bfloat16 operands with float32 accumulation), plus 1e-6,
// plus in bfloat16 twice the weight-rounding term E_b
// (reference.WeightCondition; pass 0 in float32). The float32 rule's
// condition term E_κ is left out: attnbench's inputs are unit-normal, for
// which it is far below 1e-6.
func tolerance(naiveMaxAbs, eb float64) float64 { return 2*naiveMaxAbs + 1e-6 + 2*eb }

// report is a whole benchmark run.
type report struct {
	start   time.Time
	machine machine
	kernel  string // the kernel level (kernel.Implementation, -kernel)
	// f32Kernel runs the float32 products: the level, or avx512 for the
	// amx and avx512bf16 levels (f32Kernel).
	f32Kernel string
	// bf16Kernel runs the products of the bf16 rows: amx, avx512bf16,
	// "avx512 (widened)", "avx2 (widened)" or "neon (widened)" (the float32
	// kernels of that level on widened operands), or generic (portable Go).
	bf16Kernel string
	reps       int
	results    []result
	notes      []string
	llc        llcInfo // the last-level cache assumed
	warm       bool    // -warm: decode runs reuse one K/V cache
}

// peakTime is how long each peak (FMA, bf16 product) is measured (tests
// shorten it).
var peakTime = 200 * time.Millisecond

// bench measures the machine, then runs every case of c in order:
// shapes, then K/V types, then thread counts.
func bench(c config, prog *progress) (*report, error) {
	rep := &report{start: time.Now(), reps: c.reps, llc: c.llc, warm: c.warm}
	m := machine{cpu: cpuModel(), cpus: runtime.NumCPU(), bandwidth: map[int]float64{}}
	prog.phase("measuring the FMA peak")
	m.peak, m.peakISA = registry.Peak(peakTime)
	prog.phase("measuring the bf16 product peak")
	m.bf16Peak, m.bf16PeakISA = registry.PeakBF16(peakTime)
	if hasDecode(c.shapes) {
		for _, n := range c.threads {
			prog.phase(fmt.Sprintf("measuring the read bandwidth with %d thread%s", n, plural(n)))
			m.bandwidth[n] = measureBandwidth(n, c.llc.bytes)
		}
	}
	rep.machine = m
	// The yardsticks are measured with the best kernels; -kernel applies to
	// the benchmark itself.
	restore, err := selectKernel(c.kernel)
	if err != nil {
		return nil, err
	}
	defer restore()
	rep.kernel, rep.f32Kernel, rep.bf16Kernel = kernel.Implementation(), f32Kernel(), bf16Kernel()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))

	for _, n := range c.threads {
		if n > m.cpus {
			rep.notes = append(rep.notes, fmt.Sprintf("%d threads is more than the %d CPU%s: the threads share cores", n, m.cpus, plural(m.cpus)))
		}
	}
	prog.setTotal(c.cases())
	for si, s := range c.shapes {
		if err := benchShape(c, rep, s, uint64(si), prog); err != nil {
			return nil, fmt.Errorf("shape %s: %w", s.name, err)
		}
	}
	return rep, nil
}

// benchShape runs every K/V type and thread count of one shape.
func benchShape(c config, rep *report, s shape, seed uint64, prog *progress) error {
	runtime.GC() // drop the previous shape's arrays before allocating these
	in := newShapeInputs(c, s, seed)
	kvs := c.kvFor(s)
	if s.decode() && c.decodeKV != nil && !slices.Contains(kvs, attention.Q8) && slices.Contains(c.decodeKV, attention.Q8) {
		rep.notes = append(rep.notes, fmt.Sprintf("%s: no q8 row, its head dim %d is not a multiple of %d", s.name, s.dim, attention.Q8Block))
	}
	for _, dt := range kvs {
		if err := benchKVType(c, rep, in, dt, prog); err != nil {
			return err
		}
	}
	return nil
}

// shapeInputs is what every case of one shape shares: its random float32
// inputs and their layouts, the output buffers, the sub-problem the
// oracle checks and the naive baseline's timings.
type shapeInputs struct {
	s                 shape
	p                 reference.Params
	q, k32, v32       []float32
	qLayout, kvLayout attention.Layout
	out               []float32
	naiveOut          []float32 // nil without -naive
	sub               subProblem
	// naiveTimes holds the baseline's timing by thread count: it is
	// float32 whatever the K/V type, so it is timed once per thread count.
	naiveTimes map[int]*timing
}

func newShapeInputs(c config, s shape, seed uint64) *shapeInputs {
	p := s.params()
	rng := rand.New(rand.NewPCG(1, seed))
	in := &shapeInputs{s: s, p: p, q: randn(rng, p.QLen())}
	in.k32, in.v32 = randn(rng, p.KVLen()), randn(rng, p.KVLen())
	in.qLayout = attention.BHSD(s.batch, s.heads, s.nq, s.dim)
	in.kvLayout = attention.BHSD(s.batch, s.kvHeads, s.nkv, s.dim)
	in.out = make([]float32, p.QLen())
	if c.naive {
		in.naiveOut = make([]float32, p.QLen())
	}
	in.sub = pickSub(s)
	in.naiveTimes = map[int]*timing{}
	return in
}

// swapHS returns x, [b][h][s][d], as [b][s][h][d].
func swapHS(x []float32, b, h, s, d int) []float32 {
	out := make([]float32, len(x))
	for bi := range b {
		for hi := range h {
			for si := range s {
				copy(out[((bi*s+si)*h+hi)*d:][:d], x[((bi*h+hi)*s+si)*d:][:d])
			}
		}
	}
	return out
}

// benchKVType runs every precision and thread count of one shape with K
// and V stored as dt.
func benchKVType(c config, rep *report, in *shapeInputs, dt attention.DType, prog *progress) error {
	runtime.GC() // drop the previous type's K/V caches
	kv := &kvRun{dt: dt}
	var err error
	if c.kvBSHD {
		// The tensors in [B, S, H, D]; the values the oracle and the naive
		// baseline read stay in [B, H, S, D].
		s := in.s
		l := attention.BSHD(s.batch, s.nkv, s.kvHeads, s.dim)
		if kv.k, kv.v, err = storeKVPair(swapHS(in.k32, s.batch, s.kvHeads, s.nkv, s.dim), swapHS(in.v32, s.batch, s.kvHeads, s.nkv, s.dim), dt, l); err != nil {
			return err
		}
		kv.k.values = swapHS(kv.k.values, s.batch, s.nkv, s.kvHeads, s.dim)
		kv.v.values = swapHS(kv.v.values, s.batch, s.nkv, s.kvHeads, s.dim)
	} else if kv.k, kv.v, err = storeKVPair(in.k32, in.v32, dt, in.kvLayout); err != nil {
		return err
	}
	if kv.calls, kv.capped, err = rotatingCalls(c, rep, in, kv.k, kv.v, dt, prog); err != nil {
		return err
	}
	or, err := runOracle(c, in, kv.k, kv.v, dt, prog)
	if err != nil {
		return err
	}
	for _, cs := range cases(c.precisions, c.threads) {
		if !runsWith(cs.prec, dt) {
			continue
		}
		r, err := benchCase(c, rep, in, kv, cs, or, prog)
		if err != nil {
			return err
		}
		rep.results = append(rep.results, r)
	}
	return nil
}

// kvRun is one K/V type of a shape: K and V stored as dt and the calls
// that the timed runs rotate over.
type kvRun struct {
	dt     attention.DType
	k, v   kvData
	calls  []*call
	capped bool // fewer calls than cold reads want (kvCaches)
}

// rotatingCalls builds the calls that the timed runs make: calls[i] reads
// the i-th copy of K and V, and a decode run rotates over them
// (kvCaches), each timed run reading the next, so that it reads from
// memory rather than the last-level cache. capped reports fewer copies
// than that needs.
func rotatingCalls(c config, rep *report, in *shapeInputs, k, v kvData, dt attention.DType, prog *progress) (calls []*call, capped bool, err error) {
	s := in.s
	nCaches, capped := kvCaches(c, s, dt)
	if capped {
		rep.notes = append(rep.notes, fmt.Sprintf("%s %v: %d K/V caches of %s rotate, reading %s in all, not over 2 × the %s last-level cache (limits: 3/4 of the available memory, and for a window 4 × the last-level cache): some reads may hit it",
			s.name, dt, nCaches, gib(s.cacheBytes(dt)), gib(float64(nCaches)*s.kvBytes(dt)), gib(float64(c.llc.bytes))))
	}
	if nCaches > 1 {
		prog.phase(fmt.Sprintf("%s %v: %d copies of the K/V cache", s.name, dt, nCaches))
	}
	calls = make([]*call, nCaches)
	for i := range calls {
		cl := &call{out: in.out, outT: attention.F32Tensor(in.out, in.qLayout), qT: attention.F32Tensor(in.q, in.qLayout), kT: k.t, vT: v.t, opts: s.options()}
		switch {
		case c.paged > 0:
			var err error
			if cl.paged, cl.seqs, err = pagedKV(s, in.k32, in.v32, dt, c.paged); err != nil {
				return nil, false, err
			}
		case i > 0:
			cl.kT, cl.vT = k.clone(), v.clone()
		}
		calls[i] = cl
	}
	return calls, capped, nil
}

// yardstick is what the accuracy check measures a row against: the
// float64 oracle's answer to the shape's sub-problem, and the error of the
// naive baseline in each precision on it.
type yardstick struct {
	want     []float64 // nil without -check
	naiveErr map[attention.Precision]float64
	eb       float64 // E_b of the sub-problem, for the bfloat16 rule
}

// bf16Floor returns the E_b term of the rule of precision prec.
func (or yardstick) bf16Floor(prec attention.Precision) float64 {
	if prec == attention.PrecisionBFloat16 {
		return or.eb
	}
	return 0
}

// runOracle computes the yardstick of in's sub-problem with K and V as
// stored in dt, when -check asks for it.
func runOracle(c config, in *shapeInputs, k, v kvData, dt attention.DType, prog *progress) (yardstick, error) {
	or := yardstick{naiveErr: map[attention.Precision]float64{}}
	if !c.check {
		return or, nil
	}
	s, sub := in.s, in.sub
	prog.phase(fmt.Sprintf("%s %v: float64 oracle", s.name, dt))
	sp := sub.params(s)
	sq, sk, sv := sub.subQ(s, in.q), sub.subKV(s, k.values), sub.subKV(s, v.values)
	var err error
	or.want, _, err = reference.Attention(sp, reference.Float64s(sq), reference.Float64s(sk), reference.Float64s(sv))
	if err != nil {
		return or, err
	}
	for _, prec := range c.precisions {
		if !runsWith(prec, dt) {
			continue
		}
		// The yardstick of each precision: naive attention in it.
		n := reference.Naive{BFloat16: prec == attention.PrecisionBFloat16}
		nout := make([]float32, sp.QLen())
		nq, err := naiveQueries(prec, sq, sp.Dim)
		if err != nil {
			return or, err
		}
		if err := n.Attention(sp, nout, nq, sk, sv); err != nil {
			return or, err
		}
		or.naiveErr[prec] = reference.Compare(nout, or.want).MaxAbs
		if prec == attention.PrecisionBFloat16 {
			if or.eb, err = reference.WeightCondition(sp, reference.Float64s(sq), reference.Float64s(sk), reference.Float64s(sv)); err != nil {
				return or, err
			}
		}
	}
	return or, nil
}

// benchCase times one precision and thread count of a shape and K/V
// type: the engine over the rotating calls, its accuracy against the
// yardstick, and the naive baseline the first time a thread count comes up.
func benchCase(c config, rep *report, in *shapeInputs, kv *kvRun, cs precThreads, or yardstick, prog *progress) (result, error) {
	s, prec, threads := in.s, cs.prec, cs.threads
	dt, calls := kv.dt, kv.calls
	for _, cl := range calls {
		setPrecision(&cl.opts, prec)
	}
	label := fmt.Sprintf("%s %v %s %dT", s.name, dt, precName(prec), threads)
	// GOMAXPROCS follows the thread count for both paths, so that the
	// naive baseline (gonum spreads large products over goroutines)
	// gets the same cores as the engine.
	runtime.GOMAXPROCS(threads)
	eng, err := attention.NewEngine(attention.Config{Threads: threads})
	if err != nil {
		return result{}, err
	}
	r := result{shape: s, kv: dt, prec: prec, threads: threads, kernel: rowKernel(s, dt, prec), caches: len(calls), capped: kv.capped}
	// A bf16 row computed in float32 (few query rows) is measured against
	// the FMA peak, as an f32 row is.
	switch attention.ComputedPrecision(attention.Options{Precision: prec}, s.heads, s.kvHeads, s.nq) {
	case attention.PrecisionFloat32:
		r.peak = rep.machine.threadPeak(rep.machine.peak, threads)
	case attention.PrecisionBFloat16:
		r.peak = rep.machine.threadPeak(rep.machine.bf16Peak, threads) // 0 without a bf16 product unit
	}
	if s.decode() {
		r.bw = rep.machine.bandwidth[threads]
	}
	runtime.GC()
	parts := 1
	if c.naive && in.naiveTimes[threads] == nil {
		parts = 2
	}
	prog.beginCase(parts)
	prog.start(label+" flashgo", 1+c.reps)
	next := 0
	r.flash, err = timeIt(c.reps, func() error {
		cl := calls[next%len(calls)]
		next++
		return forward(eng, cl)
	}, prog.tick)
	if err != nil {
		return result{}, err
	}
	if c.check {
		// The oracle saw cache 0's values; the copies hold the same,
		// but the output checked is cache 0's all the same.
		if (next-1)%len(calls) != 0 {
			if err := forward(eng, calls[0]); err != nil {
				return result{}, err
			}
		}
		r.acc = &accuracy{sub: in.sub, errs: reference.Compare(in.sub.subQ(s, in.out), or.want), naiveMaxAbs: or.naiveErr[prec], tolerance: tolerance(or.naiveErr[prec], or.bf16Floor(prec))}
	}
	if c.naive {
		if in.naiveTimes[threads] == nil {
			var n reference.Naive
			prog.start(label+" naive", 1+c.reps)
			t, err := timeNaive(c.reps, func() error { return n.Attention(in.p, in.naiveOut, in.q, kv.k.values, kv.v.values) }, prog.tick)
			if err != nil {
				return result{}, err
			}
			in.naiveTimes[threads] = &t
		}
		r.naive = in.naiveTimes[threads]
	}
	prog.done()
	return r, nil
}

// threadPeak is the peak that threads threads can reach, given perCore,
// the peak of one core (m.peak or m.bf16Peak): perCore times the threads,
// but no more cores than the machine has.
func (m machine) threadPeak(perCore float64, threads int) float64 {
	cores := threads
	if m.cpus > 0 {
		cores = min(threads, m.cpus)
	}
	return perCore * float64(cores)
}

// precThreads is one (precision, thread count) case of a shape and K/V
// type.
type precThreads struct {
	prec    attention.Precision
	threads int
}

// cases lists the precisions × thread counts in run order: every thread
// count of a precision, then the next precision.
func cases(precs []attention.Precision, threads []int) []precThreads {
	var cs []precThreads
	for _, p := range precs {
		for _, t := range threads {
			cs = append(cs, precThreads{p, t})
		}
	}
	return cs
}

// selectKernel makes the kernel implementation name (-kernel) current
// until restore is called; with no name it changes nothing.
func selectKernel(name string) (restore func(), err error) {
	if name == "" {
		return func() {}, nil
	}
	return registry.Select(registry.Kernel, name)
}
