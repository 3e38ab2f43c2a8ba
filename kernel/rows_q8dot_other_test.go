//go:build !amd64 || purego

package kernel

import "testing"

// withoutAVXVNNI reports false: only amd64 has an AVX-VNNI kernel.
func withoutAVXVNNI(t *testing.T) bool { return false }
