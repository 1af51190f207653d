#!/usr/bin/env bash
# The project's test command: checks that the generated API code is up to
# date and lints the OpenAPI spec, starts a throwaway Redis and a throwaway
# Redis Cluster (3 masters, 3 replicas) on free loopback ports, then runs go
# vet and go test -race against them.
#
# Usage: bash scripts/test.sh [package patterns] [go test flags]
#   Arguments that start with ./ or ../ (or are exactly .) are package
#   patterns for both go vet and go test (default ./...); all other arguments
#   are passed to go test, e.g. bash scripts/test.sh ./internal/... -run Redis
#
# Needs only Go and bash; installs redis-server and chromium (for the
# console's browser tests) with apt-get if they are missing.
set -euo pipefail

log() { printf 'test.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

cd "$(dirname "${BASH_SOURCE[0]}")/.."

command -v go >/dev/null 2>&1 || die "go is not on PATH; install Go (see go.mod for the version)"

# The modules of their own (each with its go.mod and a replace to this
# repository), generated, vetted and tested like the repository:
# testdata/cartservice, an application built on Trellis's public API alone,
# and deploy/kubernetes/manifests_test, the Kubernetes manifests' checks
# (kustomize and k8s.io/api stay out of the main module's go.mod).
OUTSIDE_MODULES=(testdata/cartservice deploy/kubernetes/manifests_test)

# --- the contract -----------------------------------------------------------
# The generated API code (every *.gen.go: the admin API's, from
# api/openapi.yaml; the samples', from samples/contract/openapi.yaml) must
# be what `go generate` makes of its contract. The generated files are
# compared before and after regenerating them (rather than with git diff,
# which would also flag uncommitted edits of a spec).
generated_files() {
	find . -name '*.gen.go' -not -path './.git/*' | LC_ALL=C sort
}
generated_sum() {
	generated_files | xargs cat | cksum
}
check_generated() {
	local before after mod
	before=$(generated_sum)
	log "go generate ./..."
	go generate ./... || die "go generate failed"
	for mod in "${OUTSIDE_MODULES[@]}"; do
		log "go generate ./... in $mod"
		(cd "$mod" && go generate ./...) || die "go generate failed in $mod"
	done
	after=$(generated_sum)
	if [[ $before != "$after" ]]; then
		if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
			generated_files | xargs git --no-pager diff --stat -- >&2 || true
		fi
		die "the generated API code (*.gen.go) was stale: it is not what go generate makes of its contract (openapi.yaml). The regenerated files are now in your work tree; review and commit them."
	fi
}

# The contracts must pass Redocly's recommended rules without errors. The
# linter is an npm package, so this runs only where node is installed; a
# machine with only Go skips it (and says so).
SPECS=(api/openapi.yaml samples/contract/openapi.yaml testdata/cartservice/cartapi/openapi.yaml)
lint_spec() {
	if ! command -v npx >/dev/null 2>&1; then
		log "npx not found: skipping the OpenAPI lint (install Node.js to run it)"
		return 0
	fi
	local spec
	for spec in "${SPECS[@]}"; do
		log "lint $spec (@redocly/cli, recommended rules)"
		REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_UPDATE_NOTIFIER=1 \
			npx --yes @redocly/cli@2.77.0 lint --extends=recommended --format=stylish "$spec" ||
			die "$spec fails the OpenAPI lint (see above)"
	done
}

check_generated
lint_spec

# --- redis-server and chromium ----------------------------------------------
# install_package COMMAND PACKAGE: installs Debian's PACKAGE with apt-get
# when COMMAND is not on PATH (with sudo when not root).
install_package() {
	local cmd=$1 pkg=$2
	command -v "$cmd" >/dev/null 2>&1 && return 0
	command -v apt-get >/dev/null 2>&1 ||
		die "$cmd is not on PATH and apt-get is not available; install $pkg yourself and re-run"
	local sudo=()
	if [[ $(id -u) -ne 0 ]]; then
		command -v sudo >/dev/null 2>&1 ||
			die "$cmd is not on PATH; installing $pkg needs root, and sudo is not available (run: apt-get install -y $pkg)"
		sudo=(sudo)
	fi
	log "$cmd not found; installing $pkg with apt-get"
	"${sudo[@]}" apt-get update ||
		die "apt-get update failed; install $pkg yourself and re-run"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "$pkg" ||
		die "apt-get install -y $pkg failed; install $pkg yourself and re-run"
	command -v "$cmd" >/dev/null 2>&1 ||
		die "$cmd is still not on PATH after installing $pkg"
}
install_package redis-server redis-server
# The operator console's tests drive a real headless Chromium.
install_package chromium chromium

# --- cleanup ----------------------------------------------------------------
REDIS_PID=""
CLUSTER_PIDS=()
TMP_DIR=""
# stop_redis: kills the redis-server this script started (only that PID).
stop_redis() {
	if [[ -n $REDIS_PID ]]; then
		kill "$REDIS_PID" 2>/dev/null || true
		wait "$REDIS_PID" 2>/dev/null || true
		REDIS_PID=""
	fi
}
# stop_cluster: kills the cluster nodes this script started (only those PIDs).
stop_cluster() {
	local pid
	for pid in "${CLUSTER_PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${CLUSTER_PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	CLUSTER_PIDS=()
}
cleanup() {
	stop_redis
	stop_cluster
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

# free_cluster_port: prints a loopback port for a cluster node: it and its
# bus port (port+10000) free, both below 32768, where Linux hands out no
# ephemeral ports (ip_local_port_range starts there), so that no client
# connection's local port takes the bus port between this check and the
# node's bind.
free_cluster_port() {
	local port=$((12000 + RANDOM % 10000)) i
	for ((i = 0; i < 200; i++)); do
		if ! port_in_use "$port" && ! port_in_use $((port + 10000)); then
			echo "$port"
			return 0
		fi
		port=$((port + 1))
		((port < 22000)) || port=12000
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

# --- start a redis cluster --------------------------------------------------
# start_cluster: six cluster-enabled redis-servers on free ports, each in a
# directory of its own (a node writes its nodes.conf there), joined by
# redis-cli --cluster create into 3 masters with a replica each. Sets
# CLUSTER_PORTS; fails (and stops the nodes) if any step does.
CLUSTER_PORTS=()
start_cluster() {
	local i n port dir pid addrs=()
	CLUSTER_PORTS=()
	for ((i = 0; i < 6; i++)); do
		port=$(free_cluster_port) || return 1
		# free_cluster_port may hand out a port a node started a moment
		# ago is about to take; nodes also use port+10000 for their bus.
		while [[ " ${CLUSTER_PORTS[*]} " == *" $port "* || " ${CLUSTER_PORTS[*]} " == *" $((port - 10000)) "* ||
			" ${CLUSTER_PORTS[*]} " == *" $((port + 10000)) "* ]]; do
			port=$(free_cluster_port) || return 1
		done
		dir="$TMP_DIR/cluster-$port"
		mkdir -p "$dir"
		redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save '' --appendonly no \
			--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
			--daemonize no >"$dir/redis.log" 2>&1 &
		pid=$!
		CLUSTER_PIDS+=("$pid")
		CLUSTER_PORTS+=("$port")
		addrs+=("127.0.0.1:$port")
	done
	# 30 s: on a machine shared with other test runs a node can be slow
	# to start.
	for ((n = 0; n < ${#CLUSTER_PORTS[@]}; n++)); do
		port=${CLUSTER_PORTS[n]}
		pid=${CLUSTER_PIDS[n]}
		for ((i = 0; i < 300; i++)); do
			redis_answers "$port" && break
			kill -0 "$pid" 2>/dev/null || break # it exited: say why at once
			sleep 0.1
		done
		redis_answers "$port" || {
			log "cluster node on $port did not answer within 30 s:"
			sed 's/^/  /' "$TMP_DIR/cluster-$port/redis.log" >&2 || true
			return 1
		}
	done
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$TMP_DIR/cluster-create.log" 2>&1 || {
		log "redis-cli --cluster create failed:"
		sed 's/^/  /' "$TMP_DIR/cluster-create.log" >&2 || true
		return 1
	}
	# Every node must see the whole cluster as ok, replicas included.
	for port in "${CLUSTER_PORTS[@]}"; do
		for ((i = 0; i < 200; i++)); do
			[[ $(redis-cli -h 127.0.0.1 -p "$port" cluster info 2>/dev/null) == *cluster_state:ok* ]] && break
			sleep 0.1
		done
		[[ $(redis-cli -h 127.0.0.1 -p "$port" cluster info 2>/dev/null) == *cluster_state:ok* ]] ||
			{ log "cluster node on $port is not ok within 20 s"; return 1; }
	done
}

command -v redis-cli >/dev/null 2>&1 || die "redis-cli is not on PATH (it comes with redis-server; it creates the test cluster)"
CLUSTER_OK=""
for attempt in 1 2 3; do
	if start_cluster; then
		CLUSTER_OK=1
		break
	fi
	stop_cluster
	log "retrying the cluster with other ports (attempt $attempt of 3 failed)"
done
[[ -n $CLUSTER_OK ]] || die "could not start a Redis Cluster"
log "redis cluster is up on ports ${CLUSTER_PORTS[*]} (pids ${CLUSTER_PIDS[*]})"

export TRELLIS_TEST_REDIS_CLUSTER_URL="redis://127.0.0.1:${CLUSTER_PORTS[0]}?addr=127.0.0.1:${CLUSTER_PORTS[1]}&addr=127.0.0.1:${CLUSTER_PORTS[2]}"

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

# Each package's test binary gets at most TEST_TIMEOUT (default 30m), unless
# the caller passes a -timeout of its own: the slowest package (delivery,
# about 4 minutes at rest with -race, 8 at a load of 8) fits with room,
# and a hung test fails within CI's budget rather than at Go's default of
# 10 minutes, which a busy machine reaches without a hang.
has_timeout=0
for f in "${flags[@]}"; do
	[[ $f == -timeout* || $f == --timeout* ]] && has_timeout=1
done
((has_timeout)) || flags+=("-timeout=${TEST_TIMEOUT:-30m}")

# The console's browser tests skip without Chromium under a plain go test;
# here, where it was installed above, a missing one is a failure.
export TRELLIS_TEST_REQUIRE_BROWSER=1

log "go vet ${pkgs[*]}"
go vet "${pkgs[@]}"
bash scripts/lint.sh "${pkgs[@]}"

log "go test -race -count=1 ${flags[*]:+${flags[*]} }${pkgs[*]}"
status=0
go test -race -count=1 "${flags[@]}" "${pkgs[@]}" || status=$?

# The outside modules, unless the caller asked for packages of their own.
if [[ $# -eq 0 ]]; then
	for mod in "${OUTSIDE_MODULES[@]}"; do
		log "go vet and go test -race ./... in $mod"
		(cd "$mod" && go vet ./... && go test -race -count=1 ./...) || status=$?
	done
fi
if ((status == 0)); then
	log "ok"
else
	log "go test failed (exit $status)"
fi
exit "$status"
