package attention

import (
	"fmt"
	"slices"

	"github.com/flashgo/flashgo/fp16"
)

// PackedPrefix holds a shared prefix's keys and values packed once into
// the panels that the prefix product of ForwardSharedPrefix reads
// (SharedPrefixKV.Packed), for one precision: the bfloat16 pair panels of
// PrecisionBFloat16 (2 bytes an element) or the float32 panels of
// PrecisionFloat32 (4 bytes an element). Without it, every call packs
// every tile of the prefix again (transposing the keys, converting fp16,
// bfloat16 and q8 values, and in bf16 precision rounding them to bfloat16
// and interleaving them in pairs), which in bf16 precision costs more
// than the products (docs/benchmarks.md, "Shared-prefix decode"); a
// decode loop over one prefix packs it once and then only streams the
// panels.
//
// The panels hold the same values the per-tile packs would, so a call
// with them gives bitwise the result of the call without. A PackedPrefix
// is read only by the calls that use it, and any number of them may use
// it at once; Pack must not run while one does.
//
// The zero PackedPrefix is empty and ready for Pack.
type PackedPrefix struct {
	pre    prepack
	prec   Precision
	packed bool
	// What the panels were packed from, which a call checks its prefix
	// against: the pools' element types, layouts and first bytes, their
	// scales, the length and a copy of the block table.
	kType, vType DType
	kL, vL       Layout
	kAddr, vAddr uintptr
	kSc, vSc     packedScales
	n            int
	blocks       []int32
	row          []fp16.BFloat16 // packPanels' scratch for a run that starts at an odd key
	// origin is the prefix being packed, during Pack: here, not on the
	// stack, where validation would make it escape.
	origin poolOrigin
}

const packFn = "attention: PackedPrefix.Pack: "

// Pack packs prefix, a PagedKV of one sequence (the Prefix of a
// SharedPrefixKV), into p for calls in precision (PrecisionFloat32 or
// PrecisionBFloat16), replacing what p held. It reuses p's memory when it
// is large enough and allocates otherwise. The caller promises that the
// prefix's keys and values do not change while p is used with it: the
// calls read the panels, not the pools, and check only that the prefix is
// the one p was packed from (the same pools, layouts, length and block
// table, and the same scale slices of Q8 or fp8 pools, holding for fp8 the
// same values), not its keys and values.
func (p *PackedPrefix) Pack(prefix PagedKV, precision Precision) error {
	if precision != PrecisionFloat32 && precision != PrecisionBFloat16 {
		return fmt.Errorf("%sprecision is %v; want PrecisionFloat32 or PrecisionBFloat16", packFn, precision)
	}
	if len(prefix.SeqLens) != 1 {
		return fmt.Errorf("%sprefix.SeqLens has %d lengths; want 1 (the prefix is one sequence)", packFn, len(prefix.SeqLens))
	}
	hkv, d := prefix.K.Heads, prefix.K.Dim
	if hkv < 1 || d < 1 {
		return fmt.Errorf("%sprefix.K has %d heads of dim %d; want >= 1 each", packFn, hkv, d)
	}
	// The pools, the table and the length are checked as a call checks
	// them, with a query of the prefix's heads and no positions.
	var opts Options
	p.origin = poolOrigin{kv: prefix}
	defer func() { p.origin = poolOrigin{} }() // keep no caller's pools alive
	c, err := validateRequest(&request{fn: packFn, kv: &p.origin, out: F32Tensor(nil, BHSD(1, hkv, 0, prefix.V.Dim)),
		q: F32Tensor(nil, BHSD(1, hkv, 0, d))}, &opts)
	if err != nil {
		return err
	}
	p.packed = false
	nk, dv := int(prefix.SeqLens[0]), c.dv
	kOps, vOps := &kvKernels[prefix.K.dtype], &kvKernels[prefix.V.dtype]
	if precision == PrecisionFloat32 {
		err = p.packF32(&c, kOps, vOps, hkv, nk, d, dv)
	} else {
		err = p.packBF16(&c, kOps, vOps, hkv, nk, d, dv)
	}
	if err != nil {
		return fmt.Errorf("%s%w", packFn, err)
	}
	p.prec = precision
	p.kType, p.vType = prefix.K.dtype, prefix.V.dtype
	p.kL, p.vL = prefix.K.Layout, prefix.V.Layout
	p.kAddr, _ = prefix.K.byteRange()
	p.vAddr, _ = prefix.V.byteRange()
	p.kSc.set(&prefix.K)
	p.vSc.set(&prefix.V)
	p.n = nk
	bs := prefix.K.Seq
	p.blocks = append(p.blocks[:0], prefix.BlockTable[:(nk+bs-1)/bs]...)
	p.packed = true
	return nil
}

