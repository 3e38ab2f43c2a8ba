//go:build (amd64 || arm64) && !purego

package kernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

// blockTrail is the number of guard elements after a guardedBlock.
const blockTrail = 16

// guardedBlock is a rows×cols float32 block, rows ld elements apart,
// starting off elements into a buffer whose every other element (the
// guards before and after it, the gaps between its rows) holds the guard
// bits, a NaN no kernel produces: a write outside the block changes a
// guard, and a read of one brings a NaN into a result.
type guardedBlock struct {
	buf                 []float32
	off, ld, rows, cols int
	guard               uint32
}

// newGuardedBlock returns a block of guards only, whose element (0, 0) is
// buf[off].
func newGuardedBlock(rows, cols, ld, off int, guard uint32) *guardedBlock {
	b := &guardedBlock{off: off, ld: ld, rows: rows, cols: cols, guard: guard}
	b.buf = make([]float32, off+b.span()+blockTrail)
	g := math.Float32frombits(guard)
	for i := range b.buf {
		b.buf[i] = g
	}
	return b
}

// span is the number of elements from the first of the block to its last.
func (b *guardedBlock) span() int { return max(0, (b.rows-1)*b.ld+b.cols) }

// s is the slice a kernel is passed: from the first element of the block
// to its last.
func (b *guardedBlock) s() []float32 { return b.buf[b.off : b.off+b.span()] }

func (b *guardedBlock) at(i, j int) *float32 { return &b.buf[b.off+i*b.ld+j] }

func (b *guardedBlock) fillNormal(rng *rand.Rand) {
	for i := range b.rows {
		for j := range b.cols {
			*b.at(i, j) = float32(rng.NormFloat64())
		}
	}
}

func (b *guardedBlock) clone() *guardedBlock {
	c := *b
	c.buf = append([]float32(nil), b.buf...)
	return &c
}

// checkOutside fails unless every element outside the block still holds
// the guard bits.
func (b *guardedBlock) checkOutside(t testing.TB, what string) {
	t.Helper()
	for idx, v := range b.buf {
		k := idx - b.off
		if k >= 0 && k < b.span() && k%b.ld < b.cols {
			continue
		}
		if math.Float32bits(v) != b.guard {
			t.Fatalf("%s: element %d outside the block (offset %d, ld %d, %d×%d) was written: %#x (%v)",
				what, k, b.off, b.ld, b.rows, b.cols, math.Float32bits(v), v)
		}
	}
}
