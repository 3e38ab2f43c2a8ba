package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func randomLogits(rng *rand.Rand, n int) []float32 {
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(rng.NormFloat64() * 3)
	}
	return l
}

func TestArgmax(t *testing.T) {
	assert.Equal(t, -1, Argmax(nil))
	assert.Equal(t, 0, Argmax([]float32{3}))
	assert.Equal(t, 2, Argmax([]float32{1, -2, 5, 4}))
	assert.Equal(t, 1, Argmax([]float32{1, 5, 5}), "first of ties")
	nan := float32(math.NaN())
	assert.Equal(t, 1, Argmax([]float32{nan, 2, nan}), "NaNs are skipped")
	assert.Equal(t, -1, Argmax([]float32{nan}))
	assert.Equal(t, 2, Argmax([]float32{1, 2, float32(math.Inf(1))}))
}

func TestSamplerGreedy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		logits := randomLogits(rng, 1+rng.IntN(600))
		want := Argmax(logits)
		for _, s := range []Sampler{
			{},                             // the zero Sampler
			{Temperature: 0, Seed: 5},      // temperature 0
			{Temperature: 1.3, TopK: 1},    // top-k 1
			{Temperature: 0.8, TopP: 1e-9}, // a nucleus of one token
			{Temperature: 2, TopK: 50, TopP: 1e-9},
		} {
			got, err := s.Sample(logits)
			require.NoError(t, err)
			require.Equal(t, want, got, "%+v", s)
		}
	}
	// Low temperatures approach greedy.
	logits := []float32{1, 3, 2.5}
	s := Sampler{Temperature: 0.01, Seed: 3}
	for range 100 {
		id, err := s.Sample(logits)
		require.NoError(t, err)
		require.Equal(t, 1, id)
	}
}

func TestSamplerSeeded(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	logits := randomLogits(rng, 300)
	for _, cfg := range []Sampler{{Temperature: 1}, {Temperature: 0.7, TopK: 40}, {Temperature: 1.2, TopP: 0.9}, {Temperature: 1, TopK: 20, TopP: 0.5}} {
		draw := func(seed uint64) []int {
			s := cfg
			s.Seed = seed
			ids := make([]int, 50)
			for i := range ids {
				id, err := s.Sample(logits)
				require.NoError(t, err)
				ids[i] = id
			}
			return ids
		}
		a, b, c := draw(11), draw(11), draw(12)
		assert.Equal(t, a, b, "same seed, same draws: %+v", cfg)
		assert.NotEqual(t, a, c, "another seed, other draws: %+v", cfg)

		s := cfg
		s.Seed = 11
		first, _ := s.Sample(logits)
		s.Reset()
		again, _ := s.Sample(logits)
		assert.Equal(t, first, again, "Reset restarts the draws")
	}
}

// frequencies draws n tokens and returns how often each came up.
func frequencies(t *testing.T, s Sampler, logits []float32, n int) []float64 {
	t.Helper()
	f := make([]float64, len(logits))
	for range n {
		id, err := s.Sample(logits)
		require.NoError(t, err)
		f[id] += 1 / float64(n)
	}
	return f
}

