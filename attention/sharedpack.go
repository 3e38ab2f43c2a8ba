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
// it at once; Pack (or Engine.PackPrefix) must not run while one does.
//
// Memory: the panels of a prefix of n positions, Hkv K/V heads, key head
// dim d and value head dim dv take, whatever the pools' element type
// (f16, bf16, q8 and fp8 pools are widened to the precision's type),
//
//	PrecisionFloat32:  4·Hkv·(d·(⌈n/16⌉·16 + 16) + n·dv) bytes
//	PrecisionBFloat16: 2·Hkv·(⌈d/2⌉·(2·⌈n/16⌉·16 + 32) + ⌈n/2⌉·(2·⌈dv/16⌉·16 + 32)) + 4·Hkv·(n + 1) bytes
//
// (in float32 each head's keys transposed, d rows of a leading dimension
// padded past a multiple of 16, and its values as n rows of dv; in
// bfloat16 the pair panels of keys and values, each pair row padded by 32
// elements, and a count of the non-finite value rows before each key).
// An 8192-position prefix over 8 K/V heads of dim 128 (a layer of Llama 3
// 8B) takes 67,174,400 bytes (64.06 MiB) in float32, twice its f16 cache
// (32 MiB), and 35,946,528 bytes (34.28 MiB) in bfloat16; a model keeps a
// PackedPrefix a layer. Bytes reports what a PackedPrefix holds: after
// its first pack, the formula and its bookkeeping (4 bytes a block of
// the prefix, and what Bytes lists). Pack reuses the panels of an
// earlier, larger prefix, so one PackedPrefix packed again and again
// holds the largest.
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
	// rows is packPanels' scratch for runs that start at an odd key (a
	// pool of odd block size): a pair row of the V panel for each strip.
	rows []fp16.BFloat16
	odd  bool // the pools' block size is odd: the strips stage in rows

	// The pack in progress, during Pack: the prefix (here, not on the
	// stack, where validation would make it escape), its element kernels
	// and shape; it is cut into strips of packStrip keys of a K/V head,
	// each packed by packItem.
	origin     poolOrigin
	kOps, vOps *elemKernels
	hkv, d, dv int
	strips     int
}

const packFn = "attention: PackedPrefix.Pack: "

// packStrip is the number of keys of one K/V head that one work item of
// a pack packs (packItem): a multiple of 16, so that the strips' columns
// of the float32 K panels start on cache lines, and even, so that they
// start a pair row of the bfloat16 panels. The strips change no bit.
const packStrip = 256

// Pack packs prefix, a PagedKV of one sequence (the Prefix of a
// SharedPrefixKV, or prefix g of one with Groups: Prefix.Sequence(g)),
// into p for calls in precision (PrecisionFloat32 or PrecisionBFloat16),
// replacing what p held, on the calling goroutine (Engine.PackPrefix packs
// on an engine's threads, bitwise the same). It reuses p's memory when it
// is large enough and allocates otherwise. The caller promises that the
// prefix's keys and values do not change while p is used with it: the
// calls read the panels, not the pools, and check only that the prefix is
// the one p was packed from (the same pools, layouts, length and block
// table, and the same scale slices of Q8 or fp8 pools, holding for fp8 the
// same values), not its keys and values. Arguments it refuses (an error
// that names them) leave p as it was.
func (p *PackedPrefix) Pack(prefix PagedKV, precision Precision) error {
	return p.pack(nil, prefix, precision)
}

// PackPrefix is p.Pack(prefix, precision) on e's threads: the prefix's K/V
// heads, cut into strips of 256 keys, are the work items of e's worker
// pool (Config.Threads goroutines), as a call's are. The panels are
// bitwise those of Pack whatever the thread count (each strip is packed
// by the same code, into its own part of them). Packing a long prefix
// costs about a decode step on one thread (an 8192-position prefix over
// 8 K/V heads of dim 128: tens of milliseconds), which a runtime packing
// a new system prompt would otherwise pay on one core while the others
// wait. Like the calls, it allocates nothing once p's memory is large
// enough and e has run a call.
func (e *Engine) PackPrefix(p *PackedPrefix, prefix PagedKV, precision Precision) error {
	if err := e.usable(); err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("attention: Engine.PackPrefix: p is nil; want a PackedPrefix")
	}
	return p.pack(e, prefix, precision)
}

