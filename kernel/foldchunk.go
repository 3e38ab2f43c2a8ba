package kernel

import (
	"fmt"
	"math"

	"github.com/flashgo/flashgo/fp16"
)

// FoldChunkBF16 folds a tile of cols keys into the online softmax of rows
// query rows in bf16 precision and into their output accumulators. Row
// for row, it computes the bits of
//
//	QKTBF16(s, ldS, q, ldQ, kp, ldK, rows, cols, d, 1)
//	for i := range rows { // only with lo and vis non-nil
//		s[i*ldS : i*ldS+lo[i]] = −Inf
//		s[i*ldS+vis[i] : i*ldS+cols] = −Inf
//	}
//	OnlineSoftmaxBF16(s, ldS, p, ldP, rows, cols, scale, m, z, alpha)
//	ScaleRows(o, ldO, alpha, rows, dv)
//	PVBF16(o, ldO, p, ldP, vp, ldV, rows, cols, dv)
//
// under the same implementation. Where the level fuses them
// (FusesChunkBF16), one kernel computes them: a tile of 16 rows' scores
// go from the tile unit to the vector softmax through s, two tiles of 16
// rows, and its probabilities to the P·V product through p, one tile;
// the next tile's products are issued while the vector units take the
// current tile's exponentials. Elsewhere it runs the five steps in turn.
//
// Sizes: rows, cols, d, dv >= 0, cols and d even (pad as QKTBF16 and
// PVBF16 say), scale as OnlineSoftmaxBF16 takes it. With lo and vis
// non-nil (both, rows elements each, 0 <= lo[i] <= vis[i] <= cols), row i
// sees keys [lo[i], vis[i]) of the tile only: the values of the keys it
// does not see are multiplied by a zero probability, so they must be
// finite. s and p are scratch of roundUp(rows, 16) rows of cols
// elements; the fused kernel reads q's rows and reads and writes o's rows
// from rows up to roundUp(rows, 16) (what it leaves in o's there is
// unspecified), so q and o must hold that many rows too.
func FoldChunkBF16(o []float32, ldO int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, vp []fp16.BFloat16, ldV int,
	s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols, d, dv int, scale float32, m, z, alpha []float32, lo, vis []int) error {
	if err := checkFoldChunk(o, ldO, q, ldQ, kp, ldK, vp, ldV, s, ldS, p, ldP, rows, cols, d, dv, m, z, alpha, lo, vis); err != nil {
		return err
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	if f := cur.bf16.chunk; f != nil && fusesChunk(cols, d, dv, scale) {
		f(o, ldO, q, ldQ, kp, ldK, vp, ldV, s, ldS, p, ldP, rows, cols, d, dv, scale, m, z, alpha, lo, vis)
		return nil
	}
	foldChunkBF16Chain(o, ldO, q, ldQ, kp, ldK, vp, ldV, s, ldS, p, ldP, rows, cols, d, dv, scale, m, z, alpha, lo, vis)
	return nil
}

// FusesChunkBF16 reports whether FoldChunkBF16 runs as one fused kernel at
// the current level for tiles of cols keys, head dim d and value dim dv
// (with a positive finite scale): at the amx and avx512bf16 levels, where
// cols, d and dv are multiples of 32.
func FusesChunkBF16(cols, d, dv int) bool {
	return cur.bf16.chunk != nil && fusesChunk(cols, d, dv, 1)
}

func fusesChunk(cols, d, dv int, scale float32) bool {
	return cols > 0 && d > 0 && dv > 0 && cols%32 == 0 && d%32 == 0 && dv%32 == 0 && scale > 0 && scale <= math.MaxFloat32
}

// chunkPiece is the rows of a row tile that a fused kernel takes through
// the softmax after each block of the next tile's products: the tile's
// rows (16 for FoldChunkAMX, 12 for FoldChunkBF16AVX512) spread over the
// blocks of 64 keys (and a last one of 32) of a tile of cols keys.
func chunkPiece(cols, tileRows int) int {
	blocks := cols/64 + (cols/32)%2
	return (tileRows + blocks - 1) / blocks
}

func checkFoldChunk(o []float32, ldO int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, vp []fp16.BFloat16, ldV int,
	s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols, d, dv int, m, z, alpha []float32, lo, vis []int) error {
	const fn = "FoldChunkBF16"
	if rows < 0 || cols < 0 || d < 0 || dv < 0 {
		return fmt.Errorf("kernel.FoldChunkBF16: negative size (rows %d, cols %d, d %d, dv %d); want sizes >= 0", rows, cols, d, dv)
	}
	if cols%2 != 0 || d%2 != 0 {
		return fmt.Errorf("kernel.FoldChunkBF16: cols %d and d %d; want even numbers (pad with a zero probability and a zero component)", cols, d)
	}
	r16 := (rows + 15) &^ 15
	for _, b := range []struct {
		name              string
		n, ld, rows, cols int
	}{
		{"o", len(o), ldO, r16, dv}, {"q", len(q), ldQ, r16, d}, {"kp", len(kp), ldK, d / 2, 2 * cols},
		{"vp", len(vp), ldV, cols / 2, 2 * dv}, {"s", len(s), ldS, r16, cols}, {"p", len(p), ldP, r16, cols},
	} {
		if err := checkBlock(fn, b.name, b.n, b.ld, b.rows, b.cols); err != nil {
			return err
		}
	}
	if len(m) < rows || len(z) < rows || len(alpha) < rows {
		return fmt.Errorf("kernel.FoldChunkBF16: m, z and alpha have %d, %d and %d elements; want >= %d (rows)", len(m), len(z), len(alpha), rows)
	}
	if (lo == nil) != (vis == nil) {
		return fmt.Errorf("kernel.FoldChunkBF16: lo is nil and vis is not, or vis and not lo; want both or neither")
	}
	if lo == nil {
		return nil
	}
	if len(lo) < rows || len(vis) < rows {
		return fmt.Errorf("kernel.FoldChunkBF16: lo and vis have %d and %d elements; want >= %d (rows)", len(lo), len(vis), rows)
	}
	for i := range rows {
		if lo[i] < 0 || lo[i] > vis[i] || vis[i] > cols {
			return fmt.Errorf("kernel.FoldChunkBF16: row %d sees keys [%d, %d); want 0 <= lo <= vis <= cols (%d)", i, lo[i], vis[i], cols)
		}
	}
	return nil
}

// foldChunkBF16Chain is FoldChunkBF16 as its five steps on the kernels of
// the current level: the twin of the fused kernels.
func foldChunkBF16Chain(o []float32, ldO int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, vp []fp16.BFloat16, ldV int,
	s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols, d, dv int, scale float32, m, z, alpha []float32, lo, vis []int) {
	if d > 0 {
		qktBF16(s, ldS, q, ldQ, kp, ldK, rows, cols, d, 1)
	} else {
		for i := range rows {
			clear(s[i*ldS:][:cols])
		}
	}
	if lo != nil {
		negInf := float32(math.Inf(-1))
		for i := range rows {
			row := s[i*ldS:][:cols]
			for j := range lo[i] {
				row[j] = negInf
			}
			for j := vis[i]; j < cols; j++ {
				row[j] = negInf
			}
		}
	}
	softmaxBF16(s, ldS, p, ldP, rows, cols, scale, m, z, alpha)
	if dv > 0 {
		scaleRows(cur.f32, o, ldO, alpha, rows, dv)
		pvBF16(o, ldO, p, ldP, vp, ldV, rows, cols, dv)
	}
}
