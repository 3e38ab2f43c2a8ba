//go:build !purego

#include "textflag.h"

// NEON tile kernels for arm64; see neon_arm64.go for the contract of each.
//
// The Go assembler has no mnemonic for several AdvSIMD instructions used here
// (FMLA by element, vector FADD/FSUB/FMUL/FMAX, FRINTN, FCVTZS, SMIN, the
// FCMxx compares, FADDP, FMAXV, FCVTL/FCVTL2). They are written as WORD with
// the instruction in GNU syntax in the comment; every such comment is the
// exact instruction whose encoding the WORD holds. kernel/_asm/neoncheck's
// test checks that: it assembles each comment with GNU as and compares.
//
// Register use: only R0-R17 and R19-R25 among the general registers, none
// of the reserved ones (R18 platform, R26 context, R27 REGTMP, R28 g, R29
// FP, R30 LR). Vector registers are all free in Go assembly.

// ROWPTRS sets p0..p3 to the starts of the next four rows of a block at
// base, ld bytes apart, clamped to the last row when fewer than four (left)
// remain: a block of 1-3 rows is computed as four rows, the extra ones
// duplicating the last real row. They load the same inputs and store the
// same values to the same place (every kernel loads all its rows before
// storing any), so the result is as if they were not there.
#define ROWPTRS(base, ld, left, p0, p1, p2, p3) \
	MOVD base, p0 \
	ADD ld, p0, p1 \
	CMP $1, left \
	CSEL GT, p1, p0, p1 \
	ADD ld, p1, p2 \
	CMP $2, left \
	CSEL GT, p2, p1, p2 \
	ADD ld, p2, p3 \
	CMP $3, left \
	CSEL GT, p3, p2, p3

// tailmask<>+16*(t-1) holds a 4-lane mask with the last t lanes set; PV
// uses it to store only the last t columns of an overlapping tail block.
DATA tailmask<>+0(SB)/8, $0
DATA tailmask<>+8(SB)/8, $-4294967296
DATA tailmask<>+16(SB)/8, $0
DATA tailmask<>+24(SB)/8, $-1
DATA tailmask<>+32(SB)/8, $-4294967296
DATA tailmask<>+40(SB)/8, $-1
GLOBL tailmask<>(SB), RODATA|NOPTR, $48

// func QktNEON(s *float32, ldS int, q *float32, ldQ int, kt *float32, ldK int, rows, cols, d int, scale float32)
//
// Register block: 4 rows x 16 keys, 16 accumulators V16-V31 (row r, keys
// 4c..4c+3 in V(16+4r+c)). Per step of 4 components: one 4-wide load of each
// q row (V0-V3), then for each component a 16-key load of the K panel row
// (V4-V7) and 16 FMLA by element. The d components are summed in chunks of
// qktChunk = 32 like qktGeneric: each chunk accumulates into zeroed
// registers, and the partial is then stored (first chunk) or added to the
// score tile in s; the last chunk also applies the scale. Remaining keys go
// through a 4 rows x 4 keys block (accumulators V16, V20, V24, V28) and a
// last 4-key block that ends at cols and may overlap the previous one: the
// overlapped keys are recomputed with exactly the same operations and
// rewritten with the same values. cols < 4 uses a scalar loop.
//
// R0 s (row block), R1 ldS*4, R2 q (row block), R3 ldQ*4, R4 kt, R5 ldK*4,
// R6 rows left, R7 cols*4, R8 d, R10-R13 q row pointers, R14-R17 s rows,
// R19 key offset (bytes), R20 chunk start, R21 chunk end, R22 components
// left in the chunk, R23 K panel pointer, R24 scratch pointer.
TEXT ·QktNEON(SB), NOSPLIT, $0-76
	MOVD s+0(FP), R0
	MOVD ldS+8(FP), R1
	MOVD q+16(FP), R2
	MOVD ldQ+24(FP), R3
	MOVD kt+32(FP), R4
	MOVD ldK+40(FP), R5
	MOVD rows+48(FP), R6
	MOVD cols+56(FP), R7
	MOVD d+64(FP), R8
	FMOVS scale+72(FP), F12
	VDUP V12.S[0], V12.S4
	CMP $1, R6
	BLT qkt_done
	CMP $1, R7
	BLT qkt_done
	CMP $0, R8
	BLT qkt_done
	LSL $2, R1
	LSL $2, R3
	LSL $2, R5
	LSL $2, R7
	CMP $16, R7
	BLT qkt_small

qkt_rows:
	ROWPTRS(R0, R1, R6, R14, R15, R16, R17)
	MOVD ZR, R19

	// 16-key blocks
qkt_c16:
	ADD $64, R19, R9
	CMP R7, R9
	BGT qkt_c4
	ROWPTRS(R2, R3, R6, R10, R11, R12, R13)
	ADD R19, R4, R23
	MOVD ZR, R20
qkt_c16_chunk:
	ADD $32, R20, R21
	CMP R8, R21
	CSEL GT, R8, R21, R21
	SUB R20, R21, R22
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	VEOR V18.B16, V18.B16, V18.B16
	VEOR V19.B16, V19.B16, V19.B16
	VEOR V20.B16, V20.B16, V20.B16
	VEOR V21.B16, V21.B16, V21.B16
	VEOR V22.B16, V22.B16, V22.B16
	VEOR V23.B16, V23.B16, V23.B16
	VEOR V24.B16, V24.B16, V24.B16
	VEOR V25.B16, V25.B16, V25.B16
	VEOR V26.B16, V26.B16, V26.B16
	VEOR V27.B16, V27.B16, V27.B16
	VEOR V28.B16, V28.B16, V28.B16
	VEOR V29.B16, V29.B16, V29.B16
	VEOR V30.B16, V30.B16, V30.B16
	VEOR V31.B16, V31.B16, V31.B16
	CMP $4, R22
	BLT qkt_c16_k1
qkt_c16_k4:
	VLD1.P 16(R10), [V0.S4]
	VLD1.P 16(R11), [V1.S4]
	VLD1.P 16(R12), [V2.S4]
	VLD1.P 16(R13), [V3.S4]
	VLD1.P (R23)(R5), [V4.S4, V5.S4, V6.S4, V7.S4]
	WORD $0x4f801090 // FMLA V16.4S, V4.4S, V0.S[0]
	WORD $0x4f8010b1 // FMLA V17.4S, V5.4S, V0.S[0]
	WORD $0x4f8010d2 // FMLA V18.4S, V6.4S, V0.S[0]
	WORD $0x4f8010f3 // FMLA V19.4S, V7.4S, V0.S[0]
	WORD $0x4f811094 // FMLA V20.4S, V4.4S, V1.S[0]
	WORD $0x4f8110b5 // FMLA V21.4S, V5.4S, V1.S[0]
	WORD $0x4f8110d6 // FMLA V22.4S, V6.4S, V1.S[0]
	WORD $0x4f8110f7 // FMLA V23.4S, V7.4S, V1.S[0]
	WORD $0x4f821098 // FMLA V24.4S, V4.4S, V2.S[0]
	WORD $0x4f8210b9 // FMLA V25.4S, V5.4S, V2.S[0]
	WORD $0x4f8210da // FMLA V26.4S, V6.4S, V2.S[0]
	WORD $0x4f8210fb // FMLA V27.4S, V7.4S, V2.S[0]
	WORD $0x4f83109c // FMLA V28.4S, V4.4S, V3.S[0]
	WORD $0x4f8310bd // FMLA V29.4S, V5.4S, V3.S[0]
	WORD $0x4f8310de // FMLA V30.4S, V6.4S, V3.S[0]
	WORD $0x4f8310ff // FMLA V31.4S, V7.4S, V3.S[0]
	VLD1.P (R23)(R5), [V4.S4, V5.S4, V6.S4, V7.S4]
	WORD $0x4fa01090 // FMLA V16.4S, V4.4S, V0.S[1]
	WORD $0x4fa010b1 // FMLA V17.4S, V5.4S, V0.S[1]
	WORD $0x4fa010d2 // FMLA V18.4S, V6.4S, V0.S[1]
	WORD $0x4fa010f3 // FMLA V19.4S, V7.4S, V0.S[1]
	WORD $0x4fa11094 // FMLA V20.4S, V4.4S, V1.S[1]
	WORD $0x4fa110b5 // FMLA V21.4S, V5.4S, V1.S[1]
	WORD $0x4fa110d6 // FMLA V22.4S, V6.4S, V1.S[1]
	WORD $0x4fa110f7 // FMLA V23.4S, V7.4S, V1.S[1]
	WORD $0x4fa21098 // FMLA V24.4S, V4.4S, V2.S[1]
	WORD $0x4fa210b9 // FMLA V25.4S, V5.4S, V2.S[1]
	WORD $0x4fa210da // FMLA V26.4S, V6.4S, V2.S[1]
	WORD $0x4fa210fb // FMLA V27.4S, V7.4S, V2.S[1]
	WORD $0x4fa3109c // FMLA V28.4S, V4.4S, V3.S[1]
	WORD $0x4fa310bd // FMLA V29.4S, V5.4S, V3.S[1]
	WORD $0x4fa310de // FMLA V30.4S, V6.4S, V3.S[1]
	WORD $0x4fa310ff // FMLA V31.4S, V7.4S, V3.S[1]
	VLD1.P (R23)(R5), [V4.S4, V5.S4, V6.S4, V7.S4]
	WORD $0x4f801890 // FMLA V16.4S, V4.4S, V0.S[2]
	WORD $0x4f8018b1 // FMLA V17.4S, V5.4S, V0.S[2]
	WORD $0x4f8018d2 // FMLA V18.4S, V6.4S, V0.S[2]
	WORD $0x4f8018f3 // FMLA V19.4S, V7.4S, V0.S[2]
	WORD $0x4f811894 // FMLA V20.4S, V4.4S, V1.S[2]
	WORD $0x4f8118b5 // FMLA V21.4S, V5.4S, V1.S[2]
	WORD $0x4f8118d6 // FMLA V22.4S, V6.4S, V1.S[2]
	WORD $0x4f8118f7 // FMLA V23.4S, V7.4S, V1.S[2]
	WORD $0x4f821898 // FMLA V24.4S, V4.4S, V2.S[2]
	WORD $0x4f8218b9 // FMLA V25.4S, V5.4S, V2.S[2]
	WORD $0x4f8218da // FMLA V26.4S, V6.4S, V2.S[2]
	WORD $0x4f8218fb // FMLA V27.4S, V7.4S, V2.S[2]
	WORD $0x4f83189c // FMLA V28.4S, V4.4S, V3.S[2]
	WORD $0x4f8318bd // FMLA V29.4S, V5.4S, V3.S[2]
	WORD $0x4f8318de // FMLA V30.4S, V6.4S, V3.S[2]
	WORD $0x4f8318ff // FMLA V31.4S, V7.4S, V3.S[2]
	VLD1.P (R23)(R5), [V4.S4, V5.S4, V6.S4, V7.S4]
	WORD $0x4fa01890 // FMLA V16.4S, V4.4S, V0.S[3]
	WORD $0x4fa018b1 // FMLA V17.4S, V5.4S, V0.S[3]
	WORD $0x4fa018d2 // FMLA V18.4S, V6.4S, V0.S[3]
	WORD $0x4fa018f3 // FMLA V19.4S, V7.4S, V0.S[3]
	WORD $0x4fa11894 // FMLA V20.4S, V4.4S, V1.S[3]
	WORD $0x4fa118b5 // FMLA V21.4S, V5.4S, V1.S[3]
	WORD $0x4fa118d6 // FMLA V22.4S, V6.4S, V1.S[3]
	WORD $0x4fa118f7 // FMLA V23.4S, V7.4S, V1.S[3]
	WORD $0x4fa21898 // FMLA V24.4S, V4.4S, V2.S[3]
	WORD $0x4fa218b9 // FMLA V25.4S, V5.4S, V2.S[3]
	WORD $0x4fa218da // FMLA V26.4S, V6.4S, V2.S[3]
	WORD $0x4fa218fb // FMLA V27.4S, V7.4S, V2.S[3]
	WORD $0x4fa3189c // FMLA V28.4S, V4.4S, V3.S[3]
	WORD $0x4fa318bd // FMLA V29.4S, V5.4S, V3.S[3]
	WORD $0x4fa318de // FMLA V30.4S, V6.4S, V3.S[3]
	WORD $0x4fa318ff // FMLA V31.4S, V7.4S, V3.S[3]
	SUB $4, R22
	CMP $4, R22
	BGE qkt_c16_k4
