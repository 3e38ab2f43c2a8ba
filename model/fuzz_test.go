package model

import (
	"bytes"
	"context"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/flashgo/flashgo/model/gguf"
	"github.com/flashgo/flashgo/model/internal/ggufwrite"
)

// fuzzSeeds are the generated seed corpus of FuzzLoad: valid files of
// every shape the writer makes, models and tokenizers among them, and
// broken ones derived from them. (The broken headers of package gguf's
// tests seed its FuzzGGUF.)
func fuzzSeeds() [][]byte {
	tokKVs := append(configKVs(), tokenizerKVs([]string{"▁", "a", "b", "▁a", "ab"}, []float32{0, -1, -2, 3, 2})...)
	valid := [][]byte{
		ggufwrite.File{KVs: tokKVs, Tensors: []ggufwrite.Tensor{ggufwrite.F32Tensor("token_embd.weight", 32, 4), ggufwrite.Q8Tensor("blk.0.attn_q.weight", 32, 2)}}.Bytes(),
		ggufwrite.File{KVs: configKVs()}.Bytes(),
		ggufwrite.File{}.Bytes(),
		fuzzTinyModel(),
	}
	seeds := append([][]byte(nil), valid...)
	// Truncations and single-byte corruptions of the valid files.
	for _, v := range valid {
		for _, n := range []int{len(v) / 3, len(v) / 2, len(v) - 1} {
			seeds = append(seeds, v[:n])
		}
		for _, at := range []int{8, 16, 24, 40, len(v) / 2} {
			if at < len(v) {
				d := bytes.Clone(v)
				d[at] ^= 0xff
				seeds = append(seeds, d)
			}
		}
	}
	return seeds
}

// fuzzTinyModel is a complete model small enough for a seed: one block of
// width 8, F16 weights, the tiny vocabulary.
func fuzzTinyModel() []byte {
	return tinySpec{dim: 8, ff: 16, layers: 1, heads: 2, kvHeads: 1, wtype: gguf.TypeF16, ctx: 32}.bytes(1)
}

// FuzzLoad feeds arbitrary bytes to gguf.Read and on to this package. It
// asserts that nothing panics, that when Read succeeds a tokenizer or
// config built from the file behaves, and that loading the file as a model
// and running a Session over two tokens either fails or works, allocating
// no more than a small multiple of the file's size. (Package gguf's
// FuzzGGUF checks the file's own accessors; FuzzLoad began as the part of
// it that needs this package, and its corpus began as a copy of FuzzGGUF's.)
func FuzzLoad(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := gguf.Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		exercise(t, file)
		if mem, err := loadAndRun(data, SessionOptions{}); mem > hostileBound(len(data)) {
			t.Fatalf("loading and running a %d-byte file allocated %d bytes (%v)", len(data), mem, err)
		}
	})
}

// Edits of FuzzModel.
const (
	editSet     = iota // a scalar of type typ from bits (or s)
	editDelete         // drop the pair
	editValue          // the same type, a new value: bits, s, or an array resized to bits mod (2·len+2)
	editElement        // array element bits>>32 mod len set from uint32(bits) (or s)
	edits
)

// fuzzScalar converts the fuzzer's bits, or s for strings, to a value of
// type t (an array type gives a string).
func fuzzScalar(t ggufwrite.ValueType, bits uint64, s string) (ggufwrite.ValueType, any) {
	switch t {
	case ggufwrite.ValueUint8:
		return t, uint8(bits)
	case ggufwrite.ValueInt8:
		return t, int8(bits)
	case ggufwrite.ValueUint16:
		return t, uint16(bits)
	case ggufwrite.ValueInt16:
		return t, int16(bits)
	case ggufwrite.ValueUint32:
		return t, uint32(bits)
	case ggufwrite.ValueInt32:
		return t, int32(bits)
	case ggufwrite.ValueFloat32:
		return t, math.Float32frombits(uint32(bits))
	case ggufwrite.ValueBool:
		return t, bits&1 == 1
	case ggufwrite.ValueUint64:
		return t, bits
	case ggufwrite.ValueInt64:
		return t, int64(bits)
	case ggufwrite.ValueFloat64:
		return t, math.Float64frombits(bits)
	}
	return ggufwrite.ValueString, s
}

