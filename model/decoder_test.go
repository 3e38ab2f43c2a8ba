package model

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/flashgo/flashgo/model/gguf"
	"github.com/flashgo/flashgo/model/internal/ggufwrite"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// storiesKnownAnswer is the greedy continuation of BOS published with
// llama2.c for stories260K (README.md, "The test model").
const storiesKnownAnswer = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. " +
	"One day, she saw a big, red ball. She wanted to play with it, but it was too high."

func loadStories(t *testing.T) *Model {
	t.Helper()
	m, err := Load(openStories(t))
	require.NoError(t, err)
	return m
}

func newSession(t *testing.T, m *Model, opts SessionOptions) *Session {
	t.Helper()
	s, err := m.NewSession(opts)
	require.NoError(t, err)
	return s
}

// maxAbsDiff returns the largest |a[i] − b[i]| over two logit rows.
func maxAbsDiff[T float32 | float64](t *testing.T, a []float32, b []T) float64 {
	t.Helper()
	require.Len(t, b, len(a))
	var worst float64
	for i := range a {
		worst = max(worst, math.Abs(float64(a[i])-float64(b[i])))
	}
	return worst
}

func TestStoriesLoad(t *testing.T) {
	m := loadStories(t)
	assert.Equal(t, RopeNormal, m.RoPE)
	require.NotNil(t, m.Tokenizer)
	assert.Equal(t, 512, m.Tokenizer.VocabSize())
	assert.Len(t, m.blocks, 5)
	assert.Equal(t, 64+2*32, m.blocks[0].qkv.out, "Q (8 heads × 8) | K (4 × 8) | V (4 × 8)")
	assert.Equal(t, 2*172, m.blocks[0].gateUp.out)
	assert.Nil(t, m.blocks[0].qkvBias)
	assert.Nil(t, m.rope.factors)
	assert.Equal(t, 10000.0, m.rope.base)
}

func TestStoriesGreedy(t *testing.T) {
	m := loadStories(t)
	s := newSession(t, m, SessionOptions{})
	var text strings.Builder
	st, err := s.Generate(context.Background(), "", 80, Sampler{}, func(p string) bool {
		text.WriteString(p)
		return true
	})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(text.String(), storiesKnownAnswer), "got %q", text.String())
	assert.Equal(t, 1, st.PromptTokens, "BOS only")
	assert.Len(t, st.Tokens, 80)
	assert.Equal(t, StopLength, st.Stop)
	assert.Equal(t, 79, st.DecodeSteps)
	assert.Equal(t, text.String(), m.Tokenizer.Decode(append([]int{1}, st.Tokens...)))
	assert.Positive(t, st.PrefillTokensPerSecond())
	assert.Positive(t, st.DecodeTokensPerSecond())

	// The same tokens by hand: Forward and Argmax, one token at a time.
	s.Reset()
	logits, err := s.Forward([]int{m.Tokenizer.BOS()})
	require.NoError(t, err)
	for i, want := range st.Tokens[:20] {
		got := Argmax(logits)
		require.Equal(t, want, got, "token %d", i)
		logits, err = s.Forward([]int{got})
		require.NoError(t, err)
	}

	// From a prompt: the continuation of "Once upon a time" is the rest of
	// the known answer.
	text.Reset()
	_, err = s.Generate(context.Background(), "Once upon a time", 30, Sampler{}, func(p string) bool {
		text.WriteString(p)
		return true
	})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix("Once upon a time"+text.String(), storiesKnownAnswer[:90]), "got %q", text.String())
}

