package testenv

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// Recv takes one value from ch, or fails the test after limit: tests wait on
// events or poll with a bound, never on a bare sleep.
func Recv[T any](t testing.TB, ch <-chan T, limit time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(limit):
		var zero T
		t.Fatalf("nothing received within %v", limit)
		return zero
	}
}

// Eventually polls cond every millisecond until it holds, or fails the test
// naming what after limit.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(limit, cond) {
		t.Fatalf("not true within %v: %s", limit, what)
	}
}

// EventuallyEvery is Eventually polling every interval: for a condition
// that asks servers over the network, which a millisecond's polling
// would load with the test's own requests.
func EventuallyEvery(t testing.TB, limit, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	if !pollEvery(limit, interval, cond) {
		t.Fatalf("not true within %v: %s", limit, what)
	}
}

// poll polls cond every millisecond until it holds (true) or limit passes
// (false): Eventually for code that reports errors instead of failing a
// test.
func poll(limit time.Duration, cond func() bool) bool {
	return pollEvery(limit, time.Millisecond, cond)
}

// pollEvery is poll, every interval.
func pollEvery(limit, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
	return true
}

// WaitGoroutinesGone waits, 5 s at most, until no goroutine has fn in its
// stack, and fails the test otherwise. A go-redis pool that failed to dial
// a dead node probes it again from a goroutine that sleeps a second
// between tries and sees its client closed only then: a test that killed
// a Redis node waits for it at its end (register it before the client's
// cleanup), so that the package's leak check does not catch it.
func WaitGoroutinesGone(t testing.TB, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	gone := poll(5*time.Second, func() bool {
		n := runtime.Stack(buf, true)
		return !strings.Contains(string(buf[:n]), fn)
	})
	if !gone {
		t.Errorf("a goroutine in %s is still running", fn)
	}
}
