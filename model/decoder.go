package model

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/kernel"
	"github.com/flashgo/flashgo/model/gguf"
)

// Errors of the decoder, returned wrapped; test with errors.Is.
var (
	// ErrContextOverflow reports tokens that do not fit in what is left of
	// a Session's KV cache.
	ErrContextOverflow = errors.New("context overflow")
	// ErrBadToken reports a token id outside the vocabulary.
	ErrBadToken = errors.New("token id out of range")
)

// LoadOptions adjusts how [LoadWith] reads a model.
type LoadOptions struct {
	// RoPE overrides the rotary embedding mode. RopeAuto (the zero value)
	// takes the mode llama.cpp uses for the file's architecture; an
	// architecture the decoder does not know is then an error wrapping
	// [gguf.ErrUnsupported]. Setting a mode lets a file of another Llama-like
	// architecture (the same tensors) load.
	RoPE RopeMode
}

// Model is a Llama-family decoder-only transformer held in memory as
// float32: token embedding, blocks of pre-norm attention (RMSNorm, RoPE,
// grouped-query attention through flashgo's engine) and SwiGLU feed-forward
// networks, a final RMSNorm and the output projection. It is immutable once
// loaded and safe for concurrent use by many [Session]s.
//
// Every weight matrix is stored transposed, [in][out], once at load: the
// projection of a block of rows X[rows × in] is then Y = X·Wᵀ, which is
// exactly [kernel.MatMul] with the transposed weight as its B (kernel.PackKT), so
// every projection runs on the SIMD tile kernel.
type Model struct {
	// Config holds the hyperparameters read from the file.
	Config Config
	// RoPE is the rotary embedding mode in use.
	RoPE RopeMode
	// Tokenizer is the file's tokenizer, or nil if the file has none that
	// [NewTokenizer] reads (tokenizer.ggml.model other than "llama").
	Tokenizer *Tokenizer

	embd    []float32 // token_embd.weight, [vocab][dim]
	blocks  []block
	outNorm []float32
	output  matrix // [dim][vocab]: output.weight, or token_embd.weight when tied
	rope    ropeParams
}

// matrix is a weight stored transposed: w[i*out+o] = W[o][i] for the map
// y = W·x from in to out values.
type matrix struct {
	in, out int
	w       []float32
}

// block is one transformer layer. The Q, K and V projections are one
// matrix side by side, and so are the gate and up projections, so that each
// pair or triple is one GEMM.
type block struct {
	attnNorm, ffnNorm []float32
	qkv               matrix    // [dim][Hq·d + 2·Hkv·d]
	qkvBias           []float32 // bq | bk | bv, or nil
	wo                matrix    // [Hq·d][dim]
	gateUp            matrix    // [dim][2·ff]: gate | up
	down              matrix    // [ff][dim]
}

// tensorsPerBlock is the number of tensors every transformer block has:
// two norms, four attention projections and three feed-forward ones.
const tensorsPerBlock = 9

// Load reads the model in f with the default [LoadOptions]. See [LoadWith].
func Load(f *gguf.File) (*Model, error) {
	return LoadWith(f, LoadOptions{})
}

// LoadWith reads the hyperparameters ([ReadConfig]), the tokenizer when
// the file has a llama one, and every weight of a Llama-family model from f,
// dequantising F32, F16, BF16 and Q8_0 tensors to float32 (other types give
// an error wrapping [gguf.ErrUnsupported]). The tensors are token_embd.weight,
// output_norm.weight, output.weight (when absent, the output projection is
// tied to the embedding), and for each block blk.N.attn_norm,
// attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up and
// ffn_down (.weight), with optional attn_q, attn_k and attn_v .bias.
// rope_freqs.weight (Llama 3.1's frequency factors) and linear RoPE scaling
// (<arch>.rope.scaling.type "linear" with rope.scaling.factor) are honoured;
// other RoPE scalings are unsupported. A missing tensor gives an error
// wrapping [gguf.ErrNotFound], a tensor of the wrong shape one wrapping
// [gguf.ErrFormat].
func LoadWith(f *gguf.File, opts LoadOptions) (*Model, error) {
	if f == nil {
		return nil, errors.New("model: Load: nil *gguf.File; want a file from gguf.Open or gguf.Read")
	}
	c, err := ReadConfig(f)
	if err != nil {
		return nil, err
	}
	mode, err := resolveRopeMode(opts.RoPE, c.Architecture)
	if err != nil {
		return nil, err
	}
	m := &Model{Config: c, RoPE: mode}
	if m.rope, err = readRope(f, c, mode); err != nil {
		return nil, err
	}
	if m.Tokenizer, err = loadTokenizer(f, c); err != nil {
		return nil, err
	}
	sz, err := weightSizesOf(c)
	if err != nil {
		return nil, err
	}
	if err := m.loadEmbeddingAndOutput(f, sz); err != nil {
		return nil, err
	}
	if err := m.loadBlocks(f, sz); err != nil {
		return nil, err
	}
	return m, nil
}

// resolveRopeMode is the RoPE mode that LoadOptions.RoPE asks for: mode
// itself, or for RopeAuto the one llama.cpp uses for the architecture.
func resolveRopeMode(mode RopeMode, arch string) (RopeMode, error) {
	switch {
	case mode > RopeNone:
		return mode, fmt.Errorf("model: LoadOptions.RoPE is %v; want one of auto, normal, neox, none", mode)
	case mode == RopeAuto:
		auto, ok := archRopeModes[arch]
		if !ok {
			return mode, fmt.Errorf("model: architecture %q: %w: the decoder knows %s (set LoadOptions.RoPE to load another Llama-like architecture)",
				arch, gguf.ErrUnsupported, knownArchitectures())
		}
		return auto, nil
	}
	return mode, nil
}

