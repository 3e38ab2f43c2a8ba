package neoncheck

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// neonFile is the hand-written arm64 assembly whose WORDs are checked,
// relative to this package's directory.
const neonFile = "../../internal/arm/neon_arm64.s"

// wordRE matches a WORD directive as neon_arm64.s writes it: a 32-bit
// value in hex and, after it, the instruction it encodes in a comment.
var wordRE = regexp.MustCompile(`^\s*WORD\s+\$0x([0-9a-fA-F]{1,8})\s*(?://\s*(.*?)\s*)?$`)

// wordToken finds a WORD in the code of a line.
var wordToken = regexp.MustCompile(`\bWORD\b`)

// word is one WORD directive of the file.
type word struct {
	line  int    // 1-based
	value uint32 // the WORD's value
	insn  string // the instruction of its comment, GNU syntax
}

// readWords returns the WORD directives of the assembly file at path. Every
// line whose code (before any //) holds a WORD must be a directive wordRE
// matches, with the instruction in its comment; the lines that are not are
// returned as problems.
func readWords(path string) ([]word, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var words []word
	var problems []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		code, _, _ := strings.Cut(text, "//")
		if !wordToken.MatchString(code) {
			continue
		}
		m := wordRE.FindStringSubmatch(text)
		switch {
		case m == nil:
			problems = append(problems, fmt.Sprintf("%s:%d: WORD not of the form \"WORD $0x… // instruction\": %q", path, n, text))
			continue
		case m[2] == "":
			problems = append(problems, fmt.Sprintf("%s:%d: WORD without the instruction it encodes in a comment: %q", path, n, text))
			continue
		}
		v, err := strconv.ParseUint(m[1], 16, 32)
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		words = append(words, word{line: n, value: uint32(v), insn: m[2]})
	}
	return words, problems, sc.Err()
}

// assemble assembles insns, one instruction a line, with GNU as for arm64
// in dir and returns their encodings in order, as objdump shows them. An
// error of GNU as names the lines of its source, words.s: line i holds
// insns[i-1].
func assemble(dir string, insns []string) ([]uint32, error) {
	src, obj := filepath.Join(dir, "words.s"), filepath.Join(dir, "words.o")
	if err := os.WriteFile(src, []byte(strings.Join(insns, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.Command("aarch64-linux-gnu-as", "-o", obj, src).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("aarch64-linux-gnu-as: %v\n%s", err, out)
	}
	out, err := exec.Command("aarch64-linux-gnu-objdump", "-d", obj).Output()
	if err != nil {
		return nil, fmt.Errorf("aarch64-linux-gnu-objdump: %v", err)
	}
	// Instruction lines read "   addr:\tword \tdisassembly".
	var enc []uint32
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Split(l, "\t")
		if len(f) < 3 || !strings.HasSuffix(strings.TrimSpace(f[0]), ":") {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(f[1]), 16, 32)
		if err != nil {
			return nil, fmt.Errorf("objdump line %q: %v", l, err)
		}
		enc = append(enc, uint32(v))
	}
	return enc, nil
}

// asLine matches the line references in GNU as's messages about words.s.
var asLine = regexp.MustCompile(`\S*words\.s:(\d+):`)

// check checks the WORDs of the assembly file at path, assembling in dir,
// and returns how many it checked and what is wrong, one message a WORD.
func check(path, dir string) (int, []string, error) {
	words, problems, err := readWords(path)
	if err != nil {
		return 0, nil, err
	}
	if len(words) == 0 {
		return 0, append(problems, path+": no WORD directives"), nil
	}
	insns := make([]string, len(words))
	for i, w := range words {
		insns[i] = w.insn
	}
	enc, err := assemble(dir, insns)
	if err != nil {
		// Point GNU as's messages at the lines of path.
		msg := asLine.ReplaceAllStringFunc(err.Error(), func(ref string) string {
			i, _ := strconv.Atoi(asLine.FindStringSubmatch(ref)[1])
			if i < 1 || i > len(words) {
				return ref
			}
			return fmt.Sprintf("%s:%d:", path, words[i-1].line)
		})
		return len(words), append(problems, msg), nil
	}
	if len(enc) != len(words) {
		return len(words), append(problems, fmt.Sprintf("%s: GNU as gives %d instructions for the %d WORD comments: each comment must hold one instruction", path, len(enc), len(words))), nil
	}
	for i, w := range words {
		if enc[i] != w.value {
			problems = append(problems, fmt.Sprintf("%s:%d: WORD $0x%08x, but GNU as encodes %q as 0x%08x", path, w.line, w.value, w.insn, enc[i]))
		}
	}
	return len(words), problems, nil
}

// needGNUAs skips t unless GNU as and objdump for arm64 are installed.
func needGNUAs(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"aarch64-linux-gnu-as", "aarch64-linux-gnu-objdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (binutils-aarch64-linux-gnu): cannot check the encodings", tool)
		}
	}
}

