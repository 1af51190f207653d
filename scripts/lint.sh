#!/usr/bin/env bash
# Lints the Go code with golangci-lint at the version pinned in
# tools/go.mod (a module of its own, so that an app that imports Trellis
# does not inherit the linter's dependencies). The binary is built into
# .bin/ (Go's build cache makes a rebuild cheap); the checks are in
# .golangci.yml.
#
# Usage: bash scripts/lint.sh [package patterns]   (default ./...)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf 'lint.sh: %s\n' "$*" >&2; }

log "build golangci-lint (tools/go.mod)"
go -C tools build -o ../.bin/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint
log "golangci-lint run ${*:-./...}"
.bin/golangci-lint run --allow-parallel-runners "${@:-./...}"
