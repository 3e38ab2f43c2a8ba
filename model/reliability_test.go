package model

import (
	"bytes"
	"context"
	"math"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/model/gguf"
	"github.com/flashgo/flashgo/model/internal/ggufwrite"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNilArguments checks that the package's functions return an error for
// nil arguments instead of panicking.
func TestNilArguments(t *testing.T) {
	require.NotPanics(t, func() {
		_, err := Load(nil)
		assert.ErrorContains(t, err, "nil")
		_, err = LoadWith(nil, LoadOptions{})
		assert.ErrorContains(t, err, "nil")
		_, err = ReadConfig(nil)
		assert.ErrorContains(t, err, "nil")
		_, err = NewTokenizer(nil)
		assert.ErrorContains(t, err, "nil")
		var m *Model
		_, err = m.NewSession(SessionOptions{})
		assert.ErrorContains(t, err, "nil")
	})

	spec := tinySpec{dim: 32, ff: 64, layers: 1, heads: 4, kvHeads: 2, wtype: gguf.TypeF32, ctx: 16}
	m, err := Load(spec.file(t, 1))
	require.NoError(t, err)
	s := newSession(t, m, SessionOptions{})
	require.NotPanics(t, func() {
		//lint:ignore SA1012 a nil context is what the test is about
		_, err := s.Generate(nil, "the", 2, Sampler{}, nil)
		assert.ErrorContains(t, err, "nil")
	})
	_, err = s.Generate(context.Background(), "the", 2, Sampler{}, nil)
	assert.NoError(t, err)
}

// prefixWord matches a word that ends an error prefix, as in "model: ".
var prefixWord = regexp.MustCompile(`\b(\w+): `)

// repeatsPrefix reports whether msg has a prefix twice in a row, with at
// most one word between, as in "attention: attention:" or "model: block 0
// model:".
func repeatsPrefix(msg string) bool {
	m := prefixWord.FindAllStringSubmatchIndex(msg, -1)
	for i := 1; i < len(m); i++ {
		prev, cur := msg[m[i-1][2]:m[i-1][3]], msg[m[i][2]:m[i][3]]
		between := msg[m[i-1][1]:m[i][0]]
		if prev == cur && strings.Count(between, " ") <= 1 {
			return true
		}
	}
	return false
}

// assertPrefixedOnce checks that err names the package once, at its start
// (after a file name for Open), and repeats no other prefix.
func assertPrefixedOnce(t *testing.T, err error, what string) {
	t.Helper()
	if !assert.Error(t, err, what) {
		return
	}
	msg := err.Error()
	assert.Equal(t, 1, strings.Count(msg, "model:"), "%s: %q names the package more than once", what, msg)
	assert.True(t, strings.HasPrefix(msg, "model: "), "%s: %q does not start with the package", what, msg)
	assert.False(t, repeatsPrefix(msg), "%s: %q repeats a prefix", what, msg)
}

// TestErrorsNamePackageOnce collects the errors of every layer (config,
// tokenizer, loader, Session, sampler) and checks that none repeats
// "model:" (as in "model: model: context overflow"; package gguf's test
// of the same name covers the reader, metadata and tensors).
func TestErrorsNamePackageOnce(t *testing.T) {
	errs := map[string]error{}
	add := func(name string, err error) { errs[name] = err }

	// Config and tokenizer.
	add("ReadConfig nil", errOf(ReadConfig(nil)))
	add("ReadConfig no arch", errOf(readConfig(t, withoutKey(configKVs(), "general.architecture"))))
	add("ReadConfig string heads", errOf(readConfig(t, configKVs(ggufwrite.KV{Key: "llama.attention.head_count", Type: ggufwrite.ValueString, Val: "8"}))))
	add("ReadConfig zero vocab", errOf(readConfig(t, configKVs(ggufwrite.KV{Key: "llama.vocab_size", Type: ggufwrite.ValueUint32, Val: uint32(0)}))))
	base := tokenizerKVs([]string{"a"}, []float32{0})
	add("NewTokenizer nil", errOf(NewTokenizer(nil)))
	add("NewTokenizer no model", errOf(NewTokenizer(mustRead(t, ggufwrite.File{KVs: withoutKey(base, "tokenizer.ggml.model")}.Bytes()))))
	add("NewTokenizer gpt2", errOf(NewTokenizer(mustRead(t, ggufwrite.File{KVs: append(withoutKey(base, "tokenizer.ggml.model"),
		ggufwrite.KV{Key: "tokenizer.ggml.model", Type: ggufwrite.ValueString, Val: "gpt2"})}.Bytes()))))
	add("NewTokenizer int tokens", errOf(NewTokenizer(mustRead(t, ggufwrite.File{KVs: []ggufwrite.KV{{Key: "tokenizer.ggml.model", Type: ggufwrite.ValueString, Val: "llama"},
		{Key: "tokenizer.ggml.tokens", Type: ggufwrite.ValueArray, Val: ggufwrite.Array{Elem: ggufwrite.ValueInt32, Items: []any{int32(1)}}}}}.Bytes()))))

	// The loader.
	spec := tinySpec{dim: 32, ff: 64, layers: 1, heads: 4, kvHeads: 2, wtype: gguf.TypeF32, ctx: 16}
	add("Load nil", errOf(Load(nil)))
	for name, s := range map[string]tinySpec{
		"missing tensor": func(s tinySpec) tinySpec { s.dropTensor = "blk.0.ffn_up.weight"; return s }(spec),
		"wrong shape":    func(s tinySpec) tinySpec { s.badShape = "blk.0.attn_k.weight"; return s }(spec),
		"unknown arch":   func(s tinySpec) tinySpec { s.arch = "mamba"; return s }(spec),
		"yarn":           func(s tinySpec) tinySpec { s.scaling, s.scalingFactor = "yarn", 4; return s }(spec),
		"vocab disagrees": func(s tinySpec) tinySpec {
			s.extra = []ggufwrite.KV{{Key: "llama.vocab_size", Type: ggufwrite.ValueUint32, Val: uint32(300)}}
			return s
		}(spec),
		"string blocks": func(s tinySpec) tinySpec {
			s.extra = []ggufwrite.KV{{Key: "llama.block_count", Type: ggufwrite.ValueString, Val: "two"}}
			return s
		}(spec),
		"bad tokenizer": func(s tinySpec) tinySpec {
			s.extra = []ggufwrite.KV{{Key: "tokenizer.ggml.scores", Type: ggufwrite.ValueString, Val: "x"}}
			return s
		}(spec),
		"string rope type": func(s tinySpec) tinySpec {
			s.extra = []ggufwrite.KV{{Key: "llama.rope.scaling.type", Type: ggufwrite.ValueUint32, Val: uint32(1)}}
			return s
		}(spec),
	} {
		add("Load "+name, errOf(Load(s.file(t, 2))))
	}
	add("Load Q4_K", errOf(Load(mustRead(t, ggufwrite.File{KVs: append(configKVs(ggufwrite.KV{Key: "llama.embedding_length", Type: ggufwrite.ValueUint32, Val: uint32(256)}),
		ggufwrite.KV{Key: "llama.vocab_size", Type: ggufwrite.ValueUint32, Val: uint32(8)}), Tensors: []ggufwrite.Tensor{ggufwrite.RawTensor("token_embd.weight", ggufwrite.TypeQ4_K, 256, 8)}}.Bytes()))))

	// Sessions.
	m, err := Load(spec.file(t, 1))
	require.NoError(t, err)
	var nilModel *Model
	add("NewSession nil", errOf(nilModel.NewSession(SessionOptions{})))
	add("NewSession MaxContext", errOf(m.NewSession(SessionOptions{MaxContext: 17})))
	add("NewSession KVType", errOf(m.NewSession(SessionOptions{KVType: attention.Q8})))
	huge := spec
	huge.extra = []ggufwrite.KV{{Key: "llama.context_length", Type: ggufwrite.ValueUint64, Val: uint64(1 << 61)}}
	mh, err := Load(huge.file(t, 1))
	require.NoError(t, err)
	add("NewSession huge context", errOf(mh.NewSession(SessionOptions{})))
	s := newSession(t, m, SessionOptions{MaxContext: 4})
	add("Forward overflow", errOf(s.Forward(make([]int, 5))))
	add("Forward bad token", errOf(s.Forward([]int{-1})))
	add("Forward nothing", errOf(s.Forward(nil)))
	add("ForwardAll bad token", errOf(s.ForwardAll([]int{1 << 40})))
	add("ForwardInto short", errOf(s.ForwardInto(make([]float32, 3), []int{1})))
	errs["Truncate"] = s.Truncate(9)
	add("Generate overflow", errOf(s.Generate(context.Background(), "the cat sat on the mat", 3, Sampler{}, nil)))
	add("Generate n", errOf(s.Generate(context.Background(), "the", -1, Sampler{}, nil)))
	add("Generate sampler", errOf(s.Generate(context.Background(), "the", 1, Sampler{TopK: -1}, nil)))
	add("Sample NaN", errOf((&Sampler{}).Sample([]float32{float32(math.NaN())})))

	for name, err := range errs {
		assertPrefixedOnce(t, err, name)
	}
	// The sentinels still match through the rewording.
	assert.ErrorIs(t, errs["Forward overflow"], ErrContextOverflow)
	assert.ErrorIs(t, errs["Forward bad token"], ErrBadToken)
	assert.ErrorIs(t, errs["Load missing tensor"], gguf.ErrNotFound)
	assert.ErrorIs(t, errs["Load yarn"], gguf.ErrUnsupported)
}

// errOf returns the error of a two-result call.
func errOf[T any](_ T, err error) error { return err }

// allocated returns the bytes that f allocates (all goroutines', so the
// callers run nothing else meanwhile).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// baseModel is the model that the hostile-metadata tests and FuzzModel
// edit: stories260K when the shared copy is there, else a small model
// written here (with the tiny vocabulary, so it has a tokenizer too).
func baseModel(t testing.TB) []byte {
	t.Helper()
	if data, err := os.ReadFile(storiesPath); err == nil {
		return data
	}
	return tinySpec{dim: 32, ff: 64, layers: 2, heads: 4, kvHeads: 2, wtype: gguf.TypeF32, ctx: 128}.bytes(7)
}

// loadAndRun reads data, loads it and runs a default Session over two
// tokens, returning the first error and the bytes allocated.
func loadAndRun(data []byte, opts SessionOptions) (mem uint64, err error) {
	mem = allocated(func() {
		var f *gguf.File
		if f, err = gguf.Read(bytes.NewReader(data), int64(len(data))); err != nil {
			return
		}
		var m *Model
		if m, err = Load(f); err != nil {
			return
		}
		var s *Session
		if s, err = m.NewSession(opts); err != nil {
			return
		}
		_, err = s.Forward([]int{1, 2})
	})
	return mem, err
}

// hostileBound is what loading and running a file of n bytes may
// allocate: weights widened to float32 and transposed (twice the file's
// F32 bytes, 7.5 times its Q8_0 bytes), the Session's caches and scratch
// for a few tokens and a little more.
func hostileBound(n int) uint64 { return 16*uint64(n) + 8<<20 }

// TestHostileMetadata edits one metadata value of a valid model at a time
// to a size far beyond what the file holds: loading and starting a
// Session must give an error or work, allocating memory bounded by the
// file, never the size the metadata claims.
func TestHostileMetadata(t *testing.T) {
	base := baseModel(t)
	f := mustRead(t, base)
	arch, err := f.String("general.architecture")
	require.NoError(t, err)
	mem, err := loadAndRun(base, SessionOptions{})
	require.NoError(t, err)
	t.Logf("the base model (%d bytes) allocates %d bytes", len(base), mem)
	bound := hostileBound(len(base))

	for _, c := range []struct {
		key  string
		val  uint64
		want error // nil: loads and runs
	}{
		// 2^20 blocks took 232 MiB before the fix, 2^30 the whole machine.
		{"block_count", 1 << 20, gguf.ErrFormat},
		{"block_count", 1 << 30, gguf.ErrFormat},
		{"block_count", 1 << 62, gguf.ErrFormat},
		// A context of 2^18 took 340 MiB of KV cache up front, 2^29 64 GiB.
		{"context_length", 1 << 18, nil},
		{"context_length", 1 << 29, nil},
		{"context_length", 1 << 40, gguf.ErrFormat},
		{"embedding_length", 1 << 30, gguf.ErrFormat},
		{"feed_forward_length", 1 << 30, gguf.ErrFormat},
		{"attention.head_count", 1 << 30, gguf.ErrFormat},
		{"attention.head_count_kv", 1 << 30, gguf.ErrFormat},
		{"attention.key_length", 1 << 30, gguf.ErrFormat},
		{"rope.dimension_count", 1 << 30, gguf.ErrFormat},
		{"vocab_size", 1 << 30, gguf.ErrFormat},
	} {
		key := arch + "." + c.key
		data, err := rebuild(f, setKV(key, ggufwrite.ValueUint64, c.val))
		require.NoError(t, err)
		var mem uint64
		require.NotPanics(t, func() { mem, err = loadAndRun(data, SessionOptions{}) }, "%s = %d", key, c.val)
		require.Less(t, mem, bound, "%s = %d: %v", key, c.val, err)
		if c.want == nil {
			assert.NoError(t, err, "%s = %d", key, c.val)
		} else {
			assert.ErrorIs(t, err, c.want, "%s = %d", key, c.val)
		}
	}

	// An explicit MaxContext as large as the claimed context is allocated
	// as the positions arrive, not up front.
	data, err := rebuild(f, setKV(arch+".context_length", ggufwrite.ValueUint64, uint64(1<<29)))
	require.NoError(t, err)
	mem, err = loadAndRun(data, SessionOptions{MaxContext: 1 << 29})
	assert.NoError(t, err)
	assert.Less(t, mem, bound)
}

// TestHostileShapes loads valid models whose every weight is in the file
// but whose scratch rows or cache positions are huge next to the
// embedding width: a Session allocates for the tokens it runs, not for a
// whole batch or context up front.
func TestHostileShapes(t *testing.T) {
	for name, spec := range map[string]tinySpec{
		// 512 rows of a 2^16-wide feed-forward scratch took 256 MiB.
		"wide feed-forward": {dim: 2, ff: 1 << 16, layers: 1, heads: 1, kvHeads: 1, wtype: gguf.TypeF32, ctx: 512},
		// 4096 positions of 2^14-wide keys and values took 512 MiB.
		"wide heads": {dim: 2, ff: 2, layers: 1, heads: 1, kvHeads: 1, headDim: 1 << 14, ropeDims: 2, wtype: gguf.TypeF32, ctx: 4096},
	} {
		data := spec.bytes(3)
		var mem uint64
		var err error
		require.NotPanics(t, func() { mem, err = loadAndRun(data, SessionOptions{}) }, name)
		assert.NoError(t, err, name)
		assert.Less(t, mem, hostileBound(len(data)), "%s: %d bytes for a %d-byte file", name, mem, len(data))
	}
}

// TestSessionGrowth decodes a sequence a token at a time through a cache
// that grows (and is copied) several times on the way, with several cache
// types, and compares each position's logits with those of a Session whose
// cache was sized for the whole context before the first token (the same
// bits) and with one prefill of the whole sequence.
func TestSessionGrowth(t *testing.T) {
	// A position takes 2 blocks × 2 KV heads × 2048 × 2 (K and V) × 4
	// bytes = 64 KiB as F32, so the caches start at 16 positions and
	// double to 32, 64 and 128 (from 32 as F16, from 64 as Q8).
	spec := tinySpec{dim: 32, ff: 64, layers: 2, heads: 4, kvHeads: 2, headDim: 2048, wtype: gguf.TypeF32, ctx: 128}
	m, err := Load(spec.file(t, 5))
	require.NoError(t, err)
	ids := make([]int, 70)
	for i := range ids {
		ids[i] = (i*37 + 11) % m.Config.VocabSize
	}
	for _, typ := range []attention.DType{attention.F32, attention.F16, attention.Q8} {
		prefill, err := newSession(t, m, SessionOptions{KVType: typ}).ForwardAll(ids)
		require.NoError(t, err)

		sized := newSession(t, m, SessionOptions{KVType: typ})
		require.NoError(t, sized.reserve(128, 1))
		s := newSession(t, m, SessionOptions{KVType: typ})
		assert.Equal(t, 128, s.Capacity())
		assert.Zero(t, s.caches[0].Cap(), "%v: nothing allocated before the first token", typ)
		var caps []int
		for i, id := range ids {
			logits, err := s.Forward([]int{id})
			require.NoError(t, err)
			want, err := sized.Forward([]int{id})
			require.NoError(t, err)
			require.Equal(t, want, logits, "%v: position %d", typ, i)
			if typ == attention.F32 { // the others round K and V differently in a prefill
				require.LessOrEqual(t, maxAbsDiff(t, logits, prefill[i]), 1e-4, "%v: position %d", typ, i)
			}
			if c := s.caches[0].Cap(); len(caps) == 0 || caps[len(caps)-1] != c {
				caps = append(caps, c)
			}
		}
		want := map[attention.DType][]int{attention.F32: {16, 32, 64, 128}, attention.F16: {32, 64, 128}, attention.Q8: {64, 128}}[typ]
		assert.Equal(t, want, caps, "%v: the cache doubles from 1 MiB up to the capacity", typ)

		// Back to position 5 and forward again over a grown cache.
		require.NoError(t, s.Truncate(5))
		require.NoError(t, sized.Truncate(5))
		rows, err := s.ForwardAll(ids[5:9])
		require.NoError(t, err)
		wantRows, err := sized.ForwardAll(ids[5:9])
		require.NoError(t, err)
		assert.Equal(t, wantRows, rows, "%v: after Truncate", typ)
		_, err = s.Forward(make([]int, 128-9+1))
		assert.ErrorIs(t, err, ErrContextOverflow, "the capacity still bounds the growth")
	}
}
