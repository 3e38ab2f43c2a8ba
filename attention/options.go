package attention

import (
	"fmt"
	"math"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel"
)

// Alignment says where the diagonal of the score matrix lies when the
// number of queries Nq differs from the number of keys Nkv. The diagonal
// position of query i is
//
//	i' = i + Nkv − Nq   (BottomRight, the zero value)
//	i' = i              (TopLeft)
//
// Causal masking (key j visible iff j <= i'), the sliding window and the
// ALiBi distance |i' − j| are all measured from i'. In a variable-length
// batch, i, Nq and Nkv are those of the row's own sequence.
type Alignment uint8

const (
	// BottomRight aligns the diagonal to the bottom-right corner, as
	// FlashAttention >= 2.1 and llama.cpp do: the last query sees every
	// key, which is what decoding against a KV cache needs.
	BottomRight Alignment = iota
	// TopLeft aligns the diagonal to the top-left corner, as PyTorch's
	// scaled_dot_product_attention(is_causal=True) does: query i sees keys
	// 0..i whatever Nkv is.
	TopLeft
)

func (a Alignment) String() string {
	switch a {
	case BottomRight:
		return "BottomRight"
	case TopLeft:
		return "TopLeft"
	}
	return fmt.Sprintf("Alignment(%d)", uint8(a))
}

// Window is a sliding (local) attention window, FlashAttention's
// window_size = (Left, Right): the query with diagonal position i' (see
// Alignment) sees key j iff i' − Left <= j <= i' + Right. A bound of -1
// leaves that side unbounded, so {-1, -1} is no window at all and {w, 0}
// (or {w, -1} with Causal) is the causal sliding window of w+1 keys of
// Mistral, Gemma 2 and gpt-oss. The window intersects the causal mask.
type Window struct {
	Left, Right int
}

// BoolMask is a boolean attention mask: true keeps a key, false hides it.
// Element (b, h, i, j) for batch entry b, query head h, query i and key j
// lives at Data[Layout.Offset(b, h, i) + j], so the Layout is read as
// [batch, heads, Nq, Nkv] with the key axis contiguous (Layout.Dim is
// Nkv). Broadcasting: Batch may be 1 (one mask for every batch entry),
// Heads may be 1 (one mask for every head), and SeqStride may be 0 (one row
// of keys for every query, as a key-padding mask is); Seq must be Nq and
// Dim must be Nkv. The zero BoolMask (nil Data) is no mask. The keys it
// hides at either end of a row's range are never read for that row (see
// Options), so a key-padding mask may hide uninitialised padding.
type BoolMask struct {
	Layout
	Data []bool
}

// Precision is the arithmetic of attention's two products, S = Q·Kᵀ and
// P·V. Whatever the precision, the online softmax, its running maxima and
// sums, and the output accumulators are float32.
type Precision uint8

const (
	// PrecisionFloat32 computes both products in float32 (FMA): K and V
	// of every storage type are converted to float32 exactly, or
	// dequantised. It is the default.
	PrecisionFloat32 Precision = iota
	// PrecisionBFloat16 computes both products with bfloat16 operands and
	// float32 accumulation, which AMX (TDPBF16PS) and AVX512-BF16
	// (VDPBF16PS) run several times faster than float32 FMA: Q is rounded
	// to bfloat16 once per block of queries, K and V are used as bfloat16
	// (float32, fp16 and q8 values are rounded when a tile is packed;
	// bfloat16 ones are exact), the scores accumulate in float32, the
	// softmax is float32, and its probabilities are rounded to bfloat16
	// for P·V, which accumulates in float32. docs/math.md gives the error
	// this adds. Every option has the same meaning as in float32. On a
	// machine without AMX or AVX512-BF16 the bfloat16 products run as
	// portable Go (kernel.BF16Implementation says which), to the same
	// rounding points and slower than float32.
	PrecisionBFloat16
)

func (p Precision) String() string {
	switch p {
	case PrecisionFloat32:
		return "float32"
	case PrecisionBFloat16:
		return "bfloat16"
	}
	return fmt.Sprintf("Precision(%d)", uint8(p))
}

