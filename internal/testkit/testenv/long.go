package testenv

import "testing"

// Long skips t under go test -short: a fault, chaos or soak case that
// runs for many seconds, left to the full run. The quick loop (go test
// -short ./...) runs every other test.
func Long(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("a long fault or soak case: skipped under -short")
	}
}
