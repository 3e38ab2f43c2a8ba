package reference

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// Attention is the float64 oracle: it returns out = softmax(scale·Q·Kᵀ +
// mask)·V (QLen elements, layout [batch, HeadsQ, SeqQ, Dim]) and the natural
// log-sum-exp of every row's scaled, visible scores (LSELen elements, layout
// [batch, HeadsQ, SeqQ]). q has layout [batch, HeadsQ, SeqQ, Dim] and k, v
// have [batch, HeadsKV, SeqKV, Dim]; slices longer than needed are accepted
// and only their leading elements read.
//
// It favours being obviously right over being fast: per head it builds the
// full SeqQ×SeqKV score matrix in float64 and runs a textbook softmax that
// subtracts the row maximum over visible keys before exponentiating, so
// logits of any finite size neither overflow nor lose the argmax.
//
// Semantics that kernels are checked against:
//   - a row with no visible key (SeqKV = 0, or causal with SeqQ > SeqKV)
//     gives output zeros and lse −Inf, never NaN;
//   - masked keys do not influence a row at all: the softmax and P·V run over
//     the visible keys only, so a NaN or Inf stored in K or V at a masked
//     position cannot leak in (0·NaN is never formed);
//   - a NaN among a row's visible inputs makes that row NaN, as plain
//     arithmetic does. The same holds when every visible score is −Inf or
//     some visible score is +Inf (∞−∞ appears); those rows are NaN too.
//
// An error is returned, and nothing computed, for invalid Params or when a
// slice is shorter than the shape requires; the message names the argument.
func Attention(p Params, q, k, v []float64) (out, lse []float64, err error) {
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	if err := checkLen("q", len(q), p.QLen(), "Params.QLen"); err != nil {
		return nil, nil, err
	}
	if err := checkLen("k", len(k), p.KVLen(), "Params.KVLen"); err != nil {
		return nil, nil, err
	}
	if err := checkLen("v", len(v), p.KVLen(), "Params.KVLen"); err != nil {
		return nil, nil, err
	}

	out = make([]float64, p.QLen())
	lse = make([]float64, p.LSELen())
	if p.SeqQ == 0 {
		return out, lse, nil
	}
	if p.SeqKV == 0 {
		// No keys: every row is fully masked. Handled up front because BLAS
		// rejects a zero leading dimension for the empty score matrix.
		for i := range lse {
			lse[i] = math.Inf(-1)
		}
		return out, lse, nil
	}

	d := p.Dim
	group := p.HeadsQ / p.HeadsKV
	scale := p.EffectiveScale()
	s := blas64.General{Rows: p.SeqQ, Cols: p.SeqKV, Stride: p.SeqKV, Data: make([]float64, p.SeqQ*p.SeqKV)}
	w := make([]float64, p.SeqKV) // one row of softmax weights

	for b := 0; b < p.Batch; b++ {
		for h := 0; h < p.HeadsQ; h++ {
			qOff := (b*p.HeadsQ + h) * p.SeqQ * d
			kvOff := (b*p.HeadsKV + h/group) * p.SeqKV * d
			qm := blas64.General{Rows: p.SeqQ, Cols: d, Stride: d, Data: q[qOff : qOff+p.SeqQ*d]}
			km := blas64.General{Rows: p.SeqKV, Cols: d, Stride: d, Data: k[kvOff : kvOff+p.SeqKV*d]}

			// S = scale·Q·Kᵀ for all pairs. Scores at masked positions are
			// computed too (possibly NaN from a masked K row) but are never
			// read below, which keeps them harmless. The NoTrans×Trans form
			// is a plain dot product per entry, so a NaN in a visible input
			// always propagates.
			blas64.Gemm(blas.NoTrans, blas.Trans, scale, qm, km, 0, s)

			for i := 0; i < p.SeqQ; i++ {
				row := (b*p.HeadsQ+h)*p.SeqQ + i
				n := p.visibleKeys(i)
				if n == 0 {
					// Nothing to attend to: the empty sum is 0 and its log
					// −Inf; the output row keeps its zeros.
					lse[row] = math.Inf(-1)
					continue
				}
				sc := s.Data[i*p.SeqKV : i*p.SeqKV+n]

				// The max is taken with '>' so a NaN score is skipped here
				// but still poisons the row through exp(NaN−m) below; that
				// is the "natural arithmetic" NaN rule.
				m := math.Inf(-1)
				for _, x := range sc {
					if x > m {
						m = x
					}
				}
				var sum float64
				for j, x := range sc {
					w[j] = math.Exp(x - m)
					sum += w[j]
				}
				for j := range sc {
					w[j] /= sum
				}
				lse[row] = m + math.Log(sum)

				// out_i = Σ_{j<n} w_j·V_j, restricted to the visible prefix of
				// V. This is a per-row Gemv rather than one P·V Gemm because
				// rows see prefixes of different length under the causal
				// mask, and because gonum's Gemm skips zero entries of P:
				// that would hide a NaN in a visible V row whose weight
				// underflowed to 0, breaking the NaN rule above.
				vm := blas64.General{Rows: n, Cols: d, Stride: d, Data: v[kvOff : kvOff+n*d]}
				blas64.Gemv(blas.Trans, 1, vm,
					blas64.Vector{N: n, Inc: 1, Data: w[:n]},
					0, blas64.Vector{N: d, Inc: 1, Data: out[row*d : row*d+d]})
			}
		}
	}
	return out, lse, nil
}

// Float64s returns a newly allocated float64 copy of x. Kernels work in
// float32; tests widen their inputs with it before calling the oracle so that
// both see exactly the same values.
func Float64s(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, f := range x {
		y[i] = float64(f)
	}
	return y
}
