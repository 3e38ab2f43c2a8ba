package reference

import "math"

// Float32Unit is u = 2⁻²⁴, the unit roundoff of float32 (round to nearest).
const Float32Unit = 0x1p-24

// LogitCondition returns the first-order effect on the output of a relative
// error of u = Float32Unit in every product q_k·k_jk of every score and in
// every logit: the largest, over the output elements (row r = (b, h, i),
// column c), of
//
//	E_κ(r, c) = u · Σ_j p_j · κ_j · |v_jc − o_c|
//	κ_j       = |x_j| + σ'_j·|Scale|·Σ_k |q_k·k_jk|
//
// where j runs over the row's visible keys, x_j are the logits and p_j the
// softmax weights of the package comment (the sink in the denominator),
// o = Σ_j p_j v_j is the exact output, and σ'_j = 1 − tanh²(s_j/SoftCap) is
// the slope of soft-capping at the scaled dot product s_j (1 without
// SoftCap). It follows from ∂o_c/∂x_j = p_j(v_jc − o_c): a logit error Δx_j
// moves o_c by Σ_j p_j Δx_j (v_jc − o_c), and float32 evaluation commits
// |Δx_j| of the order of u·κ_j (the rounding of the logit itself, plus the
// rounding of a dot product of d terms, which is relative to Σ_k |q_k·k_jk|
// rather than to |s_j|, damped by the soft-cap). E_κ is the condition of
// the call in float32: for well-scaled inputs it is far below 10⁻⁶, and it
// grows with the logits and with cancellation in the dot products. The
// project's accuracy rule adds it to its tolerance (docs/math.md, Section
// 5).
//
// Elements whose term is not finite (a NaN or infinite input in a visible
// row) are skipped, so the result is always finite: a rule that adds it
// cannot be loosened into never failing. Fully masked rows contribute
// nothing. Inputs are as for Attention; an error is returned for invalid
// Params or short slices.
func LogitCondition(p Params, q, k, v []float64) (float64, error) {
	return condition(p, q, k, v, Float32Unit, func(pj, kappa, vjc, oc float64) float64 { return pj * kappa * math.Abs(vjc-oc) })
}

// BFloat16Unit is u_b = 2⁻⁹, the unit roundoff of bfloat16 (round to
// nearest).
const BFloat16Unit = 0x1p-9

// WeightCondition returns E_b, the bound on what rounding the softmax
// weights to bfloat16 moves an output: the largest, over the output
// elements (row r, column c), of
//
//	E_b(r, c) = u_b · Σ_j p_j · |v_jc|,   u_b = BFloat16Unit
//
// with p_j the weights and j the visible keys as in LogitCondition. In
// bfloat16 compute precision the engine and the naive bfloat16 baseline
// (Naive{BFloat16: true}) round Q, K and V alike and form the same exact
// products; they differ in the rounding of the weights (each rounds
// e^(s−m) against its own running maximum) and in the order of float32
// sums. The first makes their outputs differ by at most 2·E_b, so when
// the baseline's own roundings happen to cancel, its error is no measure
// of the engine's: the bfloat16 accuracy rule adds 2·E_b as its floor
// (docs/math.md, Section 8). Non-finite terms are skipped, as in
// LogitCondition.
func WeightCondition(p Params, q, k, v []float64) (float64, error) {
	return condition(p, q, k, v, BFloat16Unit, func(pj, _, vjc, _ float64) float64 { return pj * math.Abs(vjc) })
}

// condition returns the largest, over the output elements (r, c), of unit
// · Σ_j term(p_j, κ_j, v_jc, o_c), for LogitCondition and WeightCondition.
func condition(p Params, q, k, v []float64, unit float64, term func(pj, kappa, vjc, oc float64) float64) (float64, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	if err := checkLen("q", len(q), p.QLen(), "Params.QLen"); err != nil {
		return 0, err
	}
	if err := checkLen("k", len(k), p.KVLen(), "Params.KVLen"); err != nil {
		return 0, err
	}
	if err := checkLen("v", len(v), p.VLen(), "Params.VLen"); err != nil {
		return 0, err
	}
	if p.SeqQ == 0 || p.SeqKV == 0 {
		return 0, nil
	}
	d, dv := p.Dim, p.VDim()
	group := p.HeadsQ / p.HeadsKV
	scale := p.EffectiveScale()
	var worst float64
	keys := make([]int, 0, p.SeqKV)
	x := make([]float64, 0, p.SeqKV)     // logits, then weights p_j
	kappa := make([]float64, 0, p.SeqKV) // κ_j
	o := make([]float64, dv)
	for b := 0; b < p.Batch; b++ {
		for h := 0; h < p.HeadsQ; h++ {
			kvOff := (b*p.HeadsKV + h/group) * p.SeqKV * d
			vOff := (b*p.HeadsKV + h/group) * p.SeqKV * dv
			sink := p.sink(h)
			for i := 0; i < p.SeqQ; i++ {
				row := (b*p.HeadsQ+h)*p.SeqQ + i
				qi := q[row*d : row*d+d]
				keys, x, kappa = keys[:0], x[:0], kappa[:0]
				lo, hi := p.keyRange(i)
				_, kv0, diag := p.rowGeom(i)
				for j := lo; j < hi; j++ {
					bias, ok := p.elementBias(b, h, i, j, diag, j-kv0)
					if !ok {
						continue
					}
					kj := k[kvOff+j*d : kvOff+j*d+d]
					var s, a float64
					for c, qc := range qi {
						s += qc * kj[c]
						a += math.Abs(qc * kj[c])
					}
					s, a = scale*s, math.Abs(scale)*a
					if p.SoftCap > 0 {
						t := math.Tanh(s / p.SoftCap)
						s, a = p.SoftCap*t, a*(1-t*t)
					}
					keys = append(keys, j)
					x = append(x, s+bias)
					kappa = append(kappa, a+math.Abs(s+bias))
				}
				if len(keys) == 0 {
					continue
				}
				m := sink
				for _, xj := range x {
					m = max(m, xj)
				}
				var z float64
				if p.Sinks != nil {
					z = math.Exp(sink - m)
				}
				for t, xj := range x {
					x[t] = math.Exp(xj - m)
					z += x[t]
				}
				clear(o)
				for t, j := range keys {
					x[t] /= z
					for c, vc := range v[vOff+j*dv : vOff+j*dv+dv] {
						o[c] += x[t] * vc
					}
				}
				for c, oc := range o {
					var e float64
					for t, j := range keys {
						e += term(x[t], kappa[t], v[vOff+j*dv+c], oc)
					}
					if e *= unit; e > worst && !math.IsInf(e, 0) { // NaN fails e > worst
						worst = e
					}
				}
			}
		}
	}
	return worst, nil
}
