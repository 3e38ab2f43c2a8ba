//go:build !amd64 || purego

package kernel

// int8DotBuilt reports whether this build has an integer dot-product
// kernel: not without amd64 assembly.
const int8DotBuilt = false

// int8Dot reports whether QKRowsQ8Dot runs on integer dot-product
// instructions here.
func int8Dot() bool { return false }

func int8DotName() string { return "generic" }

// qkRowsQ8DotAsm leaves everything to the Go loop.
func qkRowsQ8DotAsm(s []float32, ldS int, q *Q8Query, k []int8, kScales []float32, ldK int, cols int, scale float32, ahead int) int {
	return 0
}

// qkRowsQ8DotGatherAsm leaves everything to the Go loop.
func qkRowsQ8DotGatherAsm(s []float32, ldS int, q *Q8Query, k []int8, kScales []float32, off, pfo []int, cols int, scale float32) int {
	return 0
}
