// Package fp16 provides the half-precision and 8-bit storage formats used
// by flashgo: IEEE 754 binary16 ([Float16]), bfloat16 ([BFloat16]) and the
// OCP 8-bit floating-point formats E4M3FN ([Float8E4M3]) and E5M2
// ([Float8E5M2]) of fp8 KV caches.
//
// The types are storage formats only. They exist to halve the memory
// footprint and bandwidth of Q/K/V tensors and KV caches; no arithmetic is
// defined on them. Kernels decode to float32, accumulate in float32 and, if
// they must, encode the result back. Keeping the arithmetic in float32 avoids
// the catastrophic accumulation error that 11-bit (binary16) or 8-bit
// (bfloat16) significands would cause in long dot products and softmax sums.
//
// # Rounding
//
// Narrowing conversions ([FromFloat32], [BFloat16FromFloat32], [EncodeFloat16],
// [EncodeBFloat16]) round to nearest, ties to even (RNE), the IEEE 754 default.
// Values too large for the format round to ±Inf exactly as RNE with an
// unbounded exponent would decide (so binary16 65519.99 becomes 65504 while
// 65520 becomes +Inf), and values too small round through the subnormal
// range to a zero of the same sign. Widening conversions ([Float16.Float32],
// [BFloat16.Float32], [DecodeFloat16], [DecodeBFloat16]) are exact.
//
// The 8-bit narrowing conversions ([Float8E4M3FromFloat32],
// [Float8E5M2FromFloat32], [EncodeFloat8E4M3], [EncodeFloat8E5M2]) also
// round to nearest even but saturate: a value whose rounded magnitude
// exceeds the largest finite one, ±Inf included, becomes that largest
// value of its sign (448 for E4M3FN, 57344 for E5M2), as the fp8 KV cache
// writes of vLLM do. Their widening conversions are exact too.
//
// # NaN handling
//
// NaN always converts to NaN, keeping its sign. Narrowing always yields a
// quiet NaN: it sets the most significant mantissa bit (the quiet bit),
// because simply dropping the low mantissa bits could otherwise leave an
// all-zero mantissa and turn a NaN into an infinity. Widening a binary16 NaN
// also sets the float32 quiet bit, matching github.com/x448/float16, which is
// the reference implementation for binary16 in this package. Widening a
// bfloat16 is a plain 16-bit shift, so its NaN bits pass through unchanged.
//
// The package is pure Go (no assembly, no cgo) so that it builds everywhere
// and serves as the reference for SIMD implementations elsewhere.
package fp16
