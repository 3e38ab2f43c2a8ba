package attention

import (
	"fmt"
	"math"
	"slices"

	"github.com/flashgo/flashgo/fp16"
	"github.com/flashgo/flashgo/kernel"
)

// KVCache is the contiguous key/value cache of one sequence: for each of
// Hkv heads, room for Cap positions of Dim components of keys and of values
// (one head dim for both: keys and values of different dims are Forward's
// own tensors),
// stored as F32, F16, BF16, Q8 (Dim a multiple of Q8Block; see
// QuantizeQ8 for the rounding) or fp8 (FP8E4M3, FP8E5M2, with a K and a V
// scale per cache or per head; see NewKVCacheFP8). Append writes new
// positions (converting from float32), Truncate drops positions from the
// end (rollback after speculative decoding), and K and V return strided
// views of the first Len positions that Engine.Forward reads in place,
// without a copy:
//
//	cache.Append(kNew, vNew)                      // the new tokens' K and V
//	e.Forward(out, q, cache.K(), cache.V(), attention.Options{Causal: true})
//
// With the default bottom-right causal alignment that single call is decode
// (Nq = 1, or a few draft tokens) and chunked prefill alike: query i of the
// Nq new ones sees the cached keys and the new keys up to its own.
//
// Storage is [Hkv, Cap, Dim] per tensor (HeadStride Cap·Dim, SeqStride
// Dim), so a head's keys are contiguous and float32 values are read where
// they lie. A KVCache is not safe for concurrent mutation; distinct caches
// may be used from distinct goroutines at once, and any number of Forward
// calls may read one cache while nobody appends to it.
type KVCache struct {
	heads, capacity, dim, n int
	k, v                    Tensor // [1, heads, capacity, dim]
}

// MaxCacheBytes is the most storage NewKVCache and NewPagedCache allocate
// for one cache (256 GiB): keys and values together, with the Q8 scales. A
// larger shape is an error, not an allocation that would take the process
// down.
const MaxCacheBytes = 1 << 38

// NewKVCache returns an empty cache of heads × capacity × dim keys and as
// many values, stored as dtype (F32, F16, BF16, Q8, FP8E4M3 or FP8E5M2;
// the fp8 types with scale 1, see NewKVCacheFP8 for others). Their
// storage must fit in MaxCacheBytes.
func NewKVCache(dtype DType, heads, capacity, dim int) (*KVCache, error) {
	return newKVCache("NewKVCache", dtype, heads, capacity, dim, nil, nil)
}

// NewKVCacheFP8 returns an empty cache as NewKVCache does, stored as dtype
// FP8E4M3 or FP8E5M2 with the scales kScales of the keys and vScales of
// the values: one each for the whole cache, or one per head (vLLM's
// k_scale and v_scale, per layer or per head). The cache keeps copies of
// them. Append quantises each new value x of head h as vLLM's cache
// writes do: it divides in float32, q = float32(x / scale[h]), and stores
// the fp8 value nearest q (ties to even), saturating: a quotient beyond
// the format's largest finite value, ±Inf included, is stored as that
// value (±448 for E4M3FN, ±57344 for E5M2); NaN stays NaN. The quotient
// is rounded twice, so where float32 rounds it onto a midpoint of the
// format the tie decides, which is not always the fp8 value nearest the
// exact x / scale[h] (E4M3, x = 0.018381251, scale 0.0173: q is the
// midpoint 1.0625, stored as 1, though the exact quotient lies above it).
// K and V read as x.Float32() · scale[h]. Nil scales are an error, not a
// default: a caller who means scale 1 says so ([]float32{1}), or uses
// NewKVCache, whose fp8 caches have scale 1.
func NewKVCacheFP8(dtype DType, heads, capacity, dim int, kScales, vScales []float32) (*KVCache, error) {
	if err := checkFP8Args("NewKVCacheFP8", dtype, heads, kScales, vScales); err != nil {
		return nil, err
	}
	return newKVCache("NewKVCacheFP8", dtype, heads, capacity, dim, kScales, vScales)
}