// TestStoriesPrefillEqualsDecode runs a prompt as one prefill, token by
// token, in chunks, and with different thread counts.
func TestStoriesPrefillEqualsDecode(t *testing.T) {
	m := loadStories(t)
	ids := m.Tokenizer.Encode("Once upon a time, there was", true)
	require.Len(t, ids, 8)

	prefill, err := newSession(t, m, SessionOptions{}).ForwardAll(ids)
	require.NoError(t, err)

	step := newSession(t, m, SessionOptions{})
	for i, id := range ids {
		logits, err := step.Forward([]int{id})
		require.NoError(t, err)
		assert.LessOrEqual(t, maxAbsDiff(t, logits, prefill[i]), 1e-5, "position %d", i)
	}
	assert.Equal(t, len(ids), step.Pos())

	// Chunks of 3 (the batch limit) and mixed call sizes.
	chunked := newSession(t, m, SessionOptions{Batch: 3})
	rows, err := chunked.ForwardAll(ids)
	require.NoError(t, err)
	for i := range rows {
		assert.LessOrEqual(t, maxAbsDiff(t, rows[i], prefill[i]), 1e-5, "position %d", i)
	}
	mixed := newSession(t, m, SessionOptions{})
	_, err = mixed.Forward(ids[:5])
	require.NoError(t, err)
	last, err := mixed.Forward(ids[5:])
	require.NoError(t, err)
	assert.LessOrEqual(t, maxAbsDiff(t, last, prefill[len(ids)-1]), 1e-5)

	// Forward's row is ForwardAll's last row, and every thread count gives
	// the same bits.
	for _, threads := range []int{1, 2, 4} {
		logits, err := newSession(t, m, SessionOptions{Threads: threads}).Forward(ids)
		require.NoError(t, err)
		assert.Equal(t, prefill[len(ids)-1], logits, "threads %d", threads)
	}
}

// TestStoriesAgainstFloat64 compares the logits of every position of a
// 60-token text with the float64 reference forward pass.
func TestStoriesAgainstFloat64(t *testing.T) {
	f := openStories(t)
	m, err := Load(f)
	require.NoError(t, err)
	ids := m.Tokenizer.Encode(storiesKnownAnswer, true)
	require.Greater(t, len(ids), 40)

	got, err := newSession(t, m, SessionOptions{}).ForwardAll(ids)
	require.NoError(t, err)
	want := loadRef(t, f, refOptions{rope: RopeNormal}).forward(ids)
	var worst, scale float64
	for i := range ids {
		worst = max(worst, maxAbsDiff(t, got[i], want[i]))
		for _, v := range want[i] {
			scale = max(scale, math.Abs(v))
		}
	}
	t.Logf("max |logit| %.2f, max abs error %.2e over %d positions", scale, worst, len(ids))
	assert.LessOrEqual(t, worst, 1e-4)

	// The NeoX pairing is a different model: it must not agree.
	neox, err := LoadWith(f, LoadOptions{RoPE: RopeNeoX})
	require.NoError(t, err)
	bad, err := newSession(t, neox, SessionOptions{}).ForwardAll(ids)
	require.NoError(t, err)
	assert.Greater(t, maxAbsDiff(t, bad[len(ids)-1], want[len(ids)-1]), 0.1)
}

