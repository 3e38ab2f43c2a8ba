package model

import (
	"fmt"
	"math"
	"slices"
)

// RopeMode says how rotary position embedding (RoPE) pairs the dimensions of
// a head. The rotation is the same in every mode: the pair (a, b) at position
// p becomes (a·cos θ − b·sin θ, a·sin θ + b·cos θ) with θ = p·base^(−2i/n)
// for the i-th of the n/2 pairs of the n rotated dimensions. The modes
// differ in which dimensions form pair i.
type RopeMode uint8

const (
	// RopeAuto, in [LoadOptions], picks the mode that llama.cpp uses for
	// the file's architecture (llama_model_rope_type).
	RopeAuto RopeMode = iota
	// RopeNormal pairs adjacent dimensions (x[2i], x[2i+1]): llama.cpp's
	// LLAMA_ROPE_TYPE_NORM, used for the "llama" architecture, whose
	// converter permutes the rows of Hugging Face's Q and K weights so that
	// this mode gives what rotate_half gives on the original layout.
	RopeNormal
	// RopeNeoX pairs the two halves (x[i], x[i+n/2]): LLAMA_ROPE_TYPE_NEOX
	// and Hugging Face's rotate_half, used for Qwen 2, Gemma and GPT-NeoX.
	RopeNeoX
	// RopeNone is no rotary embedding (GPT-2's learned absolute positions).
	RopeNone
)

// String returns the mode's name: "auto", "normal", "neox" or "none".
func (m RopeMode) String() string {
	switch m {
	case RopeAuto:
		return "auto"
	case RopeNormal:
		return "normal"
	case RopeNeoX:
		return "neox"
	case RopeNone:
		return "none"
	}
	return fmt.Sprintf("RopeMode(%d)", uint8(m))
}

// archRopeModes are the architectures the decoder knows, with the RoPE mode
// llama.cpp uses for them (src/llama-model.cpp, llama_model_rope_type). Both
// have the tensor set of a Llama block; "qwen2" adds biases to the Q, K and V
// projections, which the decoder reads when the file has them.
var archRopeModes = map[string]RopeMode{
	"llama": RopeNormal,
	"qwen2": RopeNeoX,
}

// rope holds the rotation angles of the positions a Session has room for.
type rope struct {
	mode RopeMode
	dims int       // rotated dimensions per head, even; the rest pass through
	cos  []float32 // [position][dims/2]
	sin  []float32
}

// ropeParams are the model's RoPE settings.
type ropeParams struct {
	mode    RopeMode
	dims    int
	base    float64
	scale   float64   // position multiplier: 1/factor of linear scaling
	factors []float32 // rope_freqs.weight (Llama 3.1): θ_i is divided by factors[i]; nil is all ones
}

// theta returns the angle of pair i at position p, in float64: the table is
// computed once, so it may as well be exact to float32 precision.
func (r ropeParams) theta(p, i int) float64 {
	t := float64(p) * r.scale * math.Pow(r.base, -2*float64(i)/float64(r.dims))
	if r.factors != nil {
		t /= float64(r.factors[i])
	}
	return t
}

// newRope tabulates cos θ and sin θ for positions 0 … positions−1.
func newRope(r ropeParams, positions int) rope {
	if r.mode == RopeNone || r.dims == 0 {
		return rope{mode: RopeNone}
	}
	t := rope{mode: r.mode, dims: r.dims}
	t.grow(r, positions)
	return t
}

// grow extends the table to positions positions, if it holds fewer.
func (t *rope) grow(r ropeParams, positions int) {
	if t.mode == RopeNone {
		return
	}
	half := t.dims / 2
	have := len(t.cos) / half
	if positions <= have {
		return
	}
	t.cos = slices.Grow(t.cos, (positions-have)*half)
	t.sin = slices.Grow(t.sin, (positions-have)*half)
	for p := have; p < positions; p++ {
		for i := range half {
			s, c := math.Sincos(r.theta(p, i))
			t.cos = append(t.cos, float32(c))
			t.sin = append(t.sin, float32(s))
		}
	}
}

// apply rotates the first dims dimensions of each of the heads of one token
// at position pos; x holds the heads one after another, headDim values each.
func (t *rope) apply(x []float32, heads, headDim, pos int) {
	if t.mode == RopeNone {
		return
	}
	half := t.dims / 2
	cos := t.cos[pos*half : (pos+1)*half]
	sin := t.sin[pos*half : (pos+1)*half]
	for h := range heads {
		v := x[h*headDim : h*headDim+t.dims]
		switch t.mode {
		case RopeNormal:
			for i := range half {
				a, b := v[2*i], v[2*i+1]
				v[2*i] = a*cos[i] - b*sin[i]
				v[2*i+1] = a*sin[i] + b*cos[i]
			}
		case RopeNeoX:
			lo, hi := v[:half], v[half:]
			for i := range half {
				a, b := lo[i], hi[i]
				lo[i] = a*cos[i] - b*sin[i]
				hi[i] = a*sin[i] + b*cos[i]
			}
		}
	}
}