// call is one validated attention problem.
type call struct {
	out, q, k, v Tensor
	lse          []float32
	scale        float32
	causal       bool
	group        int  // query heads per K/V head
	direct       bool // read K and V rows in place (few query rows; see directRows)
	precision    Precision
	math         tileMath // how the tiles' products are computed (set by run)
	pre          *prepack // bf16 K/V packed once per call, or nil (set by run)
	bkv          int      // keys in a tile: Config.BlockKV or its default, bounded by the problem (set by positionsPerBlock)

	topLeft    bool
	window     bool
	winL, winR int // -1: unbounded; otherwise clamped so that i' ± w cannot overflow
	softCap    float32
	slopes     []float32
	sinks      []float32
	mask       Tensor // dtype 0: none
	bmask      BoolMask
	cuQ, cuKV  []int
	terms      bool // softCap, slopes or a mask: the score tile needs a per-element pass
	trim       bool // a crossing tile stops after the last key any of its rows sees (foldTiles)
	gridTiles  bool // a tile is as wide as the grid allows, not cut at the block's last key (foldTiles)

	// paged, when its cache is non-nil, is where K and V live (ForwardPaged):
	// k and v then carry the shape only, Seq being the longest sequence.
	paged pagedRead
}

// seg is the sequence a block of queries belongs to: packed queries
// [q0, q0+nq) and keys [kv0, kv0+nk). Without variable lengths it is the
// whole batch entry.
type seg struct {
	q0, nq, kv0, nk int
}

// keyRange returns the keys [lo, hi), in the sequence's own key numbering,
// that the structural masks (causal, window) leave visible to the query at
// position il of the sequence. Both bounds are non-decreasing in il; the
// range is empty when lo >= hi.
func (c *call) keyRange(sg seg, il int) (lo, hi int) {
	diag := il
	if !c.topLeft {
		diag += sg.nk - sg.nq
	}
	lo, hi = 0, sg.nk
	if c.causal {
		hi = min(hi, diag+1)
	}
	if c.window {
		if c.winL >= 0 {
			lo = max(lo, diag-c.winL)
		}
		if c.winR >= 0 {
			hi = min(hi, diag+c.winR+1)
		}
	}
	return lo, hi
}

// validateOptions checks the options that go beyond Scale and Causal and
// records them in c. The shapes of q, k and out have been checked.
func validateOptions(c *call, opts *Options) error {
	q := &c.q
	switch opts.Precision {
	case PrecisionFloat32, PrecisionBFloat16:
		c.precision = opts.Precision
	default:
		return fmt.Errorf("attention: Options.Precision is %v; want PrecisionFloat32 or PrecisionBFloat16", opts.Precision)
	}
	switch opts.CausalAlign {
	case BottomRight:
	case TopLeft:
		c.topLeft = true
	default:
		return fmt.Errorf("attention: Options.CausalAlign is %v; want BottomRight or TopLeft", opts.CausalAlign)
	}
	if w := opts.Window; w != nil {
		if w.Left < -1 {
			return fmt.Errorf("attention: Options.Window.Left is %d; want >= 0, or -1 for unbounded", w.Left)
		}
		if w.Right < -1 {
			return fmt.Errorf("attention: Options.Window.Right is %d; want >= 0, or -1 for unbounded", w.Right)
		}
		// A bound past every key reaches as far as unbounded does; clamping
		// keeps i' ± w from overflowing (|i'| <= Nq + Nkv).
		reach := satAdd(satAdd(q.Seq, c.k.Seq), 1)
		c.window, c.winL, c.winR = true, w.Left, w.Right
		if c.winL > reach {
			c.winL = reach
		}
		if c.winR > reach {
			c.winR = reach
		}
	}
	if sc := opts.SoftCap; sc != 0 {
		if sc != sc || sc < 0 || math.IsInf(float64(sc), 1) {
			return fmt.Errorf("attention: Options.SoftCap is %v; want a finite number > 0, or 0 for no capping", sc)
		}
		c.softCap = sc
	}
	if s := opts.Slopes; s != nil {
		if len(s) != q.Heads {
			return fmt.Errorf("attention: Options.Slopes has %d elements; want one ALiBi slope per query head (%d), or nil", len(s), q.Heads)
		}
		for h, x := range s {
			if x != x || math.IsInf(float64(x), 0) {
				return fmt.Errorf("attention: Options.Slopes[%d] is %v; want a finite number", h, x)
			}
		}
		c.slopes = s
	}
	if s := opts.Sinks; s != nil {
		if len(s) != q.Heads {
			return fmt.Errorf("attention: Options.Sinks has %d elements; want one sink logit per query head (%d), or nil", len(s), q.Heads)
		}
		for h, x := range s {
			if x != x || math.IsInf(float64(x), 1) {
				return fmt.Errorf("attention: Options.Sinks[%d] is %v; want a finite number, or -Inf for no sink", h, x)
			}
		}
		c.sinks = s
	}
	if m := opts.Mask; m.dtype != 0 || m.Layout != (Layout{}) {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("attention: Options.Mask: %w", err)
		}
		if m.dtype == Q8 {
			return fmt.Errorf("attention: Options.Mask has element type q8; want f32, f16 or bf16")
		}
		if err := checkMaskLayout("Mask", m.Layout, c); err != nil {
			return err
		}
		mlo, mhi := m.byteRange()
		olo, ohi := c.out.byteRange()
		if overlaps(olo, ohi, mlo, mhi) {
			return fmt.Errorf("attention: out overlaps Options.Mask in memory; want separate buffers")
		}
		if c.lse != nil {
			llo, lhi := floatsRange(c.lse[:q.Batch*q.Heads*q.Seq])
			if overlaps(llo, lhi, mlo, mhi) {
				return fmt.Errorf("attention: lse overlaps Options.Mask in memory; want separate buffers")
			}
		}
		c.mask = m
	}
	if m := opts.BoolMask; m.Data != nil || m.Layout != (Layout{}) {
		if m.Data == nil {
			return fmt.Errorf("attention: Options.BoolMask has a layout but no Data; want both or neither")
		}
		if err := m.Layout.Validate(); err != nil {
			return fmt.Errorf("attention: Options.BoolMask: %w", err)
		}
		if err := checkMaskLayout("BoolMask", m.Layout, c); err != nil {
			return err
		}
		if need := m.Span(); len(m.Data) < need {
			return fmt.Errorf("attention: Options.BoolMask.Data has %d elements; want >= %d for shape [%d %d %d %d] with strides [%d %d %d 1]",
				len(m.Data), need, m.Batch, m.Heads, m.Seq, m.Dim, m.BatchStride, m.HeadStride, m.SeqStride)
		}
		c.bmask = m
	}
	if err := checkVarlen(c, opts); err != nil {
		return err
	}
	c.terms = c.softCap != 0 || c.slopes != nil || c.mask.dtype != 0 || c.bmask.Data != nil
	c.gridTiles = c.precision == PrecisionBFloat16
	c.trim = !c.terms && c.gridTiles
	return nil
}

