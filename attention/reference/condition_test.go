package reference

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLogitCondition(t *testing.T) {
	// d = 1, q = 1, keys 1 and 2, values 0 and 1: s = x = (1, 2), κ = 2|s|,
	// o = p2, so E_κ = u·(p1·2·p2 + p2·4·p1) = 6u·p1·p2.
	p := Params{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqKV: 2, Dim: 1, Scale: 1}
	got, err := LogitCondition(p, []float64{1}, []float64{1, 2}, []float64{0, 1})
	require.NoError(t, err)
	p2 := math.E / (1 + math.E)
	assert.InDelta(t, 6*Float32Unit*(1-p2)*p2, got, 1e-22)

	// A soft-cap damps the dot-product part by 1 − tanh², not the logit's.
	p.SoftCap = 2
	got, err = LogitCondition(p, []float64{1}, []float64{1, 2}, []float64{0, 1})
	require.NoError(t, err)
	x1, x2 := 2*math.Tanh(0.5), 2*math.Tanh(1)
	k1, k2 := x1+1*(1-math.Pow(math.Tanh(0.5), 2)), x2+2*(1-math.Pow(math.Tanh(1), 2))
	p2 = 1 / (1 + math.Exp(x1-x2))
	assert.InDelta(t, Float32Unit*(k1+k2)*(1-p2)*p2, got, 1e-22)

	// One visible key (o = v) and fully masked rows: nothing to move.
	p = Params{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 2, SeqKV: 2, Dim: 1, CausalTopLeft: true,
		Window: true, WindowLeft: 0, WindowRight: 0}
	got, err = LogitCondition(p, []float64{3, 4}, []float64{5, 6}, []float64{7, 8})
	require.NoError(t, err)
	assert.Zero(t, got)

	// A NaN in a visible input is skipped, never returned.
	p = Params{Batch: 1, HeadsQ: 1, HeadsKV: 1, SeqQ: 1, SeqKV: 2, Dim: 1}
	got, err = LogitCondition(p, []float64{math.NaN()}, []float64{1, 2}, []float64{0, 1})
	require.NoError(t, err)
	assert.Zero(t, got)

	_, err = LogitCondition(p, nil, []float64{1, 2}, []float64{0, 1})
	assert.ErrorContains(t, err, "q")
}
