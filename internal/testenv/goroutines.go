package testenv

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// WaitGoroutinesGone waits, five seconds at most, until no goroutine has
// fn in its stack, and fails t if one still does. go-redis leaves a
// goroutine behind for a second after a failed dial (its pool's tryDial
// sleeps before trying again), even once its client is closed: a test
// that dialled a Redis that was not there waits for it before goleak
// looks.
func WaitGoroutinesGone(t testing.TB, fn string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if !strings.Contains(string(buf[:n]), fn) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("a goroutine in %s is still running", fn)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
