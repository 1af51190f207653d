package timers

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// failingClaims is a store whose first fails claims fail, as a store out
// of reach does, claiming nothing.
type failingClaims struct {
	Store
	fails atomic.Int32
}

func (s *failingClaims) claim(ctx context.Context, max int, lease time.Duration) (claimBatch, error) {
	if s.fails.Add(-1) >= 0 {
		return claimBatch{}, errors.New("the store is out of reach")
	}
	return s.Store.claim(ctx, max, lease)
}

// TestClaimFailureBacksOffInRealTime: after a failed claim the loop waits
// its backoff in real time, so a timer due on a fake clock that nothing
// moves any more still fires once the store answers again.
func TestClaimFailureBacksOffInRealTime(t *testing.T) {
	clk := clockwork.NewFakeClockAt(epoch)
	store := &failingClaims{Store: NewMemoryStore(clk)}
	rec := newRecorder(clk)
	s := startScheduler(t, store, rec, Config{})
	mustCreate(t, s, "due", time.Second, testCall(`1`))
	store.fails.Store(3)
	clk.Advance(time.Second)
	waitFor(t, "the timer's call after three failed claims", func() bool { return rec.len() == 1 })
	if n := store.fails.Load(); n >= 0 {
		t.Fatalf("%d claims left to fail, want every failure used", n+1)
	}
}
