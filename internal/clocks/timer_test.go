package clocks

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// jumpyClock is a fake clock that moves by jump just before it arms its
// first timer, as a test's Advance from another goroutine can.
type jumpyClock struct {
	*clockwork.FakeClock
	jump   time.Duration
	jumped bool
}

func (c *jumpyClock) NewTimer(d time.Duration) clockwork.Timer {
	if !c.jumped {
		c.jumped = true
		c.FakeClock.Advance(c.jump)
	}
	return c.FakeClock.NewTimer(d)
}

// TimerAt says when the clock reached the wake-up while the timer was
// being armed, instead of leaving a timer that would fire a whole wait
// late; otherwise its timer fires at the wake-up, also when the clock
// moved part of the wait while it was armed.
func TestTimerAt(t *testing.T) {
	const wait = time.Second
	tests := []struct {
		name       string        // the case
		jump       time.Duration // how far the clock moves while arming
		wantPassed bool          // TimerAt reports the wake-up passed
	}{
		{"clock still", 0, false},
		{"clock moves part of the wait", wait / 2, false},
		{"clock moves the whole wait", wait, true},
		{"clock moves past the wait", 2 * wait, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := &jumpyClock{FakeClock: clockwork.NewFakeClock(), jump: tc.jump}
			wake := clk.Now().Add(wait)
			timer, passed := TimerAt(clk, wake)
			if passed != tc.wantPassed {
				t.Fatalf("passed = %t, want %t", passed, tc.wantPassed)
			}
			if passed {
				if timer != nil {
					t.Fatal("a passed wake-up left a timer armed")
				}
				return
			}
			defer timer.Stop()
			if d := wake.Sub(clk.Now()); d > 0 {
				clk.FakeClock.Advance(d)
			}
			select {
			case <-timer.Chan():
			default:
				t.Fatal("the timer did not fire at its wake-up")
			}
		})
	}
}
