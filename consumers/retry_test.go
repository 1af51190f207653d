package consumers_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/samples/counter"
	"github.com/trellis-go/trellis/trellistest"
)

// TestBackoffCountsFromTheAttemptsStart: a failed change is retried the
// backoff after its failed attempt started, the first attempt as every
// retry: a handler that ran 3 s on the clock before it failed is retried
// at once, and its next retry waits the 6 s that follow.
func TestBackoffCountsFromTheAttemptsStart(t *testing.T) {
	var calls atomic.Int64
	started, proceed := make(chan struct{}), make(chan struct{})
	ts := trellistest.Start(t, func(h *trellis.Host, _ chi.Router) error {
		if _, err := counter.Entity.Start(h.Entities()); err != nil {
			return err
		}
		_, err := consumers.Define("counter-slow", counter.Entity, func(ctx *consumers.Ctx, _ consumers.Change[counter.Counter]) consumers.Effect {
			switch calls.Add(1) {
			case 1:
				close(started)
				<-proceed // the test advances the clock meanwhile
				return ctx.Error("the first attempt fails after 3 s")
			case 2:
				return ctx.Error("the second attempt fails at once")
			default:
				return ctx.Done()
			}
		}).Start(h.Consumers())
		return err
	})
	increase(t, ts, "c-1")
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler was not called within 10s")
	}
	ts.Clock.Advance(3 * time.Second)
	close(proceed)
	trellistest.Eventually(t, 10*time.Second, "the retry, due when the first attempt failed", func() bool { return calls.Load() == 2 })
	ts.Clock.Advance(6 * time.Second)
	ts.WaitConsumers(t)
	if n := calls.Load(); n != 3 {
		t.Fatalf("handler calls %d, want 3", n)
	}
}
