package kernel

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
)

// The bfloat16 kernels: the products of attention's bf16 compute precision.
// Their operands are bfloat16 and their accumulators float32, which is what
// AMX (TDPBF16PS) and AVX512-BF16 (VDPBF16PS) compute: AMX at several
// times the float32 FMA rate of a core (3–6× measured on the engine's
// tiles on a Sapphire Rapids Xeon), VDPBF16PS at twice the FMA rate on
// AMD Zen 4 and at half of it on that Xeon (BenchmarkVDPBF16PSPeak).
// Elsewhere (avx512, avx2, neon) they run the float32 FMA kernels on
// operands widened exactly to float32 (bf16_widen.go).
//
// Both instructions multiply pairs: the right-hand operand holds, for each
// output column n, the two bfloat16 elements k = 2t and 2t+1 of the
// reduction side next to each other. The kernels take that operand as a
// pair panel: the element (k, n) of a K-by-N matrix B lies at
//
//	b[(k/2)*ld + 2*n + k%2]
//
// so that row t of the panel (ld elements) holds the pairs t of every
// column. QKTBF16 takes the keys as such a panel (k = head dimension, n =
// key); PVBF16 takes the values (k = key, n = head dimension). PackKPairs
// and PackVPairs write them from float32, binary16, bfloat16 or Q8 rows.
//
// Every bfloat16 operand is rounded as RoundBF16 rounds (to nearest even,
// subnormals flushed to zero, as VCVTNEPS2BF16 does), so the products of
// two operands are exact in float32 and the kernels differ from their Go
// twins only in the order of the float32 additions.

// RoundBF16 rounds x to bfloat16 as the bf16 kernels and packs do: to
// nearest with ties to even; a subnormal input or result becomes a zero of
// the same sign (the DAZ and FTZ of VCVTNEPS2BF16, VDPBF16PS and AMX); NaN
// stays NaN (quiet, with its sign); overflow gives ±Inf.
func RoundBF16(x float32) fp16.BFloat16 {
	u := math.Float32bits(x)
	switch e := u & 0x7f800000; {
	case u&0x7fffffff > 0x7f800000: // NaN
		return fp16.BFloat16(u>>16 | 0x0040)
	case e == 0: // zero or subnormal
		return fp16.BFloat16(u >> 16 & 0x8000)
	}
	// A normal input rounds to a normal bfloat16 or to ±Inf: the carry
	// out of the mantissa only ever raises the exponent.
	u += 0x7fff + (u>>16)&1
	return fp16.BFloat16(u >> 16)
}

// bf16Value is the float32 value of a bfloat16 operand as the kernels read
// it: subnormals as zero.
func bf16Value(b fp16.BFloat16) float32 {
	if b&0x7f80 == 0 {
		b &= 0x8000
	}
	return math.Float32frombits(uint32(b) << 16)
}

// RoundRowsBF16 rounds rows rows of d float32s to bfloat16 (RoundBF16):
//
//	for i := 0; i < rows; i++ {
//		for k := 0; k < d; k++ {
//			dst[i*ldDst+k] = RoundBF16(src[i*ldSrc+k])
//		}
//	}
//
// It is how attention's bf16 precision rounds a block of queries once.
func RoundRowsBF16(dst []fp16.BFloat16, ldDst int, src []float32, ldSrc int, rows, d int) error {
	if err := checkDims("RoundRowsBF16", rows, d, 0); err != nil {
		return err
	}
	if err := checkBlock("RoundRowsBF16", "src", len(src), ldSrc, rows, d); err != nil {
		return err
	}
	if err := checkBlock("RoundRowsBF16", "dst", len(dst), ldDst, rows, d); err != nil {
		return err
	}
	if d == 0 {
		return nil
	}
	for i := range rows {
		roundRowBF16(dst[i*ldDst:][:d], src[i*ldSrc:][:d])
	}
	return nil
}