// checkMaskLayout checks that a mask of layout l broadcasts to [B, Hq, Nq,
// Nkv].
func checkMaskLayout(name string, l Layout, c *call) error {
	if l.Batch != 1 && l.Batch != c.q.Batch {
		return fmt.Errorf("attention: Options.%s has batch %d; want %d (B) or 1 (broadcast)", name, l.Batch, c.q.Batch)
	}
	if l.Heads != 1 && l.Heads != c.q.Heads {
		return fmt.Errorf("attention: Options.%s has %d heads; want %d (query heads) or 1 (broadcast)", name, l.Heads, c.q.Heads)
	}
	if l.Seq != c.q.Seq || l.Dim != c.k.Seq {
		return fmt.Errorf("attention: Options.%s has %d rows × %d keys; want Nq × Nkv = %d × %d (SeqStride 0 broadcasts one row over the queries)",
			name, l.Seq, l.Dim, c.q.Seq, c.k.Seq)
	}
	return nil
}

// checkVarlen validates the cumulative sequence offsets.
func checkVarlen(c *call, opts *Options) error {
	cq, ck := opts.CuSeqQ, opts.CuSeqKV
	if cq == nil && ck == nil {
		return nil
	}
	if cq == nil || ck == nil {
		return fmt.Errorf("attention: only one of Options.CuSeqQ (%d elements) and Options.CuSeqKV (%d elements) is set; want both (variable-length batch) or neither", len(cq), len(ck))
	}
	if len(cq) != len(ck) {
		return fmt.Errorf("attention: Options.CuSeqQ has %d elements and Options.CuSeqKV %d; want the same (number of sequences + 1)", len(cq), len(ck))
	}
	if c.q.Batch != 1 {
		return fmt.Errorf("attention: batch is %d with Options.CuSeqQ/CuSeqKV set; want 1 (the sequences are packed along the sequence axis)", c.q.Batch)
	}
	if err := checkOffsets("CuSeqQ", cq, "Nq", c.q.Seq); err != nil {
		return err
	}
	if err := checkOffsets("CuSeqKV", ck, "Nkv", c.k.Seq); err != nil {
		return err
	}
	c.cuQ, c.cuKV = cq, ck
	return nil
}

