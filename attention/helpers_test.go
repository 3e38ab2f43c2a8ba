package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/fp16"
	registry "github.com/flashgo/flashgo/internal/impl"
	"github.com/flashgo/flashgo/internal/impltest"
)

// guard fills the padding around and between the rows of every view: an
// engine that reads it gets NaN into its results, and one that writes it is
// caught by checkGuards.
var guard = float32(math.NaN())

// layoutKind says how a test lays a tensor out in memory.
type layoutKind int

const (
	bhsd   layoutKind = iota // contiguous [b, h, s, d]
	bshd                     // contiguous [b, s, h, d]
	padded                   // [b, s, h, d] with gaps after each row and head, inside a larger buffer
)

func (l layoutKind) String() string { return [...]string{"bhsd", "bshd", "padded"}[l] }

// view places a tensor of shape [b, h, s, d] into a fresh buffer with NaN
// guards before, after and (for padded) between rows.
type view struct {
	lay  attention.Layout
	pre  int // guard elements before the first element
	size int // total buffer length
}

func makeView(kind layoutKind, b, h, s, d int) view {
	var l attention.Layout
	switch kind {
	case bhsd:
		l = attention.BHSD(b, h, s, d)
	case bshd:
		l = attention.BSHD(b, s, h, d)
	case padded:
		l = attention.Layout{Batch: b, Heads: h, Seq: s, Dim: d}
		l.HeadStride = d + 3
		l.SeqStride = h*l.HeadStride + 5
		l.BatchStride = s*l.SeqStride + 7
	}
	pre := 11
	return view{lay: l, pre: pre, size: pre + l.Span() + 13}
}

// scatter writes canonical [b, h, s, d] data into the view's layout.
func scatter[T any](v view, dst []T, src []float32, conv func(float32) T) {
	l := v.lay
	for b := range l.Batch {
		for h := range l.Heads {
			for s := range l.Seq {
				off := v.pre + l.Offset(b, h, s)
				row := src[((b*l.Heads+h)*l.Seq+s)*l.Dim:][:l.Dim]
				for k, x := range row {
					dst[off+k] = conv(x)
				}
			}
		}
	}
}

// gather reads the view's elements back into canonical order.
func gather(v view, src []float32) []float32 {
	l := v.lay
	out := make([]float32, l.Batch*l.Heads*l.Seq*l.Dim)
	if l.Dim == 0 { // the offsets of empty rows may point past the buffer
		return out
	}
	for b := range l.Batch {
		for h := range l.Heads {
			for s := range l.Seq {
				copy(out[((b*l.Heads+h)*l.Seq+s)*l.Dim:][:l.Dim], src[v.pre+l.Offset(b, h, s):][:l.Dim])
			}
		}
	}
	return out
}

// inView reports which buffer indices belong to the view.
func inView(v view) []bool {
	in := make([]bool, v.size)
	l := v.lay
	for b := range l.Batch {
		for h := range l.Heads {
			for s := range l.Seq {
				off := v.pre + l.Offset(b, h, s)
				for k := range l.Dim {
					in[off+k] = true
				}
			}
		}
	}
	return in
}

// problem is one attention call with its inputs in canonical float32 form
// (K and V already rounded to their storage type) and as engine tensors.
type problem struct {
	p       reference.Params
	kvType  attention.DType
	kind    layoutKind
	q, k, v []float32 // canonical
	qT, kT  attention.Tensor
	vT      attention.Tensor
	outView view
	// maskType is the element type of the engine's copy of p.Mask (0 for
	// F32); opts are the engine options equivalent to p.
	maskType attention.DType
	opts     attention.Options
}

func (pr *problem) String() string {
	p := pr.p
	s := fmt.Sprintf("B%d Hq%d Hkv%d Nq%d Nkv%d d%d causal=%v kv=%v layout=%v",
		p.Batch, p.HeadsQ, p.HeadsKV, p.SeqQ, p.SeqKV, p.Dim, p.Causal, pr.kvType, pr.kind)
	if p.CausalTopLeft {
		s += " topleft"
	}
	if p.Window {
		s += fmt.Sprintf(" window=(%d,%d)", p.WindowLeft, p.WindowRight)
	}
	if p.SoftCap != 0 {
		s += fmt.Sprintf(" softcap=%v", p.SoftCap)
	}
	if p.Slopes != nil {
		s += " alibi"
	}
	if p.Sinks != nil {
		s += " sinks"
	}
	if p.Mask != nil {
		s += fmt.Sprintf(" mask%v(%v)", p.MaskShape, pr.maskType)
	}
	if p.BoolMask != nil {
		s += fmt.Sprintf(" boolmask%v", p.BoolMaskShape)
	}
	if p.CuSeqQ != nil {
		s += fmt.Sprintf(" cuq=%v cukv=%v", p.CuSeqQ, p.CuSeqKV)
	}
	return s
}