// fuzzEdit applies one edit to the pair named key of kvs (or, if there is
// none, adds it as a scalar), returning new pairs; kvs is not modified.
func fuzzEdit(kvs []ggufwrite.KV, key string, op, typ uint8, bits uint64, s string) []ggufwrite.KV {
	out := slices.Clone(kvs)
	i := slices.IndexFunc(out, func(p ggufwrite.KV) bool { return p.Key == key })
	if i < 0 {
		t, x := fuzzScalar(ggufwrite.ValueType(typ%13), bits, s)
		return append(out, ggufwrite.KV{Key: key, Type: t, Val: x})
	}
	p := &out[i]
	switch op % edits {
	case editSet:
		p.Type, p.Val = fuzzScalar(ggufwrite.ValueType(typ%13), bits, s)
	case editDelete:
		return slices.Delete(out, i, i+1)
	case editValue:
		if p.Type != ggufwrite.ValueArray {
			p.Type, p.Val = fuzzScalar(p.Type, bits, s)
			break
		}
		a := p.Val.(ggufwrite.Array)
		n := int(bits % uint64(2*len(a.Items)+2))
		items := make([]any, n)
		for j := range items {
			if len(a.Items) == 0 {
				_, items[j] = fuzzScalar(a.Elem, bits, s)
				if a.Elem == ggufwrite.ValueArray {
					items[j] = ggufwrite.Array{Elem: ggufwrite.ValueUint8}
				}
			} else {
				items[j] = a.Items[j%len(a.Items)]
			}
		}
		p.Val = ggufwrite.Array{Elem: a.Elem, Items: items}
	case editElement:
		a, ok := p.Val.(ggufwrite.Array)
		if !ok || len(a.Items) == 0 || a.Elem == ggufwrite.ValueArray {
			break
		}
		items := slices.Clone(a.Items)
		_, items[(bits>>32)%uint64(len(items))] = fuzzScalar(a.Elem, uint64(uint32(bits)), s)
		p.Val = ggufwrite.Array{Elem: a.Elem, Items: items}
	}
	return out
}

// fuzzKeys are the keys that FuzzModel edits: the model's own and the
// optional ones that the config, the RoPE settings and the tokenizer read.
func fuzzKeys(kvs []ggufwrite.KV, arch string) []string {
	keys := []string{"general.alignment", "tokenizer.ggml.add_space_prefix", "tokenizer.ggml.scores",
		"tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
		"tokenizer.ggml.unknown_token_id"}
	for _, k := range []string{"vocab_size", "attention.key_length", "attention.head_count_kv", "rope.dimension_count",
		"rope.freq_base", "rope.scaling.type", "rope.scaling.factor", "rope.scale_linear"} {
		keys = append(keys, arch+"."+k)
	}
	for _, p := range kvs {
		keys = append(keys, p.Key)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// FuzzModel edits one metadata pair of a valid model (stories260K when the
// shared copy is there, else one written here): key names the pair (one of
// fuzzKeys, or else the one its hash picks, so that mutated names still
// hit keys that matter; a key the model lacks is added), op picks the edit
// (set a scalar of type typ, delete, change the value or an array's
// length, change an array element) and bits and s give the new value. The
// edited file is read, loaded, and run for two tokens and a short
// generation; nothing may panic, and the memory allocated must stay within
// a small multiple of the file's size whatever sizes the metadata claims.
func FuzzModel(f *testing.F) {
	data := baseModel(f)
	file, err := gguf.Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		f.Fatal(err)
	}
	base, err := splitFile(file)
	if err != nil {
		f.Fatal(err)
	}
	arch, _ := file.String("general.architecture")
	keys := fuzzKeys(base.KVs, arch)
	// Every key, edited every way.
	for _, key := range keys {
		for op := range uint8(edits) {
			f.Add(key, op, uint8(ggufwrite.ValueUint64), uint64(1)<<30, "x")
		}
	}
	// Sizes far beyond the file: 2^30 blocks, a context of 2^29 positions.
	f.Add(arch+".block_count", uint8(editValue), uint8(0), uint64(1)<<30, "")
	f.Add(arch+".context_length", uint8(editValue), uint8(0), uint64(1)<<29, "")
	f.Fuzz(func(t *testing.T, key string, op, typ uint8, bits uint64, s string) {
		if _, ok := slices.BinarySearch(keys, key); !ok {
			h := fnv.New32a()
			h.Write([]byte(key))
			key = keys[h.Sum32()%uint32(len(keys))]
		}
		b := base
		b.KVs = fuzzEdit(base.KVs, key, op, typ, bits, s)
		data := b.Bytes()
		var err error
		mem := allocated(func() {
			var f *gguf.File
			if f, err = gguf.Read(bytes.NewReader(data), int64(len(data))); err != nil {
				return
			}
			var m *Model
			if m, err = Load(f); err != nil {
				return
			}
			var sess *Session
			if sess, err = m.NewSession(SessionOptions{Threads: 1}); err != nil {
				return
			}
			if _, err = sess.Forward([]int{1 % m.Config.VocabSize, 2 % m.Config.VocabSize}); err != nil {
				return
			}
			if m.Tokenizer != nil {
				_, err = sess.Generate(context.Background(), "Once upon", 2, Sampler{}, nil)
			}
		})
		if mem > hostileBound(len(data)) {
			t.Fatalf("%s edited (op %d): a %d-byte file allocated %d bytes (%v)", key, op%edits, len(data), mem, err)
		}
	})
}

// fuzzTokenizers are the vocabularies of FuzzTokenizer: the tiny one with
// "▁" and a few merges, and stories260K's when it is there.
func fuzzTokenizers(tb testing.TB) []*Tokenizer {
	pieces := []string{"▁", "▁the", "▁cat", "▁sat", "at", "th", "he", "e", "a", "t", "é", "🙂"}
	scores := make([]float32, len(pieces))
	for i := range scores {
		scores[i] = float32(-i)
	}
	data := ggufwrite.File{KVs: tokenizerKVs(pieces, scores)}.Bytes()
	f, err := gguf.Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		tb.Fatal(err)
	}
	tiny, err := NewTokenizer(f)
	if err != nil {
		tb.Fatal(err)
	}
	toks := []*Tokenizer{tiny}
	if sf, err := gguf.Open(storiesPath); err == nil {
		defer sf.Close()
		if st, err := NewTokenizer(sf); err == nil {
			toks = append(toks, st)
		}
	}
	return toks
}

