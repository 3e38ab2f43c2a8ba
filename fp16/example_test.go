package fp16_test

import (
	"fmt"

	"github.com/flashgo/flashgo/fp16"
)

func ExampleFromFloat32() {
	// 0.1 is not representable; binary16 keeps 11 significant bits.
	h := fp16.FromFloat32(0.1)
	fmt.Printf("%#04x %v\n", h.Bits(), h.Float32())

	// 65520 is the midpoint between the largest finite value (65504) and
	// the next power of two, so round-to-nearest-even overflows to +Inf.
	fmt.Println(fp16.FromFloat32(65504).Float32(), fp16.FromFloat32(65520).Float32())
	// Output:
	// 0x2e66 0.099975586
	// 65504 +Inf
}

func ExampleDecodeFloat16() {
	src := fp16.Float16s([]float32{1, -0.5, 3.14159, 1e-7})
	dst := make([]float32, 8)
	n := fp16.DecodeFloat16(dst, src) // converts min(len(dst), len(src))
	fmt.Println(n, dst[:n])
	// Output:
	// 4 [1 -0.5 3.140625 1.1920929e-07]
}

func ExampleBFloat16FromFloat32() {
	b := fp16.BFloat16FromFloat32(3.14159)
	fmt.Printf("%#04x %v\n", b.Bits(), b.Float32())
	// Output:
	// 0x4049 3.140625
}
