#!/usr/bin/env bash
# Checks the image and the compose pair under a real Docker engine, as the
# Deploy section of docs/operations.md describes them: builds the image,
# runs it alone (user 65532, healthy, exit 0 on docker stop), then the
# compose pair with each Compose found (v2 `docker compose`, v1
# `docker-compose`): the walkthrough of docs/samples.md against both
# replicas, a Redis restart and `down`/`up` with nothing lost; then the
# cluster of three (deploy/compose.cluster.yaml, docs/cluster.md): every
# instance joins and gets its share of the shards, the walkthrough runs
# against each, and after a kill -9 of one the two others place orders and
# a confirmed order stays confirmed. Run from anywhere:
# bash deploy/verify-docker.sh
#
# Without a Docker engine it says so and exits 0 having checked nothing:
# scripts/test.sh does not call it, and CI has no engine. It uses ports
# 9000, 9001 and 9002 (the compose files') and the compose project names
# trellis-verify and trellis-verify-cluster, and removes their containers
# and volumes at the end.
set -euo pipefail

cd "$(dirname "$0")/.."
if ! docker info >/dev/null 2>&1; then
	echo "SKIP: no Docker engine answers (docker info failed); nothing was checked"
	exit 0
fi

export TRELLIS_ADMIN_TOKEN=${TRELLIS_ADMIN_TOKEN:-$(openssl rand -hex 32)}
export TRELLIS_ORDER_EXPIRY=${TRELLIS_ORDER_EXPIRY:-15s}
export TRELLIS_CLUSTER_SECRET=${TRELLIS_CLUSTER_SECRET:-$(openssl rand -hex 32)}
export TRELLIS_CLUSTER_LEASE=${TRELLIS_CLUSTER_LEASE:-3s}
PROJECT=trellis-verify
CLUSTER_PROJECT=trellis-verify-cluster
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
		$COMPOSE -p "$CLUSTER_PROJECT" -f deploy/compose.cluster.yaml down -v >/dev/null 2>&1 || true
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

# place PORT ITEM: places an order through localhost:PORT and prints its
# path (/orders/<id>); nothing when it was not placed (201).
place() {
	curl -s -m 60 -o /dev/null -w '%{http_code} %header{location}' -X POST "localhost:$1/orders" \
		-H 'Content-Type: application/json' -d "{\"item\": \"$2\", \"quantity\": 1}" |
		awk '$1 == 201 { print $2 }'
}

for COMPOSE in "${composes[@]}"; do
	k() { $COMPOSE -p "$CLUSTER_PROJECT" -f deploy/compose.cluster.yaml "$@"; }
	echo "== $COMPOSE: the cluster of three"
	k down -v >/dev/null 2>&1 || true
	k up -d >/dev/null 2>&1 || { fail "$COMPOSE up (cluster)"; k logs; continue; }
	for s in trellis-1 trellis-2 trellis-3; do
		wait_for healthy "$(k ps -q $s)" && pass "cluster $s healthy" || fail "cluster $s not healthy"
	done
	for port in 9000 9001 9002; do
		wait_for curl -sf "localhost:$port/readyz" && pass "cluster :$port ready" ||
			fail "cluster :$port not ready: $(curl -s "localhost:$port/readyz")"
	done
	# Each instance joined under its service name and, once the three have
	# rebalanced, owns 85 or 86 of the 256 shards.
	share() { # service: its last "rebalanced" line says a third of the shards among 3 members
		k logs "$1" | grep '"msg":"cluster: rebalanced"' | tail -1 | grep -Eq '"owned":8[56],"members":3'
	}
	for s in trellis-1 trellis-2 trellis-3; do
		if k logs "$s" | grep '"msg":"joined the cluster"' | grep -q "\"addr\":\"$s:9100\"" && wait_for share "$s"; then
			pass "$s joined as $s:9100 and owns a third of the shards"
		else
			fail "$s: $(k logs "$s" | grep '"component":"cluster"' | tail -3)"
		fi
	done
	for port in 9000 9001 9002; do
		out=$(walkthrough $port)
		if grep -q '"active":0' <<<"$out" && grep -q '"status":404' <<<"$out" &&
			grep -q 'Cannot cancel an already confirmed order' <<<"$out"; then
			pass "cluster walkthrough on :$port"
		else
			fail "cluster walkthrough on :$port:"$'\n'"$out"
		fi
	done

	# An order placed through one instance and confirmed through another,
	# then trellis-3 killed (SIGKILL): the two others place orders again
	# once its lease has run out, and read the order as confirmed.
	order=$(place 9002 "Before the kill")
	if [ -n "$order" ] && curl -sf -X POST "localhost:9001$order/confirm" >/dev/null; then
		pass "order placed through :9002 and confirmed through :9001"
	else
		fail "order not placed or not confirmed before the kill"
	fi
	docker kill -s KILL "$(k ps -q trellis-3)" >/dev/null
	killed=$(date +%s)
	placed=0
	for i in $(seq 12); do
		[ -n "$(place $((9000 + i % 2)) "After the kill $i")" ] && placed=$((placed + 1))
	done
	[ "$placed" = 12 ] && pass "12 orders placed through :9000 and :9001 after the kill -9 ($(($(date +%s) - killed)) s)" ||
		fail "$placed of 12 orders placed after the kill -9"
	for port in 9000 9001; do
		curl -s "localhost:$port$order" | grep -q '"confirmed":true' && pass "the confirmed order reads confirmed on :$port" ||
			fail "the confirmed order on :$port: $(curl -s "localhost:$port$order")"
	done
	k stop trellis-1 trellis-2 >/dev/null 2>&1
	for s in trellis-1 trellis-2; do
		code=$(docker inspect --format '{{.State.ExitCode}}' "$(k ps -a -q $s)")
		[ "$code" = 0 ] && pass "cluster $s stopped with exit code 0" || fail "cluster $s stopped with exit code $code"
	done
	k down -v >/dev/null 2>&1
done

echo "== $failures failures"
[ "$failures" = 0 ]
