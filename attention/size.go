package attention

import (
	"fmt"
	"math"
	"math/bits"
)

// Size arithmetic. Every product or sum of sizes taken from the caller
// (dimensions, strides, lengths, offsets) goes through these helpers, so
// that a size that does not fit in an int is an error rather than a value
// that wrapped around.

// mulSize returns a·b and whether the sizes are >= 0 and the product fits
// in an int.
func mulSize(a, b int) (int, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt {
		return 0, false
	}
	return int(lo), true
}

// addSize returns a+b and whether the sizes are >= 0 and the sum fits in
// an int.
func addSize(a, b int) (int, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	s := uint64(a) + uint64(b) // < 2^64: no wrap-around
	if s > math.MaxInt {
		return 0, false
	}
	return int(s), true
}

// satMul returns the product of sizes, or math.MaxInt when it does not fit
// in an int. A negative factor gives the plain product: whoever validates
// the result reports the negative size itself. The layout constructors use
// it so that a layout too large for an int keeps strides that Validate
// rejects ("spans more elements than an int can index") rather than
// strides that wrapped around to something plausible.
func satMul(x ...int) int {
	p := 1
	neg := false
	for _, v := range x {
		neg = neg || v < 0
	}
	if neg {
		for _, v := range x {
			p *= v
		}
		return p
	}
	for _, v := range x {
		var ok bool
		if p, ok = mulSize(p, v); !ok {
			return math.MaxInt
		}
	}
	return p
}

// satAdd returns a+b for a, b >= 0, or math.MaxInt when the sum does not
// fit in an int.
func satAdd(a, b int) int {
	if s, ok := addSize(a, b); ok {
		return s
	}
	return math.MaxInt
}

// ceilDiv returns ⌈a/b⌉ for a >= 0 and b >= 1, without the overflow of
// (a+b−1)/b.
func ceilDiv(a, b int) int {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// rowCount returns Batch·Heads·Seq of l, the number of rows (and of
// log-sum-exps) of a tensor of that shape, and whether it fits in an int.
func rowCount(l Layout) (int, bool) {
	n, ok := mulSize(l.Batch, l.Heads)
	if ok {
		n, ok = mulSize(n, l.Seq)
	}
	return n, ok
}

// rowCountText is rowCount for error messages.
func rowCountText(l Layout) string {
	if n, ok := rowCount(l); ok {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d·%d·%d (more than an int can count)", l.Batch, l.Heads, l.Seq)
}
