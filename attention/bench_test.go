package attention_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/fp16"
	registry "github.com/flashgo/flashgo/internal/impl"
)

// benchShapes are the prefill shapes of ../shared/anchors/SHAPES.md.
var benchShapes = []struct {
	name string
	p    reference.Params
}{
	{"P1", reference.Params{Batch: 1, HeadsQ: 32, HeadsKV: 8, SeqQ: 1024, SeqKV: 1024, Dim: 128, Causal: true}},
	{"P2", reference.Params{Batch: 1, HeadsQ: 12, HeadsKV: 12, SeqQ: 1024, SeqKV: 1024, Dim: 64, Causal: true}},
	{"P3", reference.Params{Batch: 1, HeadsQ: 32, HeadsKV: 8, SeqQ: 4096, SeqKV: 4096, Dim: 128, Causal: true}},
}

// benchPeak is one core's FMA peak, measured once per benchmark process.
var benchPeak = sync.OnceValue(func() float64 {
	g, _ := registry.Peak(200 * time.Millisecond)
	return g
})

// reportGFLOPS reports effective GFLOP/s and their share of the FMA peak
// of one core times GOMAXPROCS (the engine's default thread count), the
// peak measured in the same process.
func reportGFLOPS(b *testing.B, flops float64) {
	g := flops * float64(b.N) / b.Elapsed().Seconds() / 1e9
	b.ReportMetric(g, "GFLOP/s")
	b.ReportMetric(100*g/(benchPeak()*float64(runtime.GOMAXPROCS(0))), "%peak")
}

// BenchmarkForward reports effective GFLOP/s (FLOPs = 4·Hq·Nq·Nkv·d, halved
// for causal) and their share of the FMA peak for each prefill shape with
// float32 and fp16 K/V; -cpu 1,2 runs it at one and two threads.
func BenchmarkForward(b *testing.B) {
	for _, s := range benchShapes {
		for _, dt := range []attention.DType{attention.F32, attention.F16} {
			b.Run(fmt.Sprintf("%s/kv=%v", s.name, dt), func(b *testing.B) {
				p := s.p
				rng := rand.New(rand.NewPCG(1, 1))
				q := attention.F32Tensor(randn(rng, p.QLen()), attention.BHSD(1, p.HeadsQ, p.SeqQ, p.Dim))
				kvl := attention.BHSD(1, p.HeadsKV, p.SeqKV, p.Dim)
				k := attention.F32Tensor(randn(rng, p.KVLen()), kvl)
				v := attention.F32Tensor(randn(rng, p.KVLen()), kvl)
				if dt == attention.F16 {
					k = attention.F16Tensor(fp16.Float16s(randn(rng, p.KVLen())), kvl)
					v = attention.F16Tensor(fp16.Float16s(randn(rng, p.KVLen())), kvl)
				}
				out := attention.F32Tensor(make([]float32, p.QLen()), q.Layout)
				e := mustEngine(b, attention.Config{})
				opts := attention.Options{Causal: p.Causal}
				if err := e.Forward(out, q, k, v, opts); err != nil {
					b.Fatal(err)
				}
				benchPeak()
				b.ReportAllocs()
				b.ResetTimer()
				b.ResetTimer()
				for range b.N {
					if err := e.Forward(out, q, k, v, opts); err != nil {
						b.Fatal(err)
					}
				}
				reportGFLOPS(b, p.FLOPs())
			})
		}
	}
}

// BenchmarkNaive times the naive float32 baseline on the same shapes.
func BenchmarkNaive(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(s.name, func(b *testing.B) {
			p := s.p
			rng := rand.New(rand.NewPCG(1, 1))
			q, k, v := randn(rng, p.QLen()), randn(rng, p.KVLen()), randn(rng, p.KVLen())
			out := make([]float32, p.QLen())
			var n reference.Naive
			benchPeak()
			b.ResetTimer()
			b.ResetTimer()
			for range b.N {
				if err := n.Attention(p, out, q, k, v); err != nil {
					b.Fatal(err)
				}
			}
			reportGFLOPS(b, p.FLOPs())
		})
	}
}

