// Package kernel holds the tile kernels of flashgo's attention engine: the
// score tile S = scale·Q·Kᵀ, the accumulation O += P·V, the exponential of a
// row fused with its sum, the online softmax of a tile, the row maximum, the
// rescale of an output row, and the packing of K and V tiles into float32
// panels (converting fp16 and bfloat16 on the way); FoldTile, the four
// float32 calls that fold a tile into a block's softmax and outputs in one
// (with their bits); the row kernels QKRows
// and PVRows, which read K and V rows where they lie in float32, fp16,
// bfloat16 or int8 (Q8, with its scales) and convert them in registers, for
// calls of few query rows, and QKRowsGather and PVRowsGather, the same
// over rows at any offsets (a paged cache's tile in one call);
// QKRowsQ8Dot, the integer Q·Kᵀ of Q8 query rows (Q8Query) against Q8
// keys (VPDPBUSD on AVX512-VNNI or AVX-VNNI, VPMADDUBSW on AVX2);
// the bfloat16 products QKTBF16 and PVBF16 on pair panels (PackKPairs,
// PackVPairs) with OnlineSoftmaxBF16, run on AMX or AVX512-BF16 where the
// CPU has them, and FoldChunkBF16, the five steps of a bf16 tile's fold in
// one kernel at the amx and avx512bf16 levels; and the encoders EncodeFloat16, EncodeBFloat16,
// EncodeFloat8 and QuantizeQ8, which round float32, fp16 or bfloat16 rows
// to a K/V storage type bit for bit as fp16's scalar conversions do (how
// attention stores keys and values).
//
// Every kernel works on row-major blocks addressed by a slice and a leading
// dimension (the distance, in elements, between the starts of consecutive
// rows): float32 blocks, except the K and V rows that the row kernels and
// the packs read in their storage type and the bfloat16 operands of the
// bf16 products. Kernels know nothing of heads, masks or sequences: the
// attention package decides which tile to compute and what to do with it.
//
// What a caller may rely on. The exported kernels are a stable surface
// that a runtime may reuse outside attention: the tile products QKT and PV
// (and MatMul, the general float32 matrix product that the model package
// uses for its projections), the row kernels QKRows and PVRows (with
// their gathering forms, and QKRowsQ8Dot and QKRowsQ8DotGather with
// Q8Query and QuantizeQ8), the softmax
// pieces (OnlineSoftmax, ExpSum, Max, Scale, ScaleRows, SoftCap, with
// their scalar Exp and Tanh) and FoldTile, the packs, and the bfloat16
// products with their packs and softmax, and the encoders. Current reports what the
// selected implementation tells its callers (whether the row kernels beat
// packing, whether FoldTile is one SIMD kernel, whether QKRowsQ8Dot runs
// on integer dot-product instructions) and MatMulSlice
// how to cut one MatMul over goroutines, so that a caller asks instead of
// knowing registers. Implementation, BF16Implementation and
// Implementations name the implementations. The selection is made once at
// start-up: the best this machine runs, unless the FLASHGO_KERNEL variable
// (LEVEL[,bf16=ROW][,int8dot=ROW]) names others. Tests and benchmarks
// switch rows through the module's registry (internal/impl), which also
// holds the reason FLASHGO_KERNEL was not followed (the package writes
// nothing to standard error) and measures one core's peaks for reports: the
// float32 FMA peak, and the bfloat16 product peak of the AMX tiles or
// AVX512-BF16 where the CPU has them.
// Everything else, the assembly (kernel/internal/x86, kernel/internal/arm)
// and its register plans, is internal and may change.
//
// The pure-Go functions in this package are the specification: each doc
// comment states the reference loop, and the assembly versions are tested
// against them. Kernels that take leading dimensions check that every slice
// is long enough and return an error otherwise; they never write anything
// when they return an error.
package kernel
