package model

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/flashgo/flashgo/model/gguf"
	"github.com/flashgo/flashgo/model/internal/ggufwrite"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// firstPiece is the id of the first non-byte, non-special token in a
// vocabulary made by tokenizerKVs.
const firstPiece = 3 + 256

func newTestTokenizer(t *testing.T, pieces []string, scores []float32, extra ...ggufwrite.KV) *Tokenizer {
	t.Helper()
	kvs := tokenizerKVs(pieces, scores)
	for _, x := range extra {
		kvs = withoutKey(kvs, x.Key)
		if x.Type != 0 || x.Val != nil {
			kvs = append(kvs, x)
		}
	}
	f := mustRead(t, ggufwrite.File{KVs: kvs}.Bytes())
	tok, err := NewTokenizer(f)
	require.NoError(t, err)
	return tok
}

// pieceIDs maps token texts to ids for readable expectations.
func pieceIDs(t *testing.T, tok *Tokenizer, pieces ...string) []int {
	t.Helper()
	ids := make([]int, len(pieces))
	for i, p := range pieces {
		id, ok := tok.ID(p)
		require.True(t, ok, "token %q", p)
		ids[i] = id
	}
	return ids
}

func TestEncodeMergePriority(t *testing.T) {
	noPrefix := ggufwrite.KV{Key: "tokenizer.ggml.add_space_prefix", Type: ggufwrite.ValueBool, Val: false}
	for _, c := range []struct {
		name   string
		pieces []string
		scores []float32
		text   string
		want   []string
	}{
		{"tie goes left", []string{"a", "b", "c", "ab", "bc"}, []float32{0, 0, 0, 1, 1}, "abc", []string{"ab", "c"}},
		{"higher score wins", []string{"a", "b", "c", "ab", "bc"}, []float32{0, 0, 0, 1, 2}, "abc", []string{"a", "bc"}},
		// Highest first, not leftmost first: cd (3) merges before ab (1),
		// which blocks bc (2) from ever forming.
		{"best pair first", []string{"a", "b", "c", "d", "ab", "bc", "cd"}, []float32{0, 0, 0, 0, 1, 2, 3}, "abcd", []string{"ab", "cd"}},
		{"merges chain", []string{"a", "b", "c", "ab", "abc"}, []float32{0, 0, 0, 1, 5}, "abc", []string{"abc"}},
		// abc is a token but no pair path reaches it from a+bc when only
		// "ab" pairs exist... here bc exists, so a+bc forms abc.
		{"merge through right pair", []string{"a", "b", "c", "bc", "abc"}, []float32{0, 0, 0, 1, 5}, "abc", []string{"abc"}},
		// Unreachable token: "abc" without "ab" or "bc" is never formed.
		{"no path", []string{"a", "b", "c", "abc"}, []float32{0, 0, 0, 9}, "abc", []string{"a", "b", "c"}},
		{"repeats", []string{"a", "aa"}, []float32{0, 1}, "aaaaa", []string{"aa", "aa", "a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok := newTestTokenizer(t, c.pieces, c.scores, noPrefix)
			got := tok.Encode(c.text, false)
			assert.Equal(t, pieceIDs(t, tok, c.want...), got)
			assert.Equal(t, got, referenceEncode(tok, c.text), "reference")
			assert.Equal(t, c.text, tok.Decode(got))
		})
	}
}

func TestEncodeSpacePrefix(t *testing.T) {
	pieces := []string{"▁", "h", "i", "▁h", "▁hi", "hi"}
	scores := []float32{0, 0, 0, 1, 2, 0.5}
	tok := newTestTokenizer(t, pieces, scores)
	assert.Equal(t, append([]int{1}, pieceIDs(t, tok, "▁hi")...), tok.Encode("hi", true))
	assert.Equal(t, pieceIDs(t, tok, "▁hi", "▁hi"), tok.Encode("hi hi", false))
	assert.Equal(t, pieceIDs(t, tok, "▁", "▁hi"), tok.Encode(" hi", false))
	assert.Equal(t, "hi hi", tok.Decode(tok.Encode("hi hi", true)))
	assert.Equal(t, " hi", tok.Decode(tok.Encode(" hi", true)))
	// Without BOS the prefix space stays (llama2.c strips it only after BOS).
	assert.Equal(t, " hi", tok.Decode(tok.Encode("hi", false)))

	off := newTestTokenizer(t, pieces, scores, ggufwrite.KV{Key: "tokenizer.ggml.add_space_prefix", Type: ggufwrite.ValueBool, Val: false})
	assert.Equal(t, pieceIDs(t, off, "hi"), off.Encode("hi", false))
	assert.Equal(t, " hi", off.Decode(off.Encode(" hi", true)), "nothing to strip without the prefix")
}

