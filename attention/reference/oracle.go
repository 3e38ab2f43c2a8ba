package reference

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// Attention is the float64 oracle: it returns out = softmax(scale·Q·Kᵀ +
// mask)·V (OutLen elements, layout [batch, HeadsQ, SeqQ, VDim]) and the natural
// log-sum-exp of every row's visible logits, sink included (LSELen elements,
// layout [batch, HeadsQ, SeqQ]). q has layout [batch, HeadsQ, SeqQ, Dim] and
// k has [batch, HeadsKV, SeqKV, Dim] and v [batch, HeadsKV, SeqKV, VDim]; slices longer than needed are
// accepted and only their leading elements read. Every feature of Params
// (causal masks of either alignment, sliding window, float and boolean
// masks, ALiBi, soft-capping, sinks, variable-length batches) is applied
// exactly as the package comment defines.
//
// It favours being obviously right over being fast: per head it builds the
// full SeqQ×SeqKV score matrix in float64 and runs a textbook softmax that
// subtracts the row maximum over visible keys (and the sink) before
// exponentiating, so logits of any finite size neither overflow nor lose the
// argmax.
//
// Semantics that kernels are checked against:
//   - a row with no visible key (SeqKV = 0, causal with SeqQ > SeqKV, a
//     window or mask that hides everything, an empty sequence of a
//     variable-length batch) gives output zeros and lse −Inf, or lse = the
//     head's sink when Sinks is set; never NaN;
//   - masked keys do not influence a row at all: the softmax and P·V run over
//     the visible keys only, so a NaN or Inf stored in K or V at a masked
//     position cannot leak in (0·NaN is never formed);
//   - a NaN among a row's visible inputs (Q, K, V, a Mask entry) makes that
//     row NaN, as plain arithmetic does. The same holds when every visible
//     logit is −Inf and there is no finite sink, or some visible logit is
//     +Inf (∞−∞ appears); those rows are NaN too.
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
	if err := checkLen("v", len(v), p.VLen(), "Params.VLen"); err != nil {
		return nil, nil, err
	}

	out = make([]float64, p.OutLen())
	lse = make([]float64, p.LSELen())
	if p.SeqQ == 0 {
		return out, lse, nil
	}
	if p.SeqKV == 0 {
		// No keys: every row is fully masked. Handled up front because BLAS
		// rejects a zero leading dimension for the empty score matrix.
		for b := 0; b < p.Batch; b++ {
			for h := 0; h < p.HeadsQ; h++ {
				row := (b*p.HeadsQ + h) * p.SeqQ
				for i := 0; i < p.SeqQ; i++ {
					lse[row+i] = p.sink(h)
				}
			}
		}
		return out, lse, nil
	}

	d, dv := p.Dim, p.VDim()
	group := p.HeadsQ / p.HeadsKV
	scale := p.EffectiveScale()
	s := blas64.General{Rows: p.SeqQ, Cols: p.SeqKV, Stride: p.SeqKV, Data: make([]float64, p.SeqQ*p.SeqKV)}
	keys := make([]int, 0, p.SeqKV)  // one row's visible keys
	w := make([]float64, 0, p.SeqKV) // their logits, then softmax weights

	for b := 0; b < p.Batch; b++ {
		for h := 0; h < p.HeadsQ; h++ {
			qOff := (b*p.HeadsQ + h) * p.SeqQ * d
			kvOff := (b*p.HeadsKV + h/group) * p.SeqKV * d
			qm := blas64.General{Rows: p.SeqQ, Cols: d, Stride: d, Data: q[qOff : qOff+p.SeqQ*d]}
			km := blas64.General{Rows: p.SeqKV, Cols: d, Stride: d, Data: k[kvOff : kvOff+p.SeqKV*d]}
			sink := p.sink(h)

			// S = scale·Q·Kᵀ for all pairs. Scores at masked positions are
			// computed too (possibly NaN from a masked K row) but are never
			// read below, which keeps them harmless. The NoTrans×Trans form
			// is a plain dot product per entry, so a NaN in a visible input
			// always propagates.
			blas64.Gemm(blas.NoTrans, blas.Trans, scale, qm, km, 0, s)

			for i := 0; i < p.SeqQ; i++ {
				row := (b*p.HeadsQ+h)*p.SeqQ + i

				// The visible keys and their logits x_j = softcap(s_ij) +
				// ALiBi + Mask, in key order.
				keys, w = keys[:0], w[:0]
				lo, hi := p.keyRange(i)
				_, kv0, diag := p.rowGeom(i)
				for j := lo; j < hi; j++ {
					bias, ok := p.elementBias(b, h, i, j, diag, j-kv0)
					if !ok {
						continue
					}
					x := s.Data[i*p.SeqKV+j]
					if p.SoftCap > 0 {
						x = p.SoftCap * math.Tanh(x/p.SoftCap)
					}
					keys = append(keys, j)
					w = append(w, x+bias)
				}
				if len(keys) == 0 {
					// Nothing to attend to: the empty sum is 0 and its log
					// −Inf, plus the sink if any; the output row keeps its
					// zeros.
					lse[row] = sink
					continue
				}

				// The max is taken with '>' so a NaN logit is skipped here
				// but still poisons the row through exp(NaN−m) below; that
				// is the "natural arithmetic" NaN rule. The sink (−Inf when
				// absent) takes part in the max and the sum, not in P·V.
				m := sink
				for _, x := range w {
					if x > m {
						m = x
					}
				}
				var sum float64
				if p.Sinks != nil {
					sum = math.Exp(sink - m)
				}
				for t, x := range w {
					w[t] = math.Exp(x - m)
					sum += w[t]
				}
				for t := range w {
					w[t] /= sum
				}
				lse[row] = m + math.Log(sum)

				// out_i = Σ_t w_t·V_{keys[t]}, as explicit products so that a
				// NaN in a visible V row reaches the output even when its
				// weight underflowed to 0 (gonum's Gemm would skip that
				// zero, breaking the NaN rule above).
				o := out[row*dv : row*dv+dv]
				vOff := (b*p.HeadsKV + h/group) * p.SeqKV * dv
				for t, j := range keys {
					vj := v[vOff+j*dv : vOff+j*dv+dv]
					for c, x := range vj {
						o[c] += w[t] * x
					}
				}
			}
		}
	}
	return out, lse, nil
}

// sink is the sink logit of query head h, −Inf when Sinks is nil.
func (p Params) sink(h int) float64 {
	if p.Sinks == nil {
		return math.Inf(-1)
	}
	return p.Sinks[h]
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
