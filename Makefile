# The two commands a newcomer needs: `make dev` runs Loom, `make test` runs the suite.
# `make bench` measures it.
GO ?= go
TEST_TIMEOUT ?= 20m

.PHONY: dev test bench deps deps-test build vet clean console

## dev: install missing server packages, build loomd and run it with embedded stores on :8080
dev: deps build
	./bin/loomd dev

## test: install missing server packages (and chromium, for the console's browser tests) and
## run the whole suite against real servers
test: deps-test
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

## bench: run every `loomd bench` scenario at the default size (under 20 minutes on 2 cores) on
## fresh embedded stores; writes docs/bench/results.json and docs/bench/RESULTS.md. BENCH_FLAGS adds flags.
BENCH_FLAGS ?=
bench: deps build
	./bin/loomd bench --out docs/bench/results.json $(BENCH_FLAGS) > docs/bench/RESULTS.md.tmp
	mv docs/bench/RESULTS.md.tmp docs/bench/RESULTS.md
	@cat docs/bench/RESULTS.md

deps:
	./scripts/install-deps.sh

deps-test:
	./scripts/install-deps.sh --browser

build:
	$(GO) build -o bin/loomd ./cmd/loomd

vet:
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	$(GO) vet ./...

## console: bundle the web console's script, console/src with the TypeScript client's
## clients/typescript/src, into console/static/app.js with the esbuild that
## console/package-lock.json pins (node 20+). The bundle is committed, so `go build` and
## `make dev` need no node; the suite rebuilds it and fails when the committed one is stale.
console:
	cd console && npm ci --ignore-scripts --no-audit --no-fund && npm run --silent build

clean:
	rm -rf bin
