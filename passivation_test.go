package trellis_test

import (
	"context"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/trellistest"
)

// TestPassivationAndReload: an entity idle for PassivateAfter (on the fake
// clock) leaves memory, and the next command loads its state from the
// store again.
func TestPassivationAndReload(t *testing.T) {
	const after = time.Minute
	for _, sc := range fixture.Stores {
		t.Run(sc.Name, func(t *testing.T) {
			app := &fixture.CounterApp{PassivateAfter: after}
			ts := fixture.StartCounter(t, app, sc.Opts(t)...)

			if c := fixture.Counter(t, ts.Post(t, "/counters/sleepy/increase", map[string]int{"by": 5})); c.Value != 5 {
				t.Fatalf("value %d, want 5", c.Value)
			}
			if n := app.Running.Active(); n != 1 {
				t.Fatalf("%d entities in memory after a command, want 1", n)
			}

			// Wait until the idle timer is armed on the fake clock, then
			// move past it: the entity must stop.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := ts.Clock.BlockUntilContext(ctx, 1); err != nil {
				t.Fatalf("the idle timer was not armed: %v", err)
			}
			ts.Clock.Advance(after + time.Second)
			trellistest.Eventually(t, 5*time.Second, "the idle entity is passivated", func() bool { return app.Running.Active() == 0 })

			if c := fixture.Counter(t, ts.Get(t, "/counters/sleepy")); c.Value != 5 {
				t.Fatalf("value %d after passivation, want 5 (reloaded from the store)", c.Value)
			}
			if n := app.Running.Active(); n != 1 {
				t.Fatalf("%d entities in memory after the reload, want 1", n)
			}
			if c := fixture.Counter(t, ts.Post(t, "/counters/sleepy/increase", map[string]int{"by": 1})); c.Value != 6 {
				t.Fatalf("value %d after the reload, want 6", c.Value)
			}
		})
	}
}
