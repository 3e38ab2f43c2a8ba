//go:build amd64 && !purego

package kernel

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/internal/tier"
	"github.com/flashgo/flashgo/kernel/internal/x86"
)

// The AVX512-BF16 kernels (x86.QktBF16AVX512, x86.PvBF16AVX512) are called
// directly, whatever implementation is active, and compared bit for bit
// with a Go model of VDPBF16PS that adds the pairs in the kernels' order:
// pair t = 0, 1, … into one float32 accumulator, each pair as the
// instruction adds it. Every block sits inside a NaN-filled buffer, with
// NaN in the gaps of its leading dimension and in guards on both sides: an
// element read from outside its block makes a NaN reach the result, and
// one written outside its block replaces a NaN. (A read that only fills a
// lane no result uses stays invisible here.)

// vdpOddFirst is the order in which VDPBF16PS adds the two products of a
// pair to its accumulator: the SDM's pseudo-code adds the odd element's
// product (2i+1) first, then the even one's, each rounded to float32.
// TestVDPBF16PSOrder checks it on the machine.
const vdpOddFirst = true

// ftz flushes a subnormal result to a zero of the same sign, as VDPBF16PS
// does.
func ftz(x float32) float32 {
	if math.Float32bits(x)&0x7f800000 == 0 {
		return math.Float32frombits(math.Float32bits(x) & 0x80000000)
	}
	return x
}

// vdpPair returns acc plus the products of the pairs (a0, a1) and (b0, b1)
// as VDPBF16PS adds them, in the order given. The products of two
// bfloat16 are exact in float32 (away from underflow), so each step is one
// float32 rounding.
func vdpPair(acc float32, a0, a1, b0, b1 fp16.BFloat16, oddFirst bool) float32 {
	even, odd := bf16Value(a0)*bf16Value(b0), bf16Value(a1)*bf16Value(b1)
	if oddFirst {
		return ftz(ftz(acc+odd) + even)
	}
	return ftz(ftz(acc+even) + odd)
}

func qktBF16Model(s []float32, ldS int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, rows, cols, d int, scale float32, oddFirst bool) {
	for i := range rows {
		for j := range cols {
			var acc float32
			for t := range d / 2 {
				acc = vdpPair(acc, q[i*ldQ+2*t], q[i*ldQ+2*t+1], kp[t*ldK+2*j], kp[t*ldK+2*j+1], oddFirst)
			}
			s[i*ldS+j] = scale * acc
		}
	}
}

func pvBF16Model(o []float32, ldO int, p []fp16.BFloat16, ldP int, vp []fp16.BFloat16, ldV int, rows, cols, d int, oddFirst bool) {
	for i := range rows {
		for c := range d {
			acc := o[i*ldO+c]
			for t := range cols / 2 {
				acc = vdpPair(acc, p[i*ldP+2*t], p[i*ldP+2*t+1], vp[t*ldV+2*c], vp[t*ldV+2*c+1], oddFirst)
			}
			o[i*ldO+c] = acc
		}
	}
}

// bf16Pool is a pool of random bfloat16 the tests copy their operands
// from: drawing every element afresh would dominate the time of the
// thousands of shapes.
type bf16Pool struct {
	rng  *rand.Rand
	vals []fp16.BFloat16
}

func newBF16Pool(seed uint64, scale float64) *bf16Pool {
	rng := rand.New(rand.NewPCG(seed, seed))
	return &bf16Pool{rng: rng, vals: randnBF16(rng, 1<<16, scale)}
}

// fill writes n random elements into each of rows rows ld apart.
func (p *bf16Pool) fill(x []fp16.BFloat16, ld, rows, n int) {
	for i := range rows {
		off := p.rng.IntN(len(p.vals) - n)
		copy(x[i*ld:][:n], p.vals[off:])
	}
}

// bf16ShapeDims are the reduction lengths of TestBF16AVX512Shapes: every
// even length up to 130 in the long tier, in the fast tier those around
// the 4-pair unroll and the lengths of the engine.
func bf16ShapeDims() []int {
	var ds []int
	for d := 2; d <= 130; d += 2 {
		if tier.Long() || d <= 16 || d%32 <= 2 || d%32 == 30 {
			ds = append(ds, d)
		}
	}
	return ds
}

