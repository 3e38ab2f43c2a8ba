package attention_test

import (
	"fmt"
	"math"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/fp16"
)

// Causal self-attention over three tokens, with queries in the
// [batch, seq, heads, dim] layout a projection produces and an fp16 K/V.
func ExampleEngine_Forward() {
	const heads, seq, dim = 1, 3, 2
	q := []float32{1, 0, 0, 1, 1, 1} // token t: q[t*heads*dim:]
	k := fp16.Float16s([]float32{1, 0, 0, 1, 1, 1})
	v := fp16.Float16s([]float32{1, 2, 3, 4, 5, 6})
	out := make([]float32, seq*heads*dim)

	eng, err := attention.NewEngine(attention.Config{})
	if err != nil {
		panic(err)
	}
	err = eng.Forward(
		attention.F32Tensor(out, attention.BSHD(1, seq, heads, dim)),
		attention.F32Tensor(q, attention.BSHD(1, seq, heads, dim)),
		attention.F16Tensor(k, attention.BSHD(1, seq, heads, dim)),
		attention.F16Tensor(v, attention.BSHD(1, seq, heads, dim)),
		attention.Options{Causal: true},
	)
	if err != nil {
		panic(err)
	}
	for t := range seq {
		fmt.Printf("token %d: %.3f\n", t, out[t*dim:(t+1)*dim])
	}
	// Output:
	// token 0: [1.000 2.000]
	// token 1: [2.340 3.340]
	// token 2: [3.510 4.510]
}

// The log-sum-exp of each row comes with ForwardLSE; a row that sees no key
// gets −Inf and a zero output.
func ExampleEngine_ForwardLSE() {
	// Two queries, one key: with bottom-right causal alignment the first
	// query sees nothing.
	q := []float32{1, 1}
	k := []float32{2}
	v := []float32{5}
	out := make([]float32, 2)
	lse := make([]float32, 2)
	eng, _ := attention.NewEngine(attention.Config{})
	err := eng.ForwardLSE(
		attention.F32Tensor(out, attention.BHSD(1, 1, 2, 1)), lse,
		attention.F32Tensor(q, attention.BHSD(1, 1, 2, 1)),
		attention.F32Tensor(k, attention.BHSD(1, 1, 1, 1)),
		attention.F32Tensor(v, attention.BHSD(1, 1, 1, 1)),
		attention.Options{Causal: true},
	)
	fmt.Println(out, lse, err)
	// Output: [0 5] [-Inf 2] <nil>
}

// An error names the argument and what was expected, and nothing is written.
func ExampleForward_error() {
	q := attention.F32Tensor(make([]float32, 8), attention.BHSD(1, 2, 1, 4))
	k := attention.F32Tensor(make([]float32, 12), attention.BHSD(1, 3, 1, 4))
	out := attention.F32Tensor(make([]float32, 8), attention.BHSD(1, 2, 1, 4))
	fmt.Println(attention.Forward(out, q, k, k, attention.Options{}))
	// Output: attention: q has 2 heads and k has 3; want a multiple (grouped-query attention)
}

// Multi-head latent attention's absorbed decode: the keys are 576 wide (a
// 512-wide latent and 64 rotary components) and the values are the
// latent alone, a view of the first 512 components of each key row, so
// the output is 512 wide. The default scale is 1/sqrt(576).
func ExampleEngine_Forward_latent() {
	const heads, kvHeads, n, dk, dv = 16, 1, 100, 576, 512
	latent := make([]float32, n*dk) // [n][576]: the cache, one row per position
	for i := range latent {
		latent[i] = float32(i%7) * 0.01
	}
	q := make([]float32, heads*dk) // one new token's queries
	out := make([]float32, heads*dv)

	k := attention.F32Tensor(latent, attention.BSHD(1, n, kvHeads, dk))
	v := k
	v.Dim = dv // the same rows, their first 512 components
	eng, _ := attention.NewEngine(attention.Config{})
	err := eng.Forward(
		attention.F32Tensor(out, attention.BSHD(1, 1, heads, dv)),
		attention.F32Tensor(q, attention.BSHD(1, 1, heads, dk)),
		k, v, attention.Options{Causal: true},
	)
	fmt.Println(err, len(out)/heads)
	// Output: <nil> 512
}

func ExampleOptions_quantizeQuery() {
	// A decode step over a Q8 cache: with QuantizeQuery the query is
	// rounded to Q8 too and Q·Kᵀ is computed in int8 dot products. The
	// result moves by about the query's rounding, no more.
	const heads, n, d = 2, 100, 64
	k, v, q := make([]float32, heads*n*d), make([]float32, heads*n*d), make([]float32, heads*d)
	for i := range k {
		k[i] = float32(math.Sin(float64(i)))
		v[i] = float32(math.Cos(float64(i) * 0.7))
	}
	for i := range q {
		q[i] = float32(math.Sin(float64(i) * 1.3))
	}
	kvLay := attention.BHSD(1, heads, n, d)
	q8 := func(x []float32) attention.Tensor {
		data, scales := make([]int8, len(x)), make([]float32, len(x)/attention.Q8Block)
		if err := attention.QuantizeQ8(data, scales, x); err != nil {
			panic(err)
		}
		return attention.Q8Tensor(data, scales, kvLay)
	}
	kT, vT := q8(k), q8(v)
	qLay := attention.BHSD(1, heads, 1, d)
	plain, quant := make([]float32, heads*d), make([]float32, heads*d)
	for _, r := range []struct {
		out  []float32
		opts attention.Options
	}{{plain, attention.Options{}}, {quant, attention.Options{QuantizeQuery: true}}} {
		if err := attention.Forward(attention.F32Tensor(r.out, qLay), attention.F32Tensor(q, qLay), kT, vT, r.opts); err != nil {
			panic(err)
		}
	}
	var diff float64
	for i := range plain {
		diff = max(diff, math.Abs(float64(plain[i]-quant[i])))
	}
	fmt.Println("largest change below 1e-2:", diff < 1e-2, "and not zero:", diff > 0)
	// Output: largest change below 1e-2: true and not zero: true
}

// ComputedPrecision says which arithmetic a call gets: in bf16 precision a
// decode step of a model with 32 query heads over 8 K/V heads has 4 query
// rows a K/V head and is computed in float32 (where the row kernels are
// SIMD), a prefill chunk of 512 positions in bfloat16.
func ExampleComputedPrecision() {
	opts := attention.Options{Precision: attention.PrecisionBFloat16}
	decode := attention.ComputedPrecision(opts, 32, 8, 1)
	prefill := attention.ComputedPrecision(opts, 32, 8, 512)
	fmt.Println("decode:", decode, "prefill:", prefill)
}
