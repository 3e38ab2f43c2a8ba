package model

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNilArguments checks that the package's functions return an error for
// nil arguments instead of panicking (issue 14).
func TestNilArguments(t *testing.T) {
	require.NotPanics(t, func() {
		f, err := Read(nil, 100)
		assert.Nil(t, f)
		assert.ErrorContains(t, err, "nil")
	})
	require.NotPanics(t, func() {
		_, err := Load(nil)
		assert.ErrorContains(t, err, "nil")
		_, err = LoadWith(nil, LoadOptions{})
		assert.ErrorContains(t, err, "nil")
		_, err = ReadConfig(nil)
		assert.ErrorContains(t, err, "nil")
		_, err = NewTokenizer(nil)
		assert.ErrorContains(t, err, "nil")
		var m *Model
		_, err = m.NewSession(SessionOptions{})
		assert.ErrorContains(t, err, "nil")
	})

	spec := tinySpec{dim: 32, ff: 64, layers: 1, heads: 4, kvHeads: 2, wtype: TypeF32, ctx: 16}
	m, err := Load(spec.file(t, 1))
	require.NoError(t, err)
	s := newSession(t, m, SessionOptions{})
	require.NotPanics(t, func() {
		//lint:ignore SA1012 a nil context is what the test is about
		_, err := s.Generate(nil, "the", 2, Sampler{}, nil)
		assert.ErrorContains(t, err, "nil")
	})
	_, err = s.Generate(context.Background(), "the", 2, Sampler{}, nil)
	assert.NoError(t, err)
}
