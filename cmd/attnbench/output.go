package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/kernel"
)

// write prints the report in the format c asks for. In json and csv only
// data goes to w; the notes go to notes (csv) or into the JSON.
func write(c config, rep *report, w, notes io.Writer) error {
	switch c.format {
	case "json":
		return writeJSON(c, rep, w)
	case "csv":
		if err := writeCSV(rep, w); err != nil {
			return err
		}
		for _, n := range rep.legend(c) {
			fmt.Fprintln(notes, "attnbench:", n)
		}
		return nil
	}
	return writeTable(c, rep, w)
}

// naiveMarked reports whether a row's naive time gets a *: it was timed
// fewer times than -reps, or from a single cold run (which -reps 1 does not
// otherwise show).
func naiveMarked(r result, reps int) bool {
	return r.naive != nil && (r.naive.n < reps || r.naive.cold)
}

// legend explains the columns and how the figures were obtained.
func (rep *report) legend(c config) []string {
	var ls []string
	if hasPrefill(rep.results) {
		l := "GFLOP/s: 4·B·Hq·Nq·Nkv·d over the median time, halved for a causal shape as the shape suite counts it (decode rows, Nq = 1, are not halved)"
		if hasWindow(rep.results) {
			l += "; with -window, only visible pairs count, not halved: 4·B·Hq·d × the (query, key) pairs the window shows"
		}
		l += "; %peak: f32 rows over the float32 FMA peak of one core × min(threads, CPUs)"
		if hasPrec(rep.results, attention.PrecisionBFloat16, true) {
			l += rep.bf16PeakLegend()
		}
		if hasPrec(rep.results, precQ8Query, true) {
			l += "; q8q rows compute Q·Kᵀ in integer dot products: -"
		}
		ls = append(ls, l)
	}
	ls = append(ls, rep.kernelLegend())
	if c.paged > 0 {
		ls = append(ls, fmt.Sprintf("-paged %d: K and V are read through an attention.PagedCache of %d-position blocks (Engine.ForwardPaged), a sequence per batch entry, no two of whose blocks are neighbours in the pool", c.paged, c.paged))
	}
	if hasDecode(c.shapes) {
		l := "GB/s: bytes of K and V read (2·B·Hkv·Nkv·d·element size; 1.125 bytes for q8, its scales included) over the median time; %BW: over the streaming-read bandwidth measured with as many threads at start (one read loop a thread over buffers of 4 × the last-level cache: a figure above 100 says that loop ran slow, on a machine busy with other work at start, or that part of the K/V copies stayed cached)"
		if c.warm {
			l += "; -warm: every run reads the same K/V, which may be served from the cache"
		} else {
			l += "; cold: each run reads a K/V cache not read since over 2 × the last-level cache was (the naive baseline reads one float32 K/V, warm)"
		}
		if hasWindow(rep.results) {
			l += "; with a sliding window, only the keys some query sees count"
		}
		ls = append(ls, l)
	}
	if c.naive {
		var few []string
		for _, r := range rep.results {
			if naiveMarked(r, c.reps) && !slices.Contains(few, r.shape.name) {
				few = append(few, r.shape.name)
			}
		}
		l := "vs naive: median time of the naive float32 baseline (Sgemm, softmax, Sgemm; GOMAXPROCS = threads) over flashgo's; timed once per shape and thread count, on float32 K/V whatever the row's K/V type"
		if len(few) > 0 {
			l += fmt.Sprintf("; * = fewer runs than -reps to save time (%s): one cold run where a run takes >= %v, else as many as fit in %v", strings.Join(few, ", "), naiveSlow, naiveBudget)
		}
		ls = append(ls, l)
	} else {
		ls = append(ls, "naive baseline not run (-naive=off)")
	}
	if c.check {
		var names []string            // shapes checked on a sub-problem, in order
		lengths := map[string][]int{} // and, for sweeps, at which lengths
		fail := false
		for _, r := range rep.results {
			fail = fail || (r.acc != nil && !r.acc.pass())
			if r.acc == nil || r.acc.sub.full {
				continue
			}
			name := r.shape.name
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
			if r.shape.swept && !slices.Contains(lengths[name], r.shape.nkv) {
				lengths[name] = append(lengths[name], r.shape.nkv)
			}
		}
		subs := make([]string, len(names))
		for i, n := range names {
			subs[i] = n
			if ls := lengths[n]; len(ls) > 0 {
				subs[i] = fmt.Sprintf("%s at N = %s", n, joinInts(ls))
			}
		}
		l := "max abs, max rel: error against the float64 oracle"
		if len(subs) > 0 {
			l += fmt.Sprintf(", for %s on a sub-problem (the last batch entry, the last 2 K/V heads with their query heads, the last 64 query rows, all keys)", strings.Join(subs, ", "))
		}
		if fail {
			l += "; ! = outside the project's tolerance, 2 × the naive baseline's max abs error on the same rows + 1e-6 (+ 2·E_b in bf16, docs/math.md §8)"
		} else {
			l += "; every row is within the project's tolerance (2 × the naive baseline's error on the same rows + 1e-6, + 2·E_b in bf16)"
		}
		l += "; max rel divides each error by its element's |value|, floored at 1e-3 × the largest: an output near 0 (they are averages of signed values) makes it large where max abs is small"
		ls = append(ls, l)
	} else {
		ls = append(ls, "accuracy not checked (-check=off)")
	}
	return append(ls, rep.notes...)
}

