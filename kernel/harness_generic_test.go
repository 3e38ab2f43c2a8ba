//go:build purego || !(amd64 || arm64)

package kernel

// cpuLacks says why this build cannot run im, or returns "" if it can:
// built with the purego tag, or for an architecture without assembly, only
// the generic kernels exist.
func cpuLacks(im impl) string {
	if im == implGeneric {
		return ""
	}
	return "this build has no assembly (the purego tag, or neither amd64 nor arm64)"
}
