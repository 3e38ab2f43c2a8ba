package attention_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/flashgo/flashgo/attention"
	"github.com/flashgo/flashgo/attention/reference"
	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/internal/impltest"
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
		buf := impltest.Filled(v.size, fp16.FromFloat32(guard))
		scatter(v, buf, x, fp16.FromFloat32)
		c := append([]fp16.Float16(nil), buf...)
		return fuzzKV{attention.F16Tensor(buf[v.pre:], v.lay), x, func() bool { return equalSlices(buf, c) }}
	case attention.BF16:
		roundTo(dt, x)
		v := makeView(kind, b, h, s, d)
		buf := impltest.Filled(v.size, fp16.BFloat16FromFloat32(guard))
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
	case attention.FP8E4M3, attention.FP8E5M2:
		// Per-head scales; the canonical values are the fp8 values times
		// them, and the guards NaN codes.
		sc := fp8Scales(h)
		roundFP8Heads(dt, x, sc, s, d)
		codes := make([]float32, len(x))
		for i, v := range x {
			codes[i] = v / sc[i/(s*d)%h]
		}
		v := makeView(kind, b, h, s, d)
		sc0 := append([]float32(nil), sc...)
		if dt == attention.FP8E4M3 {
			buf := impltest.Filled(v.size, fp16.Float8E4M3(0x7f))
			scatter(v, buf, codes, fp16.Float8E4M3FromFloat32)
			c := append([]fp16.Float8E4M3(nil), buf...)
			return fuzzKV{attention.FP8E4M3Tensor(buf[v.pre:], sc, v.lay), x, func() bool { return equalSlices(buf, c) && sameBits(sc, sc0) }}
		}
		buf := impltest.Filled(v.size, fp16.Float8E5M2(0x7e))
		scatter(v, buf, codes, fp16.Float8E5M2FromFloat32)
		c := append([]fp16.Float8E5M2(nil), buf...)
		return fuzzKV{attention.FP8E5M2Tensor(buf[v.pre:], sc, v.lay), x, func() bool { return equalSlices(buf, c) && sameBits(sc, sc0) }}
	}
	v := makeView(kind, b, h, s, d)
	buf := impltest.Filled(v.size, guard)
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
	fuzzKVType = []attention.DType{attention.F32, attention.F16, attention.BF16, attention.Q8, attention.FP8E4M3, attention.FP8E5M2}
)

