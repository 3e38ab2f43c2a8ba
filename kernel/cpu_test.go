package kernel

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forEachImpl runs f once per implementation this machine has.
func forEachImpl(t *testing.T, f func(t *testing.T)) {
	for _, name := range Implementations() {
		t.Run(name, func(t *testing.T) {
			restore, err := SetImplementation(name)
			require.NoError(t, err)
			defer restore()
			f(t)
		})
	}
}

func TestChooseImpl(t *testing.T) {
	x86 := []impl{implAVX512, implAVX2, implGeneric}
	avx2Only := []impl{implAVX2, implGeneric}
	arm := []impl{implNEON, implGeneric}
	for _, c := range []struct {
		avail []impl
		env   string
		want  impl
	}{
		{x86, "", implAVX512},
		{x86, "avx2", implAVX2},
		{x86, " AVX512 ", implAVX512},
		{x86, "generic", implGeneric},
		{x86, "neon", implGeneric},
		{x86, "bogus", implAVX512},
		{avx2Only, "avx512", implAVX2},
		{avx2Only, "", implAVX2},
		{arm, "", implNEON},
		{arm, "avx2", implGeneric},
		{arm, "generic", implGeneric},
		{[]impl{implGeneric}, "avx512", implGeneric},
	} {
		assert.Equal(t, implNames[c.want], implNames[chooseImpl(c.avail, c.env)], "available %v, FLASHGO_KERNEL=%q", c.avail, c.env)
	}
}

func TestImplementations(t *testing.T) {
	names := Implementations()
	require.NotEmpty(t, names)
	assert.Equal(t, Generic, names[len(names)-1])
	assert.Contains(t, names, Implementation())
	_, err := SetImplementation("z80")
	assert.ErrorContains(t, err, `implementation "z80" is not available`)
	restore, err := SetImplementation(Generic)
	require.NoError(t, err)
	assert.Equal(t, Generic, Implementation())
	restore()
}

func TestPeak(t *testing.T) {
	g, isa := Peak(0)
	t.Logf("peak %.1f GFLOP/s (%s)", g, isa)
	assert.Greater(t, g, 0.1)
	assert.Contains(t, []string{AVX512, AVX2, "go"}, isa)
}
