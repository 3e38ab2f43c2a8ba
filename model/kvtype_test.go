package model

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/model/gguf"
)

// The tolerances below follow from how each cache type rounds what it
// stores. F16 keeps 11 significant bits (relative error <= 2^-11, about
// 4.9e-4 per key or value component), BF16 keeps 8 (<= 2^-8, about
// 3.9e-3, eight times more), and Q8 is within a/254 of each value, a being
// the largest magnitude of its block of 32: relative to the block's
// largest value, about as coarse as BF16, and relatively much worse for the
// small components of a block. These errors go through every layer's
// attention into the residual stream and the logits. Measured when the
// tests were written: stories260K's logits (up to about 22 in magnitude)
// moved by at most 0.018 (F16) and 0.13 (BF16) over 60 positions; those of
// random head-dim-32 models (up to about 40) by 0.03, 0.3 and 0.56 to 0.83
// (Q8, over five seeds). The
// bounds leave a factor of about 2.5 to 5.5 for other SIMD kernels and
// thread counts, and stay far below what a broken cache gives (a wrong
// key or value row changes logits by whole units).
const (
	tolF16 = 0.1
	tolB16 = 0.5
	tolQ8  = 2.0
	// tolFP8 bounds stories260K's logits with an fp8 (E4M3) cache against
	// the f16 cache's. E4M3 keeps 4 significant bits, 16 times BF16's
	// relative error, and 16 × BF16's 0.13 is about what was measured when
	// the test was written: 2.67 over the 60-token text (the 40 greedy ids
	// from BOS all equal the f16 cache's). The bound leaves a factor of
	// about 2.2. The calibration's headroom does not enter: scales a
	// power of two apart round alike.
	tolFP8 = 6.0
	// tolRounded bounds the distance to the float64 reference whose keys
	// and values are rounded to the cache type (refOptions.kvType). Most
	// components round alike in both and the error is the float32 one
	// (1e-4), but a component that lies within float32 noise of a
	// rounding boundary rounds one way here and the other way there: one
	// step of fp16/bf16/q8, which moved logits by up to 0.036 in
	// measurements. The bound still rules out BF16 or Q8 errors of the
	// size of the plain rounding (0.13 to 0.83 above).
	tolRounded = 0.1
)

// worstDiff returns the largest logit difference over all rows.
func worstDiff[T float32 | float64](t *testing.T, got [][]float32, want [][]T) float64 {
	t.Helper()
	require.Len(t, got, len(want))
	var worst float64
	for i := range got {
		worst = max(worst, maxAbsDiff(t, got[i], want[i]))
	}
	return worst
}

// TestStoriesKVTypes runs stories260K with F16 and BF16 caches: the greedy
// continuation of BOS is the F32 one, and the logits over a 60-token text
// stay within the rounding tolerances of the F32 cache's and of the float64
// reference's with keys and values rounded alike.
func TestStoriesKVTypes(t *testing.T) {
	f := openStories(t)
	m, err := Load(f)
	require.NoError(t, err)

	assert.Equal(t, attention.F32, newSession(t, m, SessionOptions{}).KVType(), "0 means F32")
	greedy := func(typ attention.DType) []int {
		s := newSession(t, m, SessionOptions{KVType: typ})
		st, err := s.Generate(context.Background(), "", 20, Sampler{}, nil)
		require.NoError(t, err)
		return st.Tokens
	}
	want := greedy(attention.F32)
	require.Len(t, want, 20)

	ids := m.Tokenizer.Encode(storiesKnownAnswer, true)
	f32, err := newSession(t, m, SessionOptions{}).ForwardAll(ids)
	require.NoError(t, err)
	for _, tc := range []struct {
		typ attention.DType
		tol float64
	}{{attention.F16, tolF16}, {attention.BF16, tolB16}} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			assert.Equal(t, want, greedy(tc.typ), "greedy tokens")
			s := newSession(t, m, SessionOptions{KVType: tc.typ})
			assert.Equal(t, tc.typ, s.KVType())
			got, err := s.ForwardAll(ids)
			require.NoError(t, err)
			vsF32 := worstDiff(t, got, f32)
			vsRef := worstDiff(t, got, loadRef(t, f, refOptions{rope: RopeNormal, kvType: tc.typ}).forward(ids))
			t.Logf("max |Δlogit| %.3g against the f32 cache, %.3g against the reference rounded to %v", vsF32, vsRef, tc.typ)
			assert.LessOrEqual(t, vsF32, tc.tol)
			assert.Positive(t, vsF32, "the cache does round")
			assert.LessOrEqual(t, vsRef, tolRounded)
		})
	}
}

