package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/fp16"
)

// gatherOffsets returns cols row offsets into a pool of rows ld elements
// apart, laid out as a paged cache's are: runs of bs consecutive rows
// (bs 1 scatters every row) starting at random rows of the pool, some of
// them repeated, and a last row that may be any.
func gatherOffsets(rng *rand.Rand, poolRows, ld, cols, bs int) []int {
	off := make([]int, cols)
	for j := 0; j < cols; j += bs {
		r0 := rng.IntN(poolRows - bs + 1)
		for u := 0; u < bs && j+u < cols; u++ {
			off[j+u] = (r0 + u) * ld
		}
	}
	return off
}

func TestQKRowsGather(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		t.Run("f32", testQKRowsGather[float32])
		t.Run("f16", testQKRowsGather[fp16.Float16])
		t.Run("bf16", testQKRowsGather[fp16.BFloat16])
		t.Run("q8", testQKRowsGather[int8])
		t.Run("e4m3", testQKRowsGather[fp16.Float8E4M3])
		t.Run("e5m2", testQKRowsGather[fp16.Float8E5M2])
	})
}

// testQKRowsGather checks QKRowsGather against the float64 products of the
// rows it was pointed at, and bit for bit against QKRows scoring each key
// where it lies.
func testQKRowsGather[T RowElem](t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, rows := range []int{1, 2, 3, 4, 5, 9} {
		for _, cols := range []int{1, 2, 3, 4, 5, 7, 17, 64, 65} {
			for _, d := range rowDims {
				for _, bs := range []int{1, 3, 16} {
					ld := rowLds[T](d)[1]
					const poolRows = 40
					ldS, ldQ := cols+3, d+1
					sBuf, s := guarded((rows-1)*ldS + cols)
					_, q := guarded((rows-1)*ldQ + d)
					fill(rng, q)
					k := makeRows[T](rng, poolRows, ld, d)
					off := gatherOffsets(rng, poolRows, ld, cols, bs)
					const scale = 0.3
					require.NoError(t, qkRowsGather(s, ldS, q, ldQ, k.x, k.scales, off, rows, cols, d, scale, 0))
					checkGuards(t, sBuf, "QKRowsGather")
					one := make([]float32, rows*cols)
					for j, e := range off {
						require.NoError(t, QKRows(one[j:], cols, q, ldQ, k.x[e:], rowScalesOf(k.x, k.scales, e), ld, rows, 1, d, scale))
					}
					for i := range rows {
						for j := range cols {
							var want, mag float64
							for c := range d {
								p := float64(q[i*ldQ+c]) * k.val[off[j]+c]
								want += p
								mag += math.Abs(p)
							}
							if !near(s[i*ldS+j], scale*want, scale*mag, d) {
								t.Fatalf("rows %d cols %d d %d bs %d: s[%d][%d] = %v, want %v", rows, cols, d, bs, i, j, s[i*ldS+j], scale*want)
							}
							if math.Float32bits(s[i*ldS+j]) != math.Float32bits(one[i*cols+j]) {
								t.Fatalf("rows %d cols %d d %d bs %d: s[%d][%d] = %v, QKRows where the key lies gives %v", rows, cols, d, bs, i, j, s[i*ldS+j], one[i*cols+j])
							}
						}
						for j := cols; j < ldS && i*ldS+j < len(s); j++ {
							require.True(t, math.IsNaN(float64(s[i*ldS+j])), "QKRowsGather wrote the gap after row %d", i)
						}
					}
				}
			}
		}
	}
}

func TestPVRowsGather(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		t.Run("f32", testPVRowsGather[float32])
		t.Run("f16", testPVRowsGather[fp16.Float16])
		t.Run("bf16", testPVRowsGather[fp16.BFloat16])
		t.Run("q8", testPVRowsGather[int8])
		t.Run("e4m3", testPVRowsGather[fp16.Float8E4M3])
		t.Run("e5m2", testPVRowsGather[fp16.Float8E5M2])
	})
}

