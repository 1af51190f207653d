package testenv

import "testing"

// Long skips t under go test -short: a case that runs for many seconds —
// a fault, kill, chaos, soak or linearizability case, one that builds and
// runs a server binary, one that drives a browser. The quick loop
// (go test -short ./...) runs every other test; the full run (no -short,
// as scripts/test.sh runs) runs these too.
func Long(tb testing.TB) {
	tb.Helper()
	skipShort(tb, "a long case (fault, kill, soak, binary or browser): it runs without -short")
}

// ClusterCase skips t under go test -short: a case on a Redis Cluster.
// A cluster is six redis-server processes that take seconds to start, and
// its cases check on a cluster what the single Redis's cases check on one
// server; the quick loop runs those, the full run (no -short) both.
func ClusterCase(tb testing.TB) {
	tb.Helper()
	skipShort(tb, "a Redis Cluster case: it runs without -short")
}

// skipShort skips tb, saying why, under go test -short.
func skipShort(tb testing.TB, why string) {
	tb.Helper()
	if testing.Short() {
		tb.Skip(why)
	}
}
