#!/usr/bin/env bash
# The project's test command: checks that the generated API code is up to
# date and lints the OpenAPI spec, starts a throwaway Redis on a free
# loopback port, then runs go vet and go test -race against it.
#
# Usage: bash scripts/test.sh [package patterns] [go test flags]
#   Arguments that start with ./ or ../ (or are exactly .) are package
#   patterns for both go vet and go test (default ./...); all other arguments
#   are passed to go test, e.g. bash scripts/test.sh ./internal/... -run Redis
#
# Needs only Go and bash; installs redis-server with apt-get if it is missing.
set -euo pipefail

log() { printf 'test.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

cd "$(dirname "${BASH_SOURCE[0]}")/.."

command -v go >/dev/null 2>&1 || die "go is not on PATH; install Go (see go.mod for the version)"

# --- the contract -----------------------------------------------------------
# The generated API code (api/api.gen.go, api/admin/admin.gen.go) must be
# what `go generate` makes of api/openapi.yaml. The generated files are
# compared before and after regenerating them (rather than with git diff,
# which would also flag uncommitted edits of the spec).
generated_sum() {
	cat api/*.gen.go api/admin/*.gen.go | cksum
}
check_generated() {
	local before after
	before=$(generated_sum)
	log "go generate ./..."
	go generate ./... || die "go generate failed"
	after=$(generated_sum)
	if [[ $before != "$after" ]]; then
		if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
			git --no-pager diff --stat -- api/ >&2 || true
		fi
		die "the generated API code (api/*.gen.go, api/admin/*.gen.go) was stale: it is not what go generate makes of api/openapi.yaml. The regenerated files are now in your work tree; review and commit them."
	fi
}

# The spec must pass Redocly's recommended rules without errors. The linter
# is an npm package, so this runs only where node is installed; a machine
# with only Go skips it (and says so).
lint_spec() {
	if ! command -v npx >/dev/null 2>&1; then
		log "npx not found: skipping the OpenAPI lint (install Node.js to run it)"
		return 0
	fi
	log "lint api/openapi.yaml (@redocly/cli, recommended rules)"
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_UPDATE_NOTIFIER=1 \
		npx --yes @redocly/cli@2.77.0 lint --extends=recommended --format=stylish api/openapi.yaml ||
		die "api/openapi.yaml fails the OpenAPI lint (see above)"
}

check_generated
lint_spec

# --- redis-server -----------------------------------------------------------
install_redis() {
	command -v apt-get >/dev/null 2>&1 ||
		die "redis-server is not on PATH and apt-get is not available; install redis-server yourself and re-run"
	local sudo=()
	if [[ $(id -u) -ne 0 ]]; then
		command -v sudo >/dev/null 2>&1 ||
			die "redis-server is not on PATH; installing it needs root, and sudo is not available (run: apt-get install -y redis-server)"
		sudo=(sudo)
	fi
	log "redis-server not found; installing it with apt-get"
	"${sudo[@]}" apt-get update ||
		die "apt-get update failed; install redis-server yourself and re-run"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server ||
		die "apt-get install -y redis-server failed; install redis-server yourself and re-run"
	command -v redis-server >/dev/null 2>&1 ||
		die "redis-server is still not on PATH after installing it"
}
command -v redis-server >/dev/null 2>&1 || install_redis

# --- cleanup ----------------------------------------------------------------
REDIS_PID=""
TMP_DIR=""
# stop_redis: kills the redis-server this script started (only that PID).
stop_redis() {
	if [[ -n $REDIS_PID ]]; then
		kill "$REDIS_PID" 2>/dev/null || true
		wait "$REDIS_PID" 2>/dev/null || true
		REDIS_PID=""
	fi
}
cleanup() {
	stop_redis
	if [[ -n $TMP_DIR ]]; then
		rm -rf "$TMP_DIR"
		TMP_DIR=""
	fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

TMP_DIR=$(mktemp -d "${TMPDIR:-/tmp}/trellis-test.XXXXXX")

# --- start redis ------------------------------------------------------------
# port_in_use PORT: true if something accepts TCP connections on 127.0.0.1:PORT.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# redis_answers PORT: true if a Redis on 127.0.0.1:PORT answers PING.
redis_answers() {
	if command -v redis-cli >/dev/null 2>&1; then
		[[ $(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null) == PONG ]]
	else
		(
			exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
			printf 'PING\r\n' >&3
			IFS= read -r -t 1 reply <&3 || exit 1
			[[ $reply == +PONG* ]]
		) 2>/dev/null
	fi
}

# free_port: prints a loopback port nothing listens on, trying from a random start.
free_port() {
	local port=$((20000 + RANDOM % 40000)) i
	for ((i = 0; i < 200; i++)); do
		if ! port_in_use "$port"; then
			echo "$port"
			return 0
		fi
		port=$((port + 1))
		((port < 60000)) || port=20000
	done
	return 1
}

# start_redis PORT: starts redis-server in the background and waits up to
# ~10 s for it to answer. Fails if it exits (e.g. the port was taken) or
# does not answer in time.
start_redis() {
	local port=$1 i
	log "starting redis on 127.0.0.1:$port"
	redis-server --port "$port" --bind 127.0.0.1 --dir "$TMP_DIR" \
		--save '' --appendonly no --daemonize no >"$TMP_DIR/redis.log" 2>&1 &
	REDIS_PID=$!
	for ((i = 0; i < 100; i++)); do
		# Our server must be running and say it is ready, so that a PING
		# answered by some other Redis on the same port does not count.
		if kill -0 "$REDIS_PID" 2>/dev/null &&
			grep -qi 'ready to accept connections' "$TMP_DIR/redis.log" &&
			redis_answers "$port"; then
			return 0
		fi
		if ! kill -0 "$REDIS_PID" 2>/dev/null; then
			stop_redis
			log "redis-server exited early:"
			sed 's/^/  /' "$TMP_DIR/redis.log" >&2 || true
			return 1
		fi
		sleep 0.1
	done
	log "redis-server did not answer on 127.0.0.1:$port within 10 s:"
	sed 's/^/  /' "$TMP_DIR/redis.log" >&2 || true
	stop_redis
	return 1
}

PORT=""
for attempt in 1 2 3; do
	port=$(free_port) || die "no free loopback port found"
	if start_redis "$port"; then
		PORT=$port
		break
	fi
	log "retrying with another port (attempt $attempt of 3 failed)"
done
[[ -n $PORT ]] || die "could not start redis-server"
log "redis is up (pid $REDIS_PID)"

export TRELLIS_TEST_REDIS_URL="redis://127.0.0.1:$PORT/0"

# --- go vet, go test --------------------------------------------------------
pkgs=()
flags=()
for arg in "$@"; do
	case $arg in
	. | ./* | ../*) pkgs+=("$arg") ;;
	*) flags+=("$arg") ;;
	esac
done
((${#pkgs[@]} > 0)) || pkgs=(./...)

log "go vet ${pkgs[*]}"
go vet "${pkgs[@]}"

log "go test -race -count=1 ${flags[*]:+${flags[*]} }${pkgs[*]}"
status=0
go test -race -count=1 "${flags[@]}" "${pkgs[@]}" || status=$?
if ((status == 0)); then
	log "ok"
else
	log "go test failed (exit $status)"
fi
exit "$status"