func newKVCache(fn string, dtype DType, heads, capacity, dim int, kScales, vScales []float32) (*KVCache, error) {
	if err := checkCacheShape(fn, dtype, heads, dim); err != nil {
		return nil, err
	}
	ks, vs, err := cacheScales(fn, dtype, heads, kScales, vScales)
	if err != nil {
		return nil, err
	}
	if capacity < 0 {
		return nil, fmt.Errorf("attention: %s: capacity is %d; want >= 0", fn, capacity)
	}
	l := BHSD(1, heads, capacity, dim)
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("attention: %s: %w", fn, err)
	}
	if err := checkCacheBytes(fn, dtype, l); err != nil {
		return nil, err
	}
	c := &KVCache{heads: heads, capacity: capacity, dim: dim}
	c.k = newStorage(dtype, l, ks)
	c.v = newStorage(dtype, l, vs)
	return c, nil
}

// checkFP8Args checks the element type and that both scale slices are
// given, for the constructors that take fp8 scales.
func checkFP8Args(fn string, dtype DType, heads int, kScales, vScales []float32) error {
	if !dtype.isFP8() {
		return fmt.Errorf("attention: %s: element type %v; want fp8e4m3 or fp8e5m2", fn, dtype)
	}
	for _, x := range [...]struct {
		name string
		s    []float32
	}{{"kScales", kScales}, {"vScales", vScales}} {
		if x.s == nil {
			return fmt.Errorf("attention: %s: %s is nil; want 1 scale (per cache) or %d (per head), []float32{1} for scale 1", fn, x.name, heads)
		}
	}
	return nil
}

// cacheScales checks the fp8 scales of a new cache of heads heads and
// returns copies of them: [1] and [1] when both are nil (scale 1), nil for
// the other types, which take none.
func cacheScales(fn string, dtype DType, heads int, kScales, vScales []float32) (ks, vs []float32, err error) {
	if !dtype.isFP8() {
		return nil, nil, nil
	}
	if kScales == nil && vScales == nil {
		return []float32{1}, []float32{1}, nil
	}
	for _, x := range [...]struct {
		name string
		s    []float32
	}{{"kScales", kScales}, {"vScales", vScales}} {
		if n := len(x.s); n != 1 && n != heads {
			return nil, nil, fmt.Errorf("attention: %s: %s has %d scales; want 1 (per cache) or %d (per head)", fn, x.name, n, heads)
		}
		for i, sc := range x.s {
			if !(sc > 0 && sc <= math.MaxFloat32) {
				return nil, nil, fmt.Errorf("attention: %s: %s[%d] is %v; want a positive finite number", fn, x.name, i, sc)
			}
		}
	}
	return slices.Clone(kScales), slices.Clone(vScales), nil
}

func checkCacheShape(fn string, dtype DType, heads, dim int) error {
	if dtype != F32 && dtype != F16 && dtype != BF16 && dtype != Q8 && !dtype.isFP8() {
		return fmt.Errorf("attention: %s: element type %v; want f32, f16, bf16, q8, fp8e4m3 or fp8e5m2", fn, dtype)
	}
	if heads < 1 {
		return fmt.Errorf("attention: %s: %d heads; want >= 1", fn, heads)
	}
	if dim < 1 {
		return fmt.Errorf("attention: %s: head dim %d; want >= 1", fn, dim)
	}
	if dtype == Q8 && dim%Q8Block != 0 {
		return fmt.Errorf("attention: %s: head dim %d with q8 storage; want a multiple of %d", fn, dim, Q8Block)
	}
	return nil
}

// checkCacheBytes checks that the keys and values of a cache of layout l
// (a valid one) stored as dtype fit in MaxCacheBytes.
func checkCacheBytes(fn string, dtype DType, l Layout) error {
	n := uint64(l.Span())   // elements of the keys, and of the values
	if n <= MaxCacheBytes { // then nothing below overflows
		bytes := n * uint64(dtype.Size())
		if dtype == Q8 {
			bytes += n / Q8Block * 4 // the scales
		}
		if 2*bytes <= MaxCacheBytes {
			return nil
		}
	}
	return fmt.Errorf("attention: %s: keys and values of %d elements each, stored as %v, take more than MaxCacheBytes (%d bytes); want a smaller cache",
		fn, n, dtype, uint64(MaxCacheBytes))
}

