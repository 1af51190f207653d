package trellis_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/timedactions"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/trellistest"
)

// clockAction is the timed action of TestTestClockExactDelay: each call
// reports its firing on clockFirings.
var (
	clockAction  = timedactions.Define("testkit-clock")
	clockFirings = make(chan timers.Firing, 16)
	clockFired   = timedactions.Method(clockAction, "fired",
		func(ctx *timedactions.Ctx, _ components.Done) timedactions.Effect {
			f, _ := timers.FiringFromContext(ctx.Context())
			clockFirings <- f
			return ctx.Done()
		})
)

// clockApp is the counter app plus clockAction.
func clockApp(h *trellis.Host, r chi.Router) error {
	if _, err := clockAction.Start(h.Client); err != nil {
		return err
	}
	return (&fixture.CounterApp{}).Setup(h, r)
}

// TestTestClockExactDelay pins that trellistest.Start's clock starts at a whole
// millisecond, so that on either store moving it by exactly a timer's
// delay runs the timer: the store's millisecond rounding (due times up,
// now down) leaves nothing for a test to add as a margin.
func TestTestClockExactDelay(t *testing.T) {
	const delay = 1500 * time.Millisecond
	for _, sc := range fixture.Stores {
		t.Run(sc.Name, func(t *testing.T) {
			ts := trellistest.Start(t, clockApp, sc.Opts(t)...)
			start := ts.Clock.Now()
			call, err := clockFired.Deferred(components.Done{})
			if err != nil {
				t.Fatal(err)
			}
			created, err := ts.Host().Timers.Create(context.Background(), "exact", delay, call)
			if err != nil {
				t.Fatal(err)
			}

			ts.Clock.Advance(delay)
			f := trellistest.Recv(t, clockFirings, 10*time.Second)
			if f.Name != "exact" {
				t.Fatalf("timer %q ran, want exact", f.Name)
			}
			want := start.Add(delay)
			if !created.DueAt.Equal(want) || !f.DueAt.Equal(want) {
				t.Fatalf("due at %v (created) and %v (fired), want the start %v plus the delay exactly", created.DueAt, f.DueAt, start)
			}
		})
	}
}