func TestSamplerDistribution(t *testing.T) {
	const n = 40000
	const tol = 0.015 // about 5 standard deviations at n = 40000
	probs := []float64{0.5, 0.3, 0.15, 0.05}
	logits := make([]float32, len(probs))
	for i, p := range probs {
		logits[i] = float32(math.Log(p)) + 7 // softmax ignores the shift
	}
	check := func(name string, s Sampler, want []float64) {
		got := frequencies(t, s, logits, n)
		for i := range want {
			assert.InDelta(t, want[i], got[i], tol, "%s: token %d (got %v)", name, i, got)
		}
	}
	check("temperature 1", Sampler{Temperature: 1, Seed: 1}, probs)

	// Temperature 2: probabilities ∝ p^(1/2).
	var z float64
	hot := make([]float64, len(probs))
	for i, p := range probs {
		hot[i] = math.Sqrt(p)
		z += hot[i]
	}
	for i := range hot {
		hot[i] /= z
	}
	check("temperature 2", Sampler{Temperature: 2, Seed: 2}, hot)

	check("top-k 2", Sampler{Temperature: 1, TopK: 2, Seed: 3}, []float64{0.5 / 0.8, 0.3 / 0.8, 0, 0})
	check("top-k 3", Sampler{Temperature: 1, TopK: 3, Seed: 4}, []float64{0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0})
	// Nucleus 0.7: 0.5 < 0.7 <= 0.5+0.3, so the first two tokens.
	check("top-p 0.7", Sampler{Temperature: 1, TopP: 0.7, Seed: 5}, []float64{0.5 / 0.8, 0.3 / 0.8, 0, 0})
	check("top-p 0.9", Sampler{Temperature: 1, TopP: 0.9, Seed: 6}, []float64{0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0})
	check("top-p 1", Sampler{Temperature: 1, TopP: 1, Seed: 7}, probs)
	check("top-k 3 then top-p 0.8", Sampler{Temperature: 1, TopK: 3, TopP: 0.8, Seed: 8}, []float64{0.5 / 0.8, 0.3 / 0.8, 0, 0})

	// −Inf logits are never drawn.
	masked := []float32{0, float32(math.Inf(-1)), 0}
	got := frequencies(t, Sampler{Temperature: 1, Seed: 9}, masked, 2000)
	assert.Zero(t, got[1])
	assert.InDelta(t, 0.5, got[0], 0.05)
}

// TestSamplerLargeVocabulary checks top-k and the nucleus cut-off on a
// vocabulary of a realistic size against a brute-force computation.
func TestSamplerLargeVocabulary(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	logits := randomLogits(rng, 32000)
	s := Sampler{Temperature: 1, TopK: 5, Seed: 1}
	top := map[int]bool{}
	order := make([]int, len(logits))
	for i := range order {
		order[i] = i
	}
	for range 5 {
		best := -1
		for _, i := range order {
			if !top[i] && (best < 0 || logits[i] > logits[best]) {
				best = i
			}
		}
		top[best] = true
	}
	for range 100 {
		id, err := s.Sample(logits)
		require.NoError(t, err)
		require.True(t, top[id], "token %d is not among the 5 most probable", id)
	}
	// A nucleus of 0.5 holds only tokens at least as probable as the
	// least probable one that the brute force keeps.
	var total float64
	ps := make([]float64, len(logits))
	m := float64(logits[Argmax(logits)])
	for i, l := range logits {
		ps[i] = math.Exp(float64(l) - m)
		total += ps[i]
	}
	sorted := append([]float64(nil), ps...)
	slices.Sort(sorted)
	slices.Reverse(sorted)
	var cum, floor float64
	for _, p := range sorted {
		cum += p
		floor = p
		if cum >= 0.5*total {
			break
		}
	}
	sp := Sampler{Temperature: 1, TopP: 0.5, Seed: 2}
	for range 100 {
		id, err := sp.Sample(logits)
		require.NoError(t, err)
		require.GreaterOrEqual(t, ps[id], floor)
	}
}

func TestSamplerErrors(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, s := range []Sampler{
		{Temperature: -0.5}, {Temperature: nan}, {Temperature: inf},
		{TopK: -1}, {TopP: -0.1}, {TopP: 1.5}, {TopP: nan},
	} {
		assert.Error(t, s.Validate(), "%+v", s)
		_, err := s.Sample([]float32{1, 2})
		assert.Error(t, err, "%+v", s)
	}
	assert.NoError(t, (&Sampler{Temperature: 1, TopK: 3, TopP: 0.5}).Validate())

	s := Sampler{Temperature: 1}
	_, err := s.Sample(nil)
	assert.Error(t, err)
	_, err = s.Sample([]float32{1, nan, 2})
	assert.Error(t, err)
	ninf := float32(math.Inf(-1))
	_, err = s.Sample([]float32{ninf, ninf})
	assert.Error(t, err)
	id, err := s.Sample([]float32{1, inf, 3, inf})
	require.NoError(t, err)
	assert.Equal(t, 1, id, "+Inf is certain; the first one wins")
}