// newStorage allocates a zeroed tensor of layout l (with the scales fp8
// for the fp8 types).
func newStorage(dtype DType, l Layout, fp8 []float32) Tensor {
	n := l.Span()
	switch dtype {
	case FP8E4M3:
		return FP8E4M3Tensor(make([]fp16.Float8E4M3, n), fp8, l)
	case FP8E5M2:
		return FP8E5M2Tensor(make([]fp16.Float8E5M2, n), fp8, l)
	case F16:
		return F16Tensor(make([]fp16.Float16, n), l)
	case BF16:
		return BF16Tensor(make([]fp16.BFloat16, n), l)
	case Q8:
		return Q8Tensor(make([]int8, n), make([]float32, n/Q8Block), l)
	}
	return F32Tensor(make([]float32, n), l)
}

// Len returns the number of cached positions.
func (c *KVCache) Len() int { return c.n }

// Cap returns the number of positions the cache can hold.
func (c *KVCache) Cap() int { return c.capacity }

// Heads returns the number of K/V heads.
func (c *KVCache) Heads() int { return c.heads }

// Dim returns the head dimension.
func (c *KVCache) Dim() int { return c.dim }

// DType returns the storage element type.
func (c *KVCache) DType() DType { return c.k.dtype }

// K returns a view [1, Hkv, Len, Dim] of the cached keys, valid until the
// next Append or Truncate changes Len (the data it shows stays in place).
func (c *KVCache) K() Tensor { return c.view(c.k) }

// V returns a view [1, Hkv, Len, Dim] of the cached values; see K.
func (c *KVCache) V() Tensor { return c.view(c.v) }

func (c *KVCache) view(t Tensor) Tensor {
	t.Seq = c.n
	return t
}

// Append copies the keys k and values v of n new positions to the end of
// the cache. k and v are [1, Hkv, n, Dim] views in any layout, of element
// type F32, F16 or BF16 (converted: rounded to nearest even for F16 and
// BF16 storage, quantised for Q8 as QuantizeQ8 and for fp8 as
// NewKVCacheFP8 say) or of the cache's own type (copied; fp8 views are
// copied where their scale is the cache's, and re-quantised from their
// values otherwise), so that what Read gives appends back bit for bit.
// Appending past Cap, a mismatched shape or type, or k or v sharing
// memory with the cache's own storage (a view of K() or V()), is an error
// and leaves the cache unchanged. Append does not allocate.
func (c *KVCache) Append(k, v Tensor) error {
	if err := checkAppend("KVCache.Append", k, v, &c.k, &c.v, c.heads, c.dim); err != nil {
		return err
	}
	n := k.Seq
	if n > c.capacity-c.n { // c.n+n could overflow
		return fmt.Errorf("attention: KVCache.Append: %d positions to a cache holding %d of %d; want at most %d", n, c.n, c.capacity, c.capacity-c.n)
	}
	for h := range c.heads {
		for s := range n {
			storeRow(&c.k, c.k.Offset(0, h, c.n+s), &k, k.Offset(0, h, s), h, c.dim)
			storeRow(&c.v, c.v.Offset(0, h, c.n+s), &v, v.Offset(0, h, s), h, c.dim)
		}
	}
	c.n += n
	return nil
}

// Truncate drops the positions from n on, keeping the first n (rollback of
// rejected draft tokens). n must be between 0 and Len.
func (c *KVCache) Truncate(n int) error {
	if n < 0 || n > c.n {
		return fmt.Errorf("attention: KVCache.Truncate(%d) on a cache of %d positions; want 0 <= n <= %d", n, c.n, c.n)
	}
	c.n = n
	return nil
}

