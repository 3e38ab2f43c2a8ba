package kernel

// Capabilities is what the selected implementation tells its callers about
// how to call it well. The results of the kernels never depend on it: it
// only says which of two correct ways is faster here, and how callers
// should cut their work. It changes only when the implementation does
// (SetImplementation).
type Capabilities struct {
	// RowKernels reports whether QKRows and PVRows are SIMD kernels here.
	// Then a call with few query rows (a decode step) is faster reading K
	// and V rows where they lie with them than packing each tile for QKT
	// and PV; otherwise (the generic loops: purego, or an architecture
	// other than amd64 and arm64) packing is faster.
	RowKernels bool

	// PrefetchRows is how many rows ahead of the row they read QKRows and
	// PVRows prefetch. A caller whose rows are not evenly spaced (a paged
	// cache's blocks) finds where the row that many positions on lies and
	// passes its distance to QKRowsPrefetch and PVRowsPrefetch.
	PrefetchRows int

	// MatMulColumns is the number of output columns MatMul computes
	// together (its register block): a caller that splits a MatMul over
	// goroutines by columns keeps every slice but the last a multiple of
	// it, so that no slice ends in a partial block and the slices' results
	// are the bits of the whole.
	MatMulColumns int

	// Int8Dot reports whether QKRowsQ8Dot runs on integer dot-product
	// instructions here (VPDPBUSD on AVX512-VNNI or AVX-VNNI, VPMADDUBSW on
	// AVX2).
	// Elsewhere it is a Go loop, slower than QKRows on the same Q8 keys.
	Int8Dot bool
}

// Current returns the Capabilities of the implementation selected now.
func Current() Capabilities {
	return Capabilities{
		RowKernels:    rowKernels(),
		PrefetchRows:  prefetchRows,
		MatMulColumns: cur.f32.matMulColumns,
		Int8Dot:       cur.dot != nil,
	}
}
