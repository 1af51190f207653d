#!/usr/bin/env bash
# Checks the image and the compose pair under a real Docker engine, as the
# Deploy section of docs/operations.md describes them: builds the image,
# runs it alone (user 65532, healthy, exit 0 on docker stop), then the
# compose pair with each Compose found (v2 `docker compose`, v1
# `docker-compose`): the walkthrough of docs/samples.md against both
# replicas, a Redis restart and `down`/`up` with nothing lost. Run from
# anywhere: bash deploy/verify-docker.sh
#
# Without a Docker engine it says so and exits 0 having checked nothing:
# scripts/test.sh does not call it, and CI has no engine. It uses ports
# 9000 and 9001 (the compose file's) and the compose project name
# trellis-verify, and removes its containers and volume at the end.
set -euo pipefail

cd "$(dirname "$0")/.."
if ! docker info >/dev/null 2>&1; then
	echo "SKIP: no Docker engine answers (docker info failed); nothing was checked"
	exit 0
fi

export TRELLIS_ADMIN_TOKEN=${TRELLIS_ADMIN_TOKEN:-$(openssl rand -hex 32)}
export TRELLIS_ORDER_EXPIRY=${TRELLIS_ORDER_EXPIRY:-15s}
PROJECT=trellis-verify
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# wait_for CMD… runs CMD every 0.5 s until it succeeds, 60 s at most.
wait_for() {
	for _ in $(seq 120); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	return 1
}

cleanup() {
	docker rm -f trellis-verify-one trellis-verify-redis >/dev/null 2>&1 || true
	docker network rm trellis-verify-net >/dev/null 2>&1 || true
	for COMPOSE in "docker compose" docker-compose; do
		$COMPOSE -p "$PROJECT" -f deploy/compose.yaml down -v >/dev/null 2>&1 || true
	done
}
trap cleanup EXIT

echo "== docker build -t trellis ."
docker build -t trellis . >/tmp/trellis-verify-build.log 2>&1 || {
	tail -20 /tmp/trellis-verify-build.log
	fail "docker build"
	exit 1
}
echo "image size: $(docker image inspect --format '{{.Size}}' trellis) bytes;" \
	"docker image ls: $(docker image ls --format '{{.Size}}' trellis)"

echo "== the image alone"
redis_net=trellis-verify-net
docker network create "$redis_net" >/dev/null
docker run -d --name trellis-verify-redis --network "$redis_net" redis:7-bookworm >/dev/null
docker run -d --name trellis-verify-one --network "$redis_net" \
	-e TRELLIS_REDIS_URL=redis://trellis-verify-redis:6379/0 trellis >/dev/null
uid=$(docker top trellis-verify-one -eo pid,uid | awk 'NR == 2 { print $2 }')
[ "$uid" = 65532 ] && pass "runs as uid $uid" || fail "runs as uid $uid, want 65532"
healthy() { [ "$(docker inspect --format '{{.State.Health.Status}}' "$1")" = healthy ]; }
wait_for healthy trellis-verify-one && pass "health: healthy" ||
	fail "health: $(docker inspect --format '{{.State.Health.Status}}' trellis-verify-one)"
docker stop trellis-verify-one >/dev/null
code=$(docker inspect --format '{{.State.ExitCode}}' trellis-verify-one)
[ "$code" = 0 ] && pass "docker stop: exit code 0" || fail "docker stop: exit code $code"
cleanup

composes=()
docker compose version >/dev/null 2>&1 && composes+=("docker compose")
command -v docker-compose >/dev/null && composes+=("docker-compose")
[ ${#composes[@]} -gt 0 ] || fail "neither docker compose nor docker-compose is installed"

walkthrough() { # port: the walkthrough block of docs/samples.md against localhost:port
	sed -n '/<!-- walkthrough:begin/,/<!-- walkthrough:end -->/p' docs/samples.md |
		sed '1,2d;$d' | sed '$d' | sed "s/localhost:9000/localhost:$1/g" | timeout 180 bash 2>&1
}

for COMPOSE in "${composes[@]}"; do
	c() { $COMPOSE -p "$PROJECT" -f deploy/compose.yaml "$@"; }
	echo "== $COMPOSE ($($COMPOSE version --short 2>/dev/null || $COMPOSE version | head -1))"
	c down -v >/dev/null 2>&1 || true
	c up -d >/dev/null 2>&1 || { fail "$COMPOSE up"; c logs; continue; }
	for s in trellis-1 trellis-2; do
		wait_for healthy "$(c ps -q $s)" && pass "$s healthy" || fail "$s not healthy"
	done
	# Healthy is liveness; ready (/readyz 200) says the replica reaches Redis.
	for port in 9000 9001; do
		wait_for curl -sf "localhost:$port/readyz" && pass ":$port ready" ||
			fail ":$port not ready: $(curl -s "localhost:$port/readyz")"
	done
	for port in 9000 9001; do
		out=$(walkthrough $port)
		# What the walkthrough's comments show at its end: the late order is
		# gone with its timer, the confirmed one stays.
		if grep -q '"active":0' <<<"$out" && grep -q '"status":404' <<<"$out" &&
			grep -q 'Cannot cancel an already confirmed order' <<<"$out"; then
			pass "walkthrough on :$port"
		else
			fail "walkthrough on :$port:"$'\n'"$out"
		fi
	done

	# An order placed, then Redis restarted, the pair stopped (exit code 0),
	# taken down and brought up: the order and its timer are still there at
	# each step (the expiry outlasts them), and the timer still fires.
	AUTH="Authorization: Bearer $TRELLIS_ADMIN_TOKEN"
	order=$(curl -s -o /dev/null -w '%header{location}' -X POST localhost:9000/orders \
		-H 'Content-Type: application/json' -d '{"item": "Survivor", "quantity": 1}')
	timer=localhost:9001/admin/timers/order-expiration-timer-${order#/orders/}
	intact() { # step: the order is placed and its timer pending, on both replicas
		if wait_for curl -sf "localhost:9000$order" && curl -s "localhost:9001$order" | grep -q '"placed":true' &&
			curl -sf -H "$AUTH" "$timer" >/dev/null; then
			pass "order and timer intact $1"
		else
			fail "order or timer lost $1"
		fi
	}
	intact "after placing"
	c restart redis >/dev/null 2>&1
	intact "after a Redis restart"
	c stop >/dev/null 2>&1
	for s in trellis-1 trellis-2; do
		code=$(docker inspect --format '{{.State.ExitCode}}' "$(c ps -a -q $s)")
		[ "$code" = 0 ] && pass "$s stopped with exit code 0" || fail "$s stopped with exit code $code"
	done
	c down >/dev/null 2>&1
	c up -d >/dev/null 2>&1
	intact "after down and up"
	gone() { [ "$(curl -s -o /dev/null -w '%{http_code}' "localhost:$1$2")" = 404 ]; }
	if wait_for gone 9001 "$order"; then pass "its timer fired after down/up"; else fail "the order never expired"; fi
	c down -v >/dev/null 2>&1
done

echo "== $failures failures"
[ "$failures" = 0 ]