// bf16PeakLegend says what the bf16 rows' %peak is measured against: the
// machine's bf16 product peak, whichever kernel ran the rows, or nothing
// where the machine has no bf16 product unit.
func (rep *report) bf16PeakLegend() string {
	m := rep.machine
	if m.bf16PeakISA == "" {
		return "; bf16 rows: -, this machine has no bf16 product unit (the bf16 products widen their operands to float32)"
	}
	unit := m.bf16PeakISA
	switch unit {
	case kernel.AMX:
		unit += ": TDPBF16PS on the AMX tiles"
	case kernel.AVX512BF16:
		unit += ": VDPBF16PS"
	}
	l := "; bf16 rows over the bf16 product peak (" + unit + ") of one core × min(threads, CPUs)"
	if rep.bf16Kernel != m.bf16PeakISA {
		l += fmt.Sprintf(", the machine's: this run's bf16 products (%s) do not use that unit", rep.bf16Kernel)
	}
	for _, r := range rep.results {
		if r.prec == attention.PrecisionBFloat16 && !r.shape.decode() &&
			attention.ComputedPrecision(attention.Options{Precision: r.prec}, r.shape.heads, r.shape.kvHeads, r.shape.nq) == attention.PrecisionFloat32 {
			l += ", but those computed in float32 (at most 16 query rows per K/V head) over the FMA peak"
			break
		}
	}
	return l
}

func hasWindow(rs []result) bool {
	for _, r := range rs {
		if r.shape.window > 0 {
			return true
		}
	}
	return false
}

// hasPrec reports whether a row is in precision p, and with prefill
// whether a prefill row is.
func hasPrec(rs []result, p attention.Precision, prefill bool) bool {
	for _, r := range rs {
		if r.prec == p && (!prefill || !r.shape.decode()) {
			return true
		}
	}
	return false
}

// kernelLegend explains the kernel column: the implementation that ran
// each row's products (rowKernel), which for f32 rows is not the level's
// name at the amx and avx512bf16 levels, and each name its bf16 rows show.
func (rep *report) kernelLegend() string {
	var parts []string
	if hasPrec(rep.results, attention.PrecisionFloat32, false) {
		l := "f32 rows, the float32 FMA kernels"
		if rep.f32Kernel != rep.kernel {
			l += fmt.Sprintf(" (%s: the %s level differs from it only in the bf16 products)", rep.f32Kernel, rep.kernel)
		}
		parts = append(parts, l)
	}
	var bf16 []string
	for _, r := range rep.results {
		if r.prec != attention.PrecisionBFloat16 || slices.Contains(bf16, r.kernel) {
			continue
		}
		bf16 = append(bf16, r.kernel)
	}
	if len(bf16) > 0 {
		var names []string
		for _, k := range bf16 {
			switch {
			case k == kernel.AMX:
				names = append(names, k+": AMX-BF16 tiles")
			case k == kernel.AVX512BF16:
				names = append(names, k+": VDPBF16PS")
			case k == kernel.Generic:
				names = append(names, k+": Go loops")
			case k != rep.bf16Kernel:
				names = append(names, k+": float32, as a call of few query rows (decode) is computed in bf16 precision")
			default:
				names = append(names, k+": the float32 kernels on operands widened exactly to float32")
			}
		}
		parts = append(parts, "bf16 rows, the bf16 products ("+strings.Join(names, "; ")+")")
	}
	if hasPrec(rep.results, precQ8Query, false) {
		parts = append(parts, "q8q rows, the float32 kernels + the integer dot products of Q·Kᵀ")
	}
	return "kernel: the implementation of the row's products: " + strings.Join(parts, "; ")
}

