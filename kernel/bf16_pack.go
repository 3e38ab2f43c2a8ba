package kernel

import (
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
)

// The pair packs of values that need rounding (float32, binary16 and Q8
// rows) go through the level's vector kernels: a strip of keys is widened
// to float32 (packFloat16, or the Q8 dequantisation), rounded row by row
// to bfloat16 (roundRowBF16) and only then moved into the panel, a pair
// of bfloat16s (4 bytes) at a time. Each value is rounded once, by
// RoundBF16's rule, from its exact float32 value, so the panels are those
// of packKPairsGeneric and packVPairsGeneric bit for bit; where the level
// has the bfloat16 pair packs, they move whole blocks of the rounded
// values (canonical bfloat16s, which they leave as they are).

// pairChunk is the number of components of a key a strip of
// packKPairsRounded widens at a time: with packKBlock keys, 8 KiB of
// float32s and 4 KiB of bfloat16s on the stack.
const pairChunk = 128

// pairAligned reports whether a pair panel dst of leading dimension ldDst
// can be written a pair (uint32) at a time: ldDst even, dst on a 4-byte
// boundary, a little-endian machine.
func pairAligned(dst []fp16.BFloat16, ldDst int) bool {
	return littleEndian && ldDst%2 == 0 && uintptr(unsafe.Pointer(&dst[0]))%4 == 0
}

// roundRows rounds n rows of m elements of src, rows ldSrc apart from
// element e on, to bfloat16 into b (rows pairChunk apart): float32 rows
// directly, binary16 rows widened exactly first (packFloat16) and Q8 rows
// dequantised (value times scale, as widen does) into wide.
func roundRows[T RowElem](b []fp16.BFloat16, wide []float32, src []T, scales []float32, e, ldSrc, n, m int) {
	switch x := any(src).(type) {
	case []float32:
		for r := range n {
			roundRowBF16(b[r*pairChunk:][:m], x[e+r*ldSrc:][:m])
		}
		return
	case []fp16.Float16:
		packFloat16(wide, pairChunk, x[e:], ldSrc, n, m)
	default:
		for r := range n {
			widen(wide[r*pairChunk:][:m], src, scales, e+r*ldSrc)
		}
	}
	for r := range n {
		roundRowBF16(b[r*pairChunk:][:m], wide[r*pairChunk:][:m])
	}
}

// packKPairsRounded is packKPairsGeneric for float32, binary16 and Q8 keys
// (not bfloat16) where pairAligned(dst, ldDst). It moves packKBlock keys
// at a time, pairChunk of their components at a time.
func packKPairsRounded[T RowElem](dst []fp16.BFloat16, ldDst int, src []T, scales []float32, ldSrc int, n, d int) {
	var wideA [packKBlock * pairChunk]float32
	var bA [packKBlock * pairChunk]fp16.BFloat16
	wide, b := stackSlice(wideA[:]), stackSlice(bA[:])
	dst32 := unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), len(dst)/2)
	b32 := unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/2)
	ld := ldDst / 2
	for j0 := 0; j0 < n; j0 += packKBlock {
		nb := min(packKBlock, n-j0)
		for c0 := 0; c0 < d; c0 += pairChunk {
			m := min(pairChunk, d-c0)
			roundRows(b, wide, src, scales, j0*ldSrc+c0, ldSrc, nb, m)
			if f := cur.bf16.packKPairs; f != nil && nb == packKBlock && m%32 == 0 {
				// The rounded values are canonical: the bfloat16 pack
				// moves them as they are.
				f(bits16(dst[c0*ld+2*j0:]), ldDst, bits16(b), pairChunk, nb, m/2)
				continue
			}
			if m%2 == 1 {
				for jj := range nb {
					b[jj*pairChunk+m] = 0 // the zero partner of an odd last component
				}
			}
			for t := range (m + 1) / 2 {
				o := dst32[(c0/2+t)*ld+j0:][:nb]
				for jj := range o {
					o[jj] = b32[jj*pairChunk/2+t]
				}
			}
		}
	}
}

// packVPairsRounded is packVPairsGeneric for float32, binary16 and Q8
// values (not bfloat16) where pairAligned(dst, ldDst): two value rows at a
// time, pairChunk components at a time, interleaved a pair at a time. It
// reports whether every value written is finite.
func packVPairsRounded[T RowElem](dst []fp16.BFloat16, ldDst int, src []T, scales []float32, ldSrc int, n, d int) bool {
	var wideA [2 * pairChunk]float32
	var bA [2 * pairChunk]fp16.BFloat16
	wide, b := stackSlice(wideA[:]), stackSlice(bA[:])
	dst32 := unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), len(dst)/2)
	ld := ldDst / 2
	var or uint32 // the exponent bits of every value, or-ed as infinite or not
	for j := 0; j < n; j += 2 {
		rows := min(2, n-j)
		for c0 := 0; c0 < d; c0 += pairChunk {
			m := min(pairChunk, d-c0)
			roundRows(b, wide, src, scales, j*ldSrc+c0, ldSrc, rows, m)
			if f := cur.bf16.packVPairs; f != nil && rows == 2 && m%32 == 0 {
				if !f(bits16(dst[(j/2)*ldDst+2*c0:]), ldDst, bits16(b), pairChunk, 1, m) {
					or = 1
				}
				continue
			}
			if rows == 1 {
				clear(b[pairChunk:][:m]) // the zero partner of an odd last row
			}
			o := dst32[(j/2)*ld+c0:][:m]
			b0, b1 := b[:m], b[pairChunk:][:m]
			for c := range o {
				lo, hi := uint32(b0[c]), uint32(b1[c])
				if lo&0x7f80 == 0x7f80 || hi&0x7f80 == 0x7f80 {
					or = 1
				}
				o[c] = lo | hi<<16
			}
		}
	}
	return or == 0
}