func roundRowBF16Generic(dst []fp16.BFloat16, src []float32) {
	src = src[:len(dst)]
	for k, x := range src {
		dst[k] = RoundBF16(x)
	}
}

// PackKPairs writes n key rows of d elements, read in place as QKRows
// reads them (float32, binary16, bfloat16, or int8 with its Q8 scales),
// into a pair panel of d rows and n columns, rounded to bfloat16:
//
//	for j := 0; j < n; j++ {
//		for k := 0; k < d; k++ {
//			dst[(k/2)*ldDst + 2*j + k%2] = RoundBF16(K(j*ldSrc + k))
//		}
//		if d%2 == 1 {
//			dst[(d/2)*ldDst + 2*j + 1] = 0
//		}
//	}
//
// with K(e) as in QKRows. An odd d gets a zero partner, so the panel holds
// (d+1)/2 full rows of pairs. ldDst must be at least 2·n.
func PackKPairs[T RowElem](dst []fp16.BFloat16, ldDst int, src []T, scales []float32, ldSrc int, n, d int) error {
	if err := checkDims("PackKPairs", n, d, 0); err != nil {
		return err
	}
	if err := checkRows("PackKPairs", "src", src, scales, ldSrc, n, d); err != nil {
		return err
	}
	if err := checkBlock("PackKPairs", "dst", len(dst), ldDst, (d+1)/2, 2*n); err != nil {
		return err
	}
	if n == 0 || d == 0 {
		return nil
	}
	if _, exact := any(src).([]fp16.BFloat16); !exact && pairAligned(dst, ldDst) {
		packKPairsRounded(dst, ldDst, src, scales, ldSrc, n, d)
		return nil
	}
	packKPairsGeneric(dst, ldDst, src, scales, ldSrc, n, d)
	return nil
}

// canonBF16 is RoundBF16 of a bfloat16 value: itself, but a subnormal
// becomes a zero of its sign and a NaN is quieted.
func canonBF16(x fp16.BFloat16) fp16.BFloat16 {
	switch e := x & 0x7f80; {
	case e == 0:
		return x & 0x8000
	case e == 0x7f80 && x&0x7f != 0:
		return x | 0x40
	}
	return x
}

// packKPairs32 is packKPairsGeneric for bfloat16 keys of even d whose
// pairs lie on 4-byte boundaries in src and dst: it moves each pair as one
// uint32 (4 bytes, in memory order), canonicalising (canonBF16) only the
// pairs that hold a zero, subnormal, infinite or NaN element. It reports
// false, doing nothing, when the pairs are not so aligned.
func packKPairs32(dst []fp16.BFloat16, ldDst int, x []fp16.BFloat16, ldSrc, n, d int) bool {
	if d%2 != 0 || ldSrc%2 != 0 || ldDst%2 != 0 ||
		uintptr(unsafe.Pointer(&x[0]))%4 != 0 || uintptr(unsafe.Pointer(&dst[0]))%4 != 0 {
		return false
	}
	src32 := unsafe.Slice((*uint32)(unsafe.Pointer(&x[0])), len(x)/2)
	dst32 := unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), len(dst)/2)
	ls, ld, pairs := ldSrc/2, ldDst/2, d/2
	for j0 := 0; j0 < n; j0 += packKBlock {
		nb := min(packKBlock, n-j0)
		for t := range pairs {
			o := dst32[t*ld+j0:][:nb]
			for jj := range o {
				w := src32[(j0+jj)*ls+t]
				// Both exponents neither 0 nor all ones: e − 0x80 < 0x7f00
				// for each half's exponent field e, whichever half is
				// first in memory.
				if (w&0x7f80)-0x80 < 0x7f00 && (w>>16&0x7f80)-0x80 < 0x7f00 {
					o[jj] = w
					continue
				}
				lo, hi := canonBF16(fp16.BFloat16(w)), canonBF16(fp16.BFloat16(w>>16))
				o[jj] = uint32(lo) | uint32(hi)<<16
			}
		}
	}
	return true
}

