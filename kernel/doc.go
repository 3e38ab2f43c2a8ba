// Package kernel holds the tile kernels of flashgo's attention engine: the
// score tile S = scale·Q·Kᵀ, the accumulation O += P·V, the exponential of a
// row fused with its sum, the row maximum, the rescale of an output row, and
// the packing of K and V tiles into float32 panels (converting fp16 and
// bfloat16 on the way).
//
// Every kernel works on plain row-major float32 blocks addressed by a slice
// and a leading dimension (the distance, in elements, between the starts of
// consecutive rows). Kernels know nothing of heads, masks or sequences: the
// attention package decides which tile to compute and what to do with it.
//
// The pure-Go functions in this package are the specification: each doc
// comment states the reference loop, and the assembly versions are tested
// against them. Kernels that take leading dimensions check that every slice
// is long enough and return an error otherwise; they never write anything
// when they return an error.
package kernel
