package attention_test

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashgo/flashgo/attention"
)

// TestConfigLimits checks that settings that would size the scratch past
// any machine are errors naming the setting and its limit, and that the
// limits themselves are accepted.
func TestConfigLimits(t *testing.T) {
	for _, c := range []struct {
		cfg  attention.Config
		want string
	}{
		{attention.Config{BlockKV: 1 << 26}, "Config.BlockKV is 67108864; want 1 to MaxBlockKV (4096), or 0 for the default 64"},
		{attention.Config{BlockQ: 1 << 30}, "Config.BlockQ is 1073741824; want 1 to MaxBlockQ (4096)"},
		{attention.Config{KVSplits: 1 << 30}, "Config.KVSplits is 1073741824; want 0 (automatic), 1 (no split-KV decoding) or a number of splits from 2 to MaxKVSplits (256)"},
		{attention.Config{Threads: 1 << 30}, "Config.Threads is 1073741824; want 1 to MaxThreads (4096)"},
		{attention.Config{BlockKV: math.MaxInt}, "Config.BlockKV"},
		{attention.Config{BlockQ: math.MinInt}, "Config.BlockQ"},
	} {
		e, err := attention.NewEngine(c.cfg)
		require.ErrorContains(t, err, c.want)
		require.Nil(t, e)
	}
	_, err := attention.NewEngine(attention.Config{BlockQ: attention.MaxBlockQ, BlockKV: attention.MaxBlockKV,
		KVSplits: attention.MaxKVSplits, Threads: attention.MaxThreads})
	require.NoError(t, err)
}

// TestScratchBoundedByProblem runs tiny calls on an engine with the
// largest settings: the scratch must be sized from the problem, not from
// the settings (a 4096 × 4096 score tile alone is 64 MiB).
func TestScratchBoundedByProblem(t *testing.T) {
	e := mustEngine(t, attention.Config{BlockQ: attention.MaxBlockQ, BlockKV: attention.MaxBlockKV, KVSplits: attention.MaxKVSplits, Threads: 1})
	const h, d = 8, 16 // 8 K/V heads: enough blocks that the block size is not halved for the threads
	q := attention.F32Tensor(make([]float32, h*d), attention.BHSD(1, h, 1, d))
	out := attention.F32Tensor(make([]float32, h*d), q.Layout)
	kv := attention.F32Tensor(make([]float32, h*d), attention.BHSD(1, h, 1, d))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, prec := range []attention.Precision{attention.PrecisionFloat32, attention.PrecisionBFloat16} {
		require.NoError(t, e.Forward(out, q, kv, kv, attention.Options{Precision: prec}))
		require.NoError(t, e.Forward(out, q, kv, kv, attention.Options{Precision: prec, Causal: true}))
	}
	runtime.ReadMemStats(&after)
	const limit = 4 << 20
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(limit), "bytes allocated by calls of one query and one key")
}

// TestLargeSettingsSameResult checks that bounding the tile and the number
// of runs by the problem changes no bit: a BlockKV larger than the keys
// gives the result of one just large enough, and a KVSplits larger than
// the number of tiles the result of one equal to it.
func TestLargeSettingsSameResult(t *testing.T) {
	rng := rand.New(rand.NewPCG(141, 142))
	const hq, hkv, nk, d = 4, 2, 300, 32
	q := attention.F32Tensor(randn(rng, hq*d), attention.BHSD(1, hq, 1, d))
	k := attention.F32Tensor(randn(rng, hkv*nk*d), attention.BHSD(1, hkv, nk, d))
	v := attention.F32Tensor(randn(rng, hkv*nk*d), attention.BHSD(1, hkv, nk, d))
	run := func(cfg attention.Config, opts attention.Options) []float32 {
		out := make([]float32, hq*d)
		require.NoError(t, mustEngine(t, cfg).Forward(attention.F32Tensor(out, q.Layout), q, k, v, opts))
		return out
	}
	for _, opts := range []attention.Options{{}, {Causal: true, Window: &attention.Window{Left: 100, Right: 0}}, {Precision: attention.PrecisionBFloat16}} {
		// 300 keys in tiles of 16: 19 tiles.
		require.Equal(t, run(attention.Config{BlockKV: 16, KVSplits: 19}, opts), run(attention.Config{BlockKV: 16, KVSplits: attention.MaxKVSplits}, opts))
		require.Equal(t, run(attention.Config{BlockKV: 300, KVSplits: 1}, opts), run(attention.Config{BlockKV: attention.MaxBlockKV, KVSplits: 1}, opts))
	}
}

// TestCacheSizeLimits checks that caches and slopes too large for any
// machine are errors, not allocations that kill the process.
func TestCacheSizeLimits(t *testing.T) {
	_, err := attention.NewKVCache(attention.F32, 1, 1<<40, 8)
	require.ErrorContains(t, err, "NewKVCache: keys and values of 8796093022208 elements each, stored as f32, take more than MaxCacheBytes (274877906944 bytes)")
	_, err = attention.NewPagedCache(attention.F16, 8, 128, 1<<40, 2)
	require.ErrorContains(t, err, "NewPagedCache: keys and values of")
	require.ErrorContains(t, err, "MaxCacheBytes")
	_, err = attention.NewPagedCache(attention.Q8, 1, 32, 1<<30, 1<<7)
	require.ErrorContains(t, err, "stored as q8, take more than MaxCacheBytes")
	// Under the limit in elements of one tensor, over it with the scales
	// and both tensors: 2 × (2^37·1 + 2^32·4) bytes > 2^38.
	_, err = attention.NewKVCache(attention.Q8, 1, 1<<32, 32)
	require.ErrorContains(t, err, "MaxCacheBytes")
	c, err := attention.NewKVCache(attention.F16, 2, 16, 8)
	require.NoError(t, err)
	require.Equal(t, 16, c.Cap())
}
