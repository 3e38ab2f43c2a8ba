package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/model/gguf"
	"github.com/flashgo/flashgo/model/internal/ggufwrite"
)

// This file holds what the decoder tests compare against: a float64 forward
// pass written independently of decoder.go (its own loops for RMSNorm,
// RoPE, attention and the feed-forward network, reading the weights as the
// file stores them, untransposed), and a writer of small Llama models with
// random weights.

// refOptions are the settings of the reference pass that the file does not
// carry in a form the reference reads itself.
type refOptions struct {
	rope         RopeMode
	linearFactor float64 // RoPE linear scaling factor; 0 is none
	// kvType, when not 0 or F32, rounds every head's key (after RoPE) and
	// value to that type and back, as a KV cache of that type stores them
	// (via float32, as the decoder computes them).
	kvType attention.DType
}

// roundKV rounds one head's row of keys or values as a cache of type typ
// stores it: to float32, then to fp16, bfloat16 or Q8 (attention.QuantizeQ8)
// and back. F32 and 0 leave the row as it is.
func roundKV(row []float64, typ attention.DType) {
	f := make([]float32, len(row))
	for i, v := range row {
		f[i] = float32(v)
	}
	switch typ {
	case 0, attention.F32:
		return
	case attention.F16:
		for i, v := range f {
			f[i] = fp16.FromFloat32(v).Float32()
		}
	case attention.BF16:
		for i, v := range f {
			f[i] = fp16.BFloat16FromFloat32(v).Float32()
		}
	case attention.Q8:
		q := make([]int8, len(f))
		scales := make([]float32, len(f)/attention.Q8Block)
		if err := attention.QuantizeQ8(q, scales, f); err != nil {
			panic(fmt.Sprintf("roundKV: %v", err))
		}
		for i, x := range q {
			f[i] = float32(x) * scales[i/attention.Q8Block]
		}
	default:
		panic(fmt.Sprintf("roundKV: type %v", typ))
	}
	for i, v := range f {
		row[i] = float64(v)
	}
}

// refModel is a model's weights in float64, as stored: matrices W[out][in].
type refModel struct {
	c                      Config
	embd, outNorm, output  []float64
	ropeFactors            []float64
	attnNorm, ffnNorm      [][]float64
	wq, wk, wv, wo         [][]float64
	gate, up, down         [][]float64
	bq, bk, bv             [][]float64
	opts                   refOptions
	qDim, kvDim, ff, vocab int
}

func float64s(t *testing.T, f *gguf.File, name string) []float64 {
	t.Helper()
	v, err := f.Float32s(name)
	require.NoError(t, err, name)
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func loadRef(t *testing.T, f *gguf.File, opts refOptions) *refModel {
	t.Helper()
	c, err := ReadConfig(f)
	require.NoError(t, err)
	r := &refModel{c: c, opts: opts, qDim: c.HeadCount * c.HeadDim, kvDim: c.HeadCountKV * c.HeadDim,
		ff: c.FeedForwardLength, vocab: c.VocabSize}
	r.embd = float64s(t, f, "token_embd.weight")
	r.outNorm = float64s(t, f, "output_norm.weight")
	if _, ok := f.Tensor("output.weight"); ok {
		r.output = float64s(t, f, "output.weight")
	} else {
		r.output = r.embd
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		r.ropeFactors = float64s(t, f, "rope_freqs.weight")
	}
	get := func(l int, s string) []float64 { return float64s(t, f, fmt.Sprintf("blk.%d.%s", l, s)) }
	for l := range c.BlockCount {
		r.attnNorm = append(r.attnNorm, get(l, "attn_norm.weight"))
		r.ffnNorm = append(r.ffnNorm, get(l, "ffn_norm.weight"))
		r.wq = append(r.wq, get(l, "attn_q.weight"))
		r.wk = append(r.wk, get(l, "attn_k.weight"))
		r.wv = append(r.wv, get(l, "attn_v.weight"))
		r.wo = append(r.wo, get(l, "attn_output.weight"))
		r.gate = append(r.gate, get(l, "ffn_gate.weight"))
		r.up = append(r.up, get(l, "ffn_up.weight"))
		r.down = append(r.down, get(l, "ffn_down.weight"))
		if _, ok := f.Tensor(fmt.Sprintf("blk.%d.attn_q.bias", l)); ok {
			r.bq = append(r.bq, get(l, "attn_q.bias"))
			r.bk = append(r.bk, get(l, "attn_k.bias"))
			r.bv = append(r.bv, get(l, "attn_v.bias"))
		}
	}
	return r
}

// matVec returns W·x for W stored as out rows of len(x) values.
func matVec(w []float64, x []float64, out int) []float64 {
	in := len(x)
	y := make([]float64, out)
	for o := range out {
		var acc float64
		for i, xi := range x {
			acc += w[o*in+i] * xi
		}
		y[o] = acc
	}
	return y
}

func refRMSNorm(x, w []float64, eps float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+eps)
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v * s * w[i]
	}
	return y
}