qkt_c16_k1:
	CBZ R22, qkt_c16_fold
qkt_c16_k1loop:
	FMOVS.P 4(R10), F0
	FMOVS.P 4(R11), F1
	FMOVS.P 4(R12), F2
	FMOVS.P 4(R13), F3
	VLD1.P (R23)(R5), [V4.S4, V5.S4, V6.S4, V7.S4]
	WORD $0x4f801090 // FMLA V16.4S, V4.4S, V0.S[0]
	WORD $0x4f8010b1 // FMLA V17.4S, V5.4S, V0.S[0]
	WORD $0x4f8010d2 // FMLA V18.4S, V6.4S, V0.S[0]
	WORD $0x4f8010f3 // FMLA V19.4S, V7.4S, V0.S[0]
	WORD $0x4f811094 // FMLA V20.4S, V4.4S, V1.S[0]
	WORD $0x4f8110b5 // FMLA V21.4S, V5.4S, V1.S[0]
	WORD $0x4f8110d6 // FMLA V22.4S, V6.4S, V1.S[0]
	WORD $0x4f8110f7 // FMLA V23.4S, V7.4S, V1.S[0]
	WORD $0x4f821098 // FMLA V24.4S, V4.4S, V2.S[0]
	WORD $0x4f8210b9 // FMLA V25.4S, V5.4S, V2.S[0]
	WORD $0x4f8210da // FMLA V26.4S, V6.4S, V2.S[0]
	WORD $0x4f8210fb // FMLA V27.4S, V7.4S, V2.S[0]
	WORD $0x4f83109c // FMLA V28.4S, V4.4S, V3.S[0]
	WORD $0x4f8310bd // FMLA V29.4S, V5.4S, V3.S[0]
	WORD $0x4f8310de // FMLA V30.4S, V6.4S, V3.S[0]
	WORD $0x4f8310ff // FMLA V31.4S, V7.4S, V3.S[0]
	SUBS $1, R22
	BNE qkt_c16_k1loop
qkt_c16_fold:
	// Fold the chunk into s: all rows are loaded before any is stored.
	CBZ R20, qkt_c16_scale
	ADD R19, R14, R24
	VLD1 (R24), [V4.S4, V5.S4, V6.S4, V7.S4]
	ADD R19, R15, R24
	VLD1 (R24), [V8.S4, V9.S4, V10.S4, V11.S4]
	WORD $0x4e30d490 // FADD V16.4S, V4.4S, V16.4S
	WORD $0x4e31d4b1 // FADD V17.4S, V5.4S, V17.4S
	WORD $0x4e32d4d2 // FADD V18.4S, V6.4S, V18.4S
	WORD $0x4e33d4f3 // FADD V19.4S, V7.4S, V19.4S
	WORD $0x4e34d514 // FADD V20.4S, V8.4S, V20.4S
	WORD $0x4e35d535 // FADD V21.4S, V9.4S, V21.4S
	WORD $0x4e36d556 // FADD V22.4S, V10.4S, V22.4S
	WORD $0x4e37d577 // FADD V23.4S, V11.4S, V23.4S
	ADD R19, R16, R24
	VLD1 (R24), [V4.S4, V5.S4, V6.S4, V7.S4]
	ADD R19, R17, R24
	VLD1 (R24), [V8.S4, V9.S4, V10.S4, V11.S4]
	WORD $0x4e38d498 // FADD V24.4S, V4.4S, V24.4S
	WORD $0x4e39d4b9 // FADD V25.4S, V5.4S, V25.4S
	WORD $0x4e3ad4da // FADD V26.4S, V6.4S, V26.4S
	WORD $0x4e3bd4fb // FADD V27.4S, V7.4S, V27.4S
	WORD $0x4e3cd51c // FADD V28.4S, V8.4S, V28.4S
	WORD $0x4e3dd53d // FADD V29.4S, V9.4S, V29.4S
	WORD $0x4e3ed55e // FADD V30.4S, V10.4S, V30.4S
	WORD $0x4e3fd57f // FADD V31.4S, V11.4S, V31.4S
qkt_c16_scale:
	CMP R8, R21
	BNE qkt_c16_store
	WORD $0x6e2cde10 // FMUL V16.4S, V16.4S, V12.4S
	WORD $0x6e2cde31 // FMUL V17.4S, V17.4S, V12.4S
	WORD $0x6e2cde52 // FMUL V18.4S, V18.4S, V12.4S
	WORD $0x6e2cde73 // FMUL V19.4S, V19.4S, V12.4S
	WORD $0x6e2cde94 // FMUL V20.4S, V20.4S, V12.4S
	WORD $0x6e2cdeb5 // FMUL V21.4S, V21.4S, V12.4S
	WORD $0x6e2cded6 // FMUL V22.4S, V22.4S, V12.4S
	WORD $0x6e2cdef7 // FMUL V23.4S, V23.4S, V12.4S
	WORD $0x6e2cdf18 // FMUL V24.4S, V24.4S, V12.4S
	WORD $0x6e2cdf39 // FMUL V25.4S, V25.4S, V12.4S
	WORD $0x6e2cdf5a // FMUL V26.4S, V26.4S, V12.4S
	WORD $0x6e2cdf7b // FMUL V27.4S, V27.4S, V12.4S
	WORD $0x6e2cdf9c // FMUL V28.4S, V28.4S, V12.4S
	WORD $0x6e2cdfbd // FMUL V29.4S, V29.4S, V12.4S
	WORD $0x6e2cdfde // FMUL V30.4S, V30.4S, V12.4S
	WORD $0x6e2cdfff // FMUL V31.4S, V31.4S, V12.4S
qkt_c16_store:
	ADD R19, R14, R24
	VST1 [V16.S4, V17.S4, V18.S4, V19.S4], (R24)
	ADD R19, R15, R24
	VST1 [V20.S4, V21.S4, V22.S4, V23.S4], (R24)
	ADD R19, R16, R24
	VST1 [V24.S4, V25.S4, V26.S4, V27.S4], (R24)
	ADD R19, R17, R24
	VST1 [V28.S4, V29.S4, V30.S4, V31.S4], (R24)
	MOVD R21, R20
	CMP R8, R20
	BLT qkt_c16_chunk
	ADD $64, R19
	B qkt_c16

	// 4-key blocks, the last one ending at cols
qkt_c4:
	CMP R7, R19
	BEQ qkt_nextrows
	ADD $16, R19, R9
	CMP R7, R9
	BLE qkt_c4_go
	SUB $16, R7, R19
qkt_c4_go:
	ROWPTRS(R2, R3, R6, R10, R11, R12, R13)
	ADD R19, R4, R23
	MOVD ZR, R20
qkt_c4_chunk:
	ADD $32, R20, R21
	CMP R8, R21
	CSEL GT, R8, R21, R21
	SUB R20, R21, R22
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V20.B16, V20.B16, V20.B16
	VEOR V24.B16, V24.B16, V24.B16
	VEOR V28.B16, V28.B16, V28.B16
	CMP $4, R22
	BLT qkt_c4_k1