// littleEndian reports whether the first byte of a uint16 in memory is its
// low byte, as on amd64 and arm64.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// packVPairs32 interleaves the bfloat16 value rows of packVPairsGeneric
// two at a time with one uint32 store per pair, where the panel's rows lie
// on 4-byte boundaries and the machine is little-endian, for the pairs of
// rows whose values are all normal (neither zero, subnormal, infinite nor
// NaN; canonBF16 leaves those unchanged). It returns the first row it left
// to the element path: the first of a pair of rows with another value (it
// stops there), or the last row when n is odd, or n.
func packVPairs32(dst []fp16.BFloat16, ldDst int, x []fp16.BFloat16, ldSrc, n, d int) int {
	if !littleEndian || ldDst%2 != 0 || uintptr(unsafe.Pointer(&dst[0]))%4 != 0 {
		return 0
	}
	dst32 := unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), len(dst)/2)
	ld := ldDst / 2
	j := 0
	for ; j+1 < n; j += 2 {
		r0, r1 := x[j*ldSrc:][:d], x[(j+1)*ldSrc:][:d]
		o := dst32[(j/2)*ld:][:d]
		for c := range o {
			a, b := r0[c], r1[c]
			if (a&0x7f80)-0x80 >= 0x7f00 || (b&0x7f80)-0x80 >= 0x7f00 {
				return j // this pair of rows goes to the element path, from its start
			}
			o[c] = uint32(a) | uint32(b)<<16
		}
	}
	return j
}

// packKBlock is the number of keys packKPairsGeneric transposes at a time:
// 16 pairs of bfloat16, a cache line of a panel row.
const packKBlock = 16

func packKPairsGeneric[T RowElem](dst []fp16.BFloat16, ldDst int, src []T, scales []float32, ldSrc int, n, d int) {
	switch x := any(src).(type) {
	case []fp16.BFloat16:
		// bfloat16 keys are their own rounding: a transpose of pairs, in
		// blocks of 16 keys × 16 pairs in the level's vector kernel, the
		// rest packKBlock keys at a time so that each pair row of the
		// panel is written a cache line at a time (a key-by-key walk
		// writes one pair per row, rows ldDst apart, often a multiple of 4
		// KiB).
		if f := cur.bf16.packKPairs; f != nil && d%2 == 0 && n >= 16 && d >= 32 {
			n16, p16 := n&^15, (d/2)&^15
			f(bits16(dst), ldDst, bits16(x), ldSrc, n16, p16)
			if n16 < n { // the last keys, every pair
				packKPairsGeneric(dst[2*n16:], ldDst, x[n16*ldSrc:], nil, ldSrc, n-n16, d)
			}
			if 2*p16 < d { // the last pairs of the others
				packKPairsGeneric(dst[p16*ldDst:], ldDst, x[2*p16:], nil, ldSrc, n16, d-2*p16)
			}
			return
		}
		if packKPairs32(dst, ldDst, x, ldSrc, n, d) {
			return
		}
		for j0 := 0; j0 < n; j0 += packKBlock {
			nb := min(packKBlock, n-j0)
			for t := range d / 2 {
				o := dst[t*ldDst+2*j0:][:2*nb]
				for jj := range nb {
					p := x[(j0+jj)*ldSrc+2*t:][:2]
					o[2*jj], o[2*jj+1] = canonBF16(p[0]), canonBF16(p[1])
				}
			}
			if d%2 == 1 {
				o := dst[(d/2)*ldDst+2*j0:][:2*nb]
				for jj := range nb {
					o[2*jj], o[2*jj+1] = canonBF16(x[(j0+jj)*ldSrc+d-1]), 0
				}
			}
		}
		return
	case []float32:
		for j0 := 0; j0 < n; j0 += packKBlock {
			nb := min(packKBlock, n-j0)
			for t := range d / 2 {
				o := dst[t*ldDst+2*j0:][:2*nb]
				for jj := range nb {
					p := x[(j0+jj)*ldSrc+2*t:][:2]
					o[2*jj], o[2*jj+1] = RoundBF16(p[0]), RoundBF16(p[1])
				}
			}
			if d%2 == 1 {
				o := dst[(d/2)*ldDst+2*j0:][:2*nb]
				for jj := range nb {
					o[2*jj], o[2*jj+1] = RoundBF16(x[(j0+jj)*ldSrc+d-1]), 0
				}
			}
		}
		return
	}
	var buf [qktChunk]float32
	for j := range n {
		for c := 0; c < d; c += qktChunk {
			m := min(qktChunk, d-c)
			widen(buf[:m], src, scales, j*ldSrc+c)
			for i, x := range buf[:m] {
				k := c + i
				dst[(k/2)*ldDst+2*j+k%2] = RoundBF16(x)
			}
		}
		if d%2 == 1 {
			dst[(d/2)*ldDst+2*j+1] = 0
		}
	}
}

