//go:build amd64 && !purego

package kernel

// The tests' own account of what each level needs, from cpu_amd64.go's
// CPU features (amxErr says whether AMX can run), which
// TestFeatureTableAgrees checks the registry's against.

// cpuLacks says why this machine cannot run im, or returns "" if it can.
func cpuLacks(im impl) string {
	switch im {
	case implGeneric:
	case implAVX2:
		if !hasAVX2 {
			return "this machine has no AVX2, FMA and F16C"
		}
	case implAVX512:
		if !hasAVX512 {
			return "this machine has no AVX-512 F, BW and VL"
		}
	case implAVX512BF16:
		if !hasAVX512BF16 {
			return "this machine has no AVX-512 F, BW, VL and BF16"
		}
	case implAMX:
		if amxErr != nil {
			return amxErr.Error() // "this machine has no AMX-BF16", or what else is missing
		}
	default:
		return "this machine is not arm64"
	}
	return ""
}
