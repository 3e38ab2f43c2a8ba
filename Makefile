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

.PHONY: all help test test-race test-purego bench fuzz lint fmt generate attnbench

all: lint test

help:
	@echo "make              make lint, then make test"
	@echo "make help         this list"
	@echo "make test         go test ./..."
	@echo "make test-race    go test -race ./attention/... ./kernel/..."
	@echo "make test-purego  go test -tags purego ./..."
	@echo "make bench        go test -run XXX -bench \$$BENCH ./... (BENCHTIME=$(BENCHTIME))"
	@echo "make fuzz         every Fuzz target of $(FUZZPKGS), each for FUZZTIME=$(FUZZTIME) (FUZZFLAGS: e.g. -parallel 2)"
	@echo "make lint         gofmt -l, go vet, staticcheck (pinned)"
	@echo "make fmt          gofmt -w the sources"
	@echo "make generate     regenerate the generated sources (go generate ./...)"
	@echo "make attnbench    run the default benchmark"

test:
	$(GO) test ./...

test-race:
	$(GO) test -race -timeout 30m ./attention/... ./kernel/...

test-purego:
	$(GO) test -tags purego ./...

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
