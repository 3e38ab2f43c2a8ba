package kernel

// The amd64 assembly is generated with avo by the programs in _asm, a module
// of its own so that avo never reaches flashgo's users. The generated files
// are committed; `make generate` (go generate ./...) rewrites them and CI
// fails if that changes anything.
//
// Each generator writes one kernel family's x_amd64.s and its stubs,
// x_amd64.go, under the family's stem; the hand-written Go that calls them
// is x_asm.go (see docs/design.md, "SIMD kernels").
//
// The arm64 row kernels (rows_arm64.s) are generated too, by _asm/neonrows,
// which assembles them with GNU as: it needs aarch64-linux-gnu-as and
// aarch64-linux-gnu-objdump (Debian's binutils-aarch64-linux-gnu). Their
// stubs, rows_arm64.go, are written by hand; neon_arm64.s is hand-written,
// its WORDs (instructions the Go assembler lacks) each followed by the
// instruction in a comment, which _asm/neoncheck's test assembles with GNU
// as to check the WORD (cd _asm && go test ./neoncheck/; CI runs it).

//go:generate sh -c "cd _asm && go run ./gemm -out ../gemm_amd64.s -stubs ../gemm_amd64.go -pkg kernel"
//go:generate sh -c "cd _asm && go run ./vec -out ../vec_amd64.s -stubs ../vec_amd64.go -pkg kernel"
//go:generate sh -c "cd _asm && go run ./decode -out ../rows_amd64.s -stubs ../rows_amd64.go -pkg kernel"
//go:generate sh -c "cd _asm && go run ./amx -out ../amx_amd64.s -stubs ../amx_amd64.go -pkg kernel"
//go:generate sh -c "cd _asm && go run ./bf16 -out ../bf16_amd64.s -stubs ../bf16_amd64.go -pkg kernel"
//go:generate sh -c "cd _asm && go run ./neonrows -out ../rows_arm64.s"
