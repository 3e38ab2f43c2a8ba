package attention_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/internal/tier"
)

// TestMaskedEdgeKeysNeverRead puts NaN into the K and V rows of keys that
// Mask or BoolMask hides at the edges of every row's range (the padding of
// a key-padding mask, at the end or at the start of each sequence; the
// keys outside a staircase of per-row ranges), as a runtime's
// uninitialised padding would be, and checks that the output is the one
// with those rows zeroed, bit for bit, and matches the oracle: such keys
// are never read. Prefill, a few queries and decode (split-KV too), both
// precisions, three K/V types, several tile sizes.
func TestMaskedEdgeKeysNeverRead(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		t.Run("float32", testMaskedEdges)
		t.Run("bfloat16", inPrecision(attention.PrecisionBFloat16, testMaskedEdges))
	})
}

func testMaskedEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(145, 146))
	const b, hq, hkv, nkv, d = 2, 4, 2, 150, 32
	nan := math.NaN()
	configs := []attention.Config{{}, {BlockQ: 16, BlockKV: 16, Threads: 3}, {KVSplits: 4, BlockKV: 32}}
	n := 0
	for _, nq := range []int{1, 7, nkv} {
		for _, kind := range []string{"padding at the end", "padding at the start", "staircase"} {
			for _, causal := range []bool{false, true} {
				p := reference.Params{Batch: b, HeadsQ: hq, HeadsKV: hkv, SeqQ: nq, SeqKV: nkv, Dim: d, Causal: causal}
				// hidden[bi][j]: key j of batch entry bi is hidden from
				// every row at the edge of its range.
				hidden := [b][nkv]bool{}
				var maskType attention.DType
				switch kind {
				case "padding at the end": // BoolMask [B, 1, 1, Nkv]: the last keys of each entry
					p.BoolMaskShape = [4]int{b, 1, 1, nkv}
					p.BoolMask = make([]bool, b*nkv)
					for bi, valid := range []int{nkv - 37, 41} {
						for j := range nkv {
							p.BoolMask[bi*nkv+j] = j < valid
							hidden[bi][j] = j >= valid
						}
					}
				case "padding at the start": // Mask [B, 1, 1, Nkv]: −Inf on the first keys (left padding)
					maskType = attention.F32
					p.MaskShape = [4]int{b, 1, 1, nkv}
					p.Mask = make([]float64, b*nkv)
					for bi, pad := range []int{70, 3} {
						for j := range nkv {
							if j < pad {
								p.Mask[bi*nkv+j] = math.Inf(-1)
								hidden[bi][j] = true
							} else {
								p.Mask[bi*nkv+j] = float64(float32(rng.NormFloat64()))
							}
						}
					}
				case "staircase": // BoolMask [B, Hq, Nq, Nkv]: each row its own range, with holes
					p.BoolMaskShape = [4]int{b, hq, nq, nkv}
					p.BoolMask = make([]bool, b*hq*nq*nkv)
					for bi := range b {
						first, last := nkv, 0
						for r := range hq * nq {
							f := 20 + rng.IntN(60)
							g := f + rng.IntN(nkv-f)
							first, last = min(first, f), max(last, g)
							row := p.BoolMask[(bi*hq*nq+r)*nkv:][:nkv]
							for j := f; j < g; j++ {
								row[j] = rng.IntN(5) != 0
							}
						}
						for j := range nkv {
							hidden[bi][j] = j < first || j >= last
						}
					}
				}
				kvType := kvTypesAll[n%3]
				zero := newProblem(rng, p, kvType, layouts[n%3])
				for bi := range b {
					for h := range hkv {
						for j := range nkv {
							if hidden[bi][j] {
								off := ((bi*hkv+h)*nkv + j) * d
								clear(zero.k[off : off+d])
								clear(zero.v[off : off+d])
							}
						}
					}
				}
				zero.maskType = maskType
				zero.build()
				e := mustEngine(t, configs[n%len(configs)])
				if !tier.Keep(t, fmt.Sprintf("nq %d %s causal %v", nq, kind, causal), 4) {
					n++
					continue // drawn first: a cell has the same inputs in both tiers
				}
				checkAgainstOracle(t, e, zero)
				want, wantLSE := zero.run(t, e)

				poisoned := *zero
				poisoned.k = append([]float32(nil), zero.k...)
				poisoned.v = append([]float32(nil), zero.v...)
				for bi := range b {
					for h := range hkv {
						for j := range nkv {
							if hidden[bi][j] {
								off := ((bi*hkv+h)*nkv + j) * d
								for c := range d {
									poisoned.k[off+c] = float32(nan)
									poisoned.v[off+c] = float32(nan)
								}
							}
						}
					}
				}
				poisoned.build()
				got, gotLSE := poisoned.run(t, e)
				for i, x := range got {
					if x != x {
						t.Fatalf("%v: output element %d is NaN: a hidden key was read", &poisoned, i)
					}
				}
				require.Equal(t, want, got, "%v", &poisoned)
				require.Equal(t, wantLSE, gotLSE, "%v", &poisoned)
				n++
			}
		}
	}
}
