package attention

import (
	"sync"

	"github.com/flashgo/flashgo/fp16"
)

// prepack holds the K and V of a prefill call's (batch entry, K/V head)s
// packed once: in bf16 precision into whole-sequence pair panels, in
// float32 into the transposed K panels of its tiles (and V rows, where
// they cannot be read in place). A tile of keys [j0, j0+bc) of such a
// panel is a view of it (the K pair panel from column 2·j0, the V panel
// from row j0/2 when j0 is even; the float32 K panel of tile j0/bkv), so
// the tile loop packs nothing per tile: without it every block of query
// rows packs every tile it reads again, which on AMX costs more than the
// products, and in float32 about a twentieth of the fused fold's time.
// The panels hold the values the per-tile packs would (the same kernels,
// the same rounding), so the output is the same bit for bit.
//
// The panels live in slots, at most maxPrepackBytes of them whatever the
// sequence length. The blocks that need a head's panels first pack them
// together, strip by strip (prepackStrip keys), and wait until the last
// strip is packed. Where every (batch, head) has a slot of its own, that
// is all; where they do not all fit, (batch, head) i uses
// slot i mod slots, and the call hands out its blocks head by head
// (headMajor): the blocks of i take the slot once the last block of
// i − slots has finished with it. That never deadlocks: every block of
// i − slots was handed out before any block of i, to a goroutine that
// waits for nothing older.
type prepack struct {
	on         bool
	ldK, ldV   int // leading dimensions of the K and V panels
	kLen, vLen int // elements of one slot's K and V panels
	nBlk       int // blocks of each (batch, head): the uses of a slot
	slots      int // panels held at once
	k, v       []fp16.BFloat16
	// bad counts the keys of V rows that hold a NaN or ±Inf: entry
	// slot·(nk+1) + j is their number among keys [0, j).
	bad  []int32
	slot []prepackSlot
	// ready: every (batch, head) is packed already and nothing writes the
	// panels (a PackedPrefix's, one slot a head): no slots to wait for.
	ready bool

	// Float32 panels (f32): each head's keys transposed, kf[c·ldKF + j]
	// for component c of key j, as packK lays out a tile, and its values
	// as rows of ldVF, vf[j·ldVF + c], as packV lays them out. A
	// PackedPrefix's (ready) are whole-sequence panels (ldKF, ldVF = dv);
	// a float32 prefill's are tile after tile (tileKF > 0: the panel of
	// tile t, of keys [t·bkv, (t+1)·bkv), is kf[t·tileKF:], leading
	// dimension bkv, as the tile loop packs one into ws.kt), and its
	// values are packed only where they cannot be read in place (vf nil
	// otherwise), in rows of ldVF = padRow(dv).
	f32          bool
	kf, vf       []float32
	ldKF, ldVF   int
	tileKF       int
	kfLen, vfLen int

	// strip is the keys of a strip of the panels' pack: prepackStrip in
	// bf16, a tile in float32.
	strip int
}

// panelsF32 returns the float32 panels of (batch b, K/V head hk) of a
// prepack packed for float32, waiting for its slot and its panels as
// panels does (each call matched by one call of done); v is nil where the
// values are read in place.
func (p *prepack) panelsF32(c *task, b, hk int) (kt, v []float32, err error) {
	i := b*c.k.Heads + hk
	if !p.ready {
		if i, err = p.take(c, b, hk); err != nil {
			return nil, nil, err
		}
	}
	kt = p.kf[i*p.kfLen:][:p.kfLen]
	if p.vfLen > 0 {
		v = p.vf[i*p.vfLen:][:p.vfLen]
	}
	return kt, v, nil
}

// prepackSlot is the state of one slot's panels.
type prepackSlot struct {
	mu sync.Mutex
	// cond is signalled when the last block of the slot's head finishes
	// and when the last strip of its panels is packed.
	cond   sync.Cond
	head   int   // the (batch, head) whose panels the slot holds, or −1
	left   int   // blocks of head that have not finished
	next   int   // strips of head's panels handed out to be packed
	packed int   // strips packed
	err    error // the first error of a strip's pack
}

// prepackStrip is the number of keys a goroutine packs at a time: the
// blocks that wait for a slot's panels pack them together, strip by
// strip, so that the pack of a head does not hold every thread up behind
// one (an even number: a strip starts a V pair row).
const prepackStrip = 64

// prepackEnabled is false only in tests that compare the two ways.
var prepackEnabled = true

// maxPrepackBytes bounds the panels of one call: 64 MiB, the K and V of
// four K/V heads of 32768 keys at head dim 128. A call whose one (batch,
// head) would need more packs tile by tile instead.
var maxPrepackBytes = 64 << 20