// testPVRowsGather checks PVRowsGather against the float64 sums and
// against PVRowsGather's generic twin, which adds the same products in
// the same order (one FMA a product, key after key), so within rounding
// of the accumulator only where the twin's products round differently.
func testPVRowsGather[T RowElem](t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	for _, rows := range []int{1, 2, 3, 4, 5, 9} {
		for _, cols := range []int{1, 2, 3, 16, 17, 64, 65} {
			for _, d := range rowDims {
				for _, bs := range []int{1, 3, 16} {
					ld := rowLds[T](d)[1]
					const poolRows = 40
					ldO, ldP := d+2, cols+1
					oBuf, o := guarded((rows-1)*ldO + d)
					_, p := guarded((rows-1)*ldP + cols)
					fill(rng, o)
					fill(rng, p)
					v := makeRows[T](rng, poolRows, ld, d)
					off := gatherOffsets(rng, poolRows, ld, cols, bs)
					o0 := append([]float32(nil), o...)
					require.NoError(t, pvRowsGather(o, ldO, p, ldP, v.x, v.scales, off, rows, cols, d, 0))
					checkGuards(t, oBuf, "PVRowsGather")
					for i := range rows {
						for c := range d {
							want, mag := float64(o0[i*ldO+c]), math.Abs(float64(o0[i*ldO+c]))
							for j := range cols {
								x := float64(p[i*ldP+j]) * v.val[off[j]+c]
								want += x
								mag += math.Abs(x)
							}
							if !near(o[i*ldO+c], want, mag, cols+1) {
								t.Fatalf("rows %d cols %d d %d bs %d: o[%d][%d] = %v, want %v", rows, cols, d, bs, i, c, o[i*ldO+c], want)
							}
						}
						for c := d; c < ldO && i*ldO+c < len(o); c++ {
							require.Equal(t, o0[i*ldO+c], o[i*ldO+c], "PVRowsGather wrote the gap after row %d", i)
						}
					}
				}
			}
		}
	}
}

// TestRowsGatherMatchesRows checks the promise a paged cache's decode
// relies on: gathering a tile's rows gives the bits of QKRows and PVRows
// over the same rows at a constant stride, for every implementation and
// element type (f32 values too, which PVRows hands to the prefill PV
// kernel).
func TestRowsGatherMatchesRows(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		t.Run("f32", func(t *testing.T) { testRowsGatherMatchesRows[float32](t, 130) })
		t.Run("f16", func(t *testing.T) { testRowsGatherMatchesRows[fp16.Float16](t, 130) })
		t.Run("bf16", func(t *testing.T) { testRowsGatherMatchesRows[fp16.BFloat16](t, 128) })
		t.Run("q8", func(t *testing.T) { testRowsGatherMatchesRows[int8](t, 128) })
		t.Run("e4m3", func(t *testing.T) { testRowsGatherMatchesRows[fp16.Float8E4M3](t, 128) })
		t.Run("e5m2", func(t *testing.T) { testRowsGatherMatchesRows[fp16.Float8E5M2](t, 128) })
	})
}

func testRowsGatherMatchesRows[T RowElem](t *testing.T, d int) {
	rng := rand.New(rand.NewPCG(45, 46))
	for _, rows := range []int{1, 4, 5} {
		for _, cols := range []int{1, 5, 64, 67} {
			ld := rowLds[T](d)[1]
			q := make([]float32, rows*d)
			fill(rng, q)
			p := make([]float32, rows*cols)
			fill(rng, p)
			x := makeRows[T](rng, cols, ld, d)
			off := make([]int, cols)
			for j := range off {
				off[j] = j * ld
			}
			s1, s2 := make([]float32, rows*cols), make([]float32, rows*cols)
			require.NoError(t, QKRows(s1, cols, q, d, x.x, x.scales, ld, rows, cols, d, 0.2))
			require.NoError(t, qkRowsGather(s2, cols, q, d, x.x, x.scales, off, rows, cols, d, 0.2, 8))
			require.Equal(t, s1, s2, "QK rows %d cols %d", rows, cols)
			o1, o2 := make([]float32, rows*d), make([]float32, rows*d)
			fill(rng, o1)
			copy(o2, o1)
			require.NoError(t, PVRows(o1, d, p, cols, x.x, x.scales, ld, rows, cols, d))
			require.NoError(t, pvRowsGather(o2, d, p, cols, x.x, x.scales, off, rows, cols, d, 8))
			require.Equal(t, o1, o2, "PV rows %d cols %d", rows, cols)
		}
	}
}

