//go:build amd64 && !purego

package kernel

import "testing"

// The CPU features the tests ask about are cpu_amd64.go's (amxErr says
// whether AMX can run).

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

// skipUnlessImpl skips tb, naming what this machine lacks, unless it can
// run the named implementation: for the tests and benchmarks that call an
// implementation's kernels directly rather than through the dispatch.
func skipUnlessImpl(tb testing.TB, name string) {
	tb.Helper()
	if lacks := implLacks(name); lacks != "" {
		tb.Skipf("SKIP %s: %s", name, lacks)
	}
}
