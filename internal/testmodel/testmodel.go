// Package testmodel finds stories260K.gguf, the small trained Llama that
// the model tests, a few attnbench tests and `attnbench generate` run
// (README.md, "The test model", says where to download it). The file is
// never part of the repository: the environment variable FLASHGO_MODEL
// names it, and where that is unset it is looked for in
// ../shared/models/ beside the repository.
package testmodel

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Env is the environment variable that names the model file.
const Env = "FLASHGO_MODEL"

// Name is the file's name in the fallback folder.
const Name = "stories260K.gguf"

// Path returns the path of the test model: $FLASHGO_MODEL if set (an
// error if that file is missing), else ../shared/models/stories260K.gguf
// beside the repository (an error naming both places if it is not there).
func Path() (string, error) {
	p := Candidate()
	if _, err := os.Stat(p); err != nil {
		if os.Getenv(Env) != "" {
			return "", fmt.Errorf("%s=%s: %w", Env, p, err)
		}
		return "", fmt.Errorf("%s is unset and %s is not there (%w); README.md, \"The test model\", says how to download it", Env, p, err)
	}
	return p, nil
}

// Candidate returns where the test model is looked for, without looking:
// $FLASHGO_MODEL if set, else the fallback beside the repository.
func Candidate() string {
	if p := os.Getenv(Env); p != "" {
		return p
	}
	return fallback()
}

// fallback is ../shared/models/stories260K.gguf beside the repository's
// root, which this file's own path (internal/testmodel/ in the root)
// locates; or, in a build that has no source paths, beside the working
// directory.
func fallback() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return filepath.Join("..", "shared", "models", Name)
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	return filepath.Join(filepath.Dir(root), "shared", "models", Name)
}

// Need returns the test model's path, or skips tb (a test or benchmark)
// saying where the model was looked for and how to get it.
func Need(tb testing.TB) string {
	tb.Helper()
	p, err := Path()
	if err != nil {
		tb.Skipf("SKIP: no test model: %v", err)
	}
	return p
}
