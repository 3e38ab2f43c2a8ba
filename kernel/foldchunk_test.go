package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/fp16"
)

// foldChunkCase is one FoldChunkBF16 call's operands, with the strides
// padded so that no row is a whole number of tiles.
type foldChunkCase struct {
	rows, cols, d, dv            int
	ldQ, ldK, ldV, ldO, ldS, ldP int
	q, kp, vp                    []fp16.BFloat16
	o, m, z                      []float32
	lo, vis                      []int
	scale                        float32
}

func newFoldChunkCase(rng *rand.Rand, rows, cols, d, dv int, edges bool) *foldChunkCase {
	c := &foldChunkCase{rows: rows, cols: cols, d: d, dv: dv,
		ldQ: d + 34, ldK: 2*cols + 6, ldV: 2*dv + 66, ldO: dv + 5, ldS: cols + 3, ldP: cols + 38, scale: 0.0883883}
	r16 := (rows + 15) &^ 15
	c.q = randnBF16(rng, r16*c.ldQ, 1)
	c.kp = randnBF16(rng, max(1, d/2)*c.ldK, 1.5)
	c.vp = randnBF16(rng, max(1, cols/2)*c.ldV, 1)
	c.o = make([]float32, r16*c.ldO)
	c.m, c.z = make([]float32, rows), make([]float32, rows)
	for i := range rows {
		c.m[i], c.z[i] = float32(2*rng.NormFloat64()), 1+rng.Float32()*5
		for k := range dv {
			c.o[i*c.ldO+k] = float32(rng.NormFloat64())
		}
	}
	if rows > 1 {
		c.m[1], c.z[1] = negInf, 0 // a row that has seen no key yet
		clear(c.o[c.ldO : c.ldO+dv])
	}
	if edges {
		c.lo, c.vis = make([]int, rows), make([]int, rows)
		for i := range rows {
			a, b := rng.IntN(cols+1), rng.IntN(cols+1)
			c.lo[i], c.vis[i] = min(a, b), max(a, b)
		}
		c.lo[0], c.vis[0] = 0, cols // the whole tile
		if rows > 2 {
			c.lo[2], c.vis[2] = cols/2, cols/2 // no key
		}
	}
	return c
}

// fold runs FoldChunkBF16 on copies of the case's state.
func (c *foldChunkCase) fold(t *testing.T) (o, m, z, alpha []float32) {
	r16 := (c.rows + 15) &^ 15
	o, m, z, alpha = slices.Clone(c.o), slices.Clone(c.m), slices.Clone(c.z), make([]float32, c.rows)
	s, p := make([]float32, r16*c.ldS), make([]fp16.BFloat16, r16*c.ldP)
	require.NoError(t, FoldChunkBF16(o, c.ldO, c.q, c.ldQ, c.kp, c.ldK, c.vp, c.ldV, s, c.ldS, p, c.ldP,
		c.rows, c.cols, c.d, c.dv, c.scale, m, z, alpha, c.lo, c.vis))
	return o, m, z, alpha
}

// chain runs the five calls FoldChunkBF16 stands for on copies of the
// case's state.
func (c *foldChunkCase) chain(t *testing.T) (o, m, z, alpha []float32) {
	o, m, z, alpha = slices.Clone(c.o), slices.Clone(c.m), slices.Clone(c.z), make([]float32, c.rows)
	s, p := make([]float32, c.rows*c.ldS), make([]fp16.BFloat16, c.rows*c.ldP)
	require.NoError(t, QKTBF16(s, c.ldS, c.q, c.ldQ, c.kp, c.ldK, c.rows, c.cols, c.d, 1))
	if c.lo != nil {
		for i := range c.rows {
			row := s[i*c.ldS:][:c.cols]
			for j := range row {
				if j < c.lo[i] || j >= c.vis[i] {
					row[j] = negInf
				}
			}
		}
	}
	require.NoError(t, OnlineSoftmaxBF16(s, c.ldS, p, c.ldP, c.rows, c.cols, c.scale, m, z, alpha))
	require.NoError(t, ScaleRows(o, c.ldO, alpha, c.rows, c.dv))
	require.NoError(t, PVBF16(o, c.ldO, p, c.ldP, c.vp, c.ldV, c.rows, c.cols, c.dv))
	return o, m, z, alpha
}

func bitsEqual(t *testing.T, what string, want, got []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf("%s[%d] = %v; the chain of calls gives %v", what, i, got[i], want[i])
		}
	}
}

