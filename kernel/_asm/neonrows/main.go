// Command neonrows writes kernel/internal/arm/rows_arm64.s, the NEON decode kernels
// behind QKRows and PVRows on arm64 (float32, binary16, bfloat16, Q8 and
// fp8 rows read where they lie, converted to float32 in registers):
//
//	go run ./neonrows -out ../internal/arm/rows_arm64.s
//
// Go's arm64 assembler lacks most of the AdvSIMD instructions they need
// (FMLA by element, FCVTL, SHLL, SXTL, SCVTF, FADDP, PRFM with a register
// offset, ...), so each kernel is written here in GNU syntax, assembled by
// GNU as (Debian's binutils-aarch64-linux-gnu: aarch64-linux-gnu-as and
// aarch64-linux-gnu-objdump must be on the PATH) and emitted as WORD
// directives, each after a comment holding the exact instruction it
// encodes. Only the argument loads and RET are Go instructions; branches
// are encoded relative to their targets within one kernel's WORDs, which
// the Go assembler emits contiguously. Registers: R0–R17 and R19–R25 and
// V0–V31; never R18 (platform), R26–R30 (Go's context, REGTMP, g, FP, LR).
//
// QKRows (rows 1..4, dv a multiple of 16, or 32 for Q8): keys go four at a
// time into a 4 × 4 block of accumulators V16–V31 (row r, key k in
// V(16+4r+k)), one 4-lane vector of components a step: four query vectors
// (V0–V3), each key's vector loaded and converted (V4–V7), 16 FMLA. A key
// row's four lanes are reduced by two FADDP, (a0+a1)+(a2+a3), scaled and
// stored; the keys left after the groups of four go one at a time through
// the same steps and the same reduction, so that a score's bits do not
// depend on the group its key fell in. Rows past the last are clamped to
// it: they compute the last row again and are not stored.
//
// PVRows (rows 1..4, dv as above): the output goes 16 columns at a time in
// V16–V31 (row r, columns 4v..4v+3 in V(16+4r+v)), loaded from o, then for
// every key its 16 values are converted (V4–V7) and added times each row's
// probability (FMLA by element), and the block is stored back. Rows past
// the last are clamped: they load, compute and store the last row's
// values again, the same bits to the same place.
//
// While reading a row the kernels prefetch the bytes ahead further on into
// the L2 (PRFM PLDL2KEEP): QKRows the whole row once a key, PVRows the
// 16 columns' bytes once a key and column block.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// elem is one element type of the rows.
type elem struct {
	name  string // in the function names: F32, F16, BF16, Q8
	goPtr string // the Go type of the row pointer
	shift int    // log2 of its size in bytes
}

var (
	f32  = elem{"F32", "*float32", 2}
	f16  = elem{"F16", "*uint16", 1}  // widened by FCVTL
	bf16 = elem{"BF16", "*uint16", 1} // widened by SHLL #16
	q8   = elem{"Q8", "*int8", 0}     // SXTL, SCVTF, and FMUL by the block's scale
	e5m2 = elem{"E5M2", "*uint8", 0}  // SHLL #8 (the top byte of a binary16), FCVTL
	e4m3 = elem{"E4M3", "*uint8", 0}  // moved into a binary16 of its value times 2^-8, FCVTL
)

// isFP8 reports whether e is an 8-bit float. Their kernels take their
// scale as the amd64 ones do (kernel/_asm/decode/fp8.go): QK folds the
// keys' scale (times 2^8 for E4M3) into the score scale, and PV is given
// probabilities already multiplied by the values' scale.
func isFP8(e elem) bool { return e == e5m2 || e == e4m3 }

// fp8Consts sets v14 to eight 0x007f and v15 to eight 0x4000 halfwords,
// the constants of widenE4M3.
func (f *fn) fp8Consts() {
	f.i("movi v14.8h, #0x7f")
	f.i("movi v15.8h, #0x40, lsl #8")
}

// widenE4M3 turns the sign-extended E4M3 bytes in the halfwords of v (hi:
// the upper four, with the 2-suffixed forms) into binary16s of their
// values times 2^-8: the magnitude shifted left by 7 lines up with a
// binary16's exponent and mantissa, an AND (BIC) clears the sign's copy in
// bit 14, and the NaN pattern (magnitude 0x7f, found by CMEQ against v14)
// gets bit 14 back, which makes it the binary16 NaN 0x7f80 of its sign.
// It uses the temporary t and the constants of fp8Consts.
func (f *fn) widenE4M3(v, t int) {
	f.i("and v%d.16b, v%d.16b, v14.16b", t, v)
	f.i("cmeq v%d.8h, v%d.8h, v14.8h", t, t)
	f.i("shl v%d.8h, v%d.8h, #7", v, v)
	f.i("bic v%d.8h, #0x40, lsl #8", v)
	f.i("and v%d.16b, v%d.16b, v15.16b", t, t)
	f.i("orr v%d.16b, v%d.16b, v%d.16b", v, v, t)
}

