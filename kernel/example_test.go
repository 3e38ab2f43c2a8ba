package kernel_test

import (
	"fmt"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel"
)

func ExampleMatMul() {
	// A projection of two 3-component inputs to 2 outputs: C = A·B with the
	// weight stored [in][out].
	a := []float32{1, 2, 3, 4, 5, 6} // 2×3
	b := []float32{1, 0, 0, 1, 1, 1} // 3×2
	c := make([]float32, 2*2)
	if err := kernel.MatMul(c, 2, a, 3, b, 2, 2, 2, 3); err != nil {
		panic(err)
	}
	fmt.Println(c)
	// Output: [4 5 10 11]
}

func ExampleQKRowsQ8Dot() {
	// One query row against two Q8 key rows of 32 values: the query is
	// quantised once (Q8Query) and each score is an integer dot product
	// times the two block scales. The exact second score is -10; the
	// query's rounding (0.5 stored as 42/127 of 1.5) moves it a little.
	x := make([]float32, 32)
	for i := range x {
		x[i] = float32(i%4) - 1.5
	}
	var q kernel.Q8Query
	if err := q.Set(x, 32, 1, 32); err != nil {
		panic(err)
	}
	k := make([]int8, 2*32)
	for i := range 32 {
		k[i] = 1           // key 0: ones
		k[32+i] = int8(-i) // key 1: 0, -1, -2, ...
	}
	kScales := []float32{0.5, 0.25}
	s := make([]float32, 2)
	if err := kernel.QKRowsQ8Dot(s, 2, &q, k, kScales, 32, 2, 1); err != nil {
		panic(err)
	}
	fmt.Printf("%.2f %.2f\n", s[0], s[1])
	// Output: 0.00 -9.99
}

func ExampleEncodeFloat8() {
	// A K row stored as fp8 E4M3 with a scale of 0.5, as a cache or pool
	// of that type stores it: each value divided by the scale, rounded to
	// nearest even and saturating at ±448 (NaN stays NaN). From bfloat16
	// rows too: the same call with a []fp16.BFloat16.
	row := []float32{1, -0.3, 1000, 0.001}
	dst := make([]fp16.Float8E4M3, len(row))
	kernel.EncodeFloat8(dst, row, 0.5)
	for _, x := range dst {
		fmt.Printf("%#02x=%g ", x.Bits(), x.Float32()*0.5)
	}
	fmt.Println()
	// Output: 0x40=1 0xb2=-0.3125 0x7e=224 0x01=0.0009765625
}

func ExampleEncodeFloat16() {
	// binary16 rows from float32 and from bfloat16 ones, rounded to
	// nearest even: 65520 and beyond overflow to +Inf.
	h := make([]fp16.Float16, 3)
	kernel.EncodeFloat16(h, []float32{1.0009766, 65519, 65520})
	fmt.Println(h[0].Float32(), h[1].Float32(), h[2].Float32())
	kernel.EncodeFloat16(h, fp16.BFloat16s([]float32{3.140625, -2, 0}))
	fmt.Println(h[0].Float32(), h[1].Float32(), h[2].Float32())
	// Output:
	// 1.0009766 65504 +Inf
	// 3.140625 -2 0
}
