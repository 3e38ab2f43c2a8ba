//go:build arm64 && !purego

package kernel

// cpuLacks says why this machine cannot run im, or returns "" if it can:
// every arm64 CPU has Advanced SIMD.
func cpuLacks(im impl) string {
	switch im {
	case implGeneric, implNEON:
		return ""
	}
	return "this machine is not amd64"
}