// loadTokenizer builds the file's tokenizer, which must have the model's
// vocabulary size. A file without one, or with one of a kind other than
// "llama" that NewTokenizer cannot build, gives nil and no error: the model
// then runs on token ids.
func loadTokenizer(f *gguf.File, c Config) (*Tokenizer, error) {
	if !f.Has("tokenizer.ggml.model") {
		return nil, nil
	}
	kind, _ := f.String("tokenizer.ggml.model")
	tok, err := NewTokenizer(f)
	switch {
	case err == nil:
		if tok.VocabSize() != c.VocabSize {
			return nil, fmt.Errorf("model: %w: the tokenizer has %d tokens, the model %d", gguf.ErrFormat, tok.VocabSize(), c.VocabSize)
		}
		return tok, nil
	case kind == "llama":
		return nil, err
	}
	return nil, nil
}

// weightSizes are the widths of a model's weights, from its Config.
type weightSizes struct {
	dim, vocab, ff int
	qDim, kvDim    int // Hq·d and Hkv·d
	qkvOut         int // qDim + 2·kvDim: the fused Q, K and V projection
	ff2            int // 2·ff: the fused gate and up projection
}

// weightSizesOf computes the weight widths of c, and checks that they and
// the sizes of the largest matrices (dim × qkvOut, dim × ff2, dim × vocab)
// fit an int, so that the loader can allocate them once the tensors'
// shapes have been checked.
func weightSizesOf(c Config) (weightSizes, error) {
	s := weightSizes{dim: c.EmbeddingLength, vocab: c.VocabSize, ff: c.FeedForwardLength}
	overflow := false
	mul := func(a, b int) int {
		p, ok := mulInts(a, b)
		overflow = overflow || !ok
		return p
	}
	s.qDim = mul(c.HeadCount, c.HeadDim)
	s.kvDim = mul(c.HeadCountKV, c.HeadDim)
	s.qkvOut = mul(2, s.kvDim) + s.qDim
	s.ff2 = mul(2, s.ff)
	mul(s.dim, s.qkvOut)
	mul(s.dim, s.ff2)
	mul(s.dim, s.vocab)
	if overflow || s.qkvOut < s.qDim {
		return weightSizes{}, fmt.Errorf("model: %w: the weight sizes of the config overflow an int", gguf.ErrFormat)
	}
	return s, nil
}

// loadEmbeddingAndOutput reads the token embedding, the final norm and the
// output projection, which is the embedding's transpose when the file has
// no output.weight (tied embeddings).
func (m *Model) loadEmbeddingAndOutput(f *gguf.File, sz weightSizes) error {
	dim, vocab := sz.dim, sz.vocab
	var err error
	if m.embd, err = readTensor(f, "token_embd.weight", dim, vocab); err != nil {
		return err
	}
	if m.outNorm, err = readTensor(f, "output_norm.weight", dim); err != nil {
		return err
	}
	_, untied := f.Tensor("output.weight")
	if untied {
		if err := checkShape(f, "output.weight", dim, vocab); err != nil {
			return err
		}
	}
	m.output = matrix{in: dim, out: vocab, w: make([]float32, dim*vocab)}
	if untied {
		return readTransposed(f, m.output, 0, "output.weight", vocab)
	}
	return transposeInto(m.output.w, vocab, 0, m.embd, dim, vocab)
}

// loadBlocks reads every transformer block. Every size here is checked
// against a tensor of the file before it is allocated; the block count is
// checked against the tensor count, so that the blocks' table is no larger
// than the file's directory.
func (m *Model) loadBlocks(f *gguf.File, sz weightSizes) error {
	c := m.Config
	if c.BlockCount > f.NumTensors()/tensorsPerBlock {
		return fmt.Errorf("model: %w: %s.block_count is %d, but the file's %d tensors make at most %d blocks of %d tensors",
			gguf.ErrFormat, c.Architecture, c.BlockCount, f.NumTensors(), f.NumTensors()/tensorsPerBlock, tensorsPerBlock)
	}
	m.blocks = make([]block, c.BlockCount)
	for l := range m.blocks {
		if err := loadBlock(f, &m.blocks[l], l, sz); err != nil {
			return err
		}
	}
	return nil
}

