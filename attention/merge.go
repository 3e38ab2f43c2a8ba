package attention

import (
	"fmt"
	"math"
)

// Merge combines two attention results computed over disjoint sets of keys
// into the result over their union, using each part's log-sum-exp
// (docs/math.md, section 6). This is how split-K ("flash-decoding"), paged
// KV caches and chunked prefill put partial results together. Row by row,
//
//	M      = max(lseA, lseB)
//	lse    = M + ln(e^(lseA−M) + e^(lseB−M))     = ln(e^lseA + e^lseB)
//	out    = e^(lseA−lse)·a + e^(lseB−lse)·b
//
// The two weights are nonnegative and sum to 1, and nothing overflows for
// log-sum-exps of any finite size. The merge is commutative: swapping (a,
// lseA) with (b, lseB) gives bitwise the same result.
//
// Shapes: out, a and b are F32 tensors of one shape [B, H, N, D] (their
// strides may differ); lse, lseA and lseB are laid out [B, H, N]
// contiguously, as ForwardLSE writes them, with at least B·H·N elements.
//
// In place: out may be the very same view as a (the same slice and Layout)
// and lse the same slice as lseA, so that a running result absorbs the next
// part with Merge(acc, accLSE, acc, accLSE, part, partLSE). a and b may
// overlap each other, since both are only read. Any other overlap in memory
// between out or lse and an input, or between out and lse, is an error.
//
// Special values, row by row:
//   - a part whose lse is −Inf (it saw no key) is ignored: its output row is
//     not read, and the result is the other part exactly, bit for bit (its
//     output row and lse copied). When both are −Inf the row is zeros and
//     its lse −Inf. This rule comes first: against a −Inf part, even a
//     part whose lse is NaN is copied as it is, row and NaN lse.
//   - merging a result with itself gives the same output and lse + ln 2
//     (up to rounding): every key counts twice.
//   - otherwise plain arithmetic rules: a NaN lse gives a NaN output row and
//     lse; a NaN or ±Inf element of a or b reaches the same element of the
//     output even when its weight is 0; an lse of +Inf (which attention over
//     finite inputs never produces) takes all the weight from a finite one,
//     and two +Inf give NaN.
//
// Attention sinks add to a row's log-sum-exp without adding keys, so only
// one of the merged parts may have been computed with them.
//
// A misuse (a tensor that is not F32, mismatched shapes, a short slice, an
// output whose strides make elements collide, a forbidden overlap) returns
// an error that names the argument, and nothing is written. Merge does not
// allocate.
func Merge(out Tensor, lse []float32, a Tensor, lseA []float32, b Tensor, lseB []float32) error {
	if err := checkMerge(out, lse, a, lseA, b, lseB); err != nil {
		return err
	}
	l := out.Layout
	od, ad, bd := out.Float32s(), a.Float32s(), b.Float32s()
	r := 0
	for bi := 0; bi < l.Batch; bi++ {
		for h := 0; h < l.Heads; h++ {
			for s := 0; s < l.Seq; s++ {
				var o, x, y []float32
				if l.Dim > 0 { // with Dim 0 the offsets may point past the slices
					o = od[out.Offset(bi, h, s):][:l.Dim]
					x = ad[a.Offset(bi, h, s):][:l.Dim]
					y = bd[b.Offset(bi, h, s):][:l.Dim]
				}
				lse[r] = mergeRow(o, x, y, lseA[r], lseB[r])
				r++
			}
		}
	}
	return nil
}

// mergeRow merges the output rows x and y with log-sum-exps la and lb into
// o (which may be x itself) and returns the merged log-sum-exp.
func mergeRow(o, x, y []float32, la, lb float32) float32 {
	negInf := float32(math.Inf(-1))
	switch {
	case la == negInf && lb == negInf:
		clear(o)
		return negInf
	case lb == negInf:
		copy(o, x) // a no-op when o is x
		return la
	case la == negInf:
		copy(o, y)
		return lb
	}
	// With e = e^(−|la − lb|) in [0, 1], the side with the larger lse gets
	// weight 1/(1+e) and the other e/(1+e); ln(1+e) = log1p(e) keeps the
	// small correction accurate. Equal sides get exactly 1/2 each.
	fa, fb := float64(la), float64(lb)
	e := math.Exp(-math.Abs(fa - fb))
	big := 1 / (1 + e)
	small := e * big
	wa, wb := big, small
	if fa < fb {
		wa, wb = small, big
	}
	for c := range o {
		o[c] = float32(wa*float64(x[c]) + wb*float64(y[c]))
	}
	return float32(math.Max(fa, fb) + math.Log1p(e))
}