// refRope rotates the first ropeDims dimensions of one head at position p.
func (r *refModel) refRope(v []float64, p int) {
	n := r.c.RopeDimensionCount
	for i := range n / 2 {
		theta := float64(p) * math.Pow(float64(r.c.RopeFreqBase), -2*float64(i)/float64(n))
		if r.opts.linearFactor != 0 {
			theta /= r.opts.linearFactor
		}
		if r.ropeFactors != nil {
			theta /= r.ropeFactors[i]
		}
		var a, b int
		switch r.opts.rope {
		case RopeNormal:
			a, b = 2*i, 2*i+1
		case RopeNeoX:
			a, b = i, i+n/2
		default:
			return
		}
		x0, x1 := v[a], v[b]
		v[a] = x0*math.Cos(theta) - x1*math.Sin(theta)
		v[b] = x0*math.Sin(theta) + x1*math.Cos(theta)
	}
}

// forward runs the whole sequence and returns the logits after every token.
func (r *refModel) forward(tokens []int) [][]float64 {
	c := r.c
	dim, d, hq, hkv := c.EmbeddingLength, c.HeadDim, c.HeadCount, c.HeadCountKV
	eps := float64(c.RMSNormEpsilon)
	n := len(tokens)
	x := make([][]float64, n)
	for t, id := range tokens {
		x[t] = append([]float64(nil), r.embd[id*dim:(id+1)*dim]...)
	}
	for l := range c.BlockCount {
		qs, ks, vs := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for t := range n {
			h := refRMSNorm(x[t], r.attnNorm[l], eps)
			qs[t], ks[t], vs[t] = matVec(r.wq[l], h, r.qDim), matVec(r.wk[l], h, r.kvDim), matVec(r.wv[l], h, r.kvDim)
			if r.bq != nil {
				for i := range qs[t] {
					qs[t][i] += r.bq[l][i]
				}
				for i := range ks[t] {
					ks[t][i] += r.bk[l][i]
					vs[t][i] += r.bv[l][i]
				}
			}
			for h := range hq {
				r.refRope(qs[t][h*d:(h+1)*d], t)
			}
			for h := range hkv {
				r.refRope(ks[t][h*d:(h+1)*d], t)
				roundKV(ks[t][h*d:(h+1)*d], r.opts.kvType)
				roundKV(vs[t][h*d:(h+1)*d], r.opts.kvType)
			}
		}
		for t := range n {
			att := make([]float64, r.qDim)
			for h := range hq {
				g := h / (hq / hkv)
				q := qs[t][h*d : (h+1)*d]
				scores := make([]float64, t+1)
				m := math.Inf(-1)
				for j := 0; j <= t; j++ {
					var s float64
					for k := range d {
						s += q[k] * ks[j][g*d+k]
					}
					scores[j] = s / math.Sqrt(float64(d))
					m = max(m, scores[j])
				}
				var z float64
				for j := range scores {
					scores[j] = math.Exp(scores[j] - m)
					z += scores[j]
				}
				for j, p := range scores {
					for k := range d {
						att[h*d+k] += p / z * vs[j][g*d+k]
					}
				}
			}
			o := matVec(r.wo[l], att, dim)
			for i := range x[t] {
				x[t][i] += o[i]
			}
			h := refRMSNorm(x[t], r.ffnNorm[l], eps)
			g, u := matVec(r.gate[l], h, r.ff), matVec(r.up[l], h, r.ff)
			for i := range g {
				g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
			}
			o = matVec(r.down[l], g, dim)
			for i := range x[t] {
				x[t][i] += o[i]
			}
		}
	}
	logits := make([][]float64, n)
	for t := range n {
		logits[t] = matVec(r.output, refRMSNorm(x[t], r.outNorm, eps), r.vocab)
	}
	return logits
}

