//go:build amd64 && !purego

package kernel

import "testing"

// withoutAVXVNNI turns the AVX-VNNI kernel of QKRowsQ8Dot off until the
// end of t and reports whether the CPU had it (so that the VPMADDUBSW
// kernel now runs where it did).
func withoutAVXVNNI(t *testing.T) bool {
	if !hasAVXVNNI {
		return false
	}
	hasAVXVNNI = false
	t.Cleanup(func() { hasAVXVNNI = true })
	return true
}