// PackVPairs writes n value rows of d elements, read in place as PVRows
// reads them, into a pair panel of n rows (keys) and d columns, rounded to
// bfloat16:
//
//	for j := 0; j < n; j++ {
//		for c := 0; c < d; c++ {
//			dst[(j/2)*ldDst + 2*c + j%2] = RoundBF16(V(j*ldSrc + c))
//		}
//	}
//	if n%2 == 1 {
//		for c := 0; c < d; c++ {
//			dst[(n/2)*ldDst + 2*c + 1] = 0
//		}
//	}
//
// with V(e) as in PVRows. It returns whether every value written is finite
// (no NaN or ±Inf), which lets a caller multiply a zero probability by
// every row of the tile safely. ldDst must be at least 2·d.
func PackVPairs[T RowElem](dst []fp16.BFloat16, ldDst int, src []T, scales []float32, ldSrc int, n, d int) (finite bool, err error) {
	if err := checkDims("PackVPairs", n, d, 0); err != nil {
		return false, err
	}
	if err := checkRows("PackVPairs", "src", src, scales, ldSrc, n, d); err != nil {
		return false, err
	}
	if err := checkBlock("PackVPairs", "dst", len(dst), ldDst, (n+1)/2, 2*d); err != nil {
		return false, err
	}
	if n == 0 || d == 0 {
		return true, nil
	}
	if _, exact := any(src).([]fp16.BFloat16); !exact && pairAligned(dst, ldDst) {
		return packVPairsRounded(dst, ldDst, src, scales, ldSrc, n, d), nil
	}
	return packVPairsGeneric(dst, ldDst, src, scales, ldSrc, n, d), nil
}