func hasPrefill(rs []result) bool {
	for _, r := range rs {
		if !r.shape.decode() {
			return true
		}
	}
	return false
}

// header describes the machine and the run, for the table format.
func (rep *report) header() []string {
	m := rep.machine
	l1 := fmt.Sprintf("attnbench %s · %s · %d CPU%s · %s %s/%s",
		rep.start.UTC().Format("2006-01-02 15:04 MST"), m.cpu, m.cpus, plural(m.cpus), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	l2 := fmt.Sprintf("FMA peak %.1f GFLOP/s per core (%s loop, measured now); no bf16 product unit", m.peak, m.peakISA)
	if m.bf16PeakISA != "" {
		l2 = fmt.Sprintf("FMA peak %.1f GFLOP/s per core (%s loop), bf16 product peak %.1f GFLOP/s per core (%s loop), measured now",
			m.peak, m.peakISA, m.bf16Peak, m.bf16PeakISA)
	}
	if len(m.bandwidth) > 0 {
		var bw []string
		for _, n := range sortedKeys(m.bandwidth) {
			bw = append(bw, fmt.Sprintf("%.1f GB/s with %d thread%s", m.bandwidth[n], n, plural(n)))
		}
		l2 += "; streaming read " + strings.Join(bw, ", ")
	}
	l3 := fmt.Sprintf("kernel %s: float32 products %s, bf16 products %s (this machine has %s); ms: median of %d run%s after a warm-up (fastest-slowest)",
		rep.kernel, rep.f32Kernel, rep.bf16Kernel, strings.Join(kernel.Implementations(), ", "), rep.reps, plural(rep.reps))
	ls := []string{l1, l2, l3}
	if l := rep.cacheLine(); l != "" {
		ls = append(ls, l)
	}
	return ls
}

// cacheLine says how the decode rows' K/V caches were read: cold, rotating
// over how many copies for each shape and K/V type, or warm (-warm); "" when
// there is no decode row.
func (rep *report) cacheLine() string {
	type key struct {
		name string
		nkv  int
	}
	var keys []key
	counts := map[key][]string{}
	capped := false
	for _, r := range rep.results {
		if !r.shape.decode() {
			continue
		}
		k := key{r.shape.name, r.shape.nkv}
		if _, ok := counts[k]; !ok {
			keys = append(keys, k)
		}
		c := fmt.Sprintf("%v %d", r.kv, r.caches)
		if r.capped {
			c += "*"
			capped = true
		}
		if !slices.Contains(counts[k], c) {
			counts[k] = append(counts[k], c)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	if rep.warm {
		return fmt.Sprintf("decode K/V warm (-warm): every run reads the same K/V cache, which may stay in the %s last-level cache (%s)",
			gib(float64(rep.llc.bytes)), rep.llc.source)
	}
	var per []string
	for _, k := range keys {
		name := k.name
		if sweptName(rep.results, k.name) {
			name = fmt.Sprintf("%s Nkv %d", k.name, k.nkv)
		}
		per = append(per, name+": "+strings.Join(counts[k], ", "))
	}
	l := fmt.Sprintf("decode K/V cold: each run reads the next of N copies of the K/V cache, together over 2 × the %s last-level cache (%s); N = %s",
		gib(float64(rep.llc.bytes)), rep.llc.source, strings.Join(per, "; "))
	if capped {
		l += " (* fewer: see the notes below)"
	}
	return l
}

// sweptName reports whether the rows of shape name come from a sweep.
func sweptName(rs []result, name string) bool {
	for _, r := range rs {
		if r.shape.name == name && r.shape.swept {
			return true
		}
	}
	return false
}

func sortedKeys(m map[int]float64) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// writeTable prints the human-readable report.
func writeTable(c config, rep *report, w io.Writer) error {
	for _, l := range rep.header() {
		fmt.Fprintln(w, wrap(l, 110, "  "))
	}
	fmt.Fprintln(w)
	var seen []string
	for _, s := range c.shapes {
		if slices.Contains(seen, s.name) {
			continue
		}
		seen = append(seen, s.name)
		d := s.describe()
		if s.swept {
			d += fmt.Sprintf("; swept over %s = %s", sweptVar(s), joinInts(c.sweep))
		}
		fmt.Fprintln(w, d)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	io.WriteString(tw, "shape\tNq\tNkv\tK/V\tprec\tthreads\tkernel\tms (min-max)\tGFLOP/s\t%peak\tGB/s\t%BW\tvs naive\tmax abs\tmax rel\t\n")
	for _, r := range rep.results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%v\t%s\t%d\t%s\t%s (%s-%s)\t%.1f\t", r.shape.name, r.shape.nq, r.shape.nkv, r.kv, precName(r.prec), r.threads, r.kernel,
			fmtMs(r.flash.median), fmtMs(r.flash.min), fmtMs(r.flash.max), r.gflops())
		if r.shape.decode() {
			fmt.Fprintf(tw, "-\t%.1f\t%s\t", r.gbps(), pct(r.gbps(), r.bw))
		} else {
			fmt.Fprintf(tw, "%s\t-\t-\t", pct(r.gflops(), r.peak))
		}
		switch {
		case r.naive == nil:
			fmt.Fprint(tw, "-\t")
		case naiveMarked(r, c.reps):
			fmt.Fprintf(tw, "%s*\t", fmtSpeedup(r.speedup()))
		default:
			fmt.Fprintf(tw, "%s\t", fmtSpeedup(r.speedup()))
		}
		if r.acc == nil {
			fmt.Fprint(tw, "-\t-\t\n")
			continue
		}
		mark := ""
		if !r.acc.pass() {
			mark = "!"
		}
		fmt.Fprintf(tw, "%.1e%s\t%.1e\t\n", r.acc.errs.MaxAbs, mark, r.acc.errs.MaxRel)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, l := range rep.legend(c) {
		fmt.Fprintln(w, wrap(l, 100, "  "))
	}
	return nil
}

// wrap breaks s into lines of at most width bytes at spaces, indenting
// every line after the first.
func wrap(s string, width int, indent string) string {
	var b strings.Builder
	line := 0
	for i, word := range strings.Fields(s) {
		switch {
		case i == 0:
		case line+1+len(word) > width:
			b.WriteString("\n" + indent)
			line = len(indent)
		default:
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += len(word)
	}
	return b.String()
}

// sweptVar names what a sweep varies.
func sweptVar(s shape) string {
	if s.decode() {
		return "Nkv"
	}
	return "Nq = Nkv"
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

func fmtMs(d time.Duration) string {
	ms := float64(d) / 1e6
	switch {
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 2, 64)
	case ms < 1000:
		return strconv.FormatFloat(ms, 'f', 1, 64)
	}
	return strconv.FormatFloat(ms, 'f', 0, 64)
}

func fmtSpeedup(x float64) string {
	if x >= 100 {
		return fmt.Sprintf("%.0fx", x)
	}
	return fmt.Sprintf("%.2fx", x)
}

func pct(x, of float64) string {
	if of <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", 100*x/of)
}

// ms converts a duration to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// The JSON schema. Fields that do not apply to a row (GB/s of a prefill
// row, % of peak of a decode row, of a q8q row or of a bf16 row on a
// machine with no bf16 product unit, naive or check when turned off) are
// null, so every row has the same keys.
type (
	jsonReport struct {
		jsonHeader
		Kernels   []string        `json:"kernels_available"`
		Peak      jsonPeak        `json:"peak"`
		Bandwidth []jsonBandwidth `json:"bandwidth"`
		LLC       jsonLLC         `json:"llc"`
		WarmKV    bool            `json:"warm_kv"` // -warm: decode runs reuse one K/V cache
		Reps      int             `json:"reps"`
		Notes     []string        `json:"notes"`
		Results   []jsonResult    `json:"results"`
	}
	// jsonPeak holds one core's peaks: the float32 FMA peak and its loop
	// (avx512, avx2, go), and the bf16 product peak and its loop (amx,
	// avx512bf16), 0 and "" where the machine has no bf16 product unit.
	jsonPeak struct {
		GFLOPsPerCore     float64 `json:"gflops_per_core"`
		ISA               string  `json:"isa"`
		BF16GFLOPsPerCore float64 `json:"bf16_gflops_per_core"`
		BF16ISA           string  `json:"bf16_isa"`
	}
	jsonLLC struct {
		Bytes  int64  `json:"bytes"`
		Source string `json:"source"`
	}
	jsonBandwidth struct {
		Threads int     `json:"threads"`
		GBps    float64 `json:"gbps"`
	}
	jsonResult struct {
		Shape        string     `json:"shape"`
		Description  string     `json:"description"`
		Mode         string     `json:"mode"` // prefill or decode
		Scaled       int        `json:"scaled"`
		Batch        int        `json:"batch"`
		Heads        int        `json:"heads"`
		KVHeads      int        `json:"kv_heads"`
		Dim          int        `json:"dim"`
		Nq           int        `json:"nq"`
		Nkv          int        `json:"nkv"`
		Causal       bool       `json:"causal"`
		Window       *int       `json:"window"`  // keys, the query's own included; null: none
		SoftCap      *float64   `json:"softcap"` // null: none
		KV           string     `json:"kv"`
		Precision    string     `json:"precision"` // f32 or bf16: the arithmetic of the products
		Threads      int        `json:"threads"`
		Kernel       string     `json:"kernel"`
		Time         jsonTiming `json:"time_ms"`
		FLOPs        float64    `json:"flops"`
		GFLOPs       float64    `json:"gflops"`
		PctPeak      *float64   `json:"pct_peak"` // prefill rows: f32 over the float32 FMA peak, bf16 over the bf16 product peak (null without a bf16 product unit), × min(threads, CPUs); null for q8q rows
		KVBytes      float64    `json:"kv_bytes"`
		GBps         *float64   `json:"gbps"`
		PctBandwidth *float64   `json:"pct_bandwidth"`
		KVCopies     int        `json:"kv_copies"` // copies of K/V the timed runs rotate over; 1 for prefill and under -warm
		Naive        *jsonNaive `json:"naive"`
		Check        *jsonCheck `json:"check"`
	}
	jsonTiming struct {
		Median float64 `json:"median"`
		Min    float64 `json:"min"`
		Max    float64 `json:"max"`
		Runs   int     `json:"runs"`
	}
	jsonNaive struct {
		Time    jsonTiming `json:"time_ms"`
		Cold    bool       `json:"cold"` // a single run with no warm-up
		GFLOPs  float64    `json:"gflops"`
		Speedup float64    `json:"speedup"`
	}
	jsonCheck struct {
		Full        bool    `json:"full"`
		Batches     int     `json:"batches"`
		KVHeads     int     `json:"kv_heads"`
		Rows        int     `json:"rows"`
		Elements    int     `json:"elements"`
		MaxAbs      float64 `json:"max_abs"`
		MaxRel      float64 `json:"max_rel"`
		RMS         float64 `json:"rms"`
		NaiveMaxAbs float64 `json:"naive_max_abs"`
		Tolerance   float64 `json:"tolerance"`
		Pass        bool    `json:"pass"`
	}
)

func jsonTime(t timing) jsonTiming {
	return jsonTiming{Median: ms(t.median), Min: ms(t.min), Max: ms(t.max), Runs: t.n}
}

func ptr(x float64) *float64 { return &x }

// writeJSON prints the report as one JSON object.
func writeJSON(c config, rep *report, w io.Writer) error {
	m := rep.machine
	out := jsonReport{
		jsonHeader: newJSONHeader("", rep.start, m.cpu, m.cpus, rep.kernel), Kernels: kernel.Implementations(),
		Peak:      jsonPeak{GFLOPsPerCore: m.peak, ISA: m.peakISA, BF16GFLOPsPerCore: m.bf16Peak, BF16ISA: m.bf16PeakISA},
		Bandwidth: []jsonBandwidth{},
		LLC:       jsonLLC{Bytes: rep.llc.bytes, Source: rep.llc.source}, WarmKV: rep.warm,
		Reps: rep.reps, Notes: rep.legend(c), Results: []jsonResult{},
	}
	for _, n := range sortedKeys(m.bandwidth) {
		out.Bandwidth = append(out.Bandwidth, jsonBandwidth{Threads: n, GBps: m.bandwidth[n]})
	}
	for _, r := range rep.results {
		s := r.shape
		jr := jsonResult{
			Shape: s.name, Description: s.what, Mode: s.mode(), Scaled: s.scaled,
			Batch: s.batch, Heads: s.heads, KVHeads: s.kvHeads, Dim: s.dim, Nq: s.nq, Nkv: s.nkv, Causal: s.causal,
			KV: r.kv.String(), Precision: precName(r.prec), Threads: r.threads, Kernel: r.kernel, Time: jsonTime(r.flash),
			FLOPs: s.flops(), GFLOPs: r.gflops(), KVBytes: s.kvBytes(r.kv), KVCopies: r.caches,
		}
		if s.window > 0 {
			jr.Window = &s.window
		}
		if s.softCap > 0 {
			jr.SoftCap = ptr(float64(s.softCap))
		}
		if s.decode() {
			jr.GBps = ptr(r.gbps())
			if r.bw > 0 {
				jr.PctBandwidth = ptr(100 * r.gbps() / r.bw)
			}
		} else if r.peak > 0 {
			jr.PctPeak = ptr(100 * r.gflops() / r.peak)
		}
		if r.naive != nil {
			jr.Naive = &jsonNaive{Time: jsonTime(*r.naive), Cold: r.naive.cold, GFLOPs: s.flops() / r.naive.median.Seconds() / 1e9, Speedup: r.speedup()}
		}
		if a := r.acc; a != nil {
			jr.Check = &jsonCheck{Full: a.sub.full, Batches: a.sub.batches, KVHeads: a.sub.kvHeads, Rows: a.sub.rows, Elements: a.errs.N,
				MaxAbs: a.errs.MaxAbs, MaxRel: a.errs.MaxRel, RMS: a.errs.RMS, NaiveMaxAbs: a.naiveMaxAbs, Tolerance: a.tolerance, Pass: a.pass()}
		}
		out.Results = append(out.Results, jr)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// csvHeader names the CSV columns; empty cells mean "does not apply".
var csvHeader = []string{
	"shape", "mode", "batch", "heads", "kv_heads", "dim", "nq", "nkv", "causal", "window", "softcap", "kv", "precision", "threads", "kernel",
	"median_ms", "min_ms", "max_ms", "runs", "gflops", "pct_peak", "gbps", "pct_bandwidth", "kv_copies",
	"naive_median_ms", "naive_runs", "speedup", "max_abs", "max_rel", "rms", "tolerance", "pass",
}

// optInt and optFloat format a CSV cell that is empty when x is 0.
func optInt(x int) string {
	if x == 0 {
		return ""
	}
	return strconv.Itoa(x)
}

func optFloat(x float64) string {
	if x == 0 {
		return ""
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// writeCSV prints one header line and one line per result.
func writeCSV(rep *report, w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
	for _, r := range rep.results {
		s := r.shape
		row := []string{s.name, s.mode(), strconv.Itoa(s.batch), strconv.Itoa(s.heads), strconv.Itoa(s.kvHeads), strconv.Itoa(s.dim),
			strconv.Itoa(s.nq), strconv.Itoa(s.nkv), strconv.FormatBool(s.causal), optInt(s.window), optFloat(float64(s.softCap)), r.kv.String(), precName(r.prec), strconv.Itoa(r.threads), r.kernel,
			f(ms(r.flash.median)), f(ms(r.flash.min)), f(ms(r.flash.max)), strconv.Itoa(r.flash.n), f(r.gflops())}
		if s.decode() {
			bw := ""
			if r.bw > 0 {
				bw = f(100 * r.gbps() / r.bw)
			}
			row = append(row, "", f(r.gbps()), bw)
		} else {
			peak := ""
			if r.peak > 0 {
				peak = f(100 * r.gflops() / r.peak)
			}
			row = append(row, peak, "", "")
		}
		row = append(row, strconv.Itoa(r.caches))
		if r.naive != nil {
			row = append(row, f(ms(r.naive.median)), strconv.Itoa(r.naive.n), f(r.speedup()))
		} else {
			row = append(row, "", "", "")
		}
		if a := r.acc; a != nil {
			row = append(row, f(a.errs.MaxAbs), f(a.errs.MaxRel), f(a.errs.RMS), f(a.tolerance), strconv.FormatBool(a.pass()))
		} else {
			row = append(row, "", "", "", "", "")
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// jsonHeader is how every JSON report begins: the tool, the mode (none for
// the shapes' benchmark: its rows say theirs), when and where it ran and
// the kernel implementation.
type jsonHeader struct {
	Tool   string `json:"tool"`
	Mode   string `json:"mode,omitempty"` // "shared-prefix", "write"
	Date   string `json:"date"`           // RFC 3339, UTC
	Go     string `json:"go"`
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	CPU    string `json:"cpu"`
	CPUs   int    `json:"cpus"`
	Kernel string `json:"kernel"`
}

func newJSONHeader(mode string, start time.Time, cpu string, cpus int, kern string) jsonHeader {
	return jsonHeader{Tool: "attnbench", Mode: mode, Date: start.UTC().Format(time.RFC3339),
		Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, CPU: cpu, CPUs: cpus, Kernel: kern}
}
