# flashgo — the usual targets. `make help` lists them.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCH       ?= .
BENCHTIME   ?= 1s
# make fuzz: each Fuzz target of FUZZPKGS for FUZZTIME, one after another.
# FUZZTIME may be a duration (1m) or a count of inputs (20000x, what CI
# uses: a count is not subject to the deadline races of the fuzz
# coordinator).
FUZZPKGS    ?= ./...
FUZZTIME    ?= 1m
FUZZMINIMIZETIME ?= 10s
FUZZFLAGS   ?=
# make test-race: the concurrency tests, under the race detector, at one
# kernel level (internal/impltest: the best alone under -race). Engine
# reuse across goroutines (TestConcurrentUse, TestThreadsConcurrentCallers,
# TestKVCachesConcurrent, TestPagedConcurrent), the worker pool (the
# Threads*Bitwise tests), the prepacked panels' slots (TestBF16Prepack*,
# TestBF16FusedMatchesUnfused), split-KV merges (the SplitKVDecode tests,
# TestPagedAutoSplitMatchesForward), mixed work lists (the
# MixedMatchesPerSequence tests), fused heads, the shared prefix's two
# calls and its cascades (TestSharedPrefixCascadeMatchesSeparateCalls),
# the pool's packs of a prefix (TestPackPrefixThreads), concurrent pool
# writes (TestPagedKVWriteConcurrent); model's parallel projections and
# attnbench's progress bar.
# docs/testing.md says why these.
RACETESTS   ?= ^(TestConcurrentUse|TestThreads.*|TestKVCachesConcurrent|TestPagedConcurrent|TestFeaturesThreadsBitwise|TestBF16ThreadsBitwise|TestBF16Prepack(Slots|MatchesTiles|DimV)|TestPrepackF32MatchesTiles|TestBF16FusedMatchesUnfused|TestFusedHeadsMatchPerHead|TestSplitKVDecode|TestBF16SplitKVDecode|TestPagedAutoSplitMatchesForward|TestPaged(KV)?MixedMatchesPerSequence|TestPagedKVWriteConcurrent|TestSharedPrefixThreadsAndPacked|TestSharedPrefixCascadeMatchesSeparateCalls|TestPackPrefixThreads|TestParallelProjections|TestStoriesPrefillEqualsDecode|TestProgressStopRace)$$
RACEPKGS    ?= ./attention/ ./model/ ./cmd/attnbench/

.PHONY: all help test test-long test-race test-purego test-arm64 bench fuzz lint fmt generate attnbench

all: lint test

help:
	@echo "make              make lint, then make test"
	@echo "make help         this list"
	@echo "make test         the fast tier: go test ./... (minutes; docs/testing.md)"
	@echo "make test-long    the long tier: FLASHGO_TEST_LONG=1 go test ./..., every level and every cell"
	@echo "make test-race    the concurrency tests under the race detector (RACETESTS)"
	@echo "make test-purego  the fast tier with -tags purego (the generic kernels alone)"
	@echo "make test-arm64   go vet, then kernel's and attention's fast tier, for arm64 under qemu-aarch64"
	@echo "make bench        go test -run XXX -bench \$$BENCH ./... (BENCHTIME=$(BENCHTIME))"
	@echo "make fuzz         every Fuzz target of $(FUZZPKGS), each for FUZZTIME=$(FUZZTIME) (FUZZFLAGS: e.g. -parallel 2)"
	@echo "make lint         gofmt -l, go vet, staticcheck (pinned)"
	@echo "make fmt          gofmt -w the sources"
	@echo "make generate     regenerate the generated sources (go generate ./...)"
	@echo "make attnbench    run the default benchmark"

test:
	$(GO) test ./...

# The long tier is minutes of the whole machine: past go test's default
# limit of 10 minutes per package on a loaded two-core machine.
test-long:
	FLASHGO_TEST_LONG=1 $(GO) test -timeout 60m ./...

test-race:
	$(GO) test -race -run '$(RACETESTS)' $(RACEPKGS)

test-purego:
	$(GO) test -tags purego ./...

# -short: the fast tier, less the few tests too large for an emulator
# (a bf16 prefill over 32768 keys). Emulation makes attention's fast tier
# many minutes, past go test's default limit of 10.
test-arm64:
	GOARCH=arm64 $(GO) vet ./...
	GOARCH=arm64 $(GO) test -short -timeout 30m -exec qemu-aarch64 ./kernel/... ./attention/...

bench:
	$(GO) test -run XXX -bench '$(BENCH)' -benchtime $(BENCHTIME) ./...

# The targets are listed by go test -list, so those of every build
# (architecture, tags) that compiles here are found; the seed corpora
# (testdata/fuzz and f.Add) run first, as in go test.
fuzz:
	@set -e; for pkg in $$($(GO) list $(FUZZPKGS)); do \
		for name in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "=== $$name ($$pkg, $(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $(FUZZFLAGS) $$pkg; \
		done; \
	done

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

fmt:
	gofmt -w .

generate:
	$(GO) generate ./...

attnbench:
	$(GO) run ./cmd/attnbench