qkt_c4_k4:
	VLD1.P 16(R10), [V0.S4]
	VLD1.P 16(R11), [V1.S4]
	VLD1.P 16(R12), [V2.S4]
	VLD1.P 16(R13), [V3.S4]
	VLD1.P (R23)(R5), [V4.S4]
	WORD $0x4f801090 // FMLA V16.4S, V4.4S, V0.S[0]
	WORD $0x4f811094 // FMLA V20.4S, V4.4S, V1.S[0]
	WORD $0x4f821098 // FMLA V24.4S, V4.4S, V2.S[0]
	WORD $0x4f83109c // FMLA V28.4S, V4.4S, V3.S[0]
	VLD1.P (R23)(R5), [V4.S4]
	WORD $0x4fa01090 // FMLA V16.4S, V4.4S, V0.S[1]
	WORD $0x4fa11094 // FMLA V20.4S, V4.4S, V1.S[1]
	WORD $0x4fa21098 // FMLA V24.4S, V4.4S, V2.S[1]
	WORD $0x4fa3109c // FMLA V28.4S, V4.4S, V3.S[1]
	VLD1.P (R23)(R5), [V4.S4]
	WORD $0x4f801890 // FMLA V16.4S, V4.4S, V0.S[2]
	WORD $0x4f811894 // FMLA V20.4S, V4.4S, V1.S[2]
	WORD $0x4f821898 // FMLA V24.4S, V4.4S, V2.S[2]
	WORD $0x4f83189c // FMLA V28.4S, V4.4S, V3.S[2]
	VLD1.P (R23)(R5), [V4.S4]
	WORD $0x4fa01890 // FMLA V16.4S, V4.4S, V0.S[3]
	WORD $0x4fa11894 // FMLA V20.4S, V4.4S, V1.S[3]
	WORD $0x4fa21898 // FMLA V24.4S, V4.4S, V2.S[3]
	WORD $0x4fa3189c // FMLA V28.4S, V4.4S, V3.S[3]
	SUB $4, R22
	CMP $4, R22
	BGE qkt_c4_k4
qkt_c4_k1:
	CBZ R22, qkt_c4_fold
qkt_c4_k1loop:
	FMOVS.P 4(R10), F0
	FMOVS.P 4(R11), F1
	FMOVS.P 4(R12), F2
	FMOVS.P 4(R13), F3
	VLD1.P (R23)(R5), [V4.S4]
	WORD $0x4f801090 // FMLA V16.4S, V4.4S, V0.S[0]
	WORD $0x4f811094 // FMLA V20.4S, V4.4S, V1.S[0]
	WORD $0x4f821098 // FMLA V24.4S, V4.4S, V2.S[0]
	WORD $0x4f83109c // FMLA V28.4S, V4.4S, V3.S[0]
	SUBS $1, R22
	BNE qkt_c4_k1loop
qkt_c4_fold:
	CBZ R20, qkt_c4_scale
	ADD R19, R14, R24
	VLD1 (R24), [V4.S4]
	ADD R19, R15, R24
	VLD1 (R24), [V5.S4]
	ADD R19, R16, R24
	VLD1 (R24), [V6.S4]
	ADD R19, R17, R24
	VLD1 (R24), [V7.S4]
	WORD $0x4e30d490 // FADD V16.4S, V4.4S, V16.4S
	WORD $0x4e34d4b4 // FADD V20.4S, V5.4S, V20.4S
	WORD $0x4e38d4d8 // FADD V24.4S, V6.4S, V24.4S
	WORD $0x4e3cd4fc // FADD V28.4S, V7.4S, V28.4S
qkt_c4_scale:
	CMP R8, R21
	BNE qkt_c4_store
	WORD $0x6e2cde10 // FMUL V16.4S, V16.4S, V12.4S
	WORD $0x6e2cde94 // FMUL V20.4S, V20.4S, V12.4S
	WORD $0x6e2cdf18 // FMUL V24.4S, V24.4S, V12.4S
	WORD $0x6e2cdf9c // FMUL V28.4S, V28.4S, V12.4S
qkt_c4_store:
	ADD R19, R14, R24
	VST1 [V16.S4], (R24)
	ADD R19, R15, R24
	VST1 [V20.S4], (R24)
	ADD R19, R16, R24
	VST1 [V24.S4], (R24)
	ADD R19, R17, R24
	VST1 [V28.S4], (R24)
	MOVD R21, R20
	CMP R8, R20
	BLT qkt_c4_chunk
	ADD $16, R19
	B qkt_c4

qkt_nextrows:
	SUBS $4, R6
	BLE qkt_done
	ADD R1<<2, R0
	ADD R3<<2, R2
	B qkt_rows
qkt_done:
	RET

	// cols < 4: one score at a time, chunked the same way.
qkt_small:
	MOVD ZR, R19
qkt_s_col:
	ADD R19, R4, R23
	MOVD R2, R10
	MOVD ZR, R20
qkt_s_chunk:
	ADD $32, R20, R21
	CMP R8, R21
	CSEL GT, R8, R21, R21
	SUB R20, R21, R22
	FMOVS ZR, F1
	CBZ R22, qkt_s_kdone
qkt_s_k:
	FMOVS.P 4(R10), F2
	FMOVS (R23), F3
	ADD R5, R23
	FMADDS F3, F1, F2, F1
	SUBS $1, R22
	BNE qkt_s_k
qkt_s_kdone:
	CBNZ R20, qkt_s_add
	FMOVS F1, F4
	B qkt_s_next
qkt_s_add:
	FADDS F1, F4, F4
qkt_s_next:
	MOVD R21, R20
	CMP R8, R20
	BLT qkt_s_chunk
	FMULS F12, F4, F4
	FMOVS F4, (R0)(R19)
	ADD $4, R19
	CMP R7, R19
	BLT qkt_s_col
	ADD R1, R0
	ADD R3, R2
	SUBS $1, R6
	BNE qkt_small
	RET

// func PvNEON(o *float32, ldO int, p *float32, ldP int, v *float32, ldV int, rows, cols, d int)
//
// Register block: 4 rows x 16 output columns, 16 accumulators V16-V31 (row
// r, columns 4c..4c+3 in V(16+4r+c)) loaded from o and stored back once.
// Per step of 4 keys: one 4-wide load of each p row (V0-V3), then for each
// key a 16-column load of the V row (V4-V7) and 16 FMLA by element.
// Remaining columns go through 4-column blocks (V16, V20, V24, V28); the
// last one ends at d and may overlap the previous block, in which case only
// its last t = d mod 4 lanes are stored (BIT with tailmask) so no column is
// accumulated twice. d < 4 uses a scalar loop.
//
// R0 o (row block), R1 ldO*4, R2 p (row block), R3 ldP*4, R4 v, R5 ldV*4,
// R6 rows left, R7 cols, R8 d*4, R10-R13 p row pointers, R14-R17 o rows,
// R19 column offset (bytes), R22 keys left, R23 V panel pointer, R24
// scratch pointer, R25 tail mask pointer (0: no mask).
TEXT ·PvNEON(SB), NOSPLIT, $0-72
	MOVD o+0(FP), R0
	MOVD ldO+8(FP), R1
	MOVD p+16(FP), R2
	MOVD ldP+24(FP), R3
	MOVD v+32(FP), R4
	MOVD ldV+40(FP), R5
	MOVD rows+48(FP), R6
	MOVD cols+56(FP), R7
	MOVD d+64(FP), R8
	CMP $1, R6
	BLT pv_done
	CMP $1, R7
	BLT pv_done
	CMP $1, R8
	BLT pv_done
	LSL $2, R1
	LSL $2, R3
	LSL $2, R5
	LSL $2, R8
	CMP $16, R8
	BLT pv_small

pv_rows:
	ROWPTRS(R0, R1, R6, R14, R15, R16, R17)
	MOVD ZR, R19

	// 16-column blocks
pv_c16:
	ADD $64, R19, R9
	CMP R8, R9
	BGT pv_c4
	ADD R19, R14, R24
	VLD1 (R24), [V16.S4, V17.S4, V18.S4, V19.S4]
	ADD R19, R15, R24
	VLD1 (R24), [V20.S4, V21.S4, V22.S4, V23.S4]
	ADD R19, R16, R24
	VLD1 (R24), [V24.S4, V25.S4, V26.S4, V27.S4]
	ADD R19, R17, R24
	VLD1 (R24), [V28.S4, V29.S4, V30.S4, V31.S4]
	ROWPTRS(R2, R3, R6, R10, R11, R12, R13)
	ADD R19, R4, R23
	MOVD R7, R22
	CMP $4, R22
	BLT pv_c16_k1
