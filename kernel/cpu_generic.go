//go:build purego || !(amd64 || arm64)

package kernel

func available() []impl { return []impl{implGeneric} }
