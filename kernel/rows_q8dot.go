package kernel

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Q8Query is query rows quantised to Q8 (int8 values with a float32 scale
// per block of Q8Block, llama.cpp's Q8_0) for QKRowsQ8Dot, quantised once
// and then multiplied with as many key tiles as there are. It also keeps
// them in the layout the integer kernel reads, so a call pays nothing to
// prepare them. The zero value is empty; Set fills it, reusing its memory
// (it allocates only to grow). A Q8Query may be read by many goroutines at
// once, but not while Set runs.
type Q8Query struct {
	q      []int8    // rows of ld values (the last block zero-padded)
	scales []float32 // ld/Q8Block per row
	prep   []byte    // the VNNI kernel's rows, prepLd bytes apart
	rows   int
	d, ld  int
	prepLd int
}

// Set quantises rows rows of d float32 values, ldX apart in x, as
// QuantizeQ8 does (a row whose length is not a multiple of Q8Block ends in
// a short block, scaled by its own values). It returns an error, and
// leaves q as it was, if a size is negative or x is too short.
func (q *Q8Query) Set(x []float32, ldX, rows, d int) error {
	if err := checkDims("Q8Query.Set", rows, 1, d); err != nil {
		return err
	}
	if err := checkBlock("Q8Query.Set", "x", len(x), ldX, rows, d); err != nil {
		return err
	}
	ld := (d + Q8Block - 1) / Q8Block * Q8Block
	if rows > 0 && ld > math.MaxInt/3/rows {
		return fmt.Errorf("kernel.Q8Query.Set: %d rows of %d values do not fit in memory", rows, d)
	}
	q.rows, q.d, q.ld = rows, d, ld
	q.q = grow(q.q, rows*ld)
	q.scales = grow(q.scales, rows*ld/Q8Block)
	var tail [Q8Block]float32
	for i := range rows {
		xi := x[i*ldX : i*ldX+d]
		qi, si := q.q[i*ld:(i+1)*ld], q.scales[i*ld/Q8Block:(i+1)*ld/Q8Block]
		full := d &^ (Q8Block - 1)
		quantizeQ8(qi[:full], si[:full/Q8Block], xi[:full])
		if full < d {
			clear(tail[:])
			copy(tail[:], xi[full:])
			quantizeQ8(qi[full:], si[full/Q8Block:], tail[:])
		}
	}
	q.prepare()
	return nil
}

// grow returns x resliced to n elements, reallocated if it is too short.
func grow[T any](x []T, n int) []T {
	if cap(x) < n {
		return make([]T, n)
	}
	return x[:n]
}

// Rows returns the number of query rows q holds.
func (q *Q8Query) Rows() int { return q.rows }

// Dim returns the number of values of each row.
func (q *Q8Query) Dim() int { return q.d }

// Values returns the quantised rows: row i's values are
// vals[i*ld : i*ld+Dim()] with the scale of value c at
// scales[(i*ld+c)/Q8Block]; ld is Dim() rounded up to a multiple of
// Q8Block. The slices are q's own, to read, not to modify.
func (q *Q8Query) Values() (vals []int8, scales []float32, ld int) {
	return q.q, q.scales, q.ld
}

// prepare lays the rows out for the VNNI kernel: every chunk of 64
// values of a row is its 64 bytes, 16 dwords of −128 times the sum of
// each four bytes (the kernel reads the keys as unsigned bytes, k + 128,
// and these take the 128s back out) and the 16 scales of those fours.
func (q *Q8Query) prepare() {
	dv := q.d &^ 63
	q.prepLd = 3 * dv
	if !int8DotBuilt || dv == 0 {
		q.prep = q.prep[:0]
		return
	}
	q.prep = grow(q.prep, q.rows*q.prepLd)
	for i := range q.rows {
		qi := q.q[i*q.ld:]
		si := q.scales[i*q.ld/Q8Block:]
		row := q.prep[i*q.prepLd : (i+1)*q.prepLd]
		for h := range dv / 64 {
			ch := row[192*h : 192*(h+1)]
			for w := range 16 {
				c := 64*h + 4*w
				var sum int32
				for t := range 4 {
					ch[4*w+t] = byte(qi[c+t])
					sum += int32(qi[c+t])
				}
				binary.LittleEndian.PutUint32(ch[64+4*w:], uint32(-128*sum))
				binary.LittleEndian.PutUint32(ch[128+4*w:], math.Float32bits(si[c/Q8Block]))
			}
		}
	}
}

// QKRowsQ8Dot computes the scaled dot products of q's rows with cols Q8
// key rows in integer arithmetic, as llama.cpp's q8_0·q8_0 dot product:
//
//	vals, qScales, ldQ := q.Values()
//	for i := 0; i < q.Rows(); i++ {
//		for j := 0; j < cols; j++ {
//			var acc float32
//			for b := 0; b*Q8Block < q.Dim(); b++ {
//				var dot int32
//				for c := b * Q8Block; c < min(q.Dim(), (b+1)*Q8Block); c++ {
//					dot += int32(vals[i*ldQ+c]) * int32(k[j*ldK+c])
//				}
//				acc += float32(dot) * qScales[(i*ldQ)/Q8Block+b] * kScales[(j*ldK)/Q8Block+b]
//			}
//			s[i*ldS+j] = scale * acc
//		}
//	}
//
// A caller that quantises its query rows once (Q8Query.Set, one rounding
// per value, within half a step of its block) gets Q·Kᵀ against Q8 keys
// without converting a single key to float32. The integer sums of a block
// are exact; only their scaling and the sum over blocks round, in an order
// that is not part of the contract. ldK must be a multiple of Q8Block so
// that every key row starts a block. It runs VPDPBUSD on AVX512-VNNI or
// AVX-VNNI and VPMADDUBSW on other AVX2 CPUs (Current().Int8Dot reports
// an assembly kernel; FLASHGO_KERNEL's int8dot=ROW picks avx512vnni,
// avxvnni, avx2 or generic); elsewhere (purego, arm64) it is a Go loop,
// slower than QKRows on the same keys.
func QKRowsQ8Dot(s []float32, ldS int, q *Q8Query, k []int8, kScales []float32, ldK int, cols int, scale float32) error {
	return qkRowsQ8DotPrefetch(s, ldS, q, k, kScales, ldK, cols, scale, prefetchRows*ldK)
}

// qkRowsQ8DotPrefetch is QKRowsQ8Dot with the prefetch distance given, in
// elements of k, as for qkRowsPrefetch.
func qkRowsQ8DotPrefetch(s []float32, ldS int, q *Q8Query, k []int8, kScales []float32, ldK int, cols int, scale float32, ahead int) error {
	const fn = "QKRowsQ8Dot"
	if q == nil {
		return fmt.Errorf("kernel.%s: nil query", fn)
	}
	rows, d := q.rows, q.d
	if err := checkDims(fn, rows, cols, d); err != nil {
		return err
	}
	if err := checkBlock(fn, "s", len(s), ldS, rows, cols); err != nil {
		return err
	}
	if err := checkRows(fn, "k", k, kScales, ldK, cols, d); err != nil {
		return err
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	dv := 0
	if d > 0 {
		dv = qkRowsQ8DotAsm(s, ldS, q, k, kScales, ldK, cols, scale, ahead)
	}
	qkRowsQ8DotGeneric(s, ldS, q, k, kScales, ldK, cols, dv, scale)
	return nil
}

// QKRowsQ8DotGather is QKRowsQ8Dot over key rows that lie anywhere in k:
// key j's row is the q.Dim() values from off[j] on (a multiple of
// Q8Block), with the scales from kScales[off[j]/Q8Block] on, as for
// QKRowsGather. Each score has the bits that QKRowsQ8Dot gives the same
// row. The offsets after the first cols are prefetched, as for
// QKRowsGather.
func QKRowsQ8DotGather(s []float32, ldS int, q *Q8Query, k []int8, kScales []float32, off []int, cols int, scale float32) error {
	return qkRowsQ8DotGather(s, ldS, q, k, kScales, off, cols, scale, gatherAhead(off, cols))
}

// qkRowsQ8DotGather is QKRowsQ8DotGather with its prefetch distance in
// keys, as qkRowsGather.
func qkRowsQ8DotGather(s []float32, ldS int, q *Q8Query, k []int8, kScales []float32, off []int, cols int, scale float32, ahead int) error {
	const fn = "QKRowsQ8DotGather"
	if q == nil {
		return fmt.Errorf("kernel.%s: nil query", fn)
	}
	rows, d := q.rows, q.d
	if err := checkDims(fn, rows, cols, d); err != nil {
		return err
	}
	if err := checkBlock(fn, "s", len(s), ldS, rows, cols); err != nil {
		return err
	}
	if err := checkGather(fn, "k", k, kScales, off, cols, d); err != nil {
		return err
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	dv := 0
	if d > 0 {
		dv = qkRowsQ8DotGatherAsm(s, ldS, q, k, kScales, off, prefetchOffsets(off, cols, ahead), cols, scale)
	}
	if dv < d || d == 0 {
		for j, e := range off[:cols] {
			qkRowsQ8DotGeneric(s[j:], ldS, q, k[e:], rowScales(kScales, e), 0, 1, dv, scale)
		}
	}
	return nil
}

// qkRowsQ8DotGeneric is QKRowsQ8Dot over components [c0, q.d), c0 a
// multiple of Q8Block: with c0 = 0 it writes the scores, otherwise it adds
// scale times the dot products over those components to scores that hold
// the first c0 components' already.
func qkRowsQ8DotGeneric(s []float32, ldS int, q *Q8Query, k []int8, kScales []float32, ldK int, cols, c0 int, scale float32) {
	d := q.d
	if c0 >= d && c0 > 0 {
		return
	}
	for i := range q.rows {
		qi := q.q[i*q.ld : i*q.ld+d]
		qs := q.scales[i*q.ld/Q8Block:]
		for j := range cols {
			kj := k[j*ldK : j*ldK+d]
			ks := kScales[j*ldK/Q8Block:]
			var acc float32
			for b := c0 / Q8Block; b*Q8Block < d; b++ {
				lo, hi := b*Q8Block, min(d, (b+1)*Q8Block)
				var dot int32
				for c, x := range qi[lo:hi] {
					dot += int32(x) * int32(kj[lo+c])
				}
				acc += float32(dot) * qs[b] * ks[b]
			}
			if c0 == 0 {
				s[i*ldS+j] = scale * acc
			} else {
				s[i*ldS+j] += scale * acc
			}
		}
	}
}