// TestRandomModelsAgainstFloat64 runs small random-weight models written by
// the test through the decoder and through the float64 reference, in both
// RoPE modes, with multi-head, grouped-query and multi-query attention,
// F32, F16, BF16 and Q8_0 weights, biases, partial rotary dimensions, head
// widths that do not divide the embedding, Llama 3.1 frequency factors and
// linear scaling.
func TestRandomModelsAgainstFloat64(t *testing.T) {
	base := tinySpec{dim: 32, ff: 64, layers: 2, heads: 4, kvHeads: 2, wtype: gguf.TypeF32}
	cases := []struct {
		name string
		spec func(tinySpec) tinySpec
		opts LoadOptions
		ref  refOptions
	}{
		{"normal GQA f32", func(s tinySpec) tinySpec { return s }, LoadOptions{}, refOptions{rope: RopeNormal}},
		{"neox GQA f32", func(s tinySpec) tinySpec { return s }, LoadOptions{RoPE: RopeNeoX}, refOptions{rope: RopeNeoX}},
		{"normal MHA f16", func(s tinySpec) tinySpec { s.kvHeads, s.wtype = 4, gguf.TypeF16; return s }, LoadOptions{}, refOptions{rope: RopeNormal}},
		{"neox MQA bf16", func(s tinySpec) tinySpec { s.kvHeads, s.wtype = 1, gguf.TypeBF16; return s }, LoadOptions{RoPE: RopeNeoX}, refOptions{rope: RopeNeoX}},
		{"normal GQA q8_0", func(s tinySpec) tinySpec { s.wtype = gguf.TypeQ8_0; return s }, LoadOptions{}, refOptions{rope: RopeNormal}},
		{"neox GQA q8_0 untied", func(s tinySpec) tinySpec { s.wtype, s.untied = gguf.TypeQ8_0, true; return s }, LoadOptions{RoPE: RopeNeoX}, refOptions{rope: RopeNeoX}},
		{"qwen2 biases", func(s tinySpec) tinySpec { s.arch, s.biases, s.theta = "qwen2", true, 1e6; return s }, LoadOptions{}, refOptions{rope: RopeNeoX}},
		{"partial rope normal", func(s tinySpec) tinySpec { s.ropeDims = 4; return s }, LoadOptions{}, refOptions{rope: RopeNormal}},
		{"partial rope neox", func(s tinySpec) tinySpec { s.ropeDims = 4; return s }, LoadOptions{RoPE: RopeNeoX}, refOptions{rope: RopeNeoX}},
		{"head dim 16 of 32", func(s tinySpec) tinySpec { s.headDim, s.untied = 16, true; return s }, LoadOptions{}, refOptions{rope: RopeNormal}},
		{"rope freqs and linear scaling", func(s tinySpec) tinySpec {
			s.ropeFreqs, s.scaling, s.scalingFactor, s.theta = true, "linear", 4, 500000
			return s
		}, LoadOptions{}, refOptions{rope: RopeNormal, linearFactor: 4}},
		{"no rope", func(s tinySpec) tinySpec { return s }, LoadOptions{RoPE: RopeNone}, refOptions{rope: RopeNone}},
		{"three layers wide", func(s tinySpec) tinySpec { s.dim, s.ff, s.layers, s.heads, s.kvHeads = 64, 96, 3, 8, 2; return s }, LoadOptions{}, refOptions{rope: RopeNormal}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.spec(base).file(t, uint64(i))
			m, err := LoadWith(f, tc.opts)
			require.NoError(t, err)
			ids := []int{1}
			for j := range 23 {
				ids = append(ids, 3+(j*37+i*11)%261)
			}
			want := loadRef(t, f, tc.ref).forward(ids)

			// Prefill in chunks of 7, then the rest token by token.
			s := newSession(t, m, SessionOptions{Batch: 7})
			got, err := s.ForwardAll(ids[:16])
			require.NoError(t, err)
			for _, id := range ids[16:] {
				row, err := s.Forward([]int{id})
				require.NoError(t, err)
				got = append(got, row)
			}
			var worst float64
			for p := range ids {
				worst = max(worst, maxAbsDiff(t, got[p], want[p]))
			}
			assert.LessOrEqual(t, worst, 1e-4)
		})
	}
}

// TestParallelProjections uses a model large enough for the projections to
// be split over goroutines, and checks that the thread count changes no
// bit and that Sessions sharing a model run concurrently.
func TestParallelProjections(t *testing.T) {
	spec := tinySpec{dim: 128, ff: 512, layers: 2, heads: 8, kvHeads: 2, wtype: gguf.TypeF32, ctx: 128}
	f := spec.file(t, 9)
	m, err := Load(f)
	require.NoError(t, err)
	ids := make([]int, 40)
	for i := range ids {
		ids[i] = 3 + (i*53)%261
	}
	one, err := newSession(t, m, SessionOptions{Threads: 1}).ForwardAll(ids)
	require.NoError(t, err)
	four, err := newSession(t, m, SessionOptions{Threads: 4}).ForwardAll(ids)
	require.NoError(t, err)
	assert.Equal(t, one, four)
	want := loadRef(t, f, refOptions{rope: RopeNormal}).forward(ids)
	assert.LessOrEqual(t, maxAbsDiff(t, four[len(ids)-1], want[len(ids)-1]), 1e-4)

	var wg sync.WaitGroup
	results := make([][]float32, 4)
	for g := range results {
		wg.Go(func() {
			s, err := m.NewSession(SessionOptions{Threads: 2, Batch: 5 + g})
			if !assert.NoError(t, err) {
				return
			}
			rows, err := s.ForwardAll(ids)
			if assert.NoError(t, err) {
				results[g] = rows[len(ids)-1]
			}
		})
	}
	wg.Wait()
	// Other chunk sizes round differently (small chunks go through the
	// engine's decode kernels), so they agree within rounding.
	for g, r := range results {
		assert.LessOrEqual(t, maxAbsDiff(t, one[len(ids)-1], r), 1e-4, "goroutine %d", g)
	}
}

