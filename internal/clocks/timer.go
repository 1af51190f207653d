// Package clocks holds what the packages that wait on a clockwork.Clock
// share, so that a fake clock a test advances from another goroutine
// wakes them as a real one would.
package clocks

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// Slack is how far the clock may move while a timer is armed without
// arming it again: the timer fires late by that move at most, which is
// less than the stores' resolution of a millisecond.
const Slack = time.Millisecond

// TimerAt arms a timer that fires when clk reaches at. A timer counts
// its wait from the clock's reading when it is armed, so a clock that
// moves in that instant (a fake clock a test advances from another
// goroutine) would leave it late by the move: then it is stopped and
// armed again from the new reading. When the clock has reached at,
// passed is true and no timer is left armed, so the caller looks at once
// instead.
func TimerAt(clk clockwork.Clock, at time.Time) (t clockwork.Timer, passed bool) {
	for {
		now := clk.Now()
		if !now.Before(at) {
			return nil, true
		}
		t = clk.NewTimer(at.Sub(now))
		if clk.Since(now) < Slack {
			return t, false
		}
		t.Stop()
	}
}
