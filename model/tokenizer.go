package model

import (
	"container/heap"
	"errors"
	"fmt"
	"strings"

	"github.com/flashgo/flashgo/model/gguf"
)

// TokenType is the SentencePiece type of a vocabulary entry
// (tokenizer.ggml.token_type).
type TokenType int32

// The token types, with the codes GGUF stores.
const (
	TokenNormal      TokenType = 1 // ordinary text piece; "▁" stands for a space
	TokenUnknown     TokenType = 2 // the unknown token, "<unk>"
	TokenControl     TokenType = 3 // control tokens such as BOS "<s>" and EOS "</s>"
	TokenUserDefined TokenType = 4 // user-defined piece, decoded verbatim
	TokenUnused      TokenType = 5 // reserved, never produced
	TokenByte        TokenType = 6 // byte-fallback token "<0xNN>"
)

// spaceEscape is SentencePiece's visible stand-in for a space, U+2581.
const spaceEscape = "\u2581"

// Tokenizer is the SentencePiece (llama) tokenizer of a GGUF model. It is
// immutable and safe for concurrent use.
type Tokenizer struct {
	tokens []string
	scores []float32
	types  []TokenType
	pieces []string // decoded text of each token; "" for control, unknown, unused
	ids    map[string]int

	byteToken [256]int // token for each byte, for byte fallback
	bos, eos  int      // -1 if none
	unk       int      // -1 if none

	addSpacePrefix bool
}

// NewTokenizer builds the tokenizer described by f's metadata:
// tokenizer.ggml.model (which must be "llama"), tokenizer.ggml.tokens,
// the optional tokenizer.ggml.scores and tokenizer.ggml.token_type (of the
// same length as the tokens), the BOS, EOS and unknown token ids (defaults 1,
// 2 and 0, as in llama.cpp; ids outside the vocabulary are ignored) and
// tokenizer.ggml.add_space_prefix (default true).
func NewTokenizer(f *gguf.File) (*Tokenizer, error) {
	if f == nil {
		return nil, errors.New("model: NewTokenizer: nil *gguf.File; want a file from gguf.Open or gguf.Read")
	}
	kind, err := f.String("tokenizer.ggml.model")
	if err != nil {
		return nil, ggufError(err)
	}
	if kind != "llama" {
		return nil, fmt.Errorf("model: tokenizer: model %q: %w (only \"llama\" SentencePiece vocabularies)", kind, gguf.ErrUnsupported)
	}
	tokens, err := f.StringArray("tokenizer.ggml.tokens")
	if err != nil {
		return nil, ggufError(err)
	}
	n := len(tokens)
	if n == 0 {
		return nil, fmt.Errorf("model: tokenizer: %w: empty vocabulary", gguf.ErrFormat)
	}
	t := &Tokenizer{tokens: tokens, addSpacePrefix: true}

	if f.Has("tokenizer.ggml.scores") {
		if t.scores, err = f.Float32Array("tokenizer.ggml.scores"); err != nil {
			return nil, ggufError(err)
		}
		if len(t.scores) != n {
			return nil, fmt.Errorf("model: tokenizer: %w: %d scores for %d tokens", gguf.ErrFormat, len(t.scores), n)
		}
	} else {
		t.scores = make([]float32, n)
	}

	t.bos = t.specialID(f, "tokenizer.ggml.bos_token_id", 1)
	t.eos = t.specialID(f, "tokenizer.ggml.eos_token_id", 2)
	t.unk = t.specialID(f, "tokenizer.ggml.unknown_token_id", 0)
	if f.Has("tokenizer.ggml.add_space_prefix") {
		if t.addSpacePrefix, err = f.Bool("tokenizer.ggml.add_space_prefix"); err != nil {
			return nil, ggufError(err)
		}
	}

	t.types = make([]TokenType, n)
	if f.Has("tokenizer.ggml.token_type") {
		types, err := f.Int32Array("tokenizer.ggml.token_type")
		if err != nil {
			return nil, ggufError(err)
		}
		if len(types) != n {
			return nil, fmt.Errorf("model: tokenizer: %w: %d token types for %d tokens", gguf.ErrFormat, len(types), n)
		}
		for i, ty := range types {
			t.types[i] = TokenType(ty)
		}
	} else {
		// No types: infer them as SentencePiece would have set them.
		for i, s := range tokens {
			t.types[i] = TokenNormal
			if _, ok := parseByteToken(s); ok {
				t.types[i] = TokenByte
			}
		}
		for _, id := range []int{t.bos, t.eos} {
			if id >= 0 {
				t.types[id] = TokenControl
			}
		}
		if t.unk >= 0 {
			t.types[t.unk] = TokenUnknown
		}
	}

	t.ids = make(map[string]int, n)
	t.pieces = make([]string, n)
	for i, s := range tokens {
		t.ids[s] = i // on duplicates the last one wins, as in llama.cpp
		switch t.types[i] {
		case TokenNormal:
			t.pieces[i] = strings.ReplaceAll(s, spaceEscape, " ")
		case TokenUserDefined:
			t.pieces[i] = s
		case TokenByte:
			if b, ok := parseByteToken(s); ok {
				t.pieces[i] = string([]byte{b})
			}
		}
	}
	for b := range t.byteToken {
		id, ok := t.ids[fmt.Sprintf("<0x%02X>", b)]
		if !ok {
			id, ok = t.ids[string([]byte{byte(b)})]
		}
		if !ok {
			id = t.unk
		}
		t.byteToken[b] = id
	}
	return t, nil
}