// TestBF16AVX512Shapes runs both kernels on every tail shape of the
// register blocks (rows 1–13: two 6-row blocks and every row tail; columns
// 1–70: every masked and whole vector count and a second column block) and
// every even reduction length up to 130, and requires them to equal the
// model bit for bit and to touch nothing outside their blocks.
func TestBF16AVX512Shapes(t *testing.T) {
	setImpl(t, AVX512BF16)
	pool := newBF16Pool(11, 1)
	probs := newBF16Pool(12, 0.05)
	for rows := 1; rows <= 13; rows++ {
		for n := 1; n <= 70; n++ {
			for _, k := range bf16ShapeDims() {
				testQKTBF16AVX512(t, pool, rows, n, k)
				testPVBF16AVX512(t, pool, probs, rows, k, n)
			}
		}
	}
}

func testQKTBF16AVX512(t *testing.T, pool *bf16Pool, rows, cols, d int) {
	ldS, ldQ, ldK := cols+3, d+2, 2*cols+2
	sBuf, s := guarded((rows-1)*ldS + cols)
	_, q := guardedBF16((rows-1)*ldQ + d)
	_, kp := guardedBF16((d/2-1)*ldK + 2*cols)
	pool.fill(q, ldQ, rows, d)
	pool.fill(kp, ldK, d/2, 2*cols)
	const scale = 0.3
	x86.QktBF16AVX512(&s[0], ldS, (*uint16)(&q[0]), ldQ, (*uint16)(&kp[0]), ldK, rows, cols, d, scale)
	checkOutside(t, sBuf, ldS, rows, cols, "x86.QktBF16AVX512")
	want := make([]float32, len(s))
	qktBF16Model(want, ldS, q, ldQ, kp, ldK, rows, cols, d, scale, vdpOddFirst)
	for i := range rows {
		for j := range cols {
			if g, w := s[i*ldS+j], want[i*ldS+j]; math.Float32bits(g) != math.Float32bits(w) {
				t.Fatalf("x86.QktBF16AVX512 rows %d cols %d d %d: s[%d,%d] = %v, want %v", rows, cols, d, i, j, g, w)
			}
		}
	}
}

func testPVBF16AVX512(t *testing.T, pool, probs *bf16Pool, rows, cols, d int) {
	ldO, ldP, ldV := d+1, cols+2, 2*d+2
	oBuf, o := guarded((rows-1)*ldO + d)
	_, p := guardedBF16((rows-1)*ldP + cols)
	_, vp := guardedBF16((cols/2-1)*ldV + 2*d)
	for i := range rows {
		for c := range d {
			o[i*ldO+c] = bf16Value(pool.vals[pool.rng.IntN(len(pool.vals))]) + 0.5
		}
	}
	probs.fill(p, ldP, rows, cols)
	pool.fill(vp, ldV, cols/2, 2*d)
	want := append([]float32(nil), o...)
	x86.PvBF16AVX512(&o[0], ldO, (*uint16)(&p[0]), ldP, (*uint16)(&vp[0]), ldV, rows, cols, d)
	checkOutside(t, oBuf, ldO, rows, d, "x86.PvBF16AVX512")
	pvBF16Model(want, ldO, p, ldP, vp, ldV, rows, cols, d, vdpOddFirst)
	for i := range rows {
		for c := range d {
			if g, w := o[i*ldO+c], want[i*ldO+c]; math.Float32bits(g) != math.Float32bits(w) {
				t.Fatalf("x86.PvBF16AVX512 rows %d cols %d d %d: o[%d,%d] = %v, want %v", rows, cols, d, i, c, g, w)
			}
		}
	}
}