// TestRowsGatherAsmMatchesGeneric compares the gathering assembly with the
// generic twins on scattered rows, within rounding.
func TestRowsGatherAsmMatchesGeneric(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		if !Current().RowKernels {
			t.Skipf("QKRows and PVRows have no assembly in %s", Implementation())
		}
		t.Run("f32", testRowsGatherAsmMatchesGeneric[float32])
		t.Run("f16", testRowsGatherAsmMatchesGeneric[fp16.Float16])
		t.Run("bf16", testRowsGatherAsmMatchesGeneric[fp16.BFloat16])
		t.Run("q8", testRowsGatherAsmMatchesGeneric[int8])
		t.Run("e4m3", testRowsGatherAsmMatchesGeneric[fp16.Float8E4M3])
		t.Run("e5m2", testRowsGatherAsmMatchesGeneric[fp16.Float8E5M2])
	})
}

func testRowsGatherAsmMatchesGeneric[T RowElem](t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 48))
	for _, d := range []int{32, 64, 96, 128, 160, 256} {
		const rows, cols, poolRows = 7, 67, 50
		q := make([]float32, rows*d)
		fill(rng, q)
		p := make([]float32, rows*cols)
		fill(rng, p)
		x := makeRows[T](rng, poolRows, d, d)
		off := gatherOffsets(rng, poolRows, d, cols, 4)
		s1, s2 := make([]float32, rows*cols), make([]float32, rows*cols)
		require.NoError(t, qkRowsGather(s1, cols, q, d, x.x, x.scales, off, rows, cols, d, 0.125, 0))
		qkRowsGatherGeneric(s2, cols, q, d, x.x, x.scales, off, rows, cols, 0, d, 0.125)
		for i := range s1 {
			assert.InDelta(t, s2[i], s1[i], 1e-4*(1+math.Abs(float64(s2[i]))), "QK d %d score %d", d, i)
		}
		o1, o2 := make([]float32, rows*d), make([]float32, rows*d)
		fill(rng, o1)
		copy(o2, o1)
		require.NoError(t, pvRowsGather(o1, d, p, cols, x.x, x.scales, off, rows, cols, d, 0))
		pvRowsGatherGeneric(o2, d, p, cols, x.x, x.scales, off, rows, cols, 0, d)
		for i := range o1 {
			assert.InDelta(t, o2[i], o1[i], 1e-4*(1+math.Abs(float64(o2[i]))), "PV d %d output %d", d, i)
		}
	}
}

// TestRowsGatherPrefetchKeepsResults checks that the prefetch distance
// changes nothing but the speed, with the table long enough or not.
func TestRowsGatherPrefetchKeepsResults(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(49, 50))
		const rows, cols, d, poolRows = 5, 37, 96, 60
		q := make([]float32, rows*d)
		fill(rng, q)
		p := make([]float32, rows*cols)
		fill(rng, p)
		x := makeRows[fp16.Float16](rng, poolRows, d, d)
		off := gatherOffsets(rng, poolRows, d, cols+40, 16)
		want, wantO := make([]float32, rows*cols), make([]float32, rows*d)
		require.NoError(t, qkRowsGather(want, cols, q, d, x.x, nil, off, rows, cols, d, 0.3, 0))
		require.NoError(t, pvRowsGather(wantO, d, p, cols, x.x, nil, off, rows, cols, d, 0))
		for _, ahead := range []int{-5, 1, 16, 40, 41, 1000} {
			s, o := make([]float32, rows*cols), make([]float32, rows*d)
			require.NoError(t, qkRowsGather(s, cols, q, d, x.x, nil, off, rows, cols, d, 0.3, ahead))
			require.NoError(t, pvRowsGather(o, d, p, cols, x.x, nil, off, rows, cols, d, ahead))
			require.Equal(t, want, s, "QK ahead %d", ahead)
			require.Equal(t, wantO, o, "PV ahead %d", ahead)
		}
	})
}

