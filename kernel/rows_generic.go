//go:build !(amd64 || arm64) || purego

package kernel

// rowKernels reports whether QKRows and PVRows run in assembly here
// (Capabilities.RowKernels). They do on amd64 and arm64: elsewhere (and
// with purego) they are the generic Go loops, and packing a tile for QKT
// and PV is faster.
func rowKernels() bool { return false }

func qkRowsAsm[T RowElem](s []float32, ldS int, q []float32, ldQ int, k []T, scales []float32, ldK int, rows, cols, d int, scale float32, ahead int) int {
	return 0
}

func pvRowsAsm[T RowElem](o []float32, ldO int, p []float32, ldP int, v []T, scales []float32, ldV int, rows, cols, d, ahead int) int {
	if f, ok := any(v).([]float32); ok {
		pv(o, ldO, p, ldP, f, ldV, rows, cols, d)
		return d
	}
	return 0
}
