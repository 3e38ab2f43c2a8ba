package attention_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
)

// TestOptionErrors checks that each bad option returns an error naming the
// option and what was expected, and writes nothing.
func TestOptionErrors(t *testing.T) {
	const hq, hkv, nq, nkv, d = 4, 2, 5, 6, 8
	q := attention.F32Tensor(make([]float32, hq*nq*d), attention.BHSD(1, hq, nq, d))
	k := attention.F32Tensor(make([]float32, hkv*nkv*d), attention.BHSD(1, hkv, nkv, d))
	v := attention.F32Tensor(make([]float32, hkv*nkv*d), attention.BHSD(1, hkv, nkv, d))
	outBuf := make([]float32, hq*nq*d)
	lse := make([]float32, hq*nq)
	out := attention.F32Tensor(outBuf, q.Layout)
	e := mustEngine(t, attention.Config{})
	mask := func(b, h, s, n int) attention.Tensor {
		return attention.F32Tensor(make([]float32, b*h*s*n), attention.BHSD(b, h, s, n))
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		name string
		opts attention.Options
		want string
	}{
		{"align", attention.Options{CausalAlign: 7}, "Options.CausalAlign is Alignment(7); want BottomRight or TopLeft"},
		{"window left", attention.Options{Window: &attention.Window{Left: -2}}, "Options.Window.Left is -2; want >= 0, or -1 for unbounded"},
		{"window right", attention.Options{Window: &attention.Window{Left: 3, Right: -5}}, "Options.Window.Right is -5; want >= 0, or -1"},
		{"softcap negative", attention.Options{SoftCap: -1}, "Options.SoftCap is -1; want a finite number > 0, or 0"},
		{"softcap NaN", attention.Options{SoftCap: nan}, "Options.SoftCap is NaN"},
		{"softcap Inf", attention.Options{SoftCap: inf}, "Options.SoftCap is +Inf"},
		{"slopes length", attention.Options{Slopes: make([]float32, 3)}, "Options.Slopes has 3 elements; want one ALiBi slope per query head (4)"},
		{"slopes NaN", attention.Options{Slopes: []float32{0, 1, nan, 0}}, "Options.Slopes[2] is NaN; want a finite number"},
		{"sinks length", attention.Options{Sinks: make([]float32, 5)}, "Options.Sinks has 5 elements; want one sink logit per query head (4)"},
		{"sinks +Inf", attention.Options{Sinks: []float32{0, inf, 0, 0}}, "Options.Sinks[1] is +Inf; want a finite number, or -Inf"},
		{"mask batch", attention.Options{Mask: mask(2, 1, nq, nkv)}, "Options.Mask has batch 2; want 1 (B) or 1 (broadcast)"},
		{"mask heads", attention.Options{Mask: mask(1, 2, nq, nkv)}, "Options.Mask has 2 heads; want 4 (query heads) or 1"},
		{"mask rows", attention.Options{Mask: mask(1, 1, 1, nkv)}, "Options.Mask has 1 rows × 6 keys; want Nq × Nkv = 5 × 6"},
		{"mask keys", attention.Options{Mask: mask(1, hq, nq, nkv+1)}, "Options.Mask has 5 rows × 7 keys"},
		{"mask short", attention.Options{Mask: attention.F32Tensor(make([]float32, 10), attention.BHSD(1, 1, nq, nkv))}, "Options.Mask: slice has 10 elements; want >= 30"},
		{"mask layout only", attention.Options{Mask: attention.Tensor{Layout: attention.BHSD(1, 1, nq, nkv)}}, "Options.Mask: no data"},
		{"mask overlaps out", attention.Options{Mask: attention.F32Tensor(outBuf, attention.BHSD(1, 1, nq, nkv))}, "out overlaps Options.Mask"},
		{"bool mask shape", attention.Options{BoolMask: attention.BoolMask{Layout: attention.BHSD(1, 3, nq, nkv), Data: make([]bool, 90)}}, "Options.BoolMask has 3 heads; want 4"},
		{"bool mask short", attention.Options{BoolMask: attention.BoolMask{Layout: attention.BHSD(1, 1, nq, nkv), Data: make([]bool, 29)}}, "Options.BoolMask.Data has 29 elements; want >= 30"},
		{"bool mask no data", attention.Options{BoolMask: attention.BoolMask{Layout: attention.BHSD(1, 1, nq, nkv)}}, "Options.BoolMask has a layout but no Data"},
		{"cuseq one", attention.Options{CuSeqQ: []int{0, 5}}, "only one of Options.CuSeqQ (2 elements) and Options.CuSeqKV (0 elements) is set"},
		{"cuseq lengths", attention.Options{CuSeqQ: []int{0, 5}, CuSeqKV: []int{0, 2, 6}}, "Options.CuSeqQ has 2 elements and Options.CuSeqKV 3"},
		{"cuseq start", attention.Options{CuSeqQ: []int{1, 5}, CuSeqKV: []int{0, 6}}, "Options.CuSeqQ[0] is 1; want 0"},
		{"cuseq decreasing", attention.Options{CuSeqQ: []int{0, 3, 5}, CuSeqKV: []int{0, 4, 2}}, "Options.CuSeqKV[2] is 2, less than CuSeqKV[1] = 4; want non-decreasing"},
		{"cuseq total", attention.Options{CuSeqQ: []int{0, 3, 4}, CuSeqKV: []int{0, 4, 6}}, "Options.CuSeqQ[2] is 4; want Nq = 5"},
		{"cuseq empty", attention.Options{CuSeqQ: []int{}, CuSeqKV: []int{}}, "Options.CuSeqQ is empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range outBuf {
				outBuf[i] = 42
			}
			for i := range lse {
				lse[i] = 42
			}
			err := e.ForwardLSE(out, lse, q, k, v, c.opts)
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
			for i, x := range outBuf {
				require.Equal(t, float32(42), x, "out element %d written", i)
			}
			for i, x := range lse {
				require.Equal(t, float32(42), x, "lse element %d written", i)
			}
		})
	}
	t.Run("varlen batch", func(t *testing.T) {
		q2 := attention.F32Tensor(make([]float32, 2*hq*nq*d), attention.BHSD(2, hq, nq, d))
		k2 := attention.F32Tensor(make([]float32, 2*hkv*nkv*d), attention.BHSD(2, hkv, nkv, d))
		o2 := attention.F32Tensor(make([]float32, 2*hq*nq*d), attention.BHSD(2, hq, nq, d))
		err := e.Forward(o2, q2, k2, k2, attention.Options{CuSeqQ: []int{0, 5}, CuSeqKV: []int{0, 6}})
		require.ErrorContains(t, err, "batch is 2 with Options.CuSeqQ/CuSeqKV set; want 1")
	})
	t.Run("alignment names", func(t *testing.T) {
		require.Equal(t, "BottomRight", attention.BottomRight.String())
		require.Equal(t, "TopLeft", attention.TopLeft.String())
	})
}