pv_c16_k4:
	VLD1.P 16(R10), [V0.S4]
	VLD1.P 16(R11), [V1.S4]
	VLD1.P 16(R12), [V2.S4]
	VLD1.P 16(R13), [V3.S4]
	VLD1.P (R23)(R5), [V4.S4, V5.S4, V6.S4, V7.S4]
	WORD $0x4f801090 // FMLA V16.4S, V4.4S, V0.S[0]
	WORD $0x4f8010b1 // FMLA V17.4S, V5.4S, V0.S[0]
	WORD $0x4f8010d2 // FMLA V18.4S, V6.4S, V0.S[0]
	WORD $0x4f8010f3 // FMLA V19.4S, V7.4S, V0.S[0]
	WORD $0x4f811094 // FMLA V20.4S, V4.4S, V1.S[0]
	WORD $0x4f8110b5 // FMLA V21.4S, V5.4S, V1.S[0]
	WORD $0x4f8110d6 // FMLA V22.4S, V6.4S, V1.S[0]
	WORD $0x4f8110f7 // FMLA V23.4S, V7.4S, V1.S[0]
	WORD $0x4f821098 // FMLA V24.4S, V4.4S, V2.S[0]
	WORD $0x4f8210b9 // FMLA V25.4S, V5.4S, V2.S[0]
	WORD $0x4f8210da // FMLA V26.4S, V6.4S, V2.S[0]
	WORD $0x4f8210fb // FMLA V27.4S, V7.4S, V2.S[0]
	WORD $0x4f83109c // FMLA V28.4S, V4.4S, V3.S[0]
	WORD $0x4f8310bd // FMLA V29.4S, V5.4S, V3.S[0]
	WORD $0x4f8310de // FMLA V30.4S, V6.4S, V3.S[0]
	WORD $0x4f8310ff // FMLA V31.4S, V7.4S, V3.S[0]
	VLD1.P (R23)(R5), [V4.S4, V5.S4, V6.S4, V7.S4]
	WORD $0x4fa01090 // FMLA V16.4S, V4.4S, V0.S[1]
	WORD $0x4fa010b1 // FMLA V17.4S, V5.4S, V0.S[1]
	WORD $0x4fa010d2 // FMLA V18.4S, V6.4S, V0.S[1]
	WORD $0x4fa010f3 // FMLA V19.4S, V7.4S, V0.S[1]
	WORD $0x4fa11094 // FMLA V20.4S, V4.4S, V1.S[1]
	WORD $0x4fa110b5 // FMLA V21.4S, V5.4S, V1.S[1]
	WORD $0x4fa110d6 // FMLA V22.4S, V6.4S, V1.S[1]
	WORD $0x4fa110f7 // FMLA V23.4S, V7.4S, V1.S[1]
	WORD $0x4fa21098 // FMLA V24.4S, V4.4S, V2.S[1]
	WORD $0x4fa210b9 // FMLA V25.4S, V5.4S, V2.S[1]
	WORD $0x4fa210da // FMLA V26.4S, V6.4S, V2.S[1]
	WORD $0x4fa210fb // FMLA V27.4S, V7.4S, V2.S[1]
	WORD $0x4fa3109c // FMLA V28.4S, V4.4S, V3.S[1]
	WORD $0x4fa310bd // FMLA V29.4S, V5.4S, V3.S[1]
	WORD $0x4fa310de // FMLA V30.4S, V6.4S, V3.S[1]
	WORD $0x4fa310ff // FMLA V31.4S, V7.4S, V3.S[1]
	VLD1.P (R23)(R5), [V4.S4, V5.S4, V6.S4, V7.S4]
	WORD $0x4f801890 // FMLA V16.4S, V4.4S, V0.S[2]
	WORD $0x4f8018b1 // FMLA V17.4S, V5.4S, V0.S[2]
	WORD $0x4f8018d2 // FMLA V18.4S, V6.4S, V0.S[2]
	WORD $0x4f8018f3 // FMLA V19.4S, V7.4S, V0.S[2]
	WORD $0x4f811894 // FMLA V20.4S, V4.4S, V1.S[2]
	WORD $0x4f8118b5 // FMLA V21.4S, V5.4S, V1.S[2]
	WORD $0x4f8118d6 // FMLA V22.4S, V6.4S, V1.S[2]
	WORD $0x4f8118f7 // FMLA V23.4S, V7.4S, V1.S[2]
	WORD $0x4f821898 // FMLA V24.4S, V4.4S, V2.S[2]
	WORD $0x4f8218b9 // FMLA V25.4S, V5.4S, V2.S[2]
	WORD $0x4f8218da // FMLA V26.4S, V6.4S, V2.S[2]
	WORD $0x4f8218fb // FMLA V27.4S, V7.4S, V2.S[2]
	WORD $0x4f83189c // FMLA V28.4S, V4.4S, V3.S[2]
	WORD $0x4f8318bd // FMLA V29.4S, V5.4S, V3.S[2]
	WORD $0x4f8318de // FMLA V30.4S, V6.4S, V3.S[2]
	WORD $0x4f8318ff // FMLA V31.4S, V7.4S, V3.S[2]
	VLD1.P (R23)(R5), [V4.S4, V5.S4, V6.S4, V7.S4]
	WORD $0x4fa01890 // FMLA V16.4S, V4.4S, V0.S[3]
	WORD $0x4fa018b1 // FMLA V17.4S, V5.4S, V0.S[3]
	WORD $0x4fa018d2 // FMLA V18.4S, V6.4S, V0.S[3]
	WORD $0x4fa018f3 // FMLA V19.4S, V7.4S, V0.S[3]
	WORD $0x4fa11894 // FMLA V20.4S, V4.4S, V1.S[3]
	WORD $0x4fa118b5 // FMLA V21.4S, V5.4S, V1.S[3]
	WORD $0x4fa118d6 // FMLA V22.4S, V6.4S, V1.S[3]
	WORD $0x4fa118f7 // FMLA V23.4S, V7.4S, V1.S[3]
	WORD $0x4fa21898 // FMLA V24.4S, V4.4S, V2.S[3]
	WORD $0x4fa218b9 // FMLA V25.4S, V5.4S, V2.S[3]
	WORD $0x4fa218da // FMLA V26.4S, V6.4S, V2.S[3]
	WORD $0x4fa218fb // FMLA V27.4S, V7.4S, V2.S[3]
	WORD $0x4fa3189c // FMLA V28.4S, V4.4S, V3.S[3]
	WORD $0x4fa318bd // FMLA V29.4S, V5.4S, V3.S[3]
	WORD $0x4fa318de // FMLA V30.4S, V6.4S, V3.S[3]
	WORD $0x4fa318ff // FMLA V31.4S, V7.4S, V3.S[3]
	SUB $4, R22
	CMP $4, R22
	BGE pv_c16_k4
pv_c16_k1:
	CBZ R22, pv_c16_store
pv_c16_k1loop:
	FMOVS.P 4(R10), F0
	FMOVS.P 4(R11), F1
	FMOVS.P 4(R12), F2
	FMOVS.P 4(R13), F3
	VLD1.P (R23)(R5), [V4.S4, V5.S4, V6.S4, V7.S4]
	WORD $0x4f801090 // FMLA V16.4S, V4.4S, V0.S[0]
	WORD $0x4f8010b1 // FMLA V17.4S, V5.4S, V0.S[0]
	WORD $0x4f8010d2 // FMLA V18.4S, V6.4S, V0.S[0]
	WORD $0x4f8010f3 // FMLA V19.4S, V7.4S, V0.S[0]
	WORD $0x4f811094 // FMLA V20.4S, V4.4S, V1.S[0]
	WORD $0x4f8110b5 // FMLA V21.4S, V5.4S, V1.S[0]
	WORD $0x4f8110d6 // FMLA V22.4S, V6.4S, V1.S[0]
	WORD $0x4f8110f7 // FMLA V23.4S, V7.4S, V1.S[0]
	WORD $0x4f821098 // FMLA V24.4S, V4.4S, V2.S[0]
	WORD $0x4f8210b9 // FMLA V25.4S, V5.4S, V2.S[0]
	WORD $0x4f8210da // FMLA V26.4S, V6.4S, V2.S[0]
	WORD $0x4f8210fb // FMLA V27.4S, V7.4S, V2.S[0]
	WORD $0x4f83109c // FMLA V28.4S, V4.4S, V3.S[0]
	WORD $0x4f8310bd // FMLA V29.4S, V5.4S, V3.S[0]
	WORD $0x4f8310de // FMLA V30.4S, V6.4S, V3.S[0]
	WORD $0x4f8310ff // FMLA V31.4S, V7.4S, V3.S[0]
	SUBS $1, R22
	BNE pv_c16_k1loop
pv_c16_store:
	ADD R19, R14, R24
	VST1 [V16.S4, V17.S4, V18.S4, V19.S4], (R24)
	ADD R19, R15, R24
	VST1 [V20.S4, V21.S4, V22.S4, V23.S4], (R24)
	ADD R19, R16, R24
	VST1 [V24.S4, V25.S4, V26.S4, V27.S4], (R24)
	ADD R19, R17, R24
	VST1 [V28.S4, V29.S4, V30.S4, V31.S4], (R24)
	ADD $64, R19
	B pv_c16

	// 4-column blocks, the last one ending at d
pv_c4:
	MOVD ZR, R25
	CMP R8, R19
	BEQ pv_nextrows
	ADD $16, R19, R9
	CMP R8, R9
	BLE pv_c4_go
	SUB R19, R8, R9
	MOVD $tailmask<>(SB), R25
	ADD R9<<2, R25
	SUB $16, R25
	VLD1 (R25), [V9.S4]
	SUB $16, R8, R19
pv_c4_go:
	ADD R19, R14, R24
	VLD1 (R24), [V16.S4]
	ADD R19, R15, R24
	VLD1 (R24), [V20.S4]
	ADD R19, R16, R24
	VLD1 (R24), [V24.S4]
	ADD R19, R17, R24
	VLD1 (R24), [V28.S4]
	ROWPTRS(R2, R3, R6, R10, R11, R12, R13)
	ADD R19, R4, R23
	MOVD R7, R22
	CMP $4, R22
	BLT pv_c4_k1
pv_c4_k4:
	VLD1.P 16(R10), [V0.S4]
	VLD1.P 16(R11), [V1.S4]
	VLD1.P 16(R12), [V2.S4]
	VLD1.P 16(R13), [V3.S4]
	VLD1.P (R23)(R5), [V4.S4]
	WORD $0x4f801090 // FMLA V16.4S, V4.4S, V0.S[0]
	WORD $0x4f811094 // FMLA V20.4S, V4.4S, V1.S[0]
	WORD $0x4f821098 // FMLA V24.4S, V4.4S, V2.S[0]
	WORD $0x4f83109c // FMLA V28.4S, V4.4S, V3.S[0]
	VLD1.P (R23)(R5), [V4.S4]
	WORD $0x4fa01090 // FMLA V16.4S, V4.4S, V0.S[1]
	WORD $0x4fa11094 // FMLA V20.4S, V4.4S, V1.S[1]
	WORD $0x4fa21098 // FMLA V24.4S, V4.4S, V2.S[1]
	WORD $0x4fa3109c // FMLA V28.4S, V4.4S, V3.S[1]
	VLD1.P (R23)(R5), [V4.S4]
	WORD $0x4f801890 // FMLA V16.4S, V4.4S, V0.S[2]
	WORD $0x4f811894 // FMLA V20.4S, V4.4S, V1.S[2]
	WORD $0x4f821898 // FMLA V24.4S, V4.4S, V2.S[2]
	WORD $0x4f83189c // FMLA V28.4S, V4.4S, V3.S[2]
	VLD1.P (R23)(R5), [V4.S4]
	WORD $0x4fa01890 // FMLA V16.4S, V4.4S, V0.S[3]
	WORD $0x4fa11894 // FMLA V20.4S, V4.4S, V1.S[3]
	WORD $0x4fa21898 // FMLA V24.4S, V4.4S, V2.S[3]
	WORD $0x4fa3189c // FMLA V28.4S, V4.4S, V3.S[3]
	SUB $4, R22
	CMP $4, R22
	BGE pv_c4_k4
