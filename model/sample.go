package model

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Sampler picks the next token from a row of logits. The zero Sampler is
// greedy. With a positive Temperature it draws from the softmax of
// logits/Temperature, restricted first to the TopK most probable tokens
// (when TopK > 0) and then to the nucleus: the fewest most probable tokens
// whose probabilities, renormalised, add up to at least TopP (when 0 < TopP
// < 1), as llama2.c does. The draws come from a PCG generator seeded with
// Seed on the first call, so a Sampler with a given Seed picks the same
// tokens from the same logits every time. A Sampler is not safe for
// concurrent use.
type Sampler struct {
	// Temperature divides the logits; 0 is greedy (argmax).
	Temperature float32
	// TopK keeps the K most probable tokens; 0 keeps all. 1 is greedy.
	TopK int
	// TopP keeps the nucleus of probability TopP; 0 or 1 keeps all.
	TopP float32
	// Seed seeds the random draws.
	Seed uint64

	rng  *rand.Rand
	cand []candidate
}

// candidate is a token with its unnormalised probability.
type candidate struct {
	id int
	p  float64
}

// Validate reports settings that do not describe a distribution: a
// negative or non-finite temperature, a negative TopK, a TopP outside
// [0, 1].
func (s *Sampler) Validate() error {
	t := float64(s.Temperature)
	switch {
	case !(t >= 0) || math.IsInf(t, 0):
		return fmt.Errorf("model: sampler temperature %g, want a finite number >= 0", s.Temperature)
	case s.TopK < 0:
		return fmt.Errorf("model: sampler top-k %d, want >= 0", s.TopK)
	case !(s.TopP >= 0 && s.TopP <= 1):
		return fmt.Errorf("model: sampler top-p %g, want 0 <= p <= 1", s.TopP)
	}
	return nil
}

// Greedy reports whether the sampler always picks the most probable token.
func (s *Sampler) Greedy() bool { return s.Temperature == 0 || s.TopK == 1 }

// Reset restarts the random draws from Seed.
func (s *Sampler) Reset() { s.rng = nil }

// Sample picks a token id from logits. A NaN logit, or logits that are all
// −Inf, are an error (the model has broken down); +Inf logits are the most
// probable tokens, and sampling picks the first of them.
func (s *Sampler) Sample(logits []float32) (int, error) {
	if err := s.Validate(); err != nil {
		return 0, err
	}
	best := Argmax(logits)
	if best < 0 {
		if len(logits) > 0 {
			return 0, errors.New("model: sampling: every logit is NaN")
		}
		return 0, errors.New("model: sampling from no logits")
	}
	for i, l := range logits {
		if l != l {
			return 0, fmt.Errorf("model: sampling: logit %d is NaN", i)
		}
	}
	top := float64(logits[best])
	switch {
	case math.IsInf(top, -1):
		return 0, errors.New("model: sampling: every logit is -Inf")
	case math.IsInf(top, 1) || s.Greedy():
		return best, nil
	}
	if s.rng == nil {
		s.rng = rand.New(rand.NewPCG(s.Seed, 0x9e3779b97f4a7c15))
	}

	// Unnormalised probabilities relative to the largest: e^((l−max)/T).
	invT := 1 / float64(s.Temperature)
	cand := s.cand[:0]
	var total float64
	for id, l := range logits {
		p := math.Exp((float64(l) - top) * invT)
		if p > 0 {
			cand = append(cand, candidate{id, p})
			total += p
		}
	}
	s.cand = cand
	topP := float64(s.TopP)
	nucleus := topP > 0 && topP < 1
	switch {
	case s.TopK > 0 && s.TopK < len(cand):
		cand = topK(cand, s.TopK)
		total = 0
		for _, c := range cand {
			total += c.p
		}
	case nucleus && len(cand) > 1:
		// A token of probability below (1−p)/(n−1) cannot be in the
		// nucleus (llama2.c): there are at most n−1 of them, together
		// holding less than 1−p, so the more probable ones reach p first.
		// Dropping them keeps the sort short. The most probable token
		// (weight exactly 1 here) is always kept: for p < 1/n the
		// cut-off could exceed it.
		cut := min(1, (1-topP)/float64(len(cand)-1)*total)
		kept := cand[:0]
		for _, c := range cand {
			if c.p >= cut {
				kept = append(kept, c)
			}
		}
		cand = kept
	}
	if nucleus {
		slices.SortFunc(cand, byProbability)
		var cum float64
		for i, c := range cand {
			cum += c.p
			if cum >= topP*total {
				cand = cand[:i+1]
				break
			}
		}
		total = 0
		for _, c := range cand {
			total += c.p
		}
	}

	r := s.rng.Float64() * total
	for _, c := range cand {
		r -= c.p
		if r < 0 {
			return c.id, nil
		}
	}
	return cand[len(cand)-1].id, nil // rounding left r just above zero
}

// byProbability orders candidates most probable first, ties by id.
func byProbability(a, b candidate) int {
	if c := cmp.Compare(b.p, a.p); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// topK returns the k most probable candidates, most probable first, ties
// broken by the lower id; it reorders cand.
func topK(cand []candidate, k int) []candidate {
	h := minHeap(cand[:0:0])
	for _, c := range cand {
		switch {
		case len(h) < k:
			heap.Push(&h, c)
		case byProbability(c, h[0]) < 0:
			h[0] = c
			heap.Fix(&h, 0)
		}
	}
	out := cand[:len(h)]
	copy(out, h)
	slices.SortFunc(out, byProbability)
	return out
}

// minHeap keeps the least probable of the candidates kept at the root.
type minHeap []candidate

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return byProbability(h[i], h[j]) > 0 }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(candidate)) }
func (h *minHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// Argmax returns the index of the largest logit, the first on ties,
// ignoring NaNs; −1 when logits is empty or all NaN.
func Argmax(logits []float32) int {
	best := -1
	for i, l := range logits {
		if l != l {
			continue
		}
		if best < 0 || l > logits[best] {
			best = i
		}
	}
	return best
}