// TestVDPBF16PSOrder finds the order in which VDPBF16PS adds the two
// products of a pair, on operands where the orders give different sums:
// 1 + 2⁻²⁴ − 2⁻²⁴ is 1 − 2⁻²⁴ when the even product (+2⁻²⁴, lost to the
// tie to even) comes first and 1 when the odd one (−2⁻²⁴) does; and
// 1 + 2⁻²⁴ + 2⁻²⁵ is 1 + 2⁻²³ only if both products are added with one
// rounding.
func TestVDPBF16PSOrder(t *testing.T) {
	setImpl(t, AVX512BF16)
	b := func(x float32) fp16.BFloat16 { return RoundBF16(x) }
	run := func(a0, a1, b0, b1 float32) float32 {
		o := []float32{1}
		p := []fp16.BFloat16{b(a0), b(a1)}
		vp := []fp16.BFloat16{b(b0), b(b1)}
		x86.PvBF16AVX512(&o[0], 1, (*uint16)(&p[0]), 2, (*uint16)(&vp[0]), 2, 1, 2, 1)
		return o[0]
	}
	const e12, e13 = 0x1p-12, 0x1p-13
	order := run(e12, -e12, e12, e12) // even +2⁻²⁴, odd −2⁻²⁴
	single := run(e12, e12, e12, e13) // 2⁻²⁴ and 2⁻²⁵
	t.Logf("1 + 2⁻²⁴ − 2⁻²⁴ = 1 %+g; 1 + 2⁻²⁴ + 2⁻²⁵ = 1 %+g", order-1, single-1)
	if single != 1 {
		t.Fatalf("VDPBF16PS adds a pair's products with one rounding (1 + 2⁻²⁴ + 2⁻²⁵ = 1 %+g); the model rounds twice", single-1)
	}
	oddFirst := order == 1
	if oddFirst != vdpOddFirst {
		t.Fatalf("VDPBF16PS adds the odd product first: %v; the model assumes %v", oddFirst, vdpOddFirst)
	}
	// The model agrees on the same operands.
	bf := [4]fp16.BFloat16{b(e12), b(-e12), b(e12), b(e12)}
	if m := vdpPair(1, bf[0], bf[1], bf[2], bf[3], vdpOddFirst); m != order {
		t.Fatalf("model gives 1 %+g, the instruction 1 %+g", m-1, order-1)
	}
}

// TestBF16AVX512Dispatch checks that the avx512bf16 implementation, where
// the machine has it, runs these kernels through QKTBF16 and PVBF16 (the
// others run them directly, under it: setImpl, which skips them where the
// machine lacks it).
func TestBF16AVX512Dispatch(t *testing.T) {
	setImpl(t, AVX512BF16)
	if got := BF16Implementation(); got != AVX512BF16 {
		t.Fatalf("BF16Implementation() = %q; want %q", got, AVX512BF16)
	}
	pool := newBF16Pool(13, 1)
	const rows, cols, d = 7, 37, 34
	q, kp := make([]fp16.BFloat16, rows*d), make([]fp16.BFloat16, d*cols)
	pool.fill(q, d, rows, d)
	pool.fill(kp, 2*cols, d/2, 2*cols)
	s, want := make([]float32, rows*cols), make([]float32, rows*cols)
	if err := QKTBF16(s, cols, q, d, kp, 2*cols, rows, cols, d, 0.5); err != nil {
		t.Fatal(err)
	}
	x86.QktBF16AVX512(&want[0], cols, (*uint16)(&q[0]), d, (*uint16)(&kp[0]), 2*cols, rows, cols, d, 0.5)
	for i := range s {
		if math.Float32bits(s[i]) != math.Float32bits(want[i]) {
			t.Fatalf("QKTBF16 element %d = %v; x86.QktBF16AVX512 gives %v", i, s[i], want[i])
		}
	}
	// The same operands as PV's: p = q (7 rows of 34 keys), vp = kp (17
	// pairs of keys × 37 columns).
	o, wantO := make([]float32, rows*cols), make([]float32, rows*cols)
	if err := PVBF16(o, cols, q, d, kp, 2*cols, rows, d, cols); err != nil {
		t.Fatal(err)
	}
	x86.PvBF16AVX512(&wantO[0], cols, (*uint16)(&q[0]), d, (*uint16)(&kp[0]), 2*cols, rows, d, cols)
	for i := range o {
		if math.Float32bits(o[i]) != math.Float32bits(wantO[i]) {
			t.Fatalf("PVBF16 element %d = %v; x86.PvBF16AVX512 gives %v", i, o[i], wantO[i])
		}
	}
}

// BenchmarkVDPBF16PSPeak measures the rate of independent VDPBF16PS, the
// ceiling of the AVX512-BF16 kernels (BenchmarkFMAPeak/avx512 is the
// float32 FMA's).
func BenchmarkVDPBF16PSPeak(b *testing.B) {
	setImpl(b, AVX512BF16)
	const iters = 1000
	for b.Loop() {
		x86.Vdpbf16psPeakAVX512(iters)
	}
	b.ReportMetric(float64(b.N)*iters*bf16PeakFlopsAVX512/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
