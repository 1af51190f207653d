package testenv

import "testing"

// Long skips t under go test -short: a case that runs for many seconds —
// a fault, kill, chaos, soak or linearizability case, one that builds and
// runs a server binary, one that drives a browser. The quick loop
// (go test -short ./...) runs every other test; the full run (no -short,
// as scripts/test.sh runs) runs these too.
func Long(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("a long case (fault, kill, soak, binary or browser): it runs without -short")
	}
}