pv_c4_k1:
	CBZ R22, pv_c4_store
pv_c4_k1loop:
	FMOVS.P 4(R10), F0
	FMOVS.P 4(R11), F1
	FMOVS.P 4(R12), F2
	FMOVS.P 4(R13), F3
	VLD1.P (R23)(R5), [V4.S4]
	WORD $0x4f801090 // FMLA V16.4S, V4.4S, V0.S[0]
	WORD $0x4f811094 // FMLA V20.4S, V4.4S, V1.S[0]
	WORD $0x4f821098 // FMLA V24.4S, V4.4S, V2.S[0]
	WORD $0x4f83109c // FMLA V28.4S, V4.4S, V3.S[0]
	SUBS $1, R22
	BNE pv_c4_k1loop
pv_c4_store:
	CBNZ R25, pv_c4_masked
	ADD R19, R14, R24
	VST1 [V16.S4], (R24)
	ADD R19, R15, R24
	VST1 [V20.S4], (R24)
	ADD R19, R16, R24
	VST1 [V24.S4], (R24)
	ADD R19, R17, R24
	VST1 [V28.S4], (R24)
	ADD $16, R19
	B pv_c4
pv_c4_masked:
	// Overlapping tail: keep the first 4-t lanes of o as they are.
	ADD R19, R14, R24
	VLD1 (R24), [V8.S4]
	VBIT V9.B16, V16.B16, V8.B16
	VST1 [V8.S4], (R24)
	ADD R19, R15, R24
	VLD1 (R24), [V8.S4]
	VBIT V9.B16, V20.B16, V8.B16
	VST1 [V8.S4], (R24)
	ADD R19, R16, R24
	VLD1 (R24), [V8.S4]
	VBIT V9.B16, V24.B16, V8.B16
	VST1 [V8.S4], (R24)
	ADD R19, R17, R24
	VLD1 (R24), [V8.S4]
	VBIT V9.B16, V28.B16, V8.B16
	VST1 [V8.S4], (R24)

pv_nextrows:
	SUBS $4, R6
	BLE pv_done
	ADD R1<<2, R0
	ADD R3<<2, R2
	B pv_rows
pv_done:
	RET

	// d < 4: one output element at a time.
pv_small:
	MOVD ZR, R19
pv_s_col:
	FMOVS (R0)(R19), F1
	MOVD R2, R10
	ADD R19, R4, R23
	MOVD R7, R22
pv_s_k:
	FMOVS.P 4(R10), F2
	FMOVS (R23), F3
	ADD R5, R23
	FMADDS F3, F1, F2, F1
	SUBS $1, R22
	BNE pv_s_k
	FMOVS F1, (R0)(R19)
	ADD $4, R19
	CMP R8, R19
	BLT pv_s_col
	ADD R1, R0
	ADD R3, R2
	SUBS $1, R6
	BNE pv_small
	RET

// func ExpSumNEON(dst, src *float32, n int, max float32) float32
//
// Exp vectorised step by step as exp.go computes it (and as the compiler
// fuses it on arm64): t = x*log2e rounded, n = FRINTN(t), r = x - n*ln2hi
// and r -= n*ln2lo fused, the polynomial by fused steps p = Pk + r*p,
// p*r*r + r as fma(p*r, r, r), + 1, times 2^min(n,127) and then 2^(n-min(n,127))
// (2 only when n = 128: the same product as exp.go's p*2*2^(n-1)). Lanes with
// x < expMin (-Inf included) are cleared to 0, lanes with x > expMax set to
// +Inf and NaN lanes replaced by x itself, as in Exp.
//
// V16 max, V17 log2e, V18 ln2hi, V19 ln2lo, V20-V25 P0-P5, V26 1.0, V27
// expMin, V28 expMax, V29 +Inf, V30 int32 127. Two exponentials (x, n, r,
// p, a in V0-V4 and V5-V9) run interleaved, 8 elements per iteration; V10
// and V11 accumulate the sum.
TEXT ·ExpSumNEON(SB), NOSPLIT, $0-36
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	FMOVS max+24(FP), F16
	VDUP V16.S[0], V16.S4
	MOVD $0x3fb8aa3b, R9 // log2e
	VDUP R9, V17.S4
	MOVD $0x3f318000, R9 // ln2hi 0.693359375
	VDUP R9, V18.S4
	MOVD $0xb95e8083, R9 // ln2lo -2.12194440e-4
	VDUP R9, V19.S4
	MOVD $0x39506967, R9 // P0 1.9875691500e-4
	VDUP R9, V20.S4
	MOVD $0x3ab743ce, R9 // P1 1.3981999507e-3
	VDUP R9, V21.S4
	MOVD $0x3c088908, R9 // P2 8.3334519073e-3
	VDUP R9, V22.S4
	MOVD $0x3d2aa9c1, R9 // P3 4.1665795894e-2
	VDUP R9, V23.S4
	MOVD $0x3e2aaaaa, R9 // P4 1.6666665459e-1
	VDUP R9, V24.S4
	MOVD $0x3f000000, R9 // P5 5.0000001201e-1 (0.5 in float32)
	VDUP R9, V25.S4
	MOVD $0x3f800000, R9 // 1.0
	VDUP R9, V26.S4
	MOVD $0xc2aeac50, R9 // expMin -87.33654475
	VDUP R9, V27.S4
	MOVD $0x42b17218, R9 // expMax 88.72283905
	VDUP R9, V28.S4
	MOVD $0x7f800000, R9 // +Inf
	VDUP R9, V29.S4
	MOVD $127, R9
	VDUP R9, V30.S4
	VEOR V10.B16, V10.B16, V10.B16
	VEOR V11.B16, V11.B16, V11.B16
	CMP $8, R2
	BLT exp_tail
exp_loop8:
	VLD1.P 16(R1), [V0.S4]
	VLD1.P 16(R1), [V5.S4]
	WORD $0x4eb0d400 // FSUB V0.4S, V0.4S, V16.4S
	WORD $0x4eb0d4a5 // FSUB V5.4S, V5.4S, V16.4S
	WORD $0x6e31dc01 // FMUL V1.4S, V0.4S, V17.4S
	WORD $0x6e31dca6 // FMUL V6.4S, V5.4S, V17.4S
	WORD $0x4e218821 // FRINTN V1.4S, V1.4S
	WORD $0x4e2188c6 // FRINTN V6.4S, V6.4S
	VORR V0.B16, V0.B16, V2.B16
	VORR V5.B16, V5.B16, V7.B16
	VFMLS V18.S4, V1.S4, V2.S4
	VFMLS V18.S4, V6.S4, V7.S4
	VFMLS V19.S4, V1.S4, V2.S4
	VFMLS V19.S4, V6.S4, V7.S4
	VORR V21.B16, V21.B16, V3.B16
	VORR V21.B16, V21.B16, V8.B16
	VFMLA V20.S4, V2.S4, V3.S4
	VFMLA V20.S4, V7.S4, V8.S4
	VORR V22.B16, V22.B16, V4.B16
	VORR V22.B16, V22.B16, V9.B16
	VFMLA V3.S4, V2.S4, V4.S4
	VFMLA V8.S4, V7.S4, V9.S4
	VORR V23.B16, V23.B16, V3.B16
	VORR V23.B16, V23.B16, V8.B16
	VFMLA V4.S4, V2.S4, V3.S4
	VFMLA V9.S4, V7.S4, V8.S4
	VORR V24.B16, V24.B16, V4.B16
	VORR V24.B16, V24.B16, V9.B16
	VFMLA V3.S4, V2.S4, V4.S4
	VFMLA V8.S4, V7.S4, V9.S4
	VORR V25.B16, V25.B16, V3.B16
	VORR V25.B16, V25.B16, V8.B16
	VFMLA V4.S4, V2.S4, V3.S4
	VFMLA V9.S4, V7.S4, V8.S4
	WORD $0x6e22dc64 // FMUL V4.4S, V3.4S, V2.4S
	WORD $0x6e27dd09 // FMUL V9.4S, V8.4S, V7.4S
	VFMLA V2.S4, V4.S4, V2.S4
	VFMLA V7.S4, V9.S4, V7.S4
	WORD $0x4e3ad442 // FADD V2.4S, V2.4S, V26.4S
	WORD $0x4e3ad4e7 // FADD V7.4S, V7.4S, V26.4S
	WORD $0x4ea1b821 // FCVTZS V1.4S, V1.4S
	WORD $0x4ea1b8c6 // FCVTZS V6.4S, V6.4S
	WORD $0x4ebe6c24 // SMIN V4.4S, V1.4S, V30.4S
	WORD $0x4ebe6cc9 // SMIN V9.4S, V6.4S, V30.4S
	VSUB V4.S4, V1.S4, V1.S4
	VSUB V9.S4, V6.S4, V6.S4
	VADD V30.S4, V4.S4, V4.S4
	VADD V30.S4, V9.S4, V9.S4
	VADD V30.S4, V1.S4, V1.S4
	VADD V30.S4, V6.S4, V6.S4
	VSHL $23, V4.S4, V4.S4
	VSHL $23, V9.S4, V9.S4
	VSHL $23, V1.S4, V1.S4
	VSHL $23, V6.S4, V6.S4
	WORD $0x6e24dc42 // FMUL V2.4S, V2.4S, V4.4S
	WORD $0x6e29dce7 // FMUL V7.4S, V7.4S, V9.4S
	WORD $0x6e21dc42 // FMUL V2.4S, V2.4S, V1.4S
	WORD $0x6e26dce7 // FMUL V7.4S, V7.4S, V6.4S
	WORD $0x6e3be404 // FCMGE V4.4S, V0.4S, V27.4S
	WORD $0x6e3be4a9 // FCMGE V9.4S, V5.4S, V27.4S
	VAND V4.B16, V2.B16, V2.B16
	VAND V9.B16, V7.B16, V7.B16
	WORD $0x6ebce404 // FCMGT V4.4S, V0.4S, V28.4S
	WORD $0x6ebce4a9 // FCMGT V9.4S, V5.4S, V28.4S
	VBIT V4.B16, V29.B16, V2.B16
	VBIT V9.B16, V29.B16, V7.B16
	WORD $0x4e20e404 // FCMEQ V4.4S, V0.4S, V0.4S
	WORD $0x4e25e4a9 // FCMEQ V9.4S, V5.4S, V5.4S
	VBIF V4.B16, V0.B16, V2.B16
	VBIF V9.B16, V5.B16, V7.B16
	VST1.P [V2.S4], 16(R0)
	VST1.P [V7.S4], 16(R0)
	WORD $0x4e22d54a // FADD V10.4S, V10.4S, V2.4S
	WORD $0x4e27d56b // FADD V11.4S, V11.4S, V7.4S
	SUB $8, R2
	CMP $8, R2
	BGE exp_loop8