// checkAppend validates the new keys and values for a cache whose
// storage is ck and cv, of heads × dim per position: valid views of the
// right shape and type that share no memory with the storage they are
// copied into (fn names the method in errors).
func checkAppend(fn string, k, v Tensor, ck, cv *Tensor, heads, dim int) error {
	dtype := ck.dtype
	for _, t := range [...]namedTensor{{"k", k}, {"v", v}} {
		if err := t.t.Validate(); err != nil {
			return fmt.Errorf("attention: %s: %s: %w", fn, t.name, err)
		}
		if t.t.dtype != F32 && t.t.dtype != F16 && t.t.dtype != BF16 && t.t.dtype != dtype {
			return fmt.Errorf("attention: %s: %s has element type %v; want f32, f16, bf16 or the cache's %v", fn, t.name, t.t.dtype, dtype)
		}
		if t.t.Batch != 1 || t.t.Heads != heads || t.t.Dim != dim {
			return fmt.Errorf("attention: %s: %s has shape [%d %d %d %d]; want [1 %d n %d]",
				fn, t.name, t.t.Batch, t.t.Heads, t.t.Seq, t.t.Dim, heads, dim)
		}
	}
	if k.Seq != v.Seq {
		return fmt.Errorf("attention: %s: k has %d positions and v %d; want the same", fn, k.Seq, v.Seq)
	}
	for _, t := range [...]namedTensor{{"k", k}, {"v", v}} {
		for _, st := range [...]namedTensor{{"keys", *ck}, {"values", *cv}} {
			if tensorsOverlap(&t.t, &st.t) {
				return fmt.Errorf("attention: %s: %s overlaps the cache's %s in memory; want a separate buffer", fn, t.name, st.name)
			}
		}
	}
	return nil
}

// tensorsOverlap reports whether the memory the views a and b can touch,
// Q8 and fp8 scales included, overlaps.
func tensorsOverlap(a, b *Tensor) bool {
	alo, ahi := a.byteRange()
	aslo, ashi := a.scaleRange()
	blo, bhi := b.byteRange()
	bslo, bshi := b.scaleRange()
	return overlaps(alo, ahi, blo, bhi) || overlaps(alo, ahi, bslo, bshi) ||
		overlaps(aslo, ashi, blo, bhi) || overlaps(aslo, ashi, bslo, bshi)
}

// copyElems copies n elements of src from soff to dst at doff, both of one
// type (for Q8 with their scales: n and both offsets whole blocks).
func copyElems(dst *Tensor, doff int, src *Tensor, soff, n int) {
	switch dst.dtype {
	case F16:
		copy(dst.f16[doff:doff+n], src.f16[soff:soff+n])
	case BF16:
		copy(dst.bf16[doff:doff+n], src.bf16[soff:soff+n])
	case Q8:
		copy(dst.i8[doff:doff+n], src.i8[soff:soff+n])
		copy(dst.q8s[doff/Q8Block:(doff+n)/Q8Block], src.q8s[soff/Q8Block:(soff+n)/Q8Block])
	case FP8E4M3:
		copy(dst.e4m3[doff:doff+n], src.e4m3[soff:soff+n])
	case FP8E5M2:
		copy(dst.e5m2[doff:doff+n], src.e5m2[soff:soff+n])
	default:
		copy(dst.f32[doff:doff+n], src.f32[soff:soff+n])
	}
}