func TestGenerateStops(t *testing.T) {
	spec := tinySpec{dim: 32, ff: 64, layers: 1, heads: 4, kvHeads: 2, wtype: gguf.TypeF32, ctx: 16}
	m, err := Load(spec.file(t, 3))
	require.NoError(t, err)
	ctx := context.Background()

	s := newSession(t, m, SessionOptions{})
	st, err := s.Generate(ctx, "the cat", 5, Sampler{}, nil)
	require.NoError(t, err)
	assert.Equal(t, StopLength, st.Stop)
	assert.Len(t, st.Tokens, 5)
	assert.Equal(t, 4, st.DecodeSteps)
	assert.Equal(t, st.PromptTokens+4, s.Pos(), "the last token is sampled, not run")

	calls := 0
	st, err = s.Generate(ctx, "the cat", 5, Sampler{}, func(string) bool { calls++; return calls < 2 })
	require.NoError(t, err)
	assert.Equal(t, StopCallback, st.Stop)
	assert.Len(t, st.Tokens, 2)

	st, err = s.Generate(ctx, "the cat", 100, Sampler{Temperature: 1, Seed: 1}, nil)
	require.NoError(t, err)
	assert.Equal(t, StopContext, st.Stop)
	assert.Equal(t, 16, s.Pos())
	assert.Len(t, st.Tokens, 16-st.PromptTokens+1)

	st, err = s.Generate(ctx, "the cat", 0, Sampler{}, nil)
	require.NoError(t, err)
	assert.Empty(t, st.Tokens)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Generate(canceled, "the cat", 5, Sampler{}, nil)
	assert.ErrorIs(t, err, context.Canceled)

	// Seeded sampling is reproducible through Generate, which restarts
	// the sampler's draws each time.
	sp := Sampler{Temperature: 1.5, Seed: 7}
	a, err := s.Generate(ctx, "the", 10, sp, nil)
	require.NoError(t, err)
	b, err := s.Generate(ctx, "the", 10, sp, nil)
	require.NoError(t, err)
	assert.Equal(t, a.Tokens, b.Tokens)

	// A model whose output norm is zero gives all-zero logits: greedy picks
	// token 0, here the end-of-sequence token.
	eosSpec := spec
	eosSpec.extra = []ggufwrite.KV{{Key: "tokenizer.ggml.eos_token_id", Type: ggufwrite.ValueUint32, Val: uint32(0)}}
	f := eosSpec.file(t, 3)
	m0, err := Load(f)
	require.NoError(t, err)
	clear(m0.outNorm)
	st, err = newSession(t, m0, SessionOptions{}).Generate(ctx, "the", 5, Sampler{}, func(string) bool {
		t.Error("no piece expected")
		return true
	})
	require.NoError(t, err)
	assert.Equal(t, StopEOS, st.Stop)
	assert.Empty(t, st.Tokens)
}

