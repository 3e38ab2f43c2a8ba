package main

import (
	"bufio"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel"
)

// timing summarises n timed runs.
type timing struct {
	median, min, max time.Duration
	n                int  // number of timed runs
	cold             bool // the single run was also the first (no warm-up)
}

// timeIt runs f once to warm up, then reps times, and returns the median,
// fastest and slowest of the timed runs. tick is called after every run.
func timeIt(reps int, f func() error, tick func()) (timing, error) {
	if err := f(); err != nil {
		return timing{}, err
	}
	tick()
	ds := make([]time.Duration, reps)
	for i := range ds {
		t0 := time.Now()
		if err := f(); err != nil {
			return timing{}, err
		}
		ds[i] = time.Since(t0)
		tick()
	}
	return summarize(ds), nil
}

func summarize(ds []time.Duration) timing {
	slices.Sort(ds)
	n := len(ds)
	med := ds[n/2]
	if n%2 == 0 {
		med = ds[n/2-1] + (ds[n/2]-ds[n/2-1])/2
	}
	return timing{median: med, min: ds[0], max: ds[n-1], n: n}
}

// The naive baseline runs at a few GFLOP/s, so it is timed on a budget: a
// shape where one (cold) run takes naiveSlow or more is reported from that
// single run; otherwise the first run is the warm-up and as many runs as fit
// in naiveBudget (at least 1, at most reps) are timed.
const (
	naiveSlow   = 1 * time.Second
	naiveBudget = 2 * time.Second
)

// timeNaive times f under the naive baseline's budget.
func timeNaive(reps int, f func() error, tick func()) (timing, error) {
	t0 := time.Now()
	if err := f(); err != nil {
		return timing{}, err
	}
	first := time.Since(t0)
	tick()
	if first >= naiveSlow {
		return timing{median: first, min: first, max: first, n: 1, cold: true}, nil
	}
	n := min(reps, max(1, int(naiveBudget/max(first, time.Microsecond))))
	ds := make([]time.Duration, n)
	for i := range ds {
		t0 := time.Now()
		if err := f(); err != nil {
			return timing{}, err
		}
		ds[i] = time.Since(t0)
		tick()
	}
	return summarize(ds), nil
}

// machine is what is measured about the computer before the benchmark.
type machine struct {
	cpu     string
	cpus    int
	peak    float64 // GFLOP/s of one core's FMA loop
	peakISA string
	// bf16Peak is the GFLOP/s of one core's bf16 product loop, bf16PeakISA
	// its instructions (amx, avx512bf16); 0 and "" where the machine has
	// no bf16 product unit.
	bf16Peak    float64
	bf16PeakISA string
	bandwidth   map[int]float64 // streaming-read GB/s by thread count
}

// cpuModel returns the model name from /proc/cpuinfo, or GOARCH.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// bandwidthBuffer is the size of the buffer each thread reads to measure
// the streaming bandwidth, up to four threads (tests shrink it); the
// buffers together are also at least 4 × the last-level cache.
var bandwidthBuffer = 256 << 20

// bandwidthBytes is the total size of the buffers read to measure the
// streaming bandwidth with n threads: bandwidthBuffer each up to four
// threads, then 4·bandwidthBuffer shared, but at least 8 MiB each, and at
// least 4 × llc (the last-level cache's bytes) in all, so that the reads
// come from memory.
func bandwidthBytes(n int, llc int64) int {
	per := min(bandwidthBuffer, max(8<<20, 4*bandwidthBuffer/n))
	per = max(per, int((4*llc+int64(n)-1)/int64(n)))
	per = (per + 63) &^ 63 // whole cache lines of float32s
	return per * n
}

// measureBandwidth returns the streaming-read bandwidth in GB/s with n
// goroutines, each reading its own buffer with kernel.Max (a plain vector
// read loop): the best of five passes after a warm-up pass. llc is the
// last-level cache's size in bytes (see bandwidthBytes).
func measureBandwidth(n int, llc int64) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
	per := bandwidthBytes(n, llc) / n / 4
	bufs := make([][]float32, n)
	var wg sync.WaitGroup
	for i := range bufs {
		wg.Go(func() {
			b := make([]float32, per)
			for j := range b {
				b[j] = 1 // touch every page: untouched pages all map to one zero page
			}
			bufs[i] = b
		})
	}
	wg.Wait()
	best := 0.0
	maxes := make([]float32, n)
	for pass := range 6 {
		t0 := time.Now()
		for i, b := range bufs {
			wg.Go(func() { maxes[i] = kernel.Max(b) })
		}
		wg.Wait()
		if gbps := float64(n*per*4) / time.Since(t0).Seconds() / 1e9; pass > 0 {
			best = max(best, gbps)
		}
		for _, m := range maxes {
			if m != 1 { // every element is 1: anything else means the loop did not read the buffer
				return 0
			}
		}
	}
	bufs = nil
	runtime.GC()
	debug.FreeOSMemory()
	return best
}

