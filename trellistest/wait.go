package trellistest

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// settleLimit bounds AdvanceTimers' wait, in real time.
const settleLimit = 20 * time.Second

// Recv takes one value from ch, or fails the test after limit: tests wait
// on events, or poll with a bound, never on a bare sleep.
func Recv[T any](t testing.TB, ch <-chan T, limit time.Duration) T {
	t.Helper()
	return testenv.Recv(t, ch, limit)
}

// Eventually polls cond every millisecond until it holds, or fails the
// test naming what after limit.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, limit, what, cond)
}

// AdvanceTimers moves the service's fake clock by d and waits until every
// timer due by then has run and its outcome is recorded: a timer whose
// call succeeded is gone, one whose call failed is due again later. It
// fails the test if that takes more than 20 s of real time (a call that
// blocks). Timers on Redis keep whole milliseconds, rounding due times up:
// from the kit's start (a whole millisecond), advancing by exactly a
// timer's delay makes it due.
func (ts *Service) AdvanceTimers(t testing.TB, d time.Duration) {
	t.Helper()
	ts.Clock.Advance(d)
	ctx, cancel := context.WithTimeout(context.Background(), settleLimit)
	defer cancel()
	if err := ts.Host().Timers.Settle(ctx); err != nil {
		t.Fatalf("advance the clock by %v: %v", d, err)
	}
}

// KeepClocksMoving advances the fake clocks by a millisecond every real
// millisecond until the test ends: for tests whose waits on the clock are
// not theirs to step through, such as commands that conflict at random and
// pause before each retry on the service's clock.
func KeepClocksMoving(t testing.TB, clocks ...*clockwork.FakeClock) {
	t.Helper()
	testenv.KeepClocksMoving(t, clocks...)
}

// WaitConsumers waits (at most a minute) until every consumer of the
// service has handled every change recorded so far, on every shard
// (whichever instance serves it: with StartInstances, any instance
// answers for all). A change that became a dead letter counts as
// handled; one being retried does not.
func (ts *Service) WaitConsumers(t testing.TB) {
	t.Helper()
	Eventually(t, time.Minute, "every consumer to catch up with every change", func() bool {
		n, err := ts.Host().Consumers().Behind(t.Context())
		return err == nil && n == 0
	})
}

// Long skips the test under go test -short: for a service's long fault
// and soak cases, so that -short is a quick loop.
func Long(tb testing.TB) {
	tb.Helper()
	testenv.Long(tb)
}