func packVPairsGeneric[T RowElem](dst []fp16.BFloat16, ldDst int, src []T, scales []float32, ldSrc int, n, d int) bool {
	if x, ok := any(src).([]fp16.BFloat16); ok {
		// bfloat16 values are their own rounding: an interleave of rows, in
		// the level's vector kernel for pairs of rows 32 columns at a time.
		if f := cur.bf16.packVPairs; f != nil && n >= 2 && d >= 32 {
			rp, d32 := n/2, d&^31
			finite := f(bits16(dst), ldDst, bits16(x), ldSrc, rp, d32)
			if d32 < d && !packVPairsGeneric(dst[2*d32:], ldDst, x[d32:], nil, ldSrc, 2*rp, d-d32) {
				finite = false
			}
			if n%2 == 1 && !packVPairsGeneric(dst[rp*ldDst:], ldDst, x[2*rp*ldSrc:], nil, ldSrc, 1, d) {
				finite = false
			}
			return finite
		}
		var or fp16.BFloat16 // the exponent bits of every value, or-ed in pairs
		for j := packVPairs32(dst, ldDst, x, ldSrc, n, d); j+1 < n; j += 2 {
			r0, r1 := x[j*ldSrc:][:d], x[(j+1)*ldSrc:][:d]
			o := dst[(j/2)*ldDst:][:2*d]
			for c := range d {
				a, b := canonBF16(r0[c]), canonBF16(r1[c])
				o[2*c], o[2*c+1] = a, b
				if a&0x7f80 == 0x7f80 || b&0x7f80 == 0x7f80 {
					or = 0x7f80
				}
			}
		}
		if n%2 == 1 {
			r0 := x[(n-1)*ldSrc:][:d]
			o := dst[(n/2)*ldDst:][:2*d]
			for c := range d {
				a := canonBF16(r0[c])
				o[2*c], o[2*c+1] = a, 0
				if a&0x7f80 == 0x7f80 {
					or = 0x7f80
				}
			}
		}
		return or == 0
	}
	var buf [qktChunk]float32
	var bad fp16.BFloat16 // exponent bits of every value written, and-ed
	bad = 0x7f80
	for j := range n {
		row := dst[(j/2)*ldDst+j%2:]
		for c := 0; c < d; c += qktChunk {
			m := min(qktChunk, d-c)
			widen(buf[:m], src, scales, j*ldSrc+c)
			for i, x := range buf[:m] {
				b := RoundBF16(x)
				if b&0x7f80 == 0x7f80 {
					bad = 0
				}
				row[2*(c+i)] = b
			}
		}
	}
	if n%2 == 1 {
		row := dst[(n/2)*ldDst+1:]
		for c := range d {
			row[2*c] = 0
		}
	}
	return bad != 0
}

// QKTBF16 computes a score tile from bfloat16 query rows and a pair panel
// of bfloat16 keys, accumulating in float32, with the scale applied to
// each sum:
//
//	for i := 0; i < rows; i++ {
//		for j := 0; j < cols; j++ {
//			var acc float32
//			for k := 0; k < d; k++ {
//				acc += q[i*ldQ+k] * kp[(k/2)*ldK + 2*j + k%2]
//			}
//			s[i*ldS+j] = scale * acc
//		}
//	}
//
// d must be even (pad an odd head dimension with a zero component in both
// operands: PackKPairs does in the panel). Subnormal operands count as
// zero. ldK must be at least 2·cols. The order of the additions is not part
// of the contract.
func QKTBF16(s []float32, ldS int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, rows, cols, d int, scale float32) error {
	if err := checkDims("QKTBF16", rows, cols, d); err != nil {
		return err
	}
	if d%2 != 0 {
		return fmt.Errorf("kernel.QKTBF16: d is %d; want an even number (pad with a zero component)", d)
	}
	if err := checkBlock("QKTBF16", "s", len(s), ldS, rows, cols); err != nil {
		return err
	}
	if err := checkBlock("QKTBF16", "q", len(q), ldQ, rows, d); err != nil {
		return err
	}
	if err := checkBlock("QKTBF16", "kp", len(kp), ldK, d/2, 2*cols); err != nil {
		return err
	}
	switch {
	case rows == 0 || cols == 0:
	case d == 0:
		for i := range rows {
			row := s[i*ldS:][:cols]
			for j := range row {
				row[j] = scale * 0
			}
		}
	default:
		qktBF16(s, ldS, q, ldQ, kp, ldK, rows, cols, d, scale)
	}
	return nil
}

