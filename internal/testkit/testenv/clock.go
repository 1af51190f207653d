package testenv

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// KeepClocksMoving advances the fake clocks by a millisecond every real
// millisecond until the test ends. It is for tests whose waits are not
// theirs to step through, such as commands that conflict at random and
// pause before each retry on the service's clock; tests that know what they
// wait for advance the clock themselves.
func KeepClocksMoving(t testing.TB, clocks ...*clockwork.FakeClock) {
	t.Helper()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				for _, c := range clocks {
					c.Advance(time.Millisecond)
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-stopped })
}