// loadBlock reads block l's norms, projections and optional Q, K and V
// biases into b.
func loadBlock(f *gguf.File, b *block, l int, sz weightSizes) error {
	dim, ff, qDim, kvDim := sz.dim, sz.ff, sz.qDim, sz.kvDim
	name := func(s string) string { return fmt.Sprintf("blk.%d.%s", l, s) }
	var err error
	if b.attnNorm, err = readTensor(f, name("attn_norm.weight"), dim); err != nil {
		return err
	}
	if b.ffnNorm, err = readTensor(f, name("ffn_norm.weight"), dim); err != nil {
		return err
	}
	// Every weight's shape is checked against the config before any
	// buffer is sized from it: the tensors' data lies within the file,
	// so a config that claims huge sizes fails here, not in make.
	projections := []struct {
		m      *matrix
		col0   int
		tensor string
		in     int
		out    int
	}{
		{&b.qkv, 0, "attn_q.weight", dim, qDim},
		{&b.qkv, qDim, "attn_k.weight", dim, kvDim},
		{&b.qkv, qDim + kvDim, "attn_v.weight", dim, kvDim},
		{&b.wo, 0, "attn_output.weight", qDim, dim},
		{&b.gateUp, 0, "ffn_gate.weight", dim, ff},
		{&b.gateUp, ff, "ffn_up.weight", dim, ff},
		{&b.down, 0, "ffn_down.weight", ff, dim},
	}
	for _, p := range projections {
		if err := checkShape(f, name(p.tensor), p.in, p.out); err != nil {
			return err
		}
	}
	b.qkv = matrix{in: dim, out: sz.qkvOut, w: make([]float32, dim*sz.qkvOut)}
	b.wo = matrix{in: qDim, out: dim, w: make([]float32, qDim*dim)}
	b.gateUp = matrix{in: dim, out: sz.ff2, w: make([]float32, dim*sz.ff2)}
	b.down = matrix{in: ff, out: dim, w: make([]float32, ff*dim)}
	for _, p := range projections {
		if err := readTransposed(f, *p.m, p.col0, name(p.tensor), p.out); err != nil {
			return err
		}
	}
	b.qkvBias, err = readBiases(f, name, qDim, kvDim)
	return err
}

