package kernel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
)

// BenchmarkRows times the decode kernels on one K/V head as a decode step
// calls them: QKRows and then PVRows for 4 query rows (a GQA group of 4)
// over n keys of 128 components, in tiles of 64 keys. qk and pv time one
// kernel, both the pair. MB/s counts the K and V bytes of the pair (the
// int8 ones without their scales) in every row, so the qk and pv rows read
// as the rate the pair would reach at that kernel's speed. n = 1024 keeps
// K and V in L2: the figures are the kernels' compute rate, the most that a
// cold decode on one core can reach. both16 calls the pair on 16 keys at a
// time, as a paged cache of 16-position blocks does: the difference from
// both is the cost of the calls.
func BenchmarkRows(b *testing.B) {
	benchRows[float32](b, "f32")
	benchRows[fp16.Float16](b, "f16")
	benchRows[fp16.BFloat16](b, "bf16")
	benchRows[int8](b, "q8")
	benchRows[fp16.Float8E4M3](b, "e4m3")
	benchRows[fp16.Float8E5M2](b, "e5m2")
}

func benchRows[T RowElem](b *testing.B, name string) {
	const rows, d = 4, 128
	for _, n := range []int{64, 1024} {
		for _, which := range []string{"qk", "pv", "both", "both16"} {
			tile := 64
			if which == "both16" {
				tile = 16
			}
			b.Run(fmt.Sprintf("%s/%s/n%d", name, which, n), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				k, v := makeRows[T](rng, n, d, d), makeRows[T](rng, n, d, d)
				q := make([]float32, rows*d)
				for i := range q {
					q[i] = rng.Float32()
				}
				s := make([]float32, rows*tile)
				o := make([]float32, rows*d)
				b.SetBytes(int64(2 * n * d * int(unsafe.Sizeof(k.x[0]))))
				b.ResetTimer()
				for range b.N {
					for j0 := 0; j0 < n; j0 += tile {
						ks, vs := k.scales[j0*d/Q8Block:], v.scales[j0*d/Q8Block:]
						if which != "pv" {
							if err := QKRows(s, tile, q, d, k.x[j0*d:], ks, d, rows, tile, d, 0.1); err != nil {
								b.Fatal(err)
							}
						}
						if which != "qk" {
							if err := PVRows(o, d, s, tile, v.x[j0*d:], vs, d, rows, tile, d); err != nil {
								b.Fatal(err)
							}
						}
					}
				}
			})
		}
	}
}

// BenchmarkRowsQ8Dot is BenchmarkRows's q8 pair with Q·Kᵀ on int8 query
// rows (QKRowsQ8Dot): qk and both as there, so that the two compare side
// by side in one run.
func BenchmarkRowsQ8Dot(b *testing.B) {
	const rows, d = 4, 128
	for _, n := range []int{64, 1024} {
		for _, which := range []string{"qk", "both", "both16"} {
			tile := 64
			if which == "both16" {
				tile = 16
			}
			b.Run(fmt.Sprintf("%s/n%d", which, n), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				k, v := makeRows[int8](rng, n, d, d), makeRows[int8](rng, n, d, d)
				q, _ := q8DotQuery(b, rng, rows, d, d)
				s := make([]float32, rows*tile)
				o := make([]float32, rows*d)
				b.SetBytes(int64(2 * n * d))
				b.ResetTimer()
				for range b.N {
					for j0 := 0; j0 < n; j0 += tile {
						ks, vs := k.scales[j0*d/Q8Block:], v.scales[j0*d/Q8Block:]
						if err := QKRowsQ8Dot(s, tile, q, k.x[j0*d:], ks, d, tile, 0.1); err != nil {
							b.Fatal(err)
						}
						if which != "qk" {
							if err := PVRows(o, d, s, tile, v.x[j0*d:], vs, d, rows, tile, d); err != nil {
								b.Fatal(err)
							}
						}
					}
				}
			})
		}
	}
}

// BenchmarkRowsGather compares, on one K/V head of n keys (4 query rows,
// d 128, tiles of 64 keys), the decode kernels over a contiguous head
// (rows: QKRows and PVRows, a call a tile) with the same rows cut into
// blocks of 16 positions that lie elsewhere, as a paged cache's do: one
// QKRows/PVRows call per block (rows16, prefetching through the block
// order) or one QKRowsGather/PVRowsGather call per tile (gather), each
// prefetching the row 64 keys on. The blocks lie shuffled in a pool of
// their own (shuffled), or in order a 16 KiB stretch apart (gapped: the
// other heads' rows of each block between them, as in a pool of [blocks,
// heads, 16, 128] binary16 rows of 4 heads). n = 1024 keeps the head in
// L2; n = 65536 (32 MiB of binary16 K and V) reads it from memory on the
// 2-core machines (not past a 300 MiB L3).
func BenchmarkRowsGather(b *testing.B) {
	benchRowsGather[fp16.Float16](b, "f16")
	benchRowsGather[int8](b, "q8")
	benchRowsGather[fp16.Float8E4M3](b, "e4m3")
}

