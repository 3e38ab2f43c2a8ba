package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/flashgo/flashgo/kernel/_asm/internal/asmkit"
	"github.com/flashgo/flashgo/kernel/_asm/x86enc"
)

// vpdpbusd emits VPDPBUSD src, u, acc (Go operand order): each dword of acc
// gains the four products of the unsigned bytes of u with the signed bytes
// of src in the same dword. avo's instruction table has no AVX512-VNNI, so
// the instruction goes in by name with its register use spelled out; Go's
// assembler knows the mnemonic (EVEX form only).
func vpdpbusd(src Op, u, acc VecVirtual) {
	Instruction(&ir.Instruction{
		Opcode:   "VPDPBUSD",
		Operands: []Op{src, u, acc},
		Inputs:   []Op{src, u, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVX512_VNNI"},
	})
}

// genQKDot emits the AVX512-VNNI kernel of QKRowsQ8Dot: int8 query rows
// against Q8 key rows with integer dot products.
//
// VPDPBUSD multiplies unsigned bytes by signed ones, so the kernel flips
// the sign bit of every key byte (k XOR 0x80 = k + 128 as an unsigned
// byte) and each dword accumulator starts at −128 times the sum of the
// query bytes it will meet (prepared by the Go wrapper): after the
// instruction it holds the exact integer Σ q·k of its four components. A
// 64-byte chunk of a row is two Q8 blocks; its sixteen dwords are
// converted to float32, multiplied by the query's block scales (expanded
// to one per dword by the wrapper) and added, with an FMA, times the
// key's two block scales (broadcast over their eight dwords each) into
// the row-and-key accumulator: four vector instructions per row, key and
// 64 components, against twelve for the dequantising QKRows. The
// accumulators of four keys are reduced together as QKRows does. The
// query's bytes, corrections and scales lie together, a chunk after the
// other, so that one pointer walks them.
func genQKDot(gather bool) {
	x := avx512
	base := "qkRowsQ8DotAVX512"
	name := asmkit.Export(dotName(base, gather))
	dotText(name, gather)
	dotDoc(gather, name, base,
		name+" is the AVX512-VNNI kernel of QKRowsQ8Dot: the scaled dot products",
		fmt.Sprintf("of rows (1..%d) prepared int8 query rows with cols Q8 key rows over their", x.mr),
		"first dv components (dv a multiple of 64; ldK in elements, a multiple",
		"of 32; ldQP in bytes):",
		"",
		"	for i := 0; i < rows; i++ {",
		"		for j := 0; j < cols; j++ {",
		"			var acc float32",
		"			for l := 0; l < dv/4; l++ { // lane l: components 4l..4l+3",
		"				ch := qp[i*ldQP+192*(l/16):] // the lane's chunk of row i",
		"				w := 4 * (l % 16)",
		"				dot := int32(ch[64+w:]) // qc: −128·Σ of the four query bytes",
		"				for t := 0; t < 4; t++ {",
		"					dot += int32(int8(ch[w+t])) * (int32(k[j*ldK+4*l+t]) + 128)",
		"				}",
		"				acc += float32(dot) * float32(ch[128+w:]) * ks[(j*ldK+4*l)/32]",
		"			}",
		"			s[i*ldS+j] = scale * acc",
		"		}",
		"	}",
		"",
		"where int32(b) and float32(b) read four little-endian bytes: each chunk of",
		"64 components of a query row is its 64 bytes, 16 correction dwords (so",
		"that dot is the exact Σ q·k of the lane) and 16 scales (the scale of the",
		"query block that holds the lane), as QKRowsQ8Dot prepares them. While it",
		"reads element e of k it prefetches element e+ahead into the L2 cache and",
		"the scales of row e+ahead into the L1; ahead changes the speed, never the",
		"result. The order of the additions differs from the loop.",
	)
	zs := x.Vec()
	sx := Load(Param("scale"), XMM())
	VBROADCASTSS(sx, zs)
	// The sign flip and the permutation that spreads a key's two block
	// scales over eight dwords each.
	flip := x.Vec()
	t := GP32()
	MOVL(U32(0x80808080), t)
	VPBROADCASTD(t, flip)
	idx := x.Vec()
	one := GP32()
	MOVL(U32(1), one)
	VPBROADCASTD(one, idx)
	kmask := K()
	MOVL(U32(0xff00), t)
	KMOVW(t, kmask)
	VMOVDQA32_Z(idx, kmask, idx) // 0 in dwords 0..7, 1 in 8..15

	dotRows(gather)(x, name, zs, func(d *dotChunk) {
		// The chunk's key vectors (flipped) and scales, then row by row
		// its query bytes, corrections and scales against each.
		kx := make([]VecVirtual, d.nk)
		kv := make([]VecVirtual, d.nk)
		for u := range d.nk {
			kx[u] = x.Vec()
			VPXORD(d.key(u, 0), flip, kx[u])
			kv[u] = x.Vec()
			VBROADCASTSD(d.keyScale(u, 0), kv[u])
			VPERMPS(kv[u], idx, kv[u])
		}
		for r := range d.rb {
			qv, qcv, qsv := x.Vec(), x.Vec(), x.Vec()
			VMOVDQU32(d.query(r, 0), qv)
			VMOVDQU32(d.query(r, 64), qcv)
			VMOVUPS(d.query(r, 128), qsv)
			for u := range d.nk {
				ia := x.Vec()
				VMOVDQA32(qcv, ia)
				vpdpbusd(qv, kx[u], ia)
				VCVTDQ2PS(ia, ia)
				VMULPS(qsv, ia, ia)
				VFMADD231PS(ia, kv[u], d.acc[r][u])
			}
		}
	})
}

// genQKDotAVX2 emits the AVX2 kernel of QKRowsQ8Dot, for CPUs without
// AVX512-VNNI: on the same prepared query rows, 32 components (one Q8
// block) at a time, VPMADDUBSW multiplies the keys' magnitudes |k| (as
// unsigned bytes, 0..128) by the query bytes given the keys' signs
// (VPSIGNB; the query bytes are within ±127, so a pair of products stays
// within ±32512 and never saturates) and VPMADDWD adds the pairs into
// exact int32 lane sums of four products. The conversion, the query's
// block scales (the prepared rows' expanded scales) and the FMA with the
// key's are as in the VNNI kernel: six instructions per row, key and 32
// components, against ten for the dequantising QKRows at this level.
func genQKDotAVX2(gather bool) {
	x := avx2
	base := "qkRowsQ8DotAVX2"
	name := asmkit.Export(dotName(base, gather))
	dotText(name, gather)
	dotDoc(gather, name, base,
		name+" is the AVX2 kernel of QKRowsQ8Dot: qkRowsQ8DotAVX512's products, for",
		fmt.Sprintf("rows 1..%d, from the same prepared query rows (whose correction dwords it", x.mr),
		"does not read: it multiplies |k| by the query bytes signed as k, with",
		"VPSIGNB, VPMADDUBSW and VPMADDWD, exact for query bytes within ±127).",
	)
	zs := x.Vec()
	sx := Load(Param("scale"), XMM())
	VBROADCASTSS(sx, zs)
	ones := x.Vec()
	t := GP32()
	MOVL(U32(0x00010001), t)
	MOVD(t, ones.AsX())
	VPBROADCASTD(ones.AsX(), ones)

	dotRows(gather)(x, name, zs, func(d *dotChunk) {
		for hh := range 2 { // the chunk's two blocks
			for u := range d.nk {
				kx := x.Vec()
				VMOVDQU(d.key(u, 32*hh), kx)
				ax := x.Vec()
				VPABSB(kx, ax)
				kv := x.Vec()
				VBROADCASTSS(d.keyScale(u, 4*hh), kv)
				for r := range d.rb {
					qv := x.Vec()
					VMOVDQU(d.query(r, 32*hh), qv)
					VPSIGNB(kx, qv, qv)
					VPMADDUBSW(qv, ax, qv)
					VPMADDWD(ones, qv, qv)
					VCVTDQ2PS(qv, qv)
					VMULPS(d.query(r, 128+32*hh), qv, qv)
					VFMADD231PS(qv, kv, d.acc[r][u])
				}
			}
		}
	})
}

// genQKDotAVXVNNI emits the AVX-VNNI kernel of QKRowsQ8Dot: the VNNI
// kernel's products on 256-bit vectors, for CPUs with the VEX form of
// VPDPBUSD (AVX-VNNI) whether or not they have AVX-512. Go's assembler
// encodes VPDPBUSD only as EVEX, which needs AVX512-VNNI, so the
// instruction goes in as bytes (x86enc.VPDPBUSDVEX) on fixed registers:
// the lane sums in Y12, the flipped key bytes in Y13, the query bytes in
// Y14, declared to avo as the instruction's inputs and output so that it
// keeps its own registers off them.
func genQKDotAVXVNNI(gather bool) {
	x := avx2
	base := "qkRowsQ8DotAVXVNNI"
	name := asmkit.Export(dotName(base, gather))
	dotText(name, gather)
	dotDoc(gather, name, base,
		name+" is the AVX-VNNI kernel of QKRowsQ8Dot: qkRowsQ8DotAVX512's products, for",
		fmt.Sprintf("rows 1..%d, on 256-bit vectors with the VEX form of VPDPBUSD, from the", x.mr),
		"same prepared query rows (their bytes, correction dwords and scales).",
	)
	zs := x.Vec()
	sx := Load(Param("scale"), XMM())
	VBROADCASTSS(sx, zs)
	flip := x.Vec() // 0x80 in every byte
	t := GP32()
	MOVL(U32(0x80808080), t)
	MOVD(t, flip.AsX())
	VPBROADCASTD(flip.AsX(), flip)

	sum, kb, qb := Y12, Y13, Y14
	dotRows(gather)(x, name, zs, func(d *dotChunk) {
		for hh := range 2 { // the chunk's two 32-byte halves
			for u := range d.nk {
				VPXOR(d.key(u, 32*hh), flip, kb) // k + 128, unsigned
				kv := x.Vec()
				VBROADCASTSS(d.keyScale(u, 4*hh), kv)
				for r := range d.rb {
					VMOVDQU(d.query(r, 64+32*hh), sum) // −128·Σq of each lane
					VMOVDQU(d.query(r, 32*hh), qb)
					vpdpbusdVEX(sum, kb, qb)
					VCVTDQ2PS(sum, sum)
					VMULPS(d.query(r, 128+32*hh), sum, sum)
					VFMADD231PS(sum, kv, d.acc[r][u])
				}
			}
		}
	})
}

// vpdpbusdVEX emits VPDPBUSD dst, u, s (Intel order; the VEX form) as
// bytes: each dword of dst gains the four products of the unsigned bytes
// of u with the signed bytes of s. The first byte carries the
// instruction's register use, so that avo's liveness sees it.
func vpdpbusdVEX(dst, u, s VecPhysical) {
	b := x86enc.VPDPBUSDVEX(x86enc.Num(dst), x86enc.Num(u), x86enc.Num(s))
	Comment(fmt.Sprintf("VPDPBUSD %s, %s, %s (VEX)", dst.Asm(), u.Asm(), s.Asm()))
	for i, c := range b {
		in := &ir.Instruction{Opcode: "BYTE", Operands: []Op{U8(c)}}
		if i == 0 {
			in.Inputs = []Op{dst, u, s}
			in.Outputs = []Op{dst}
		}
		Instruction(in)
	}
}

// dotName is the name of a QKRowsQ8Dot kernel, or of its gathering form.
func dotName(base string, gather bool) string {
	if gather {
		return strings.Replace(base, "Q8Dot", "Q8DotGather", 1)
	}
	return base
}

// dotText starts a QKRowsQ8Dot kernel: key rows ldK apart, prefetched
// ahead bytes on, or (gather) key j's row at element off[j] of k,
// prefetching the row at pfo[j].
func dotText(name string, gather bool) {
	if gather {
		TEXT(name, NOSPLIT, "func(s *float32, ldS int, qp *byte, ldQP int, k *int8, off, pfo *int, ks *float32, rows, cols, dv int, scale float32)")
	} else {
		TEXT(name, NOSPLIT, "func(s *float32, ldS int, qp *byte, ldQP int, k *int8, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int)")
	}
	Pragma("noescape")
}

// dotDoc writes a QKRowsQ8Dot kernel's doc comment: lines, or for the
// gathering form a pointer to base's.
func dotDoc(gather bool, name, base string, lines ...string) {
	if !gather {
		Doc(lines...)
		return
	}
	Doc(
		name+" is "+base+" over key rows that lie anywhere in k: key j's",
		"row starts at element off[j] (a multiple of 32), its scales at",
		"ks[off[j]/32]. While it reads key j it prefetches the row at pfo[j] into",
		"the L2 cache (its scales into the L1); pfo changes the speed, never the",
		"result. Each score has the bits "+base+" gives the same row.",
	)
}

// dotRows returns the loops around a QKRowsQ8Dot kernel's chunk body: keys
// ldK apart (genDotRows) or at offsets (genDotRowsGather).
func dotRows(gather bool) func(x *isa, name string, zs VecVirtual, chunk func(d *dotChunk)) {
	if gather {
		return genDotRowsGather
	}
	return genDotRows
}

// dotChunk is what a QKRowsQ8Dot kernel's chunk body sees: the register
// block (rb query rows, nk keys) and its accumulators, and the addresses of
// the current 64-component chunk.
type dotChunk struct {
	rb, nk           int
	acc              [][]VecVirtual
	qp, ldQ, ldQ3    Register // prepared query rows, ldQ bytes apart
	kc, ldKb, ldKb3  Register // key bytes, ldK apart
	ksc, ldKs, ldKs3 Register // their scales, ldK/8 bytes apart

	// The gathering form: key u's row at kg[u] and its scales at ks[u],
	// the chunk at byte 8·c of the row and byte c of its scales.
	gather bool
	kg, ks []Register
	c      Register
}

// query is row r of the prepared query rows at byte disp of the chunk.
func (d *dotChunk) query(r, disp int) Mem { return rowAddr(d.qp, d.ldQ, d.ldQ3, r, disp) }

// key is key u's bytes at byte disp of the chunk.
func (d *dotChunk) key(u, disp int) Mem {
	if d.gather {
		return Mem{Base: d.kg[u], Index: d.c, Scale: 8, Disp: disp}
	}
	return rowAddr(d.kc, d.ldKb, d.ldKb3, u, disp)
}

// keyScale is key u's block scale at byte disp of the chunk's scales.
func (d *dotChunk) keyScale(u, disp int) Mem {
	if d.gather {
		return Mem{Base: d.ks[u], Index: d.c, Scale: 1, Disp: disp}
	}
	return rowAddr(d.ksc, d.ldKs, d.ldKs3, u, disp)
}

// genDotRows emits the loops that the QKRowsQ8Dot kernels share around
// their chunk body: dispatch on the rows, groups of four keys and then
// single keys, the walk over 64-component chunks with the prefetches, and
// the reduction and store of the scores (storeScores). chunk emits the
// products of one chunk into d.acc.
func genDotRows(x *isa, name string, zs VecVirtual, chunk func(d *dotChunk)) {
	dispatchRows(x, name)
	for rb := x.mr; rb >= 1; rb-- {
		lbl := func(s string) string { return fmt.Sprintf("%s_r%d_%s", name, rb, s) }
		Label(fmt.Sprintf("%s_r%d", name, rb))
		kc := Load(Param("k"), GP64())   // key bytes of the group at the chunk
		ksc := Load(Param("ks"), GP64()) // their scales
		sp := Load(Param("s"), GP64())
		jleft := Load(Param("cols"), GP64())
		for _, nk := range []int{4, 1} {
			loop, done := lbl(fmt.Sprintf("k%d", nk)), lbl(fmt.Sprintf("k%d_done", nk))
			Label(loop)
			CMPQ(jleft, U8(nk))
			JL(LabelRef(done))
			d := &dotChunk{rb: rb, nk: nk, kc: kc, ksc: ksc, acc: zeroAcc(x, rb, nk)}
			// The prepared query rows, ldQP bytes apart: for every chunk of
			// 64 components its 64 bytes, its 16 correction dwords and its
			// 16 expanded scales.
			d.qp = Load(Param("qp"), GP64())
			d.ldQ = Load(Param("ldQP"), GP64())
			if x.mr > 2 {
				d.ldQ3 = GP64()
				LEAQ(Mem{Base: d.ldQ, Index: d.ldQ, Scale: 2}, d.ldQ3)
			}
			// Key bytes ldK apart, their scales ldK/8 bytes apart.
			d.ldKb = Load(Param("ldK"), GP64())
			d.ldKb3 = GP64()
			LEAQ(Mem{Base: d.ldKb, Index: d.ldKb, Scale: 2}, d.ldKb3)
			d.ldKs = GP64()
			MOVQ(d.ldKb, d.ldKs)
			SHRQ(U8(3), d.ldKs)
			d.ldKs3 = GP64()
			LEAQ(Mem{Base: d.ldKs, Index: d.ldKs, Scale: 2}, d.ldKs3)
			pf := Load(Param("ahead"), GP64())
			SARQ(U8(3), pf)
			ADDQ(ksc, pf)
			PREFETCHT0(Mem{Base: pf})
			pf = Load(Param("ahead"), GP64())
			ADDQ(kc, pf)
			cnt := Load(Param("dv"), GP64())
			SHRQ(U8(6), cnt)
			inner := lbl(fmt.Sprintf("k%d_inner", nk))
			Label(inner)
			for u := range nk {
				PREFETCHT2(rowAddr(pf, d.ldKb, d.ldKb3, u, 0))
			}
			chunk(d)
			ADDQ(U32(192), d.qp)
			ADDQ(U8(64), kc)
			ADDQ(U8(64), pf)
			ADDQ(U8(8), ksc)
			DECQ(cnt)
			JNZ(LabelRef(inner))

			storeScores(x, d.acc, sp, zs)
			// Next group of keys: back by the dv bytes (dv/8 bytes of
			// scales) the inner loop went, on by nk rows.
			dvb := Load(Param("dv"), GP64())
			SUBQ(dvb, kc)
			SHRQ(U8(3), dvb)
			SUBQ(dvb, ksc)
			ldK := Load(Param("ldK"), GP64())
			if nk == 4 {
				SHLQ(U8(2), ldK)
			}
			ADDQ(ldK, kc)
			SHRQ(U8(3), ldK)
			ADDQ(ldK, ksc)
			ADDQ(U8(4*nk), sp)
			SUBQ(U8(nk), jleft)
			JMP(LabelRef(loop))
			Label(done)
		}
		asmkit.Ret()
	}
}

// genDotRowsGather is genDotRows for the gathering kernels: key j's row at
// element off[j] of k (its scales at byte off[j]/8 of ks), groups of four
// keys and then single keys, each chunk of a group's target rows (at
// pfo[j]) prefetched with the group's chunk, as genQKGather does.
func genDotRowsGather(x *isa, name string, zs VecVirtual, chunk func(d *dotChunk)) {
	jl := AllocLocal(8)  // the next key
	cnt := AllocLocal(8) // chunks left in the row
	var tp [4]Mem        // the target rows of a group's keys
	for u := range tp {
		tp[u] = AllocLocal(8)
	}
	dispatchRows(x, name)
	for rb := x.mr; rb >= 1; rb-- {
		lbl := func(s string) string { return fmt.Sprintf("%s_r%d_%s", name, rb, s) }
		Label(fmt.Sprintf("%s_r%d", name, rb))
		MOVQ(U32(0), jl)
		for _, nk := range []int{4, 1} {
			loop, done := lbl(fmt.Sprintf("k%d", nk)), lbl(fmt.Sprintf("k%d_done", nk))
			j := gatherGroup(q8, jl, nk, loop, done, tp[:nk])
			d := &dotChunk{rb: rb, nk: nk, gather: true}
			d.kg, d.ks = gatherRows(q8, j, nk)
			d.acc = zeroAcc(x, rb, nk)
			d.qp = Load(Param("qp"), GP64())
			d.ldQ = Load(Param("ldQP"), GP64())
			if x.mr > 2 {
				d.ldQ3 = GP64()
				LEAQ(Mem{Base: d.ldQ, Index: d.ldQ, Scale: 2}, d.ldQ3)
			}
			n := Load(Param("dv"), GP64())
			SHRQ(U8(6), n)
			MOVQ(n, cnt)
			d.c = GP64()
			XORQ(d.c, d.c)
			inner := lbl(fmt.Sprintf("k%d_inner", nk))
			Label(inner)
			prefetchTargets(tp[:nk], d.c, 8)
			chunk(d)
			ADDQ(U32(192), d.qp)
			ADDQ(U8(8), d.c)
			DECQ(cnt)
			JNZ(LabelRef(inner))

			gatherGroupEnd(x, d.acc, zs, jl, nk, loop)
			Label(done)
		}
		asmkit.Ret()
	}
}