// TestWordsMatchGNUAs checks every WORD of neon_arm64.s: it must carry the
// instruction it encodes in a comment, and GNU as must encode that
// instruction as the WORD's value.
func TestWordsMatchGNUAs(t *testing.T) {
	needGNUAs(t)
	n, problems, err := check(neonFile, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) == 0 {
		t.Logf("the %d WORDs of %s match GNU as", n, neonFile)
	}
}

// TestCheckFindsBadWords runs the check on small files with one fault
// each: it must report it, on the right line.
func TestCheckFindsBadWords(t *testing.T) {
	needGNUAs(t)
	const good = "\tWORD $0x4f801090 // FMLA V16.4S, V4.4S, V0.S[0]\n"
	for name, c := range map[string]struct{ src, want string }{
		"wrong value":     {good + "\tWORD $0x4f801091 // FMLA V16.4S, V4.4S, V0.S[0]\n", ":2: WORD $0x4f801091, but GNU as encodes"},
		"no comment":      {good + "\tWORD $0x4f801090\n", ":2: WORD without the instruction"},
		"empty comment":   {good + "\tWORD $0x4f801090 //\n", ":2: WORD without the instruction"},
		"decimal":         {good + "\tWORD $1333792912 // FMLA V16.4S, V4.4S, V0.S[0]\n", ":2: WORD not of the form"},
		"two per line":    {good + "\tWORD $0x4f801090; WORD $0x4f801090 // FMLA V16.4S, V4.4S, V0.S[0]\n", ":2: WORD not of the form"},
		"not an insn":     {"\n" + good + "\tWORD $0x4f801090 // FMLA V16.4S, V4.4S, V0.S[4]\n", ".s:3: Error"},
		"two insns":       {good + "\tWORD $0x4f801090 // FMLA V16.4S, V4.4S, V0.S[0]; NOP\n", "GNU as gives 3 instructions for the 2"},
		"no WORD at all":  {"\tRET\n", "no WORD directives"},
		"second mismatch": {good + good + "\tWORD $0x4e20f610 // FMAX V16.4S, V16.4S, V1.4S\n", ":3: WORD $0x4e20f610, but GNU as encodes \"FMAX V16.4S, V16.4S, V1.4S\" as 0x4e21f610"},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "bad.s")
		if err := os.WriteFile(path, []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, problems, err := check(path, dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(problems) != 1 || !strings.Contains(problems[0], c.want) {
			t.Errorf("%s: problems %q; want one containing %q", name, problems, c.want)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "good.s")
	if err := os.WriteFile(path, []byte("// WORD in a comment is no directive\n"+good+good), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, problems, err := check(path, dir); err != nil || n != 2 || len(problems) != 0 {
		t.Errorf("good file: %d WORDs checked, problems %q, error %v; want 2, none", n, problems, err)
	}
}