func benchRowsGather[T RowElem](b *testing.B, name string) {
	const rows, d, tile, bs, ahead, gap = 4, 128, 64, 16, 64, 4
	for _, n := range []int{1024, 65536} {
		for _, layout := range []string{"shuffled", "gapped"} {
			rng := rand.New(rand.NewPCG(3, 4))
			pos := rng.Perm(n / bs) // block i of the sequence is block pos[i] of the pool
			if layout == "gapped" {
				for i := range pos {
					pos[i] = gap * i
				}
			}
			off := make([]int, n+ahead)
			for j := range off {
				jj := min(j, n-1)
				off[j] = (pos[jj/bs]*bs + jj%bs) * d
			}
			var k, v benchPool[T]
			for _, which := range []string{"rows", "rows16", "gather"} {
				if which == "rows" && layout == "gapped" {
					continue // the same as shuffled's
				}
				b.Run(fmt.Sprintf("%s/%s/%s/n%d", name, layout, which, n), func(b *testing.B) {
					if k.x == nil {
						size := max(n, slices.Max(pos)*bs+bs) * d
						k, v = newBenchPool[T](size), newBenchPool[T](size)
					}
					q := make([]float32, rows*d)
					for i := range q {
						q[i] = float32(i%7) * 0.1
					}
					s := make([]float32, rows*tile)
					o := make([]float32, rows*d)
					b.SetBytes(int64(2 * n * d * int(unsafe.Sizeof(k.x[0]))))
					b.ResetTimer() // the pools' allocation and filling are not the kernels' time
					for range b.N {
						for j0 := 0; j0 < n; j0 += tile {
							benchGatherTile(b, which, k, v, q, s, o, off, j0)
						}
					}
				})
			}
		}
	}
}

// benchPool is a pool of K or V rows for BenchmarkRowsGather, filled with
// small values (no float64 twin: the gapped pools are large), so that
// every page is written: a page only read would map the kernel's zero page
// and be read from one physical page, cached.
type benchPool[T RowElem] struct {
	x      []T
	scales []float32
}

func newBenchPool[T RowElem](n int) benchPool[T] {
	p := benchPool[T]{x: make([]T, n), scales: make([]float32, (n+Q8Block-1)/Q8Block)}
	for i := range p.scales {
		p.scales[i] = 0.01
	}
	switch x := any(p.x).(type) {
	case []float32:
		for i := range x {
			x[i] = float32(i%13) * 0.01
		}
	case []fp16.Float16:
		for i := range x {
			x[i] = fp16.FromFloat32(float32(i%13) * 0.01)
		}
	case []int8:
		for i := range x {
			x[i] = int8(i%13 - 6)
		}
	case []fp16.Float8E4M3:
		for i := range x {
			x[i] = fp16.Float8E4M3(0x20 + i%13) // 2^−3 and on: every page written
		}
	}
	return p
}

// benchGatherTile runs one tile of BenchmarkRowsGather the way which says.
func benchGatherTile[T RowElem](b *testing.B, which string, k, v benchPool[T], q, s, o []float32, off []int, j0 int) {
	const rows, d, tile, bs, ahead = 4, 128, 64, 16, 64
	switch which {
	case "rows":
		e := j0 * d
		if err := QKRows(s, tile, q, d, k.x[e:], rowScalesOf(k.x, k.scales, e), d, rows, tile, d, 0.1); err != nil {
			b.Fatal(err)
		}
		if err := PVRows(o, d, s, tile, v.x[e:], rowScalesOf(v.x, v.scales, e), d, rows, tile, d); err != nil {
			b.Fatal(err)
		}
	case "rows16":
		for j := j0; j < j0+tile; j += bs {
			e, pf := off[j], off[j+ahead]
			if err := qkRowsPrefetch(s[j-j0:], tile, q, d, k.x[e:], rowScalesOf(k.x, k.scales, e), d, rows, bs, d, 0.1, pf-e); err != nil {
				b.Fatal(err)
			}
		}
		for j := j0; j < j0+tile; j += bs {
			e, pf := off[j], off[j+ahead]
			if err := pvRowsPrefetch(o, d, s[j-j0:], tile, v.x[e:], rowScalesOf(v.x, v.scales, e), d, rows, bs, d, pf-e); err != nil {
				b.Fatal(err)
			}
		}
	case "gather":
		t := off[j0 : j0+tile+ahead]
		if err := qkRowsGather(s, tile, q, d, k.x, k.scales, t, rows, tile, d, 0.1, ahead); err != nil {
			b.Fatal(err)
		}
		if err := pvRowsGather(o, d, s, tile, v.x, v.scales, t, rows, tile, d, ahead); err != nil {
			b.Fatal(err)
		}
	}
}