// The shared helpers (internal/impltest) under the names this package's
// tests use: n standard normal values, and bitwise comparisons of float32
// slices.
var (
	randn           = impltest.Randn
	sameBits        = impltest.SameBits
	requireSameBits = impltest.RequireSameBits
)

// roundTo rounds x to the storage type in place, so that the oracle sees the
// values the engine reads (fp8 with scale 1, a cache's default).
func roundTo(t attention.DType, x []float32) {
	for i, v := range x {
		switch t {
		case attention.F16:
			x[i] = fp16.FromFloat32(v).Float32()
		case attention.BF16:
			x[i] = fp16.BFloat16FromFloat32(v).Float32()
		case attention.FP8E4M3, attention.FP8E5M2:
			x[i] = fp8Round(t, v, 1)
		}
	}
}

// fp8Round is the value an fp8 tensor of type t and scale sc holds for x:
// x/sc rounded to fp8 (saturating), times sc, as the engine reads it.
func fp8Round(t attention.DType, x, sc float32) float32 {
	if t == attention.FP8E4M3 {
		return fp16.Float8E4M3FromFloat32(x/sc).Float32() * sc
	}
	return fp16.Float8E5M2FromFloat32(x/sc).Float32() * sc
}

// fp8Scales returns the per-head scales of the fp8 K and V tensors of
// the problems: not powers of two, so that the product with the scale
// rounds, and different per head.
func fp8Scales(heads int) []float32 {
	s := make([]float32, heads)
	for h := range s {
		s[h] = 0.3 + 0.17*float32(h)
	}
	return s
}

// roundFP8Heads rounds canonical K or V data [batch, heads, n, d] (rows of
// d) to what an fp8 tensor of type t with per-head scales holds.
func roundFP8Heads(t attention.DType, x []float32, scales []float32, n, d int) {
	for i, v := range x {
		h := i / (n * d) % len(scales)
		x[i] = fp8Round(t, v, scales[h])
	}
}

func newProblem(rng *rand.Rand, p reference.Params, kvType attention.DType, kind layoutKind) *problem {
	pr := &problem{p: p, kvType: kvType, kind: kind}
	pr.q = randn(rng, p.QLen())
	pr.k = randn(rng, p.KVLen())
	pr.v = randn(rng, p.VLen())
	if kvType == attention.FP8E4M3 || kvType == attention.FP8E5M2 {
		sc := fp8Scales(p.HeadsKV)
		roundFP8Heads(kvType, pr.k, sc, p.SeqKV, p.Dim)
		roundFP8Heads(kvType, pr.v, sc, p.SeqKV, p.VDim())
	} else {
		roundTo(kvType, pr.k)
		roundTo(kvType, pr.v)
	}
	pr.build()
	return pr
}

// build lays the canonical inputs out as engine tensors.
func (pr *problem) build() {
	p := pr.p
	qv := makeView(pr.kind, p.Batch, p.HeadsQ, p.SeqQ, p.Dim)
	qbuf := impltest.Filled(qv.size, guard)
	scatter(qv, qbuf, pr.q, func(x float32) float32 { return x })
	pr.qT = attention.F32Tensor(qbuf[qv.pre:], qv.lay)
	pr.kT = pr.kvTensor(pr.k, p.Dim)
	pr.vT = pr.kvTensor(pr.v, p.VDim())
	pr.outView = makeView(pr.kind, p.Batch, p.HeadsQ, p.SeqQ, p.VDim())
	pr.opts = optionsFor(p, pr.maskType)
	pr.opts.Precision = precisionUnderTest
}

// precisionUnderTest is the Precision of every problem built (the tests of
// this package run one after another); inPrecision sets it for a test.
var precisionUnderTest = attention.PrecisionFloat32