func TestDecoderErrors(t *testing.T) {
	spec := tinySpec{dim: 32, ff: 64, layers: 1, heads: 4, kvHeads: 2, wtype: gguf.TypeF32, ctx: 16}
	m, err := Load(spec.file(t, 1))
	require.NoError(t, err)

	t.Run("context overflow", func(t *testing.T) {
		s := newSession(t, m, SessionOptions{MaxContext: 8})
		_, err := s.Forward(make([]int, 9))
		assert.ErrorIs(t, err, ErrContextOverflow)
		assert.Equal(t, 0, s.Pos())
		_, err = s.Forward([]int{1, 2, 3, 4, 5})
		require.NoError(t, err)
		_, err = s.Forward([]int{1, 2, 3, 4})
		assert.ErrorIs(t, err, ErrContextOverflow)
		assert.Equal(t, 5, s.Pos(), "a failed call leaves s as it was")
		_, err = s.Forward([]int{1, 2, 3})
		require.NoError(t, err)
		_, err = s.Forward([]int{1})
		assert.ErrorIs(t, err, ErrContextOverflow)
		require.NoError(t, s.Truncate(6))
		_, err = s.Forward([]int{1, 2})
		assert.NoError(t, err)
		assert.Error(t, s.Truncate(9))
		assert.Error(t, s.Truncate(-1))
		_, err = s.Generate(context.Background(), strings.Repeat("the cat sat ", 10), 5, Sampler{}, nil)
		assert.ErrorIs(t, err, ErrContextOverflow)
	})
	t.Run("bad tokens", func(t *testing.T) {
		s := newSession(t, m, SessionOptions{})
		for _, ids := range [][]int{{-1}, {264}, {1, 2, 1 << 40}} {
			_, err := s.Forward(ids)
			assert.ErrorIs(t, err, ErrBadToken, "%v", ids)
		}
		_, err := s.ForwardAll([]int{5, -3})
		assert.ErrorIs(t, err, ErrBadToken)
		_, err = s.Forward(nil)
		assert.Error(t, err)
		assert.Equal(t, 0, s.Pos())
	})
	t.Run("Session options", func(t *testing.T) {
		for _, o := range []SessionOptions{{MaxContext: -1}, {MaxContext: 17}, {Threads: -1}, {Batch: -2}} {
			_, err := m.NewSession(o)
			assert.Error(t, err, "%+v", o)
		}
	})
	t.Run("sampler", func(t *testing.T) {
		s := newSession(t, m, SessionOptions{})
		_, err := s.Generate(context.Background(), "the", 3, Sampler{Temperature: -1}, nil)
		assert.Error(t, err)
		_, err = s.Generate(context.Background(), "the", -1, Sampler{}, nil)
		assert.Error(t, err)
	})
	t.Run("no tokenizer", func(t *testing.T) {
		m2, err := Load(spec.file(t, 1))
		require.NoError(t, err)
		m2.Tokenizer = nil
		_, err = newSession(t, m2, SessionOptions{}).Generate(context.Background(), "the", 3, Sampler{}, nil)
		assert.Error(t, err)
	})

	files := []struct {
		name string
		spec func(tinySpec) tinySpec
		want error
	}{
		{"heads not a multiple of kv heads", func(s tinySpec) tinySpec {
			s.extra = []ggufwrite.KV{{Key: "llama.attention.head_count_kv", Type: ggufwrite.ValueUint32, Val: uint32(3)}}
			return s
		}, gguf.ErrFormat},
		{"odd rope dims", func(s tinySpec) tinySpec { s.ropeDims = 3; return s }, gguf.ErrFormat},
		{"block count of the wrong type", func(s tinySpec) tinySpec {
			s.extra = []ggufwrite.KV{{Key: "llama.block_count", Type: ggufwrite.ValueString, Val: "two"}}
			return s
		}, gguf.ErrFormat},
		{"unknown architecture", func(s tinySpec) tinySpec { s.arch = "mamba"; return s }, gguf.ErrUnsupported},
		{"missing tensor", func(s tinySpec) tinySpec { s.dropTensor = "blk.0.ffn_up.weight"; return s }, gguf.ErrNotFound},
		{"missing embedding", func(s tinySpec) tinySpec { s.dropTensor = "token_embd.weight"; return s }, gguf.ErrNotFound},
		{"wrong shape", func(s tinySpec) tinySpec { s.badShape = "blk.0.attn_k.weight"; return s }, gguf.ErrFormat},
		{"wrong norm shape", func(s tinySpec) tinySpec { s.badShape = "output_norm.weight"; return s }, gguf.ErrFormat},
		{"partial biases", func(s tinySpec) tinySpec { s.biases, s.dropTensor = true, "blk.0.attn_v.bias"; return s }, gguf.ErrNotFound},
		{"yarn", func(s tinySpec) tinySpec { s.scaling, s.scalingFactor = "yarn", 4; return s }, gguf.ErrUnsupported},
		{"bad linear factor", func(s tinySpec) tinySpec { s.scaling, s.scalingFactor = "linear", -1; return s }, gguf.ErrFormat},
		{"vocab size disagrees", func(s tinySpec) tinySpec {
			s.extra = []ggufwrite.KV{{Key: "llama.vocab_size", Type: ggufwrite.ValueUint32, Val: uint32(300)}}
			return s
		}, gguf.ErrFormat},
	}
	for _, tc := range files {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.spec(spec).file(t, 2)
			_, err := Load(f)
			assert.ErrorIs(t, err, tc.want)
		})
	}

	t.Run("unsupported weight type", func(t *testing.T) {
		b := ggufwrite.File{KVs: configKVs(ggufwrite.KV{Key: "llama.embedding_length", Type: ggufwrite.ValueUint32, Val: uint32(256)}),
			Tensors: []ggufwrite.Tensor{ggufwrite.RawTensor("token_embd.weight", ggufwrite.TypeQ4_K, 256, 8)}}
		b.KVs = append(b.KVs, ggufwrite.KV{Key: "llama.vocab_size", Type: ggufwrite.ValueUint32, Val: uint32(8)})
		_, err := Load(mustRead(t, b.Bytes()))
		assert.ErrorIs(t, err, gguf.ErrUnsupported)
	})
	t.Run("bad rope option", func(t *testing.T) {
		_, err := LoadWith(spec.file(t, 2), LoadOptions{RoPE: RopeNone + 1})
		assert.Error(t, err)
	})
}