// pack is Pack on e's threads, or on the calling goroutine when e is nil.
func (p *PackedPrefix) pack(e *Engine, prefix PagedKV, precision Precision) error {
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
	nk := int(prefix.SeqLens[0])
	p.kOps, p.vOps = &kvKernels[prefix.K.dtype], &kvKernels[prefix.V.dtype]
	defer func() { p.kOps, p.vOps = nil, nil }()
	p.hkv, p.d, p.dv, p.n = hkv, d, c.dv, nk
	p.strips = ceilDiv(nk, packStrip)
	if precision == PrecisionFloat32 {
		p.setupF32()
	} else {
		p.setupBF16(prefix.K.Seq%2 == 1)
	}
	if err := p.packStrips(e); err != nil {
		return fmt.Errorf("%s%w", packFn, err)
	}
	if precision == PrecisionBFloat16 {
		// Each strip counted its own keys' non-finite value rows: make
		// the counts run over the whole prefix.
		pre := &p.pre
		for hk := range hkv {
			bad := pre.bad[hk*(nk+1):][:nk+1]
			for j := packStrip; j < nk; j += packStrip {
				carry := bad[j]
				for t := j + 1; t <= min(j+packStrip, nk); t++ {
					bad[t] += carry
				}
			}
		}
	}
	p.prec = precision
	p.kType, p.vType = prefix.K.dtype, prefix.V.dtype
	p.kL, p.vL = prefix.K.Layout, prefix.V.Layout
	p.kAddr, _ = prefix.K.byteRange()
	p.vAddr, _ = prefix.V.byteRange()
	p.kSc.set(&prefix.K)
	p.vSc.set(&prefix.V)
	bs := prefix.K.Seq
	nb := (nk + bs - 1) / bs
	if cap(p.blocks) < nb {
		p.blocks = make([]int32, nb)
	}
	p.blocks = p.blocks[:nb]
	copy(p.blocks, prefix.BlockTable[:nb])
	p.packed = true
	return nil
}

// packStrips packs every strip of every K/V head: on e's worker pool, or
// one after another on the calling goroutine when e is nil.
func (p *PackedPrefix) packStrips(e *Engine) error {
	items := p.hkv * p.strips
	if e == nil || items <= 1 || e.threadCount() == 1 {
		for i := range items {
			if err := p.packItem(i); err != nil {
				return err
			}
		}
		return nil
	}
	j := e.getJob()
	defer e.putJob(j)
	j.e, j.pack, j.total = e, p, items
	return e.runJob(j, min(e.threadCount(), items)-1)
}

// setupBF16 sizes the bfloat16 pair panels, laid out as prepack.setup lays
// out a prefill's, and the staging rows of strips whose runs may start at
// an odd key (oddBlocks: a pool of odd block size).
func (p *PackedPrefix) setupBF16(oddBlocks bool) {
	pre := &p.pre
	hkv, nk, d, dv := p.hkv, p.n, p.d, p.dv
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
	p.odd = oddBlocks
	if n := hkv * p.strips * pre.ldV; oddBlocks && cap(p.rows) < n {
		p.rows = make([]fp16.BFloat16, n)
	}
	pre.k, pre.v, pre.bad = pre.k[:cap(pre.k)], pre.v[:cap(pre.v)], pre.bad[:cap(pre.bad)]
}

// setupF32 sizes the float32 panels: each head's keys transposed as packK
// lays out a tile, with a leading dimension padded past a multiple of 1
// KiB (the product reads a strip of keys from every component row, and
// rows a power of two apart would crowd into a few sets of the L1 cache),
// and its values as rows of dv.
func (p *PackedPrefix) setupF32() {
	pre := &p.pre
	hkv, nk, d, dv := p.hkv, p.n, p.d, p.dv
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
}

