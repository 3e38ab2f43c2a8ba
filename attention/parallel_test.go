package attention_test

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
)

// TestThreadsBitwise checks that every thread count gives bitwise the same
// output and lse.
func TestThreadsBitwise(t *testing.T) { forEachImpl(t, testThreadsBitwise) }

func testThreadsBitwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, p := range []reference.Params{
		{Batch: 2, HeadsQ: 8, HeadsKV: 2, SeqQ: 130, SeqKV: 130, Dim: 32, Causal: true},
		{Batch: 1, HeadsQ: 3, HeadsKV: 3, SeqQ: 70, SeqKV: 200, Dim: 16, Causal: true},
		{Batch: 3, HeadsQ: 2, HeadsKV: 1, SeqQ: 1, SeqKV: 90, Dim: 8},
		{Batch: 1, HeadsQ: 4, HeadsKV: 4, SeqQ: 100, SeqKV: 40, Dim: 24, Causal: true},
	} {
		for _, dt := range kvTypes {
			pr := newProblem(rng, p, dt, bshd)
			var wantOut, wantLSE []float32
			for _, threads := range []int{1, 2, 3, 8} {
				e := mustEngine(t, attention.Config{Threads: threads, BlockQ: 16, BlockKV: 32})
				out, lse := pr.run(t, e)
				if wantOut == nil {
					wantOut, wantLSE = out, lse
					continue
				}
				for i := range out {
					if math.Float32bits(out[i]) != math.Float32bits(wantOut[i]) {
						t.Fatalf("%v: %d threads: out[%d] = %v, 1 thread %v", pr, threads, i, out[i], wantOut[i])
					}
				}
				for i := range lse {
					if math.Float32bits(lse[i]) != math.Float32bits(wantLSE[i]) {
						t.Fatalf("%v: %d threads: lse[%d] = %v, 1 thread %v", pr, threads, i, lse[i], wantLSE[i])
					}
				}
			}
		}
	}
}

func TestThreadsNoAllocations(t *testing.T) { forEachImpl(t, testThreadsNoAllocations) }

func testThreadsNoAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	p := reference.Params{Batch: 1, HeadsQ: 8, HeadsKV: 2, SeqQ: 200, SeqKV: 200, Dim: 32, Causal: true}
	pr := newProblem(rng, p, attention.F16, bhsd)
	e := mustEngine(t, attention.Config{Threads: 4})
	out := attention.F32Tensor(make([]float32, p.QLen()), attention.BHSD(1, 8, 200, 32))
	opts := attention.Options{Causal: true}
	// Warm up: the pool reaches its steady number of jobs and workspaces
	// in flight after a few calls, not one.
	for range 200 {
		require.NoError(t, e.Forward(out, pr.qT, pr.kT, pr.vT, opts))
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := e.Forward(out, pr.qT, pr.kT, pr.vT, opts); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, allocs)
}

// TestThreadsConcurrentCallers has several goroutines share one engine's
// helpers and checks each result against its oracle.
func TestThreadsConcurrentCallers(t *testing.T) { forEachImpl(t, testThreadsConcurrentCallers) }

func testThreadsConcurrentCallers(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	e := mustEngine(t, attention.Config{Threads: 3, BlockQ: 8})
	var probs []*problem
	for i := range 6 {
		p := reference.Params{Batch: 1, HeadsQ: 4, HeadsKV: 2, SeqQ: 30 + 11*i, SeqKV: 60, Dim: 16, Causal: i%2 == 1}
		probs = append(probs, newProblem(rng, p, kvTypes[i%3], bshd))
	}
	want := make([][]float32, len(probs))
	for i, pr := range probs {
		want[i], _ = pr.run(t, mustEngine(t, attention.Config{Threads: 1, BlockQ: 8}))
	}
	var wg sync.WaitGroup
	bad := make(chan string, len(probs)*4)
	for range 4 {
		for i, pr := range probs {
			wg.Go(func() {
				buf := make([]float32, pr.outView.size)
				out := attention.F32Tensor(buf[pr.outView.pre:], pr.outView.lay)
				if err := e.Forward(out, pr.qT, pr.kT, pr.vT, attention.Options{Causal: pr.p.Causal}); err != nil {
					bad <- err.Error()
					return
				}
				got := gather(pr.outView, buf)
				for j := range got {
					if math.Float32bits(got[j]) != math.Float32bits(want[i][j]) {
						bad <- pr.String() + ": differs under concurrent callers"
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(bad)
	for msg := range bad {
		t.Error(msg)
	}
}

func TestThreadsConfig(t *testing.T) {
	_, err := attention.NewEngine(attention.Config{Threads: -1})
	require.ErrorContains(t, err, "Config.Threads is -1")
}