// BenchmarkBF16 reports effective GFLOP/s of the bf16 compute precision on
// the prefill shapes with bf16 K/V, for query blocks of BlockQ rows and
// tiles of BlockKV keys (K and V are packed into pair panels once per
// call, so the sizes trade the tile's working set against the calls and
// the output's trips through the cache); -cpu 1,16 runs it at one and
// sixteen threads.
func BenchmarkBF16(b *testing.B) {
	for _, s := range benchShapes[:2] {
		for _, bq := range []int{64, 128, 256, 512} {
			for _, bkv := range []int{64, 128, 256} {
				b.Run(fmt.Sprintf("%s/blockq=%d/blockkv=%d", s.name, bq, bkv), func(b *testing.B) {
					p := s.p
					q, k, v, out := bf16Inputs(p)
					e := mustEngine(b, attention.Config{BlockQ: bq, BlockKV: bkv})
					timeForward(b, e, out, q, k, v, attention.Options{Causal: p.Causal, Precision: attention.PrecisionBFloat16}, p.FLOPs())
				})
			}
		}
	}
}

// bf16Inputs returns random queries, bf16 K and V and a float32 output for
// the batch-1 problem p.
func bf16Inputs(p reference.Params) (q, k, v, out attention.Tensor) {
	rng := rand.New(rand.NewPCG(1, 1))
	q = attention.F32Tensor(randn(rng, p.QLen()), attention.BHSD(1, p.HeadsQ, p.SeqQ, p.Dim))
	kvl := attention.BHSD(1, p.HeadsKV, p.SeqKV, p.Dim)
	k = attention.BF16Tensor(fp16.BFloat16s(randn(rng, p.KVLen())), kvl)
	v = attention.BF16Tensor(fp16.BFloat16s(randn(rng, p.KVLen())), kvl)
	out = attention.F32Tensor(make([]float32, p.QLen()), q.Layout)
	return q, k, v, out
}

// timeForward times e.Forward after one warm-up call and reports
// allocations and effective GFLOP/s for a problem of flops FLOPs.
func timeForward(b *testing.B, e *attention.Engine, out, q, k, v attention.Tensor, opts attention.Options, flops float64) {
	if err := e.Forward(out, q, k, v, opts); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := e.Forward(out, q, k, v, opts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkBF16Prepack compares the three ways a bf16 prefill gets its
// K/V pair panels, on P1 and P3 with bf16 K/V: packed tile by tile by
// every query block (tiles), packed once per call into two slots that the
// heads take in turn (slots=2, what a call whose panels exceed
// maxPrepackBytes does), and packed once per call for every head (whole).
func BenchmarkBF16Prepack(b *testing.B) {
	for _, s := range []int{0, 2} {
		p := benchShapes[s].p
		q, k, v, out := bf16Inputs(p)
		opts := attention.Options{Causal: p.Causal, Precision: attention.PrecisionBFloat16}
		for _, mode := range []string{"tiles", "slots=2", "whole"} {
			b.Run(fmt.Sprintf("%s/%s", benchShapes[s].name, mode), func(b *testing.B) {
				defer attention.SetPrepack(mode != "tiles")()
				if mode == "slots=2" {
					defer attention.SetPrepackBytes(2 * attention.PrepackSlotBytes(p.SeqKV, p.Dim, p.Dim))()
				}
				timeForward(b, mustEngine(b, attention.Config{}), out, q, k, v, opts, p.FLOPs())
			})
		}
	}
}

// BenchmarkEngineMemory reports the bytes a fresh engine allocates in its
// first call (engine-MiB: runtime.MemStats' TotalAlloc around the call;
// the inputs and outputs are allocated before) for a causal prefill of
// Hq 32, Hkv 8, d 128 with bf16 K/V over N = 8192 and 32768 positions, in
// both precisions, at GOMAXPROCS threads (-cpu sets them). Each iteration
// is one call of a fresh engine; run it with -benchtime 1x.
func BenchmarkEngineMemory(b *testing.B) {
	for _, n := range []int{8192, 32768} {
		p := reference.Params{Batch: 1, HeadsQ: 32, HeadsKV: 8, SeqQ: n, SeqKV: n, Dim: 128, Causal: true}
		q, k, v, out := bf16Inputs(p)
		for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
			b.Run(fmt.Sprintf("N=%d/%v", n, prec), func(b *testing.B) {
				opts := attention.Options{Causal: true, Precision: prec}
				var alloc uint64
				for range b.N {
					e := mustEngine(b, attention.Config{})
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					if err := e.Forward(out, q, k, v, opts); err != nil {
						b.Fatal(err)
					}
					runtime.ReadMemStats(&after)
					alloc = max(alloc, after.TotalAlloc-before.TotalAlloc)
				}
				b.ReportMetric(float64(alloc)/(1<<20), "engine-MiB")
				b.ReportMetric(p.FLOPs()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
