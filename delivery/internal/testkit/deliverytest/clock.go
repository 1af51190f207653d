package deliverytest

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/runtime"
)

// HolesSystem starts a system on a fake clock.
func HolesSystem(t *testing.T) (*runtime.System, *clockwork.FakeClock) {
	t.Helper()
	clock := clockwork.NewFakeClock()
	sys, _ := NewSystem(t, runtime.WithClock(clock))
	return sys, clock
}

// Stays checks that cond holds throughout a short bounded wait: for what
// must not happen, when nothing signals that it did not.
func Stays(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		if !cond() {
			t.Fatalf("no longer true: %s", what)
		}
		time.Sleep(time.Millisecond) // a poll, bounded by the deadline
	}
}

// WaitJob waits until col has the wanted job.
func WaitJob(t *testing.T, col *Collector) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	if err := col.Wait(ctx); err != nil {
		t.Fatalf("%v; delivered: %v", err, col.Jobs())
	}
}
