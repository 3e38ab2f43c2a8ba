package kernel

import "math"

// Constants of the float32 hyperbolic tangent. Below tanhSplit, tanh(a) is
// a + a³·P(a²) with P a degree-5 polynomial fitted to (tanh(a) − a)/a³ on
// [0, 0.625] (weighted least squares for the relative error of tanh);
// above it, 1 − 2/(e^{2a}+1) with the float32 exponential Exp, which loses
// nothing to cancellation there.
const (
	tanhSplit = 0.625

	tanhC0 = -0.33333331010377593
	tanhC1 = 0.13333212501733507
	tanhC2 = -0.053947454169667799
	tanhC3 = 0.021704000400234427
	tanhC4 = -0.0081846616708225253
	tanhC5 = 0.0021489841078801922
)

// Tanh is the float32 hyperbolic tangent that SoftCap applies to each
// element, and the specification of the vector versions:
//
//	a := |x|
//	if a < 0.625 {
//		t = a + a³·P(a²)        // fused multiply-adds, P by Horner's rule
//	} else {
//		t = 1 − 2/(Exp(min(2a, 20)) + 1)
//	}
//	return t with the sign of x
//
// It is within 1 ulp of math.Tanh rounded to float32 for every finite x
// (TestTanh checks every float32 with FLASHGO_TEST_EXHAUSTIVE=1); ±Inf give ±1, ±0 give ±0 and NaN
// gives NaN. The vector kernels take the same steps and agree with it to
// within an ulp (a multiply-add rounded once in hardware may differ from
// math.FMA's float64 result rounded to float32).
func Tanh(x float32) float32 {
	a := math.Float32frombits(math.Float32bits(x) &^ (1 << 31))
	var t float32
	if a < tanhSplit {
		s := a * a
		p := float32(tanhC5)
		p = fma32(p, s, tanhC4)
		p = fma32(p, s, tanhC3)
		p = fma32(p, s, tanhC2)
		p = fma32(p, s, tanhC1)
		p = fma32(p, s, tanhC0)
		t = fma32(a*s, p, a)
	} else {
		// NaN lands here and stays NaN. From a = 10 on the result rounds
		// to 1, so the exponential's argument stops at 20.
		t = 1 - 2/(Exp(min(a+a, 20))+1)
	}
	return math.Float32frombits(math.Float32bits(t) | math.Float32bits(x)&(1<<31))
}

// fma32 is x·y + z rounded once to float64 and then to float32, the
// portable stand-in for a float32 fused multiply-add.
func fma32(x, y, z float32) float32 {
	return float32(math.FMA(float64(x), float64(y), float64(z)))
}
