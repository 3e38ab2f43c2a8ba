package attention_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/fp16"
)

// fuzzKV is a K or V input of FuzzForward: the engine tensor, its
// canonical values as the engine reads them, and a check that its buffers
// are unchanged.
type fuzzKV struct {
	t         attention.Tensor
	canon     []float32
	unchanged func() bool
}

// buildFuzzKV lays the canonical values x out as a tensor of element type
// dt in the layout kind, rounding x to what the engine will read. Q8 needs
// Dim and strides that are multiples of Q8Block (kind bhsd or bshd, Dim 32);
// its guard blocks have NaN scales.
func buildFuzzKV(dt attention.DType, kind layoutKind, b, h, s, d int, x []float32) fuzzKV {
	switch dt {
	case attention.F16:
		roundTo(dt, x)
		v := makeView(kind, b, h, s, d)
		buf := nanBuffer(v.size, fp16.FromFloat32(guard))
		scatter(v, buf, x, fp16.FromFloat32)
		c := append([]fp16.Float16(nil), buf...)
		return fuzzKV{attention.F16Tensor(buf[v.pre:], v.lay), x, func() bool { return equalSlices(buf, c) }}
	case attention.BF16:
		roundTo(dt, x)
		v := makeView(kind, b, h, s, d)
		buf := nanBuffer(v.size, fp16.BFloat16FromFloat32(guard))
		scatter(v, buf, x, fp16.BFloat16FromFloat32)
		c := append([]fp16.BFloat16(nil), buf...)
		return fuzzKV{attention.BF16Tensor(buf[v.pre:], v.lay), x, func() bool { return equalSlices(buf, c) }}
	case attention.Q8:
		v := makeView(kind, b, h, s, d)
		v.pre = attention.Q8Block
		v.size = v.pre + (v.lay.Span()+attention.Q8Block-1)/attention.Q8Block*attention.Q8Block + attention.Q8Block
		f := make([]float32, v.size)
		scatter(v, f, x, func(x float32) float32 { return x })
		data := make([]int8, v.size)
		scales := make([]float32, v.size/attention.Q8Block)
		if err := attention.QuantizeQ8(data, scales, f); err != nil {
			panic(err)
		}
		in := inView(v)
		for blk := range scales {
			if !in[blk*attention.Q8Block] {
				scales[blk] = guard
			}
		}
		if err := attention.DequantizeQ8(f, data, scales); err != nil {
			panic(err)
		}
		canon := gather(v, f)
		dc, sc := append([]int8(nil), data...), append([]float32(nil), scales...)
		t := attention.Q8Tensor(data[v.pre:], scales[v.pre/attention.Q8Block:], v.lay)
		return fuzzKV{t, canon, func() bool { return equalSlices(data, dc) && sameBits(scales, sc) }}
	}
	v := makeView(kind, b, h, s, d)
	buf := nanBuffer(v.size, guard)
	scatter(v, buf, x, func(x float32) float32 { return x })
	c := append([]float32(nil), buf...)
	return fuzzKV{attention.F32Tensor(buf[v.pre:], v.lay), x, func() bool { return sameBits(buf, c) }}
}

func equalSlices[T comparable](x, y []T) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

var (
	fuzzBlocks = []int{0, 1, 2, 3, 4, 5, 8, 16}
	fuzzScales = []float64{0, 0.125, 1, 4}
	fuzzCaps   = []float64{0.5, 1, 5, 30}
	fuzzKVType = []attention.DType{attention.F32, attention.F16, attention.BF16, attention.Q8}
)