// MergeN combines n >= 1 attention results computed over disjoint sets of
// keys into the result over their union, as n − 1 calls of Merge would, in
// one pass over the parts per row (docs/math.md, section 6). This is how
// context parallelism and split-KV across machines put many partial results
// together. Row by row, over the parts i whose lse_i is not −Inf,
//
//	M      = max_i lse_i                      (attained by part t, the first)
//	S      = 1 + Σ_{i≠t} e^(lse_i−M)
//	lse    = M + ln S                         = ln Σ_i e^lse_i
//	out    = Σ_i (e^(lse_i−M)/S)·parts[i]
//
// with the weights, the sum and ln S = log1p(S − 1) in float64, and the sum
// of a row's elements taken in that order: part t first, then the others in
// the order of parts.
//
// Shapes: out and every parts[i] are F32 tensors of one shape [B, H, N, D]
// (their strides may differ); lse and every lses[i] are laid out [B, H, N]
// contiguously, as ForwardLSE writes them, with at least B·H·N elements;
// lses holds one slice per part.
//
// Rounding: each output element is the float32 rounding of a float64 sum,
// so it is within half a float32 ulp plus n·2^−52·Σ_i w_i·|parts[i]| of the
// exact combination of its float32 inputs, and lse likewise. A chain of
// two-way Merge calls rounds to float32 after every step instead, so MergeN
// is not bitwise equal to it for three or more parts: it rounds once where
// the chain rounds n − 1 times. A row in which exactly two parts have an lse other than −Inf is
// merged by Merge's own arithmetic: with two parts, MergeN(out, lse, {a, b},
// {lseA, lseB}) is bitwise Merge(out, lse, a, lseA, b, lseB), and so it is
// commutative then. With three or more, permuting the parts only reorders a
// float64 sum (and may pick another part t among equal maxima), so each
// element changes by at most one float32 ulp plus n·2^−52·Σ_i w_i·|parts[i]|
// (a bound that matters only where the sum cancels), and lse by at most one
// ulp.
//
// In place: out may be the very same view as parts[0] (the same slice and
// Layout) and lse the same slice as lses[0], so that an accumulator absorbs
// the other parts. The parts may overlap each other, as may the lses, since
// they are only read. Any other overlap in memory between out or lse and an
// input, or between out and lse, is an error.
//
// Special values, row by row, as Merge's:
//   - a part whose lse is −Inf (it saw no key) is ignored: its output row is
//     not read. When exactly one part is left, the result is that part
//     exactly, bit for bit (its output row and lse copied, even a NaN lse);
//     when none is, the row is zeros and its lse −Inf.
//   - merging a result with itself gives the same output and lse + ln 2
//     (up to rounding); n copies of it give lse + ln n.
//   - otherwise a NaN lse gives a NaN output row and lse; a NaN or ±Inf
//     element of a part reaches the same element of the output even when
//     its weight is 0; one lse of +Inf takes all the weight from finite
//     ones, and two or more give NaN.
//
// Attention sinks add to a row's log-sum-exp without adding keys, so only
// one of the merged parts may have been computed with them.
//
// A misuse (no parts, len(lses) != len(parts), a tensor that is not F32,
// mismatched shapes, a short slice, an output whose strides make elements
// collide, a forbidden overlap) returns an error that names the argument,
// parts[i] or lses[i] for an element, and nothing is written. MergeN does
// not allocate, whatever the number of parts; its time is linear in it.
func MergeN(out Tensor, lse []float32, parts []Tensor, lses [][]float32) error {
	if err := checkMergeN(out, lse, parts, lses); err != nil {
		return err
	}
	l := out.Layout
	od := out.Float32s()
	r := 0
	for bi := 0; bi < l.Batch; bi++ {
		for h := 0; h < l.Heads; h++ {
			for s := 0; s < l.Seq; s++ {
				var o []float32
				if l.Dim > 0 { // with Dim 0 the offsets may point past the slices
					o = od[out.Offset(bi, h, s):][:l.Dim]
				}
				lse[r] = mergeRowN(o, parts, lses, r, bi, h, s)
				r++
			}
		}
	}
	return nil
}

