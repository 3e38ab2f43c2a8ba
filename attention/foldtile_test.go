package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
)

// TestFoldTilesSameBits runs float32 calls with the fused tile fold
// (kernel.FoldTile, where the level has it) on and off, under every
// implementation, and requires the same bits: FoldTile computes what the
// chain of kernels it replaces computes. The shapes have rows and keys
// off every tile and vector width, head dims from 1 to 256, GQA, causal
// diagonals aligned both ways, windows (crossing tiles whose rows start
// past the tile's first key, which take the chain), tiles narrower than
// the default, several thread counts (blocks of other sizes) and each
// K/V element type.
func TestFoldTilesSameBits(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(71, 72))
		type shape struct {
			hq, hkv, nq, nk, d, dv int
		}
		shapes := []shape{
			{4, 2, 37, 301, 64, 64}, {2, 1, 150, 150, 128, 128}, {4, 1, 77, 200, 100, 100},
			{2, 2, 70, 70, 1, 1}, {3, 1, 65, 130, 3, 3}, {1, 1, 129, 129, 256, 256}, {2, 1, 33, 97, 48, 24},
		}
		kvTypes := []attention.DType{attention.F32, attention.F16, attention.BF16, attention.FP8E4M3}
		for i, s := range shapes {
			for _, mode := range []string{"plain", "causal", "topleft", "window"} {
				kv := kvTypes[(i+len(mode))%len(kvTypes)]
				kind := []layoutKind{bhsd, bshd, padded}[rng.IntN(3)]
				p := reference.Params{Batch: 2, HeadsQ: s.hq, HeadsKV: s.hkv, SeqQ: s.nq, SeqKV: s.nk, Dim: s.d, DimV: s.dv}
				switch mode {
				case "causal":
					p.Causal = true
				case "topleft":
					p.CausalTopLeft = true
				case "window":
					p.Causal, p.Window, p.WindowLeft, p.WindowRight = true, true, 45, -1
				}
				pr := newProblem(rng, p, kv, kind)
				for _, cfg := range []attention.Config{{Threads: 1}, {Threads: 3}, {Threads: 2, BlockKV: 40}, {Threads: 1, BlockQ: 96, BlockKV: 48}} {
					checkFoldSameBits(t, pr, cfg, fmt.Sprintf("%v %+v", pr, cfg))
				}
			}
		}
	})
}

// TestFoldTilesSpecials is TestFoldTilesSameBits with NaN and infinite
// keys and values (a crossing tile whose values are not all finite takes
// the chain): each output is NaN where the chain's is, and elsewhere the
// same bits.
func TestFoldTilesSpecials(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(73, 74))
		for _, causal := range []bool{false, true} {
			p := reference.Params{Batch: 1, HeadsQ: 2, HeadsKV: 1, SeqQ: 90, SeqKV: 150, Dim: 40, Causal: causal}
			pr := newProblem(rng, p, attention.F32, bhsd)
			nan, inf := float32(math.NaN()), float32(math.Inf(1))
			pr.k[17*40+3] = inf      // an infinite score for the rows that see key 17
			pr.v[100*40+5] = nan     // a NaN value at key 100
			pr.v[140*40+7] = -inf    // and an infinite one at key 140
			pr.q[(1*90+50)*40] = nan // a NaN query row
			pr.build()
			checkFoldSameBits(t, pr, attention.Config{Threads: 1}, pr.String())
		}
	})
}

// TestPrepackF32MatchesTiles runs float32 prefills with K (and V where
// they are not read in place) packed once per call and packed tile by
// tile, under every implementation, and requires the same bits: the
// prepacked panels hold what the per-tile packs write. The panels of
// every head fit, or take turns in fewer slots (head-major blocks).
func TestPrepackF32MatchesTiles(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(75, 76))
		for i, kv := range []attention.DType{attention.F32, attention.F16, attention.BF16, attention.FP8E5M2} {
			for _, kind := range []layoutKind{bhsd, bshd, padded} {
				p := reference.Params{Batch: 2, HeadsQ: 4, HeadsKV: 2, SeqQ: 90 + i, SeqKV: 130 + i, Dim: 33, DimV: 20, Causal: kind != bshd}
				pr := newProblem(rng, p, kv, kind)
				for _, bytes := range []int{64 << 20, 60 << 10} {
					for _, cfg := range []attention.Config{{Threads: 1, BlockQ: 32}, {Threads: 3, BlockQ: 64, BlockKV: 40}} {
						func() {
							defer attention.SetPrepackBytes(bytes)()
							checkSameBits(t, pr, cfg, attention.SetPrepack, fmt.Sprintf("%v %+v slots of %d bytes", pr, cfg, bytes))
						}()
					}
				}
			}
		}
	})
}

func checkFoldSameBits(t *testing.T, pr *problem, cfg attention.Config, what string) {
	t.Helper()
	checkSameBits(t, pr, cfg, attention.SetFoldTiles, what)
}

// checkSameBits runs pr on an engine of cfg with a setting off (set) and
// on, and requires the same bits (or NaN in both).
func checkSameBits(t *testing.T, pr *problem, cfg attention.Config, set func(bool) func(), what string) {
	t.Helper()
	e := mustEngine(t, cfg)
	restore := set(false)
	wantOut, wantLSE := pr.run(t, e)
	restore()
	restore = set(true)
	gotOut, gotLSE := pr.run(t, e)
	restore()
	for _, c := range []struct {
		name      string
		got, want []float32
	}{{"out", gotOut, wantOut}, {"lse", gotLSE, wantLSE}} {
		for i := range c.want {
			g, w := c.got[i], c.want[i]
			if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
				t.Fatalf("%s: %s[%d] = %v (%#08x) with the setting on, %v (%#08x) off", what, c.name, i, g, math.Float32bits(g), w, math.Float32bits(w))
			}
		}
	}
}
