# Thin wrappers; scripts/test.sh is the test command.
.PHONY: test bench run vet lint

# All tests against a throwaway Redis: go vet + go test -race.
test:
	bash scripts/test.sh

# Runtime benchmarks.
bench:
	go test -run '^$$' -bench . -benchmem ./runtime/...

# The server on :9000 (override with TRELLIS_HTTP_ADDR or -addr).
run:
	go run ./cmd/server

vet:
	go vet ./...

# golangci-lint at the pinned version (tools/go.mod), with .golangci.yml.
lint:
	bash scripts/lint.sh
