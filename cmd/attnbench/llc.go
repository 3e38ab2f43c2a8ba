package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/flashgo/flashgo/attention"
)

// A decode step reads its whole K/V cache once, so its speed is that of
// memory, unless the cache is still in the last-level cache from the
// previous run. A model's layers each read their own cache, one after the
// other; to time the same thing, a decode run (Nq = 1) rotates over several
// copies of the K/V cache, enough that together they exceed twice the
// last-level cache, so that each run reads a cache that has been evicted
// since it was last read. -warm turns this off.

// sysfsCPU is the sysfs directory of the CPUs: the cache sizes of cpu0 are
// read from sysfsCPU/cpu0/cache/index*/{level,type,size}. Tests point it
// at a fake tree.
var sysfsCPU = "/sys/devices/system/cpu"

// fallbackLLC is the last-level cache size assumed when sysfs does not
// give one.
const fallbackLLC = 64 << 20

// llcInfo is the size of the last-level cache and where it comes from.
type llcInfo struct {
	bytes  int64
	source string // "L3 of cpu0, sysfs", or why the fallback was assumed
}

func (l llcInfo) String() string { return fmt.Sprintf("%s (%s)", gib(float64(l.bytes)), l.source) }

// lastLevelCache reads the size of cpu0's last-level cache under root (a
// sysfs CPU directory): the largest data or unified cache of the highest
// level listed in root/cpu0/cache/index*/. It returns fallbackLLC when
// there is none.
func lastLevelCache(root string) llcInfo {
	dirs, _ := filepath.Glob(filepath.Join(root, "cpu0", "cache", "index*"))
	level, size := 0, int64(0)
	for _, d := range dirs {
		l, err := strconv.Atoi(readTrimmed(filepath.Join(d, "level")))
		if err != nil || l < 1 {
			continue
		}
		if strings.EqualFold(readTrimmed(filepath.Join(d, "type")), "Instruction") {
			continue
		}
		b, err := parseCacheSize(readTrimmed(filepath.Join(d, "size")))
		if err != nil || b <= 0 {
			continue
		}
		if l > level || (l == level && b > size) {
			level, size = l, b
		}
	}
	if level == 0 {
		return llcInfo{bytes: fallbackLLC, source: "assumed: no cache size in " + filepath.Join(root, "cpu0", "cache")}
	}
	return llcInfo{bytes: size, source: fmt.Sprintf("L%d of cpu0, sysfs", level)}
}

// readTrimmed returns the contents of a small file without surrounding
// blanks, or "" when it cannot be read.
func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// parseCacheSize reads a cache size as sysfs writes it: a number of bytes
// with an optional binary unit, "32768K", "32M", "1G" (K, KB, KiB and so
// on, in either case).
func parseCacheSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		}
		if mult > 1 {
			t = strings.TrimSpace(t[:len(t)-1])
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<50)/mult { // over a PiB: not a cache size
		return 0, fmt.Errorf("cache size %q: want a number of bytes with an optional unit (K, M, G)", s)
	}
	return n * mult, nil
}

// rotationCount is the number of K/V caches of cacheBytes each that a cold
// decode run rotates over: enough that together they exceed twice the
// last-level cache of llcBytes, and at least 2.
func rotationCount(cacheBytes, llcBytes int64) int {
	if cacheBytes <= 0 {
		return 2
	}
	return int(max(2, 2*max(llcBytes, 0)/cacheBytes+1))
}

// elemBytes is the storage of one K or V element in bytes, Q8's share of
// its block scale (4 bytes per attention.Q8Block values) included.
func elemBytes(dt attention.DType) float64 {
	if dt == attention.Q8 {
		return 1 + 4.0/attention.Q8Block
	}
	return float64(dt.Size())
}

// cacheBytes is the storage of one copy of the shape's whole K and V in
// type dt: 2·B·Hkv·Nkv·d elements.
func (s shape) cacheBytes(dt attention.DType) float64 {
	return 2 * float64(s.batch) * float64(s.kvHeads) * float64(s.nkv) * float64(s.dim) * elemBytes(dt)
}

// rotationShare is the part of the available memory that a run may fill
// with K/V copies beyond what it needs anyway; the rest is left to the
// system.
const rotationShare = 0.75

// kvCaches is the number of K/V caches the runs of shape s with K/V type
// dt rotate over: 1 for prefill and under -warm; for decode rotationCount
// of the bytes a run reads (all of K and V, or under a sliding window the
// keys it shows), lowered to what fits in rotationShare of the available
// memory and, for a window, to 4 × the last-level cache in all (capped
// reports either), but never below 2. checkMemory refuses a run where even
// 2 do not fit.
func kvCaches(c config, s shape, dt attention.DType) (n int, capped bool) {
	if c.warm || !s.decode() {
		return 1, false
	}
	one := s.cacheBytes(dt)
	want := rotationCount(int64(s.kvBytes(dt)), c.llc.bytes)
	base, _ := memoryNeed(c, s)
	fit := min(1+(rotationShare*c.avail-base)/one, max(4*float64(c.llc.bytes), 2*one)/one)
	if float64(want) <= fit {
		return want, false
	}
	return max(2, int(fit)), true
}