// FuzzForward decodes the input into a small attention problem (batch 1–2,
// 1–3 K/V heads of 1–3 query heads each, head dim 1–40, 0–20 queries, 0–40
// keys, layouts BHSD, BSHD and padded strides, K and V in F32, F16, BF16,
// Q8 (head dim 32) or fp8 (per-head scales), any mix of causal masking of either alignment, window,
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
// 1e-5·(1+ln(Nkv+1))·max(1, |lse|). The rest of the input draws a hostile
// call of the same problem (forwardHostile): out and lse on q, k, v, their
// Q8 scales, the masks, slopes, sinks or variable-length offsets, on each
// other or next to one, and a dimension or stride of q, out, k or v 0 or
// negative, which must fail, writing nothing, or succeed with the bits of
// the same call on plain copies.
func FuzzForward(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x07\x04\x0a"))
	f.Add([]byte("causal..\x01\x01\x01\x1f\x10\x20\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x02\x01"))
	f.Add([]byte("features\x01\x02\x02\x0f\x05\x11\x02\x02\xff\x01\x05\x07\x03\x02\x01\x01\x01\x01\x01\x03\x04\x02"))
	f.Add([]byte("q8......\x00\x01\x00\x1f\x03\x27\x03\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x05\x01"))
	f.Add([]byte("bf16....\x01\x02\x01\x07\x0c\x1d\x01\x00\x81\x01\x00\x00\x00\x00\x00\x00\x00\x01\x01\x06\x00"))
	f.Add([]byte("misuse..\x01\x01\x01\x07\x03\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01"))
	// Hostile calls (forwardHostile): the problem of 1 head of dim 8, 3
	// queries and 5 keys, ForwardLSE, then the plan.
	hostile := func(plan string) []byte {
		return []byte("hostile." + "\x00\x00\x00\x07\x03\x05\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x01" + plan)
	}
	f.Add(hostile("\x01\x00\x00"))                                 // out on q
	f.Add(hostile("\x00\x00\x00\x02\x01\x80"))                     // lse inside k
	f.Add(hostile("\x00\x00\x00\x04\x00\x00"))                     // lse on out
	f.Add(hostile("\x03\x05\x00\x00\x00\x00\x00\x00\x00\x01"))     // out just after v: a near miss
	f.Add(hostile("\x04\x04\x00\x04\x05\x00\x00\x00\x00\x01"))     // out just before the lse, lse just after out
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x01\x03\x00"))         // q head dim 0
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x03\x06\x00"))         // k SeqStride 0
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x01\x06\x00"))         // q SeqStride 0: one query repeated
	f.Add(hostile("\x00\x00\x00\x00\x00\x00\x02\x05\x02"))         // out HeadStride -1
	f.Add(hostile("\x01\x00\x00\x00\x00\x00\x01\x07\x00\x01"))     // batch 0 everywhere, out on q
	f.Add(hostile("\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03")) // two sequences, out on CuSeqQ
	// Q8 keys of head dim 32: out inside k's scales.
	f.Add([]byte("hostilq8\x00\x01\x00\x1f\x03\x27\x03\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x03\x01\x40"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newFuzzReader(data)
		p := reference.Params{Batch: 1 + r.intn(2), HeadsKV: 1 + r.intn(3)}
		group := 1 + r.intn(3)
		p.HeadsQ = p.HeadsKV * group
		p.Dim = 1 + r.intn(40)
		p.SeqQ, p.SeqKV = r.intn(21), r.intn(41)
		kvType := fuzzKVType[r.intn(len(fuzzKVType))]
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
		qbuf := impltest.Filled(qv.size, guard)
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
		forwardHostile(t, r, cfg, wantErr, useLSE, qT, k.t, v.t, opts, outLay, lseLen)
		obufSize := ov.pre + outLay.Span() + 13
		run := func(threads int) ([]float32, []float32, error) {
			c := cfg
			c.Threads = threads
			obuf := impltest.Filled(obufSize, outGuard)
			lsebuf := impltest.Filled(p.LSELen()+2, outGuard)
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
			eb := func() float64 {
				e, err := reference.WeightCondition(p, reference.Float64s(qq), reference.Float64s(k.canon), reference.Float64s(v.canon))
				if err != nil {
					t.Fatalf("%v: %v", pr, err)
				}
				return e
			}
			if msg := bf16RuleBreak(errs, naive, eb); msg != "" {
				t.Fatalf("%s: %s", what, msg)
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
		if computedInBF16(prec, p) {
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

// forwardHostile makes FuzzForward's hostile call (see fzPlan): the call
// just drawn (wantErr: a misuse), as a variable-length batch of one or two
// sequences if the flags say so, over copies of q, k, v and the options'
// slices and masks in an arena, with out and lse placed on any of them, on
// each other or next to one, and one of q, out, k or v with a dimension or
// stride changed to 0 or a negative number (or, with field 7, the batch 0
// everywhere). A call that must fail must change nothing; one that may
// succeed must write only its outputs, with the bits of the same call
// over plain copies (where a zero stride repeats elements, copies that
// hold them repeated).
func forwardHostile(t *testing.T, r *fuzzReader, cfg attention.Config, wantErr, useLSE bool,
	q, k, v attention.Tensor, opts attention.Options, outLay attention.Layout, lseLen int) {
	plan := readFzPlan(r)
	if !plan.on() {
		return
	}
	cfg.Threads = 1
	e, err := attention.NewEngine(cfg)
	if err != nil {
		return // the misuse is the configuration
	}
	// flags bit 0: a variable-length batch of one sequence (bit 1: of
	// two), which reads CuSeqQ and CuSeqKV.
	if plan.flags&1 != 0 && q.Batch == 1 {
		opts.CuSeqQ, opts.CuSeqKV = []int{0, q.Seq}, []int{0, k.Seq}
		if plan.flags&2 != 0 {
			opts.CuSeqQ, opts.CuSeqKV = []int{0, q.Seq / 2, q.Seq}, []int{0, k.Seq / 2, k.Seq}
		}
	}
	outN := outLay.Span()
	pad := max(outN, lseLen) + 16
	var sizes []int
	for _, x := range []attention.Tensor{q, k, v, opts.Mask} {
		sizes = append(sizes, fzTensorSize(x)...)
	}
	sizes = append(sizes, len(opts.BoolMask.Data), 4*len(opts.Slopes), 4*len(opts.Sinks), 8*len(opts.CuSeqQ), 8*len(opts.CuSeqKV), 4*outN, 4*lseLen)
	a := newFzArena(pad, plan.gap(pad), sizes...)
	qA, kA, vA := fzTensorTo(a, q), fzTensorTo(a, k), fzTensorTo(a, v)
	o := opts
	o.Mask = fzTensorTo(a, opts.Mask)
	o.BoolMask.Data = fzCopy(a, opts.BoolMask.Data)
	o.Slopes, o.Sinks = fzCopy(a, opts.Slopes), fzCopy(a, opts.Sinks)
	o.CuSeqQ, o.CuSeqKV = fzCopy(a, opts.CuSeqQ), fzCopy(a, opts.CuSeqKV)
	outHome := a.floats(outN, outGuard)
	var lseHome []float32
	if useLSE {
		lseHome = a.floats(lseLen, outGuard)
	}
	room := a.bytes()

	// (b) A dimension or stride of q, out, k or v.
	hl := outLay
	change, empty, dims := fzNone, false, ""
	if plan.dimsSel != 0 {
		names := []string{"q", "out", "k", "v"}
		ls := []*attention.Layout{&qA.Layout, &hl, &kA.Layout, &vA.Layout}
		i := (plan.dimsSel - 1) % len(ls)
		switch {
		case plan.dimsField < 7:
			change = fzClassify(ls[i], plan.dimsField, plan.value(), i >= 2, i == 1)
			dims = fmt.Sprintf("%s.%s = %d", names[i], fzFieldNames[plan.dimsField], plan.value())
		case !wantErr: // batch 0 everywhere: nothing to compute, unless a mask's batch is neither 1 nor 0
			qA.Batch, hl.Batch, kA.Batch, vA.Batch = 0, 0, 0, 0
			empty, change, dims = true, fzSame, "batch 0"
			if (o.Mask.DType() != 0 && o.Mask.Batch != 1) || (o.BoolMask.Data != nil && o.BoolMask.Batch != 1) || o.CuSeqQ != nil {
				change = fzInvalid // a variable-length batch must have batch 1
			}
		}
	}

	// (a) out and lse on an input, on each other, or next to one.
	ins := fzForwardIns(room, qA, kA, vA, o)
	out := attention.F32Tensor(outHome, hl)
	outAt, lseAt := "its own place", "its own place"
	if tg, ok := fzPick(plan.outSel, append(ins, fzSliceIn("lse's place", lseHome, room))); ok {
		n := outN
		if hl.Validate() == nil {
			n = hl.Span()
		}
		if s, ok := fzPlace(tg, n, plan.outMode, plan.outOff); ok {
			out, outAt = attention.F32Tensor(s, hl), fmt.Sprintf("%s (mode %d)", tg.name, plan.outMode)
		}
	}
	lse := lseHome
	if useLSE {
		ot := fzOut("out", out)
		ot.room = room
		if tg, ok := fzPick(plan.lseSel, append(ins, ot)); ok {
			if s, ok := fzPlace(tg, lseLen, plan.lseMode, plan.lseOff); ok {
				lse, lseAt = s, fmt.Sprintf("%s (mode %d)", tg.name, plan.lseMode)
			}
		}
	}
	what := fmt.Sprintf("hostile Forward (lse %v, misuse %v, varlen %v, %s, out on %s, lse on %s) %v", useLSE, wantErr, o.CuSeqQ, dims, outAt, lseAt, plan)

	rows := 0
	if useLSE && qA.Layout.Validate() == nil {
		rows = fzRowCount(qA.Layout)
	}
	expectErr, why := wantErr, "a misuse"
	if change == fzInvalid {
		expectErr, why = true, "an invalid "+dims
	}
	if !expectErr {
		ot, lt := fzOut("out", out), fzLSE(lse, rows)
		if in, ok := fzOverlap(ot, ins); ok {
			expectErr, why = true, "out overlaps "+in.name
		} else if in, ok := fzOverlap(lt, ins); ok {
			expectErr, why = true, "lse overlaps "+in.name
		} else if ot.overlaps(lt) {
			expectErr, why = true, "lse overlaps out"
		}
	}
	call := func(out attention.Tensor, lse []float32, q, k, v attention.Tensor) error {
		if useLSE {
			return e.ForwardLSE(out, lse, q, k, v, o)
		}
		return e.Forward(out, q, k, v, o)
	}
	// The same call on plain copies, in the drawn layouts.
	var cleanOut attention.Tensor
	var cleanLSE []float32
	if !expectErr && !empty {
		cleanOut = attention.F32Tensor(impltest.Filled(outN, outGuard), outLay)
		if useLSE {
			cleanLSE = impltest.Filled(lseLen, outGuard)
		}
		if err := call(cleanOut, cleanLSE, fzMaterialize(qA, q.Layout), fzMaterialize(kA, k.Layout), fzMaterialize(vA, v.Layout)); err != nil {
			t.Fatalf("%s: the same call on plain copies failed: %v", what, err)
		}
	}
	before := fzSnap(room)
	err = fzCall(t, what, func() error { return call(out, lse, qA, kA, vA) })
	fzCheck(t, what, err, expectErr, why, empty, room, before, ins, out, cleanOut, lse, cleanLSE, rows)
}

// fzForwardIns returns what a Forward call reads.
func fzForwardIns(room []byte, q, k, v attention.Tensor, o attention.Options) []fzIn {
	ins := fzTensorIns("q", q, room)
	ins = append(ins, fzTensorIns("k", k, room)...)
	ins = append(ins, fzTensorIns("v", v, room)...)
	return append(ins, fzOptionIns(o, room)...)
}
