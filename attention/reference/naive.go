package reference

import (
	"math"

	"github.com/flashgo/flashgo/fp16"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Naive is the float32 attention a user would write without a fused kernel:
// per (batch, query head) it materialises S = scale·Q·Kᵀ with gonum's Sgemm,
// sets masked scores to −Inf, runs a row softmax in float32 and multiplies
// O = P·V with a second Sgemm. It is the baseline flashgo is benchmarked
// against, not an oracle: it keeps the whole SeqQ×SeqKV score matrix in
// memory, and it makes no promise about NaN or Inf stored at masked K/V
// positions (the P·V product is free to multiply a masked zero weight by
// them, as a user's code would). Use Attention to check results.
//
// Every feature of Params is supported, with the definitions of the package
// comment evaluated in float32: causal masks of both alignments, the
// sliding window, Mask and BoolMask (as a user would, by editing the score
// matrix), ALiBi, soft-capping and sinks. A variable-length batch
// (CuSeqQ/CuSeqKV) is computed as one packed SeqQ×SeqKV problem whose
// cross-sequence scores are masked, as a user who packs sequences without a
// varlen kernel would; the products therefore cost as much as the packed
// lengths.
//
// The zero value is ready to use. A Naive keeps its score matrix between
// calls, so repeated calls with the same (or a smaller) shape do not
// allocate; it is therefore not safe for concurrent use. Gonum's Sgemm
// itself spawns goroutines, which allocate, once a product spans at least
// four 64×64 output blocks (e.g. SeqQ and SeqKV both above 128); the
// allocation-free property covers Naive's own work only.
//
// With BFloat16 set it is the naive bfloat16 attention, the yardstick of
// flashgo's bf16 compute precision: it rounds Q, K and V to bfloat16
// (nearest even) before the products, and each key's weight exp(s − m)
// relative to the row maximum m before the division by the row sum (which
// adds the unrounded weights), and accumulates both products in float32:
// the rounding points of flashgo's bf16 compute precision. The rounded copies
// of Q, K and V are allocated per call.
type Naive struct {
	// BFloat16 rounds the operands of both products to bfloat16.
	BFloat16 bool

	scores []float32 // SeqQ×SeqKV scratch, reused across heads and calls
}

// roundedBF16 returns a copy of x rounded to bfloat16.
func roundedBF16(x []float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = fp16.BFloat16FromFloat32(v).Float32()
	}
	return y
}

// Attention writes softmax(scale·Q·Kᵀ + mask)·V into out (layout [batch,
// HeadsQ, SeqQ, VDim]) for q ([batch, HeadsQ, SeqQ, Dim]), k ([batch,
// HeadsKV, SeqKV, Dim]) and v ([batch, HeadsKV, SeqKV, VDim]). The log-sum-exp is not computed. Rows with no
// visible key are written as zeros. An error is returned, and nothing
// written, for invalid Params or when a slice is shorter than needed; the
// message names the argument.
func (n *Naive) Attention(p Params, out, q, k, v []float32) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if err := checkLen("out", len(out), p.OutLen(), "Params.OutLen"); err != nil {
		return err
	}
	if err := checkLen("q", len(q), p.QLen(), "Params.QLen"); err != nil {
		return err
	}
	if err := checkLen("k", len(k), p.KVLen(), "Params.KVLen"); err != nil {
		return err
	}
	if err := checkLen("v", len(v), p.VLen(), "Params.VLen"); err != nil {
		return err
	}
	if p.SeqQ == 0 {
		return nil
	}
	if p.SeqKV == 0 {
		// Every row is fully masked; BLAS would also reject the zero leading
		// dimension of an empty score matrix.
		clear(out[:p.OutLen()])
		return nil
	}

	if n.BFloat16 {
		q, k, v = roundedBF16(q[:p.QLen()]), roundedBF16(k[:p.KVLen()]), roundedBF16(v[:p.VLen()])
	}
	d, dv := p.Dim, p.VDim()
	nq, nk := p.SeqQ, p.SeqKV
	if cap(n.scores) < nq*nk {
		n.scores = make([]float32, nq*nk)
	}
	s := n.scores[:nq*nk]
	group := p.HeadsQ / p.HeadsKV
	scale := float32(p.EffectiveScale())
	perElement := p.hasElementTerms()
	negInf := float32(math.Inf(-1))
	var impl gonum.Implementation

	for b := 0; b < p.Batch; b++ {
		for h := 0; h < p.HeadsQ; h++ {
			qOff := (b*p.HeadsQ + h) * nq * d
			kvOff := (b*p.HeadsKV + h/group) * nk * d
			qh := q[qOff : qOff+nq*d]
			kh := k[kvOff : kvOff+nk*d]
			vOff := (b*p.HeadsKV + h/group) * nk * dv
			vh := v[vOff : vOff+nk*dv]
			oh := out[(b*p.HeadsQ+h)*nq*dv:][:nq*dv]
			sink := float32(p.sink(h))

			// S = scale·Q·Kᵀ  (nq×nk).
			impl.Sgemm(blas.NoTrans, blas.Trans, nq, nk, d, scale, qh, d, kh, d, 0, s, nk)

			for i := 0; i < nq; i++ {
				row := s[i*nk : i*nk+nk]
				lo, hi := p.keyRange(i)
				vis := hi - lo
				if perElement && vis > 0 {
					_, kv0, diag := p.rowGeom(i)
					for j := lo; j < hi; j++ {
						bias, ok := p.elementBias(b, h, i, j, diag, j-kv0)
						if !ok {
							row[j] = negInf
							vis--
							continue
						}
						x := row[j]
						if p.SoftCap > 0 {
							x = float32(p.SoftCap * math.Tanh(float64(x)/p.SoftCap))
						}
						row[j] = x + float32(bias)
					}
				}
				if vis == 0 {
					// exp(−Inf − (−Inf)) would be NaN; a fully masked row
					// attends to nothing and yields zeros.
					clear(row)
					continue
				}
				// The row maximum includes the sink, except in bfloat16,
				// where the probabilities are rounded relative to the
				// maximum of the scores alone, as the fused kernels round
				// them (the sink joins the sum at the end there).
				m := sink // −Inf without sinks
				if n.BFloat16 {
					m = float32(math.Inf(-1))
				}
				for _, x := range row[lo:hi] {
					if x > m {
						m = x
					}
				}
				if math.IsInf(float64(m), -1) {
					m = sink // every score −Inf: the sink's weight alone
				}
				var sum float32
				if p.Sinks != nil {
					sum = float32(math.Exp(float64(sink - m)))
				}
				for j, x := range row[lo:hi] {
					e := float32(math.Exp(float64(x - m)))
					sum += e
					if n.BFloat16 {
						// Rounded where the fused kernel rounds: the weight
						// relative to the row maximum, before the division.
						e = fp16.BFloat16FromFloat32(e).Float32()
					}
					row[lo+j] = e
				}
				// Masked keys inside [lo, hi) hold −Inf and got exp = 0; the
				// ones outside were never exponentiated.
				for j := lo; j < hi; j++ {
					row[j] /= sum
				}
				clear(row[:lo])
				clear(row[hi:])
			}

			// O = P·V  (nq×d).
			impl.Sgemm(blas.NoTrans, blas.NoTrans, nq, dv, nk, 1, s, nk, vh, dv, 0, oh, dv)
		}
	}
	return nil
}