// setup sizes the panels of a call c whose path t packs its tiles and
// whose (batch entry, K/V head)s have nBlk query blocks each (makePlan
// decides that it packs them once: packsOnce), and reports whether the
// panels of one (batch entry, K/V head) fit maxPrepackBytes, which the
// call needs to pack them. It allocates only when a call needs more than
// any before it on this pooled job.
func (p *prepack) setup(c *call, t *plan, nBlk int) bool {
	p.ready, p.on = false, true
	if t.precision != PrecisionBFloat16 {
		return p.setupF32(c, nBlk, t.bkv)
	}
	p.f32, p.strip = false, prepackStrip
	nk, d := c.k.Seq, c.q.Dim
	p.ldK = 2*roundUp(nk, 16) + panelPad // see bf16Strides
	p.ldV = 2*roundUp(c.dv, 16) + panelPad
	p.kLen = (d + 1) / 2 * p.ldK
	p.vLen = (nk + 1) / 2 * p.ldV
	p.nBlk = nBlk
	bh := c.q.Batch * c.k.Heads
	p.slots = min(bh, maxPrepackBytes/(2*(p.kLen+p.vLen)+4*(nk+1)))
	if p.slots == 0 {
		p.on = false
		return false
	}
	if n := p.slots * p.kLen; cap(p.k) < n {
		p.k = alignedBF16(n)
	}
	if n := p.slots * p.vLen; cap(p.v) < n {
		p.v = alignedBF16(n)
	}
	if n := p.slots * (nk + 1); cap(p.bad) < n {
		p.bad = make([]int32, n)
	}
	p.initSlots()
	return true
}

// setupF32 is setup for a float32 call: a K panel a tile of blockKV keys,
// and the values' rows where a tile of them is not read in place
// (valuesF32).
func (p *prepack) setupF32(c *call, nBlk, blockKV int) bool {
	nk, d, dv := c.k.Seq, c.q.Dim, c.dv
	p.f32, p.strip, p.nBlk = true, blockKV, nBlk
	p.tileKF = d * blockKV
	p.kfLen = (nk + blockKV - 1) / blockKV * p.tileKF
	p.ldVF, p.vfLen = padRow(dv), 0
	if v := &c.v; v.dtype != F32 || v.SeqStride != dv {
		p.vfLen = nk * p.ldVF
	}
	bh := c.q.Batch * c.k.Heads
	p.slots = min(bh, maxPrepackBytes/(4*(p.kfLen+p.vfLen)))
	if p.slots == 0 {
		p.on = false
		return false
	}
	if n := p.slots * p.kfLen; cap(p.kf) < n {
		p.kf = alignedFloats(n)
	}
	if n := p.slots * p.vfLen; cap(p.vf) < n {
		p.vf = alignedFloats(n)
	}
	p.kf, p.vf = p.kf[:cap(p.kf)], p.vf[:cap(p.vf)]
	p.initSlots()
	return true
}

// initSlots makes the first p.slots slots empty.
func (p *prepack) initSlots() {
	if len(p.slot) < p.slots {
		p.slot = make([]prepackSlot, p.slots)
	}
	for s := range p.slot[:p.slots] {
		sl := &p.slot[s]
		sl.cond.L = &sl.mu
		sl.head, sl.left = -1, 0
	}
}

// headMajor reports whether the call's blocks are handed out head by head
// (its panels do not all fit at once).
func (p *prepack) headMajor(bh int) bool { return p.on && !p.ready && p.slots < bh }

// panels returns the packed K and V of (batch b, K/V head hk) and the
// prefix counts of its non-finite V rows, waiting for its slot and for
// its panels, whose strips it packs with the other blocks that wait for
// them. Each call is matched by one call of done when the block has
// finished with them.
func (p *prepack) panels(c *task, b, hk int) (k, v []fp16.BFloat16, bad []int32, err error) {
	i := b*c.k.Heads + hk
	nk := c.k.Seq
	if !p.ready {
		if i, err = p.take(c, b, hk); err != nil {
			return nil, nil, nil, err
		}
	}
	return p.k[i*p.kLen:][:p.kLen], p.v[i*p.vLen:][:p.vLen], p.bad[i*(nk+1):][:nk+1], nil
}

// take waits for the slot of (batch b, K/V head hk) and for its panels,
// packing strips of them with the other blocks that wait for them, and
// returns the slot.
func (p *prepack) take(c *task, b, hk int) (int, error) {
	i := b*c.k.Heads + hk
	nk := c.k.Seq
	s := i % p.slots
	strips := (nk + p.strip - 1) / p.strip
	sl := &p.slot[s]
	sl.mu.Lock()
	defer sl.mu.Unlock()
	for sl.head != i {
		if sl.left == 0 && sl.head < i {
			sl.head, sl.left, sl.next, sl.packed, sl.err = i, p.nBlk, 0, 0, nil
			break
		}
		sl.cond.Wait()
	}
	for sl.packed < strips {
		if sl.next == strips {
			sl.cond.Wait()
			continue
		}
		j0 := sl.next * p.strip
		sl.next++
		sl.mu.Unlock()
		err := p.packStrip(c, b, hk, s, j0, min(j0+p.strip, nk))
		sl.mu.Lock()
		if err != nil && sl.err == nil {
			sl.err = err
		}
		if sl.packed++; sl.packed == strips {
			if sl.err == nil && !p.f32 {
				bad := p.bad[s*(nk+1):][:nk+1]
				// Each strip counted its own keys: make the counts run
				// over the whole sequence.
				for j := prepackStrip; j < nk; j += prepackStrip {
					carry := bad[j]
					for t := j + 1; t <= min(j+prepackStrip, nk); t++ {
						bad[t] += carry
					}
				}
			}
			sl.cond.Broadcast()
		}
	}
	return s, sl.err
}