// subProblem is the part of a shape that is checked against the oracle:
// the last batches entries, the last kvHeads K/V heads with their query
// heads, and the last rows query rows, against all the keys. With the
// causal mask and the window aligned to the bottom right, the last rows of
// Q against the full K and V are the same problem as in the full call.
type subProblem struct {
	batches, kvHeads, rows int
	full                   bool
}

// oracleFullFLOPs is the size up to which the whole problem is checked.
const oracleFullFLOPs = 2e8

// pickSub chooses the sub-problem to check: the whole problem when the
// oracle can do it quickly, otherwise one batch entry, 2 K/V head groups
// and the last 64 query rows.
func pickSub(s shape) subProblem {
	if 4*float64(s.batch)*float64(s.heads)*float64(s.nq)*float64(s.nkv)*float64(s.dim) <= oracleFullFLOPs {
		return subProblem{batches: s.batch, kvHeads: s.kvHeads, rows: s.nq, full: true}
	}
	return subProblem{batches: 1, kvHeads: min(2, s.kvHeads), rows: min(64, s.nq)}
}

// params is the sub-problem as a reference call.
func (sp subProblem) params(s shape) reference.Params {
	p := s.params()
	p.Batch, p.HeadsQ, p.HeadsKV, p.SeqQ = sp.batches, sp.kvHeads*(s.heads/s.kvHeads), sp.kvHeads, sp.rows
	return p
}

// extract copies the sub-problem's part of a [batch, heads, seq, dim]
// array: the last nb batch entries, the last nh heads and the last rows
// positions of each.
func extract(x []float32, batch, heads, seq, dim, nb, nh, rows int) []float32 {
	out := make([]float32, 0, nb*nh*rows*dim)
	for b := batch - nb; b < batch; b++ {
		for h := heads - nh; h < heads; h++ {
			start := ((b*heads+h)*seq + seq - rows) * dim
			out = append(out, x[start:start+rows*dim]...)
		}
	}
	return out
}

// subQ extracts the sub-problem's rows of a query-shaped array (Q or an output).
func (sp subProblem) subQ(s shape, x []float32) []float32 {
	g := s.heads / s.kvHeads
	return extract(x, s.batch, s.heads, s.nq, s.dim, sp.batches, sp.kvHeads*g, sp.rows)
}

// subKV extracts the sub-problem's keys or values.
func (sp subProblem) subKV(s shape, x []float32) []float32 {
	return extract(x, s.batch, s.kvHeads, s.nkv, s.dim, sp.batches, sp.kvHeads, s.nkv)
}