func TestRopeModeString(t *testing.T) {
	assert.Equal(t, "auto", RopeAuto.String())
	assert.Equal(t, "normal", RopeNormal.String())
	assert.Equal(t, "neox", RopeNeoX.String())
	assert.Equal(t, "none", RopeNone.String())
	assert.Equal(t, "RopeMode(9)", RopeMode(9).String())
	assert.Equal(t, "eos", StopEOS.String())
	assert.Equal(t, "StopReason(9)", StopReason(9).String())
}

func TestNoAllocationGrowth(t *testing.T) {
	spec := tinySpec{dim: 32, ff: 64, layers: 1, heads: 4, kvHeads: 2, wtype: gguf.TypeF32, ctx: 64}
	m, err := Load(spec.file(t, 4))
	require.NoError(t, err)
	s := newSession(t, m, SessionOptions{Threads: 1})
	_, err = s.Forward([]int{1, 5, 6})
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := s.Forward([]int{7}); err != nil && !errors.Is(err, ErrContextOverflow) {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 2.0, "a decode step allocates its logits and little else")
}

func TestHostileSizes(t *testing.T) {
	spec := tinySpec{dim: 32, ff: 64, layers: 1, heads: 4, kvHeads: 2, wtype: gguf.TypeF32, ctx: 16}
	for _, ff := range []uint64{1 << 40, 1 << 62, math.MaxUint32} {
		s := spec
		s.extra = []ggufwrite.KV{{Key: "llama.feed_forward_length", Type: ggufwrite.ValueUint64, Val: ff}}
		var err error
		require.NotPanics(t, func() { _, err = Load(s.file(t, 1)) })
		assert.ErrorIs(t, err, gguf.ErrFormat, "feed_forward_length %d", ff)
	}
	for _, heads := range []uint64{1 << 40, 1 << 62} {
		s := spec
		s.extra = []ggufwrite.KV{{Key: "llama.attention.head_count", Type: ggufwrite.ValueUint64, Val: heads}, {Key: "llama.attention.key_length", Type: ggufwrite.ValueUint32, Val: uint32(8)}}
		var err error
		require.NotPanics(t, func() { _, err = Load(s.file(t, 1)) })
		assert.Error(t, err, "head_count %d", heads)
	}
	for _, ctx := range []uint64{1 << 40, 1 << 61} {
		s := spec
		s.extra = []ggufwrite.KV{{Key: "llama.context_length", Type: ggufwrite.ValueUint64, Val: ctx}}
		m, err := Load(s.file(t, 1))
		require.NoError(t, err, "the weights fit; only a Session's cache would not")
		var sess *Session
		require.NotPanics(t, func() { sess, err = m.NewSession(SessionOptions{}) })
		assert.ErrorIs(t, err, gguf.ErrFormat, "context_length %d", ctx)
		assert.Nil(t, sess)
		sess, err = m.NewSession(SessionOptions{MaxContext: 16})
		require.NoError(t, err, "a bounded MaxContext still works")
		_, err = sess.Forward([]int{1, 2})
		require.NoError(t, err)
	}
}

func TestForwardAllValidatesFirst(t *testing.T) {
	spec := tinySpec{dim: 32, ff: 64, layers: 1, heads: 4, kvHeads: 2, wtype: gguf.TypeF32, ctx: 16}
	m, err := Load(spec.file(t, 1))
	require.NoError(t, err)
	s := newSession(t, m, SessionOptions{MaxContext: 8})
	_, err = s.ForwardAll(make([]int, 1<<20))
	assert.ErrorIs(t, err, ErrContextOverflow)
	_, err = s.ForwardAll([]int{1, -1})
	assert.ErrorIs(t, err, ErrBadToken)
	want, err := s.Forward([]int{1, 5})
	require.NoError(t, err)
	s.Reset()
	buf := make([]float32, m.Config.VocabSize+3)
	got, err := s.ForwardInto(buf, []int{1, 5})
	require.NoError(t, err)
	assert.Equal(t, want, got)
	_, err = s.ForwardInto(buf[:3], []int{1})
	assert.Error(t, err)
}

func TestSampleAllNaN(t *testing.T) {
	nan := float32(math.NaN())
	var sp Sampler
	_, err := sp.Sample([]float32{nan, nan})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "every logit is NaN")
	_, err = sp.Sample(nil)
	assert.ErrorContains(t, err, "no logits")
}
