package attention

import "unsafe"

// SetPrepack turns the bf16 prefill's packing of K and V once per call on
// or off, for tests that compare it with packing every tile, and returns
// the function that restores the setting.
func SetPrepack(on bool) (restore func()) {
	prev := prepackEnabled
	prepackEnabled = on
	return func() { prepackEnabled = prev }
}

// SetFoldTiles turns the float32 path's fused tile fold (kernel.FoldTile)
// on or off, for tests that compare it with the chain of kernels it
// stands for, and returns the function that restores the setting.
func SetFoldTiles(on bool) (restore func()) {
	prev := foldEnabled
	foldEnabled = on
	return func() { foldEnabled = prev }
}

// SetFuseChunks turns the bf16 path's fused tile kernel
// (kernel.FoldChunkBF16, where the level has one) on or off, for tests
// that compare it with the chain of kernels it stands for, and returns the
// function that restores the setting.
func SetFuseChunks(on bool) (restore func()) {
	prev := fuseChunks
	fuseChunks = on
	return func() { fuseChunks = prev }
}

// SetPrepackBytes sets the bound on the bf16 prefill's prepacked panels
// (maxPrepackBytes), for tests of calls whose panels take turns in fewer
// slots than they have heads, and returns the function that restores it.
func SetPrepackBytes(n int) (restore func()) {
	prev := maxPrepackBytes
	maxPrepackBytes = n
	return func() { maxPrepackBytes = prev }
}

// PrepackSlotBytes returns the bytes of one (batch, head)'s prepacked
// panels for keys of nk positions and head dims d and dv.
func PrepackSlotBytes(nk, d, dv int) int {
	ldK, ldV := 2*roundUp(nk, 16)+panelPad, 2*roundUp(dv, 16)+panelPad
	return 2*((d+1)/2*ldK+(nk+1)/2*ldV) + 4*(nk+1)
}

// SetBlockRefs sets the reference count of block b of c and returns the
// previous count, for tests of the count's limit (2^31 − 1 forks would
// take too long).
func SetBlockRefs(c *PagedCache, b int, n int32) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.ref[b]
	c.ref[b] = n
	return prev
}

// PagedStorage returns the slices behind an F32 paged cache's keys and
// values, so that a test can check that a failed call wrote nothing.
func PagedStorage(c *PagedCache) (k, v []float32) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.k.f32, c.v.f32
}

// SetFuseRows sets the rows of a chunk of the bf16 chunked fold (0: a
// block's rows in one chunk, which computes what the fold of a whole tile
// does), for tests that compare chunk sizes, and returns the function
// that restores the setting.
func SetFuseRows(n int) (restore func()) {
	prev := fuseRows
	fuseRows = n
	if n == 0 {
		fuseRows = 1 << 30
	}
	return func() { fuseRows = prev }
}

// CacheMemory returns the memory behind a KVCache's storage: keys, values
// and, for Q8, their scales, so that a test can check that a call
// modified none of it, whatever the element type, or place an output on
// it.
func CacheMemory(c *KVCache) [][]byte { return tensorMemory(&c.k, &c.v) }

// PagedCacheMemory is CacheMemory for a PagedCache's pools.
func PagedCacheMemory(c *PagedCache) [][]byte {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return tensorMemory(&c.k, &c.v)
}

// TensorMemory returns the memory behind a view's slice (and Q8 or fp8
// scales).
func TensorMemory(t Tensor) [][]byte { return tensorMemory(&t) }

func tensorMemory(ts ...*Tensor) [][]byte {
	var out [][]byte
	for _, t := range ts {
		switch t.dtype {
		case F32:
			out = append(out, memoryOf(t.f32))
		case F16:
			out = append(out, memoryOf(t.f16))
		case BF16:
			out = append(out, memoryOf(t.bf16))
		case Q8:
			out = append(out, memoryOf(t.i8), memoryOf(t.q8s))
		case FP8E4M3:
			out = append(out, memoryOf(t.e4m3), memoryOf(t.f8s))
		case FP8E5M2:
			out = append(out, memoryOf(t.e5m2), memoryOf(t.f8s))
		}
	}
	return out
}

func memoryOf[T any](s []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// PoolRow returns row (block, head, pos) of a pool view widened to
// float32 as the engine reads it, for tests of what PagedKV.Write stored.
func PoolRow(t Tensor, blk, h, pos int) []float32 {
	row := make([]float32, t.Dim)
	loadRow(row, &t, t.Offset(blk, h, pos), h)
	return row
}

// PackedPanels returns the memory of p's panels: the bfloat16 K and V
// pair panels, the counts of non-finite value rows, the float32 K and V
// panels.
func PackedPanels(p *PackedPrefix) [][]byte {
	pre := &p.pre
	return [][]byte{memoryOf(pre.k), memoryOf(pre.v), memoryOf(pre.bad), memoryOf(pre.kf), memoryOf(pre.vf)}
}

// PackedCounts returns the counts of non-finite value rows of a prefix of
// n positions packed for bfloat16: entry hk·(n+1) + j is K/V head hk's
// number among keys [0, j).
func PackedCounts(p *PackedPrefix, hkv, n int) []int32 { return p.pre.bad[:hkv*(n+1)] }
