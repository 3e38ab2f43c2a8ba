package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/flashgo/flashgo/internal/testmodel"
	"github.com/flashgo/flashgo/model/gguf"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// storiesPath is the test model ($FLASHGO_MODEL, else ../shared/models/;
// README.md, "The test model", says how to download it):
// Karpathy's TinyStories stories260K converted to GGUF v3 by llama.cpp.
var storiesPath = testmodel.Candidate()

// openStories opens the shared test model, or skips the test without it.
func openStories(t *testing.T) *gguf.File {
	t.Helper()
	f, err := gguf.Open(storiesPath)
	if err != nil {
		t.Skipf("test model %s not available (%v); it lives outside the repository: set FLASHGO_MODEL to its path, or README.md (\"The test model\") says how to download it", storiesPath, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestStoriesHeader(t *testing.T) {
	f := openStories(t)
	assert.Equal(t, uint32(3), f.Version())
	assert.Equal(t, int64(32), f.Alignment())
	assert.Equal(t, int64(1185376), f.Size())
	assert.Zero(t, f.DataOffset()%32)
	arch, err := f.String("general.architecture")
	require.NoError(t, err)
	assert.Equal(t, "llama", arch)
	model, err := f.String("tokenizer.ggml.model")
	require.NoError(t, err)
	assert.Equal(t, "llama", model)
	assert.False(t, f.Has("llama.rope.freq_base"), "README: no freq_base key")
}

func TestStoriesConfig(t *testing.T) {
	f := openStories(t)
	c, err := ReadConfig(f)
	require.NoError(t, err)
	assert.Equal(t, Config{
		Architecture:       "llama",
		EmbeddingLength:    64,
		FeedForwardLength:  172,
		BlockCount:         5,
		HeadCount:          8,
		HeadCountKV:        4,
		HeadDim:            8,
		RopeDimensionCount: 8,
		RopeFreqBase:       10000,
		RMSNormEpsilon:     1e-5,
		ContextLength:      2048,
		VocabSize:          512,
	}, c)
}

// storiesTensors is the tensor directory of stories260K in file order, with
// ggml shapes ([in out] for weight matrices).
func storiesTensors() []gguf.TensorInfo {
	ts := []gguf.TensorInfo{
		{Name: "token_embd.weight", Dims: []int{64, 512}},
		{Name: "output_norm.weight", Dims: []int{64}},
		{Name: "output.weight", Dims: []int{64, 512}},
	}
	for i := range 5 {
		p := fmt.Sprintf("blk.%d.", i)
		ts = append(ts,
			gguf.TensorInfo{Name: p + "attn_q.weight", Dims: []int{64, 64}},
			gguf.TensorInfo{Name: p + "attn_k.weight", Dims: []int{64, 32}},
			gguf.TensorInfo{Name: p + "attn_v.weight", Dims: []int{64, 32}},
			gguf.TensorInfo{Name: p + "attn_output.weight", Dims: []int{64, 64}},
			gguf.TensorInfo{Name: p + "attn_norm.weight", Dims: []int{64}},
			gguf.TensorInfo{Name: p + "ffn_gate.weight", Dims: []int{64, 172}},
			gguf.TensorInfo{Name: p + "ffn_down.weight", Dims: []int{172, 64}},
			gguf.TensorInfo{Name: p + "ffn_up.weight", Dims: []int{64, 172}},
			gguf.TensorInfo{Name: p + "ffn_norm.weight", Dims: []int{64}},
		)
	}
	return ts
}

func TestStoriesTensors(t *testing.T) {
	f := openStories(t)
	want := storiesTensors()
	got := f.Tensors()
	require.Len(t, got, len(want))
	var total int64
	for i, w := range want {
		g := got[i]
		assert.Equal(t, w.Name, g.Name)
		assert.Equal(t, w.Dims, g.Dims, w.Name)
		assert.Equal(t, gguf.TypeF32, g.Type, w.Name)
		assert.Zero(t, g.Offset%32, w.Name)
		vals, err := f.Float32s(g.Name)
		require.NoError(t, err, w.Name)
		require.Len(t, vals, g.NumElements())
		nonzero := false
		for _, v := range vals {
			require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0), "%s has a non-finite value", w.Name)
			nonzero = nonzero || v != 0
		}
		assert.True(t, nonzero, "%s is all zeros", w.Name)
		total += g.Size()
	}
	// The tensors fill the data section (with 32-byte padding, which F32
	// tensors of these shapes never need).
	assert.Equal(t, f.Size()-f.DataOffset(), total)

	// The file stores output.weight separately, but (tied embeddings in
	// llama2.c) with exactly the values of token_embd.weight.
	emb, err := f.Float32s("token_embd.weight")
	require.NoError(t, err)
	out, err := f.Float32s("output.weight")
	require.NoError(t, err)
	assert.Equal(t, emb, out)

	// RMSNorm weights are near one after training, not zero or garbage.
	norm, err := f.Float32s("output_norm.weight")
	require.NoError(t, err)
	var mean float64
	for _, v := range norm {
		mean += float64(v) / float64(len(norm))
	}
	assert.InDelta(t, 1, mean, 1, "mean of output_norm.weight")
}

func storiesTokenizer(t *testing.T) *Tokenizer {
	t.Helper()
	tok, err := NewTokenizer(openStories(t))
	require.NoError(t, err)
	return tok
}

func TestStoriesKnownAnswer(t *testing.T) {
	tok := storiesTokenizer(t)
	ids := tok.Encode("Once upon a time", true)
	assert.Equal(t, []int{1, 403, 407, 261, 378}, ids)
	assert.Equal(t, []string{"<s>", "▁Once", "▁upon", "▁a", "▁time"},
		[]string{tok.Token(1), tok.Token(403), tok.Token(407), tok.Token(261), tok.Token(378)})
	assert.Equal(t, "Once upon a time", tok.Decode(ids))
	assert.Equal(t, []int{403, 407, 261, 378}, tok.Encode("Once upon a time", false))
}

func TestStoriesTokenizerAccessors(t *testing.T) {
	tok := storiesTokenizer(t)
	assert.Equal(t, 512, tok.VocabSize())
	assert.Equal(t, 1, tok.BOS())
	assert.Equal(t, 2, tok.EOS())
	assert.Equal(t, "<unk>", tok.Token(0))
	assert.Equal(t, "</s>", tok.Token(2))
	assert.Equal(t, "<0x0A>", tok.Token(13))
	assert.Equal(t, TokenControl, tok.Type(1))
	assert.Equal(t, TokenByte, tok.Type(13))
	assert.Equal(t, TokenNormal, tok.Type(403))
	assert.Equal(t, []int{1}, tok.Encode("", true))
	assert.Empty(t, tok.Encode("", false))
}

func TestStoriesRoundTrip(t *testing.T) {
	tok := storiesTokenizer(t)
	texts := []string{
		"",
		"Once upon a time, there was a little girl named Lily. She loved to play outside in the park.",
		"Hello",
		"a",
		" ",
		"  ",
		" leading space",
		"trailing space ",
		"multiple   spaces  between    words",
		"line one\nline two\n\nline four\n",
		"\n",
		"tabs\tand\r\ncarriage returns",
		"héllo wörld, çà et là",
		"日本語のテキスト",
		"emoji 🙂🚀 and ZWJ 👩‍👩‍👧",
		"Ελληνικά και Кириллица",
		"numbers 1234567890 and symbols !@#$%^&*()_+-=[]{};':\",./<>?`~\\|",
		"<s> and </s> are plain text here",
		"\x00\x01\x7f",
		"invalid utf-8 \xff\xfe\xe2\x28\xa1",
	}
	for _, s := range texts {
		ids := tok.Encode(s, true)
		require.NotEmpty(t, ids)
		assert.Equal(t, 1, ids[0])
		for _, id := range ids {
			assert.True(t, id >= 0 && id < tok.VocabSize(), "id %d", id)
		}
		assert.Equal(t, s, tok.Decode(ids), "round trip of %q (ids %v)", s, ids)
		assert.Equal(t, referenceEncode(tok, s), ids[1:], "reference encoding of %q", s)
	}
	// Non-ASCII characters outside the vocabulary become byte tokens.
	ids := tok.Encode("日", false)
	assert.Equal(t, []string{"▁", "<0xE6>", "<0x97>", "<0xA5>"},
		[]string{tok.Token(ids[0]), tok.Token(ids[1]), tok.Token(ids[2]), tok.Token(ids[3])})
}

// TestStoriesRandomText checks round trips and the reference encoder on
// random mixtures of words, spaces, punctuation and multi-byte characters.
func TestStoriesRandomText(t *testing.T) {
	tok := storiesTokenizer(t)
	rng := rand.New(rand.NewPCG(3, 4))
	parts := []string{"the", "little", "dog", "Lily", " ", " ", "  ", ",", ".", "\n", "é", "ß", "🙂", "a", "ing", "said", "\"", "'"}
	for range 500 {
		var sb strings.Builder
		for range rng.IntN(30) {
			sb.WriteString(parts[rng.IntN(len(parts))])
		}
		s := sb.String()
		ids := tok.Encode(s, true)
		require.Equal(t, s, tok.Decode(ids), "%q", s)
		require.Equal(t, referenceEncode(tok, s), ids[1:], "%q", s)
	}
}