// randn returns n standard normal float32 values.
func randn(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// kvData holds K or V in one storage type: the tensor the engine reads and
// the same values as float32, which the oracle and the naive baseline read.
type kvData struct {
	t      attention.Tensor
	values []float32
	// clone returns a copy of t in memory of its own, for the K/V caches
	// that a cold decode run rotates over.
	clone func() attention.Tensor
}

// storeKV converts float32 values to the storage type dt. For f16 and bf16
// the values are rounded, for q8 quantised (attention.QuantizeQ8; the head
// dimension must be a multiple of attention.Q8Block), for the fp8 types
// divided by fp8Scale and rounded, and the rounded values (times the
// scale) are what the oracle sees.
func storeKV(x []float32, dt attention.DType, l attention.Layout) (kvData, error) {
	switch dt {
	case attention.F16:
		h := fp16.Float16s(x)
		r := make([]float32, len(x))
		fp16.DecodeFloat16(r, h)
		return kvData{attention.F16Tensor(h, l), r, func() attention.Tensor { return attention.F16Tensor(slices.Clone(h), l) }}, nil
	case attention.BF16:
		h := fp16.BFloat16s(x)
		r := make([]float32, len(x))
		fp16.DecodeBFloat16(r, h)
		return kvData{attention.BF16Tensor(h, l), r, func() attention.Tensor { return attention.BF16Tensor(slices.Clone(h), l) }}, nil
	case attention.Q8:
		q := make([]int8, len(x))
		sc := make([]float32, len(x)/attention.Q8Block)
		if err := attention.QuantizeQ8(q, sc, x); err != nil {
			return kvData{}, err
		}
		r := make([]float32, len(x))
		if err := attention.DequantizeQ8(r, q, sc); err != nil {
			return kvData{}, err
		}
		return kvData{attention.Q8Tensor(q, sc, l), r, func() attention.Tensor {
			return attention.Q8Tensor(slices.Clone(q), slices.Clone(sc), l)
		}}, nil
	case attention.FP8E4M3:
		return fp8Data(x, fp8Scale(dt), l, fp16.Float8E4M3FromFloat32, fp16.Float8E4M3.Float32, attention.FP8E4M3Tensor), nil
	case attention.FP8E5M2:
		return fp8Data(x, fp8Scale(dt), l, fp16.Float8E5M2FromFloat32, fp16.Float8E5M2.Float32, attention.FP8E5M2Tensor), nil
	}
	return kvData{attention.F32Tensor(x, l), x, func() attention.Tensor { return attention.F32Tensor(slices.Clone(x), l) }}, nil
}

// fp8Scale is the one scale of the fp8 tensors of type dt (K's and V's
// alike): what maps about ±9 (E4M3FN) or ±17 (E5M2) to the largest finite
// value, so that standard normal values use the whole range, rounding
// their quotients (not powers of two) as a calibrated cache does.
func fp8Scale(dt attention.DType) []float32 {
	if dt == attention.FP8E4M3 {
		return []float32{0.02}
	}
	return []float32{0.0003}
}

// storeKVPair is storeKV of K and V.
func storeKVPair(k32, v32 []float32, dt attention.DType, l attention.Layout) (k, v kvData, err error) {
	if k, err = storeKV(k32, dt, l); err != nil {
		return kvData{}, kvData{}, err
	}
	if v, err = storeKV(v32, dt, l); err != nil {
		return kvData{}, kvData{}, err
	}
	return k, v, nil
}

// call is one attention computation: the engine's tensors and the float32
// output slice behind out.
type call struct {
	out              []float32
	outT, qT, kT, vT attention.Tensor
	opts             attention.Options

	// With -paged, K and V are read from paged (a sequence per batch entry,
	// seqs) rather than from kT and vT.
	paged *attention.PagedCache
	seqs  []attention.SeqID
}

// forward runs one call on an engine. It is a variable so that tests can
// substitute a broken engine and watch check mode catch it.
var forward = func(eng *attention.Engine, c *call) error {
	if c.paged != nil {
		return eng.ForwardPaged(c.outT, c.qT, c.paged, c.seqs, c.opts)
	}
	return eng.Forward(c.outT, c.qT, c.kT, c.vT, c.opts)
}

// pagedKV stores K and V (float32 [B, Hkv, Nkv, d] values of shape s) as
// dt in a new PagedCache of blockSize-position blocks, batch entry b as its
// sequence seqs[b]. The sequences grow a block at a time side by side,
// with one more that is freed at the end, as a server's sequences grow
// during decoding: no two consecutive blocks of a sequence are neighbours
// in the pool, the case where every block is a run of its own for the
// kernels. The values are rounded or quantised as storeKV does.
func pagedKV(s shape, k32, v32 []float32, dt attention.DType, blockSize int) (*attention.PagedCache, []attention.SeqID, error) {
	perSeq := (s.nkv + blockSize - 1) / blockSize
	var pc *attention.PagedCache
	var err error
	if dt == attention.FP8E4M3 || dt == attention.FP8E5M2 {
		// The cache's scales are the tensors': Append copies the codes.
		pc, err = attention.NewPagedCacheFP8(dt, s.kvHeads, s.dim, blockSize, (s.batch+1)*perSeq, fp8Scale(dt), fp8Scale(dt))
	} else {
		pc, err = attention.NewPagedCache(dt, s.kvHeads, s.dim, blockSize, (s.batch+1)*perSeq)
	}
	if err != nil {
		return nil, nil, err
	}
	seqs := make([]attention.SeqID, s.batch+1) // the last one is freed
	for b := range seqs {
		seqs[b] = pc.NewSequence()
	}
	n := s.kvHeads * s.nkv * s.dim // one batch entry
	for p0 := 0; p0 < s.nkv; p0 += blockSize {
		m := min(blockSize, s.nkv-p0)
		l := attention.BHSD(1, s.kvHeads, m, s.dim)
		for b, id := range seqs {
			src := min(b, s.batch-1) // the extra sequence holds a copy of the last entry
			k, v, err := storeKVPair(chunk(k32[src*n:(src+1)*n], s, p0, m), chunk(v32[src*n:(src+1)*n], s, p0, m), dt, l)
			if err != nil {
				return nil, nil, err
			}
			if err := pc.Append(id, k.t, v.t); err != nil {
				return nil, nil, err
			}
		}
	}
	if err := pc.Free(seqs[s.batch]); err != nil {
		return nil, nil, err
	}
	return pc, seqs[:s.batch], nil
}

// chunk copies positions [p0, p0+m) of every head out of one batch entry
// ([Hkv, Nkv, d] float32 values of shape s) as [Hkv, m, d].
func chunk(x []float32, s shape, p0, m int) []float32 {
	out := make([]float32, 0, s.kvHeads*m*s.dim)
	for h := range s.kvHeads {
		out = append(out, x[(h*s.nkv+p0)*s.dim:(h*s.nkv+p0+m)*s.dim]...)
	}
	return out
}

// fp8Data quantises x to an fp8 type with the one scale sc[0] (encode of
// x/scale), the dequantised values (decode·scale) being the oracle's.
func fp8Data[T any](x, sc []float32, l attention.Layout, encode func(float32) T, decode func(T) float32,
	tensor func([]T, []float32, attention.Layout) attention.Tensor) kvData {
	h := make([]T, len(x))
	r := make([]float32, len(x))
	for i, v := range x {
		h[i] = encode(v / sc[0])
		r[i] = decode(h[i]) * sc[0]
	}
	return kvData{tensor(h, sc, l), r, func() attention.Tensor { return tensor(slices.Clone(h), sc, l) }}
}
