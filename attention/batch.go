package attention

import "fmt"

// ForwardKVCaches computes attention for a batch of requests, each with a
// contiguous cache of its own: batch entry b of q (and out) holds the
// queries of the Nq newest positions of caches[b], whose keys and values
// are all of its Len() cached positions (append the new tokens' K and V
// first). It is flash_attn_with_kvcache's batched decode: the caches may
// have different lengths (its cache_seqlens) and the slice picks which
// caches and in which order (its cache_batch_idx); the same cache may
// appear more than once. With Options{Causal: true} the bottom-right
// alignment makes query i of entry b see the keys up to position i +
// caches[b].Len() − Nq: decoding (Nq = 1), speculative verification (a few
// drafts) and chunked prefill in one form, as ForwardPaged.
//
// A serving loop holds one KVCache per request and decodes all of them in
// one call a step: the work of every request and head is split across the
// engine's threads together, and a long cache's keys across several
// (Config.KVSplits), so a step with a few long requests keeps every thread
// busy.
//
// Shapes: q and out are [len(caches), Hq, Nq, Dim] in F32, F16 or BF16 (as
// in Forward); every cache has the same element type, heads Hkv (Hq a
// multiple of it) and Dim as q. Options are those of ForwardPaged: Forward's
// except Mask, BoolMask and CuSeqKV (errors here: each request's keys are
// its cache's), with Options.TreeMask for draft trees; Window, SoftCap, Slopes and Sinks apply per request with
// its own length. An empty cache gives its rows zeros (and a log-sum-exp
// of −Inf, or their sink's). With Options.CuSeqQ each request has a query
// count of its own, as in ForwardPaged: q and out are [1, Hq, totalQ,
// Dim], CuSeqQ has len(caches)+1 offsets, and request b's
// CuSeqQ[b+1]−CuSeqQ[b] queries are its newest positions (more queries
// than the cache holds give the rows before its first position zeros, as
// an empty cache does; Options.CuSeqQ); each request's rows are bitwise those of this call for its
// cache alone (batch 1, Nq its query count) on the same engine.
//
// The output of each entry is bitwise that of Forward over the cache's
// K() and V() for the same engine configuration when the split of the
// keys is the same (Config.KVSplits 1, or a shape whose automatic split
// agrees). A misuse returns an error and writes nothing; an out or lse
// that shares memory with anything the call reads (q, any cache's storage,
// the options' slices) is one. After the first
// call of a shape it allocates nothing. The caches must not be appended to
// or truncated during the call; any number of calls may read them at once.
func (e *Engine) ForwardKVCaches(out, q Tensor, caches []*KVCache, opts Options) error {
	return e.forwardKVCaches(out, nil, q, caches, opts)
}

// ForwardKVCachesLSE is ForwardKVCaches that also writes each row's
// log-sum-exp into lse, laid out [len(caches), Hq, Nq] contiguously, as
// ForwardLSE does ([1, Hq, totalQ] with Options.CuSeqQ).
func (e *Engine) ForwardKVCachesLSE(out Tensor, lse []float32, q Tensor, caches []*KVCache, opts Options) error {
	if lse == nil {
		return fmt.Errorf("attention: lse is nil; want a slice of B·Hq·Nq = %s elements", rowCountText(q.Layout))
	}
	return e.forwardKVCaches(out, lse, q, caches, opts)
}

func (e *Engine) forwardKVCaches(out Tensor, lse []float32, q Tensor, caches []*KVCache, opts Options) error {
	if err := e.usable(); err != nil {
		return err
	}
	j := e.getJob()
	defer e.putJob(j)
	j.origins.caches = cacheOrigin{caches: caches}
	c, err := validateRequest(&request{fn: "attention: ForwardKVCaches: ", kv: &j.origins.caches, out: out, lse: lse, q: q}, &opts)
	if err != nil {
		return err
	}
	if q.Batch == 0 || q.Seq == 0 {
		return nil
	}
	return e.compute(j, &c)
}