func TestEncodeByteFallback(t *testing.T) {
	tok := newTestTokenizer(t, []string{"▁", "a", "é"}, []float32{0, 0, 0})
	byteID := func(b byte) int { return 3 + int(b) }
	// "z" is not in the vocabulary: its byte token; "é" is; "ü" is not: two
	// byte tokens; an emoji: four.
	got := tok.Encode("az", false)
	assert.Equal(t, []int{firstPiece, firstPiece + 1, byteID('z')}, got)
	got = tok.Encode("éü🙂", false)
	want := []int{firstPiece, firstPiece + 2, byteID(0xC3), byteID(0xBC), byteID(0xF0), byteID(0x9F), byteID(0x99), byteID(0x82)}
	assert.Equal(t, want, got)
	assert.Equal(t, "éü🙂", tok.Decode(append([]int{1}, got...)))
	// Invalid UTF-8 survives the round trip through byte tokens.
	for _, s := range []string{"\xff", "a\xe2\x28b", "\x80\x80", "abc\xe2"} {
		assert.Equal(t, s, tok.Decode(tok.Encode(s, true)), "%q", s)
	}
}

func TestEncodeWithoutByteTokens(t *testing.T) {
	kvs := []ggufwrite.KV{
		{Key: "tokenizer.ggml.model", Type: ggufwrite.ValueString, Val: "llama"},
		{Key: "tokenizer.ggml.tokens", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueString, Items: []any{"<unk>", "<s>", "</s>", "▁", "a"}}},
	}
	f := mustRead(t, ggufwrite.File{KVs: kvs}.Bytes())
	tok, err := NewTokenizer(f)
	require.NoError(t, err)
	// No scores and no types: types are inferred, unknown characters map to
	// <unk> (one per byte), which decodes to nothing.
	assert.Equal(t, TokenControl, tok.Type(1))
	assert.Equal(t, TokenUnknown, tok.Type(0))
	assert.Equal(t, TokenNormal, tok.Type(4))
	assert.Equal(t, []int{1, 3, 4, 0, 0}, tok.Encode("aé", true))
	assert.Equal(t, "a", tok.Decode([]int{1, 3, 4, 0, 0}))
}

func TestInferredByteTokens(t *testing.T) {
	kvs := tokenizerKVs([]string{"▁"}, []float32{0})
	kvs = withoutKey(kvs, "tokenizer.ggml.token_type")
	kvs = withoutKey(kvs, "tokenizer.ggml.scores")
	tok, err := NewTokenizer(mustRead(t, ggufwrite.File{KVs: kvs}.Bytes()))
	require.NoError(t, err)
	assert.Equal(t, TokenByte, tok.Type(3+'A'))
	assert.Equal(t, "\n", tok.Decode([]int{3 + '\n'}))
	assert.Equal(t, "x\ny", tok.Decode(tok.Encode("x\ny", true)))
}