// TestStoriesKVTypeFP8 runs stories260K with an fp8 (E4M3, per-head
// scales calibrated on the first pass) cache and reports its greedy tokens
// from BOS and its logits over a 60-token text against the f16 cache's.
// E4M3 keeps 4 significant bits (relative error <= 2^-4, 16 times BF16's),
// so the logits move further than with bf16; the assertions bound that
// and check that the scales are per head, kept across Reset, and carried
// over when the cache grows.
func TestStoriesKVTypeFP8(t *testing.T) {
	f := openStories(t)
	m, err := Load(f)
	require.NoError(t, err)
	greedy := func(typ attention.DType) []int {
		s := newSession(t, m, SessionOptions{KVType: typ})
		st, err := s.Generate(context.Background(), "", 40, Sampler{}, nil)
		require.NoError(t, err)
		return st.Tokens
	}
	want, got := greedy(attention.F16), greedy(attention.FP8E4M3)
	same, first := 0, len(want)
	for i := range min(len(got), len(want)) {
		if got[i] == want[i] {
			same++
		} else if first == len(want) {
			first = i
		}
	}
	t.Logf("fp8e4m3 cache: %d of %d greedy ids from BOS equal the f16 cache's (first difference at %d)", same, len(want), first)
	assert.GreaterOrEqual(t, first, 10, "the first greedy tokens")

	ids := m.Tokenizer.Encode(storiesKnownAnswer, true)
	f16, err := newSession(t, m, SessionOptions{KVType: attention.F16}).ForwardAll(ids)
	require.NoError(t, err)
	s := newSession(t, m, SessionOptions{KVType: attention.FP8E4M3, MaxContext: 128})
	assert.Equal(t, attention.FP8E4M3, s.KVType())
	fp8, err := s.ForwardAll(ids)
	require.NoError(t, err)
	d := worstDiff(t, fp8, f16)
	t.Logf("fp8e4m3 cache: max |Δlogit| %.3g against the f16 cache over %d tokens", d, len(ids))
	assert.Positive(t, d, "the cache does round")
	assert.LessOrEqual(t, d, tolFP8)

	ks := s.caches[0].K().FP8Scales()
	require.Len(t, ks, m.Config.HeadCountKV, "a scale per K/V head")
	assert.NotEqual(t, ks[0], ks[1], "scales calibrated per head")
	s.Reset()
	again, err := s.ForwardAll(ids)
	require.NoError(t, err)
	assert.Equal(t, fp8, again, "after Reset, with the scales kept")
}

// q8Spec is a random-weight model whose head dimension, 32, allows a Q8
// cache (stories260K's is 8): 4 query heads over 2 KV heads.
var q8Spec = tinySpec{dim: 64, ff: 128, layers: 2, heads: 4, kvHeads: 2, headDim: 32, wtype: gguf.TypeF32}

// TestRandomModelKVTypes checks every cache type on random models of head
// dimension 32 (Q8 included): against the F32 cache within the rounding
// tolerance, against the float64 reference rounded alike, and a prefill in
// chunks followed by decoding against a single prefill.
func TestRandomModelKVTypes(t *testing.T) {
	ids := []int{1}
	for j := range 39 {
		ids = append(ids, 3+(j*37)%261)
	}
	for seed := range uint64(3) {
		f := q8Spec.file(t, seed)
		m, err := Load(f)
		require.NoError(t, err)
		f32, err := newSession(t, m, SessionOptions{}).ForwardAll(ids)
		require.NoError(t, err)
		for _, tc := range []struct {
			typ attention.DType
			tol float64
		}{{attention.F16, tolF16}, {attention.BF16, tolB16}, {attention.Q8, tolQ8}} {
			s := newSession(t, m, SessionOptions{KVType: tc.typ})
			got, err := s.ForwardAll(ids)
			require.NoError(t, err)
			vsF32 := worstDiff(t, got, f32)
			vsRef := worstDiff(t, got, loadRef(t, f, refOptions{rope: RopeNormal, kvType: tc.typ}).forward(ids))
			t.Logf("seed %d %v: max |Δlogit| %.3g against the f32 cache, %.3g against the rounded reference", seed, tc.typ, vsF32, vsRef)
			assert.LessOrEqual(t, vsF32, tc.tol, "seed %d %v", seed, tc.typ)
			assert.LessOrEqual(t, vsRef, tolRounded, "seed %d %v", seed, tc.typ)

			// Chunks of 7, then a token at a time. Each row is rounded on
			// its own, but the attention of a single row (decode) and of a
			// chunk run different kernels (rows read in place, packed
			// tiles), whose float32 results differ in the last bits; a
			// K or V value of a later layer that lies on a rounding
			// boundary of the cache type then rounds the other way, as
			// against the reference, hence the same bound.
			step := newSession(t, m, SessionOptions{KVType: tc.typ, Batch: 7})
			rows, err := step.ForwardAll(ids[:20])
			require.NoError(t, err)
			for _, id := range ids[20:] {
				row, err := step.Forward([]int{id})
				require.NoError(t, err)
				rows = append(rows, row)
			}
			assert.LessOrEqual(t, worstDiff(t, rows, got), tolRounded, "seed %d %v: chunked prefill and decode", seed, tc.typ)
		}
	}
}

