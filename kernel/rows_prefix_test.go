package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/fp16"
)

// TestPVRowsColumnPrefix checks what a V that is a view of the first dv
// components of wider rows (MLA's absorbed decode: V = K's first 512 of
// 576) relies on: PVRows and PVRowsGather over the first dv columns of
// rows of d give, bit for bit, the first dv columns of the call over all
// d, whichever vector, register block or tail a column falls in, for every
// element type and implementation.
func TestPVRowsColumnPrefix(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		t.Run("f32", testPVRowsColumnPrefix[float32])
		t.Run("f16", testPVRowsColumnPrefix[fp16.Float16])
		t.Run("bf16", testPVRowsColumnPrefix[fp16.BFloat16])
		t.Run("q8", testPVRowsColumnPrefix[int8])
		t.Run("e4m3", testPVRowsColumnPrefix[fp16.Float8E4M3])
		t.Run("e5m2", testPVRowsColumnPrefix[fp16.Float8E5M2])
	})
}

func testPVRowsColumnPrefix[T RowElem](t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 48))
	for _, sh := range [][2]int{{72, 40}, {200, 136}, {576, 512}, {64, 8}, {48, 24}, {40, 33}, {72, 36}, {24, 7}, {17, 1}, {130, 129}, {96, 65}} {
		d, dv := sh[0], sh[1]
		ld := rowLds[T](d)[1]
		for _, rows := range []int{1, 2, 3, 4, 5, 9} {
			for _, cols := range []int{1, 5, 64} {
				p := make([]float32, rows*cols)
				fill(rng, p)
				x := makeRows[T](rng, cols, ld, d)
				off := make([]int, cols)
				for j := range off {
					off[j] = (cols - 1 - j) * ld // backwards: a gather that is no stride
				}
				o0 := make([]float32, rows*d)
				fill(rng, o0)
				part0 := make([]float32, rows*dv)
				for i := range rows {
					copy(part0[i*dv:(i+1)*dv], o0[i*d:])
				}
				what := fmt.Sprintf("d %d dv %d rows %d cols %d", d, dv, rows, cols)
				full, part := append([]float32(nil), o0...), append([]float32(nil), part0...)
				require.NoError(t, PVRows(full, d, p, cols, x.x, x.scales, ld, rows, cols, d))
				require.NoError(t, PVRows(part, dv, p, cols, x.x, x.scales, ld, rows, cols, dv))
				checkColumnPrefix(t, "PVRows "+what, full, part, rows, d, dv)
				full, part = append([]float32(nil), o0...), append([]float32(nil), part0...)
				require.NoError(t, pvRowsGather(full, d, p, cols, x.x, x.scales, off, rows, cols, d, 0))
				require.NoError(t, pvRowsGather(part, dv, p, cols, x.x, x.scales, off, rows, cols, dv, 0))
				checkColumnPrefix(t, "PVRowsGather "+what, full, part, rows, d, dv)
			}
		}
	}
}

// checkColumnPrefix fails unless the rows of part (dv wide) are the first
// dv columns of the rows of full (d wide), bit for bit.
func checkColumnPrefix(t *testing.T, what string, full, part []float32, rows, d, dv int) {
	t.Helper()
	for i := range rows {
		var bad []int
		for c := range dv {
			if math.Float32bits(part[i*dv+c]) != math.Float32bits(full[i*d+c]) {
				bad = append(bad, c)
			}
		}
		if len(bad) > 0 {
			c := bad[0]
			t.Fatalf("%s: row %d differs in columns %v: column %d is %v over %d columns, %v over %d",
				what, i, bad, c, part[i*dv+c], dv, full[i*d+c], d)
		}
	}
}