// fn collects one kernel's GNU assembly.
type fn struct {
	name  string
	lines []string
	seq   int
}

func (f *fn) i(format string, a ...any) { f.lines = append(f.lines, "\t"+fmt.Sprintf(format, a...)) }
func (f *fn) label(l string)            { f.lines = append(f.lines, l+":") }
func (f *fn) newLabel(s string) string  { f.seq++; return fmt.Sprintf(".L%s_%s%d", f.name, s, f.seq) }

// clamp sets dst = prev + ld when rows > n, else prev: the row pointers of
// a block of 1..4 rows, the extra ones repeating the last.
func (f *fn) clamp(dst, prev, ld string, n int) {
	f.i("add %s, %s, %s", dst, prev, ld)
	f.i("cmp x7, #%d", n)
	f.i("csel %s, %s, %s, gt", dst, dst, prev)
}

// prefetchRow prefetches the bytes of a row of dv elements, ahead (x10)
// bytes past the row at ptr, a cache line at a time; it uses x15 and x16.
func (f *fn) prefetchRow(e elem, ptr string) {
	l := f.newLabel("pf")
	f.i("lsl x15, x9, #%d", e.shift)
	f.i("add x16, %s, x10", ptr)
	f.label(l)
	f.i("prfm pldl2keep, [x16]")
	f.i("add x16, x16, #64")
	f.i("subs x15, x15, #64")
	f.i("b.gt %s", l)
}

// loadKey loads the next 4 components of the key row at ptr (post-
// incremented) into v as float32; for Q8, lane k of v12 holds the block's
// scale.
func (f *fn) loadKey(e elem, v int, ptr string, k int) {
	switch e {
	case f32:
		f.i("ldr q%d, [%s], #16", v, ptr)
	case f16:
		f.i("ldr d%d, [%s], #8", v, ptr)
		f.i("fcvtl v%d.4s, v%d.4h", v, v)
	case bf16:
		f.i("ldr d%d, [%s], #8", v, ptr)
		f.i("shll v%d.4s, v%d.4h, #16", v, v)
	case q8:
		f.i("ldr s%d, [%s], #4", v, ptr)
		f.i("sxtl v%d.8h, v%d.8b", v, v)
		f.i("sxtl v%d.4s, v%d.4h", v, v)
		f.i("scvtf v%d.4s, v%d.4s", v, v)
		f.i("fmul v%d.4s, v%d.4s, v12.s[%d]", v, v, k)
	case e5m2:
		f.i("ldr s%d, [%s], #4", v, ptr)
		f.i("shll v%d.8h, v%d.8b, #8", v, v)
		f.i("fcvtl v%d.4s, v%d.4h", v, v)
	case e4m3:
		f.i("ldr s%d, [%s], #4", v, ptr)
		f.i("sxtl v%d.8h, v%d.8b", v, v)
		f.widenE4M3(v, 12)
		f.i("fcvtl v%d.4s, v%d.4h", v, v)
	}
}

var keyPtr = []string{"x17", "x19", "x20", "x21"}
var scalePtr = []string{"x22", "x23", "x24", "x25"}

// qkSteps emits the product of nk (4 or 1) keys over all dv components.
func (f *fn) qkSteps(e elem, nk int) {
	for k := range nk {
		f.prefetchRow(e, keyPtr[k])
	}
	for r := range 4 {
		for k := range nk {
			f.i("movi v%d.4s, #0", 16+4*r+k)
		}
	}
	f.i("mov x16, #0") // the queries' byte offset
	f.i("mov x15, x9") // components left
	step := func() {
		for r := range 4 {
			f.i("ldr q%d, [x%d, x16]", r, 11+r)
		}
		for k := range nk {
			f.loadKey(e, 4+k, keyPtr[k], k)
			for r := range 4 {
				f.i("fmla v%d.4s, v%d.4s, v%d.4s", 16+4*r+k, r, 4+k)
			}
		}
		f.i("add x16, x16, #16")
	}
	if e == q8 {
		blk, st := f.newLabel("blk"), f.newLabel("step")
		f.label(blk)
		for k := range nk {
			f.i("ld1 {v12.s}[%d], [%s], #4", k, scalePtr[k])
		}
		f.i("mov x3, #8")
		f.label(st)
		step()
		f.i("subs x3, x3, #1")
		f.i("b.ne %s", st)
		f.i("subs x15, x15, #32")
		f.i("b.ne %s", blk)
		return
	}
	st := f.newLabel("step")
	f.label(st)
	step()
	f.i("subs x15, x15, #4")
	f.i("b.ne %s", st)
}

