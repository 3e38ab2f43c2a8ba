package attention

import "github.com/flashgo/flashgo/kernel"

// Split-KV decoding (Config.KVSplits). A decode call has one block of query
// positions per (batch entry, K/V head), too few to occupy every thread
// when batch × K/V heads is small. Each such block's visible key tiles are
// then cut into parts folded by different threads (workItem); each part
// leaves its running maximum m, sum z and unnormalised output O, and the
// caller combines them in part order (mergeParts):
//
//	M = max_s m_s,   Z = Σ_s z_s·e^{m_s−M},   O = Σ_s O_s·e^{m_s−M}
//
// which is the log-sum-exp merge of Merge applied to unnormalised partial
// results, after which the block is finished as an unsplit one (division
// by Z, sinks, lse). The split points depend only on the shape and
// KVSplits, and the merge order is fixed, so the result does not depend on
// the thread count.

// splitParts holds the partial accumulators of every part of a call: part
// p of (sequence, K/V head) i of a split sequence plan is slot
// seqPlan.slot0 + i·splits + p, of rows rows.
type splitParts struct {
	rows, ld int
	o        []float32 // slot·rows·ld + r·ld + c
	m, z     []float32 // slot·rows + r
}

// ensure sizes the buffers for slots parts of rows × dim; it allocates only
// when a call needs more than any before it on this (pooled) job.
func (p *splitParts) ensure(slots, rows, dim int) {
	ld := padRow(dim)
	p.rows, p.ld = rows, ld
	if n := slots * rows * ld; cap(p.o) < n {
		p.o = make([]float32, n)
	}
	if n := slots * rows; cap(p.m) < n {
		p.m = make([]float32, n)
		p.z = make([]float32, n)
	}
}

// storePart keeps ws's accumulators as the part in slot i.
func (j *job) storePart(ws *workspace, i int) {
	p := &j.parts
	rows, ld := p.rows, p.ld
	copy(p.o[i*rows*ld:(i+1)*rows*ld], ws.o[:rows*ld])
	copy(p.m[i*rows:(i+1)*rows], ws.m[:rows])
	copy(p.z[i*rows:(i+1)*rows], ws.z[:rows])
}

// merge combines the first rows rows (of head dim d) of the parts in
// slots [base, base+S) in part order into ws's accumulators.
func (p *splitParts) merge(ws *workspace, base, S, rows, d int) {
	ld := p.ld
	for r := range rows {
		mm := negInf
		for s := range S {
			mm = max(mm, p.m[(base+s)*p.rows+r])
		}
		o := ws.o[r*ld : r*ld+d]
		clear(o)
		var z float32
		if mm != negInf {
			for s := range S {
				ms := p.m[(base+s)*p.rows+r]
				if ms == negInf {
					continue // the part saw no key of this row
				}
				a := kernel.Exp(ms - mm)
				z += a * p.z[(base+s)*p.rows+r]
				for k, x := range p.o[((base+s)*p.rows+r)*ld:][:d] {
					o[k] += a * x
				}
			}
		}
		ws.m[r], ws.z[r] = mm, z
	}
}