// tinySpec describes a small random-weight Llama model for the writer.
type tinySpec struct {
	arch                 string // "llama" when empty
	dim, ff, layers      int
	heads, kvHeads       int
	headDim              int // written as attention.key_length when not dim/heads
	ropeDims             int // 0: headDim
	ctx                  int
	wtype                gguf.TensorType // type of the 2-D weights; norms stay F32
	untied, biases       bool
	ropeFreqs            bool
	theta                float32 // rope.freq_base; 0 leaves the key out
	scaling              string  // rope.scaling.type; "" leaves it out
	scalingFactor        float32
	extra                []ggufwrite.KV
	dropTensor, badShape string // for error tests: a tensor to leave out, one to give a wrong shape
}

func (s tinySpec) withDefaults() tinySpec {
	if s.arch == "" {
		s.arch = "llama"
	}
	if s.headDim == 0 {
		s.headDim = s.dim / s.heads
	}
	if s.ropeDims == 0 {
		s.ropeDims = s.headDim
	}
	if s.ctx == 0 {
		s.ctx = 64
	}
	return s
}

// tinyPieces are the text tokens of the tiny vocabulary (after the 3
// specials and the 256 byte tokens): 264 tokens in all.
var tinyPieces = []string{"▁the", "▁cat", "▁sat", "at", "th"}

// weightTensor stores vals (rows of dims[0] values) as typ.
func weightTensor(name string, typ gguf.TensorType, vals []float32, dims ...uint64) ggufwrite.Tensor {
	var e ggufwrite.Encoder
	switch typ {
	case gguf.TypeF32:
		for _, x := range vals {
			e.U32(math.Float32bits(x))
		}
	case gguf.TypeF16:
		for _, h := range fp16.Float16s(vals) {
			e.U16(uint16(h))
		}
	case gguf.TypeBF16:
		for _, h := range fp16.BFloat16s(vals) {
			e.U16(uint16(h))
		}
	case gguf.TypeQ8_0:
		for b := 0; b < len(vals); b += 32 {
			blk := vals[b : b+32]
			var amax float32
			for _, x := range blk {
				amax = max(amax, float32(math.Abs(float64(x))))
			}
			d := fp16.FromFloat32(amax / 127)
			e.U16(uint16(d))
			for _, x := range blk {
				q := 0.0
				if d.Float32() != 0 {
					q = math.Round(float64(x / d.Float32()))
				}
				e.U8(uint8(int8(max(-128, min(127, q)))))
			}
		}
	default:
		panic(fmt.Sprintf("weightTensor: type %v", typ))
	}
	return ggufwrite.Tensor{Name: name, Type: ggufwrite.TensorType(typ), Dims: dims, Data: e.B}
}