// PVBF16 accumulates the product of a bfloat16 probability tile and a pair
// panel of bfloat16 values into a float32 output block:
//
//	for i := 0; i < rows; i++ {
//		for c := 0; c < d; c++ {
//			acc := o[i*ldO+c]
//			for j := 0; j < cols; j++ {
//				acc += p[i*ldP+j] * vp[(j/2)*ldV + 2*c + j%2]
//			}
//			o[i*ldO+c] = acc
//		}
//	}
//
// cols must be even (pad with a zero probability and a zero value row:
// PackVPairs does in the panel). ldV must be at least 2·d. The order of the
// additions is not part of the contract.
func PVBF16(o []float32, ldO int, p []fp16.BFloat16, ldP int, vp []fp16.BFloat16, ldV int, rows, cols, d int) error {
	if err := checkDims("PVBF16", rows, cols, d); err != nil {
		return err
	}
	if cols%2 != 0 {
		return fmt.Errorf("kernel.PVBF16: cols is %d; want an even number (pad with a zero probability)", cols)
	}
	if err := checkBlock("PVBF16", "o", len(o), ldO, rows, d); err != nil {
		return err
	}
	if err := checkBlock("PVBF16", "p", len(p), ldP, rows, cols); err != nil {
		return err
	}
	if err := checkBlock("PVBF16", "vp", len(vp), ldV, cols/2, 2*d); err != nil {
		return err
	}
	if rows == 0 || cols == 0 || d == 0 {
		return nil
	}
	pvBF16(o, ldO, p, ldP, vp, ldV, rows, cols, d)
	return nil
}

// qktBF16Generic sums each dot product pair by pair, element 2t then 2t+1.
func qktBF16Generic(s []float32, ldS int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, rows, cols, d int, scale float32) {
	var acc [64]float32
	for j0 := 0; j0 < cols; j0 += len(acc) {
		nc := min(len(acc), cols-j0)
		for i := range rows {
			a := acc[:nc]
			clear(a)
			qrow := q[i*ldQ:][:d]
			for t := range d / 2 {
				q0, q1 := bf16Value(qrow[2*t]), bf16Value(qrow[2*t+1])
				krow := kp[t*ldK+2*j0:][:2*nc]
				for j := range a {
					a[j] += q0 * bf16Value(krow[2*j])
					a[j] += q1 * bf16Value(krow[2*j+1])
				}
			}
			srow := s[i*ldS+j0:][:nc]
			for j, x := range a {
				srow[j] = scale * x
			}
		}
	}
}

// pvBF16Generic adds the products key pair by key pair, key 2t then 2t+1.
func pvBF16Generic(o []float32, ldO int, p []fp16.BFloat16, ldP int, vp []fp16.BFloat16, ldV int, rows, cols, d int) {
	for i := range rows {
		orow := o[i*ldO:][:d]
		prow := p[i*ldP:][:cols]
		for t := range cols / 2 {
			p0, p1 := bf16Value(prow[2*t]), bf16Value(prow[2*t+1])
			vrow := vp[t*ldV:][:2*d]
			for c := range orow {
				orow[c] += p0 * bf16Value(vrow[2*c])
				orow[c] += p1 * bf16Value(vrow[2*c+1])
			}
		}
	}
}

// OnlineSoftmaxBF16 is OnlineSoftmax for the bf16 precision, fused into one
// pass over the tile: it scales the scores, folds them into the running
// maximum m and sum z of each row, and writes the probabilities rounded to
// bfloat16 into p, for PVBF16. The sum z adds the probabilities before
// rounding. s is not modified.
//
//	for i := 0; i < rows; i++ {
//		row := s[i*ldS : i*ldS+cols]
//		mNew := max(m[i], scale*Max(row))   // NaN if any score is NaN
//		if mNew == −Inf {
//			p[i*ldP : i*ldP+cols] = 0
//			alpha[i] = 1
//			continue
//		}
//		alpha[i] = Exp(m[i] − mNew)
//		var sum float32
//		for j, x := range row {
//			e := Exp(scale*x − mNew)
//			sum += e
//			p[i*ldP+j] = RoundBF16(e)
//		}
//		z[i] = alpha[i]*z[i] + sum
//		m[i] = mNew
//	}
//
// (the maximum is taken of the scaled scores, which for scale < 0 is not
// scale times the maximum). The order of the additions is not part of the
// contract.
//
// Where the level has the fused kernel (AVX-512 with AVX512-BF16, and
// AMX), for a positive finite scale, the exponentials are base 2 of the
// same differences, each operation rounded to float32 (softmaxBF16Base2):
//
//	alpha[i] = Exp2((m[i] − mNew)·log2e)
//	e := Exp2((scale·x − mNew)·log2e)
//
// scale·x is rounded as the maximum was, so the maximum's difference is 0
// and its weight 1 exactly, whatever the magnitude of the scores. The
// other weights are e^(scale·x − mNew), scale·x rounded, to within a
// relative 2⁻²³·|t| for the exponent t (the roundings of the difference,
// of log2e and of the product; 1.5·10⁻⁵ at t = −126, below which the
// weight is 0) and the exponential's 3 ulp.
func OnlineSoftmaxBF16(s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols int, scale float32, m, z, alpha []float32) error {
	if err := checkDims("OnlineSoftmaxBF16", rows, cols, 0); err != nil {
		return err
	}
	if err := checkBlock("OnlineSoftmaxBF16", "s", len(s), ldS, rows, cols); err != nil {
		return err
	}
	if err := checkBlock("OnlineSoftmaxBF16", "p", len(p), ldP, rows, cols); err != nil {
		return err
	}
	if len(m) < rows || len(z) < rows || len(alpha) < rows {
		return fmt.Errorf("kernel.OnlineSoftmaxBF16: m, z and alpha have %d, %d and %d elements; want >= %d (rows)", len(m), len(z), len(alpha), rows)
	}
	if rows == 0 {
		return nil
	}
	softmaxBF16(s, ldS, p, ldP, rows, cols, scale, m, z, alpha)
	return nil
}

