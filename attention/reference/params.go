// Package reference holds the yardsticks that every flashgo attention kernel
// is measured against:
//
//   - [Attention], a float64 oracle that materialises the full score matrix
//     and does a textbook, max-subtracted softmax;
//   - [Compare] and [CompareF64], which summarise how far a result is from
//     the oracle, with explicit rules for NaN and ±Inf;
//   - [Naive], the float32 baseline a user would write without a fused
//     kernel (two Sgemm calls around a row softmax), for benchmarking.
//
// The package deliberately imports no other flashgo package: an oracle that
// shared code with the engine could share its bugs too.
//
// All tensors are plain contiguous slices in layout [batch, heads, seq, dim]
// with dim varying fastest. Attention computes softmax(scale·Q·Kᵀ + mask)·V
// independently for every (batch, query head) pair. Grouped-query attention
// is expressed by HeadsQ = g·HeadsKV: query head h reads K/V head h/g.
package reference

import (
	"fmt"
	"math"
	"math/bits"
)

// Params describes one attention call: the tensor shapes, the softmax scale
// and whether a causal mask is applied.
type Params struct {
	// Batch is the number of independent sequences.
	// HeadsQ is the number of query heads and HeadsKV the number of key/value
	// heads; HeadsQ must be a multiple of HeadsKV (grouped-query attention).
	Batch, HeadsQ, HeadsKV int
	// SeqQ is the number of queries and SeqKV the number of keys per head.
	// Either may be zero: an empty query set gives an empty result, an empty
	// key set gives rows with no visible key (zeros, log-sum-exp −Inf).
	SeqQ, SeqKV int
	// Dim is the head dimension shared by Q, K and V.
	Dim int
	// Scale multiplies Q·Kᵀ before the softmax; 0 means 1/sqrt(Dim), the
	// usual choice, so the zero value of the field does the common thing.
	Scale float64
	// Causal enables the bottom-right aligned causal mask (see Visible).
	Causal bool
}

// Validate reports whether p describes a well-formed attention call. The
// error names the offending field and what was expected, so a failing test
// or a user's misconfiguration can be diagnosed from the message alone.
func (p Params) Validate() error {
	// Plain if-chains rather than a table: Validate runs on every call of
	// the hot baseline, and a table of structs would be heap-allocated.
	if err := atLeast("Batch", p.Batch, 1); err != nil {
		return err
	}
	if err := atLeast("HeadsQ", p.HeadsQ, 1); err != nil {
		return err
	}
	if err := atLeast("HeadsKV", p.HeadsKV, 1); err != nil {
		return err
	}
	if err := atLeast("SeqQ", p.SeqQ, 0); err != nil {
		return err
	}
	if err := atLeast("SeqKV", p.SeqKV, 0); err != nil {
		return err
	}
	if err := atLeast("Dim", p.Dim, 1); err != nil {
		return err
	}
	if p.HeadsQ%p.HeadsKV != 0 {
		return fmt.Errorf("reference: Params.HeadsQ = %d is not a multiple of Params.HeadsKV = %d", p.HeadsQ, p.HeadsKV)
	}
	if math.IsNaN(p.Scale) || math.IsInf(p.Scale, 0) {
		return fmt.Errorf("reference: Params.Scale = %v, want a finite number (0 means 1/sqrt(Dim))", p.Scale)
	}
	// The length helpers multiply the sizes together; refuse shapes whose
	// element counts (or the per-head score matrix) do not fit in an int
	// rather than let them wrap around silently.
	if !fits(p.Batch, p.HeadsQ, p.SeqQ, p.Dim) {
		return fmt.Errorf("reference: Params sizes overflow int in QLen (Batch·HeadsQ·SeqQ·Dim)")
	}
	if !fits(p.Batch, p.HeadsKV, p.SeqKV, p.Dim) {
		return fmt.Errorf("reference: Params sizes overflow int in KVLen (Batch·HeadsKV·SeqKV·Dim)")
	}
	if !fits(p.SeqQ, p.SeqKV, 1, 1) {
		return fmt.Errorf("reference: Params sizes overflow int in the score matrix (SeqQ·SeqKV)")
	}
	return nil
}

