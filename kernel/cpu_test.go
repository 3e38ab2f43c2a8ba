package kernel

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChooseImpl(t *testing.T) {
	x86 := []impl{implAVX512, implAVX2, implGeneric}
	amx := []impl{implAMX, implAVX512BF16, implAVX512, implAVX2, implGeneric}
	avx2Only := []impl{implAVX2, implGeneric}
	arm := []impl{implNEON, implGeneric}
	for _, c := range []struct {
		avail []impl
		env   string
		want  impl
		err   string // "" for none
	}{
		{x86, "", implAVX512, ""},
		{x86, "avx2", implAVX2, ""},
		{x86, " AVX512 ", implAVX512, ""},
		{x86, "generic", implGeneric, ""},
		{x86, "neon", implAVX512, "cannot run neon (it needs arm64)"},
		{x86, "bogus", implAVX512, `FLASHGO_KERNEL="bogus" is not an implementation`},
		{x86, "amx", implAVX512, "cannot run amx (it needs amd64 with AVX-512, AMX-TILE and AMX-BF16"},
		{x86, "avx512bf16", implAVX512, "cannot run avx512bf16"},
		{amx, "", implAMX, ""},
		{amx, "avx512bf16", implAVX512BF16, ""},
		{amx, "avx512", implAVX512, ""},
		{avx2Only, "avx512", implAVX2, "it can run [avx2 generic] (using avx2)"},
		{avx2Only, "", implAVX2, ""},
		{arm, "", implNEON, ""},
		{arm, "avx2", implNEON, "cannot run avx2"},
		{arm, "generic", implGeneric, ""},
		{[]impl{implGeneric}, "avx512", implGeneric, "cannot run avx512"},
	} {
		got, err := chooseImpl(c.avail, c.env)
		assert.Equal(t, implNames[c.want], implNames[got], "available %v, FLASHGO_KERNEL=%q", c.avail, c.env)
		if c.err == "" {
			assert.NoError(t, err, "FLASHGO_KERNEL=%q", c.env)
		} else {
			assert.ErrorContains(t, err, c.err, "FLASHGO_KERNEL=%q", c.env)
		}
	}
}

func TestSplitLevels(t *testing.T) {
	for _, c := range []struct{ level, f32, bf16 impl }{
		{implAMX, implAVX512, implAMX},
		{implAVX512BF16, implAVX512, implAVX512BF16},
		{implAVX512, implAVX512, implAVX512},
		{implAVX2, implAVX2, implAVX2},
		{implNEON, implNEON, implNEON},
		{implGeneric, implGeneric, implGeneric},
	} {
		f, b := split(c.level)
		assert.Equal(t, implNames[c.f32], implNames[f], implNames[c.level])
		assert.Equal(t, implNames[c.bf16], implNames[b], implNames[c.level])
	}
}

func TestImplementations(t *testing.T) {
	names := Implementations()
	require.NotEmpty(t, names)
	assert.Equal(t, Generic, names[len(names)-1])
	assert.Contains(t, names, Implementation())
	_, err := setImplementation("z80")
	assert.ErrorContains(t, err, `implementation "z80" is not available`)
	restore, err := setImplementation(Generic)
	require.NoError(t, err)
	assert.Equal(t, Generic, Implementation())
	restore()
}

// TestBF16Peak checks that the bf16 product peak is measured on the unit
// the bf16 kernels of this machine can use at best (amx, else avx512bf16),
// and that it is 0 and "" where the machine has neither.
func TestBF16Peak(t *testing.T) {
	g, isa := bf16Peak(0)
	want := ""
	for _, b := range bf16Available() {
		if b == implAMX || b == implAVX512BF16 {
			want = implNames[b]
			break
		}
	}
	if want == "" {
		assert.Zero(t, g)
		assert.Empty(t, isa)
		t.Skipf("SKIP: this machine has no bf16 product unit (bf16 rows: %v)", names(bf16Available()))
	}
	t.Logf("bf16 peak %.1f GFLOP/s (%s)", g, isa)
	assert.Equal(t, want, isa)
	assert.Greater(t, g, 0.1)
}

// BenchmarkBF16Peak measures the loop of bf16Peak, named by its isa, in
// GFLOP/s.
func BenchmarkBF16Peak(b *testing.B) {
	run, flops, isa := bf16PeakLoop()
	if run == nil {
		b.Skip("SKIP: this machine has no bf16 product unit")
	}
	b.Run(isa, func(b *testing.B) {
		const iters = 1000
		for b.Loop() {
			run(iters)
		}
		b.ReportMetric(float64(b.N)*iters*float64(flops)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}

func TestPeak(t *testing.T) {
	g, isa := peak(0)
	t.Logf("peak %.1f GFLOP/s (%s)", g, isa)
	assert.Greater(t, g, 0.1)
	assert.Contains(t, []string{AVX512, AVX2, "go"}, isa)
}
