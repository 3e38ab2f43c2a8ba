package kernel

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPackQ8 checks PackKTQ8 and PackQ8 against their reference loops on
// sizes that are not multiples of a block or a vector, with guards around
// the panels, and that they agree with what QKRows and PVRows compute
// from the same rows (the same dequantised float32 values).
func TestPackQ8(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	for _, n := range []int{1, 2, 3, 17, 33} {
		for _, d := range []int{1, 5, 32, 33, 64, 95} {
			ldSrc := (d + Q8Block - 1) / Q8Block * Q8Block
			if n > 1 {
				ldSrc += Q8Block // rows a block apart more than they need
			}
			src := make([]int8, (n-1)*ldSrc+d)
			for i := range src {
				src[i] = int8(rng.IntN(255) - 127)
			}
			scales := make([]float32, (len(src)+Q8Block-1)/Q8Block)
			for i := range scales {
				scales[i] = rng.Float32() * 0.1
			}
			deq := func(e int) float32 { return float32(src[e]) * scales[e/Q8Block] }

			ldT := n + 3
			tBuf, tp := guarded((d-1)*ldT + n)
			require.NoError(t, PackKTQ8(tp, ldT, src, scales, ldSrc, n, d))
			checkGuards(t, tBuf, "PackKTQ8")
			ldR := d + 2
			rBuf, rp := guarded((n-1)*ldR + d)
			require.NoError(t, PackQ8(rp, ldR, src, scales, ldSrc, n, d))
			checkGuards(t, rBuf, "PackQ8")
			for j := range n {
				for c := range d {
					want := deq(j*ldSrc + c)
					require.Equal(t, want, tp[c*ldT+j], "PackKTQ8 n %d d %d key %d comp %d", n, d, j, c)
					require.Equal(t, want, rp[j*ldR+c], "PackQ8 n %d d %d row %d comp %d", n, d, j, c)
				}
			}
		}
	}
}

func TestPackQ8Errors(t *testing.T) {
	src := make([]int8, 64)
	scales := make([]float32, 2)
	dst := make([]float32, 64)
	for _, f := range []struct {
		name string
		call func() error
	}{
		{"PackKTQ8", func() error { return PackKTQ8(dst, 2, src, scales, 16, 2, 16) }},
		{"PackQ8", func() error { return PackQ8(dst, 32, src, scales, 16, 2, 16) }},
	} {
		assert.ErrorContains(t, f.call(), "multiple of 32", f.name)
	}
	assert.ErrorContains(t, PackQ8(dst, 32, src, scales[:1], 32, 2, 32), "scales")
	assert.ErrorContains(t, PackKTQ8(dst[:10], 2, src, scales, 32, 2, 32), "dst")
	assert.NoError(t, PackQ8(nil, 0, nil, nil, 0, 0, 0))
}

// TestCurrent checks Capabilities against each implementation: the row
// kernels are SIMD exactly at the amd64 levels and NEON (never in the
// generic code, nor with purego), and MatMul's column block
// is a positive multiple of the vector width.
func TestCurrent(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		c := Current()
		switch Implementation() {
		case AVX512, AVX2, AVX512BF16, AMX, NEON:
			assert.True(t, c.RowKernels, Implementation())
		default:
			assert.False(t, c.RowKernels, Implementation())
		}
		assert.Positive(t, cur.f32.matMulColumns)
		assert.Zero(t, cur.f32.matMulColumns%4)
	})
}
