package idempotency_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/internal/idempotency"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestStores runs the same protocol on both stores: a claim is exclusive,
// a finished key holds its answer, an unknown outcome of the same request
// may be claimed again (and of another request may not), a release frees
// the key, only the claim's holder settles it, and records expire.
func TestStores(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		clock := clockwork.NewFakeClock()
		conform(t, idempotency.NewMemoryStore(clock), func(expired func() bool) {
			clock.Advance(time.Second)
			if !expired() {
				t.Fatal("the record did not expire")
			}
		})
	})
	t.Run("redis", func(t *testing.T) {
		prefix := fmt.Sprintf("idem-test-%d", time.Now().UnixNano())
		conform(t, idempotency.NewRedisStore(testenv.Redis(t), prefix), func(expired func() bool) {
			// Redis expires on its own clock.
			testenv.Eventually(t, 5*time.Second, "the record expires", expired)
		})
	})
}

// conform runs the protocol on s; waitExpiry returns once expired says
// that a record with a 50 ms ttl is gone.
func conform(t *testing.T, s api.IdempotencyStore, waitExpiry func(expired func() bool)) {
	ctx := context.Background()
	const scope, key, ttl = "POST /orders", "k-1", 50 * time.Millisecond
	mustClaim := func(key, digest string) {
		t.Helper()
		if held, err := s.Claim(ctx, scope, key, digest, time.Hour); err != nil || held != nil {
			t.Fatalf("Claim(%s, %s) = %+v, %v; want it claimed", key, digest, held, err)
		}
	}
	mustHold := func(key, digest string, state api.IdempotencyState) *api.IdempotencyRecord {
		t.Helper()
		held, err := s.Claim(ctx, scope, key, digest, time.Hour)
		if err != nil || held == nil || held.State != state {
			t.Fatalf("Claim(%s, %s) = %+v, %v; want it held %s", key, digest, held, err, state)
		}
		return held
	}
	mustClaim(key, "d1")
	mustHold(key, "d1", api.IdempotencyInFlight)
	// Only the holder's digest settles the key.
	if err := s.Finish(ctx, scope, key, api.IdempotencyRecord{State: api.IdempotencyDone, Digest: "other"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	mustHold(key, "d1", api.IdempotencyInFlight)
	answer := &api.StoredAnswer{Status: 201, Header: http.Header{"Location": {"/orders/1"}}, Body: []byte(`{"id":"1"}`)}
	if err := s.Finish(ctx, scope, key, api.IdempotencyRecord{State: api.IdempotencyDone, Digest: "d1", Answer: answer}, time.Hour); err != nil {
		t.Fatal(err)
	}
	held := mustHold(key, "d1", api.IdempotencyDone)
	if held.Digest != "d1" || held.Answer == nil || held.Answer.Status != 201 || string(held.Answer.Body) != `{"id":"1"}` ||
		held.Answer.Header.Get("Location") != "/orders/1" {
		t.Fatalf("held %+v (answer %+v), want the finished answer", held, held.Answer)
	}
	// An unknown outcome: claimed again by the same request only.
	mustClaim("k-2", "d2")
	if err := s.Finish(ctx, scope, "k-2", api.IdempotencyRecord{State: api.IdempotencyUnknown, Digest: "d2"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	mustHold("k-2", "other", api.IdempotencyUnknown)
	mustClaim("k-2", "d2")
	mustHold("k-2", "d2", api.IdempotencyInFlight)
	// A release frees the key, for its holder only.
	if err := s.Release(ctx, scope, "k-2", "other"); err != nil {
		t.Fatal(err)
	}
	mustHold("k-2", "d2", api.IdempotencyInFlight)
	if err := s.Release(ctx, scope, "k-2", "d2"); err != nil {
		t.Fatal(err)
	}
	mustClaim("k-2", "d3")
	// Scopes are apart.
	if held, err := s.Claim(ctx, "POST /orders/{id}/confirm", key, "d1", time.Hour); err != nil || held != nil {
		t.Fatalf("another scope's key: %+v, %v; want it claimed", held, err)
	}
	// Records expire.
	if held, err := s.Claim(ctx, scope, "k-3", "d4", ttl); err != nil || held != nil {
		t.Fatalf("Claim k-3: %+v, %v", held, err)
	}
	waitExpiry(func() bool {
		held, err := s.Claim(ctx, scope, "k-3", "d5", time.Hour)
		return err == nil && held == nil
	})
}

// TestStoresTakeOverAGoneHoldersClaim: on both stores a claim names its
// holder; another holder may take it over only by naming that holder as
// gone, and only for the same request while it is in flight.
func TestStoresTakeOverAGoneHoldersClaim(t *testing.T) {
	stores := map[string]api.IdempotencyHolderStore{
		"memory": idempotency.NewMemoryStore(clockwork.NewFakeClock()),
		"redis":  idempotency.NewRedisStore(testenv.Redis(t), fmt.Sprintf("idem-holder-%d", time.Now().UnixNano())),
	}
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			const scope = "POST /orders"
			if held, err := s.ClaimAs(ctx, scope, "k", "d1", "dead", "", time.Hour); err != nil || held != nil {
				t.Fatalf("first claim = %+v, %v", held, err)
			}
			tests := []struct {
				name, digest, holder, takeFrom string
				taken                          bool
			}{
				{"another holder, not taking over", "d1", "me", "", false},
				{"taking over from the wrong holder", "d1", "me", "someone", false},
				{"taking over another request", "d2", "me", "dead", false},
				{"taking over from the gone holder", "d1", "me", "dead", true},
				{"then the new holder's claim stands", "d1", "other", "dead", false},
			}
			for _, tt := range tests {
				held, err := s.ClaimAs(ctx, scope, "k", tt.digest, tt.holder, tt.takeFrom, time.Hour)
				if err != nil || (held == nil) != tt.taken {
					t.Fatalf("%s: ClaimAs = %+v, %v; want taken %v", tt.name, held, err, tt.taken)
				}
				if !tt.taken && held.Holder == "" {
					t.Fatalf("%s: the held claim names no holder: %+v", tt.name, held)
				}
			}
			if err := s.Finish(ctx, scope, "k", api.IdempotencyRecord{State: api.IdempotencyDone, Digest: "d1",
				Answer: &api.StoredAnswer{Status: http.StatusOK}}, time.Hour); err != nil {
				t.Fatal(err)
			}
			if held, err := s.ClaimAs(ctx, scope, "k", "d1", "me", "dead", time.Hour); err != nil || held == nil || held.State != api.IdempotencyDone {
				t.Fatalf("a done key: ClaimAs taking over = %+v, %v; want its answer", held, err)
			}
		})
	}
}
