package impltest

import (
	"slices"
	"testing"

	"github.com/flashgo/flashgo/internal/impl"
	"github.com/flashgo/flashgo/internal/tier"
)

// fakeLevels is a kernel axis of four levels, one of which this "machine"
// lacks: kernel is not linked into this test binary, so the axis is free.
var fakeLevels = struct{ rows, avail []string }{
	rows:  []string{"amx", "avx512", "avx2", "generic"},
	avail: []string{"avx512", "avx2", "generic"},
}

func init() {
	cur := "avx512"
	impl.Register(impl.Kernel, impl.Axis{
		Rows: func() []string { return fakeLevels.rows },
		Lacks: func(row string) string {
			if slices.Contains(fakeLevels.avail, row) {
				return ""
			}
			return "no " + row
		},
		Available: func() []string { return fakeLevels.avail },
		Current:   func() string { return cur },
		Select: func(name string) func() {
			prev := cur
			cur = name
			return func() { cur = prev }
		},
	})
}

// TestLevels checks which levels Run runs under each policy and tier, and
// with FLASHGO_KERNEL naming one, and that Run skips exactly the others.
func TestLevels(t *testing.T) {
	defer SetPolicy(policy)
	fastBest := []string{"avx512", "generic"}
	if raceEnabled {
		fastBest = []string{"avx512"}
	}
	for _, c := range []struct {
		name         string
		policy       Policy
		long, kernel string
		want         []string
	}{
		{"every level, fast", EveryLevel, "", "", fakeLevels.avail},
		{"best and generic, fast", BestAndGeneric, "", "", fastBest},
		{"best and generic, long", BestAndGeneric, "1", "", fakeLevels.avail},
		{"pinned", BestAndGeneric, "", "avx2", []string{"avx2"}},
		{"pinned with other axes", EveryLevel, "1", " AVX2 ,bf16=avx2", []string{"avx2"}},
		{"pinned to a level the machine lacks", BestAndGeneric, "", "amx", fastBest},
		{"pinned to no level", EveryLevel, "", "sse9", fakeLevels.avail},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(tier.Env, c.long)
			t.Setenv("FLASHGO_KERNEL", c.kernel)
			SetPolicy(c.policy)
			if testing.Short() && c.long == "1" {
				t.Skip("-short is the fast tier")
			}
			if got := Levels(); !slices.Equal(got, c.want) {
				t.Fatalf("Levels() = %v, want %v", got, c.want)
			}
			var ran []string
			Run(t, impl.Kernel, func(t *testing.T) { ran = append(ran, impl.Current(impl.Kernel)) })
			if !slices.Equal(ran, c.want) {
				t.Errorf("Run ran %v, want %v", ran, c.want)
			}
		})
	}
}