// TestFoldChunkBF16MatchesChain checks FoldChunkBF16 against the five
// calls it stands for, bit for bit, under every implementation: at amx
// the fused kernel (sizes multiples of 32) and the chain elsewhere, on
// rows that are not multiples of the 16-row tile, with and without the
// rows' key ranges, and on a second tile folded into the first's state.
func TestFoldChunkBF16MatchesChain(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(35, 35))
		for _, sh := range [][4]int{
			{1, 32, 32, 32}, {5, 64, 64, 32}, {16, 256, 128, 128}, {17, 96, 32, 64}, {33, 128, 64, 96},
			{64, 256, 128, 128}, {70, 32, 96, 32}, {3, 30, 6, 10}, {20, 2, 2, 2}, {9, 64, 64, 0}, {4, 64, 0, 32},
		} {
			for _, edges := range []bool{false, true} {
				rows, cols, d, dv := sh[0], sh[1], sh[2], sh[3]
				t.Run(fmt.Sprintf("rows=%d/cols=%d/d=%d/dv=%d/edges=%v", rows, cols, d, dv, edges), func(t *testing.T) {
					c := newFoldChunkCase(rng, rows, cols, d, dv, edges)
					for step := range 2 { // a second tile on the first one's state
						wo, wm, wz, wa := c.chain(t)
						o, m, z, alpha := c.fold(t)
						for i := range rows {
							bitsEqual(t, fmt.Sprintf("step %d: o row %d", step, i), wo[i*c.ldO:][:dv], o[i*c.ldO:][:dv])
						}
						bitsEqual(t, fmt.Sprintf("step %d: m", step), wm, m)
						bitsEqual(t, fmt.Sprintf("step %d: z", step), wz, z)
						bitsEqual(t, fmt.Sprintf("step %d: alpha", step), wa, alpha)
						c.o, c.m, c.z = o, m, z
						c.kp = randnBF16(rng, len(c.kp), 1.5)
						c.vp = randnBF16(rng, len(c.vp), 1)
					}
				})
			}
		}
	})
}

// TestFoldChunkBF16SpecialValues checks the fused kernels against the
// chain where the softmax leaves its fast path: a key whose scores are NaN
// (a NaN component of K, with the rows' key ranges so that the rows which
// do not see it keep the other cases), a row of huge logits (its maximum's weight 1
// however large the scores), a row whose keys score +Inf, and an infinite
// value that the rows which see it carry into their outputs, under every
// implementation.
func TestFoldChunkBF16SpecialValues(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(39, 39))
		for _, sh := range [][4]int{{13, 64, 64, 64}, {40, 96, 32, 32}} {
			rows, cols, d, dv := sh[0], sh[1], sh[2], sh[3]
			for _, edges := range []bool{false, true} {
				t.Run(fmt.Sprintf("rows=%d/cols=%d/edges=%v", rows, cols, edges), func(t *testing.T) {
					c := newFoldChunkCase(rng, rows, cols, d, dv, edges)
					nan, inf := RoundBF16(float32(math.NaN())), RoundBF16(float32(math.Inf(1)))
					if edges { // the rows that do not see key 5 keep the other cases
						c.kp[2*5+1] = nan // pair row 0, key 5, its second component
					}
					for k := range d {
						c.q[3*c.ldQ+k] = RoundBF16(1e18 * bf16Value(c.q[3*c.ldQ+k]))
						c.q[4*c.ldQ+k] = 0
					}
					c.q[4*c.ldQ] = inf // row 4 scores ±Inf or NaN
					c.vp[(cols/2-1)*c.ldV+2*(dv-1)] = inf
					wo, wm, wz, wa := c.chain(t)
					o, m, z, alpha := c.fold(t)
					for i := range rows {
						bitsEqual(t, fmt.Sprintf("o row %d", i), wo[i*c.ldO:][:dv], o[i*c.ldO:][:dv])
					}
					bitsEqual(t, "m", wm, m)
					bitsEqual(t, "z", wz, z)
					bitsEqual(t, "alpha", wa, alpha)
				})
			}
		}
	})
}