func inPrecision(p attention.Precision, f func(t *testing.T)) func(t *testing.T) {
	return func(t *testing.T) {
		prev := precisionUnderTest
		precisionUnderTest = p
		defer func() { precisionUnderTest = prev }()
		f(t)
	}
}

// optionsFor returns the engine options that implement the features of p.
// Float features must hold float32 values (and, for an F16 mask, values
// that fp16 represents) for the engine and the oracle to agree exactly.
func optionsFor(p reference.Params, maskType attention.DType) attention.Options {
	o := attention.Options{Scale: float32(p.Scale), Causal: p.Causal || p.CausalTopLeft, SoftCap: float32(p.SoftCap)}
	if p.CausalTopLeft {
		o.CausalAlign = attention.TopLeft
	}
	if p.Window {
		o.Window = &attention.Window{Left: p.WindowLeft, Right: p.WindowRight}
	}
	o.Slopes = float32s(p.Slopes)
	o.Sinks = float32s(p.Sinks)
	if p.Mask != nil {
		l := maskLayout(p.MaskShape, p.SeqQ)
		switch maskType {
		case attention.F16:
			o.Mask = attention.F16Tensor(fp16.Float16s(float32s(p.Mask)), l)
		case attention.BF16:
			o.Mask = attention.BF16Tensor(fp16.BFloat16s(float32s(p.Mask)), l)
		default:
			o.Mask = attention.F32Tensor(float32s(p.Mask), l)
		}
	}
	if p.BoolMask != nil {
		o.BoolMask = attention.BoolMask{Layout: maskLayout(p.BoolMaskShape, p.SeqQ), Data: p.BoolMask}
	}
	o.CuSeqQ, o.CuSeqKV = p.CuSeqQ, p.CuSeqKV
	return o
}

// maskLayout is the engine layout of a reference mask of the given
// broadcast shape (the key axis must be full): a broadcast query axis
// becomes a zero SeqStride.
func maskLayout(shape [4]int, nq int) attention.Layout {
	l := attention.BHSD(shape[0], shape[1], shape[2], shape[3])
	if shape[2] == 1 {
		l.Seq, l.SeqStride = nq, 0
	}
	return l
}

