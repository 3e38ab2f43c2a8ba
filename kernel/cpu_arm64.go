//go:build arm64 && !purego

package kernel

// Advanced SIMD is part of every arm64 CPU, so NEON needs no detection.
func available() []impl { return []impl{implNEON, implGeneric} }

// defaultDot: arm64 has no integer kernel of QKRowsQ8Dot.
func defaultDot(impl) *dotRow { return nil }
