package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/flashgo/flashgo/attention"
)

// fallbackMemory is the memory a run may use when /proc/meminfo cannot be
// read (not Linux, or a sandbox without /proc).
const fallbackMemory = 16 << 30

// availableMemory returns the bytes of memory a run may use: MemAvailable
// from /proc/meminfo, or fallbackMemory. It is a variable so that tests can
// pretend to run on a smaller machine.
var availableMemory = func() (bytes float64, source string) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return fallbackMemory, "fixed cap (no /proc/meminfo)"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 2 && fields[1] == "kB" {
			if kb, err := strconv.ParseFloat(fields[0], 64); err == nil {
				return kb * 1024, "MemAvailable"
			}
		}
	}
	return fallbackMemory, "fixed cap (no MemAvailable in /proc/meminfo)"
}

// memoryNeed estimates the bytes a case of shape s holds at once: Q, the
// output (and the naive baseline's), K and V in float32 plus a rounded copy
// and the storage for f16/bf16/q8, the naive baseline's Nq×Nkv score
// matrix, and the oracle's sub-problem in float64. The extra K/V caches of
// a cold decode run are not included (see kvCaches).
func memoryNeed(c config, s shape) (total float64, parts string) {
	q := float64(s.batch) * float64(s.heads) * float64(s.nq) * float64(s.dim)
	kv := float64(s.batch) * float64(s.kvHeads) * float64(s.nkv) * float64(s.dim)
	inputs := 4*2*q + 4*2*kv // Q, out; K, V as float32
	var storage float64      // the largest storage of a non-float32 type, held with its rounded copy
	for _, dt := range c.kvFor(s) {
		if dt != attention.F32 {
			storage = max(storage, elemBytes(dt)*2*kv)
		}
	}
	if storage > 0 {
		inputs += 4*2*kv + storage
	}
	var naive float64
	if c.naive {
		naive = 4*q + 4*float64(s.nq)*float64(s.nkv)
	}
	var oracle float64
	if c.check {
		sub := pickSub(s)
		rows := float64(sub.batches) * float64(sub.kvHeads*s.heads/s.kvHeads) * float64(sub.rows)
		keys := float64(sub.batches) * float64(sub.kvHeads) * float64(s.nkv)
		oracle = 8*(2*rows*float64(s.dim)+2*keys*float64(s.dim)) + 8*float64(sub.rows)*float64(s.nkv) + 4*rows*float64(s.dim)
	}
	total = inputs + naive + oracle
	parts = fmt.Sprintf("Q, K, V and outputs %s", gib(inputs))
	if naive > 0 {
		parts += fmt.Sprintf(", naive baseline %s (its %d×%d score matrix)", gib(naive), s.nq, s.nkv)
	}
	if oracle > 0 {
		parts += fmt.Sprintf(", oracle %s", gib(oracle))
	}
	return total, parts
}

// checkMemory refuses a run whose largest case would not fit in the
// available memory c.avail, with the extra K/V caches of a cold decode run
// (at least one more copy), or whose bandwidth measurement would not.
func checkMemory(c config) error {
	avail, source := c.avail, c.availSource
	for _, s := range c.shapes {
		need, parts := memoryNeed(c, s)
		if need > avail {
			hint := ""
			if c.naive && 4*float64(s.nq)*float64(s.nkv) > need/2 {
				hint = "; -naive=off drops the baseline's score matrix"
			}
			return fmt.Errorf("shape %s needs about %s (%s) but only %s is available (%s)%s",
				s.name, gib(need), parts, gib(avail), source, hint)
		}
		for _, dt := range c.kvFor(s) {
			n, _ := kvCaches(c, s, dt)
			if n < 2 {
				continue
			}
			if rot := need + float64(n-1)*s.cacheBytes(dt); rot > avail {
				return fmt.Errorf("shape %s with %v K/V needs about %s to time decode on %d copies of its K/V cache (%s each; %s) but only %s is available (%s); -warm times every run on one cache",
					s.name, dt, gib(rot), n, gib(s.cacheBytes(dt)), parts, gib(avail), source)
			}
		}
	}
	if hasDecode(c.shapes) {
		need := float64(bandwidthBytes(slices.Max(c.threads), c.llc.bytes))
		if need > avail {
			return fmt.Errorf("measuring the read bandwidth needs %s (at least 4 × the %s last-level cache) but only %s is available (%s)", gib(need), gib(float64(c.llc.bytes)), gib(avail), source)
		}
	}
	return nil
}

func hasDecode(shapes []shape) bool {
	for _, s := range shapes {
		if s.decode() {
			return true
		}
	}
	return false
}

// gib formats a byte count.
func gib(b float64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	default:
		return fmt.Sprintf("%.0f KiB", b/(1<<10))
	}
}