// TestKVTypeTruncate rolls a Session back with Truncate and Reset and
// checks that running the same tokens again gives the same logits, bit for
// bit, with rounded caches: every layer's cache must have been cut.
func TestKVTypeTruncate(t *testing.T) {
	type model struct {
		name string
		m    *Model
	}
	q8m, err := Load(q8Spec.file(t, 5))
	require.NoError(t, err)
	models := []model{{"random", q8m}}
	if f, err := gguf.Open(storiesPath); err == nil {
		defer f.Close()
		sm, err := Load(f)
		require.NoError(t, err)
		models = append(models, model{"stories", sm})
	}
	prefix, suffix, other := []int{1, 40, 41, 42, 43, 44}, []int{50, 51, 52}, []int{60, 61, 62, 63, 64}
	for _, mm := range models {
		for _, typ := range []attention.DType{attention.F16, attention.BF16, attention.Q8, attention.FP8E4M3} {
			if typ == attention.Q8 && mm.m.Config.HeadDim%attention.Q8Block != 0 {
				continue
			}
			t.Run(mm.name+" "+typ.String(), func(t *testing.T) {
				s := newSession(t, mm.m, SessionOptions{KVType: typ})
				_, err := s.Forward(prefix)
				require.NoError(t, err)
				first, err := s.ForwardAll(suffix)
				require.NoError(t, err)
				require.Equal(t, len(prefix)+len(suffix), s.Pos())

				// Roll back over the suffix and overwrite its positions
				// with other tokens, then roll back again and redo it.
				require.NoError(t, s.Truncate(len(prefix)))
				assert.Equal(t, len(prefix), s.Pos())
				_, err = s.Forward(other)
				require.NoError(t, err)
				assert.Equal(t, len(prefix)+len(other), s.Pos())
				require.NoError(t, s.Truncate(len(prefix)))
				again, err := s.ForwardAll(suffix)
				require.NoError(t, err)
				assert.Equal(t, first, again, "after Truncate")

				// Truncate into the prefix, then redo its tail.
				require.NoError(t, s.Truncate(3))
				_, err = s.Forward(prefix[3:])
				require.NoError(t, err)
				again, err = s.ForwardAll(suffix)
				require.NoError(t, err)
				assert.Equal(t, first, again, "after Truncate(3)")

				s.Reset()
				assert.Equal(t, 0, s.Pos())
				_, err = s.Forward(prefix)
				require.NoError(t, err)
				again, err = s.ForwardAll(suffix)
				require.NoError(t, err)
				assert.Equal(t, first, again, "after Reset")

				// A pass that fails after every block has appended (here
				// the output projection, given too short a logits buffer)
				// leaves every layer's cache as it was.
				pos := s.Pos()
				require.Error(t, s.forward(other, make([]float32, 1), false))
				for l, c := range s.caches {
					assert.Equal(t, pos, c.Len(), "block %d after a failed pass", l)
				}
				require.NoError(t, s.Truncate(len(prefix)))
				again, err = s.ForwardAll(suffix)
				require.NoError(t, err)
				assert.Equal(t, first, again, "after a failed pass")
			})
		}
	}
}

func TestKVTypeErrors(t *testing.T) {
	// Head dimension 8, as stories260K's.
	spec := tinySpec{dim: 32, ff: 64, layers: 1, heads: 4, kvHeads: 2, wtype: gguf.TypeF32, ctx: 16}
	m, err := Load(spec.file(t, 1))
	require.NoError(t, err)
	require.Equal(t, 8, m.Config.HeadDim)

	s, err := m.NewSession(SessionOptions{KVType: attention.Q8})
	require.Error(t, err)
	assert.Nil(t, s)
	for _, want := range []string{"KVType", "q8", "multiple of 32", "head dimension is 8"} {
		assert.ErrorContains(t, err, want)
	}

	// Head dimension 16: still not a whole Q8 block.
	spec16 := spec
	spec16.headDim = 16
	m16, err := Load(spec16.file(t, 1))
	require.NoError(t, err)
	_, err = m16.NewSession(SessionOptions{KVType: attention.Q8})
	assert.ErrorContains(t, err, "head dimension is 16")

	for _, typ := range []attention.DType{attention.FP8E5M2, 200} {
		_, err := m.NewSession(SessionOptions{KVType: typ})
		require.Error(t, err, "%v", typ)
		assert.ErrorContains(t, err, "SessionOptions.KVType is "+typ.String())
		assert.ErrorContains(t, err, "want attention.F32, F16, BF16, Q8 or FP8E4M3")
	}

	// The other types work with any head dimension.
	for _, typ := range []attention.DType{0, attention.F32, attention.F16, attention.BF16, attention.FP8E4M3} {
		s := newSession(t, m, SessionOptions{KVType: typ})
		_, err := s.Forward([]int{1, 2, 3})
		assert.NoError(t, err, "%v", typ)
	}
}

