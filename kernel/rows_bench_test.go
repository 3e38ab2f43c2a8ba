package kernel

import (
	"fmt"
	"math/rand/v2"
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
