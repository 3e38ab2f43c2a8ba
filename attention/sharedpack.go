package attention

import (
	"fmt"
	"slices"

	"github.com/flashgo/flashgo/fp16"
)

// PackedPrefix holds a shared prefix's keys and values packed once into
// the bfloat16 pair panels of PrecisionBFloat16's products, for
// ForwardSharedPrefix to read in place of the prefix's pools
// (SharedPrefixKV.Packed). Without it, every call packs every tile of the
// prefix again (fp16, float32 and q8 values are rounded to bfloat16 on
// the way), which costs more than the products on machines with fast
// bfloat16 arithmetic; a decode loop over one prefix packs it once and
// then only streams the panels.
//
// The panels hold the same bits the per-tile packs would, so a call with
// them gives bitwise the result of the call without. They take about as
// much memory as the prefix in bfloat16 (2 bytes an element). A
// PackedPrefix is read only by the calls that use it, and any number of
// them may use it at once; Pack must not run while one does.
//
// The zero PackedPrefix is empty and ready for Pack.
type PackedPrefix struct {
	pre    prepack
	packed bool
	// What the panels were packed from, which a call checks its prefix
	// against: the pools' element types, layouts and first bytes, the
	// length and a copy of the block table.
	kType, vType DType
	kL, vL       Layout
	kAddr, vAddr uintptr
	n            int
	blocks       []int32
	row          []fp16.BFloat16 // packPanels' scratch for a run that starts at an odd key
}

const packFn = "attention: PackedPrefix.Pack: "

// Pack packs prefix, a PagedKV of one sequence (the Prefix of a
// SharedPrefixKV), into p, replacing what p held. It reuses p's memory
// when it is large enough and allocates otherwise. The caller promises
// that the prefix's keys and values do not change while p is used with
// it: the calls read the panels, not the pools, and check only that the
// prefix is the one p was packed from (the same pools, layouts, length
// and block table), not its contents.
func (p *PackedPrefix) Pack(prefix PagedKV) error {
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
	c, err := validateRequest(&request{fn: packFn, src: fromPool, out: F32Tensor(nil, BHSD(1, hkv, 0, prefix.V.Dim)),
		q: F32Tensor(nil, BHSD(1, hkv, 0, d)), pool: prefix}, &opts)
	if err != nil {
		return err
	}
	p.packed = false
	pre := &p.pre
	nk, dv := int(prefix.SeqLens[0]), c.dv
	pre.on, pre.ready = true, true
	pre.ldK = 2*roundUp(nk, 16) + panelPad // as prepack.setup: see bf16Strides
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
	kOps, vOps := &kvKernels[prefix.K.dtype], &kvKernels[prefix.V.dtype]
	for hk := range hkv {
		src := c.paged.source(0, hk, seg{nk: nk})
		src.kOps, src.vOps = kOps, vOps
		k, v := pre.k[hk*pre.kLen:][:pre.kLen], pre.v[hk*pre.vLen:][:pre.vLen]
		bad := pre.bad[hk*(nk+1):][:nk+1]
		if err := packPanels(&src, k, v, bad, pre.ldK, pre.ldV, nk, d, dv, p.row[:pre.ldV]); err != nil {
			return fmt.Errorf("%s%w", packFn, err)
		}
	}
	p.kType, p.vType = prefix.K.dtype, prefix.V.dtype
	p.kL, p.vL = prefix.K.Layout, prefix.V.Layout
	p.kAddr, _ = prefix.K.byteRange()
	p.vAddr, _ = prefix.V.byteRange()
	p.n = nk
	bs := prefix.K.Seq
	p.blocks = append(p.blocks[:0], prefix.BlockTable[:(nk+bs-1)/bs]...)
	p.packed = true
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
	}
	bs := prefix.K.Seq
	if !slices.Equal(p.blocks, prefix.BlockTable[:(n+bs-1)/bs]) {
		return fmt.Errorf("%swas packed from another block table than kv.Prefix's; want the prefix it was packed from", fn)
	}
	return nil
}
