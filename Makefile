# flashgo — the usual targets. `make help` lists them.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCH       ?= .
BENCHTIME   ?= 1s

.PHONY: all help test test-race test-purego bench lint fmt generate attnbench

all: lint test

help:
	@echo "make test         go test ./..."
	@echo "make test-race    go test -race ./attention/... ./kernel/..."
	@echo "make test-purego  go test -tags purego ./..."
	@echo "make bench        go test -run XXX -bench \$$BENCH ./... (BENCHTIME=$(BENCHTIME))"
	@echo "make lint         gofmt -l, go vet, staticcheck (pinned)"
	@echo "make generate     regenerate the generated sources (go generate ./...)"
	@echo "make attnbench    run the default benchmark"

test:
	$(GO) test ./...

test-race:
	$(GO) test -race ./attention/... ./kernel/...

test-purego:
	$(GO) test -tags purego ./...

bench:
	$(GO) test -run XXX -bench '$(BENCH)' -benchtime $(BENCHTIME) ./...

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