// storeRows stores v8+r for the rows r < rows, whole vectors (4 scores)
// or their first lane.
func (f *fn) storeRows(reg string, done string) {
	f.i("str %s8, [x0]", reg)
	f.i("mov x15, x0")
	for r := 1; r < 4; r++ {
		f.i("cmp x7, #%d", r)
		f.i("b.le %s", done)
		f.i("add x15, x15, x1")
		f.i("str %s%d, [x15]", reg, 8+r)
	}
}

// nextKeys moves qkRows on by n keys (4 or 1): the scores (x0), the key
// rows (x4) and for Q8 their scales (x6), and counts them off (x8).
func (f *fn) nextKeys(e elem, n int) {
	shift := ""
	if n == 4 {
		shift = ", lsl #2"
	}
	f.i("add x0, x0, #%d", 4*n)
	f.i("add x4, x4, x5%s", shift)
	if e == q8 {
		f.i("add x6, x6, x2%s", shift)
	}
	f.i("subs x8, x8, #%d", n)
}

func qkRows(e elem) *fn {
	f := &fn{name: "QkRows" + e.name + "NEON"}
	f.i("lsl x1, x1, #2")
	f.i("lsl x3, x3, #2")
	f.i("lsl x5, x5, #%d", e.shift)
	f.i("mov x11, x2")
	f.clamp("x12", "x11", "x3", 1)
	f.clamp("x13", "x12", "x3", 2)
	f.clamp("x14", "x13", "x3", 3)
	if e == q8 {
		f.i("lsr x2, x5, #3") // bytes of scales a key row: ldK/32 floats
	}
	if isFP8(e) {
		// The keys' scale (times 2^8 for E4M3) goes into the score scale.
		f.i("ldr s12, [x6]")
		if e == e4m3 {
			f.i("movz w15, #0x4380, lsl #16") // 256
			f.i("fmov s14, w15")
			f.i("fmul s12, s12, s14")
		}
		f.i("fmul s13, s13, s12")
		f.fp8Consts()
	}
	single, group, done := f.newLabel("single"), f.newLabel("group"), f.newLabel("done")
	f.i("subs x8, x8, #4")
	f.i("b.lt %s", single)

	f.label(group)
	f.i("mov x17, x4")
	f.i("add x19, x17, x5")
	f.i("add x20, x19, x5")
	f.i("add x21, x20, x5")
	if e == q8 {
		f.i("mov x22, x6")
		f.i("add x23, x22, x2")
		f.i("add x24, x23, x2")
		f.i("add x25, x24, x2")
	}
	f.qkSteps(e, 4)
	for r := range 4 {
		a := 16 + 4*r
		f.i("faddp v%d.4s, v%d.4s, v%d.4s", 8+r, a, a+1)
		f.i("faddp v12.4s, v%d.4s, v%d.4s", a+2, a+3)
		f.i("faddp v%d.4s, v%d.4s, v12.4s", 8+r, 8+r)
		f.i("fmul v%d.4s, v%d.4s, v13.s[0]", 8+r, 8+r)
	}
	stored := f.newLabel("stored")
	f.storeRows("q", stored)
	f.label(stored)
	f.nextKeys(e, 4)
	f.i("b.ge %s", group)

	f.label(single)
	f.i("adds x8, x8, #4")
	f.i("b.eq %s", done)
	one := f.newLabel("one")
	f.label(one)
	f.i("mov x17, x4")
	if e == q8 {
		f.i("mov x22, x6")
	}
	f.qkSteps(e, 1)
	for r := range 4 {
		a := 16 + 4*r
		f.i("faddp v%d.4s, v%d.4s, v%d.4s", 8+r, a, a)
		f.i("faddp v%d.4s, v%d.4s, v%d.4s", 8+r, 8+r, 8+r)
		f.i("fmul v%d.4s, v%d.4s, v13.s[0]", 8+r, 8+r)
	}
	stored1 := f.newLabel("stored")
	f.storeRows("s", stored1)
	f.label(stored1)
	f.nextKeys(e, 1)
	f.i("b.ne %s", one)
	f.label(done)
	return f
}