func TestDecode(t *testing.T) {
	tok := newTestTokenizer(t, []string{"▁", "▁hello", "▁world", "!", "▁▁"}, []float32{0, 1, 1, 0, 0.5})
	hello, world, bang := firstPiece+1, firstPiece+2, firstPiece+3
	assert.Equal(t, "hello world!", tok.Decode([]int{1, hello, world, bang, 2}))
	assert.Equal(t, " hello world", tok.Decode([]int{hello, world}), "no BOS: the space stays")
	assert.Equal(t, "hello", tok.Decode([]int{1, hello, 2, 2}), "EOS decodes to nothing")
	assert.Equal(t, "hello", tok.Decode([]int{1, hello, 0}), "unknown decodes to nothing")
	assert.Equal(t, " hello", tok.Decode([]int{1, 0, hello}), "only the token right after BOS is stripped, as in llama2.c")
	assert.Equal(t, "helloworld", tok.Decode([]int{1, hello, 1, world}), "strip after every BOS")
	assert.Equal(t, "hello", tok.Decode([]int{-5, 1, hello, 1 << 30}), "out-of-range ids are skipped")
	assert.Equal(t, " ", tok.Decode([]int{1, 3 + ' '}), "a space byte token after BOS stays")
	assert.Equal(t, "  hello", tok.Decode([]int{1, firstPiece + 4, hello}), "only one space of ▁▁ is stripped")
	assert.Equal(t, "", tok.Decode(nil))

	// Piece streams what Decode joins.
	ids := tok.Encode("hello world!  hello", true)
	var b strings.Builder
	prev := -1
	for _, id := range ids {
		b.WriteString(tok.Piece(prev, id))
		prev = id
	}
	assert.Equal(t, tok.Decode(ids), b.String())
	assert.Equal(t, "hello world!  hello", b.String())
}

func TestTokenizerAccessors(t *testing.T) {
	tok := newTestTokenizer(t, []string{"▁", "a"}, []float32{-1, -2})
	assert.Equal(t, firstPiece+2, tok.VocabSize())
	assert.Equal(t, 1, tok.BOS())
	assert.Equal(t, 2, tok.EOS())
	assert.Equal(t, "<s>", tok.Token(1))
	assert.Equal(t, "<0x41>", tok.Token(3+'A'))
	assert.Equal(t, "▁", tok.Token(firstPiece))
	assert.Equal(t, "", tok.Token(-1))
	assert.Equal(t, "", tok.Token(tok.VocabSize()))
	assert.Equal(t, float32(-2), tok.Score(firstPiece+1))
	assert.Equal(t, float32(0), tok.Score(-1))
	assert.Equal(t, TokenByte, tok.Type(3))
	assert.Equal(t, TokenType(0), tok.Type(1<<20))
	id, ok := tok.ID("a")
	assert.True(t, ok)
	assert.Equal(t, firstPiece+1, id)
	_, ok = tok.ID("zzz")
	assert.False(t, ok)
}

func TestTokenizerSpecialIDs(t *testing.T) {
	// Out-of-range ids fall back to the defaults 1 and 2; BOS -1 as uint32.
	tok := newTestTokenizer(t, []string{"a"}, []float32{0},
		ggufwrite.KV{Key: "tokenizer.ggml.bos_token_id", Type: ggufwrite.ValueUint32, Val: uint32(0xFFFFFFFF)},
		ggufwrite.KV{Key: "tokenizer.ggml.eos_token_id", Type: ggufwrite.ValueInt32, Val: int32(5)})
	assert.Equal(t, 1, tok.BOS())
	assert.Equal(t, 5, tok.EOS())

	// A two-token vocabulary has no room for the default EOS.
	f := mustRead(t, ggufwrite.File{KVs: []ggufwrite.KV{
		{Key: "tokenizer.ggml.model", Type: ggufwrite.ValueString, Val: "llama"},
		{Key: "tokenizer.ggml.tokens", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueString, Items: []any{"<unk>", "<s>"}}},
	}}.Bytes())
	tok, err := NewTokenizer(f)
	require.NoError(t, err)
	assert.Equal(t, 1, tok.BOS())
	assert.Equal(t, -1, tok.EOS())
	assert.Equal(t, []int{1, 0, 0, 0, 0}, tok.Encode("a", true), "▁ (3 bytes) and a are unknown")
}

