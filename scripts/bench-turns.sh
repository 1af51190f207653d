#!/usr/bin/env bash
# Runs a benchmark of two builds taking turns, so that load from elsewhere
# hits both alike: the build at REV and the work tree as it is.
#
# Usage: bash scripts/bench-turns.sh REV PACKAGE BENCH-REGEXP RUNS [test flags]
#   e.g. bash scripts/bench-turns.sh de368f0 . '^BenchmarkHTTPEntityRoundTrip$' 6 -test.benchtime=3s
# Each round runs both test binaries, alternating which goes first, and
# prints their Benchmark lines under a header with the load average; at
# the end, for each benchmark and metric, each build's median and range.
# Benchmarks on Redis use TRELLIS_TEST_REDIS_URL if it is set (or start
# their own throwaway redis-server).
set -euo pipefail
[[ $# -ge 4 ]] || { sed -n 2,10p "$0" >&2; exit 2; }
rev=$1 pkg=$2 bench=$3 runs=$4
shift 4

cd "$(dirname "${BASH_SOURCE[0]}")/.."
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/before" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

git worktree add -q --detach "$tmp/before" "$rev"
(cd "$tmp/before" && go test -c -o "$tmp/before.test" "$pkg")
go test -c -o "$tmp/now.test" "$pkg"

for ((i = 1; i <= runs; i++)); do
	order=(before now)
	((i % 2)) || order=(now before)
	for b in "${order[@]}"; do
		echo "== round $i $b load $(cut -d' ' -f1-3 /proc/loadavg)"
		(cd "$pkg" && "$tmp/$b.test" -test.run '^$' -test.bench "$bench" "$@" 2>&1 | grep '^Benchmark') |
			tee -a "$tmp/$b.lines" || true
	done
done

# summary prints, for every benchmark and metric of the lines in $1, the
# median and the range of its values, one line each.
summary() {
	awk '{ for (i = 3; i < NF; i += 2) print $1, $(i + 1), $i }' "$1" | sort -k1,1 -k2,2 -k3,3g |
		awk '
			function flush() { if (n) printf "%-60s %-24s %s (%s–%s, %d runs)\n", key, unit, (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2), v[1], v[n], n }
			$1 " " $2 != key " " unit { flush(); key = $1; unit = $2; n = 0 }
			{ v[++n] = $3 }
			END { flush() }'
}
for b in before now; do
	echo "== $b ($([[ $b == before ]] && echo "$rev" || echo "the work tree")): median (range)"
	if [[ -s "$tmp/$b.lines" ]]; then summary "$tmp/$b.lines"; fi
done
