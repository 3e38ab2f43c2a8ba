//go:build amd64 && !purego

package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkFoldTile times the fold of one tile of 64 keys into the
// engine's block of 256 query rows: the four calls through a score tile
// (chain) and FoldTile (fused), at each assembly level, with the rates
// (4·rows·cols·d flops a call) against that level's FMA peak. Half the
// rows' maxima move at every call (their alpha is not 1).
func BenchmarkFoldTile(b *testing.B) {
	for _, v := range gemmBenchVariants()[1:] {
		for _, d := range []int{64, 128} {
			for _, fused := range []bool{false, true} {
				name := fmt.Sprintf("%s/d=%d/chain", v.name, d)
				if fused {
					name = fmt.Sprintf("%s/d=%d/fused", v.name, d)
				}
				b.Run(name, func(b *testing.B) { benchFoldTile(b, v.name, v.peak, 256, 64, d, fused) })
			}
		}
	}
}

func benchFoldTile(b *testing.B, name string, p fmaPeak, rows, cols, d int, fused bool) {
	rng := rand.New(rand.NewPCG(5, 5))
	ld := d
	o := make([]float32, rows*ld)
	q := gemmRandom(rows*d, 0.1)
	kt := gemmRandom(d*cols, 1)
	v := gemmRandom(cols*d, 1e-3)
	s := make([]float32, rows*cols)
	m0 := make([]float32, rows)
	for i := range m0 {
		m0[i] = float32(rng.NormFloat64())
		if i%2 == 0 {
			m0[i] = 100 // a maximum the tile does not reach
		}
	}
	m, z, alpha := make([]float32, rows), make([]float32, rows), make([]float32, rows)
	f := func() {
		copy(m, m0)
		if fused {
			_ = FoldTile(o, ld, q, d, kt, cols, v, ld, rows, cols, d, d, 0.125, m, z, alpha, nil)
			return
		}
		_ = QKT(s, cols, q, d, kt, cols, rows, cols, d, 0.125)
		_ = OnlineSoftmax(s, cols, rows, cols, m, z, alpha)
		_ = ScaleRows(o, ld, alpha, rows, d)
		_ = PV(o, ld, s, cols, v, ld, rows, cols, d)
	}
	benchGemm(b, name, p, 4*rows*cols*d, f)
}

// BenchmarkFoldTileWalk folds the tiles of a sequence of nk keys into a
// block of 256 rows, fresh accumulators each time, as a float32 prefill
// block walks a head: K panels tile after tile and V rows from memory the
// tiles share with nothing else (64 KiB a tile: 1 MiB in all for 1024
// keys, which a core's L2 may hold, 4 MiB for 4096), the queries and
// outputs of the block (128 KiB each). Against BenchmarkFoldTile, which
// folds one tile over and over, it adds the traffic of K, V and the
// block's rows through the caches.
func BenchmarkFoldTileWalk(b *testing.B) {
	for _, v := range gemmBenchVariants()[1:] {
		for _, nk := range []int{1024, 4096} {
			for _, fused := range []bool{false, true} {
				name := fmt.Sprintf("%s/nk=%d/chain", v.name, nk)
				if fused {
					name = fmt.Sprintf("%s/nk=%d/fused", v.name, nk)
				}
				b.Run(name, func(b *testing.B) { benchFoldTileWalk(b, v.name, v.peak, 256, nk, 128, fused) })
			}
		}
	}
}

func benchFoldTileWalk(b *testing.B, name string, p fmaPeak, rows, nk, d int, fused bool) {
	const cols = 64
	tiles := nk / cols
	o := make([]float32, rows*d)
	q := gemmRandom(rows*d, 0.1)
	kt := gemmRandom(tiles*d*cols, 1)
	v := gemmRandom(nk*d, 1)
	s := make([]float32, rows*cols)
	m, z, alpha := make([]float32, rows), make([]float32, rows), make([]float32, rows)
	f := func() {
		clear(o)
		for i := range m {
			m[i], z[i] = negInf, 0
		}
		for t := range tiles {
			ktt, vt := kt[t*d*cols:], v[t*cols*d:]
			if fused {
				_ = FoldTile(o, d, q, d, ktt, cols, vt, d, rows, cols, d, d, 0.125, m, z, alpha, nil)
				continue
			}
			_ = QKT(s, cols, q, d, ktt, cols, rows, cols, d, 0.125)
			_ = OnlineSoftmax(s, cols, rows, cols, m, z, alpha)
			_ = ScaleRows(o, d, alpha, rows, d)
			_ = PV(o, d, s, cols, vt, d, rows, cols, d)
		}
	}
	benchGemm(b, name, p, 4*rows*nk*d, f)
}