// mergeTile is the number of elements of a row that mergeRowN sums at once,
// in float64 on the stack; the weights are recomputed for every tile, so a
// head dim up to mergeTile takes one exponential per part and row.
const mergeTile = 128

// mergeRowN merges row (b, h, s), number r, of the parts into o (which may
// be the row of parts[0]) and returns its log-sum-exp.
func mergeRowN(o []float32, parts []Tensor, lses [][]float32, r, b, h, s int) float32 {
	negInf := float32(math.Inf(-1))
	live, first, second, top := 0, -1, -1, -1
	hasNaN := false
	var m float32
	for i, x := range lses {
		x := x[r]
		if x == negInf {
			continue
		}
		live++
		if first < 0 {
			first = i
		} else if second < 0 {
			second = i
		}
		if x != x {
			hasNaN = true
		} else if top < 0 || x > m {
			m, top = x, i
		}
	}
	d := len(o)
	switch {
	case live == 0:
		clear(o)
		return negInf
	case live == 1:
		copy(o, tensorRow(parts[first], b, h, s, d)) // a no-op when o is that row
		return lses[first][r]
	case live == 2:
		return mergeRow(o, tensorRow(parts[first], b, h, s, d), tensorRow(parts[second], b, h, s, d),
			lses[first][r], lses[second][r])
	case hasNaN:
		nan := float32(math.NaN())
		for c := range o {
			o[c] = nan
		}
		return nan
	}
	// Part top has weight 1/S exactly, the others e^(lse_i − M)/S, all in
	// [0, 1]; S − 1 is summed on its own so that log1p keeps it accurate.
	// With M = +Inf a second +Inf part gives e^NaN, and NaN everywhere.
	fm := float64(m)
	rest := 0.0
	for i, x := range lses {
		if x := x[r]; i != top && x != negInf {
			rest += math.Exp(float64(x) - fm)
		}
	}
	inv := 1 / (1 + rest)
	var acc [mergeTile]float64
	for c0 := 0; c0 < d; c0 += mergeTile {
		a := acc[:min(mergeTile, d-c0)]
		x := tensorRow(parts[top], b, h, s, d)[c0:]
		for c := range a {
			a[c] = inv * float64(x[c])
		}
		for i, l := range lses {
			l := l[r]
			if i == top || l == negInf {
				continue
			}
			w := math.Exp(float64(l)-fm) * inv
			x := tensorRow(parts[i], b, h, s, d)[c0:]
			for c := range a {
				a[c] += w * float64(x[c])
			}
		}
		for c := range a {
			o[c0+c] = float32(a[c])
		}
	}
	return float32(fm + math.Log1p(rest))
}

// tensorRow returns the d elements of row (b, h, s) of the F32 view t, or
// nil when d is 0 (when the offsets may point past the slice).
func tensorRow(t Tensor, b, h, s, d int) []float32 {
	if d == 0 {
		return nil
	}
	return t.Float32s()[t.Offset(b, h, s):][:d]
}

