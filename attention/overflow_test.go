package attention_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
)

// TestLayoutConstructorsOverflow checks that a shape with more elements
// than an int can count gives a layout that Validate rejects as too large,
// not strides that wrapped around (a negative or a plausible stride).
func TestLayoutConstructorsOverflow(t *testing.T) {
	for _, l := range []attention.Layout{
		attention.BHSD(1, 3, 1<<31, 1<<31), // heads·seq·dim wraps to a negative stride
		attention.BHSD(2, 1, 1<<32, 1<<32), // seq·dim wraps to 0
		attention.BSHD(1, 3, 1<<31, 1<<31),
		attention.BSHD(2, 1<<32, 1, 1<<32),
		attention.BHSD(1<<40, 1<<40, 1<<40, 1<<40),
	} {
		err := l.Validate()
		require.ErrorContains(t, err, "spans more elements than an int can index", "%+v", l)
		require.Error(t, attention.F32Tensor(nil, l).Validate())
	}
	// Sizes that fit are unchanged.
	require.Equal(t, attention.Layout{Batch: 2, Heads: 3, Seq: 4, Dim: 5, BatchStride: 60, HeadStride: 20, SeqStride: 5}, attention.BHSD(2, 3, 4, 5))
	require.Equal(t, attention.Layout{Batch: 2, Heads: 3, Seq: 4, Dim: 5, BatchStride: 60, HeadStride: 5, SeqStride: 15}, attention.BSHD(2, 4, 3, 5))
	// A negative size is reported as such.
	require.ErrorContains(t, attention.BHSD(1, -2, 1<<40, 1<<40).Validate(), "Heads is -2; want >= 0")
}

// TestKVCacheAppendOverflow appends a view that claims math.MaxInt
// positions (a zero SeqStride makes it valid): the length check must not
// overflow, and the cache must be left as it was.
func TestKVCacheAppendOverflow(t *testing.T) {
	const heads, capacity, d = 2, 4, 8
	c, err := attention.NewKVCache(attention.F32, heads, capacity, d)
	require.NoError(t, err)
	x := make([]float32, heads*d)
	for i := range x {
		x[i] = float32(i + 1)
	}
	one := attention.F32Tensor(x, attention.BHSD(1, heads, 1, d))
	require.NoError(t, c.Append(one, one))
	kBefore := append([]float32(nil), c.K().Float32s()...)
	vBefore := append([]float32(nil), c.V().Float32s()...)
	for _, n := range []int{math.MaxInt, math.MaxInt - 1, math.MaxInt - capacity + 2, capacity} {
		big := attention.F32Tensor(make([]float32, heads*d), attention.Layout{Batch: 1, Heads: heads, Seq: n, Dim: d, HeadStride: d})
		require.ErrorContains(t, c.Append(big, big), "positions to a cache holding 1 of 4; want at most 3", "n %d", n)
		require.Equal(t, 1, c.Len())
		require.Equal(t, kBefore, c.K().Float32s(), "n %d: keys changed", n)
		require.Equal(t, vBefore, c.V().Float32s(), "n %d: values changed", n)
	}
}

// TestPagedAppendOverflow appends a view that claims nearly math.MaxInt
// positions to a paged sequence: an error, nothing taken from the free
// list, nothing written.
func TestPagedAppendOverflow(t *testing.T) {
	const d, bs, nb = 8, 16, 4
	c, err := attention.NewPagedCache(attention.F32, 1, d, bs, nb)
	require.NoError(t, err)
	id := c.NewSequence()
	one := attention.F32Tensor([]float32{1, 2, 3, 4, 5, 6, 7, 8}, attention.BHSD(1, 1, 1, d))
	require.NoError(t, c.Append(id, one, one))
	k, v := attention.PagedStorage(c)
	kBefore, vBefore := append([]float32(nil), k...), append([]float32(nil), v...)
	for _, n := range []int{math.MaxInt - 14, math.MaxInt, math.MaxInt - bs + 1, bs*nb - 1 + 1} {
		big := attention.F32Tensor(make([]float32, d), attention.Layout{Batch: 1, Heads: 1, Seq: n, Dim: d})
		require.ErrorContains(t, c.Append(id, big, big), "need", "n %d", n)
		require.ErrorContains(t, c.Append(id, big, big), "free blocks; 3 of 4 are free", "n %d", n)
		require.NoError(t, c.Check())
		require.Equal(t, nb-1, c.FreeBlocks())
		n, err := c.Len(id)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, kBefore, k)
		require.Equal(t, vBefore, v)
	}
	// The whole rest of the pool still fits.
	rest := attention.F32Tensor(make([]float32, d), attention.Layout{Batch: 1, Heads: 1, Seq: bs*nb - 1, Dim: d})
	require.NoError(t, c.Append(id, rest, rest))
	require.NoError(t, c.Check())
	require.Equal(t, 0, c.FreeBlocks())
}

// TestPagedForkRefLimit checks that Fork refuses to push a block's
// reference count past its int32 range instead of wrapping it around.
func TestPagedForkRefLimit(t *testing.T) {
	c, err := attention.NewPagedCache(attention.F32, 1, 8, 4, 2)
	require.NoError(t, err)
	id := c.NewSequence()
	x := attention.F32Tensor(make([]float32, 8), attention.BHSD(1, 1, 1, 8))
	require.NoError(t, c.Append(id, x, x))
	prev := attention.SetBlockRefs(c, 0, math.MaxInt32)
	_, err = c.Fork(id)
	require.ErrorContains(t, err, "PagedCache.Fork: block 0 of sequence 1 is shared by 2147483647 sequences already")
	require.Equal(t, int32(math.MaxInt32), attention.SetBlockRefs(c, 0, prev))
	require.NoError(t, c.Check())
	_, err = c.Fork(id)
	require.NoError(t, err)
	require.NoError(t, c.Check())
}

// TestCacheConstructorsOverflow checks that cache shapes whose sizes
// overflow an int are errors (not panics or wrapped sizes).
func TestCacheConstructorsOverflow(t *testing.T) {
	_, err := attention.NewKVCache(attention.F32, 1<<40, 1<<40, 1<<40)
	require.ErrorContains(t, err, "NewKVCache")
	_, err = attention.NewPagedCache(attention.F32, 2, 1<<32+5, 1<<33+5, 1<<31-1)
	require.ErrorContains(t, err, "NewPagedCache")
	_, err = attention.NewPagedCache(attention.F32, 3, 1<<31, 1<<31, 2)
	require.ErrorContains(t, err, "spans more elements than an int can index")
}