exp_tail:
	WORD $0x4e2bd54a // FADD V10.4S, V10.4S, V11.4S
	VEOR V11.B16, V11.B16, V11.B16
	// Tail: one block of 4, then single elements in lane 0 (the other lanes
	// compute values that are neither stored nor summed).
exp_tail_loop:
	CMP $4, R2
	BLT exp_one
	VLD1.P 16(R1), [V0.S4]
	MOVD $4, R9
	B exp_compute
exp_one:
	CMP $1, R2
	BLT exp_done
	FMOVS.P 4(R1), F0
	MOVD $1, R9
exp_compute:
	WORD $0x4eb0d400 // FSUB V0.4S, V0.4S, V16.4S
	WORD $0x6e31dc01 // FMUL V1.4S, V0.4S, V17.4S
	WORD $0x4e218821 // FRINTN V1.4S, V1.4S
	VORR V0.B16, V0.B16, V2.B16
	VFMLS V18.S4, V1.S4, V2.S4
	VFMLS V19.S4, V1.S4, V2.S4
	VORR V21.B16, V21.B16, V3.B16
	VFMLA V20.S4, V2.S4, V3.S4
	VORR V22.B16, V22.B16, V4.B16
	VFMLA V3.S4, V2.S4, V4.S4
	VORR V23.B16, V23.B16, V3.B16
	VFMLA V4.S4, V2.S4, V3.S4
	VORR V24.B16, V24.B16, V4.B16
	VFMLA V3.S4, V2.S4, V4.S4
	VORR V25.B16, V25.B16, V3.B16
	VFMLA V4.S4, V2.S4, V3.S4
	WORD $0x6e22dc64 // FMUL V4.4S, V3.4S, V2.4S
	VFMLA V2.S4, V4.S4, V2.S4
	WORD $0x4e3ad442 // FADD V2.4S, V2.4S, V26.4S
	WORD $0x4ea1b821 // FCVTZS V1.4S, V1.4S
	WORD $0x4ebe6c24 // SMIN V4.4S, V1.4S, V30.4S
	VSUB V4.S4, V1.S4, V1.S4
	VADD V30.S4, V4.S4, V4.S4
	VADD V30.S4, V1.S4, V1.S4
	VSHL $23, V4.S4, V4.S4
	VSHL $23, V1.S4, V1.S4
	WORD $0x6e24dc42 // FMUL V2.4S, V2.4S, V4.4S
	WORD $0x6e21dc42 // FMUL V2.4S, V2.4S, V1.4S
	WORD $0x6e3be404 // FCMGE V4.4S, V0.4S, V27.4S
	VAND V4.B16, V2.B16, V2.B16
	WORD $0x6ebce404 // FCMGT V4.4S, V0.4S, V28.4S
	VBIT V4.B16, V29.B16, V2.B16
	WORD $0x4e20e404 // FCMEQ V4.4S, V0.4S, V0.4S
	VBIF V4.B16, V0.B16, V2.B16
	SUB R9, R2
	CMP $1, R9
	BEQ exp_store1
	VST1.P [V2.S4], 16(R0)
	WORD $0x4e22d54a // FADD V10.4S, V10.4S, V2.4S
	B exp_tail_loop
exp_store1:
	FMOVS.P F2, 4(R0)
	FADDS F2, F11, F11
	B exp_tail_loop
exp_done:
	WORD $0x6e2ad54a // FADDP V10.4S, V10.4S, V10.4S
	WORD $0x6e2ad54a // FADDP V10.4S, V10.4S, V10.4S
	FADDS F11, F10, F10
	FMOVS F10, ret+32(FP)
	RET

// func MaxNEON(x *float32, n int) float32
//
// FMAX over four accumulators (16 elements per iteration), then 4 and 1 at
// a time. FMAX propagates NaN and picks +0 over -0, whereas maxGeneric
// returns the first NaN as it is and, when the maximum is zero, the first
// zero it met; both cases are rare and settled by a second, scalar pass.
TEXT ·MaxNEON(SB), NOSPLIT, $0-20
	MOVD x+0(FP), R0
	MOVD n+8(FP), R1
	MOVD R0, R2
	MOVD $0xff800000, R9 // -Inf
	VDUP R9, V16.S4
	VORR V16.B16, V16.B16, V17.B16
	VORR V16.B16, V16.B16, V18.B16
	VORR V16.B16, V16.B16, V19.B16
	CMP $16, R1
	BLT max_4
max_16:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	WORD $0x4e20f610 // FMAX V16.4S, V16.4S, V0.4S
	WORD $0x4e21f631 // FMAX V17.4S, V17.4S, V1.4S
	WORD $0x4e22f652 // FMAX V18.4S, V18.4S, V2.4S
	WORD $0x4e23f673 // FMAX V19.4S, V19.4S, V3.4S
	SUB $16, R1
	CMP $16, R1
	BGE max_16
max_4:
	CMP $4, R1
	BLT max_reduce
	VLD1.P 16(R0), [V0.S4]
	WORD $0x4e20f610 // FMAX V16.4S, V16.4S, V0.4S
	SUB $4, R1
	B max_4
max_reduce:
	WORD $0x4e31f610 // FMAX V16.4S, V16.4S, V17.4S
	WORD $0x4e33f652 // FMAX V18.4S, V18.4S, V19.4S
	WORD $0x4e32f610 // FMAX V16.4S, V16.4S, V18.4S
	WORD $0x6e30fa10 // FMAXV S16, V16.4S
	CMP $1, R1
	BLT max_check
max_1:
	FMOVS.P 4(R0), F0
	FMAXS F0, F16, F16
	SUBS $1, R1
	BNE max_1
max_check:
	FCMPS F16, F16
	BVS max_nan
	FMOVS ZR, F1
	FCMPS F1, F16
	BEQ max_zero
	FMOVS F16, ret+16(FP)
	RET
max_nan:
	FMOVS.P 4(R2), F0
	FCMPS F0, F0
	BVC max_nan
	FMOVS F0, ret+16(FP)
	RET
max_zero:
	FMOVS.P 4(R2), F0
	FCMPS F1, F0
	BNE max_zero
	FMOVS F0, ret+16(FP)
	RET

// func ScaleNEON(dst, src *float32, n int, a float32)
//
// a*src with a as the first operand (Rn), as the compiled scaleGeneric has it.
TEXT ·ScaleNEON(SB), NOSPLIT, $0-28
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	FMOVS a+24(FP), F31
	VDUP V31.S[0], V31.S4
	CMP $16, R2
	BLT scale_4
scale_16:
	VLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]
	WORD $0x6e20dfe0 // FMUL V0.4S, V31.4S, V0.4S
	WORD $0x6e21dfe1 // FMUL V1.4S, V31.4S, V1.4S
	WORD $0x6e22dfe2 // FMUL V2.4S, V31.4S, V2.4S
	WORD $0x6e23dfe3 // FMUL V3.4S, V31.4S, V3.4S
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	SUB $16, R2
	CMP $16, R2
	BGE scale_16
scale_4:
	CMP $4, R2
	BLT scale_1
	VLD1.P 16(R1), [V0.S4]
	WORD $0x6e20dfe0 // FMUL V0.4S, V31.4S, V0.4S
	VST1.P [V0.S4], 16(R0)
	SUB $4, R2
	B scale_4
scale_1:
	CMP $1, R2
	BLT scale_done
	FMOVS.P 4(R1), F0
	FMULS F0, F31, F0
	FMOVS.P F0, 4(R0)
	SUBS $1, R2
	BNE scale_1
scale_done:
	RET

// func PackKTNEON(dst *float32, ldDst int, src *float32, ldSrc int, n, d int)
//
// Blocks of 4 keys x 4 components: four 4-wide row loads, a 4x4 transpose
// (TRN1/TRN2 on words, then on doublewords) and four 4-wide stores into
// consecutive panel rows. A last 1-3 components go through lane loads,
// a last 1-3 keys through a scalar loop.
//
// R0 dst, R1 ldDst*4, R2 src (row j), R3 ldSrc*4, R4 n, R5 d, R6 j,
// R7 components left, R10-R13 src rows, R14 dst pointer.
TEXT ·PackKTNEON(SB), NOSPLIT, $0-48
	MOVD dst+0(FP), R0
	MOVD ldDst+8(FP), R1
	MOVD src+16(FP), R2
	MOVD ldSrc+24(FP), R3
	MOVD n+32(FP), R4
	MOVD d+40(FP), R5
	CMP $1, R4
	BLT pk_done
	CMP $1, R5
	BLT pk_done
	LSL $2, R1
	LSL $2, R3
	MOVD ZR, R6
pk_j4:
	ADD $4, R6, R9
	CMP R4, R9
	BGT pk_j1
	MOVD R2, R10
	ADD R3, R10, R11
	ADD R3, R11, R12
	ADD R3, R12, R13
	ADD R6<<2, R0, R14
	MOVD R5, R7
	CMP $4, R7
	BLT pk_k1
