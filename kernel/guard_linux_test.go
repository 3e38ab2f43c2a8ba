//go:build linux

package kernel

// TestGuardPages runs every exported kernel that reads or writes a buffer,
// under every implementation, on operands placed flush against an
// inaccessible page: the first element right after one, or the last right
// before one, with tight and loose leading dimensions and sizes off every
// vector width. A read or write of one element too many faults. (The NaN
// guards of the portable tests catch writes and most reads, but not a read
// that only fills a vector lane no result uses.)

import (
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/fp16"
)

// guardedArena is a mapping of size bytes between two inaccessible pages.
type guardedArena struct {
	mem  []byte
	data []byte
}

func newGuardedArena(t *testing.T, size int) *guardedArena {
	t.Helper()
	pg := syscall.Getpagesize()
	size = (size + pg - 1) / pg * pg
	mem, err := syscall.Mmap(-1, 0, size+2*pg, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[:pg], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mprotect(mem[pg+size:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	return &guardedArena{mem: mem, data: mem[pg : pg+size]}
}

// flush returns n elements, all set to v, that start right after the
// arena's leading guard page or, with atEnd, end right before the trailing
// one.
func flush[T any](a *guardedArena, n int, atEnd bool, v T) []T {
	off := 0
	if atEnd {
		off = len(a.data) - int(unsafe.Sizeof(v))*n
	}
	x := unsafe.Slice((*T)(unsafe.Pointer(&a.data[off])), n)
	for i := range x {
		x[i] = v
	}
	return x
}

// block returns n float32s (set to 1/2) flush against a guard page.
func (a *guardedArena) block(n int, atEnd bool) []float32 { return flush(a, n, atEnd, float32(0.5)) }

// bf16Block returns n bfloat16s (set to 1/2) flush against a guard page.
func (a *guardedArena) bf16Block(n int, atEnd bool) []fp16.BFloat16 {
	return flush(a, n, atEnd, fp16.BFloat16(0x3f00))
}

// half is 1/2 in each element type of the row kernels (an int8 of 1 with
// a scale of 1/2).
func half[T RowElem]() T {
	var x T
	switch p := any(&x).(type) {
	case *float32:
		*p = 0.5
	case *fp16.Float16:
		*p = 0x3800
	case *fp16.BFloat16:
		*p = 0x3f00
	case *int8:
		*p = 1
	case *fp16.Float8E4M3:
		*p = 0x30 // 0.5
	case *fp16.Float8E5M2:
		*p = 0x38 // 0.5
	}
	return x
}

// rowsOperand returns n rows of d elements of T, ld apart (rounded up to a
// whole Q8 block for int8), flush against a guard page in ka, with their
// scales flush against one in sa (nil but for int8 and 8-bit floats).
func rowsOperand[T RowElem](ka, sa *guardedArena, n, d, ld int, atEnd bool) (x []T, scales []float32, ldX int) {
	if _, ok := any(x).([]int8); ok {
		ld = (ld + Q8Block - 1) / Q8Block * Q8Block
		scales = flush(sa, ((n-1)*ld+d+Q8Block-1)/Q8Block, atEnd, float32(0.5))
	}
	if isFP8(x) {
		scales = flush(sa, 1, atEnd, float32(0.5)) // the one scale, against the guard
	}
	return flush(ka, (n-1)*ld+d, atEnd, half[T]()), scales, ld
}

// guardRows are the row kernels at one element type.
func guardRows[T RowElem](t *testing.T, a []*guardedArena, atEnd bool, gap, rows, cols, d int) {
	t.Helper()
	ldS, ldQ := cols+gap, d+gap
	s := a[0].block((rows-1)*ldS+cols, atEnd)
	q := a[1].block((rows-1)*ldQ+d, atEnd)
	k, ks, ldK := rowsOperand[T](a[2], a[3], cols, d, d+gap, atEnd)
	require.NoError(t, QKRows(s, ldS, q, ldQ, k, ks, ldK, rows, cols, d, 1))
	require.NoError(t, qkRowsPrefetch(s, ldS, q, ldQ, k, ks, ldK, rows, cols, d, 1, 2))
	// The gathering kernels on the same rows in reverse order, the first
	// and the last flush against the guards.
	off := make([]int, cols)
	for j := range off {
		off[j] = (cols - 1 - j) * ldK
	}
	require.NoError(t, qkRowsGather(s, ldS, q, ldQ, k, ks, off, rows, cols, d, 1, 0))
	if k8, ok := any(k).([]int8); ok {
		// The integer product reads the same keys; its query rows are its
		// own (Q8Query).
		var qq Q8Query
		require.NoError(t, qq.Set(q, ldQ, rows, d))
		require.NoError(t, QKRowsQ8Dot(s, ldS, &qq, k8, ks, ldK, cols, 1))
		require.NoError(t, qkRowsQ8DotGather(s, ldS, &qq, k8, ks, off, cols, 1, 0))
	}

	ldO, ldP := d+gap, cols+gap
	o := a[0].block((rows-1)*ldO+d, atEnd)
	p := a[1].block((rows-1)*ldP+cols, atEnd)
	v, vs, ldV := rowsOperand[T](a[2], a[3], cols, d, d+gap, atEnd)
	require.NoError(t, PVRows(o, ldO, p, ldP, v, vs, ldV, rows, cols, d))
	require.NoError(t, pvRowsPrefetch(o, ldO, p, ldP, v, vs, ldV, rows, cols, d, 2))
	for j := range off {
		off[j] = (cols - 1 - j) * ldV
	}
	require.NoError(t, pvRowsGather(o, ldO, p, ldP, v, vs, off, rows, cols, d, 0))

	// PackKPairs: n = cols keys of d components into (d+1)/2 pair rows.
	ldK2 := 2*cols + gap
	kp := flush(a[4], ((d+1)/2-1)*ldK2+2*cols, atEnd, fp16.BFloat16(0))
	k, ks, ldK = rowsOperand[T](a[2], a[3], cols, d, d+gap, atEnd)
	require.NoError(t, PackKPairs(kp, ldK2, k, ks, ldK, cols, d))
	// PackVPairs: n = cols keys of d components into (cols+1)/2 pair rows.
	ldV2 := 2*d + gap
	vp := flush(a[4], ((cols+1)/2-1)*ldV2+2*d, atEnd, fp16.BFloat16(0))
	_, err := PackVPairs(vp, ldV2, v, vs, ldV, cols, d)
	require.NoError(t, err)
}

func TestGuardPages(t *testing.T) {
	a := make([]*guardedArena, 10)
	for i := range a {
		a[i] = newGuardedArena(t, 1<<18)
	}
	cols := []int{}
	for c := 1; c <= 70; c++ {
		cols = append(cols, c)
	}
	cols = append(cols, 127, 128, 129)
	testAllImpls(t, func(t *testing.T) {
		for _, atEnd := range []bool{false, true} {
			for _, gap := range []int{0, 3} {
				// QKT and PV on the grid of the register blocks.
				for _, rows := range []int{1, 2, 5, 6, 7, 13} {
					for _, c := range cols {
						for _, d := range []int{1, 7, 16, 17, 33, 64, 65} {
							ldS, ldQ, ldK := c+gap, d+gap, c+gap
							s := a[0].block((rows-1)*ldS+c, atEnd)
							q := a[1].block((rows-1)*ldQ+d, atEnd)
							kt := a[2].block((d-1)*ldK+c, atEnd)
							require.NoError(t, QKT(s, ldS, q, ldQ, kt, ldK, rows, c, d, 1))
							ldO, ldP, ldV := d+gap, c+gap, d+gap
							o := a[3].block((rows-1)*ldO+d, atEnd)
							p := a[4].block((rows-1)*ldP+c, atEnd)
							v := a[5].block((c-1)*ldV+d, atEnd)
							require.NoError(t, PV(o, ldO, p, ldP, v, ldV, rows, c, d))
							if c <= FoldTileCols {
								guardFold(t, a, atEnd, gap, rows, c, d)
							}
						}
					}
				}
				// The vector kernels on whole slices.
				for _, n := range append(cols, 255, 256, 257, 1000, 1025) {
					src, dst := a[0].block(n, atEnd), a[1].block(n, atEnd)
					ExpSum(dst, src, 0.5)
					ExpSum(src, src, 0.5)
					Max(src)
					Scale(dst, src, 3)
					Scale(src, src, 3)
					guardEncoders(t, a, atEnd, n)
				}
				for _, rows := range []int{1, 2, 3, 5, 13} {
					for _, n := range []int{1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 65, 129} {
						for _, d := range []int{1, 2, 3, 7, 16, 17, 33, 65, 129} {
							guardPacks(t, a, atEnd, gap, n, d)
							guardRowOps(t, a, atEnd, gap, rows, n, d)
							guardRows[float32](t, a, atEnd, gap, rows, n, d)
							guardRows[fp16.Float16](t, a, atEnd, gap, rows, n, d)
							guardRows[fp16.BFloat16](t, a, atEnd, gap, rows, n, d)
							guardRows[int8](t, a, atEnd, gap, rows, n, d)
							guardRows[fp16.Float8E4M3](t, a, atEnd, gap, rows, n, d)
							guardRows[fp16.Float8E5M2](t, a, atEnd, gap, rows, n, d)
							guardBF16(t, a, atEnd, gap, rows, n, d)
						}
					}
				}
			}
		}
	})
}

// guardFold runs FoldTile on rows rows of a tile of cols keys, head dims
// d, with every row seeing the whole tile and then its own range.
func guardFold(t *testing.T, a []*guardedArena, atEnd bool, gap, rows, cols, d int) {
	t.Helper()
	ldO, ldQ, ldK, ldV := d+gap, d+gap, cols+gap, d+gap
	o := a[0].block((rows-1)*ldO+d, atEnd)
	q := a[1].block((rows-1)*ldQ+d, atEnd)
	kt := a[2].block((d-1)*ldK+cols, atEnd)
	v := a[3].block((cols-1)*ldV+d, atEnd)
	m := flush(a[6], rows, atEnd, float32(0.25))
	z := flush(a[7], rows, atEnd, float32(1))
	alpha := a[8].block(rows, atEnd)
	require.NoError(t, FoldTile(o, ldO, q, ldQ, kt, ldK, v, ldV, rows, cols, d, d, 0.5, m, z, alpha, nil))
	vis := flush(a[9], rows, atEnd, 0)
	for i := range vis {
		vis[i] = (i * 7) % (cols + 1)
	}
	require.NoError(t, FoldTile(o, ldO, q, ldQ, kt, ldK, v, ldV, rows, cols, d, d, 0.5, m, z, alpha, vis))
}

// guardPacks runs the packing kernels on n rows of d elements.
func guardPacks(t *testing.T, a []*guardedArena, atEnd bool, gap, n, d int) {
	t.Helper()
	ldSrc, ldT, ldR := d+gap, n+gap, d+gap
	src := a[0].block((n-1)*ldSrc+d, atEnd)
	h := flush(a[1], (n-1)*ldSrc+d, atEnd, fp16.Float16(0x3800))
	hb := flush(a[2], (n-1)*ldSrc+d, atEnd, fp16.BFloat16(0x3f00))
	dstT := a[3].block((d-1)*ldT+n, atEnd)
	require.NoError(t, PackKT(dstT, ldT, src, ldSrc, n, d))
	require.NoError(t, PackKTFloat16(dstT, ldT, h, ldSrc, n, d))
	require.NoError(t, PackKTBFloat16(dstT, ldT, hb, ldSrc, n, d))
	dstR := a[4].block((n-1)*ldR+d, atEnd)
	require.NoError(t, PackFloat16(dstR, ldR, h, ldSrc, n, d))
	require.NoError(t, PackBFloat16(dstR, ldR, hb, ldSrc, n, d))
	dstB := flush(a[5], (n-1)*ldR+d, atEnd, fp16.BFloat16(0))
	require.NoError(t, RoundRowsBF16(dstB, ldR, src, ldSrc, n, d))
}

// guardRowOps runs the softmax and the rescale on rows rows of cols scores
// and of d outputs.
func guardRowOps(t *testing.T, a []*guardedArena, atEnd bool, gap, rows, cols, d int) {
	t.Helper()
	ldS, ldP, ldO := cols+gap, cols+gap, d+gap
	m := flush(a[1], rows, atEnd, float32(0.25))
	z := flush(a[2], rows, atEnd, float32(1))
	alpha := a[3].block(rows, atEnd)
	s := a[0].block((rows-1)*ldS+cols, atEnd)
	require.NoError(t, OnlineSoftmax(s, ldS, rows, cols, m, z, alpha))
	s = a[0].block((rows-1)*ldS+cols, atEnd)
	p := flush(a[4], (rows-1)*ldP+cols, atEnd, fp16.BFloat16(0))
	require.NoError(t, OnlineSoftmaxBF16(s, ldS, p, ldP, rows, cols, 0.125, m, z, alpha))
	o := a[5].block((rows-1)*ldO+d, atEnd)
	require.NoError(t, ScaleRows(o, ldO, alpha, rows, d))
}

// guardBF16 runs the bfloat16 products with the reduction rounded up to
// an even length, as they require.
func guardBF16(t *testing.T, a []*guardedArena, atEnd bool, gap, rows, cols, d int) {
	t.Helper()
	d2, cols2 := d+d%2, cols+cols%2
	ldS, ldQ, ldK := cols+gap, d2+gap, 2*cols+gap
	s := a[0].block((rows-1)*ldS+cols, atEnd)
	q := a[1].bf16Block((rows-1)*ldQ+d2, atEnd)
	kp := a[2].bf16Block((d2/2-1)*ldK+2*cols, atEnd)
	require.NoError(t, QKTBF16(s, ldS, q, ldQ, kp, ldK, rows, cols, d2, 1))
	ldO, ldP, ldV := d+gap, cols2+gap, 2*d+gap
	o := a[3].block((rows-1)*ldO+d, atEnd)
	p := a[4].bf16Block((rows-1)*ldP+cols2, atEnd)
	vp := a[5].bf16Block((cols2/2-1)*ldV+2*d, atEnd)
	require.NoError(t, PVBF16(o, ldO, p, ldP, vp, ldV, rows, cols2, d))
}

// guardEncoders runs every encoder from each source type on n elements
// (Q8: the whole blocks of n, if any).
func guardEncoders(t *testing.T, a []*guardedArena, atEnd bool, n int) {
	t.Helper()
	x := a[2].block(n, atEnd)
	h := flush(a[3], n, atEnd, fp16.Float16(0x3800))
	b := flush(a[4], n, atEnd, fp16.BFloat16(0x3f00))
	dh := flush(a[5], n, atEnd, fp16.Float16(0))
	db := flush(a[6], n, atEnd, fp16.BFloat16(0))
	d4 := flush(a[7], n, atEnd, fp16.Float8E4M3(0))
	d5 := flush(a[8], n, atEnd, fp16.Float8E5M2(0))
	EncodeFloat16(dh, x)
	EncodeFloat16(dh, b)
	EncodeBFloat16(db, x)
	EncodeBFloat16(db, h)
	for _, f := range []func(){
		func() { EncodeFloat8(d4, x, 0.5) }, func() { EncodeFloat8(d4, h, 0.5) }, func() { EncodeFloat8(d4, b, 0.5) },
		func() { EncodeFloat8(d5, x, 0.5) }, func() { EncodeFloat8(d5, h, 0.5) }, func() { EncodeFloat8(d5, b, 0.5) },
	} {
		f()
	}
	if m := n / Q8Block * Q8Block; m > 0 {
		q := flush(a[9], m, atEnd, int8(0))
		sc := flush(a[1], m/Q8Block, atEnd, float32(0))
		x, h, b := a[2].block(m, atEnd), flush(a[3], m, atEnd, fp16.Float16(0x3800)), flush(a[4], m, atEnd, fp16.BFloat16(0x3f00))
		require.NoError(t, QuantizeQ8(q, sc, x))
		require.NoError(t, QuantizeQ8(q, sc, h))
		require.NoError(t, QuantizeQ8(q, sc, b))
	}
}