func checkOffsets(name string, cu []int, total string, n int) error {
	if len(cu) == 0 {
		return fmt.Errorf("attention: Options.%s is empty; want number of sequences + 1 offsets starting at 0", name)
	}
	if cu[0] != 0 {
		return fmt.Errorf("attention: Options.%s[0] is %d; want 0", name, cu[0])
	}
	for s := 1; s < len(cu); s++ {
		if cu[s] < cu[s-1] {
			return fmt.Errorf("attention: Options.%s[%d] is %d, less than %s[%d] = %d; want non-decreasing offsets", name, s, cu[s], name, s-1, cu[s-1])
		}
	}
	if last := cu[len(cu)-1]; last != n {
		return fmt.Errorf("attention: Options.%s[%d] is %d; want %s = %d (the packed length)", name, len(cu)-1, last, total, n)
	}
	return nil
}

// applyTerms applies soft-capping, ALiBi and the masks to the scores of the
// current tile: rows of the block of queries [p0, p0+np) (packed) of K/V
// head hk, keys [j0, j0+bc) of the sequence (local numbering), each row r
// only over its columns [lo[r], hi[r]).
func applyTerms(ws *workspace, c *call, b, hk, p0, np, j0, ldS int, sg seg) {
	g := c.group
	for hi := range g {
		h := hk*g + hi
		var slope float32
		if c.slopes != nil {
			slope = c.slopes[h]
		}
		for pi := range np {
			r := hi*np + pi
			a, e := ws.lo[r], ws.vis[r]
			if a >= e {
				continue
			}
			row := ws.s[r*ldS+a : r*ldS+e]
			if cp := c.softCap; cp != 0 {
				inv := 1 / cp
				for t, x := range row {
					row[t] = cp * tanh32(x*inv)
				}
			}
			i := p0 + pi // packed query position
			if c.slopes != nil {
				diag := i - sg.q0
				if !c.topLeft {
					diag += sg.nk - sg.nq
				}
				for t := range row {
					d := diag - (j0 + a + t)
					if d < 0 {
						d = -d
					}
					row[t] -= slope * float32(d)
				}
			}
			kj := sg.kv0 + j0 + a // packed key of row[0]
			if m := &c.bmask; m.Data != nil {
				bm, hm := b, h
				if m.Batch == 1 {
					bm = 0
				}
				if m.Heads == 1 {
					hm = 0
				}
				keep := m.Data[m.Offset(bm, hm, i)+kj:][:len(row)]
				for t, k := range keep {
					if !k {
						row[t] = negInf
					}
				}
			}
			if m := &c.mask; m.dtype != 0 {
				bm, hm := b, h
				if m.Batch == 1 {
					bm = 0
				}
				if m.Heads == 1 {
					hm = 0
				}
				off := m.Offset(bm, hm, i) + kj
				switch m.dtype {
				case F32:
					addMask(row, m.f32[off:][:len(row)], func(x float32) float32 { return x })
				case F16:
					addMask(row, m.f16[off:][:len(row)], func(x fp16.Float16) float32 { return x.Float32() })
				case BF16:
					addMask(row, m.bf16[off:][:len(row)], func(x fp16.BFloat16) float32 { return x.Float32() })
				}
			}
		}
	}
}

// addMask adds an additive mask to a row of scores; a −Inf entry replaces
// the score (hides the key) instead, so that a NaN score from a hidden key
// does not survive as NaN + (−Inf).
func addMask[T any](row []float32, mask []T, conv func(T) float32) {
	for t, x := range mask {
		m := conv(x)
		if m == negInf {
			row[t] = negInf
		} else {
			row[t] += m
		}
	}
}

// tanh32 is tanh for soft-capping, accurate to about one float32 ulp: the
// rational approximation of math.Tanh near 0 and 1 − 2/(e^{2|x|}+1) with
// the float32 exponential elsewhere.
func tanh32(x float32) float32 {
	a := x
	if a < 0 {
		a = -a
	}
	switch {
	case a < 0.625:
		z := float64(x)
		s := z * z
		return float32(z + z*s*((-9.64399179425052238628e-1*s-9.92877231001918586564e1)*s-1.61468768441708447952e3)/
			(((s+1.12811678491632931402e2)*s+2.23548839060100448583e3)*s+4.84406305325125486048e3))
	case a > 10: // tanh rounds to ±1 in float32 (and ±Inf lands here)
		if x < 0 {
			return -1
		}
		return 1
	}
	e := float64(kernel.Exp(2 * a))
	t := float32(1 - 2/(e+1)) // NaN stays NaN
	if x < 0 {
		t = -t
	}
	return t
}