// packItem packs work item i of a pack: keys [j0, j1) of K/V head hk,
// strip i mod strips of head i / strips, into that head's panels, which
// no other item writes (a strip's float32 key columns and value rows, or
// its bfloat16 pair columns and pair rows, j0 being even, and its counts
// of non-finite value rows, over its own keys until Pack adds them up).
func (p *PackedPrefix) packItem(i int) error {
	pre := &p.pre
	hk, st := i/p.strips, i%p.strips
	nk, d, dv := p.n, p.d, p.dv
	j0 := st * packStrip
	j1 := min(j0+packStrip, nk)
	src := p.origin.source(0, hk, seg{nk: nk})
	src.kOps, src.vOps = p.kOps, p.vOps
	if !pre.f32 {
		k, v := pre.k[hk*pre.kLen:][:pre.kLen], pre.v[hk*pre.vLen:][:pre.vLen]
		bad := pre.bad[hk*(nk+1):][:nk+1]
		var row []fp16.BFloat16
		if p.odd {
			row = p.rows[i*pre.ldV:][:pre.ldV]
		}
		return packPanels(&src, k, v, bad, pre.ldK, pre.ldV, j0, j1, d, dv, row)
	}
	kt, v := pre.kf[hk*pre.kfLen:][:pre.kfLen], pre.vf[hk*pre.vfLen:][:pre.vfLen]
	for j := j0; j < j1; {
		r := src.run(j, j1)
		if err := p.kOps.packK(kt[j:], pre.ldKF, src.k, src.hk, r.kOff, r.n, d); err != nil {
			return err
		}
		if err := p.vOps.packV(v[j*dv:], dv, src.v, src.hk, r.vOff, r.n, dv); err != nil {
			return err
		}
		j += r.n
	}
	return nil
}

// Bytes returns the memory p holds, in bytes: its panels (the formula of
// PackedPrefix's doc for the prefix last packed, or more where p keeps
// the larger panels of an earlier prefix) and its bookkeeping (a copy of
// the block table; staging rows where the pools' block size is odd;
// fp8 scales), and the panels of the other precision where p was ever
// packed for it. The zero PackedPrefix holds 0.
func (p *PackedPrefix) Bytes() int {
	pre := &p.pre
	return 2*(cap(pre.k)+cap(pre.v)+cap(p.rows)) + 4*(cap(pre.bad)+cap(pre.kf)+cap(pre.vf)+cap(p.blocks)+cap(p.kSc.fp8)+cap(p.vSc.fp8))
}

// matches returns nil if p was packed from prefix, else an error that
// says what differs, naming p as name (name[g] for kv.PackedGroups).
func (p *PackedPrefix) matches(name string, g int, prefix PagedKV) error {
	if !p.packed {
		return fmt.Errorf("%s%s: holds no prefix; want one packed from %s by PackedPrefix.Pack", sharedFn, packName(name, g), prefixName(name, g))
	}
	n := int(prefix.SeqLens[0])
	kAddr, _ := prefix.K.byteRange()
	vAddr, _ := prefix.V.byteRange()
	switch {
	case n != p.n:
		return fmt.Errorf("%s%s: holds a prefix of %d positions and %s has %d; want the prefix it was packed from", sharedFn, packName(name, g), p.n, prefixName(name, g), n)
	case prefix.K.dtype != p.kType || prefix.V.dtype != p.vType || prefix.K.Layout != p.kL || prefix.V.Layout != p.vL ||
		kAddr != p.kAddr || vAddr != p.vAddr:
		return fmt.Errorf("%s%s: was packed from other pools than %s's; want the prefix it was packed from", sharedFn, packName(name, g), prefixName(name, g))
	case !p.kSc.matches(&prefix.K) || !p.vSc.matches(&prefix.V):
		return fmt.Errorf("%s%s: was packed with other scales than %s's; want the prefix it was packed from, packed again after its scales change", sharedFn, packName(name, g), prefixName(name, g))
	}
	bs := prefix.K.Seq
	if !slices.Equal(p.blocks, prefix.BlockTable[:(n+bs-1)/bs]) {
		return fmt.Errorf("%s%s: was packed from another block table than %s's; want the prefix it was packed from", sharedFn, packName(name, g), prefixName(name, g))
	}
	return nil
}

// packName and prefixName name the panels of prefix g and the prefix in
// an error: kv.Packed and kv.Prefix, or kv.PackedGroups[g] and prefix g
// of kv.Prefix.
func packName(name string, g int) string {
	if name == "kv.Packed" {
		return name
	}
	return fmt.Sprintf("%s[%d]", name, g)
}

func prefixName(name string, g int) string {
	if name == "kv.Packed" {
		return "kv.Prefix"
	}
	return fmt.Sprintf("kv.Prefix.Sequence(%d)", g)
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
