package x86enc

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/reg"
)

var emitRuns int

// TestEmitAssembles generates a function with Emit through avo's global
// context, checks the BYTE directives it prints and has Go's assembler
// accept them; where the assembler's output can be disassembled (go tool
// objdump) it checks the bytes landed in the function.
func TestEmitAssembles(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "emit_amd64.s")
	for name, v := range map[string]string{"out": out, "pkg": "emit"} {
		if err := flag.CommandLine.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	emitRuns++ // avo's context is global: a function per run (-count)
	TEXT(fmt.Sprintf("emitTest%d", emitRuns), 0, "func()")
	b := VDPBF16PSBcst(Num(Z3), Num(Z28), Num(R13), 64)
	Emit("VDPBF16PS Z3, Z28, dword [R13+64]{1to16}", b)
	RET()
	Generate()
	src, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	if !strings.Contains(text, "// VDPBF16PS Z3, Z28, dword [R13+64]{1to16}") {
		t.Errorf("no comment naming the instruction in\n%s", text)
	}
	want := []string{"BYTE $0x62", "BYTE $0xd2", "BYTE $0x1e", "BYTE $0x50", "BYTE $0x52", "BYTE $0x5d", "BYTE $0x10"}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("no %q in\n%s", w, text)
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: cannot assemble the output")
	}
	goroot, err := exec.Command(goBin, "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	obj := filepath.Join(dir, "emit.o")
	inc := filepath.Join(strings.TrimSpace(string(goroot)), "pkg", "include")
	cmd := exec.Command(goBin, "tool", "asm", "-p", "emit", "-I", inc, "-o", obj, out)
	cmd.Env = append(os.Environ(), "GOARCH=amd64", "GOOS=linux")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go tool asm rejects the BYTE directives: %v\n%s\n%s", err, msg, text)
	}
	dis, err := exec.Command(goBin, "tool", "objdump", obj).CombinedOutput()
	if err != nil {
		t.Logf("go tool objdump cannot read the object (%v); the bytes were only assembled", err)
		return
	}
	// Lines read "  file:line\taddress\tbytes\tdisassembly"; the disassembler
	// splits the bytes it does not know into instructions of its own.
	var hex strings.Builder
	for _, line := range strings.Split(string(dis), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && strings.HasPrefix(f[0], "emit_amd64.s:") {
			hex.WriteString(f[2])
		}
	}
	if !strings.HasPrefix(hex.String(), "62d21e50525d10") {
		t.Errorf("the object does not hold the instruction's bytes:\n%s", dis)
	}
}
