//go:build purego || !amd64

package kernel

func peakLoop() (run func(n int), flops int, isa string) { return goPeak, goPeakFlops, "go" }

func bf16PeakLoop() (run func(n int), flops int, isa string) { return nil, 0, "" }