// atLeast returns an error naming the field when v < lo.
func atLeast(field string, v, lo int) error {
	if v < lo {
		return fmt.Errorf("reference: Params.%s = %d, want >= %d", field, v, lo)
	}
	return nil
}

// fits reports whether the product of four non-negative ints fits in an int.
func fits(a, b, c, d int) bool {
	r := uint64(1)
	for _, x := range [4]int{a, b, c, d} {
		hi, lo := bits.Mul64(r, uint64(x))
		if hi != 0 || lo > math.MaxInt {
			return false
		}
		r = lo
	}
	return true
}

// QLen is the number of elements of Q and of the output:
// Batch·HeadsQ·SeqQ·Dim.
func (p Params) QLen() int { return p.Batch * p.HeadsQ * p.SeqQ * p.Dim }

// KVLen is the number of elements of K and of V: Batch·HeadsKV·SeqKV·Dim.
func (p Params) KVLen() int { return p.Batch * p.HeadsKV * p.SeqKV * p.Dim }

// LSELen is the number of log-sum-exp values, one per query row:
// Batch·HeadsQ·SeqQ.
func (p Params) LSELen() int { return p.Batch * p.HeadsQ * p.SeqQ }

// EffectiveScale is the scale actually applied to Q·Kᵀ: Scale, or
// 1/sqrt(Dim) when Scale is 0. It is only meaningful for valid Params.
func (p Params) EffectiveScale() float64 {
	if p.Scale == 0 {
		return 1 / math.Sqrt(float64(p.Dim))
	}
	return p.Scale
}

// Visible reports whether query i (0-based, of SeqQ) may attend to key j
// (0-based, of SeqKV). Indices outside the sequences are never visible.
//
// Without Causal every key is visible. With Causal the mask is aligned to
// the bottom right: query i sees key j iff j <= i + (SeqKV − SeqQ). The
// alignment matters when SeqQ ≠ SeqKV. In decoding with a KV cache the
// queries are the newest SeqQ tokens of a SeqKV-long sequence, so the last
// query must see every key; aligning to the top left would instead hide the
// cached prefix. When SeqQ > SeqKV the first SeqQ − SeqKV queries see no key
// at all; such rows give zeros and log-sum-exp −Inf.
func (p Params) Visible(i, j int) bool {
	if i < 0 || i >= p.SeqQ || j < 0 || j >= p.SeqKV {
		return false
	}
	return !p.Causal || j <= i+(p.SeqKV-p.SeqQ)
}

// visibleKeys is the number of keys query i sees. Under the causal rule the
// visible keys of a row always form a prefix 0..n−1 of the key sequence, so a
// count describes them fully; the oracle relies on that to touch only
// visible keys.
func (p Params) visibleKeys(i int) int {
	if !p.Causal {
		return p.SeqKV
	}
	return min(max(i+(p.SeqKV-p.SeqQ)+1, 0), p.SeqKV)
}

// FLOPs is the nominal floating-point operation count of the call:
// 4·Batch·HeadsQ·SeqQ·SeqKV·Dim (two matrix products of 2·SeqQ·SeqKV·Dim
// each), halved when Causal. Halving is the convention of the project's
// shape suite; it ignores the softmax and the exact triangle size so that
// GFLOP/s figures are comparable across kernels and published numbers.
func (p Params) FLOPs() float64 {
	f := 4 * float64(p.Batch) * float64(p.HeadsQ) * float64(p.SeqQ) * float64(p.SeqKV) * float64(p.Dim)
	if p.Causal {
		f /= 2
	}
	return f
}

// checkLen returns an error naming the argument when a slice is too short.
// Longer slices are accepted so that callers may pass views into larger
// buffers; only the leading need elements are used.
func checkLen(name string, have, need int, what string) error {
	if have < need {
		return fmt.Errorf("reference: %s has %d elements, want at least %d (%s)", name, have, need, what)
	}
	return nil
}