pk_k4:
	VLD1.P 16(R10), [V0.S4]
	VLD1.P 16(R11), [V1.S4]
	VLD1.P 16(R12), [V2.S4]
	VLD1.P 16(R13), [V3.S4]
	VTRN1 V1.S4, V0.S4, V4.S4
	VTRN2 V1.S4, V0.S4, V5.S4
	VTRN1 V3.S4, V2.S4, V6.S4
	VTRN2 V3.S4, V2.S4, V7.S4
	VTRN1 V6.D2, V4.D2, V16.D2
	VTRN1 V7.D2, V5.D2, V17.D2
	VTRN2 V6.D2, V4.D2, V18.D2
	VTRN2 V7.D2, V5.D2, V19.D2
	VST1.P [V16.S4], (R14)(R1)
	VST1.P [V17.S4], (R14)(R1)
	VST1.P [V18.S4], (R14)(R1)
	VST1.P [V19.S4], (R14)(R1)
	SUB $4, R7
	CMP $4, R7
	BGE pk_k4
pk_k1:
	CBZ R7, pk_jnext
pk_k1loop:
	VLD1.P 4(R10), V16.S[0]
	VLD1.P 4(R11), V16.S[1]
	VLD1.P 4(R12), V16.S[2]
	VLD1.P 4(R13), V16.S[3]
	VST1.P [V16.S4], (R14)(R1)
	SUBS $1, R7
	BNE pk_k1loop
pk_jnext:
	ADD R3<<2, R2
	ADD $4, R6
	B pk_j4
pk_j1:
	CMP R4, R6
	BEQ pk_done
	MOVD R2, R10
	ADD R6<<2, R0, R14
	MOVD R5, R7
pk_j1k:
	MOVWU.P 4(R10), R9
	MOVW R9, (R14)
	ADD R1, R14
	SUBS $1, R7
	BNE pk_j1k
	ADD R3, R2
	ADD $1, R6
	B pk_j1
pk_done:
	RET

// func PackKTF16NEON(dst *float32, ldDst int, src *uint16, ldSrc int, n, d int)
//
// As PackKTNEON, with each 4-half load widened by FCVTL (exact, NaN kept
// NaN with the quiet bit set, as Float16.Float32 does).
//
// R0 dst, R1 ldDst*4, R2 src (row j), R3 ldSrc*2, R4 n, R5 d, R6 j,
// R7 components left, R10-R13 src rows, R14 dst pointer.
TEXT ·PackKTF16NEON(SB), NOSPLIT, $0-48
	MOVD dst+0(FP), R0
	MOVD ldDst+8(FP), R1
	MOVD src+16(FP), R2
	MOVD ldSrc+24(FP), R3
	MOVD n+32(FP), R4
	MOVD d+40(FP), R5
	CMP $1, R4
	BLT pkh_done
	CMP $1, R5
	BLT pkh_done
	LSL $2, R1
	LSL $1, R3
	MOVD ZR, R6
pkh_j4:
	ADD $4, R6, R9
	CMP R4, R9
	BGT pkh_j1
	MOVD R2, R10
	ADD R3, R10, R11
	ADD R3, R11, R12
	ADD R3, R12, R13
	ADD R6<<2, R0, R14
	MOVD R5, R7
	CMP $4, R7
	BLT pkh_k1
pkh_k4:
	FMOVD.P 8(R10), F0
	FMOVD.P 8(R11), F1
	FMOVD.P 8(R12), F2
	FMOVD.P 8(R13), F3
	WORD $0x0e217800 // FCVTL V0.4S, V0.4H
	WORD $0x0e217821 // FCVTL V1.4S, V1.4H
	WORD $0x0e217842 // FCVTL V2.4S, V2.4H
	WORD $0x0e217863 // FCVTL V3.4S, V3.4H
	VTRN1 V1.S4, V0.S4, V4.S4
	VTRN2 V1.S4, V0.S4, V5.S4
	VTRN1 V3.S4, V2.S4, V6.S4
	VTRN2 V3.S4, V2.S4, V7.S4
	VTRN1 V6.D2, V4.D2, V16.D2
	VTRN1 V7.D2, V5.D2, V17.D2
	VTRN2 V6.D2, V4.D2, V18.D2
	VTRN2 V7.D2, V5.D2, V19.D2
	VST1.P [V16.S4], (R14)(R1)
	VST1.P [V17.S4], (R14)(R1)
	VST1.P [V18.S4], (R14)(R1)
	VST1.P [V19.S4], (R14)(R1)
	SUB $4, R7
	CMP $4, R7
	BGE pkh_k4
pkh_k1:
	CBZ R7, pkh_jnext
pkh_k1loop:
	VLD1.P 2(R10), V16.H[0]
	VLD1.P 2(R11), V16.H[1]
	VLD1.P 2(R12), V16.H[2]
	VLD1.P 2(R13), V16.H[3]
	WORD $0x0e217a10 // FCVTL V16.4S, V16.4H
	VST1.P [V16.S4], (R14)(R1)
	SUBS $1, R7
	BNE pkh_k1loop
pkh_jnext:
	ADD R3<<2, R2
	ADD $4, R6
	B pkh_j4
pkh_j1:
	CMP R4, R6
	BEQ pkh_done
	MOVD R2, R10
	ADD R6<<2, R0, R14
	MOVD R5, R7
pkh_j1k:
	MOVHU.P 2(R10), R9
	FMOVS R9, F0
	FCVTHS F0, F0
	FMOVS F0, R9
	MOVW R9, (R14)
	ADD R1, R14
	SUBS $1, R7
	BNE pkh_j1k
	ADD R3, R2
	ADD $1, R6
	B pkh_j1
pkh_done:
	RET

// func PackKTBF16NEON(dst *float32, ldDst int, src *uint16, ldSrc int, n, d int)
//
// As PackKTNEON, with each 4-half load widened by ZIP1 with zero (each
// bfloat16 becomes the top half of a float32).
//
// R0 dst, R1 ldDst*4, R2 src (row j), R3 ldSrc*2, R4 n, R5 d, R6 j,
// R7 components left, R10-R13 src rows, R14 dst pointer.
TEXT ·PackKTBF16NEON(SB), NOSPLIT, $0-48
	MOVD dst+0(FP), R0
	MOVD ldDst+8(FP), R1
	MOVD src+16(FP), R2
	MOVD ldSrc+24(FP), R3
	MOVD n+32(FP), R4
	MOVD d+40(FP), R5
	CMP $1, R4
	BLT pkb_done
	CMP $1, R5
	BLT pkb_done
	LSL $2, R1
	LSL $1, R3
	VEOR V31.B16, V31.B16, V31.B16
	MOVD ZR, R6
pkb_j4:
	ADD $4, R6, R9
	CMP R4, R9
	BGT pkb_j1
	MOVD R2, R10
	ADD R3, R10, R11
	ADD R3, R11, R12
	ADD R3, R12, R13
	ADD R6<<2, R0, R14
	MOVD R5, R7
	CMP $4, R7
	BLT pkb_k1
pkb_k4:
	FMOVD.P 8(R10), F0
	FMOVD.P 8(R11), F1
	FMOVD.P 8(R12), F2
	FMOVD.P 8(R13), F3
	VZIP1 V0.H8, V31.H8, V0.H8
	VZIP1 V1.H8, V31.H8, V1.H8
	VZIP1 V2.H8, V31.H8, V2.H8
	VZIP1 V3.H8, V31.H8, V3.H8
	VTRN1 V1.S4, V0.S4, V4.S4
	VTRN2 V1.S4, V0.S4, V5.S4
	VTRN1 V3.S4, V2.S4, V6.S4
	VTRN2 V3.S4, V2.S4, V7.S4
	VTRN1 V6.D2, V4.D2, V16.D2
	VTRN1 V7.D2, V5.D2, V17.D2
	VTRN2 V6.D2, V4.D2, V18.D2
	VTRN2 V7.D2, V5.D2, V19.D2
	VST1.P [V16.S4], (R14)(R1)
	VST1.P [V17.S4], (R14)(R1)
	VST1.P [V18.S4], (R14)(R1)
	VST1.P [V19.S4], (R14)(R1)
	SUB $4, R7
	CMP $4, R7
	BGE pkb_k4
pkb_k1:
	CBZ R7, pkb_jnext
pkb_k1loop:
	VLD1.P 2(R10), V16.H[0]
	VLD1.P 2(R11), V16.H[1]
	VLD1.P 2(R12), V16.H[2]
	VLD1.P 2(R13), V16.H[3]
	VZIP1 V16.H8, V31.H8, V16.H8
	VST1.P [V16.S4], (R14)(R1)
	SUBS $1, R7
	BNE pkb_k1loop
pkb_jnext:
	ADD R3<<2, R2
	ADD $4, R6
	B pkb_j4
pkb_j1:
	CMP R4, R6
	BEQ pkb_done
	MOVD R2, R10
	ADD R6<<2, R0, R14
	MOVD R5, R7
pkb_j1k:
	MOVHU.P 2(R10), R9
	LSLW $16, R9
	MOVW R9, (R14)
	ADD R1, R14
	SUBS $1, R7
	BNE pkb_j1k
	ADD R3, R2
	ADD $1, R6
	B pkb_j1
pkb_done:
	RET

// func PackF16NEON(dst *float32, ldDst int, src *uint16, ldSrc int, n, d int)
//
// Each row 16, then 4, then 1 half at a time: FCVTL/FCVTL2 (FCVT for
// single halves).
//
// R0 dst (row j), R1 ldDst*4, R2 src (row j), R3 ldSrc*2, R4 rows left, R5 d,
// R7 elements left, R10 src pointer, R14 dst pointer.
TEXT ·PackF16NEON(SB), NOSPLIT, $0-48
	MOVD dst+0(FP), R0
	MOVD ldDst+8(FP), R1
	MOVD src+16(FP), R2
	MOVD ldSrc+24(FP), R3
	MOVD n+32(FP), R4
	MOVD d+40(FP), R5
	CMP $1, R4
	BLT ph_done
	CMP $1, R5
	BLT ph_done
	LSL $2, R1
	LSL $1, R3
ph_row:
	MOVD R2, R10
	MOVD R0, R14
	MOVD R5, R7
ph_16:
	CMP $16, R7
	BLT ph_4
	VLD1.P 32(R10), [V0.H8, V1.H8]
	WORD $0x0e217804 // FCVTL V4.4S, V0.4H
	WORD $0x4e217805 // FCVTL2 V5.4S, V0.8H
	WORD $0x0e217826 // FCVTL V6.4S, V1.4H
	WORD $0x4e217827 // FCVTL2 V7.4S, V1.8H
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R14)
	SUB $16, R7
	B ph_16