// TestFoldChunkBF16Errors checks that bad arguments are reported, not
// computed.
func TestFoldChunkBF16Errors(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 36))
	c := newFoldChunkCase(rng, 17, 64, 64, 64, true)
	call := func(edit func(c *foldChunkCase, rows, cols, d *int, s *[]float32)) error {
		cc := *c
		rows, cols, d := cc.rows, cc.cols, cc.d
		s := make([]float32, 32*cc.ldS)
		edit(&cc, &rows, &cols, &d, &s)
		return FoldChunkBF16(cc.o, cc.ldO, cc.q, cc.ldQ, cc.kp, cc.ldK, cc.vp, cc.ldV, s, cc.ldS, make([]fp16.BFloat16, 32*cc.ldP), cc.ldP,
			rows, cols, d, cc.dv, cc.scale, cc.m, cc.z, make([]float32, 17), cc.lo, cc.vis)
	}
	require.NoError(t, call(func(*foldChunkCase, *int, *int, *int, *[]float32) {}))
	for name, edit := range map[string]func(c *foldChunkCase, rows, cols, d *int, s *[]float32){
		"negative rows":  func(_ *foldChunkCase, rows, _, _ *int, _ *[]float32) { *rows = -1 },
		"odd cols":       func(_ *foldChunkCase, _, cols, _ *int, _ *[]float32) { *cols = 63 },
		"odd d":          func(_ *foldChunkCase, _, _, d *int, _ *[]float32) { *d = 63 },
		"short s":        func(_ *foldChunkCase, _, _, _ *int, s *[]float32) { *s = (*s)[:17*c.ldS] },
		"short q":        func(c *foldChunkCase, _, _, _ *int, _ *[]float32) { c.q = c.q[:20*c.ldQ] },
		"lo without vis": func(c *foldChunkCase, _, _, _ *int, _ *[]float32) { c.vis = nil },
		"vis past cols":  func(c *foldChunkCase, _, _, _ *int, _ *[]float32) { c.vis = slices.Clone(c.vis); c.vis[3] = 65 },
		"lo past vis":    func(c *foldChunkCase, _, _, _ *int, _ *[]float32) { c.lo = slices.Clone(c.lo); c.lo[4] = c.vis[4] + 1 },
	} {
		require.Error(t, call(edit), name)
	}
}

// BenchmarkFoldChunkBF16 times one chunk of the engine's bf16 fold (64
// query rows against a tile of 256 keys, d = dv = 128, operands in the L1
// and L2 caches) fused and as the chain of calls, under each bf16
// implementation this machine has. GFLOP/s counts 4·rows·cols·d flops a
// call; %peak divides by the bf16 product peak measured in the same
// process (bf16Peak: the AMX loop where the amx level runs).
func BenchmarkFoldChunkBF16(b *testing.B) {
	peakRate, _ := bf16Peak(200 * time.Millisecond)
	rng := rand.New(rand.NewPCG(37, 37))
	const rows, cols, d = 64, 256, 128
	c := newFoldChunkCase(rng, rows, cols, d, d, false)
	c.ldQ, c.ldK, c.ldV, c.ldO, c.ldS, c.ldP = d, 2*cols+32, 2*d+32, d, cols+16, cols+32
	c.q = randnBF16(rng, rows*c.ldQ, 1)
	c.kp = randnBF16(rng, d/2*c.ldK, 1.5)
	c.vp = randnBF16(rng, cols/2*c.ldV, 1)
	c.o = make([]float32, rows*c.ldO)
	s, p := make([]float32, rows*c.ldS), make([]fp16.BFloat16, rows*c.ldP)
	alpha := make([]float32, rows)
	for _, fused := range []bool{true, false} {
		name := "chain"
		if fused {
			name = "fused"
		}
		b.Run(name, func(b *testing.B) {
			benchAllImpls(b, func(b *testing.B) {
				if fused && !FusesChunkBF16(cols, d, d) {
					b.Skip("this implementation has no fused bf16 chunk")
				}
				for i := range rows {
					c.m[i], c.z[i] = 0, 1
				}
				for b.Loop() {
					if fused {
						_ = FoldChunkBF16(c.o, c.ldO, c.q, c.ldQ, c.kp, c.ldK, c.vp, c.ldV, s, c.ldS, p, c.ldP, rows, cols, d, d, c.scale, c.m, c.z, alpha, nil, nil)
					} else {
						foldChunkBF16Chain(c.o, c.ldO, c.q, c.ldQ, c.kp, c.ldK, c.vp, c.ldV, s, c.ldS, p, c.ldP, rows, cols, d, d, c.scale, c.m, c.z, alpha, nil, nil)
					}
				}
				rate := float64(b.N) * 4 * rows * cols * d / b.Elapsed().Seconds() / 1e9
				b.ReportMetric(rate, "GFLOP/s")
				if peakRate > 0 {
					b.ReportMetric(100*rate/peakRate, "%peak")
				}
			})
		})
	}
}
