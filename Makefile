# svc build and test entry points. `make help` lists the targets.

SHELL := bash
.DEFAULT_GOAL := build

VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
GO ?= go
LDFLAGS := -X main.version=$(VERSION)

# Extra flags for the test targets, e.g. `make test GOTESTFLAGS=-race` or
# `make test GOTESTFLAGS='-run TestStore -v'`. -race is not on by default:
# the machine has 2 cores and the race detector slows the suite several-fold.
GOTESTFLAGS ?=
# Extra flags for `make bench`, e.g. BENCHFLAGS='-benchtime=2s -count=3'.
BENCHFLAGS ?=
# Time per fuzz target for `make fuzz` (a go test -fuzztime value; `make
# test` fuzzes each target for scripts/fuzz.sh's short default).
FUZZTIME ?= 60s

.PHONY: help build run sdk test test-short fuzz lint bench fmt vet clean

help:
	@echo "targets:"
	@echo "  build       go build -o bin/svc ./cmd/svc (version $(VERSION))"
	@echo "  run         build, then SVC_BOOTSTRAP_TENANT=default ./bin/svc serve"
	@echo "  sdk         build bin/svc and every SDK under sdk/ with its conformance driver (scripts/sdk.sh build)"
	@echo "  test        all tests with real Postgres + Valkey (scripts/testenv.sh); GOTESTFLAGS=..."
	@echo "  test-short  go test -short ./... without services"
	@echo "  fuzz        every fuzz target for FUZZTIME each (scripts/fuzz.sh; default $(FUZZTIME))"
	@echo "  lint        scripts/lint.sh (gofmt, go vet, golangci-lint)"
	@echo "  bench       benchmarks with real services; BENCHFLAGS=..."
	@echo "  fmt         gofmt -w"
	@echo "  vet         go vet ./..."
	@echo "  clean       remove bin/ and svc.db*"

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/svc ./cmd/svc

run: build
	SVC_BOOTSTRAP_TENANT=default ./bin/svc serve

# -timeout is a hang detector, not a budget: the longest package, svc/e2e,
# takes about 5 minutes under -race on 2 cores alone and longer while the
# other packages run beside it.
# The SDK step runs each SDK's own suite (vectors and a live suite against
# bin/svc, built from this commit) inside the same provisioned services.
sdk: build
	bash scripts/sdk.sh build

test: sdk
	bash scripts/testenv.sh -- bash -c 'SVC_SDK_REQUIRE=1 $(GO) test -race -count=1 -timeout 20m $(GOTESTFLAGS) ./... && SVC_BIN="$$PWD/bin/svc" bash scripts/sdk.sh test'
	GO='$(GO)' bash scripts/fuzz.sh

test-short:
	$(GO) test -short -count=1 $(GOTESTFLAGS) ./...

lint:
	bash scripts/lint.sh

fuzz:
	FUZZTIME='$(FUZZTIME)' GO='$(GO)' bash scripts/fuzz.sh

bench:
	GO='$(GO)' BENCHFLAGS='$(BENCHFLAGS)' bash scripts/bench.sh

fmt:
	find . -path ./bin -prune -o -path ./vendor -prune -o -path ./.git -prune -o \
		-name '*.go' -type f -print0 | xargs -0 -r gofmt -w

vet:
	$(GO) vet ./...

clean:
	rm -rf bin/ svc.db svc.db-wal svc.db-shm