func float32s(x []float64) []float32 {
	if x == nil {
		return nil
	}
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

func (pr *problem) kvTensor(x []float32, d int) attention.Tensor {
	p := pr.p
	kv := makeView(pr.kind, p.Batch, p.HeadsKV, p.SeqKV, d)
	switch pr.kvType {
	case attention.FP8E4M3, attention.FP8E5M2:
		// The canonical values are the fp8 values times the head's
		// scale: dividing by it and rounding gives back the codes (the
		// product's rounding is far below half an fp8 step).
		sc := fp8Scales(p.HeadsKV)
		codes := make([]float32, len(x))
		for i, v := range x {
			codes[i] = v / sc[i/(p.SeqKV*d)%p.HeadsKV]
		}
		if pr.kvType == attention.FP8E4M3 {
			buf := impltest.Filled(kv.size, fp16.Float8E4M3(0x7f)) // NaN guards
			scatter(kv, buf, codes, fp16.Float8E4M3FromFloat32)
			return attention.FP8E4M3Tensor(buf[kv.pre:], sc, kv.lay)
		}
		buf := impltest.Filled(kv.size, fp16.Float8E5M2(0x7e))
		scatter(kv, buf, codes, fp16.Float8E5M2FromFloat32)
		return attention.FP8E5M2Tensor(buf[kv.pre:], sc, kv.lay)
	case attention.F16:
		buf := impltest.Filled(kv.size, fp16.FromFloat32(guard))
		scatter(kv, buf, x, fp16.FromFloat32)
		return attention.F16Tensor(buf[kv.pre:], kv.lay)
	case attention.BF16:
		buf := impltest.Filled(kv.size, fp16.BFloat16FromFloat32(guard))
		scatter(kv, buf, x, fp16.BFloat16FromFloat32)
		return attention.BF16Tensor(buf[kv.pre:], kv.lay)
	}
	buf := impltest.Filled(kv.size, guard)
	scatter(kv, buf, x, func(x float32) float32 { return x })
	return attention.F32Tensor(buf[kv.pre:], kv.lay)
}

const outGuard = float32(-12345.5)

// run calls the engine and returns the output and lse in canonical order,
// after checking that nothing outside the output view was written.
func (pr *problem) run(t testing.TB, e *attention.Engine) ([]float32, []float32) {
	t.Helper()
	buf := impltest.Filled(pr.outView.size, outGuard)
	out := attention.F32Tensor(buf[pr.outView.pre:], pr.outView.lay)
	lseLen := pr.p.LSELen()
	lse := impltest.Filled(lseLen+2, outGuard)
	require.NoError(t, e.ForwardLSE(out, lse[1:1+lseLen], pr.qT, pr.kT, pr.vT, pr.opts), pr.String())
	in := inView(pr.outView)
	for i, x := range buf {
		if !in[i] && x != outGuard {
			t.Fatalf("%v: output buffer element %d outside the view was written (%v)", pr, i, x)
		}
	}
	require.Equal(t, outGuard, lse[0], "%v: wrote before lse", pr)
	require.Equal(t, outGuard, lse[lseLen+1], "%v: wrote after lse", pr)
	return gather(pr.outView, buf), lse[1 : 1+lseLen]
}

// oracle returns the float64 reference output and lse.
func (pr *problem) oracle(t testing.TB) ([]float64, []float64) {
	t.Helper()
	out, lse, err := reference.Attention(pr.p, reference.Float64s(pr.q), reference.Float64s(pr.k), reference.Float64s(pr.v))
	require.NoError(t, err)
	return out, lse
}

// computedInBF16 reports whether a call of problem p in precision prec
// computes its products in bfloat16 (attention.ComputedPrecision): a call
// of few rows is computed in float32 whatever the precision.
func computedInBF16(prec attention.Precision, p reference.Params) bool {
	return attention.ComputedPrecision(attention.Options{Precision: prec}, p.HeadsQ, p.HeadsKV, p.SeqQ) == attention.PrecisionBFloat16
}

// oracleBF16QK returns the float64 reference of the problem with Q and K
// rounded to bfloat16, as Precision BFloat16 reads them.
func (pr *problem) oracleBF16QK(t testing.TB) ([]float64, []float64) {
	t.Helper()
	r := func(x []float32) []float64 {
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = float64(fp16.BFloat16FromFloat32(v).Float32())
		}
		return y
	}
	out, lse, err := reference.Attention(pr.p, r(pr.q), r(pr.k), reference.Float64s(pr.v))
	require.NoError(t, err)
	return out, lse
}

// naiveError is the error of the baseline a user would write, the
// yardstick of the pass rule: naive float32 attention, or with Precision
// BFloat16 naive bfloat16 attention (operands rounded at the same points,
// float32 accumulation).
func (pr *problem) naiveError(t testing.TB, want []float64) reference.Errors {
	t.Helper()
	got := make([]float32, pr.p.OutLen())
	n := reference.Naive{BFloat16: pr.opts.Precision == attention.PrecisionBFloat16}
	require.NoError(t, n.Attention(pr.p, got, pr.q, pr.k, pr.v))
	return reference.Compare(got, want)
}

// checkRule applies the pass rule of docs/math.md, Section 5, to errs,
// the errors of a result against the oracle: max abs and RMS error at most
// 2 × naive's + 1e-6 + 2·E_κ. cond returns E_κ (reference.LogitCondition);
// it is called only when the rule without it fails, since it costs a
// second pass over every score.
func checkRule(t testing.TB, what string, errs, naive reference.Errors, cond func() float64) {
	t.Helper()
	tolAbs, tolRMS := 2*naive.MaxAbs+1e-6, 2*naive.RMS+1e-6
	if errs.MaxAbs <= tolAbs && errs.RMS <= tolRMS {
		return
	}
	kc := cond()
	if errs.MaxAbs > tolAbs+2*kc {
		t.Errorf("%s: max abs error %.3g exceeds 2 × naive %.3g + 1e-6 + 2·E_κ (E_κ %.3g)", what, errs.MaxAbs, naive.MaxAbs, kc)
	}
	if errs.RMS > tolRMS+2*kc {
		t.Errorf("%s: RMS error %.3g exceeds 2 × naive %.3g + 1e-6 + 2·E_κ (E_κ %.3g)", what, errs.RMS, naive.RMS, kc)
	}
}