// softmaxBF16Base2 is the fused kernel's softmax (OnlineSoftmaxBF16's
// base-2 form) for a positive finite scale, the twin of SoftmaxBF16AVX512:
// each row's maximum and special cases as in softmaxBF16Generic, then each
// exponent as three float32 operations, the scaled score (the product the
// maximum was rounded from), its difference from the maximum, that times
// log2e, and the base-2 exponential. No FMA may join the first two: the
// maximum's difference would then be the product's rounding error, up to
// half an ulp of mNew (over 100 from |mNew| = 2³¹ on), and its weight
// 2^±100 or worse instead of 1.
func softmaxBF16Base2(s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols int, scale float32, m, z, alpha []float32) {
	for i := range rows {
		row := s[i*ldS:][:cols]
		prow := p[i*ldP:][:cols]
		mNew := scaledMax(row, scale, m[i])
		if mNew == negInf {
			clear(prow)
			alpha[i] = 1
			continue
		}
		alpha[i] = exp2Softmax(float32(m[i]-mNew) * expLog2e)
		var sum float32
		for j, x := range row {
			y := float32(scale * x) // the conversion keeps the product out of an FMA
			e := exp2Softmax(float32(y-mNew) * expLog2e)
			sum += e
			prow[j] = RoundBF16(e)
		}
		z[i] = float32(alpha[i]*z[i]) + sum // rounded twice, as the kernel does
		m[i] = mNew
	}
}

// scaledMax returns max(m, scale·x for x in row), or the first scaled
// score that is NaN: the new running maximum of OnlineSoftmaxBF16.
func scaledMax(row []float32, scale, m float32) float32 {
	for _, x := range row {
		x *= scale
		if x != x {
			return x
		}
		m = max(m, x)
	}
	return m
}

func softmaxBF16Generic(s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols int, scale float32, m, z, alpha []float32) {
	for i := range rows {
		row := s[i*ldS:][:cols]
		prow := p[i*ldP:][:cols]
		mNew := scaledMax(row, scale, m[i])
		if mNew == negInf {
			clear(prow)
			alpha[i] = 1
			continue
		}
		alpha[i] = Exp(m[i] - mNew)
		var sum float32
		for j, x := range row {
			// The product rounded as the maximum was: an FMA (which Go
			// may form, and does on arm64) would leave its rounding error,
			// up to half an ulp of mNew, in the maximum's exponent.
			e := Exp(float32(scale*x) - mNew)
			sum += e
			prow[j] = RoundBF16(e)
		}
		z[i] = alpha[i]*z[i] + sum
		m[i] = mNew
	}
}
