package kernel

// Capabilities is what the selected implementation tells its callers about
// how to call it well. The results of the kernels never depend on it: it
// only says which of two correct ways is faster here. It changes only when
// the implementation does (FLASHGO_KERNEL, or a test that selects
// another).
type Capabilities struct {
	// RowKernels reports whether QKRows and PVRows are SIMD kernels here.
	// Then a call with few query rows (a decode step) is faster reading K
	// and V rows where they lie with them than packing each tile for QKT
	// and PV; otherwise (the generic loops: purego, or an architecture
	// other than amd64 and arm64) packing is faster.
	RowKernels bool

	// FoldTile reports whether FoldTile runs as one SIMD kernel here;
	// elsewhere it runs the four kernels it stands for, in Go steps of a
	// few rows, no faster than calling them over a whole block.
	FoldTile bool

	// Int8Dot reports whether QKRowsQ8Dot runs on integer dot-product
	// instructions here; elsewhere it is a Go loop, slower than QKRows on
	// the same Q8 keys.
	Int8Dot bool
}

// Current returns the Capabilities of the implementation selected now.
func Current() Capabilities {
	return Capabilities{
		RowKernels: rowKernels(),
		FoldTile:   cur.f32.fold != nil,
		Int8Dot:    cur.dot != nil,
	}
}