// specialID reads a special token id, falling back to def when the key is
// missing or the id lies outside the vocabulary, and to -1 when def does too.
func (t *Tokenizer) specialID(f *gguf.File, key string, def int) int {
	if id, err := f.Int(key); err == nil && id >= 0 && id < len(t.tokens) {
		return id
	}
	if def < len(t.tokens) {
		return def
	}
	return -1
}

// parseByteToken parses a byte-fallback token "<0xNN>" (upper- or lower-case
// hex digits).
func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	var b byte
	for _, c := range []byte(s[3:5]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		default:
			return 0, false
		}
		b = b<<4 | c
	}
	return b, true
}

// VocabSize returns the number of tokens in the vocabulary.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// BOS returns the beginning-of-sequence token id, or -1 if there is none.
func (t *Tokenizer) BOS() int { return t.bos }

// EOS returns the end-of-sequence token id, or -1 if there is none.
func (t *Tokenizer) EOS() int { return t.eos }

// Token returns the vocabulary text of token id as stored (with "▁" for
// spaces, "<0x0A>" for byte tokens), or "" if id is out of range.
func (t *Tokenizer) Token(id int) string {
	if id < 0 || id >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// Score returns the merge score of token id, or 0 if id is out of range.
func (t *Tokenizer) Score(id int) float32 {
	if id < 0 || id >= len(t.scores) {
		return 0
	}
	return t.scores[id]
}

// Type returns the type of token id, or 0 if id is out of range.
func (t *Tokenizer) Type(id int) TokenType {
	if id < 0 || id >= len(t.types) {
		return 0
	}
	return t.types[id]
}

// ID returns the id of the token whose vocabulary text is s.
func (t *Tokenizer) ID(s string) (int, bool) {
	id, ok := t.ids[s]
	return id, ok
}

// symbol is a piece of the text being encoded, text[start:start+n], in a
// doubly linked list of the pieces not yet merged away (n == 0 once merged).
type symbol struct {
	start, n   int
	prev, next int
}

// bigram is a candidate merge of two adjacent symbols whose concatenation,
// size bytes long, is a token with the given score.
type bigram struct {
	left, right int
	score       float32
	size        int
}

// bigramQueue is a max-heap by score; on equal scores the leftmost wins, as
// in llama.cpp's llm_bigram_spm comparator.
type bigramQueue []bigram

func (q bigramQueue) Len() int { return len(q) }
func (q bigramQueue) Less(i, j int) bool {
	return q[i].score > q[j].score || (q[i].score == q[j].score && q[i].left < q[j].left)
}
func (q bigramQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *bigramQueue) Push(x any)   { *q = append(*q, x.(bigram)) }
func (q *bigramQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// utf8Len is the length of a UTF-8 sequence from its lead byte's top four
// bits, as llama.cpp's unicode_len_utf8 computes it: continuation and
// invalid bytes count as one-byte characters.
var utf8Len = [16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}

// Encode tokenizes text as llama.cpp's SentencePiece tokenizer
// (llm_tokenizer_spm) does, prefixed with BOS if addBOS is set and the
// vocabulary has one. Unless the model disables add_space_prefix, a space is
// prepended to non-empty text; every space becomes "▁". The text is split
// into UTF-8 characters, and the adjacent pair of pieces whose concatenation
// is a token with the highest score is merged (on ties the leftmost pair)
// until no pair forms a token. Pieces that are not tokens become byte tokens
// "<0xNN>", one per byte (or the unknown token if the vocabulary has no byte
// tokens). Special tokens written in text ("<s>") are not recognised; they
// are tokenized as plain text.
func (t *Tokenizer) Encode(text string, addBOS bool) []int {
	out := make([]int, 0, 1+len(text)/2)
	if addBOS && t.bos >= 0 {
		out = append(out, t.bos)
	}
	if text == "" {
		return out
	}
	if t.addSpacePrefix {
		text = " " + text
	}
	s := strings.ReplaceAll(text, " ", spaceEscape)

	syms := make([]symbol, 0, len(s))
	for off := 0; off < len(s); {
		n := min(utf8Len[s[off]>>4], len(s)-off)
		i := len(syms)
		syms = append(syms, symbol{start: off, n: n, prev: i - 1, next: i + 1})
		off += n
	}
	syms[len(syms)-1].next = -1

	q := make(bigramQueue, 0, len(syms))
	tryAdd := func(left, right int) {
		if left < 0 || right < 0 {
			return
		}
		l, r := syms[left], syms[right]
		piece := s[l.start : r.start+r.n]
		id, ok := t.ids[piece]
		if !ok {
			return
		}
		heap.Push(&q, bigram{left: left, right: right, score: t.scores[id], size: len(piece)})
	}
	for i := 1; i < len(syms); i++ {
		tryAdd(i-1, i)
	}
	for q.Len() > 0 {
		b := heap.Pop(&q).(bigram)
		l, r := &syms[b.left], &syms[b.right]
		// Skip candidates made stale by an earlier merge of either side.
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		tryAdd(l.prev, b.left)
		tryAdd(b.left, l.next)
	}

	for i := 0; i != -1; i = syms[i].next {
		piece := s[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.ids[piece]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(piece); j++ {
			if id := t.byteToken[piece[j]]; id >= 0 {
				out = append(out, id)
			}
		}
	}
	return out
}

// Piece returns the text that token id contributes when it follows token
// prev in a sequence, as llama2.c decodes: "▁" becomes a space, a byte token
// its byte (so a piece may be part of a UTF-8 character), and control,
// unknown and unused tokens (BOS, EOS) nothing. The leading space of the
// first token after BOS, which Encode added, is dropped. Out-of-range ids
// give "". Piece suits streaming output; [Tokenizer.Decode] joins pieces.
func (t *Tokenizer) Piece(prev, id int) string {
	if id < 0 || id >= len(t.pieces) || id == t.bos || id == t.eos {
		return ""
	}
	p := t.pieces[id]
	if prev == t.bos && prev >= 0 && t.addSpacePrefix && t.types[id] != TokenByte {
		p = strings.TrimPrefix(p, " ")
	}
	return p
}

// Decode turns token ids back into text: the concatenation of
// [Tokenizer.Piece] over the sequence. Decode(Encode(s, true)) == s for
// any valid UTF-8 text s without "▁" when the vocabulary has byte tokens
// and "▁": Encode writes a space as "▁", so a "▁" in the text comes back
// as a space, and it splits the text by UTF-8 lead bytes as llama.cpp
// does, so an invalid lead byte can take in the "▁" of a space after it,
// which then comes back as the bytes of "▁".
func (t *Tokenizer) Decode(ids []int) string {
	var b strings.Builder
	prev := -1
	for _, id := range ids {
		b.WriteString(t.Piece(prev, id))
		prev = id
	}
	return b.String()
}
