package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/internal/tier"
)

// TestViewOfKMatchesEqualDims checks the promise of docs/integrating.md
// that V given as a strided view of K's first Dv components (DeepSeek MLA's
// absorbed decode: v := k; v.Dim = Dv) gives, bit for bit, the first Dv
// columns of the call with V = K: for f32, f16, bf16 and (where the dims
// are multiples of Q8Block) q8 K/V, head dims whose Dv is not a multiple
// of the kernels' vector widths, decode-sized calls (the row kernels that
// read V in place) and larger ones, both precisions, every implementation.
func TestViewOfKMatchesEqualDims(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			t.Run(prec.String(), inPrecision(prec, testViewOfK))
		}
	})
}

func testViewOfK(t *testing.T) {
	rng := rand.New(rand.NewPCG(117, 118))
	type shape struct{ d, dv int }
	shapes := []shape{{72, 40}, {200, 136}, {64, 8}, {48, 24}, {576, 512}, {40, 33}, {72, 36}, {24, 7}}
	const hq, hkv = 4, 2
	for _, sh := range shapes {
		types := []attention.DType{attention.F32, attention.F16, attention.BF16}
		if sh.d%attention.Q8Block == 0 && sh.dv%attention.Q8Block == 0 {
			types = append(types, attention.Q8)
		}
		for _, dt := range types {
			for _, nq := range []int{1, 2, 4, 17} {
				for _, nkv := range []int{1, 7, 300} {
					q := randn(rng, hq*nq*sh.d)
					kt := typedTensor(t, dt, randn(rng, hkv*nkv*sh.d), attention.BHSD(1, hkv, nkv, sh.d))
					what := fmt.Sprintf("d %d dv %d %v nq %d nkv %d", sh.d, sh.dv, dt, nq, nkv)
					if !tier.Keep(t, what, 6) {
						continue // drawn first: a cell has the same inputs in both tiers
					}
					qt := attention.F32Tensor(q, attention.BHSD(1, hq, nq, sh.d))
					opts := attention.Options{Causal: true, Precision: precisionUnderTest}
					e := mustEngine(t, attention.Config{Threads: 2})
					full := make([]float32, hq*nq*sh.d)
					require.NoError(t, e.Forward(attention.F32Tensor(full, attention.BHSD(1, hq, nq, sh.d)), qt, kt, kt, opts))
					// V: the first dv components of every K row, in place.
					vt := kt
					vt.Dim = sh.dv
					part := make([]float32, hq*nq*sh.dv)
					require.NoError(t, e.Forward(attention.F32Tensor(part, attention.BHSD(1, hq, nq, sh.dv)), qt, kt, vt, opts))
					checkViewColumns(t, what, full, part, hq*nq, sh.d, sh.dv)
				}
			}
		}
	}
}

// checkViewColumns fails unless the rows of part (dv wide) are the first
// dv columns of the rows of full (d wide), bit for bit; it names every
// column that differs in the first row that does.
func checkViewColumns(t *testing.T, what string, full, part []float32, rows, d, dv int) {
	t.Helper()
	for r := range rows {
		var bad []int
		for c := range dv {
			if math.Float32bits(part[r*dv+c]) != math.Float32bits(full[r*d+c]) {
				bad = append(bad, c)
			}
		}
		if len(bad) > 0 {
			c := bad[0]
			t.Errorf("%s: row %d differs in columns %v: column %d is %v (%#08x) with V a view of dim %d, %v (%#08x) with V = K",
				what, r, bad, c, part[r*dv+c], math.Float32bits(part[r*dv+c]), dv, full[r*d+c], math.Float32bits(full[r*d+c]))
			return
		}
	}
}