// FuzzForward decodes the input into a small attention problem (batch 1–2,
// 1–3 K/V heads of 1–3 query heads each, head dim 1–40, 0–20 queries, 0–40
// keys, layouts BHSD, BSHD and padded strides, K and V in F32, F16, BF16 or
// Q8 (head dim 32), any mix of causal masking of either alignment, window,
// soft-cap, ALiBi, sinks, boolean and float masks, float32 or bfloat16
// precision, Forward or ForwardLSE, tiles of 1–16 rows and keys, 0–3
// KV splits), sometimes broken on purpose (a misuse). It checks that the
// engine never panics; that a misuse, and only a misuse, returns an error,
// writing nothing; that the inputs are never modified nor anything outside
// out and lse written; that Threads 1 and 3 give bitwise the same output;
// and that the output meets the project's pass rule against the float64
// oracle (checkRule, docs/math.md Section 5: at most twice the error of
// the naive baseline + 1e-6 + the float32 condition term E_κ; in bfloat16,
// where on a problem this small the naive baseline's luck decides, at
// least 2^-7·max|V|, a few bfloat16 roundings of the probabilities), and
// the lse within
// 1e-5·(1+ln(Nkv+1))·max(1, |lse|).
func FuzzForward(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x07\x04\x0a"))
	f.Add([]byte("causal..\x01\x01\x01\x1f\x10\x20\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x02\x01"))
	f.Add([]byte("features\x01\x02\x02\x0f\x05\x11\x02\x02\xff\x01\x05\x07\x03\x02\x01\x01\x01\x01\x01\x03\x04\x02"))
	f.Add([]byte("q8......\x00\x01\x00\x1f\x03\x27\x03\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x05\x01"))
	f.Add([]byte("bf16....\x01\x02\x01\x07\x0c\x1d\x01\x00\x81\x01\x00\x00\x00\x00\x00\x00\x00\x01\x01\x06\x00"))
	f.Add([]byte("misuse..\x01\x01\x01\x07\x03\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newFuzzReader(data)
		p := reference.Params{Batch: 1 + r.intn(2), HeadsKV: 1 + r.intn(3)}
		group := 1 + r.intn(3)
		p.HeadsQ = p.HeadsKV * group
		p.Dim = 1 + r.intn(40)
		p.SeqQ, p.SeqKV = r.intn(21), r.intn(41)
		kvType := fuzzKVType[r.intn(4)]
		kind := layoutKind(r.intn(3))
		if kvType == attention.Q8 {
			p.Dim = attention.Q8Block
			if kind == padded {
				kind = bshd
			}
		}
		flags := r.byte()
		p.Scale = fuzzScales[r.intn(len(fuzzScales))]
		if flags&1 != 0 {
			if r.bool() {
				p.CausalTopLeft = true
			} else {
				p.Causal = true
			}
		}
		if flags&2 != 0 {
			p.Window, p.WindowLeft, p.WindowRight = true, r.intn(p.SeqKV+3)-1, r.intn(p.SeqKV+3)-1
		}
		if flags&4 != 0 {
			p.SoftCap = fuzzCaps[r.intn(len(fuzzCaps))]
		}
		if flags&8 != 0 {
			p.Slopes = make([]float64, p.HeadsQ)
			for i := range p.Slopes {
				p.Slopes[i] = float64(float32(r.rng.Float64()))
			}
		}
		if flags&16 != 0 {
			p.Sinks = make([]float64, p.HeadsQ)
			for i := range p.Sinks {
				p.Sinks[i] = float64(float32(r.rng.NormFloat64() * 3))
				if r.intn(4) == 0 {
					p.Sinks[i] = math.Inf(-1)
				}
			}
		}
		broadcast := func() [4]int {
			s := [4]int{p.Batch, p.HeadsQ, p.SeqQ, p.SeqKV}
			for i := range 3 {
				if r.bool() {
					s[i] = 1
				}
			}
			return s
		}
		if flags&32 != 0 {
			p.BoolMaskShape = broadcast()
			s := p.BoolMaskShape
			p.BoolMask = make([]bool, s[0]*s[1]*s[2]*s[3])
			density := 1 + r.intn(4) // out of 4
			for i := range p.BoolMask {
				p.BoolMask[i] = r.rng.IntN(4) < density
			}
		}
		if flags&64 != 0 {
			p.MaskShape = broadcast()
			s := p.MaskShape
			p.Mask = make([]float64, s[0]*s[1]*s[2]*s[3])
			vals := []float64{0, -1, 0.5, math.Inf(-1), -3}
			for i := range p.Mask {
				p.Mask[i] = vals[r.rng.IntN(len(vals))]
			}
		}
		prec := attention.PrecisionFloat32
		if flags&128 != 0 {
			prec = attention.PrecisionBFloat16
		}
		useLSE := r.bool()
		cfg := attention.Config{BlockQ: fuzzBlocks[r.intn(len(fuzzBlocks))], BlockKV: fuzzBlocks[r.intn(len(fuzzBlocks))], KVSplits: r.intn(4)}
		qMag := float32(1 + r.intn(3))
		misuse := r.intn(12)
		if r.intn(4) == 0 && kvType != attention.Q8 {
			p.DimV = 1 + r.intn(9) // V and the output of another head dim (may equal Dim)
		}

		q := randn(r.rng, p.QLen())
		for i := range q {
			q[i] *= qMag
		}
		qv := makeView(kind, p.Batch, p.HeadsQ, p.SeqQ, p.Dim)
		qbuf := nanBuffer(qv.size, guard)
		scatter(qv, qbuf, q, func(x float32) float32 { return x })
		q0 := append([]float32(nil), qbuf...)
		qT := attention.F32Tensor(qbuf[qv.pre:], qv.lay)
		k := buildFuzzKV(kvType, kind, p.Batch, p.HeadsKV, p.SeqKV, p.Dim, randn(r.rng, p.KVLen()))
		v := buildFuzzKV(kvType, kind, p.Batch, p.HeadsKV, p.SeqKV, p.VDim(), randn(r.rng, p.VLen()))
		opts := optionsFor(p, attention.F32)
		opts.Precision = prec
		// With Q8 keys, half the float32 runs quantise the query too: the
		// oracle and the naive baseline then see the quantised queries.
		qq := q
		if kvType == attention.Q8 && prec == attention.PrecisionFloat32 && r.bool() {
			opts.QuantizeQuery = true
			qq = quantizeRows(t, q, p.Dim)
		}
		ov := makeView(kind, p.Batch, p.HeadsQ, p.SeqQ, p.VDim())
		outLay := ov.lay
		lseLen := p.LSELen()
		pr := &problem{p: p, kvType: kvType, kind: kind, q: qq, k: k.canon, v: v.canon, opts: opts}

		wantErr := true
		switch misuse {
		case 1:
			opts.Window = &attention.Window{Left: -2, Right: 0}
		case 2:
			opts.Scale = float32(math.NaN())
		case 3:
			opts.Slopes = make([]float32, p.HeadsQ+1)
		case 4:
			opts.SoftCap = -1
		case 5:
			outLay.Dim++
		case 6:
			if lseLen == 0 || !useLSE {
				wantErr = false
				break
			}
			lseLen--
		case 7:
			opts.Sinks = make([]float32, p.HeadsQ)
			opts.Sinks[0] = float32(math.Inf(1))
		case 8:
			cfg.BlockQ = attention.MaxBlockQ + 1
		default:
			wantErr = false
		}
		obufSize := ov.pre + outLay.Span() + 13
		run := func(threads int) ([]float32, []float32, error) {
			c := cfg
			c.Threads = threads
			obuf := nanBuffer(obufSize, outGuard)
			lsebuf := nanBuffer(p.LSELen()+2, outGuard)
			e, err := attention.NewEngine(c)
			if err == nil {
				out := attention.F32Tensor(obuf[ov.pre:], outLay)
				if useLSE {
					err = e.ForwardLSE(out, lsebuf[1:1+lseLen], qT, k.t, v.t, opts)
				} else {
					err = e.Forward(out, qT, k.t, v.t, opts)
				}
			}
			if !sameBits(qbuf, q0) || !k.unchanged() || !v.unchanged() {
				t.Fatalf("%v: inputs modified (err %v)", pr, err)
			}
			return obuf, lsebuf, err
		}
		obuf, lsebuf, err := run(1)
		if wantErr || err != nil {
			if !wantErr {
				t.Fatalf("%v prec %v lse %v cfg %+v: %v", pr, prec, useLSE, cfg, err)
			}
			if err == nil {
				t.Fatalf("%v misuse %d: no error", pr, misuse)
			}
			for i, x := range obuf {
				if x != outGuard {
					t.Fatalf("%v misuse %d (%v): output element %d written", pr, misuse, err, i)
				}
			}
			for i, x := range lsebuf {
				if x != outGuard {
					t.Fatalf("%v misuse %d (%v): lse element %d written", pr, misuse, err, i)
				}
			}
			return
		}
		in := inView(ov)
		for i, x := range obuf {
			if !in[i] && x != outGuard {
				t.Fatalf("%v: output buffer element %d outside the view written", pr, i)
			}
		}
		if lsebuf[0] != outGuard || lsebuf[lseLen+1] != outGuard || (!useLSE && lseLen > 0 && lsebuf[1] != outGuard) {
			t.Fatalf("%v: wrote outside lse", pr)
		}
		obuf3, lsebuf3, err := run(3)
		if err != nil {
			t.Fatalf("%v: Threads 3: %v", pr, err)
		}
		if !sameBits(obuf, obuf3) || !sameBits(lsebuf, lsebuf3) {
			t.Fatalf("%v prec %v cfg %+v: Threads 1 and 3 differ", pr, prec, cfg)
		}

		got := gather(ov, obuf)
		want, wantLSE, err := reference.Attention(p, reference.Float64s(qq), reference.Float64s(k.canon), reference.Float64s(v.canon))
		if err != nil {
			t.Fatalf("%v: oracle: %v", pr, err)
		}
		errs := reference.Compare(got, want)
		naive := pr.naiveError(t, want)
		what := fmt.Sprintf("%v prec %v quantize query %v cfg %+v scale %v qmag %v", pr, prec, opts.QuantizeQuery, cfg, p.Scale, qMag)
		if prec == attention.PrecisionBFloat16 {
			var vmax float64
			for _, x := range v.canon {
				vmax = math.Max(vmax, math.Abs(float64(x)))
			}
			if tol := max(2*naive.MaxAbs+1e-6, 0x1p-7*vmax); errs.MaxAbs > tol {
				t.Fatalf("%s: max abs error %.3g exceeds %.3g (naive %.3g)", what, errs.MaxAbs, tol, naive.MaxAbs)
			}
		} else {
			checkRule(t, what, errs, naive, func() float64 { return pr.logitCondition(t) })
			if t.Failed() {
				return
			}
		}
		if !useLSE {
			return
		}
		if prec == attention.PrecisionBFloat16 {
			_, wantLSE = pr.oracleBF16QK(t)
		}
		lseTol := 1e-5 * (1 + math.Log(float64(p.SeqKV+1)))
		for i, w := range wantLSE {
			g := float64(lsebuf[1+i])
			if math.IsInf(w, 0) || math.IsNaN(w) {
				if !sameValue(float32(g), float32(w)) {
					t.Fatalf("%s: lse[%d] = %v, want %v", what, i, g, w)
				}
				continue
			}
			if d := math.Abs(g - w); !(d <= lseTol*math.Max(1, math.Abs(w))) {
				t.Fatalf("%s: lse[%d] = %v, want %v", what, i, g, w)
			}
		}
	})
}