// TestNoAllocationGrowthKVTypes is TestNoAllocationGrowth with every cache
// type: appending to an F16, BF16 or Q8 cache and reading it allocates
// nothing per token either.
func TestNoAllocationGrowthKVTypes(t *testing.T) {
	spec := q8Spec
	spec.ctx = 64
	m, err := Load(spec.file(t, 4))
	require.NoError(t, err)
	for _, typ := range []attention.DType{attention.F32, attention.F16, attention.BF16, attention.Q8, attention.FP8E4M3} {
		s := newSession(t, m, SessionOptions{Threads: 1, KVType: typ})
		_, err = s.Forward([]int{1, 5, 6})
		require.NoError(t, err)
		buf := make([]float32, m.Config.VocabSize)
		allocs := testing.AllocsPerRun(20, func() {
			if _, err := s.ForwardInto(buf, []int{7}); err != nil && !isOverflow(err) {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs, "%v: a decode step into a reused buffer allocates nothing", typ)
	}
}

func isOverflow(err error) bool { return err != nil && errors.Is(err, ErrContextOverflow) }

// TestSessionSizeKVType checks that the memory bound counts the cache at
// its element size: a context too large for an F32 cache within
// maxSessionBytes fits as F16, BF16 or Q8.
func TestSessionSizeKVType(t *testing.T) {
	if math.MaxInt == math.MaxInt32 {
		t.Skip("the sizes need 64-bit ints")
	}
	c := Config{BlockCount: 1, HeadCount: 1, HeadCountKV: 1, HeadDim: 32, RopeDimensionCount: 32,
		EmbeddingLength: 32, FeedForwardLength: 32, VocabSize: 32}
	// A position takes 2·32·size bytes of cache (plus 8 bytes of Q8
	// scales) and 32·4 of RoPE table: 384 bytes for F32, 256 for F16 and
	// BF16, 200 for Q8, against a bound of 2^40 bytes.
	capacity := 3_500_000_000
	assert.Error(t, sessionSize(c, capacity, 1, attention.F32))
	for _, typ := range []attention.DType{attention.F16, attention.BF16, attention.Q8} {
		assert.NoError(t, sessionSize(c, capacity, 1, typ), "%v", typ)
	}
	assert.Error(t, sessionSize(c, 5_000_000_000, 1, attention.F16))
	assert.NoError(t, sessionSize(c, 5_000_000_000, 1, attention.Q8))
}

// TestStoriesBF16Precision runs stories260K with attention in bfloat16
// compute precision. It reports, not asserts, how many of the 80 greedy
// ids from BOS equal the float32 run's (the measure of the mode on a real
// model); it asserts that the mode is in effect (the logits over a
// 60-token text differ from float32's) and that they stay within what
// rounding Q, K, V and P to bfloat16 explains.
func TestStoriesBF16Precision(t *testing.T) {
	f := openStories(t)
	m, err := Load(f)
	require.NoError(t, err)
	greedy := func(p attention.Precision) []int {
		s := newSession(t, m, SessionOptions{Precision: p})
		st, err := s.Generate(context.Background(), "", 80, Sampler{}, nil)
		require.NoError(t, err)
		return st.Tokens
	}
	want, got := greedy(attention.PrecisionFloat32), greedy(attention.PrecisionBFloat16)
	require.Len(t, want, 80)
	same := 0
	for i := range min(len(got), len(want)) {
		if got[i] == want[i] {
			same++
		}
	}
	first := len(want)
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			first = i
			break
		}
	}
	t.Logf("bf16 precision: %d of %d greedy ids from BOS equal the float32 run's (first difference at %d)", same, len(want), first)

	ids := m.Tokenizer.Encode(storiesKnownAnswer, true)
	f32, err := newSession(t, m, SessionOptions{}).ForwardAll(ids)
	require.NoError(t, err)
	bf, err := newSession(t, m, SessionOptions{Precision: attention.PrecisionBFloat16}).ForwardAll(ids)
	require.NoError(t, err)
	d := worstDiff(t, bf, f32)
	t.Logf("bf16 precision: max |Δlogit| %.3g against float32 over %d tokens", d, len(ids))
	assert.Positive(t, d, "the precision does round")
	assert.LessOrEqual(t, d, 0.5)

	_, err = m.NewSession(SessionOptions{Precision: 7})
	assert.ErrorContains(t, err, "SessionOptions.Precision is Precision(7)")
}
