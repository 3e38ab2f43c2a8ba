package kernel

import "math"

// Constants of the float32 exponential. x is split as n·ln2 + r with
// n = round(x·log2(e)) and |r| <= ln2/2; ln2 is subtracted in two pieces
// (Cody and Waite) so that r keeps its low bits: expLn2Hi has few enough
// significant bits that n·expLn2Hi is exact for every n that can occur.
const (
	expLog2e = 1.44269504088896341
	expLn2Hi = 0.693359375
	expLn2Lo = -2.12194440e-4
	// Below expMin the result is below the smallest normal float32; the
	// kernel returns exactly 0 there rather than a subnormal (the softmax
	// weight of such a key is zero to float32 precision relative to the
	// row maximum, whose weight is 1).
	expMin = -87.33654475 // ln(2^-126)
	// Above expMax the result overflows float32.
	expMax = 88.72283905 // ln(2^128)

	// Minimax coefficients for exp(r) ≈ 1 + r + r²·P(r) on |r| <= ln2/2.
	expP0 = 1.9875691500e-4
	expP1 = 1.3981999507e-3
	expP2 = 8.3334519073e-3
	expP3 = 4.1665795894e-2
	expP4 = 1.6666665459e-1
	expP5 = 5.0000001201e-1
)

// Exp is the float32 exponential that ExpSum applies to each element, and
// the specification of the vector versions:
//
//   - x < ln(2^-126) ≈ −87.3365, including −Inf, gives exactly 0;
//   - x > ln(2^128) ≈ 88.7228, including +Inf, gives +Inf;
//   - NaN gives NaN;
//   - otherwise the error is at most 2 ulp against math.Exp rounded to
//     float32 (a degree-7 polynomial on the reduced argument).
func Exp(x float32) float32 {
	switch {
	case x != x:
		return x
	case x < expMin:
		return 0
	case x > expMax:
		return float32(math.Inf(1))
	}
	n := float32(math.RoundToEven(float64(x * expLog2e)))
	r := x - n*expLn2Hi
	r -= n * expLn2Lo
	p := float32(expP0)
	p = p*r + expP1
	p = p*r + expP2
	p = p*r + expP3
	p = p*r + expP4
	p = p*r + expP5
	p = p*r*r + r + 1
	// 2^n for n in [-126, 128]: n = 128 only when x is within rounding of
	// expMax, so scale by 2^(n-1) twice to stay finite where p < 1.
	if n > 127 {
		return p * 2 * math.Float32frombits(uint32(int32(n)-1+127)<<23)
	}
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// Constants of the base-2 exponential of the fused bf16 softmax: a
// minimax fit of 2^f ≈ 1 + f·(C1 + f·(C2 + f·(C3 + f·(C4 + f·C5)))) on
// |f| <= 1/2, relative error 1.6·10⁻⁷ with float32 coefficients and FMA
// (about 3 ulp; the bf16 precision rounds the result to 2⁻⁹).
const (
	exp2C1  = 0x3f317215 // 6.9314700365e-01
	exp2C2  = 0x3e75fcde // 2.4022242427e-01
	exp2C3  = 0x3d635ba9 // 5.5507335812e-02
	exp2C4  = 0x3c1e7544 // 9.6715129912e-03
	exp2C5  = 0x3aaddd07 // 1.3264723821e-03
	exp2Min = -126       // below it 2^t is below the smallest normal float32
)

// exp2Softmax is the base-2 exponential of the fused bf16 softmax
// (softmaxBF16Base2), the specification of its vector version:
//
//   - t < −126, including −Inf, gives exactly 0;
//   - NaN gives NaN;
//   - otherwise n = roundToEven(t), f = t − n (exact), and the result is
//     (1 + f·(C1 + f·(…)))·2^n with each step an FMA, rounded once to
//     float32 (the arguments of the softmax are at most a few ulp above 0);
//     fma32 stands in for the FMA.
func exp2Softmax(t float32) float32 {
	switch {
	case t != t:
		return t
	case t < exp2Min:
		return 0
	}
	n := float32(math.RoundToEven(float64(t)))
	f := t - n
	p := math.Float32frombits(exp2C5)
	p = fma32(p, f, math.Float32frombits(exp2C4))
	p = fma32(p, f, math.Float32frombits(exp2C3))
	p = fma32(p, f, math.Float32frombits(exp2C2))
	p = fma32(p, f, math.Float32frombits(exp2C1))
	p = fma32(p, f, 1)
	return float32(math.Ldexp(float64(p), int(n)))
}