func TestNewTokenizerErrors(t *testing.T) {
	base := tokenizerKVs([]string{"a"}, []float32{0})
	for name, c := range map[string]struct {
		kvs  []ggufwrite.KV
		want error
	}{
		"no model":    {withoutKey(base, "tokenizer.ggml.model"), gguf.ErrNotFound},
		"gpt2":        {append(withoutKey(base, "tokenizer.ggml.model"), ggufwrite.KV{Key: "tokenizer.ggml.model", Type: ggufwrite.ValueString, Val: "gpt2"}), gguf.ErrUnsupported},
		"no tokens":   {withoutKey(base, "tokenizer.ggml.tokens"), gguf.ErrNotFound},
		"empty vocab": {[]ggufwrite.KV{{Key: "tokenizer.ggml.model", Type: ggufwrite.ValueString, Val: "llama"}, {Key: "tokenizer.ggml.tokens", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueString, Items: nil}}}, gguf.ErrFormat},
		"int tokens": {[]ggufwrite.KV{{Key: "tokenizer.ggml.model", Type: ggufwrite.ValueString, Val: "llama"},
			{Key: "tokenizer.ggml.tokens", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueInt32, Items: []any{int32(1)}}}}, gguf.ErrFormat},
		"short scores": {append(withoutKey(base, "tokenizer.ggml.scores"),
			ggufwrite.KV{Key: "tokenizer.ggml.scores", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueFloat32, Items: []any{float32(1)}}}), gguf.ErrFormat},
		"string scores": {append(withoutKey(base, "tokenizer.ggml.scores"),
			ggufwrite.KV{Key: "tokenizer.ggml.scores", Type: ggufwrite.ValueString, Val: "x"}), gguf.ErrFormat},
		"short types": {append(withoutKey(base, "tokenizer.ggml.token_type"),
			ggufwrite.KV{Key: "tokenizer.ggml.token_type", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueInt32, Items: []any{int32(1)}}}), gguf.ErrFormat},
		"bad space prefix": {append(base, ggufwrite.KV{Key: "tokenizer.ggml.add_space_prefix", Type: ggufwrite.ValueUint8, Val: uint8(1)}), gguf.ErrFormat},
	} {
		_, err := NewTokenizer(mustRead(t, ggufwrite.File{KVs: c.kvs}.Bytes()))
		assert.ErrorIs(t, err, c.want, name)
	}
}

// referenceEncode is a direct, quadratic statement of the SentencePiece
// merge rule that Encode implements with a priority queue: split into UTF-8
// characters (by lead byte, as llama.cpp), then repeatedly merge the
// adjacent pair that forms the highest-scoring token, leftmost on ties;
// finally map pieces to tokens, falling back to byte tokens.
func referenceEncode(tok *Tokenizer, text string) []int {
	out := []int{}
	if text == "" {
		return out
	}
	if tok.addSpacePrefix {
		text = " " + text
	}
	s := strings.ReplaceAll(text, " ", "▁")
	var pieces []string
	for off := 0; off < len(s); {
		n := min(utf8Len[s[off]>>4], len(s)-off)
		pieces = append(pieces, s[off:off+n])
		off += n
	}
	for {
		best, bestScore := -1, float32(0)
		for i := 0; i+1 < len(pieces); i++ {
			id, ok := tok.ID(pieces[i] + pieces[i+1])
			if ok && (best < 0 || tok.Score(id) > bestScore) {
				best, bestScore = i, tok.Score(id)
			}
		}
		if best < 0 {
			break
		}
		pieces[best] += pieces[best+1]
		pieces = append(pieces[:best+1], pieces[best+2:]...)
	}
	for _, p := range pieces {
		if id, ok := tok.ID(p); ok {
			out = append(out, id)
			continue
		}
		for i := 0; i < len(p); i++ {
			out = append(out, tok.byteToken[p[i]])
		}
	}
	return out
}

// TestEncodeMatchesReference compares Encode with referenceEncode on random
// texts over a random vocabulary with many equal scores.
func TestEncodeMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "c", "▁", "é", "x"}
	seen := map[string]bool{}
	var pieces []string
	var scores []float32
	for len(pieces) < 60 {
		var p string
		for range 1 + rng.IntN(4) {
			p += alphabet[rng.IntN(len(alphabet))]
		}
		if p == "x" || seen[p] {
			continue // x stays out of the vocabulary: byte fallback
		}
		seen[p] = true
		pieces = append(pieces, p)
		scores = append(scores, float32(rng.IntN(5)))
	}
	tok := newTestTokenizer(t, pieces, scores)
	chars := []string{"a", "b", "c", " ", "é", "x", "\n"}
	for range 2000 {
		var sb strings.Builder
		for range rng.IntN(20) {
			sb.WriteString(chars[rng.IntN(len(chars))])
		}
		s := sb.String()
		got := tok.Encode(s, false)
		require.Equal(t, referenceEncode(tok, s), got, "%q", s)
		require.Equal(t, s, tok.Decode(tok.Encode(s, true)), "%q", s)
	}
}