// checkMergeN validates MergeN's arguments.
func checkMergeN(out Tensor, lse []float32, parts []Tensor, lses [][]float32) error {
	const fn = "MergeN"
	if len(parts) == 0 {
		return fmt.Errorf("attention: MergeN: parts is empty; want at least one part")
	}
	if len(lses) != len(parts) {
		return fmt.Errorf("attention: MergeN: lses has %d slices; want one per part, len(parts) = %d", len(lses), len(parts))
	}
	if err := mergeTensorOK(fn, arg("out"), out); err != nil {
		return err
	}
	l := out.Layout
	for i, p := range parts {
		if err := mergeTensorOK(fn, mergeArg{"parts", i}, p); err != nil {
			return err
		}
		if err := mergeSameShape(fn, mergeArg{"parts", i}, p.Layout, l); err != nil {
			return err
		}
	}
	rows, err := mergeRows(fn, l)
	if err != nil {
		return err
	}
	if err := mergeLSELen(fn, arg("lse"), lse, rows); err != nil {
		return err
	}
	for i, x := range lses {
		if err := mergeLSELen(fn, mergeArg{"lses", i}, x, rows); err != nil {
			return err
		}
	}

	// Overlaps. Only out = parts[0] (same view) and lse = lses[0] (same
	// start) may share memory with an input.
	oLo, oHi := out.byteRange()
	lLo, lHi := floatsRange(lse[:rows])
	if overlaps(oLo, oHi, lLo, lHi) {
		return fmt.Errorf("attention: MergeN: out overlaps lse in memory; want separate buffers")
	}
	for i, p := range parts {
		pLo, pHi := p.byteRange()
		switch {
		case i == 0 && overlaps(oLo, oHi, pLo, pHi) && !(oLo == pLo && out.Layout == p.Layout):
			return fmt.Errorf("attention: MergeN: out overlaps parts[0] in memory without being the same view; want out to be exactly parts[0] (same slice and layout, in place) or a separate buffer")
		case i > 0 && overlaps(oLo, oHi, pLo, pHi):
			return fmt.Errorf("attention: MergeN: out overlaps parts[%d] in memory; want a separate buffer (only out = parts[0] may alias)", i)
		case overlaps(lLo, lHi, pLo, pHi):
			return fmt.Errorf("attention: MergeN: lse overlaps parts[%d] in memory; want separate buffers", i)
		}
	}
	for i, x := range lses {
		xLo, xHi := floatsRange(x[:rows])
		switch {
		case overlaps(oLo, oHi, xLo, xHi):
			return fmt.Errorf("attention: MergeN: out overlaps lses[%d] in memory; want separate buffers", i)
		case i == 0 && overlaps(lLo, lHi, xLo, xHi) && lLo != xLo:
			return fmt.Errorf("attention: MergeN: lse overlaps lses[0] in memory without being the same slice; want lse to start where lses[0] does (in place) or a separate buffer")
		case i > 0 && overlaps(lLo, lHi, xLo, xHi):
			return fmt.Errorf("attention: MergeN: lse overlaps lses[%d] in memory; want a separate buffer (only lse = lses[0] may alias)", i)
		}
	}
	return nil
}

// checkMerge validates Merge's arguments.
func checkMerge(out Tensor, lse []float32, a Tensor, lseA []float32, b Tensor, lseB []float32) error {
	const fn = "Merge"
	if err := mergeTensorOK(fn, arg("out"), out); err != nil {
		return err
	}
	if err := mergeTensorOK(fn, arg("a"), a); err != nil {
		return err
	}
	if err := mergeTensorOK(fn, arg("b"), b); err != nil {
		return err
	}
	l := out.Layout
	if err := mergeSameShape(fn, arg("a"), a.Layout, l); err != nil {
		return err
	}
	if err := mergeSameShape(fn, arg("b"), b.Layout, l); err != nil {
		return err
	}
	rows, err := mergeRows(fn, l)
	if err != nil {
		return err
	}
	if err := mergeLSELen(fn, arg("lse"), lse, rows); err != nil {
		return err
	}
	if err := mergeLSELen(fn, arg("lseA"), lseA, rows); err != nil {
		return err
	}
	if err := mergeLSELen(fn, arg("lseB"), lseB, rows); err != nil {
		return err
	}

	// Overlaps. Only out = a (same view) and lse = lseA (same slice) may
	// share memory with an input.
	oLo, oHi := out.byteRange()
	aLo, aHi := a.byteRange()
	bLo, bHi := b.byteRange()
	lLo, lHi := floatsRange(lse[:rows])
	laLo, laHi := floatsRange(lseA[:rows])
	lbLo, lbHi := floatsRange(lseB[:rows])
	sameView := oLo == aLo && out.Layout == a.Layout
	switch {
	case overlaps(oLo, oHi, aLo, aHi) && !sameView:
		return fmt.Errorf("attention: Merge: out overlaps a in memory without being the same view; want out to be exactly a (same slice and layout, in place) or a separate buffer")
	case overlaps(oLo, oHi, bLo, bHi):
		return fmt.Errorf("attention: Merge: out overlaps b in memory; want a separate buffer (only out = a may alias: swap a and b to merge into b)")
	case overlaps(oLo, oHi, lLo, lHi):
		return fmt.Errorf("attention: Merge: out overlaps lse in memory; want separate buffers")
	case overlaps(oLo, oHi, laLo, laHi):
		return fmt.Errorf("attention: Merge: out overlaps lseA in memory; want separate buffers")
	case overlaps(oLo, oHi, lbLo, lbHi):
		return fmt.Errorf("attention: Merge: out overlaps lseB in memory; want separate buffers")
	case overlaps(lLo, lHi, laLo, laHi) && lLo != laLo:
		return fmt.Errorf("attention: Merge: lse overlaps lseA in memory without being the same slice; want lse to start where lseA does (in place) or a separate buffer")
	case overlaps(lLo, lHi, lbLo, lbHi):
		return fmt.Errorf("attention: Merge: lse overlaps lseB in memory; want a separate buffer (only lse = lseA may alias)")
	case overlaps(lLo, lHi, aLo, aHi):
		return fmt.Errorf("attention: Merge: lse overlaps a in memory; want separate buffers")
	case overlaps(lLo, lHi, bLo, bHi):
		return fmt.Errorf("attention: Merge: lse overlaps b in memory; want separate buffers")
	}
	return nil
}