func TestRowsGatherErrors(t *testing.T) {
	s, q := make([]float32, 256), make([]float32, 256)
	k8 := make([]int8, 128)
	k16 := make([]fp16.Float16, 64)
	for _, c := range []struct {
		err  error
		want string
	}{
		{qkRowsGather(s, 64, q, 64, k16, nil, []int{0, 8}, 1, 3, 8, 1, 0), "off has 2 offsets; want >= 3"},
		{qkRowsGather(s, 64, q, 64, k16, nil, []int{0, 57}, 1, 2, 8, 1, 0), "off[1] is 57; want 0 to len(k)-d = 56"},
		{qkRowsGather(s, 64, q, 64, k16, nil, []int{-1}, 1, 1, 8, 1, 0), "off[0] is -1"},
		{qkRowsGather(s, 4, q, 64, k16, nil, []int{0, 0, 0, 0, 0, 0, 0, 0}, 2, 8, 8, 1, 0), "leading dimension of s is 4; want >= 8"},
		{qkRowsGather(s, 64, q, 64, k8, make([]float32, 4), []int{0, 16}, 1, 2, 32, 1, 0), "off[1] is 16; want a multiple of 32"},
		{qkRowsGather(s, 64, q, 64, k8, make([]float32, 2), []int{0, 64}, 1, 2, 32, 1, 0), "k has 2 scales; want >= 3 for the row at off[1] = 64"},
		{qkRowsGather(s, 64, q, 64, k16, nil, []int{0}, -1, 1, 8, 1, 0), "negative size"},
		{pvRowsGather(s, 64, q, 64, k16, nil, []int{0, 60}, 1, 2, 8, 0), "off[1] is 60; want 0 to len(v)-d = 56"},
		{pvRowsGather(s, 64, q, 64, k8, nil, []int{0}, 1, 1, 32, 0), "v has 0 scales; want >= 1"},
		{pvRowsGather(s, 4, q, 64, k16, nil, []int{0}, 2, 1, 8, 0), "leading dimension of o is 4; want >= 8"},
	} {
		require.Error(t, c.err)
		assert.Contains(t, c.err.Error(), c.want)
	}
	// Nothing is written on error.
	for _, x := range s {
		require.Zero(t, x)
	}
}

func TestRowsGatherNoAllocations(t *testing.T) {
	testAllImpls(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(51, 52))
		const rows, cols, d, poolRows = 4, 64, 128, 100
		q := make([]float32, rows*d)
		fill(rng, q)
		s, o := make([]float32, rows*cols), make([]float32, rows*d)
		x := makeRows[int8](rng, poolRows, d, d)
		off := gatherOffsets(rng, poolRows, d, cols+16, 16)
		const dt = 20
		xt := makeRows[fp16.Float16](rng, poolRows, dt, dt)
		offT := gatherOffsets(rng, poolRows, dt, cols+16, 16)
		n := testing.AllocsPerRun(20, func() {
			if err := qkRowsGather(s, cols, q, d, x.x, x.scales, off, rows, cols, d, 0.1, 16); err != nil {
				panic(err)
			}
			if err := pvRowsGather(o, d, s, cols, x.x, x.scales, off, rows, cols, d, 16); err != nil {
				panic(err)
			}
			// A width that leaves columns to the Go tail where the
			// assembly takes whole vectors only (avx2).
			if err := pvRowsGather(o, dt, s, cols, xt.x, nil, offT, rows, cols, dt, 16); err != nil {
				panic(err)
			}
		})
		assert.Zero(t, n)
	})
}

