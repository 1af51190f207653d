#!/usr/bin/env bash
# Applies deploy/kubernetes/overlays/dev to a real Kubernetes cluster (the
# current kubectl context: kind, or any) and checks what
# docs/kubernetes.md promises: the three pods become ready, a load of
# orders from inside the cluster (the load of TestBinaryRollingRestart:
# placed, read back, every third confirmed, every other expired) sees no
# failed request and no wrong outcome while the Deployment is rolled
# (kubectl rollout restart, one pod at a time) and while it is scaled to 5
# and back to 3. Run from anywhere:
#   bash deploy/verify-kubernetes.sh
# With a kind cluster as the current context (kind-NAME), the image is
# built and loaded into it (docker build -t trellis .; kind load
# docker-image trellis); on another cluster, make the image "trellis"
# pullable first, or set TRELLIS_IMAGE to one that is.
#
# Without a cluster that answers (kubectl cluster-info fails) it says SKIP
# and exits 0 having checked nothing: scripts/test.sh does not call it, and
# CI has none. It uses the namespace trellis-verify, and deletes it at the
# end.
set -euo pipefail

cd "$(dirname "$0")/.."
NS=trellis-verify
if ! command -v kubectl >/dev/null 2>&1 || ! kubectl cluster-info >/dev/null 2>&1; then
	echo "SKIP: no Kubernetes cluster answers (kubectl cluster-info failed); nothing was checked"
	exit 0
fi
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
k() { kubectl -n "$NS" "$@"; }

cleanup() { kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1 || true; }
trap cleanup EXIT

ctx=$(kubectl config current-context)
if [[ -z ${TRELLIS_IMAGE:-} && $ctx == kind-* ]]; then
	echo "== docker build -t trellis . and kind load into ${ctx#kind-}"
	docker build -q -t trellis . >/dev/null
	kind load docker-image trellis --name "${ctx#kind-}"
fi

echo "== apply overlays/dev in namespace $NS"
kubectl create namespace "$NS"
k create secret generic trellis \
	--from-literal=cluster-secret="$(openssl rand -hex 32)" \
	--from-literal=admin-token="$(openssl rand -hex 32)"
# The overlay's namespace, replaced by this script's, and the image.
kubectl kustomize deploy/kubernetes/overlays/dev |
	sed -e "s/namespace: trellis$/namespace: $NS/" \
		-e "s|image: trellis$|image: ${TRELLIS_IMAGE:-trellis}|" |
	kubectl apply -f -
k rollout status deployment/redis --timeout=180s
if k rollout status deployment/trellis --timeout=300s; then
	pass "3 pods ready"
else
	fail "the pods did not become ready"
	k get pods -o wide
	exit 1
fi

# load SECONDS starts a pod inside the namespace that runs the order
# sample's load of TestBinaryRollingRestart (internal/e2e) through the
# Service for SECONDS, from 4 clients: each order placed, read back, and
# every third one confirmed. Then, once the orders' expiry (10 s) has
# passed, it reads each order again: a confirmed one must be there (200),
# any other gone (404: its timer expired it). It prints failed=N ok=M,
# where ok counts the orders whose every request and outcome was right.
load() {
	k delete pod load --ignore-not-found >/dev/null
	k run load --image=curlimages/curl:8.11.1 --restart=Never --command -- sh -c '
		svc=http://trellis:9000; end=$(( $(date +%s) + '"$1"' ))
		touch /tmp/orders /tmp/failures
		client() {
			n=0
			while [ "$(date +%s)" -lt "$end" ]; do
				n=$((n + 1))
				loc=$(curl -s -o /dev/null -w "%header{location}" --max-time 10 -X POST $svc/orders \
					-H "Content-Type: application/json" -d "{\"item\": \"roll-$1-$n\", \"quantity\": 1}")
				if [ -z "$loc" ]; then echo "failed: place $1-$n"; continue; fi
				[ "$(curl -s -o /dev/null -w "%{http_code}" --max-time 10 $svc$loc)" = 200 ] || echo "failed: read $loc"
				want=404
				if [ $((n % 3)) = 0 ]; then
					want=200
					[ "$(curl -s -o /dev/null -w "%{http_code}" --max-time 10 -X POST $svc$loc/confirm)" = 200 ] ||
						{ echo "failed: confirm $loc"; continue; }
				fi
				echo "$loc $want" >>/tmp/orders
			done
		}
		for c in 1 2 3 4; do client $c >>/tmp/failures & done
		wait
		sleep 20 # the expiry, 10 s, and its timers run
		while read -r loc want; do
			got=$(curl -s -o /dev/null -w "%{http_code}" --max-time 10 $svc$loc)
			[ "$got" = "$want" ] || echo "failed: $loc is $got after the expiry, want $want" >>/tmp/failures
		done </tmp/orders
		cat /tmp/failures
		failed=$(wc -l </tmp/failures); placed=$(wc -l </tmp/orders)
		echo "failed=$failed ok=$((placed - failed))"' >/dev/null
	k wait --for=condition=Ready pod/load --timeout=120s >/dev/null
}

# load_result waits for the load pod to end and checks its count.
load_result() {
	k wait --for=jsonpath='{.status.phase}'=Succeeded pod/load --timeout=600s >/dev/null || true
	local last
	last=$(k logs load | tail -1)
	if [[ $last =~ ^failed=0\ ok=[1-9] ]]; then pass "$1: $last"; else fail "$1: $last"; fi
}

echo "== a rolling restart under load"
load 150
k rollout restart deployment/trellis
k rollout status deployment/trellis --timeout=600s
load_result "rolling restart"

echo "== scale to 5 and back to 3 under load"
load 150
k scale deployment/trellis --replicas=5
k rollout status deployment/trellis --timeout=300s
k scale deployment/trellis --replicas=3
# Until the two pods removed have handed their shards over and exited.
for _ in $(seq 120); do
	[[ $(k get pods -l app.kubernetes.io/name=trellis -o name | wc -l) -eq 3 ]] && break
	sleep 1
done
load_result "scale 5 and back"
[[ $(k get deployment trellis -o jsonpath='{.status.readyReplicas}') == 3 ]] && pass "3 ready after scaling back" ||
	fail "not 3 ready after scaling back"

if ((failures > 0)); then
	echo "$failures check(s) failed"
	exit 1
fi
echo "all checks passed"
