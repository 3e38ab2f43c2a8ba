package x86enc

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mmcloughlin/avo/reg"
)

// The encodings are checked against the GNU assembler: every case is
// written as Intel-syntax source, assembled with as, disassembled with
// objdump, and each instruction's bytes compared with the encoder's.

var gprNames = [16]string{"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
	"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"}

type encCase struct {
	src string // Intel syntax, as GNU as reads it
	got []byte
}

// vecSets and gprSets cover every encoding class: the low 8, the REX/EVEX
// extended 8–15 and 16–31 (EVEX R', V', X), and the bases that need a SIB
// byte (RSP, R12) or a displacement (RBP, R13).
var (
	vecSet = []int{0, 1, 7, 8, 15, 16, 23, 24, 31}
	gprSet = []int{0, 1, 3, 4, 5, 6, 7, 8, 11, 12, 13, 15}
	// Displacements: zero, compressible disp8·4 at both ends, just
	// outside them, and multiples of 1 that are not of 4.
	dispSet = []int32{0, 4, 64, -4, -512, 508, 512, -516, 1, 3, -2, 127, 1 << 20, -(1 << 20)}
)

func encCases() []encCase {
	var cs []encCase
	add := func(b []byte, format string, a ...any) {
		cs = append(cs, encCase{fmt.Sprintf(format, a...), b})
	}
	for _, a := range vecSet {
		for _, b := range vecSet {
			for _, c := range vecSet {
				add(VDPBF16PS(a, b, c), "vdpbf16ps zmm%d, zmm%d, zmm%d", a, b, c)
				add(VCVTNE2PS2BF16(a, b, c), "vcvtne2ps2bf16 zmm%d, zmm%d, zmm%d", a, b, c)
			}
			add(VCVTNEPS2BF16(a, b), "vcvtneps2bf16 ymm%d, zmm%d", a, b)
		}
	}
	for _, base := range gprSet {
		for _, disp := range dispSet {
			for _, z := range [][2]int{{0, 1}, {3, 28}, {17, 9}, {31, 31}, {8, 16}} {
				add(VDPBF16PSBcst(z[0], z[1], base, disp), "vdpbf16ps zmm%d, zmm%d, dword ptr [%s%+d]{1to16}", z[0], z[1], gprNames[base], disp)
			}
		}
		add(LDTILECFG(base), "ldtilecfg [%s]", gprNames[base])
		add(STTILECFG(base), "sttilecfg [%s]", gprNames[base])
		for _, index := range gprSet {
			if index == rsp {
				continue
			}
			for _, t := range []int{0, 1, 5, 7} {
				add(TILELOADD(t, base, index), "tileloadd tmm%d, [%s+%s*1]", t, gprNames[base], gprNames[index])
				add(TILELOADDT1(t, base, index), "tileloaddt1 tmm%d, [%s+%s*1]", t, gprNames[base], gprNames[index])
				add(TILESTORED(base, index, t), "tilestored [%s+%s*1], tmm%d", gprNames[base], gprNames[index], t)
			}
		}
	}
	for a := range 8 {
		add(TILEZERO(a), "tilezero tmm%d", a)
		for b := range 8 {
			for c := range 8 {
				if a != b && a != c && b != c {
					add(TDPBF16PS(a, b, c), "tdpbf16ps tmm%d, tmm%d, tmm%d", a, b, c)
				}
			}
		}
	}
	for _, a := range []int{0, 1, 7, 8, 15} {
		for _, b := range []int{0, 3, 8, 15} {
			for _, c := range []int{0, 7, 9, 15} {
				add(VPDPBUSDVEX(a, b, c), "{vex} vpdpbusd ymm%d, ymm%d, ymm%d", a, b, c)
			}
		}
	}
	add(TILERELEASE(), "tilerelease")
	return cs
}

func TestEncodingsMatchGNUAs(t *testing.T) {
	if _, err := exec.LookPath("as"); err != nil {
		t.Skip("GNU as is not installed (binutils): cannot check the encodings")
	}
	if _, err := exec.LookPath("objdump"); err != nil {
		t.Skip("objdump is not installed (binutils): cannot check the encodings")
	}
	cs := encCases()
	dir := t.TempDir()
	var src strings.Builder
	src.WriteString(".intel_syntax noprefix\n.text\n")
	for _, c := range cs {
		src.WriteString(c.src + "\n")
	}
	s, o := filepath.Join(dir, "enc.s"), filepath.Join(dir, "enc.o")
	if err := os.WriteFile(s, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("as", "--64", "-o", o, s).CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	out, err := exec.Command("objdump", "-d", "-M", "intel", "--insn-width=16", o).Output()
	if err != nil {
		t.Fatalf("objdump: %v", err)
	}
	// Instruction lines read "   addr:\tbytes \tdisassembly".
	var insns [][2]string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 3 || !strings.HasSuffix(strings.TrimSpace(f[0]), ":") {
			continue
		}
		insns = append(insns, [2]string{strings.ReplaceAll(strings.TrimSpace(f[1]), " ", ""), strings.TrimSpace(f[2])})
	}
	if len(insns) != len(cs) {
		t.Fatalf("objdump shows %d instructions; want %d", len(insns), len(cs))
	}
	bad := 0
	for i, c := range cs {
		want, err := hex.DecodeString(insns[i][0])
		if err != nil {
			t.Fatalf("objdump line %q: %v", insns[i], err)
		}
		if !bytes.Equal(c.got, want) {
			t.Errorf("%s: encoded % x; as gives % x (%s)", c.src, c.got, want, insns[i][1])
			if bad++; bad > 20 {
				t.FailNow()
			}
		}
	}
	t.Logf("%d encodings match GNU as", len(cs))
}

// TestRSPIndexPanics checks that an index register SIB cannot encode is
// refused.
func TestRSPIndexPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("TILELOADD with index RSP did not panic")
		}
	}()
	TILELOADD(0, 0, rsp)
}

func TestRangePanics(t *testing.T) {
	for name, f := range map[string]func(){
		"vector 32": func() { VDPBF16PS(32, 0, 0) },
		"gpr 16":    func() { LDTILECFG(16) },
		"tile 8":    func() { TILEZERO(8) },
		"negative":  func() { TDPBF16PS(0, -1, 2) },
		"same tile": func() { TDPBF16PS(1, 2, 1) },
		"vex y16":   func() { VPDPBUSDVEX(16, 0, 0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestNum(t *testing.T) {
	for _, c := range []struct {
		r    reg.Physical
		want int
	}{
		{reg.RAX, 0}, {reg.RSP, 4}, {reg.RBP, 5}, {reg.R12, 12}, {reg.R15, 15},
		{reg.ECX, 1}, {reg.R13L, 13}, {reg.Z0, 0}, {reg.Z17, 17}, {reg.Z31, 31},
		{reg.Y9, 9}, {reg.X30, 30},
	} {
		if got := Num(c.r); got != c.want {
			t.Errorf("Num(%s) = %d; want %d", c.r.Asm(), got, c.want)
		}
	}
}
