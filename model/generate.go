package model

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// StopReason says why [Session.Generate] stopped.
type StopReason uint8

const (
	StopLength   StopReason = iota // it produced the tokens asked for
	StopEOS                        // the model produced the end-of-sequence token
	StopCallback                   // the callback returned false
	StopContext                    // the KV cache is full
)

// String returns "length", "eos", "callback" or "context".
func (r StopReason) String() string {
	switch r {
	case StopLength:
		return "length"
	case StopEOS:
		return "eos"
	case StopCallback:
		return "callback"
	case StopContext:
		return "context"
	}
	return fmt.Sprintf("StopReason(%d)", uint8(r))
}

// Stats describes a run of [Session.Generate].
type Stats struct {
	// PromptTokens is the length of the encoded prompt, BOS included.
	PromptTokens int
	// Tokens are the generated token ids (the end-of-sequence token is not
	// included).
	Tokens []int
	// Prefill is the time of the prompt's forward pass and of the sampling
	// of the first token: the time to the first token.
	Prefill time.Duration
	// Decode is the time of the forward passes of one token each and of
	// the sampling after them; DecodeSteps counts those passes.
	Decode      time.Duration
	DecodeSteps int
	// Stop says why generation ended.
	Stop StopReason
}

// PrefillTokensPerSecond is the rate at which the prompt went through the
// model.
func (s Stats) PrefillTokensPerSecond() float64 {
	return rate(s.PromptTokens, s.Prefill)
}

// DecodeTokensPerSecond is the rate of the token-by-token phase.
func (s Stats) DecodeTokensPerSecond() float64 {
	return rate(s.DecodeSteps, s.Decode)
}

func rate(n int, d time.Duration) float64 {
	if n == 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Generate continues prompt: it empties s, encodes the prompt
// with BOS, runs it through the model in one prefill, then samples up to n
// tokens with sampler (a copy, so its draws restart from its Seed),
// running each through the model to get the next logits. It stops early at
// the end-of-sequence token, when the cache is full, or when emit, called
// with the text of each generated token as [Tokenizer.Piece] gives it,
// returns false (emit may be nil). A done ctx stops it with ctx's error.
// The returned Stats are filled in on error too, as far as generation got.
func (s *Session) Generate(ctx context.Context, prompt string, n int, sampler Sampler, emit func(piece string) bool) (Stats, error) {
	var st Stats
	if ctx == nil {
		return st, errors.New("model: Generate: nil context.Context; want context.Background() or another context")
	}
	tok := s.m.Tokenizer
	if tok == nil {
		return st, errors.New("model: Generate: the model has no tokenizer")
	}
	if n < 0 {
		return st, fmt.Errorf("model: Generate: %d tokens; want >= 0", n)
	}
	if err := sampler.Validate(); err != nil {
		return st, err
	}
	sampler.rng, sampler.cand = nil, nil
	if err := ctx.Err(); err != nil {
		return st, err
	}
	s.Reset()
	ids := tok.Encode(prompt, true)
	st.PromptTokens = len(ids)
	if n == 0 {
		return st, nil
	}

	if len(s.logits) != s.m.Config.VocabSize {
		s.logits = make([]float32, s.m.Config.VocabSize)
	}
	one := make([]int, 1) // the decoded token, reused at every step
	start := time.Now()
	logits, err := s.ForwardInto(s.logits, ids)
	if err != nil {
		return st, err
	}
	next, err := sampler.Sample(logits)
	st.Prefill = time.Since(start)
	if err != nil {
		return st, err
	}
	prev := ids[len(ids)-1]
	for {
		if next == tok.EOS() {
			st.Stop = StopEOS
			return st, nil
		}
		st.Tokens = append(st.Tokens, next)
		if emit != nil && !emit(tok.Piece(prev, next)) {
			st.Stop = StopCallback
			return st, nil
		}
		switch {
		case len(st.Tokens) == n:
			st.Stop = StopLength
			return st, nil
		case s.Pos() == s.Capacity():
			st.Stop = StopContext
			return st, nil
		}
		if err := ctx.Err(); err != nil {
			return st, err
		}
		prev = next
		start = time.Now()
		one[0] = next
		logits, err = s.ForwardInto(s.logits, one)
		if err == nil {
			next, err = sampler.Sample(logits)
		}
		st.Decode += time.Since(start)
		st.DecodeSteps++
		if err != nil {
			return st, err
		}
	}
}
