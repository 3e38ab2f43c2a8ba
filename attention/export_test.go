package attention

// SetPrepack turns the bf16 prefill's packing of K and V once per call on
// or off, for tests that compare it with packing every tile, and returns
// the function that restores the setting.
func SetPrepack(on bool) (restore func()) {
	prev := prepackEnabled
	prepackEnabled = on
	return func() { prepackEnabled = prev }
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

// SetFuseRows sets the rows of a chunk of the bf16 fused fold (0: never
// fuse), for tests that compare chunk sizes, and returns the function
// that restores the setting.
func SetFuseRows(n int) (restore func()) {
	prev := fuseRows
	fuseRows = n
	if n == 0 {
		fuseRows = 1 << 30
	}
	return func() { fuseRows = prev }
}
