package asmkit

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The float32 exponential of the softmax kernels, shared by every
// generator that takes it (vec's ExpSum, fused's tile fold) so that they
// compute the same bits: a kernel that folds a tile in one call must give
// what the chain of ExpSum calls gives.
//
// The constants of kernel/exp.go, spelled the same way so that float32()
// rounds them to the same values the scalar Exp uses.
const (
	ExpLog2e = 1.44269504088896341
	ExpLn2Hi = 0.693359375
	ExpLn2Lo = -2.12194440e-4
	ExpMin   = -87.33654475
	ExpMax   = 88.72283905

	ExpP0 = 1.9875691500e-4
	ExpP1 = 1.3981999507e-3
	ExpP2 = 8.3334519073e-3
	ExpP3 = 4.1665795894e-2
	ExpP4 = 1.6666665459e-1
	ExpP5 = 5.0000001201e-1

	// ExpClamp bounds the argument from above before the reduction. Every
	// x in (ExpMax, ExpClamp] overflows to +Inf on its own (n = 128 and
	// p > 1), and the clamp keeps +Inf and huge arguments from turning into
	// Inf − Inf = NaN in the reduction. VMINPS returns its second source
	// operand when one is NaN, which is how a NaN argument gets through.
	ExpClamp = 89.0
)

// F32Bits is the bit pattern of x rounded to float32, as a DATA value.
func F32Bits(x float64) operand.U32 { return operand.U32(math.Float32bits(float32(x))) }

// ExpConsts are the memory operands of the exponential's constants, each a
// float32 that the kernel broadcasts: where they lie is the generator's
// (every .s file has its own tables).
type ExpConsts struct {
	Log2e, Ln2Hi, Ln2Lo, One, Min, Clamp operand.Mem
	P                                    [6]operand.Mem // P0..P5
}

// The vector exponential follows kernel/exp.go step by step:
//
//	n = roundToEven(x·log2e)          (x·log2e rounded to float32 first)
//	r = x − n·ln2Hi − n·ln2Lo          (FMA; n·ln2Hi is exact)
//	p = ((((P0·r+P1)·r+P2)·r+P3)·r+P4)·r+P5   (FMA)
//	y = (p·r)·r + r + 1
//	result = y·2^n
//
// and the special cases are handled with masks rather than branches:
// arguments below expMin (−Inf included) give exactly 0 through a "not less
// than expMin" mask that is true for NaN; arguments are clamped to
// expClamp from above, which keeps +Inf out of the reduction while still
// overflowing to +Inf; and a NaN argument flows through every operation
// unchanged (it is the only NaN in each lane's computation, so every
// operation returns it), so the result is the NaN x − max itself.

// Exp512 holds the zmm constants of the AVX-512 exponential of v − Max.
type Exp512 struct {
	// Max is the register the argument's subtrahend is broadcast in; a
	// kernel may change its value between calls of Exp.
	Max                            VecVirtual
	log2e, hi, lo, one, min, clamp VecVirtual
	p                              [6]VecVirtual

	// nonPositive says every argument v − Max is <= 0 or NaN (v is never
	// above Max, as in a softmax over the row maximum): the clamp, which
	// only matters above expMax, is left out, with the same results.
	nonPositive bool
}

// NewExp512 broadcasts the constants c of the exponential of v − max; with
// nonPositive the arguments are <= 0 or NaN and the clamp is left out.
func NewExp512(max VecVirtual, c ExpConsts, nonPositive bool) *Exp512 {
	e := &Exp512{Max: max, nonPositive: nonPositive}
	bcast := func(m operand.Mem) VecVirtual {
		z := ZMM()
		VBROADCASTSS(m, z)
		return z
	}
	e.log2e = bcast(c.Log2e)
	e.hi = bcast(c.Ln2Hi)
	e.lo = bcast(c.Ln2Lo)
	for i := range e.p {
		e.p[i] = bcast(c.P[i])
	}
	e.one = bcast(c.One)
	e.min = bcast(c.Min)
	if !nonPositive {
		e.clamp = bcast(c.Clamp)
	}
	return e
}

// One is the register that holds 1 in every lane.
func (e *Exp512) One() VecVirtual { return e.one }

// Exp computes Exp(v − Max) into a new register. Lanes outside the opmask
// tail (when not nil) come out 0.
func (e *Exp512) Exp(v VecVirtual, tail Register) VecVirtual {
	x := ZMM()
	VSUBPS(e.Max, v, x)
	keep := K()
	if tail != nil {
		VCMPPS(operand.U8(5), e.min, x, tail, keep) // !(x < min), NaN included, in tail
	} else {
		VCMPPS(operand.U8(5), e.min, x, keep)
	}
	if !e.nonPositive {
		VMINPS(x, e.clamp, x) // min(clamp, x); NaN x stays x
	}
	n := ZMM()
	VMULPS(e.log2e, x, n)
	VRNDSCALEPS(operand.U8(0), n, n) // round to nearest even
	VFNMADD231PS(e.hi, n, x)         // r = x − n·hi
	VFNMADD231PS(e.lo, n, x)         // r −= n·lo
	p := ZMM()
	VMOVAPS(e.p[0], p)
	for i := 1; i < 6; i++ {
		VFMADD213PS(e.p[i], x, p) // p = p·r + Pi
	}
	VMULPS(x, p, p)            // p·r
	VFMADD213PS(x, x, p)       // (p·r)·r + r
	VADDPS(e.one, p, p)        // + 1
	VSCALEFPS_Z(n, p, keep, p) // ·2^n, 0 where x < expMin
	return p
}

// HSum512 adds the 16 lanes of z into the low lane of the returned xmm,
// using only EVEX-encodable instructions. The order of the additions,
// which a kernel that must give ExpSum's bits repeats, is a tree: lane i
// plus lane i+8, then i+4, then i+2, then i+1.
func HSum512(z VecVirtual) Register {
	y := ZMM()
	VEXTRACTF64X4(operand.U8(1), z, y.AsY())
	VADDPS(y.AsY(), z.AsY(), y.AsY())
	x := ZMM()
	VEXTRACTF32X4(operand.U8(1), y.AsY(), x.AsX())
	VADDPS(x.AsX(), y.AsX(), x.AsX())
	t := ZMM()
	VPERMILPS(operand.U8(0x4e), x.AsX(), t.AsX())
	VADDPS(t.AsX(), x.AsX(), x.AsX())
	VPERMILPS(operand.U8(0xb1), x.AsX(), t.AsX())
	VADDPS(t.AsX(), x.AsX(), x.AsX())
	return x.AsX()
}