// bytes writes the model as a GGUF file with weights drawn from seed.
func (s tinySpec) bytes(seed uint64) []byte {
	s = s.withDefaults()
	rng := rand.New(rand.NewPCG(seed, 42))
	vocab := 259 + len(tinyPieces)
	qDim, kvDim := s.heads*s.headDim, s.kvHeads*s.headDim
	p := s.arch + "."
	kvs := []ggufwrite.KV{
		{Key: "general.architecture", Type: ggufwrite.ValueString, Val: s.arch},
		{Key: p + "context_length", Type: ggufwrite.ValueUint32, Val: uint32(s.ctx)},
		{Key: p + "embedding_length", Type: ggufwrite.ValueUint32, Val: uint32(s.dim)},
		{Key: p + "feed_forward_length", Type: ggufwrite.ValueUint32, Val: uint32(s.ff)},
		{Key: p + "block_count", Type: ggufwrite.ValueUint32, Val: uint32(s.layers)},
		{Key: p + "attention.head_count", Type: ggufwrite.ValueUint32, Val: uint32(s.heads)},
		{Key: p + "attention.head_count_kv", Type: ggufwrite.ValueUint32, Val: uint32(s.kvHeads)},
		{Key: p + "rope.dimension_count", Type: ggufwrite.ValueUint32, Val: uint32(s.ropeDims)},
		{Key: p + "attention.layer_norm_rms_epsilon", Type: ggufwrite.ValueFloat32, Val: float32(1e-5)},
	}
	if s.headDim != s.dim/s.heads || s.dim%s.heads != 0 {
		kvs = append(kvs, ggufwrite.KV{Key: p + "attention.key_length", Type: ggufwrite.ValueUint32, Val: uint32(s.headDim)})
	}
	if s.theta != 0 {
		kvs = append(kvs, ggufwrite.KV{Key: p + "rope.freq_base", Type: ggufwrite.ValueFloat32, Val: s.theta})
	}
	if s.scaling != "" {
		kvs = append(kvs, ggufwrite.KV{Key: p + "rope.scaling.type", Type: ggufwrite.ValueString, Val: s.scaling},
			ggufwrite.KV{Key: p + "rope.scaling.factor", Type: ggufwrite.ValueFloat32, Val: s.scalingFactor})
	}
	scores := make([]float32, len(tinyPieces))
	for i := range scores {
		scores[i] = float32(-i)
	}
	kvs = append(kvs, tokenizerKVs(tinyPieces, scores)...)
	for _, x := range s.extra {
		kvs = withoutKey(kvs, x.Key)
		kvs = append(kvs, x)
	}

	normal := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * scale)
		}
		return v
	}
	norm := func(n int) []float32 {
		v := normal(n, 0.2)
		for i := range v {
			v[i] += 1
		}
		return v
	}
	var tensors []ggufwrite.Tensor
	add := func(name string, typ gguf.TensorType, vals []float32, dims ...int) {
		if name == s.dropTensor {
			return
		}
		u := make([]uint64, len(dims))
		for i, d := range dims {
			u[i] = uint64(d)
		}
		if name == s.badShape {
			u[len(u)-1]++
			vals = append(vals, make([]float32, len(vals)/dims[len(dims)-1])...)
		}
		tensors = append(tensors, weightTensor(name, typ, vals, u...))
	}
	mat := func(name string, in, out int) {
		add(name, s.wtype, normal(in*out, 1.5/math.Sqrt(float64(in))), in, out)
	}
	add("token_embd.weight", s.wtype, normal(s.dim*vocab, 1), s.dim, vocab)
	add("output_norm.weight", gguf.TypeF32, norm(s.dim), s.dim)
	if s.untied {
		mat("output.weight", s.dim, vocab)
	}
	if s.ropeFreqs {
		f := make([]float32, s.ropeDims/2)
		for i := range f {
			f[i] = 1 + float32(i)*0.75
		}
		add("rope_freqs.weight", gguf.TypeF32, f, len(f))
	}
	for l := range s.layers {
		b := fmt.Sprintf("blk.%d.", l)
		add(b+"attn_norm.weight", gguf.TypeF32, norm(s.dim), s.dim)
		mat(b+"attn_q.weight", s.dim, qDim)
		mat(b+"attn_k.weight", s.dim, kvDim)
		mat(b+"attn_v.weight", s.dim, kvDim)
		if s.biases {
			add(b+"attn_q.bias", gguf.TypeF32, normal(qDim, 0.5), qDim)
			add(b+"attn_k.bias", gguf.TypeF32, normal(kvDim, 0.5), kvDim)
			add(b+"attn_v.bias", gguf.TypeF32, normal(kvDim, 0.5), kvDim)
		}
		mat(b+"attn_output.weight", qDim, s.dim)
		add(b+"ffn_norm.weight", gguf.TypeF32, norm(s.dim), s.dim)
		mat(b+"ffn_gate.weight", s.dim, s.ff)
		mat(b+"ffn_up.weight", s.dim, s.ff)
		mat(b+"ffn_down.weight", s.ff, s.dim)
	}
	return ggufwrite.File{KVs: kvs, Tensors: tensors}.Bytes()
}

// file writes the model and opens it.
func (s tinySpec) file(t *testing.T, seed uint64) *gguf.File {
	t.Helper()
	return mustRead(t, s.bytes(seed))
}