func ExampleQKRowsGather() {
	// Two query rows against three float16 keys of dimension 4 that lie
	// out of order in a pool of rows, as a paged cache's blocks do.
	q := []float32{1, 0, 0, 0, 0, 1, 1, 0}
	pool := fp16.Float16s([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	off := []int{8, 0, 4} // key 0 is the pool's third row, and so on
	s := make([]float32, 2*3)
	if err := qkRowsGather(s, 3, q, 4, pool, nil, off, 2, 3, 4, 0.5, 0); err != nil {
		panic(err)
	}
	fmt.Println(s)
	// Output: [4.5 0.5 2.5 10.5 2.5 6.5]
}

// FuzzRowsGather runs QKRowsGather and PVRowsGather on fuzzed sizes and
// offset tables, valid or not (an offset past the pool, negative, or off a
// Q8 block; a table shorter than the keys), with the active
// implementation: an invalid call returns an error and writes nothing; a
// valid one gives the bits of QKRows and PVRows on each row where it lies.
func FuzzRowsGather(f *testing.F) {
	f.Add(uint8(4), uint8(17), uint8(128), uint8(40), uint8(0), uint8(16), uint8(0), uint64(1))
	f.Add(uint8(1), uint8(1), uint8(1), uint8(1), uint8(1), uint8(0), uint8(1), uint64(2))
	f.Add(uint8(9), uint8(65), uint8(33), uint8(3), uint8(3), uint8(70), uint8(2), uint64(3))
	f.Add(uint8(5), uint8(4), uint8(64), uint8(9), uint8(2), uint8(1), uint8(3), uint64(4))
	f.Fuzz(func(t *testing.T, r, c, dd, pr, kind, ahead, corrupt uint8, seed uint64) {
		rows, cols, d, poolRows := 1+int(r)%9, 1+int(c)%70, 1+int(dd)%160, 1+int(pr)%48
		rng := rand.New(rand.NewPCG(seed, 9))
		switch kind % 6 {
		case 0:
			fuzzRowsGather[float32](t, rng, rows, cols, d, poolRows, int(ahead), corrupt)
		case 1:
			fuzzRowsGather[fp16.Float16](t, rng, rows, cols, d, poolRows, int(ahead), corrupt)
		case 2:
			fuzzRowsGather[fp16.BFloat16](t, rng, rows, cols, d, poolRows, int(ahead), corrupt)
		case 3:
			fuzzRowsGather[int8](t, rng, rows, cols, d, poolRows, int(ahead), corrupt)
		case 4:
			fuzzRowsGather[fp16.Float8E4M3](t, rng, rows, cols, d, poolRows, int(ahead), corrupt)
		case 5:
			fuzzRowsGather[fp16.Float8E5M2](t, rng, rows, cols, d, poolRows, int(ahead), corrupt)
		}
	})
}

func fuzzRowsGather[T RowElem](t *testing.T, rng *rand.Rand, rows, cols, d, poolRows, ahead int, corrupt uint8) {
	ld := rowLds[T](d)[rng.IntN(2)]
	x := makeRows[T](rng, poolRows, ld, d)
	off := make([]int, cols+ahead)
	for j := range off {
		off[j] = rng.IntN(poolRows) * ld
	}
	_, q8 := any(x.x).([]int8)
	valid := true
	switch corrupt % 8 {
	case 1: // past the pool
		off[rng.IntN(cols)] = (poolRows-1)*ld + 1 + rng.IntN(d+ld)
		valid = false
	case 2:
		off[rng.IntN(cols)] = -1 - rng.IntN(100)
		valid = false
	case 3: // inside the pool but off a row start: valid but for int8
		j := rng.IntN(cols)
		if off[j] > 0 {
			off[j]--
			valid = !q8
		}
	case 4: // a table shorter than the keys
		off = off[:rng.IntN(cols)]
		valid = false
	}
	q := make([]float32, rows*d)
	fill(rng, q)
	s := make([]float32, rows*cols)
	fill(rng, s)
	s0 := append([]float32(nil), s...)
	err := qkRowsGather(s, cols, q, d, x.x, x.scales, off, rows, cols, d, 0.5, ahead)
	o := make([]float32, rows*d)
	fill(rng, o)
	o0 := append([]float32(nil), o...)
	errPV := pvRowsGather(o, d, s0, cols, x.x, x.scales, off, rows, cols, d, ahead)
	if !valid {
		if err == nil || errPV == nil {
			t.Fatalf("invalid offsets (case %d) accepted: QK %v, PV %v", corrupt%8, err, errPV)
		}
		require.Equal(t, s0, s, "QKRowsGather wrote on error")
		require.Equal(t, o0, o, "PVRowsGather wrote on error")
		return
	}
	require.NoError(t, err)
	require.NoError(t, errPV)
	want, wantO := make([]float32, rows*cols), append([]float32(nil), o0...)
	for j, e := range off[:cols] {
		require.NoError(t, QKRows(want[j:], cols, q, d, x.x[e:], rowScalesOf(x.x, x.scales, e), ld, rows, 1, d, 0.5))
		require.NoError(t, PVRows(wantO, d, s0[j:], cols, x.x[e:], rowScalesOf(x.x, x.scales, e), ld, rows, 1, d))
	}
	for i := range s {
		if math.Float32bits(s[i]) != math.Float32bits(want[i]) {
			t.Fatalf("QK score %d: %v, QKRows where the row lies gives %v", i, s[i], want[i])
		}
	}
	for i := range o {
		if math.Float32bits(o[i]) != math.Float32bits(wantO[i]) {
			t.Fatalf("PV output %d: %v, PVRows row by row gives %v", i, o[i], wantO[i])
		}
	}
}