// packBF16 packs the prefix of validated call c into bfloat16 pair
// panels, laid out as prepack.setup lays out a prefill's.
func (p *PackedPrefix) packBF16(c *call, kOps, vOps *elemKernels, hkv, nk, d, dv int) error {
	pre := &p.pre
	pre.on, pre.ready, pre.f32 = true, true, false
	pre.ldK = 2*roundUp(nk, 16) + panelPad // see bf16Strides
	pre.ldV = 2*roundUp(dv, 16) + panelPad
	pre.kLen = (d + 1) / 2 * pre.ldK
	pre.vLen = (nk + 1) / 2 * pre.ldV
	if n := hkv * pre.kLen; cap(pre.k) < n {
		pre.k = alignedBF16(n)
	}
	if n := hkv * pre.vLen; cap(pre.v) < n {
		pre.v = alignedBF16(n)
	}
	if n := hkv * (nk + 1); cap(pre.bad) < n {
		pre.bad = make([]int32, n)
	}
	if cap(p.row) < pre.ldV {
		p.row = make([]fp16.BFloat16, pre.ldV)
	}
	pre.k, pre.v, pre.bad = pre.k[:cap(pre.k)], pre.v[:cap(pre.v)], pre.bad[:cap(pre.bad)]
	for hk := range hkv {
		src := c.kv.source(0, hk, seg{nk: nk})
		src.kOps, src.vOps = kOps, vOps
		k, v := pre.k[hk*pre.kLen:][:pre.kLen], pre.v[hk*pre.vLen:][:pre.vLen]
		bad := pre.bad[hk*(nk+1):][:nk+1]
		if err := packPanels(&src, k, v, bad, pre.ldK, pre.ldV, 0, nk, d, dv, p.row[:pre.ldV]); err != nil {
			return err
		}
	}
	return nil
}

// packF32 packs the prefix of validated call c into float32 panels: each
// head's keys transposed as packK lays out a tile, with a leading
// dimension padded past a multiple of 1 KiB (the product reads a strip of
// keys from every component row, and rows a power of two apart would
// crowd into a few sets of the L1 cache), and its values as rows of dv.
func (p *PackedPrefix) packF32(c *call, kOps, vOps *elemKernels, hkv, nk, d, dv int) error {
	pre := &p.pre
	pre.on, pre.ready, pre.f32 = true, true, true
	pre.ldKF, pre.ldVF, pre.tileKF = roundUp(nk, 16)+16, dv, 0
	pre.kfLen, pre.vfLen = d*pre.ldKF, nk*dv
	if n := hkv * pre.kfLen; cap(pre.kf) < n {
		pre.kf = make([]float32, n)
	}
	if n := hkv * pre.vfLen; cap(pre.vf) < n {
		pre.vf = make([]float32, n)
	}
	pre.kf, pre.vf = pre.kf[:cap(pre.kf)], pre.vf[:cap(pre.vf)]
	for hk := range hkv {
		src := c.kv.source(0, hk, seg{nk: nk})
		kt, v := pre.kf[hk*pre.kfLen:][:pre.kfLen], pre.vf[hk*pre.vfLen:][:pre.vfLen]
		for j := 0; j < nk; {
			r := src.run(j, nk)
			if err := kOps.packK(kt[j:], pre.ldKF, src.k, src.hk, r.kOff, r.n, d); err != nil {
				return err
			}
			if err := vOps.packV(v[j*dv:], dv, src.v, src.hk, r.vOff, r.n, dv); err != nil {
				return err
			}
			j += r.n
		}
	}
	return nil
}

// matches returns nil if p was packed from prefix, else an error that
// says what differs.
func (p *PackedPrefix) matches(prefix *PagedKV) error {
	const fn = sharedFn + "kv.Packed: "
	if !p.packed {
		return fmt.Errorf("%sholds no prefix; want one packed from kv.Prefix by PackedPrefix.Pack", fn)
	}
	n := int(prefix.SeqLens[0])
	kAddr, _ := prefix.K.byteRange()
	vAddr, _ := prefix.V.byteRange()
	switch {
	case n != p.n:
		return fmt.Errorf("%sholds a prefix of %d positions and kv.Prefix has %d; want the prefix it was packed from", fn, p.n, n)
	case prefix.K.dtype != p.kType || prefix.V.dtype != p.vType || prefix.K.Layout != p.kL || prefix.V.Layout != p.vL ||
		kAddr != p.kAddr || vAddr != p.vAddr:
		return fmt.Errorf("%swas packed from other pools than kv.Prefix's; want the prefix it was packed from", fn)
	case !p.kSc.matches(&prefix.K) || !p.vSc.matches(&prefix.V):
		return fmt.Errorf("%swas packed with other scales than kv.Prefix's; want the prefix it was packed from, packed again after its scales change", fn)
	}
	bs := prefix.K.Seq
	if !slices.Equal(p.blocks, prefix.BlockTable[:(n+bs-1)/bs]) {
		return fmt.Errorf("%swas packed from another block table than kv.Prefix's; want the prefix it was packed from", fn)
	}
	return nil
}

// packedScales is what a call checks of the scales of a pool a
// PackedPrefix was packed from, since the panels hold the values times
// them: where the Q8 or fp8 scales lie and, for fp8 (one scale, or one
// per head: cheap to compare), their values, so that a scale changed in
// place is caught too. Q8's scales, one per block of 32 values, are the
// pool's contents as much as its values are, and are not compared.
type packedScales struct {
	lo, hi uintptr
	fp8    []float32
}

func (s *packedScales) set(t *Tensor) {
	s.lo, s.hi = t.scaleRange()
	s.fp8 = append(s.fp8[:0], t.FP8Scales()...)
}

func (s *packedScales) matches(t *Tensor) bool {
	lo, hi := t.scaleRange()
	return lo == s.lo && hi == s.hi && slices.Equal(s.fp8, t.FP8Scales())
}
