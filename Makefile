# The two commands a newcomer needs: `make dev` runs Loom, `make test` runs the suite.
GO ?= go
TEST_TIMEOUT ?= 20m

.PHONY: dev test deps build vet clean

## dev: install missing server packages, build loomd and run it with embedded stores on :8080
dev: deps build
	./bin/loomd dev

## test: install missing server packages and run the whole suite against real servers
test: deps
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

deps:
	./scripts/install-deps.sh

build:
	$(GO) build -o bin/loomd ./cmd/loomd

vet:
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	$(GO) vet ./...

clean:
	rm -rf bin
