package attention

import (
	"sync"

	"github.com/flashgo/flashgo/fp16"
)

// prepack holds the K and V of every (batch entry, K/V head) of a bf16
// prefill call packed once into whole-sequence pair panels. A tile of keys
// [j0, j0+bc) of such a panel is a view of it (the K panel from column
// 2·j0, the V panel from row j0/2 when j0 is even), so the tile loop packs
// nothing per tile: without it every block of query rows packs every tile
// it reads again, which on AMX costs more than the products. Each
// (batch, head) is packed by the first block that reads it, under its own
// lock; the others wait for it. The panels hold the values the per-tile
// packs would (the same kernels, the same rounding), so the output is the
// same bit for bit.
type prepack struct {
	on         bool
	ldK, ldV   int // leading dimensions of the K and V panels
	kLen, vLen int // elements of one (batch, head)'s panel
	k, v       []fp16.BFloat16
	// bad counts the keys of V rows that hold a NaN or ±Inf: entry
	// (batch·heads)·(nk+1) + j is their number among keys [0, j).
	bad  []int32
	mu   []sync.Mutex
	done []bool // guarded by mu: (batch, head) is packed
}

// prepackEnabled is false only in tests that compare the two ways.
var prepackEnabled = true

// maxPrepackBytes bounds the panels of one call; a call that would need
// more packs tile by tile instead.
const maxPrepackBytes = 1 << 30

// setup decides whether call c packs its K and V once, and sizes the
// buffers (allocating only when a call needs more than any before it on
// this pooled job). It needs query blocks that share the tiles (nBlk >= 2),
// tensor views without variable lengths, the packed path (not the row
// kernels of decode) and tiles that start on even keys.
func (p *prepack) setup(c *task, nBlk, blockKV int) {
	p.on = prepackEnabled && c.precision == PrecisionBFloat16 && nBlk >= 2 && !c.direct && c.cuQ == nil &&
		c.src.whole() && blockKV%2 == 0 && c.k.Seq > 0
	if !p.on {
		return
	}
	nk, d := c.k.Seq, c.q.Dim
	p.ldK = 2*roundUp(nk, 16) + panelPad // see bf16Strides
	p.ldV = 2*roundUp(c.dv, 16) + panelPad
	p.kLen = (d + 1) / 2 * p.ldK
	p.vLen = (nk + 1) / 2 * p.ldV
	bh := c.q.Batch * c.k.Heads
	if 2*bh*(p.kLen+p.vLen) > maxPrepackBytes {
		p.on = false
		return
	}
	if n := bh * p.kLen; cap(p.k) < n {
		p.k = alignedBF16(n)
	}
	if n := bh * p.vLen; cap(p.v) < n {
		p.v = alignedBF16(n)
	}
	if n := bh * (nk + 1); cap(p.bad) < n {
		p.bad = make([]int32, n)
	}
	if cap(p.done) < bh {
		p.mu = make([]sync.Mutex, bh)
		p.done = make([]bool, bh)
	}
	clear(p.done[:bh])
}

// panels returns the packed K and V of (batch b, K/V head hk) and the
// prefix counts of its non-finite V rows, packing them first if no block
// has.
func (p *prepack) panels(c *task, b, hk int) (k, v []fp16.BFloat16, bad []int32, err error) {
	i := b*c.k.Heads + hk
	nk, d := c.k.Seq, c.q.Dim
	k, v = p.k[i*p.kLen:][:p.kLen], p.v[i*p.vLen:][:p.vLen]
	bad = p.bad[i*(nk+1):][:nk+1]
	p.mu[i].Lock()
	defer p.mu[i].Unlock()
	if p.done[i] {
		return k, v, bad, nil
	}
	src := c.source(b, hk, seg{nk: nk})
	r := src.run(0, nk) // a tensor view: one run
	if err := src.kOps.packKPairs(k, p.ldK, src.k, src.hk, r.kOff, nk, d); err != nil {
		return nil, nil, nil, err
	}
	finite, err := src.vOps.packVPairs(v, p.ldV, src.v, src.hk, r.vOff, nk, c.dv)
	if err != nil {
		return nil, nil, nil, err
	}
	bad[0] = 0
	for j := range nk {
		n := bad[j]
		if !finite {
			row := v[(j/2)*p.ldV+j%2:]
			for col := range c.dv {
				if row[2*col]&0x7f80 == 0x7f80 {
					n++
					break
				}
			}
		}
		bad[j+1] = n
	}
	p.done[i] = true
	return k, v, bad, nil
}