ph_4:
	CMP $4, R7
	BLT ph_1
	FMOVD.P 8(R10), F0
	WORD $0x0e217804 // FCVTL V4.4S, V0.4H
	VST1.P [V4.S4], 16(R14)
	SUB $4, R7
	B ph_4
ph_1:
	CBZ R7, ph_next
	MOVHU.P 2(R10), R9
	FMOVS R9, F0
	FCVTHS F0, F0
	FMOVS.P F0, 4(R14)
	SUB $1, R7
	B ph_1
ph_next:
	ADD R1, R0
	ADD R3, R2
	SUBS $1, R4
	BNE ph_row
ph_done:
	RET

// func PackBF16NEON(dst *float32, ldDst int, src *uint16, ldSrc int, n, d int)
//
// Each row 16, then 4, then 1 value at a time: ZIP1/ZIP2 with zero puts
// each bfloat16 in the top half of a float32 (a shift for single values).
//
// R0 dst (row j), R1 ldDst*4, R2 src (row j), R3 ldSrc*2, R4 rows left, R5 d,
// R7 elements left, R10 src pointer, R14 dst pointer.
TEXT ·PackBF16NEON(SB), NOSPLIT, $0-48
	MOVD dst+0(FP), R0
	MOVD ldDst+8(FP), R1
	MOVD src+16(FP), R2
	MOVD ldSrc+24(FP), R3
	MOVD n+32(FP), R4
	MOVD d+40(FP), R5
	CMP $1, R4
	BLT pb_done
	CMP $1, R5
	BLT pb_done
	LSL $2, R1
	LSL $1, R3
	VEOR V31.B16, V31.B16, V31.B16
pb_row:
	MOVD R2, R10
	MOVD R0, R14
	MOVD R5, R7
pb_16:
	CMP $16, R7
	BLT pb_4
	VLD1.P 32(R10), [V0.H8, V1.H8]
	VZIP1 V0.H8, V31.H8, V4.H8
	VZIP2 V0.H8, V31.H8, V5.H8
	VZIP1 V1.H8, V31.H8, V6.H8
	VZIP2 V1.H8, V31.H8, V7.H8
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R14)
	SUB $16, R7
	B pb_16
pb_4:
	CMP $4, R7
	BLT pb_1
	FMOVD.P 8(R10), F0
	VZIP1 V0.H8, V31.H8, V4.H8
	VST1.P [V4.S4], 16(R14)
	SUB $4, R7
	B pb_4
pb_1:
	CBZ R7, pb_next
	MOVHU.P 2(R10), R9
	LSLW $16, R9
	MOVW.P R9, 4(R14)
	SUB $1, R7
	B pb_1
pb_next:
	ADD R1, R0
	ADD R3, R2
	SUBS $1, R4
	BNE pb_row
pb_done:
	RET

// func SoftCapNEON(dst, src *float32, n int, c, inv float32)
//
// SoftCap for n a multiple of 4, four lanes a step, in the steps of the
// scalar Tanh (kernel/tanh.go) and of the amd64 kernels: x = src·inv,
// a = |x|; the polynomial a + a³·P(a²) by fused steps; the exponential
// of min(2a, 20) as Exp computes it (n = FRINTN(t·log2e), r = t − n·ln2hi
// − n·ln2lo fused, the polynomial by fused steps, p·r·r + r as
// fma(p·r, r, r), + 1, times 2^n as one exact scaling since n <= 29), then
// 1 − 2/(e+1); the two blended by a < 0.625 (false for NaN), the sign of x
// ORed back, times c. The Go wrapper does the last n mod 4 elements.
//
// V16 c, V17 inv, V18 0.625, V19 20, V20 log2e, V21 ln2hi, V22 ln2lo,
// V23-V28 P0-P5, V29 1.0, V30 2.0, V31 int32 127, V10-V15 the tanh
// coefficients C0-C5; V0-V9 work.
TEXT ·SoftCapNEON(SB), NOSPLIT, $0-32
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	FMOVS c+24(FP), F16
	VDUP V16.S[0], V16.S4
	FMOVS inv+28(FP), F17
	VDUP V17.S[0], V17.S4
	MOVD $0x3f200000, R9 // 0.625
	VDUP R9, V18.S4
	MOVD $0x41a00000, R9 // 20
	VDUP R9, V19.S4
	MOVD $0x3fb8aa3b, R9 // log2e
	VDUP R9, V20.S4
	MOVD $0x3f318000, R9 // ln2hi 0.693359375
	VDUP R9, V21.S4
	MOVD $0xb95e8083, R9 // ln2lo -2.12194440e-4
	VDUP R9, V22.S4
	MOVD $0x39506967, R9 // P0 1.9875691500e-4
	VDUP R9, V23.S4
	MOVD $0x3ab743ce, R9 // P1 1.3981999507e-3
	VDUP R9, V24.S4
	MOVD $0x3c088908, R9 // P2 8.3334519073e-3
	VDUP R9, V25.S4
	MOVD $0x3d2aa9c1, R9 // P3 4.1665795894e-2
	VDUP R9, V26.S4
	MOVD $0x3e2aaaaa, R9 // P4 1.6666665459e-1
	VDUP R9, V27.S4
	MOVD $0x3f000000, R9 // P5 5.0000001201e-1 (0.5 in float32)
	VDUP R9, V28.S4
	MOVD $0x3f800000, R9 // 1.0
	VDUP R9, V29.S4
	MOVD $0x40000000, R9 // 2.0
	VDUP R9, V30.S4
	MOVD $127, R9
	VDUP R9, V31.S4
	MOVD $0xbeaaaaaa, R9 // C0 -0.33333331010377593
	VDUP R9, V10.S4
	MOVD $0x3e088837, R9 // C1 0.13333212501733507
	VDUP R9, V11.S4
	MOVD $0xbd5cf801, R9 // C2 -0.053947454169667799
	VDUP R9, V12.S4
	MOVD $0x3cb1cc96, R9 // C3 0.021704000400234427
	VDUP R9, V13.S4
	MOVD $0xbc0618f6, R9 // C4 -0.0081846616708225253
	VDUP R9, V14.S4
	MOVD $0x3b0cd5f8, R9 // C5 0.0021489841078801922
	VDUP R9, V15.S4
	CBZ R2, sc_done
sc_loop:
	VLD1.P 16(R1), [V0.S4]
	WORD $0x6e31dc01 // FMUL V1.4S, V0.4S, V17.4S
	WORD $0x4ea0f822 // FABS V2.4S, V1.4S
	VEOR V2.B16, V1.B16, V3.B16 // the sign bits of x
	WORD $0x6e22dc44 // FMUL V4.4S, V2.4S, V2.4S
	// p = C0 + s·(C1 + s·(... + s·C5)), fused steps
	VORR V14.B16, V14.B16, V5.B16
	VFMLA V15.S4, V4.S4, V5.S4
	VORR V13.B16, V13.B16, V6.B16
	VFMLA V5.S4, V4.S4, V6.S4
	VORR V12.B16, V12.B16, V5.B16
	VFMLA V6.S4, V4.S4, V5.S4
	VORR V11.B16, V11.B16, V6.B16
	VFMLA V5.S4, V4.S4, V6.S4
	VORR V10.B16, V10.B16, V5.B16
	VFMLA V6.S4, V4.S4, V5.S4
	WORD $0x6e22dc86 // FMUL V6.4S, V4.4S, V2.4S
	VORR V2.B16, V2.B16, V7.B16
	VFMLA V6.S4, V5.S4, V7.S4 // small = a + a³·p
	WORD $0x4e22d448 // FADD V8.4S, V2.4S, V2.4S
	WORD $0x4eb3f508 // FMIN V8.4S, V8.4S, V19.4S
	WORD $0x6e34dd09 // FMUL V9.4S, V8.4S, V20.4S
	WORD $0x4e218929 // FRINTN V9.4S, V9.4S
	VFMLS V21.S4, V9.S4, V8.S4
	VFMLS V22.S4, V9.S4, V8.S4
	VORR V24.B16, V24.B16, V4.B16
	VFMLA V23.S4, V8.S4, V4.S4
	VORR V25.B16, V25.B16, V5.B16
	VFMLA V4.S4, V8.S4, V5.S4
	VORR V26.B16, V26.B16, V4.B16
	VFMLA V5.S4, V8.S4, V4.S4
	VORR V27.B16, V27.B16, V5.B16
	VFMLA V4.S4, V8.S4, V5.S4
	VORR V28.B16, V28.B16, V4.B16
	VFMLA V5.S4, V8.S4, V4.S4
	WORD $0x6e28dc85 // FMUL V5.4S, V4.4S, V8.4S
	VORR V8.B16, V8.B16, V6.B16
	VFMLA V5.S4, V8.S4, V6.S4
	WORD $0x4e3dd4c6 // FADD V6.4S, V6.4S, V29.4S
	WORD $0x4ea1b929 // FCVTZS V9.4S, V9.4S
	VADD V31.S4, V9.S4, V9.S4
	VSHL $23, V9.S4, V9.S4
	WORD $0x6e29dcc6 // FMUL V6.4S, V6.4S, V9.4S
	WORD $0x4e3dd4c6 // FADD V6.4S, V6.4S, V29.4S
	WORD $0x6e26ffc6 // FDIV V6.4S, V30.4S, V6.4S
	WORD $0x4ea6d7a6 // FSUB V6.4S, V29.4S, V6.4S
	WORD $0x6ea2e644 // FCMGT V4.4S, V18.4S, V2.4S
	VEOR V7.B16, V6.B16, V5.B16
	VAND V4.B16, V5.B16, V5.B16
	VEOR V5.B16, V6.B16, V6.B16
	VORR V3.B16, V6.B16, V6.B16
	WORD $0x6e30dcc6 // FMUL V6.4S, V6.4S, V16.4S
	VST1.P [V6.S4], 16(R0)
	SUBS $4, R2
	BNE sc_loop
sc_done:
	RET