// checkRuleBF16 applies the pass rule of bfloat16 compute precision
// (docs/math.md, Section 8) to errs: max abs and RMS error at most 2 ×
// naive bfloat16's + 1e-6 + 2·E_b. eb returns E_b
// (reference.WeightCondition); it is called only when the rule without it
// fails.
func checkRuleBF16(t testing.TB, what string, errs, naive reference.Errors, eb func() float64) {
	t.Helper()
	if msg := bf16RuleBreak(errs, naive, eb); msg != "" {
		t.Errorf("%s: %s", what, msg)
	}
}

// bf16RuleBreak returns how errs breaks the bfloat16 rule, or "".
func bf16RuleBreak(errs, naive reference.Errors, eb func() float64) string {
	tolAbs, tolRMS := 2*naive.MaxAbs+1e-6, 2*naive.RMS+1e-6
	if errs.MaxAbs <= tolAbs && errs.RMS <= tolRMS {
		return ""
	}
	e := eb()
	if errs.MaxAbs > tolAbs+2*e {
		return fmt.Sprintf("max abs error %.3g exceeds 2 × naive bf16 %.3g + 1e-6 + 2·E_b (E_b %.3g)", errs.MaxAbs, naive.MaxAbs, e)
	}
	if errs.RMS > tolRMS+2*e {
		return fmt.Sprintf("RMS error %.3g exceeds 2 × naive bf16 %.3g + 1e-6 + 2·E_b (E_b %.3g)", errs.RMS, naive.RMS, e)
	}
	return ""
}

// weightCondition returns E_b of pr (reference.WeightCondition).
func (pr *problem) weightCondition(t testing.TB) float64 {
	t.Helper()
	eb, err := reference.WeightCondition(pr.p, reference.Float64s(pr.q), reference.Float64s(pr.k), reference.Float64s(pr.v))
	require.NoError(t, err)
	return eb
}

// logitCondition returns E_κ of pr (reference.LogitCondition).
func (pr *problem) logitCondition(t testing.TB) float64 {
	t.Helper()
	kc, err := reference.LogitCondition(pr.p, reference.Float64s(pr.q), reference.Float64s(pr.k), reference.Float64s(pr.v))
	require.NoError(t, err)
	return kc
}

func lseErrors(got []float32, want []float64) reference.Errors {
	g := make([]float64, len(got))
	for i, x := range got {
		g[i] = float64(x)
	}
	return reference.CompareF64(g, want)
}

// forEachImpl runs f once per kernel implementation, in a subtest named
// after it (impltest.Run: those this machine cannot run are skipped,
// naming what it lacks, and so are those the tier leaves out).
func forEachImpl(t *testing.T, f func(t *testing.T)) { impltest.Run(t, registry.Kernel, f) }

// The fast tier runs this package's tests at the machine's best level and
// at generic; the long tier, and kernel's own tests, at every level
// (docs/testing.md).
func init() { impltest.SetPolicy(impltest.BestAndGeneric) }

// checkPrecisionError applies the pass rule of the precision under test to
// a result got of problem p (q, k, v canonical, [B, H, S, D]) against the
// float64 oracle: max abs error <= tol32 in float32; in bf16 the rule of
// checkRuleBF16, and the log-sum-exp (if
// gotLSE is not nil) within lseTol of the oracle of the rounded Q and K.
func checkPrecisionError(t *testing.T, what string, p reference.Params, q, k, v, got, gotLSE []float32, tol32, lseTol float64) {
	t.Helper()
	want, wantLSE, err := reference.Attention(p, reference.Float64s(q), reference.Float64s(k), reference.Float64s(v))
	require.NoError(t, err)
	if precisionUnderTest == attention.PrecisionBFloat16 {
		naive := make([]float32, p.OutLen())
		n := reference.Naive{BFloat16: true}
		require.NoError(t, n.Attention(p, naive, q, k, v))
		pr := problem{p: p, q: q, k: k, v: v}
		if computedInBF16(precisionUnderTest, p) {
			_, wantLSE = pr.oracleBF16QK(t)
		}
		checkRuleBF16(t, what, reference.Compare(got, want), reference.Compare(naive, want), func() float64 { return pr.weightCondition(t) })
	} else if errs := reference.Compare(got, want); errs.MaxAbs > tol32 {
		t.Errorf("%s: %v; want max abs <= %.3g", what, errs, tol32)
	}
	if gotLSE != nil {
		if errs := lseErrors(gotLSE, wantLSE); errs.MaxAbs > lseTol {
			t.Errorf("%s: lse %v", what, errs)
		}
	}
}
