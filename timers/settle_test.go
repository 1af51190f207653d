package timers

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/components"
)

// Settle refuses a scheduler that is not running, and gives up when its
// context ends while a call still runs.
func TestSettleRefuses(t *testing.T) {
	// A whole millisecond, which the store keeps times in: a timer due in
	// a second is then due after exactly a second.
	clk := clockwork.NewFakeClockAt(time.Now().Truncate(time.Millisecond))
	idle := newScheduler(t, NewMemoryStore(clk), newRecorder(clk), Config{})
	if err := idle.Settle(context.Background()); !errors.Is(err, errNotRunning) {
		t.Errorf("Settle before Start: %v, want errNotRunning", err)
	}

	release := make(chan struct{})
	rec := newRecorder(clk)
	rec.handle = func(ctx context.Context, _ components.DeferredCall) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	s := startScheduler(t, NewMemoryStore(clk), rec, Config{})
	defer close(release) // before the scheduler's shutdown, which waits for the call
	if _, err := s.Create(context.Background(), "blocks", time.Second, testCall(`"x"`)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Settle(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Settle while a call blocks: %v, want context.DeadlineExceeded", err)
	}
	if n := rec.len(); n != 1 {
		t.Errorf("%d calls made, want the one that blocks", n)
	}
}
