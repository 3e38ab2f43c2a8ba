package kernel

// The amd64 assembly is generated with avo by the programs in _asm, a module
// of its own so that avo never reaches flashgo's users. The generated files
// are committed; `make generate` (go generate ./...) rewrites them and CI
// fails if that changes anything.
//
// Each generator writes one kernel family's x_amd64.s and its stubs,
// x_amd64.go, under the family's stem, into internal/x86: a package of
// machine code that takes only pointers, integers and floats, which Go's
// internal rule keeps out of reach of kernel's users. The implementation
// table (table_amd64.go) is the Go that calls them (see docs/design.md,
// "SIMD kernels").
//
// The arm64 row kernels (internal/arm/rows_arm64.s) are generated too, by
// _asm/neonrows, which assembles them with GNU as: it needs
// aarch64-linux-gnu-as and aarch64-linux-gnu-objdump (Debian's
// binutils-aarch64-linux-gnu). Their stubs, internal/arm/rows_arm64.go, are
// written by hand; internal/arm/neon_arm64.s is hand-written, its WORDs
// (instructions the Go assembler lacks) each followed by the instruction in
// a comment, which _asm/neoncheck's test assembles with GNU as to check the
// WORD (cd _asm && go test ./neoncheck/; CI runs it).

//go:generate sh -c "cd _asm && go run ./gemm -out ../internal/x86/gemm_amd64.s -stubs ../internal/x86/gemm_amd64.go -pkg x86"
//go:generate sh -c "cd _asm && go run ./vec -out ../internal/x86/vec_amd64.s -stubs ../internal/x86/vec_amd64.go -pkg x86"
//go:generate sh -c "cd _asm && go run ./fused -out ../internal/x86/fused_amd64.s -stubs ../internal/x86/fused_amd64.go -pkg x86"
//go:generate sh -c "cd _asm && go run ./decode -out ../internal/x86/rows_amd64.s -stubs ../internal/x86/rows_amd64.go -pkg x86"
//go:generate sh -c "cd _asm && go run ./amx -out ../internal/x86/amx_amd64.s -stubs ../internal/x86/amx_amd64.go -pkg x86"
//go:generate sh -c "cd _asm && go run ./bf16 -out ../internal/x86/bf16_amd64.s -stubs ../internal/x86/bf16_amd64.go -pkg x86"
//go:generate sh -c "cd _asm && go run ./encode -out ../internal/x86/encode_amd64.s -stubs ../internal/x86/encode_amd64.go -pkg x86"
//go:generate sh -c "cd _asm && go run ./neonrows -out ../internal/arm/rows_arm64.s"
