package kernel_test

import (
	"fmt"

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