// mergeArg names an argument in an error message: a plain name, or an
// element of a slice argument such as parts[3]. It is formatted only when
// an error is, so that checking N parts allocates nothing.
type mergeArg struct {
	name  string
	index int // -1 for a plain name
}

func arg(name string) mergeArg { return mergeArg{name, -1} }

func (a mergeArg) String() string {
	if a.index < 0 {
		return a.name
	}
	return fmt.Sprintf("%s[%d]", a.name, a.index)
}

// mergeTensorOK checks that t is a valid F32 view.
func mergeTensorOK(fn string, name mergeArg, t Tensor) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("attention: %s: %v: %w", fn, name, err)
	}
	if t.DType() != F32 {
		return fmt.Errorf("attention: %s: %v has element type %v; want f32", fn, name, t.DType())
	}
	return nil
}

// mergeSameShape checks that the layout l of the named tensor has the shape
// of want.
func mergeSameShape(fn string, name mergeArg, l, want Layout) error {
	if l.Batch != want.Batch || l.Heads != want.Heads || l.Seq != want.Seq || l.Dim != want.Dim {
		return fmt.Errorf("attention: %s: %v has shape [%d %d %d %d]; want out's shape [%d %d %d %d]",
			fn, name, l.Batch, l.Heads, l.Seq, l.Dim, want.Batch, want.Heads, want.Seq, want.Dim)
	}
	return nil
}

// mergeRows checks that the output layout l has distinct elements and a
// row count B·H·N that fits in an int, and returns that count.
func mergeRows(fn string, l Layout) (int, error) {
	if !l.injective() {
		return 0, fmt.Errorf("attention: %s: out has strides [%d %d %d 1] under which elements of shape [%d %d %d %d] overlap; want every element distinct",
			fn, l.BatchStride, l.HeadStride, l.SeqStride, l.Batch, l.Heads, l.Seq, l.Dim)
	}
	if !mergeRowsFit(l) {
		return 0, fmt.Errorf("attention: %s: out has %d×%d×%d rows, more than an int can count", fn, l.Batch, l.Heads, l.Seq)
	}
	return l.Batch * l.Heads * l.Seq, nil
}

// mergeRowsFit reports whether Batch·Heads·Seq fits in an int. For an
// output with distinct elements and Dim >= 1 the valid span already implies
// it, but with Dim 0 the span is 0 and says nothing.
func mergeRowsFit(l Layout) bool {
	n := uint64(1)
	for _, x := range [...]int{l.Batch, l.Heads, l.Seq} {
		if x != 0 && n > math.MaxInt/uint64(x) {
			return false
		}
		n *= uint64(x)
	}
	return true
}

// mergeLSELen checks that a log-sum-exp slice holds the rows.
func mergeLSELen(fn string, name mergeArg, x []float32, rows int) error {
	if len(x) < rows {
		return fmt.Errorf("attention: %s: %v has %d elements; want >= B·H·N = %d", fn, name, len(x), rows)
	}
	return nil
}