func pvRows(e elem) *fn {
	f := &fn{name: "PvRows" + e.name + "NEON"}
	f.i("lsl x1, x1, #2")
	f.i("lsl x3, x3, #2")
	f.i("lsl x5, x5, #%d", e.shift)
	f.i("lsl x9, x9, #2") // dv in output bytes
	f.i("mov x11, x0")
	f.clamp("x12", "x11", "x1", 1)
	f.clamp("x13", "x12", "x1", 2)
	f.clamp("x14", "x13", "x1", 3)
	f.i("mov x15, x2")
	f.clamp("x16", "x15", "x3", 1)
	f.clamp("x17", "x16", "x3", 2)
	f.clamp("x19", "x17", "x3", 3)
	if e == q8 {
		f.i("lsr x2, x5, #3") // bytes of scales a value row
	}
	if e == e4m3 {
		f.fp8Consts()
	}
	pRow := []string{"x15", "x16", "x17", "x19"}
	f.i("mov x20, #0") // the block's first column, in output bytes
	f.i("mov x21, #0") // and in bytes of a value row
	cblk, key := f.newLabel("cols"), f.newLabel("key")
	f.label(cblk)
	for r := range 4 {
		f.i("add x22, x%d, x20", 11+r)
		f.i("ld1 {v%d.4s, v%d.4s, v%d.4s, v%d.4s}, [x22]", 16+4*r, 17+4*r, 18+4*r, 19+4*r)
	}
	f.i("add x23, x4, x21")
	if e == q8 {
		f.i("lsr x25, x21, #5")
		f.i("add x24, x6, x25, lsl #2")
	}
	f.i("mov x7, #0") // the probabilities' byte offset
	f.i("mov x3, x8") // keys left
	f.label(key)
	for r := range 4 {
		f.i("ldr s%d, [%s, x7]", r, pRow[r])
	}
	f.i("prfm pldl2keep, [x23, x10]")
	switch e {
	case f16, bf16:
		f.i("ldp q8, q9, [x23]")
		op, op2, sh := "fcvtl", "fcvtl2", ""
		if e == bf16 {
			op, op2, sh = "shll", "shll2", ", #16"
		}
		f.i("%s v4.4s, v8.4h%s", op, sh)
		f.i("%s v5.4s, v8.8h%s", op2, sh)
		f.i("%s v6.4s, v9.4h%s", op, sh)
		f.i("%s v7.4s, v9.8h%s", op2, sh)
	case q8:
		f.i("ldr q8, [x23]")
		f.i("sxtl v9.8h, v8.8b")
		f.i("sxtl2 v10.8h, v8.16b")
		f.i("sxtl v4.4s, v9.4h")
		f.i("sxtl2 v5.4s, v9.8h")
		f.i("sxtl v6.4s, v10.4h")
		f.i("sxtl2 v7.4s, v10.8h")
		f.i("ld1r {v11.4s}, [x24]")
		f.i("add x24, x24, x2")
		for v := 4; v < 8; v++ {
			f.i("scvtf v%d.4s, v%d.4s", v, v)
			f.i("fmul v%d.4s, v%d.4s, v11.4s", v, v)
		}
	case e5m2:
		f.i("ldr q8, [x23]")
		f.i("shll v9.8h, v8.8b, #8")
		f.i("shll2 v10.8h, v8.16b, #8")
		f.i("fcvtl v4.4s, v9.4h")
		f.i("fcvtl2 v5.4s, v9.8h")
		f.i("fcvtl v6.4s, v10.4h")
		f.i("fcvtl2 v7.4s, v10.8h")
	case e4m3:
		f.i("ldr q8, [x23]")
		f.i("sxtl v9.8h, v8.8b")
		f.i("sxtl2 v10.8h, v8.16b")
		f.widenE4M3(9, 12)
		f.widenE4M3(10, 13)
		f.i("fcvtl v4.4s, v9.4h")
		f.i("fcvtl2 v5.4s, v9.8h")
		f.i("fcvtl v6.4s, v10.4h")
		f.i("fcvtl2 v7.4s, v10.8h")
	}
	for r := range 4 {
		for v := range 4 {
			f.i("fmla v%d.4s, v%d.4s, v%d.s[0]", 16+4*r+v, 4+v, r)
		}
	}
	f.i("add x23, x23, x5")
	f.i("add x7, x7, #4")
	f.i("subs x3, x3, #1")
	f.i("b.ne %s", key)
	for r := range 4 {
		f.i("add x22, x%d, x20", 11+r)
		f.i("st1 {v%d.4s, v%d.4s, v%d.4s, v%d.4s}, [x22]", 16+4*r, 17+4*r, 18+4*r, 19+4*r)
	}
	f.i("add x20, x20, #64")
	f.i("add x21, x21, #%d", 16<<e.shift)
	f.i("cmp x20, x9")
	f.i("b.lt %s", cblk)
	return f
}