// packStrip packs keys [j0, j1) of (batch b, K/V head hk) into the panels
// of slot s. In bf16 (j0 even) it also sets bad[j+1], for j in [j0, j1),
// to the number of keys of [j0, j] whose V row holds a NaN or ±Inf
// (packPanels); in float32 the keys are a tile's, packed as the tile loop
// packs them (f32Math.scores, valuesF32).
func (p *prepack) packStrip(c *task, b, hk, s, j0, j1 int) error {
	src := c.source(b, hk, seg{nk: c.k.Seq})
	if !p.f32 {
		nk := c.k.Seq
		k, v := p.k[s*p.kLen:][:p.kLen], p.v[s*p.vLen:][:p.vLen]
		bad := p.bad[s*(nk+1):][:nk+1]
		// A tensor view is one run from an even key: no odd pair row to
		// stage.
		return packPanels(&src, k, v, bad, p.ldK, p.ldV, j0, j1, c.q.Dim, c.dv, nil)
	}
	kt := p.kf[s*p.kfLen+j0/p.strip*p.tileKF:]
	for j := j0; j < j1; {
		r := src.run(j, j1)
		if err := src.kOps.packK(kt[j-j0:], p.strip, src.k, src.hk, r.kOff, r.n, c.q.Dim); err != nil {
			return err
		}
		if p.vfLen > 0 {
			if err := src.vOps.packV(p.vf[s*p.vfLen+j*p.ldVF:], p.ldVF, src.v, src.hk, r.vOff, r.n, c.dv); err != nil {
				return err
			}
		}
		j += r.n
	}
	return nil
}

// done records that a block of (batch b, K/V head hk) that took its
// panels has finished with them.
func (p *prepack) done(c *task, b, hk int) {
	if p.ready {
		return
	}
	sl := &p.slot[(b*c.k.Heads+hk)%p.slots]
	sl.mu.Lock()
	if sl.left--; sl.left == 0 {
		sl.cond.Broadcast()
	}
	sl.mu.Unlock()
}

// packPanels packs keys [j0, j1) of src (j0 even) into the whole-sequence
// pair panels k (leading dimension ldK) and v (ldV), run by run, and sets
// bad[j+1], for j in [j0, j1), to the number of keys of [j0, j] whose V
// row holds a NaN or ±Inf (and bad[0] = 0 when j0 = 0): over [0, nk) the
// prefix counts of the whole sequence.
// A run that starts at an odd key (a paged pool of odd block size) shares
// its first pair row with the run before: its first value row is packed
// alone into row (one pair row of ldV bfloat16s, allocated when nil) and
// moved from there into the odd slots. The kernels are those of the
// per-tile packs, so the panels hold the same bits.
func packPanels(src *kvSource, k, v []fp16.BFloat16, bad []int32, ldK, ldV, j0, j1, d, dv int, row []fp16.BFloat16) error {
	finite := true
	for j := j0; j < j1; {
		r := src.run(j, j1)
		if err := src.kOps.packKPairs(k[2*j:], ldK, src.k, src.hk, r.kOff, r.n, d); err != nil {
			return err
		}
		off, n, t := r.vOff, r.n, j
		if t%2 == 1 {
			if row == nil {
				row = make([]fp16.BFloat16, ldV)
			}
			f, err := src.vOps.packVPairs(row, ldV, src.v, src.hk, off, 1, dv)
			if err != nil {
				return err
			}
			finite = finite && f
			dst := v[(t/2)*ldV+1:]
			for c := range dv {
				dst[2*c] = row[2*c]
			}
			off, n, t = off+src.v.SeqStride, n-1, t+1
		}
		if n > 0 {
			f, err := src.vOps.packVPairs(v[(t/2)*ldV:], ldV, src.v, src.hk, off, n, dv)
			if err != nil {
				return err
			}
			finite = finite && f
		}
		j += r.n
	}
	if j0 == 0 {
		bad[0] = 0
	}
	var n int32
	for j := j0; j < j1; j++ {
		if !finite {
			row := v[(j/2)*ldV+j%2:]
			for col := range dv {
				if row[2*col]&0x7f80 == 0x7f80 {
					n++
					break
				}
			}
		}
		bad[j+1] = n
	}
	return nil
}