// maskHidesTile reports whether the float or boolean mask hides every key
// of the tile [j0, j0+bc) from every row of the block that the causal mask
// and the window would let see it, so that the tile can be skipped like a
// tile outside every window. The scan stops at the first key some row
// sees, which for an ordinary tile is the first one it reads.
func maskHidesTile(c *call, b, hk, p0, np, j0, bc int, sg seg) bool {
	if c.mask.dtype == 0 && c.bmask.Data == nil {
		return false
	}
	il0 := p0 - sg.q0
	for hi := range c.group {
		h := hk*c.group + hi
		for pi := range np {
			lo, hi := c.keyRange(sg, il0+pi)
			lo, hi = max(lo, j0), min(hi, j0+bc)
			if lo >= hi {
				continue
			}
			i := p0 + pi
			kj := sg.kv0 + lo
			n := hi - lo
			if m := &c.bmask; m.Data != nil {
				keep := m.Data[m.Offset(maskIndex(m.Batch, b), maskIndex(m.Heads, h), i)+kj:][:n]
				all := true
				for _, k := range keep {
					if k {
						all = false
						break
					}
				}
				if all {
					continue // this row sees nothing in the tile
				}
			}
			if m := &c.mask; m.dtype != 0 {
				off := m.Offset(maskIndex(m.Batch, b), maskIndex(m.Heads, h), i) + kj
				if maskAllNegInf(m, off, n) {
					continue
				}
			}
			return false
		}
	}
	return true
}

// trimMasked narrows the range [ws.lo[r], ws.vis[r]) of each row of the
// block in the tile of keys [j0, j0+bc) to run from the row's first to its
// last key there that Mask and BoolMask leave visible, so that the keys
// they hide at the edges of a row's range are never read for it, whatever
// their values (a key-padding mask's padding may be uninitialised
// memory). It reports whether every range stayed as it was. The scan stops
// at the first visible key from either end, which for an ordinary row is
// the one at the end.
func trimMasked(ws *workspace, c *call, b, hk, p0, np, j0 int, sg seg) bool {
	same := true
	kj := sg.kv0 + j0 // packed key of the tile's column 0
	for hi := range c.group {
		h := hk*c.group + hi
		for pi := range np {
			r := hi*np + pi
			lo, e := ws.lo[r], ws.vis[r]
			i := p0 + pi
			for lo < e && maskHides(c, b, h, i, kj+lo) {
				lo++
			}
			for e > lo && maskHides(c, b, h, i, kj+e-1) {
				e--
			}
			if lo != ws.lo[r] || e != ws.vis[r] {
				ws.lo[r], ws.vis[r] = lo, e
				same = false
			}
		}
	}
	return same
}

// maskHides reports whether Mask or BoolMask hides packed key j from query
// i of head h, batch entry b.
func maskHides(c *call, b, h, i, j int) bool {
	if m := &c.bmask; m.Data != nil && !m.Data[m.Offset(maskIndex(m.Batch, b), maskIndex(m.Heads, h), i)+j] {
		return true
	}
	if m := &c.mask; m.dtype != 0 {
		return maskAllNegInf(m, m.Offset(maskIndex(m.Batch, b), maskIndex(m.Heads, h), i)+j, 1)
	}
	return false
}

// maskIndex maps a batch or head index onto a mask dimension of size n,
// which is either the full size or 1 (broadcast).
func maskIndex(n, i int) int {
	if n == 1 {
		return 0
	}
	return i
}

// maskAllNegInf reports whether the n additive-mask entries at off are all
// −Inf.
func maskAllNegInf(m *Tensor, off, n int) bool {
	switch m.dtype {
	case F32:
		for _, x := range m.f32[off:][:n] {
			if x != negInf {
				return false
			}
		}
	case F16:
		for _, x := range m.f16[off:][:n] {
			if x.Float32() != negInf {
				return false
			}
		}
	case BF16:
		for _, x := range m.bf16[off:][:n] {
			if x.Float32() != negInf {
				return false
			}
		}
	}
	return true
}
