package timers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// settlePoll is how often Settle looks whether the loop has settled.
const settlePoll = time.Millisecond

// errNotRunning: Settle was called on a scheduler that is not running.
var errNotRunning = errors.New("the scheduler is not running (Start it first)")

// Settle makes the scheduler look for due timers now, and waits until its
// loop has gone round at least once more and sleeps with every call it
// started finished and recorded: then every timer due by the scheduler's
// clock has run on this instance, and is deleted (done) or due again
// later (failed, to be retried). It returns ctx's error if that takes
// longer, and an error when the scheduler is not running.
//
// It is for tests on a fake clock: move the clock, then Settle. A call
// that blocks keeps Settle waiting; timers claimed by another instance on
// the same store are that instance's to settle.
func (s *Scheduler) Settle(ctx context.Context) error {
	l := s.currentLoop()
	if l == nil {
		return fmt.Errorf("settle timers: %w", errNotRunning)
	}
	// A round begun before this read may have read the clock before the
	// caller moved it: only one begun after it, and so ended once claims
	// pass it, sees everything due by now.
	begun := l.rounds.Load()
	l.poke()
	tick := time.NewTicker(settlePoll)
	defer tick.Stop()
	for !(l.claims.Load() > begun && l.inFlight.Load() == 0 && l.unsettled.Load() == 0 &&
		l.deadline.Load() != math.MaxInt64) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("settle timers: %w", ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// currentLoop is the running loop, or nil.
func (s *Scheduler) currentLoop() *loop {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loop
}