func knownArchitectures() string {
	names := make([]string, 0, len(archRopeModes))
	for a := range archRopeModes {
		names = append(names, fmt.Sprintf("%q", a))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// readRope collects the RoPE parameters: the dimension count and base of
// the Config, the linear scaling factor and rope_freqs.weight.
func readRope(f *gguf.File, c Config, mode RopeMode) (ropeParams, error) {
	r := ropeParams{mode: mode, dims: c.RopeDimensionCount, base: float64(c.RopeFreqBase), scale: 1}
	if mode == RopeNone {
		return ropeParams{mode: RopeNone}, nil
	}
	p := c.Architecture + ".rope.scaling."
	kind := "none"
	if f.Has(p + "type") {
		var err error
		if kind, err = f.String(p + "type"); err != nil {
			return r, ggufError(err)
		}
	}
	factor := float32(1)
	switch {
	case f.Has(p + "factor"):
		v, err := f.Float32(p + "factor")
		if err != nil {
			return r, ggufError(err)
		}
		factor = v
	case f.Has(c.Architecture + ".rope.scale_linear"): // the older key
		v, err := f.Float32(c.Architecture + ".rope.scale_linear")
		if err != nil {
			return r, ggufError(err)
		}
		factor, kind = v, "linear"
	}
	switch kind {
	case "none", "":
	case "linear":
		if !(factor > 0) || math.IsInf(float64(factor), 0) {
			return r, fmt.Errorf("model: %w: rope scaling factor %g, want a positive finite number", gguf.ErrFormat, factor)
		}
		r.scale = 1 / float64(factor)
	default:
		return r, fmt.Errorf("model: rope scaling %q: %w", kind, gguf.ErrUnsupported)
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		v, err := readTensor(f, "rope_freqs.weight", r.dims/2)
		if err != nil {
			return r, err
		}
		for i, x := range v {
			if !(x > 0) || math.IsInf(float64(x), 0) {
				return r, fmt.Errorf("model: %w: rope_freqs.weight[%d] is %g, want a positive finite factor", gguf.ErrFormat, i, x)
			}
		}
		r.factors = v
	}
	return r, nil
}

// readTensor reads a tensor whose ggml shape must be dims (trailing
// dimensions of 1 aside), dequantised to float32.
func readTensor(f *gguf.File, name string, dims ...int) ([]float32, error) {
	if err := checkShape(f, name, dims...); err != nil {
		return nil, err
	}
	v, err := f.Float32s(name)
	if err != nil {
		return nil, ggufError(err)
	}
	return v, nil
}

// checkShape checks that the tensor name exists with the ggml shape dims
// (trailing dimensions of 1 aside), reading none of its data.
func checkShape(f *gguf.File, name string, dims ...int) error {
	t, ok := f.Tensor(name)
	if !ok {
		return fmt.Errorf("model: tensor %q: %w", name, gguf.ErrNotFound)
	}
	got := t.Dims
	for len(got) > len(dims) && got[len(got)-1] == 1 {
		got = got[:len(got)-1]
	}
	if !equalInts(got, dims) {
		return fmt.Errorf("model: tensor %q: %w: shape %v, want %v", name, gguf.ErrFormat, t.Dims, dims)
	}
	return nil
}

// mulInts returns a·b for non-negative a and b, and whether it fits an int.
func mulInts(a, b int) (int, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	if a == 0 || b == 0 {
		return 0, true
	}
	if a > math.MaxInt/b {
		return 0, false
	}
	return a * b, true
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// readTransposed reads the weight name, of ggml shape [m.in, out] (out rows
// of m.in values, W[o][i]), into columns col0 … col0+out−1 of m.
func readTransposed(f *gguf.File, m matrix, col0 int, name string, out int) error {
	w, err := readTensor(f, name, m.in, out)
	if err != nil {
		return err
	}
	return transposeInto(m.w, m.out, col0, w, m.in, out)
}

// transposeInto writes dst[i*ld+col0+o] = src[o*in+i] with the kernel
// package's transposing pack.
func transposeInto(dst []float32, ld, col0 int, src []float32, in, out int) error {
	if col0 < 0 || col0 > len(dst) {
		return fmt.Errorf("model: transpose: column %d outside a %d-element matrix", col0, len(dst))
	}
	if err := kernel.PackKT(dst[col0:], ld, src, in, out, in); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}

// readBiases reads the optional Q, K and V biases of a block (Qwen 2): all
// three or none.
func readBiases(f *gguf.File, name func(string) string, qDim, kvDim int) ([]float32, error) {
	names := []string{name("attn_q.bias"), name("attn_k.bias"), name("attn_v.bias")}
	have := 0
	for _, n := range names {
		if _, ok := f.Tensor(n); ok {
			have++
		}
	}
	if have == 0 {
		return nil, nil
	}
	bias := make([]float32, 0, qDim+2*kvDim)
	for i, n := range names {
		size := kvDim
		if i == 0 {
			size = qDim
		}
		v, err := readTensor(f, n, size)
		if err != nil {
			return nil, err
		}
		bias = append(bias, v...)
	}
	return bias, nil
}

// DefaultBatch is the most tokens a Session runs through the model in one
// pass when [SessionOptions].Batch is 0; a longer prompt is run in chunks of
// this many tokens.
const DefaultBatch = 512

// SessionOptions configures a [Session].
type SessionOptions struct {
	// MaxContext is the most positions the KV cache holds, 0 for the
	// model's context length; it may not exceed it. The cache is not
	// allocated up front: it grows as tokens arrive, doubling (from at
	// least 1 MiB in all) up to MaxContext, so that its memory follows the
	// positions in use rather than the context a file claims. It takes
	// 2·BlockCount·HeadCountKV·HeadDim·KVType.Size() bytes a position
	// (keys and values), plus for Q8 a float32 scale per attention.Q8Block
	// values (2.25 bytes a value in all).
	MaxContext int
	// Threads is the number of goroutines a forward pass may use for
	// attention and for the projections, 0 for runtime.GOMAXPROCS(0) at
	// the time of the call. The logits do not depend on it.
	Threads int
	// Batch is the most tokens one pass through the model takes, 0 for
	// DefaultBatch (or the context, if smaller). It bounds the scratch
	// memory, which grows with the longest pass run so far; longer inputs
	// are run in chunks, with the same result up to float32 rounding (a
	// chunk of a few rows runs the attention engine's decode kernels, a
	// long one its prefill kernels).
	Batch int
	// KVType is the element type in which the KV cache stores keys and
	// values: attention.F32, F16, BF16, Q8 or FP8E4M3; 0 (the zero value) means
	// F32. Keys (after RoPE) and values are computed in float32 and
	// rounded to this type as they are appended (see
	// attention.KVCache.Append), so F16 and BF16 halve the cache and Q8
	// (int8 with a float32 scale per attention.Q8Block values, which needs
	// a head dimension that is a multiple of attention.Q8Block) cuts it to
	// about 28%, at the price of that rounding in the logits. FP8E4M3
	// (8-bit floats with a scale per K/V head, as vLLM's fp8 caches) cuts
	// it to a quarter; its scales are calibrated, per block and head, from
	// the first pass's rows: the largest |x| of that head's keys (values)
	// over fp8Headroom, so that the first pass's largest value lands a
	// quarter of the way below E4M3's largest, 448, later values up to four
	// times larger still fit (larger ones saturate), and the 3 mantissa
	// bits cover the head's range. They stay fixed from then on, across
	// Reset and Truncate; a prompt run in chunks calibrates on its first
	// chunk. Projections,
	// queries and the attention arithmetic stay float32 (but see
	// Precision).
	KVType attention.DType
	// Precision is the arithmetic of attention's products Q·Kᵀ and P·V:
	// attention.PrecisionFloat32 (the zero value) or
	// attention.PrecisionBFloat16 (bfloat16 operands, float32
	// accumulation; see attention.Precision). The projections stay float32.
	Precision attention.Precision
}

// Session is one sequence being decoded: a KV cache, whose length is the
// position, and scratch memory. A Session is not safe for concurrent use;
// run one per goroutine (they may share the Model).
//
// Each block has its own [attention.KVCache] of HeadCountKV heads, room for
// up to MaxContext positions (grown as they arrive) and HeadDim components,
// stored as [SessionOptions].KVType. A forward pass appends the keys (after
// RoPE) and values of its tokens to each block's cache and calls the
// attention engine once per block with the queries of the new tokens and
// the cache's views K() and V() of its first pos+n positions, with
// Options{Causal: true}: the causal mask is aligned to the bottom right, so
// query i of n sees key j iff j <= pos + i, which makes a prefill of a
// whole prompt and the decoding of one token the same call.
type Session struct {
	m        *Model
	eng      *attention.Engine
	threads  int // 0: GOMAXPROCS at each call
	prec     attention.Precision
	capacity int // the most positions: MaxContext, or the model's context
	batch    int // the most rows of a pass
	minGrow  int // the fewest positions the caches grow to: 1 MiB of them
	rows     int // the rows the scratch holds, at most batch

	caches []*attention.KVCache // per block; all hold the same positions
	// calibrated: per block, whether an fp8 cache has its scales (set by
	// the first Append into it; see SessionOptions.KVType).
	calibrated []bool
	rope       rope // for the positions the caches have room for

	// Scratch, rows rows each.
	x   []float32 // residual stream [n][dim]
	h   []float32 // normed input or projection output [n][dim]
	qkv []float32 // [n][Hq·d + 2·Hkv·d]
	att []float32 // attention output [n][Hq·d]
	gu  []float32 // gate | up [n][2·ff]; the gate half becomes silu(gate)·up
	e   []float32 // [ff]: the exponentials of swiGLU

	logits []float32 // [vocab]: Generate's logits, reused at every step
}

// NewSession starts an empty Session: position 0, with room for
// opts.MaxContext positions of opts.KVType. It allocates no KV cache and
// no scratch: both grow as tokens arrive (see [SessionOptions]).
func (m *Model) NewSession(opts SessionOptions) (*Session, error) {
	if m == nil {
		return nil, errors.New("model: NewSession on a nil *Model; want one from Load")
	}
	c := m.Config
	kvType := opts.KVType
	if kvType == 0 {
		kvType = attention.F32
	}
	switch {
	case opts.MaxContext < 0:
		return nil, fmt.Errorf("model: SessionOptions.MaxContext is %d; want >= 1, or 0 for the model's %d", opts.MaxContext, c.ContextLength)
	case opts.MaxContext > c.ContextLength:
		return nil, fmt.Errorf("model: SessionOptions.MaxContext is %d, more than the model's context length %d", opts.MaxContext, c.ContextLength)
	case opts.Threads < 0:
		return nil, fmt.Errorf("model: SessionOptions.Threads is %d; want >= 1, or 0 for GOMAXPROCS", opts.Threads)
	case opts.Batch < 0:
		return nil, fmt.Errorf("model: SessionOptions.Batch is %d; want >= 1, or 0 for %d", opts.Batch, DefaultBatch)
	case kvType != attention.F32 && kvType != attention.F16 && kvType != attention.BF16 && kvType != attention.Q8 && kvType != attention.FP8E4M3:
		return nil, fmt.Errorf("model: SessionOptions.KVType is %v; want attention.F32, F16, BF16, Q8 or FP8E4M3, or 0 for F32", kvType)
	case opts.Precision != attention.PrecisionFloat32 && opts.Precision != attention.PrecisionBFloat16:
		return nil, fmt.Errorf("model: SessionOptions.Precision is %v; want attention.PrecisionFloat32 or PrecisionBFloat16", opts.Precision)
	case kvType == attention.Q8 && c.HeadDim%attention.Q8Block != 0:
		return nil, fmt.Errorf("model: SessionOptions.KVType is q8, which needs a head dimension that is a multiple of %d; the model's head dimension is %d (use f32, f16 or bf16)",
			attention.Q8Block, c.HeadDim)
	}
	capacity := opts.MaxContext
	if capacity == 0 {
		capacity = c.ContextLength
	}
	batch := opts.Batch
	if batch == 0 {
		batch = DefaultBatch
	}
	batch = min(batch, capacity)
	eng, err := attention.NewEngine(attention.Config{Threads: opts.Threads})
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if err := sessionSize(c, capacity, batch, kvType); err != nil {
		if opts.MaxContext == 0 {
			return nil, fmt.Errorf("model: %w: %v", gguf.ErrFormat, err)
		}
		return nil, fmt.Errorf("model: %v", err)
	}
	s := &Session{m: m, eng: eng, threads: opts.Threads, prec: opts.Precision, capacity: capacity, batch: batch}
	// Bytes a position takes in all the caches (sessionSize checked that
	// this fits an int).
	perPosition := 2 * c.BlockCount * c.HeadCountKV * c.HeadDim * kvType.Size()
	s.minGrow = max(1, minCacheBytes/perPosition)
	s.caches = make([]*attention.KVCache, c.BlockCount)
	s.calibrated = make([]bool, c.BlockCount)
	for l := range s.caches {
		if s.caches[l], err = attention.NewKVCache(kvType, c.HeadCountKV, 0, c.HeadDim); err != nil {
			return nil, fmt.Errorf("model: the %v KV cache of block %d (%d heads × head dimension %d): %w",
				kvType, l, c.HeadCountKV, c.HeadDim, err)
		}
	}
	s.rope = newRope(m.rope, 0)
	s.e = make([]float32, c.FeedForwardLength)
	return s, nil
}

// fp8Headroom is the quotient of a head's largest |x| in the first pass
// and its fp8 scale: E4M3's largest value, 448, over 4, so that values up
// to four times the first pass's largest are stored without saturating.
const fp8Headroom = 448.0 / 4

// newCacheLike returns an empty cache of old's type, heads, dim and fp8
// scales, with room for capacity positions.
func newCacheLike(old *attention.KVCache, capacity int) (*attention.KVCache, error) {
	if ks := old.K().FP8Scales(); ks != nil {
		return attention.NewKVCacheFP8(old.DType(), old.Heads(), capacity, old.Dim(), ks, old.V().FP8Scales())
	}
	return attention.NewKVCache(old.DType(), old.Heads(), capacity, old.Dim())
}

// calibrate gives block l's fp8 cache (empty) its per-head scales from the
// first rows appended to it, k and v: each head's largest |x| over
// fp8Headroom (1 for a head of zeros or of non-finite values).
func (s *Session) calibrate(l int, k, v *attention.Tensor) error {
	old := s.caches[l]
	hkv, d := old.Heads(), old.Dim()
	scales := make([]float32, 2*hkv)
	for i, t := range []*attention.Tensor{k, v} {
		x := t.Float32s()
		for h := range hkv {
			var amax float32
			for p := range t.Seq {
				for _, e := range x[t.Offset(0, h, p):][:d] {
					amax = max(amax, float32(math.Abs(float64(e))))
				}
			}
			sc := amax / fp8Headroom
			if !(sc > 0 && sc <= math.MaxFloat32) {
				sc = 1
			}
			scales[i*hkv+h] = sc
		}
	}
	c, err := attention.NewKVCacheFP8(attention.FP8E4M3, hkv, old.Cap(), d, scales[:hkv], scales[hkv:])
	if err != nil {
		return fmt.Errorf("model: block %d fp8 KV cache: %w", l, err)
	}
	s.caches[l], s.calibrated[l] = c, true
	return nil
}

// minCacheBytes is the least memory that a Session's KV caches grow to,
// together: small caches double in fewer steps, and a model whose
// positions are huge (a hostile file's) still starts with a few.
const minCacheBytes = 1 << 20

// reserve grows the KV caches and the RoPE table to room for at least
// positions positions (at most the capacity), doubling so that a sequence
// that grows a token at a time copies its cache a logarithmic number of
// times, and the scratch to at least rows rows (at most the batch).
func (s *Session) reserve(positions, rows int) error {
	if have := s.caches[0].Cap(); positions > have {
		grown := min(s.capacity, max(positions, 2*have, s.minGrow))
		for l, old := range s.caches {
			c, err := newCacheLike(old, grown)
			if err == nil && old.Len() > 0 {
				err = c.Append(old.K(), old.V())
			}
			if err != nil {
				return fmt.Errorf("model: growing the KV cache of block %d to %d positions: %w", l, grown, err)
			}
			s.caches[l] = c
		}
		s.rope.grow(s.m.rope, grown)
	}
	if rows > s.rows {
		c := s.m.Config
		s.rows = min(s.batch, max(rows, 2*s.rows))
		dim, qDim, kvDim := c.EmbeddingLength, c.HeadCount*c.HeadDim, c.HeadCountKV*c.HeadDim
		s.x = make([]float32, s.rows*dim)
		s.h = make([]float32, s.rows*dim)
		s.qkv = make([]float32, s.rows*(qDim+2*kvDim))
		s.att = make([]float32, s.rows*qDim)
		s.gu = make([]float32, s.rows*2*c.FeedForwardLength)
	}
	return nil
}

// maxSessionBytes bounds the memory a Session allocates (its KV cache,
// RoPE table and scratch): 1 TiB, far beyond any machine that runs this
// decoder, so that an absurd context length fails as an error rather than
// in make.
const maxSessionBytes = 1 << 40

// sessionSize checks that everything a Session of capacity positions, batch
// rows of scratch and a KV cache of kvType allocates fits an int and
// maxSessionBytes. The cache counts kvType.Size() bytes an element, and
// for Q8 a 4-byte scale per attention.Q8Block elements.
func sessionSize(c Config, capacity, batch int, kvType attention.DType) error {
	tooBig := fmt.Errorf("a session of %d positions is too large for the model's sizes", capacity)
	mul := func(xs ...int) (int, bool) {
		p := 1
		for _, x := range xs {
			var ok bool
			if p, ok = mulInts(p, x); !ok {
				return 0, false
			}
		}
		return p, true
	}
	cacheLen, ok := mul(c.HeadCountKV, capacity, c.HeadDim)
	if !ok {
		return tooBig
	}
	// Each part is a count of elements times their size in bytes.
	parts := [][]int{
		{2, c.BlockCount, cacheLen, kvType.Size()},
		{capacity, max(c.RopeDimensionCount, c.HeadDim), 4},
		{batch, 2, c.EmbeddingLength, 4},
		{batch, c.HeadCount, c.HeadDim, 2, 4},
		{batch, c.HeadCountKV, c.HeadDim, 2, 4},
		{batch, 2, c.FeedForwardLength, 4},
		{c.FeedForwardLength, 4},
		{c.VocabSize, 4},
	}
	if kvType == attention.Q8 {
		parts = append(parts, []int{2, c.BlockCount, cacheLen / attention.Q8Block, 4})
	}
	total := 0
	for _, part := range parts {
		n, ok := mul(part...)
		if !ok || n > maxSessionBytes-total {
			return tooBig
		}
		total += n
	}
	return nil
}

// Model returns the model s runs.
func (s *Session) Model() *Model { return s.m }

// Pos returns the number of tokens in the KV cache: the position the next
// token will take.
func (s *Session) Pos() int { return s.caches[0].Len() }

// Capacity returns the most positions the KV cache holds: MaxContext, or
// the model's context length. The cache grows to it as tokens arrive.
func (s *Session) Capacity() int { return s.capacity }

// KVType returns the element type of the KV cache (attention.F32 when
// [SessionOptions].KVType was 0).
func (s *Session) KVType() attention.DType { return s.caches[0].DType() }

// Reset empties s: the next token is at position 0. The cache is
// not cleared; positions at or after Pos are never read.
func (s *Session) Reset() { s.truncate(0) }

// Truncate drops every position from n on, in every block's cache, so that
// the next token takes position n (0 <= n <= Pos): a later Forward
// recomputes from there, as when a prompt shares a prefix with the one
// before.
func (s *Session) Truncate(n int) error {
	if pos := s.Pos(); n < 0 || n > pos {
		return fmt.Errorf("model: Truncate(%d) outside the %d cached positions; want 0 <= n <= %d", n, pos, pos)
	}
	s.truncate(n)
	return nil
}

// truncate cuts every block's cache to at most n positions. After a failed
// pass the blocks before the failure hold more positions than the others;
// this puts them all back at n.
func (s *Session) truncate(n int) {
	for _, c := range s.caches {
		if c.Len() > n {
			// Cannot fail: 0 <= n < Len.
			_ = c.Truncate(n)
		}
	}
}

// Forward runs tokens through the model at positions Pos … Pos+len−1,
// appends their keys and values to the cache, and returns the logits (one
// per vocabulary entry) that predict the token after the last one. A
// prompt is one call (prefill); decoding is one call per token. The slice
// is the caller's.
//
// Errors, after which s is as it was: no tokens, an id outside
// the vocabulary ([ErrBadToken]), more tokens than the cache has room for
// ([ErrContextOverflow]).
func (s *Session) Forward(tokens []int) ([]float32, error) {
	if err := s.check(tokens); err != nil {
		return nil, err
	}
	logits := make([]float32, s.m.Config.VocabSize)
	if err := s.forward(tokens, logits, false); err != nil {
		return nil, err
	}
	return logits, nil
}

// ForwardInto is Forward writing the logits to dst, which must hold at
// least the vocabulary size; it returns dst[:vocab] and allocates nothing
// for the logits, so a decode loop can reuse one buffer.
func (s *Session) ForwardInto(dst []float32, tokens []int) ([]float32, error) {
	vocab := s.m.Config.VocabSize
	if len(dst) < vocab {
		return nil, fmt.Errorf("model: ForwardInto: a buffer of %d logits for a vocabulary of %d", len(dst), vocab)
	}
	dst = dst[:vocab]
	if err := s.forward(tokens, dst, false); err != nil {
		return nil, err
	}
	return dst, nil
}

// ForwardAll is Forward returning the logits after every token: row i
// predicts the token after tokens[i].
func (s *Session) ForwardAll(tokens []int) ([][]float32, error) {
	if err := s.check(tokens); err != nil {
		return nil, err
	}
	vocab := s.m.Config.VocabSize
	flat := make([]float32, len(tokens)*vocab)
	if err := s.forward(tokens, flat, true); err != nil {
		return nil, err
	}
	rows := make([][]float32, len(tokens))
	for i := range rows {
		rows[i] = flat[i*vocab : (i+1)*vocab : (i+1)*vocab]
	}
	return rows, nil
}

// check returns the error of a Forward of tokens: none, an id outside the
// vocabulary, or more than the cache has room for.
func (s *Session) check(tokens []int) error {
	if len(tokens) == 0 {
		return errors.New("model: Forward of no tokens")
	}
	vocab := s.m.Config.VocabSize
	for i, id := range tokens {
		if id < 0 || id >= vocab {
			return fmt.Errorf("model: %w: token %d at index %d; want 0 <= id < %d, the vocabulary size", ErrBadToken, id, i, vocab)
		}
	}
	if pos := s.Pos(); len(tokens) > s.capacity-pos {
		return fmt.Errorf("model: %w: %d tokens at position %d of a %d-position cache; want at most %d", ErrContextOverflow, len(tokens), pos, s.capacity, s.capacity-pos)
	}
	return nil
}

// forward checks the tokens and runs them in chunks of at most s.batch,
// writing the last row's logits (all rows' with all) to logits.
func (s *Session) forward(tokens []int, logits []float32, all bool) error {
	if err := s.check(tokens); err != nil {
		return err
	}
	vocab := s.m.Config.VocabSize
	start := s.Pos()
	if err := s.reserve(start+len(tokens), min(s.batch, len(tokens))); err != nil {
		return err
	}
	for c0 := 0; c0 < len(tokens); c0 += s.batch {
		c1 := min(c0+s.batch, len(tokens))
		var dst []float32
		switch {
		case all:
			dst = logits[c0*vocab : c1*vocab]
		case c1 == len(tokens):
			dst = logits
		}
		if err := s.pass(tokens[c0:c1], dst, all); err != nil {
			s.truncate(start)
			return err
		}
	}
	return nil
}

// pass runs n <= batch tokens through every block and, if logits is not
// nil, the final norm and output projection of the last row (of every row
// with all).
func (s *Session) pass(tokens []int, logits []float32, all bool) error {
	m, c := s.m, s.m.Config
	n := len(tokens)
	dim, d, hq, hkv := c.EmbeddingLength, c.HeadDim, c.HeadCount, c.HeadCountKV
	qDim, kvDim := hq*d, hkv*d
	width := qDim + 2*kvDim
	ff := c.FeedForwardLength
	x, h := s.x[:n*dim], s.h[:n*dim]
	qkv, att, gu := s.qkv[:n*width], s.att[:n*qDim], s.gu[:n*2*ff]

	for t, id := range tokens {
		copy(x[t*dim:(t+1)*dim], m.embd[id*dim:(id+1)*dim])
	}
	pos := s.Pos()
	// The queries, new keys and new values are views of the rows of qkv:
	// head g of token t at t·width + g·d (+ qDim for K, + qDim + kvDim for
	// V). They are values built once per pass, so nothing is allocated.
	qLayout := attention.Layout{Batch: 1, Heads: hq, Seq: n, Dim: d, BatchStride: n * width, HeadStride: d, SeqStride: width}
	kvLayout := attention.Layout{Batch: 1, Heads: hkv, Seq: n, Dim: d, BatchStride: n * width, HeadStride: d, SeqStride: width}
	q := attention.F32Tensor(qkv, qLayout)
	kNew := attention.F32Tensor(qkv[qDim:], kvLayout)
	vNew := attention.F32Tensor(qkv[qDim+kvDim:], kvLayout)
	out := attention.F32Tensor(att, attention.BSHD(1, n, hq, d))
	for l := range m.blocks {
		b := &m.blocks[l]
		rmsNorm(h, x, b.attnNorm, n, dim, c.RMSNormEpsilon)
		if err := s.matmul(qkv, width, h, dim, &b.qkv, n); err != nil {
			return err
		}
		for t := range n {
			row := qkv[t*width : (t+1)*width]
			if b.qkvBias != nil {
				for i, v := range b.qkvBias {
					row[i] += v
				}
			}
			p := pos + t
			s.rope.apply(row[:qDim], hq, d, p)
			s.rope.apply(row[qDim:qDim+kvDim], hkv, d, p)
		}
		if s.caches[l].DType() == attention.FP8E4M3 && !s.calibrated[l] {
			if err := s.calibrate(l, &kNew, &vNew); err != nil {
				return err
			}
		}
		cache := s.caches[l]
		if err := cache.Append(kNew, vNew); err != nil {
			return fmt.Errorf("model: block %d KV cache: %w", l, err)
		}
		if err := s.eng.Forward(out, q, cache.K(), cache.V(), attention.Options{Causal: true, Precision: s.prec}); err != nil {
			return fmt.Errorf("model: block %d: %w", l, err)
		}
		if err := s.matmul(h, dim, att, qDim, &b.wo, n); err != nil {
			return err
		}
		addTo(x, h)

		rmsNorm(h, x, b.ffnNorm, n, dim, c.RMSNormEpsilon)
		if err := s.matmul(gu, 2*ff, h, dim, &b.gateUp, n); err != nil {
			return err
		}
		for t := range n {
			swiGLU(gu[t*2*ff:t*2*ff+ff], gu[t*2*ff+ff:(t+1)*2*ff], s.e)
		}
		// The down projection reads the gate halves in place: rows of ff
		// values, 2·ff apart.
		if err := s.matmul(h, dim, gu, 2*ff, &b.down, n); err != nil {
			return err
		}
		addTo(x, h)
	}

	if logits == nil {
		return nil
	}
	rows := 1
	if all {
		rows = n
	}
	first := n - rows
	rmsNorm(h[first*dim:], x[first*dim:], m.outNorm, rows, dim, c.RMSNormEpsilon)
	return s.matmul(logits, c.VocabSize, h[first*dim:], dim, &m.output, rows)
}

// parallelWork is the number of multiply-adds below which a projection runs
// on one goroutine: the fan-out costs a few microseconds.
const parallelWork = 1 << 18

// matmul computes y[r][o] = Σ_i x[r][i]·W[o][i] for rows r: one
// kernel.MatMul call, or one per goroutine over a slice of the output columns
// when the product is large enough and s may use more threads.
func (s *Session) matmul(y []float32, ldY int, x []float32, ldX int, w *matrix, rows int) error {
	threads := s.threads
	if threads == 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	work := rows * w.in * w.out
	if threads > 1 && work >= 2*parallelWork {
		threads = min(threads, work/parallelWork)
	} else {
		threads = 1
	}
	width := kernel.MatMulSlice(w.out, threads)
	if threads == 1 || width >= w.out {
		if err := kernel.MatMul(y, ldY, x, ldX, w.w, w.out, rows, w.out, w.in); err != nil {
			return fmt.Errorf("model: projection: %w", err)
		}
		return nil
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for c0 := 0; c0 < w.out; c0 += width {
		cols := min(width, w.out-c0)
		wg.Go(func() {
			if err := kernel.MatMul(y[c0:], ldY, x, ldX, w.w[c0:], w.out, rows, cols, w.in); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		return fmt.Errorf("model: projection: %w", first)
	}
	return nil
}

// rmsNorm writes dst[r] = x[r] / sqrt(mean(x[r]²) + eps) ⊙ w for each of
// the rows, accumulating the mean square in float64 as llama.cpp does.
func rmsNorm(dst, x, w []float32, rows, dim int, eps float32) {
	for r := range rows {
		xr, dr := x[r*dim:(r+1)*dim], dst[r*dim:(r+1)*dim]
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		scale := float32(1 / math.Sqrt(ss/float64(dim)+float64(eps)))
		for i, v := range xr {
			dr[i] = v * scale * w[i]
		}
	}
}

// swiGLU overwrites gate with silu(gate)·up, silu(g) = g·σ(g) = g/(1+e^−g).
// The exponentials are taken a row at a time with the vector kernel
// (kernel.Exp, within 2 ulp), in e (at least len(gate) long): it
// flushes e^−g to 0 for g > 87.3, where silu(g) = g, and to +Inf for
// g < −88.7, where g/(1+Inf) gives the limit 0.
func swiGLU(gate, up, e []float32) {
	e = e[:len(gate)]
	kernel.Scale(e, gate, -1)
	kernel.ExpSum(e, e, 0)
	for i, g := range gate {
		gate[i] = g / (1 + e[i]) * up[i]
	}
}

// addTo adds src to dst element by element.
func addTo(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}
