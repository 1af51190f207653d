package api_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/internal/idempotency"
)

// unsettling is an IdempotencyStore whose Finish and Release fail while
// down is set, as a store that is unreachable just after a claim.
type unsettling struct {
	api.IdempotencyStore
	down atomic.Bool
}

var errDown = errors.New("the store is unreachable")

func (s *unsettling) Finish(ctx context.Context, scope, key string, rec api.IdempotencyRecord, ttl time.Duration) error {
	if s.down.Load() {
		return errDown
	}
	return s.IdempotencyStore.Finish(ctx, scope, key, rec, ttl)
}

func (s *unsettling) Release(ctx context.Context, scope, key, digest string) error {
	if s.down.Load() {
		return errDown
	}
	return s.IdempotencyStore.Release(ctx, scope, key, digest)
}

// TestIdempotencySettlesWhenTheStoreAnswers: a first answer (a 504, a
// 503, a 201) whose key the store does not take is written anyway; while
// the store still fails, a retry is told "in progress"; once it answers
// again, the key is settled within a second (not when its claim lapses,
// two minutes later): the 504's retry runs, the 503's runs, the 201 is
// replayed.
func TestIdempotencySettlesWhenTheStoreAnswers(t *testing.T) {
	tests := []struct {
		first    int32 // the first answer
		runs     int32 // the runs after the retry
		replayed bool  // the retry is the first answer replayed
	}{
		{first: http.StatusGatewayTimeout, runs: 2},
		{first: http.StatusServiceUnavailable, runs: 2},
		{first: http.StatusCreated, runs: 1, replayed: true},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(int(tt.first)), func(t *testing.T) {
			store := &unsettling{IdempotencyStore: idempotency.NewMemoryStore(nil)}
			var runs, status atomic.Int32
			h := idempotentServerOn(store, &runs, &status, nil)
			store.down.Store(true)
			status.Store(tt.first)
			if w := post(h, "/things/1", "k", `{}`); w.Code != int(tt.first) {
				t.Fatalf("first: %d %s", w.Code, w.Body)
			}
			status.Store(0)
			if w := post(h, "/things/1", "k", `{}`); w.Code != http.StatusConflict || w.Header().Get("Retry-After") == "" {
				t.Fatalf("a retry while the store fails: %d %s, want 409 in progress", w.Code, w.Body)
			}
			store.down.Store(false)
			var retry int
			for end := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
				w := post(h, "/things/1", "k", `{}`)
				retry = w.Code
				if retry != http.StatusConflict {
					if got := w.Header().Get(api.HeaderIdempotencyReplayed) == "true"; got != tt.replayed {
						t.Errorf("the retry replayed = %v, want %v", got, tt.replayed)
					}
					break
				}
				if time.Now().After(end) {
					t.Fatalf("the retry is still 409 a second after the store answers again: %s", w.Body)
				}
			}
			if runs.Load() != tt.runs {
				t.Errorf("runs %d, want %d (retry answered %d)", runs.Load(), tt.runs, retry)
			}
		})
	}
}