// storeRow writes d elements of src at soff, a row of head h, into dst at
// doff, in dst's type: copied where the types agree (for fp8, and the
// scales of head h), otherwise widened to float32 (exactly) and rounded to
// dst's type: to nearest even for F16 and BF16, per block for Q8
// (QuantizeQ8), divided by the scale and saturated for fp8. The callers
// have checked the types (checkAppend, checkRows): one of them is F32, F16,
// BF16 or the other's type. A float32, binary16 or bfloat16 row goes
// through kernel's encoders whole (vector kernels at the avx512 and avx2
// levels); a Q8 or fp8 row (a read into binary16 or bfloat16, or an fp8 row
// of another scale) is widened a stack chunk at a time first.
func storeRow(dst *Tensor, doff int, src *Tensor, soff, h, d int) {
	switch {
	case src.dtype == dst.dtype && (!dst.dtype.isFP8() || src.fp8Scale(h)[0] == dst.fp8Scale(h)[0]):
		copyElems(dst, doff, src, soff, d)
	case dst.dtype == F32:
		widenRow(dst.f32[doff:doff+d], src, soff, h)
	case src.dtype == F32:
		encodeRow(dst, doff, src.f32[soff:soff+d], h)
	case src.dtype == F16:
		encodeRow(dst, doff, src.f16[soff:soff+d], h)
	case src.dtype == BF16:
		encodeRow(dst, doff, src.bf16[soff:soff+d], h)
	default:
		// Through float32 a stack chunk at a time: no allocation (the
		// encoders' arguments do not escape). The chunk is a whole
		// number of Q8 blocks, so a Q8 row is read block by block.
		var buf [64]float32
		for c0 := 0; c0 < d; c0 += len(buf) {
			w := buf[:min(len(buf), d-c0)]
			loadRow(w, src, soff+c0, h)
			encodeRow(dst, doff+c0, w, h)
		}
	}
}

// encodeRow writes x, a row of head h, to dst at doff, rounded to dst's
// type (F16, BF16, Q8 with len(x) a whole number of blocks from a block
// start, or fp8 divided by dst's scale of head h) by kernel's encoders.
func encodeRow[S kernel.EncodeElem](dst *Tensor, doff int, x []S, h int) {
	d := len(x)
	switch dst.dtype {
	case F16:
		kernel.EncodeFloat16(dst.f16[doff:doff+d], x)
	case BF16:
		kernel.EncodeBFloat16(dst.bf16[doff:doff+d], x)
	case Q8:
		_ = kernel.QuantizeQ8(dst.i8[doff:doff+d], dst.q8s[doff/Q8Block:(doff+d)/Q8Block], x)
	case FP8E4M3:
		kernel.EncodeFloat8(dst.e4m3[doff:doff+d], x, dst.fp8Scale(h)[0])
	case FP8E5M2:
		kernel.EncodeFloat8(dst.e5m2[doff:doff+d], x, dst.fp8Scale(h)[0])
	}
}

// loadRow widens the len(dst) elements of src from off on, a row of head
// h, to float32: exactly for F32, F16 and BF16, times the scales for Q8
// (off and len(dst) whole blocks) and fp8. It is for the stack chunks of
// storeRow, which the widening kernels' function values would move to the
// heap (an allocation per row); widenRow writes rows that lie elsewhere
// with them.
func loadRow(dst []float32, src *Tensor, off, h int) {
	n := len(dst)
	switch src.dtype {
	case F32:
		copy(dst, src.f32[off:off+n])
	case F16:
		fp16.DecodeFloat16(dst, src.f16[off:off+n])
	case BF16:
		fp16.DecodeBFloat16(dst, src.bf16[off:off+n])
	case Q8:
		for g, sc := range src.q8s[off/Q8Block : (off+n)/Q8Block] {
			for i, x := range src.i8[off+g*Q8Block:][:Q8Block] {
				dst[g*Q8Block+i] = float32(x) * sc
			}
		}
	case FP8E4M3:
		_ = kernel.PackFloat8(dst, n, src.e4m3[off:off+n], src.fp8Scale(h)[0], n, 1, n)
	case FP8E5M2:
		_ = kernel.PackFloat8(dst, n, src.e5m2[off:off+n], src.fp8Scale(h)[0], n, 1, n)
	}
}

// widenRow is loadRow with the decode kernels (vector code where the
// implementation has it), for a dst that is not on the stack.
func widenRow(dst []float32, src *Tensor, off, h int) {
	n := len(dst)
	switch src.dtype {
	case F16:
		_ = kernel.PackFloat16(dst, n, src.f16[off:off+n], n, 1, n)
	case BF16:
		_ = kernel.PackBFloat16(dst, n, src.bf16[off:off+n], n, 1, n)
	case Q8:
		_ = kernel.PackQ8(dst, n, src.i8[off:off+n], src.q8s[off/Q8Block:(off+n)/Q8Block], n, 1, n)
	default:
		loadRow(dst, src, off, h)
	}
}
