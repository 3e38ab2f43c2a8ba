package attention_test

import (
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
)

// TestBF16RuleFloor checks the floor of the bfloat16 accuracy rule
// (docs/math.md, Section 8) where the rule without it broke with no engine
// defect: every row sees one key and a sink (causal, window (0, 0)), so
// the engine keeps the key's weight exact while naive bfloat16 attention
// rounds it, and that rounding sometimes cancels the naive baseline's
// other errors. Over 80 draws on every implementation the engine must
// pass the rule with its floor 2·E_b, and two deliberately broken results
// must fail it: one output column with its sign flipped, and the output
// computed without the sink.
func TestBF16RuleFloor(t *testing.T) {
	forEachImpl(t, inPrecision(attention.PrecisionBFloat16, func(t *testing.T) {
		e := mustEngine(t, attention.Config{Threads: 2})
		withoutFloor := 0
		for draw := range 80 {
			rng := rand.New(rand.NewPCG(97, uint64(draw)))
			p := reference.Params{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 16, SeqKV: 16, Dim: 64,
				Causal: true, Window: true, Sinks: make([]float64, 4)}
			for h := range p.Sinks {
				p.Sinks[h] = float64(float32(rng.NormFloat64()))
			}
			pr := newProblem(rng, p, attention.F32, bhsd)
			got, _ := pr.run(t, e)
			want, _ := pr.oracle(t)
			naive := pr.naiveError(t, want)
			errs := reference.Compare(got, want)
			eb := func() float64 { return pr.weightCondition(t) }
			checkRuleBF16(t, pr.String(), errs, naive, eb)
			if errs.MaxAbs > 2*naive.MaxAbs+1e-6 {
				withoutFloor++
			}

			// One column with its sign flipped.
			flipped := append([]float32(nil), got...)
			for r := range p.HeadsQ * p.SeqQ {
				flipped[r*p.Dim+5] = -flipped[r*p.Dim+5]
			}
			if bf16RuleBreak(reference.Compare(flipped, want), naive, eb) == "" {
				t.Errorf("draw %d: column 5 with its sign flipped passes the rule", draw)
			}
			// The sink dropped.
			noSink := *pr
			noSink.opts.Sinks = nil
			dropped, _ := noSink.run(t, e)
			if bf16RuleBreak(reference.Compare(dropped, want), naive, eb) == "" {
				t.Errorf("draw %d: the result without the sink passes the rule", draw)
			}
		}
		t.Logf("%d of 80 draws need the floor", withoutFloor)
	}))
	// A baseline whose roundings cancelled (error 0) is no measure of the
	// engine's: an error within the weights' rounding, 2·E_b, passes, and
	// one beyond it fails.
	const eb = 1e-3
	lucky := reference.Errors{}
	if msg := bf16RuleBreak(reference.Errors{MaxAbs: 1.9 * eb, RMS: eb}, lucky, func() float64 { return eb }); msg != "" {
		t.Errorf("an error of 1.9·E_b against a naive error of 0: %s", msg)
	}
	if bf16RuleBreak(reference.Errors{MaxAbs: 2.1 * eb, RMS: eb}, lucky, func() float64 { return eb }) == "" {
		t.Errorf("an error of 2.1·E_b against a naive error of 0 passes")
	}
}
