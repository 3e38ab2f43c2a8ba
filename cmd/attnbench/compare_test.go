package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain makes the test binary a stand-in for PyTorch's side when
// ATTNBENCH_FAKE_PEER is set: attnbench compare runs "python script" with
// -python naming this binary, which then speaks the script's protocol
// (peers/torch_sdpa.py): the versions, then a line a case, each taking
// ATTNBENCH_FAKE_PEER milliseconds a run.
func TestMain(m *testing.M) {
	if ms, ok := os.LookupEnv("ATTNBENCH_FAKE_PEER"); ok {
		os.Exit(fakePeer(ms))
	}
	os.Exit(m.Run())
}

func fakePeer(ms string) int {
	var cases []peerCase
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		fmt.Fprintln(os.Stderr, "fake peer:", err)
		return 1
	}
	if ms == "fail" {
		fmt.Fprintln(os.Stderr, "ModuleNotFoundError: No module named 'torch'")
		return 1
	}
	fmt.Println(`{"torch": "0.0-fake", "python": "3.0"}`)
	for _, c := range cases {
		runs := make([]string, c.Reps)
		for i := range runs {
			runs[i] = ms
		}
		fmt.Printf(`{"shape": %q, "dtype": %q, "threads": %d, "ms": [%s]}`+"\n", c.Shape, c.DType, c.Threads, strings.Join(runs, ", "))
	}
	return 0
}

// fakePython returns a -python command that runs this test binary as the
// fake peer, each run taking ms milliseconds ("fail": it exits 1).
func fakePython(t *testing.T, ms string) string {
	t.Helper()
	dir := t.TempDir()
	sh := filepath.Join(dir, "python")
	require.NoError(t, os.WriteFile(sh, []byte("#!/bin/sh\nATTNBENCH_FAKE_PEER="+ms+" exec "+os.Args[0]+" \"$@\"\n"), 0o755))
	return sh
}

func TestCompare(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("SKIP: no sh to run the fake peer with")
	}
	out := filepath.Join(t.TempDir(), "rounds.json")
	var stdout, stderr bytes.Buffer
	code := run([]string{"compare", "-rounds", "2", "-python", fakePython(t, "1000"), "-out", out,
		"-shape", "custom", "-heads", "4", "-kv-heads", "2", "-dim", "16", "-nq", "9", "-nkv", "21",
		"-kv", "f32,q8", "-dim", "32", "-threads", "1", "-reps", "3"}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	s := stdout.String()
	assert.Contains(t, s, "PyTorch 0.0-fake (Python 3.0)")
	assert.Contains(t, s, "2 interleaved rounds")
	lines := strings.Split(s, "\n")
	var rows []string
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "custom") {
			rows = append(rows, l)
		}
	}
	require.Len(t, rows, 1, "one row: q8 has no PyTorch counterpart\n%s", s)
	assert.Contains(t, rows[0], "float32")
	assert.Contains(t, rows[0], "1000.0 (1000.0-1000.0)", "PyTorch's median of medians")

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var j struct {
		Rounds int
		Rows   []struct {
			KV        string
			PeerDType string    `json:"peer_dtype"`
			FlashMS   []float64 `json:"flashgo_ms"`
			PeerMS    []float64 `json:"pytorch_ms"`
			Ratio     []float64 `json:"pytorch_over_flashgo"`
		}
	}
	require.NoError(t, json.Unmarshal(b, &j))
	assert.Equal(t, 2, j.Rounds)
	require.Len(t, j.Rows, 1)
	r := j.Rows[0]
	assert.Equal(t, "f32", r.KV)
	assert.Equal(t, "float32", r.PeerDType)
	require.Len(t, r.FlashMS, 2)
	require.Len(t, r.PeerMS, 2)
	for i := range r.Ratio {
		assert.InDelta(t, r.PeerMS[i]/r.FlashMS[i], r.Ratio[i], 1e-9, "a round's ratio is of that round's pair")
	}
}

func TestCompareBad(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("SKIP: no sh to run the fake peer with")
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-rounds", "0"}, 2, "-rounds is 0; want >= 1"},
		{[]string{"-shape", "P2", "-kv", "q8,fp8e4m3"}, 2, "no case has a PyTorch counterpart"},
		{[]string{"-shared-prefix", "64"}, 2, "-shared-prefix has no PyTorch counterpart"},
		{[]string{"-shape", "P1", "-window", "64"}, 2, "has a sliding window or a soft-cap"},
		{[]string{"-shape", "P2", "-threads", "1,,2"}, 2, "has an empty entry"},
		{[]string{"-python", fakePython(t, "fail"), "-shape", "custom", "-nq", "3", "-nkv", "5", "-dim", "8", "-heads", "2", "-kv-heads", "1", "-kv", "f16", "-threads", "1", "-reps", "1"}, 1, "No module named 'torch'"},
		{[]string{"-python", filepath.Join(t.TempDir(), "no-python"), "-shape", "custom", "-nq", "3", "-nkv", "5", "-dim", "8", "-heads", "2", "-kv-heads", "1", "-kv", "f16", "-threads", "1", "-reps", "1"}, 1, "-python"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"compare"}, c.args...), &stdout, &stderr)
		assert.Equal(t, c.code, code, "%v: stderr %s", c.args, stderr.String())
		assert.Contains(t, stderr.String(), c.want, "%v", c.args)
	}
}

// TestTorchScriptParses compiles the embedded peer script where a Python
// is at hand (it cannot run without torch, but a syntax error is caught).
func TestTorchScriptParses(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("SKIP: no python3 to compile peers/torch_sdpa.py with")
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "torch_sdpa.py")
	require.NoError(t, os.WriteFile(f, torchScript, 0o644))
	out, err := exec.Command(py, "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())", f).CombinedOutput()
	require.NoError(t, err, "%s", out)
}
