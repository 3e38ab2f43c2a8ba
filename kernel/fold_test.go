package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// FoldTile is checked bit for bit against the chain of the four exported
// calls it stands for (QKT, OnlineSoftmax, ScaleRows, PV through a score
// tile), under every implementation: the AVX-512 kernel where this machine
// runs it, its Go twin elsewhere. Its blocks sit inside NaN-guarded
// buffers with leading dimensions longer than their rows, on sizes that
// are multiples of no tile or vector width, 1 included; the running
// states cover fresh rows (m = −Inf), rows whose maximum does not move
// (alpha exactly 1), NaN rows, rows of NaN or infinite scores, and the
// per-row visible ranges of a crossing tile.

// foldCase is one FoldTile problem: its operands and running state.
type foldCase struct {
	rows, cols, d, dv  int
	ldO, ldQ, ldK, ldV int
	o, q, kt, v        []float32 // guarded
	oBuf               []float32
	m, z, alpha        []float32
	vis                []int
	scale              float32
}

func newFoldCase(rng *rand.Rand, rows, cols, d, dv int, withVis bool) *foldCase {
	c := &foldCase{rows: rows, cols: cols, d: d, dv: dv,
		ldO: dv + rng.IntN(3), ldQ: d + rng.IntN(3), ldK: cols + rng.IntN(3), ldV: dv + rng.IntN(3)}
	c.oBuf, c.o = guarded((rows-1)*c.ldO + dv)
	_, c.q = guarded((rows-1)*c.ldQ + d)
	_, c.kt = guarded((d-1)*c.ldK + cols)
	_, c.v = guarded((cols-1)*c.ldV + dv)
	fill(rng, c.o)
	fill(rng, c.q)
	fill(rng, c.kt)
	fill(rng, c.v)
	c.scale = float32(1 / math.Sqrt(float64(d)))
	if rng.IntN(3) == 0 {
		c.scale = float32(rng.Float64()*4 - 2)
	}
	c.m, c.z, c.alpha = make([]float32, rows), make([]float32, rows), make([]float32, rows)
	for i := range rows {
		switch rng.IntN(8) {
		case 0, 1: // nothing seen yet
			c.m[i], c.z[i] = negInf, 0
			for k := range dv {
				c.o[i*c.ldO+k] = 0
			}
		case 2: // a maximum the tile does not reach: alpha is exactly 1
			c.m[i], c.z[i] = 100, float32(rng.Float64()*5)
		default:
			c.m[i], c.z[i] = float32(rng.NormFloat64()), float32(1+rng.Float64()*5)
		}
		c.alpha[i] = float32(math.NaN()) // written by every call
	}
	if withVis {
		c.vis = make([]int, rows)
		for i := range rows {
			switch rng.IntN(4) {
			case 0:
				c.vis[i] = 0
			case 1:
				c.vis[i] = cols
			default:
				c.vis[i] = rng.IntN(cols + 1)
			}
		}
	}
	return c
}

func (c *foldCase) clone() *foldCase {
	d := *c
	d.oBuf = append([]float32(nil), c.oBuf...)
	d.o = d.oBuf[pad : pad+len(c.o)]
	d.m = append([]float32(nil), c.m...)
	d.z = append([]float32(nil), c.z...)
	d.alpha = append([]float32(nil), c.alpha...)
	return &d
}

// chain folds c through the four exported calls, crossing-tile rows as
// attention's foldCrossingTile does.
func (c *foldCase) chain(t testing.TB) {
	t.Helper()
	ldS := c.cols + 5
	s := make([]float32, c.rows*ldS)
	require.NoError(t, QKT(s, ldS, c.q, c.ldQ, c.kt, c.ldK, c.rows, c.cols, c.d, c.scale))
	if c.vis == nil {
		require.NoError(t, OnlineSoftmax(s, ldS, c.rows, c.cols, c.m, c.z, c.alpha))
	} else {
		for i, n := range c.vis {
			row := s[i*ldS:][:c.cols]
			c.alpha[i] = 1
			if n > 0 {
				require.NoError(t, OnlineSoftmax(row, ldS, 1, n, c.m[i:], c.z[i:], c.alpha[i:]))
			}
			clear(row[n:])
		}
	}
	require.NoError(t, ScaleRows(c.o, c.ldO, c.alpha, c.rows, c.dv))
	require.NoError(t, PV(c.o, c.ldO, s, ldS, c.v, c.ldV, c.rows, c.cols, c.dv))
}

func (c *foldCase) fold(t testing.TB) {
	t.Helper()
	require.NoError(t, FoldTile(c.o, c.ldO, c.q, c.ldQ, c.kt, c.ldK, c.v, c.ldV, c.rows, c.cols, c.d, c.dv, c.scale, c.m, c.z, c.alpha, c.vis))
}

// sameOrNaN fails unless got and want hold the same bits, or are both NaN.
func sameOrNaN(t testing.TB, got, want []float32, what string) {
	t.Helper()
	for i := range want {
		g, w := got[i], want[i]
		if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
			t.Fatalf("%s[%d] = %v (%#08x), want %v (%#08x)", what, i, g, math.Float32bits(g), w, math.Float32bits(w))
		}
	}
}

