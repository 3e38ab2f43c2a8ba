//go:build purego || !(amd64 || arm64)

package kernel

func available() []impl { return []impl{implGeneric} }

func defaultDot(impl) *dotRow { return nil }

// archTable: without assembly every level is the generic rows.
func archTable() (f32 [numImpl]*f32Row, bf16 [numImpl]*bf16Row, dot []*dotRow) {
	return f32, bf16, nil
}