// words assembles f with GNU as and returns the encoding of each of its
// instructions, in order.
func words(f *fn, dir string) []string {
	src := filepath.Join(dir, f.name+".s")
	obj := filepath.Join(dir, f.name+".o")
	if err := os.WriteFile(src, []byte(strings.Join(f.lines, "\n")+"\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	if out, err := exec.Command("aarch64-linux-gnu-as", "-o", obj, src).CombinedOutput(); err != nil {
		log.Fatalf("%s: %v\n%s", f.name, err, out)
	}
	out, err := exec.Command("aarch64-linux-gnu-objdump", "-d", obj).Output()
	if err != nil {
		log.Fatalf("%s: objdump: %v", f.name, err)
	}
	var w []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) >= 3 && strings.HasSuffix(strings.TrimSpace(fields[0]), ":") {
			w = append(w, strings.TrimSpace(fields[1]))
		}
	}
	return w
}

type kernel struct {
	f      *fn
	params []string // name and Go type, in order
}

func main() {
	out := flag.String("out", "../internal/arm/rows_arm64.s", "the assembly file to write")
	flag.Parse()
	dir, err := os.MkdirTemp("", "neonrows")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	var ks []kernel
	for _, e := range []elem{f32, f16, bf16, q8, e5m2, e4m3} {
		ks = append(ks, kernel{qkRows(e), []string{"s *float32", "ldS int", "q *float32", "ldQ int", "k " + e.goPtr, "ldK int", "ks *float32", "rows int", "cols int", "dv int", "scale float32", "ahead int"}})
	}
	for _, e := range []elem{f16, bf16, q8, e5m2, e4m3} {
		ks = append(ks, kernel{pvRows(e), []string{"o *float32", "ldO int", "p *float32", "ldP int", "v " + e.goPtr, "ldV int", "vs *float32", "rows int", "cols int", "dv int", "ahead int"}})
	}

	var b strings.Builder
	b.WriteString("// Code generated by command: go run ./neonrows -out ../internal/arm/rows_arm64.s. DO NOT EDIT.\n\n")
	b.WriteString("//go:build !purego\n\n#include \"textflag.h\"\n\n")
	b.WriteString("// The NEON decode kernels (kernel/_asm/neonrows says how they work). Every\n")
	b.WriteString("// WORD follows a comment holding the exact instruction it encodes, in GNU\n// syntax, as assembled by GNU as.\n")
	regs := []string{"R0", "R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9", "F13", "R10"}
	for _, k := range ks {
		fmt.Fprintf(&b, "\n// func %s(%s)\n", k.f.name, strings.Join(k.params, ", "))
		off := 0
		fmt.Fprintf(&b, "TEXT ·%s(SB), NOSPLIT, $0-%d\n", k.f.name, 8*len(k.params))
		for i, p := range k.params {
			name, typ, _ := strings.Cut(p, " ")
			reg := regs[i]
			if i == len(k.params)-1 {
				reg = "R10" // ahead
			}
			if typ == "float32" {
				fmt.Fprintf(&b, "\tFMOVS %s+%d(FP), F13\n", name, off)
			} else {
				fmt.Fprintf(&b, "\tMOVD %s+%d(FP), %s\n", name, off, reg)
			}
			off += 8
		}
		w := words(k.f, dir)
		n := 0
		for _, l := range k.f.lines {
			if !strings.HasPrefix(l, "\t") {
				fmt.Fprintf(&b, "\n\t// %s\n", l)
				continue
			}
			if n >= len(w) {
				log.Fatalf("%s: GNU as gave %d words for more instructions", k.f.name, len(w))
			}
			fmt.Fprintf(&b, "\tWORD $0x%s // %s\n", w[n], strings.TrimSpace(l))
			n++
		}
		if n != len(w) {
			log.Fatalf("%s: %d instructions, %d words", k.f.name, n, len(w))
		}
		b.WriteString("\tRET\n")
	}
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}
