package timers

import (
	"context"
	"errors"
	"sync/atomic"
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

// heldStore is a store that can hold the loop at two points: a claim
// that has read the store (a round that read the clock before a test
// moved it, still under way), and the dead-letter pruning that opens the
// loop's next round, before that round begins.
type heldStore struct {
	Store
	holdClaim, holdPrune atomic.Bool
	held                 chan string // "claim" or "prune": the loop waits there
	resume               chan struct{}
}

func (s *heldStore) claim(ctx context.Context, max int, lease time.Duration) (claimBatch, error) {
	b, err := s.Store.claim(ctx, max, lease)
	if s.holdClaim.CompareAndSwap(true, false) {
		s.held <- "claim"
		<-s.resume
	}
	return b, err
}

func (s *heldStore) prune(ctx context.Context, retention time.Duration, batch int) (int, bool, error) {
	if s.holdPrune.CompareAndSwap(true, false) {
		s.held <- "prune"
		<-s.resume
	}
	return s.Store.prune(ctx, retention, batch)
}

// settleGrace is how long TestSettleAfterARoundUnderWay gives Settle to
// return early (it did within a millisecond, polling, before the fix).
const settleGrace = 200 * time.Millisecond

// TestSettleAfterARoundUnderWay: a claim round that read the store before
// the clock moved, and ends after Settle began, does not settle it: while
// the loop stands between that round and the next, Settle waits, and it
// returns only once a round that saw the moved clock has run what it made
// due.
func TestSettleAfterARoundUnderWay(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.Now().Truncate(time.Millisecond))
	store := &heldStore{Store: NewMemoryStore(clk), held: make(chan string), resume: make(chan struct{})}
	rec := newRecorder(clk)
	s := startScheduler(t, store, rec, Config{})
	t.Cleanup(func() { close(store.resume) }) // before the shutdown: let a held loop go
	quiesce(t, s)
	store.holdClaim.Store(true)
	mustCreate(t, s, "due", time.Minute, testCall(`1`)) // pokes the loop: a round reads the store
	if at := <-store.held; at != "claim" {
		t.Fatalf("held at %s, want the claim", at)
	}
	clk.Advance(time.Minute) // the timer is due, and so is the next pruning
	settled := make(chan error, 1)
	go func() { settled <- s.Settle(context.Background()) }()
	store.holdPrune.Store(true)
	store.resume <- struct{}{} // the round ends; the loop holds before the next
	if at := <-store.held; at != "prune" {
		t.Fatalf("held at %s, want the pruning", at)
	}
	select {
	case err := <-settled:
		t.Fatalf("Settle returned (%v) between a round that read the clock before it moved and the next, with %d calls", err, rec.len())
	case <-time.After(settleGrace):
	}
	store.resume <- struct{}{}
	if err := <-settled; err != nil {
		t.Fatal(err)
	}
	if n := rec.len(); n != 1 {
		t.Fatalf("Settle returned with %d calls of the timer due, want 1", n)
	}
}