// FuzzTokenizer encodes arbitrary text. The ids must lie in the
// vocabulary, start with BOS, match the quadratic reference encoder (on
// texts short enough for it), and decode back to the text when the text
// is valid UTF-8 without "▁" (see Tokenizer.Decode for why those two
// conditions). Decoding arbitrary ids, out-of-range ones included, must
// not panic.
func FuzzTokenizer(f *testing.F) {
	for _, s := range []string{"", " ", "  ", "a", "the cat sat", " leading", "trailing ", "héllo 🙂",
		"<s> </s> <unk> <0x41>", "\x00\xff\xe2\x28", "\xe2\x96", "▁", "a▁b", "\n\t\r"} {
		f.Add(s)
	}
	toks := fuzzTokenizers(f)
	f.Fuzz(func(t *testing.T, text string) {
		for _, tok := range toks {
			ids := tok.Encode(text, true)
			if len(ids) == 0 || ids[0] != tok.BOS() {
				t.Fatalf("Encode(%q) = %v: want BOS %d first", text, ids, tok.BOS())
			}
			for _, id := range ids {
				if id < 0 || id >= tok.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d outside [0, %d)", text, id, tok.VocabSize())
				}
			}
			if plain := tok.Encode(text, false); !slices.Equal(plain, ids[1:]) {
				t.Fatalf("Encode(%q, false) = %v, want Encode(%q, true)[1:] = %v", text, plain, text, ids[1:])
			}
			if len(text) <= 256 {
				if want := referenceEncode(tok, text); !slices.Equal(want, ids[1:]) {
					t.Fatalf("Encode(%q) = %v, the reference encoder %v", text, ids[1:], want)
				}
			}
			if utf8.ValidString(text) && !strings.Contains(text, spaceEscape) {
				if got := tok.Decode(ids); got != text {
					t.Fatalf("Decode(Encode(%q)) = %q (ids %v)", text, got, ids)
				}
			}
			// Ids from the text's bytes, some out of range.
			raw := make([]int, 0, len(text))
			for i := 0; i+1 < len(text); i += 2 {
				raw = append(raw, int(int8(text[i]))*int(text[i+1]))
			}
			_ = tok.Decode(raw)
		}
	})
}

// exercise builds a tokenizer and a config from a successfully read file
// and uses them. (Package gguf's FuzzGGUF calls the file's own accessors.)
func exercise(t *testing.T, f *gguf.File) {
	if tok, err := NewTokenizer(f); err == nil {
		for _, s := range []string{"", "a", "Once upon a time", " ab  ▁a\n é🙂\xff"} {
			ids := tok.Encode(s, true)
			for _, id := range ids {
				if id < 0 || id >= tok.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d outside [0, %d)", s, id, tok.VocabSize())
				}
			}
			_ = tok.Decode(ids)
		}
		_ = tok.Decode([]int{-1, 0, 1, 2, tok.VocabSize(), tok.BOS(), tok.EOS()})
		_ = tok.Token(0)
	}
	if c, err := ReadConfig(f); err == nil {
		if err := c.Validate(); err != nil {
			t.Fatalf("ReadConfig returned a config that fails Validate: %v", err)
		}
	}
}