func checkFold(t *testing.T, c *foldCase, what string) {
	t.Helper()
	got, want := c.clone(), c.clone()
	got.fold(t)
	want.chain(t)
	sameOrNaN(t, got.oBuf, want.oBuf, what+" o (with its guards)")
	sameOrNaN(t, got.m, want.m, what+" m")
	sameOrNaN(t, got.z, want.z, what+" z")
	sameOrNaN(t, got.alpha, want.alpha, what+" alpha")
}

func TestFoldTile(t *testing.T) { testAllImpls(t, testFoldTile) }

func testFoldTile(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	dims := [][2]int{{1, 1}, {3, 5}, {17, 16}, {32, 31}, {33, 65}, {64, 64}, {100, 100}, {128, 128}, {129, 47}}
	rowsList := []int{1, 2, 5, 6, 7, 13, 23, 24, 25, 31, 49}
	colsList := []int{1, 2, 15, 16, 17, 31, 33, 48, 63, 64}
	for _, dd := range dims {
		for _, rows := range rowsList {
			for _, cols := range colsList {
				for _, withVis := range []bool{false, true} {
					c := newFoldCase(rng, rows, cols, dd[0], dd[1], withVis)
					checkFold(t, c, fmt.Sprintf("rows %d cols %d d %d dv %d vis %v", rows, cols, dd[0], dd[1], withVis))
				}
			}
		}
	}
}

// TestFoldTileSpecials puts NaN and infinite scores and NaN states in
// some rows: each row's NaN-ness, and every other bit, must be the
// chain's.
func TestFoldTileSpecials(t *testing.T) { testAllImpls(t, testFoldTileSpecials) }

func testFoldTileSpecials(t *testing.T) {
	rng := rand.New(rand.NewPCG(63, 64))
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, cols := range []int{1, 17, 48, 64} {
		for _, withVis := range []bool{false, true} {
			for trial := range 20 {
				c := newFoldCase(rng, 30, cols, 33, 20, withVis)
				for i := range c.rows {
					switch rng.IntN(10) {
					case 0: // a NaN score: one query component NaN
						c.q[i*c.ldQ+rng.IntN(c.d)] = nan
					case 1: // a NaN key, in one column
						c.kt[rng.IntN(c.d)*c.ldK+rng.IntN(cols)] = nan
					case 2: // infinite scores
						c.q[i*c.ldQ+rng.IntN(c.d)] = inf
					case 3: // a row already NaN
						c.m[i] = nan
					case 4: // every score −Inf: a row that has seen nothing
						for k := range c.d {
							c.q[i*c.ldQ+k] = 0
						}
						c.q[i*c.ldQ] = -inf
						for j := range cols {
							c.kt[j] = 1
						}
					}
				}
				checkFold(t, c, fmt.Sprintf("specials cols %d vis %v trial %d", cols, withVis, trial))
			}
		}
	}
}

func TestFoldTileErrors(t *testing.T) {
	x := make([]float32, 1000)
	m := make([]float32, 4)
	for _, c := range []struct {
		err  error
		want string
	}{
		{FoldTile(x, 8, x, 8, x, 8, x, 8, 2, 65, 8, 8, 1, m, m, m, nil), "cols is 65; want at most FoldTileCols (64)"},
		{FoldTile(x, 8, x, 8, x, 8, x, 8, -1, 8, 8, 8, 1, m, m, m, nil), "negative size"},
		{FoldTile(x[:10], 8, x, 8, x, 8, x, 8, 2, 8, 8, 8, 1, m, m, m, nil), "o has 10 elements; want >= 16"},
		{FoldTile(x, 8, x, 7, x, 8, x, 8, 2, 8, 8, 8, 1, m, m, m, nil), "leading dimension of q is 7"},
		{FoldTile(x, 8, x, 8, x[:20], 8, x, 8, 2, 8, 8, 8, 1, m, m, m, nil), "kt has 20 elements; want >= 64"},
		{FoldTile(x, 8, x, 8, x, 8, x[:9], 8, 2, 8, 8, 8, 1, m, m, m, nil), "v has 9 elements; want >= 64"},
		{FoldTile(x, 8, x, 8, x, 8, x, 8, 5, 8, 8, 8, 1, m, m, m, nil), "m, z and alpha have 4, 4 and 4 elements; want >= 5"},
		{FoldTile(x, 8, x, 8, x, 8, x, 8, 2, 8, 8, 8, 1, m, m, m, []int{1}), "vis has 1 elements; want >= 2"},
		{FoldTile(x, 8, x, 8, x, 8, x, 8, 2, 8, 8, 8, 1, m, m, m, []int{1, 9}), "vis[1] is 9; want 0 to cols (8)"},
	} {
		require.ErrorContains(t, c.err, "kernel.FoldTile: ")
		require.ErrorContains(t, c.err, c.want)
	}
	require.NoError(t, FoldTile(nil, 0, nil, 0, nil, 0, nil, 0, 0, 0, 0, 0, 1, nil, nil, nil, nil))
}
