package consumers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/samples/counter"
	"github.com/trellis-go/trellis/trellistest"
)

// serveAll serves every shard under one fence.
type serveAll struct{ incarnation string }

func (s serveAll) Serving(shard int) (cluster.Fence, bool) {
	return cluster.Fence{Shard: shard, Incarnation: s.incarnation, Epoch: 1}, true
}

// stallingHandler handles counters; while stall is set, a call waits in
// the way stall says (for another shard's owner, or at work) until its
// context ends or release is closed.
type stallingHandler struct {
	mu      sync.Mutex
	stall   func(ctx context.Context) // nil: no stall
	entered chan struct{}
	handled []string
}

func (h *stallingHandler) handle(ctx *consumers.Ctx, c consumers.Change[counter.Counter]) consumers.Effect {
	h.mu.Lock()
	stall := h.stall
	h.stall = nil
	h.mu.Unlock()
	if stall != nil {
		close(h.entered)
		stall(ctx.Context())
		if err := ctx.Context().Err(); err != nil {
			return ctx.Error("stalled: %v", err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handled = append(h.handled, fmt.Sprintf("%s@%d", c.EntityID, c.Revision))
	return ctx.Done()
}

func (h *stallingHandler) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.handled...)
}

// TestHandOverDoesNotWaitForOtherShards: a shard's hand-over waits for a
// handler at work (its change is not handled again), but cancels at once
// a handler that waits for another shard's owner, and the new owner
// handles that change again; neither holds the hand-over for its 10 s.
func TestHandOverDoesNotWaitForOtherShards(t *testing.T) {
	const work = 300 * time.Millisecond
	tests := []struct {
		name    string
		stall   func(ctx context.Context)
		minWait time.Duration
	}{
		{"waiting for another shard's owner", func(ctx context.Context) {
			defer cluster.Waiting(ctx, 7)()
			<-ctx.Done()
		}, 0},
		{"at work", func(ctx context.Context) {
			select {
			case <-ctx.Done():
			case <-time.After(work):
			}
		}, work},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := entities.NewMemoryStore()
			h := &stallingHandler{stall: tt.stall, entered: make(chan struct{})}
			start := func(incarnation string) *consumers.Runner {
				return runConsumer(t, consumers.Config{Log: store, Shards: serveAll{incarnation}}, h.handle)
			}
			old := start("old")
			waitCaughtUp(t, old) // its workers are registered
			began := time.Now()  // the handler's work starts after it
			if _, err := store.Save(t.Context(), "counter", "c-1", []byte(`{"id":"c-1","value":1}`), 0); err != nil {
				t.Fatal(err)
			}
			<-h.entered
			old.BeforeRelease(t.Context(), cluster.ShardOf("counter", "c-1"))
			if took := time.Since(began); took < tt.minWait || took > 2*time.Second {
				t.Fatalf("the write, its handling and the hand-over took %v, want %v to 2 s", took, tt.minWait)
			}
			waitCaughtUp(t, start("new"))
			if got := h.seen(); len(got) != 1 || got[0] != "c-1@1" {
				t.Fatalf("handled %v, want c-1@1 once", got)
			}
		})
	}
}

// TestHandlerTimeoutPerConsumer: a consumer's handler calls end after its
// own timeout; a consumer without one gets the runner's.
func TestHandlerTimeoutPerConsumer(t *testing.T) {
	tests := []struct {
		name string
		opts []consumers.Option
		want time.Duration
	}{
		{"the runner's", nil, consumers.DefaultHandlerTimeout},
		{"its own", []consumers.Option{consumers.WithHandlerTimeout(200 * time.Millisecond)}, 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			left := make(chan time.Duration, 1)
			ts := trellistest.Start(t, func(h *trellis.Host, _ chi.Router) error {
				if _, err := counter.Entity.Start(h.Entities()); err != nil {
					return err
				}
				_, err := consumers.Define("counter-log", counter.Entity, func(ctx *consumers.Ctx, _ consumers.Change[counter.Counter]) consumers.Effect {
					deadline, _ := ctx.Context().Deadline()
					left <- time.Until(deadline)
					return ctx.Done()
				}, tt.opts...).Start(h.Consumers())
				return err
			})
			increase(t, ts, "c-1")
			if got := <-left; got > tt.want || got < tt.want-time.Second {
				t.Fatalf("the handler's call ends in %v, want about %v", got, tt.want)
			}
		})
	}
}
