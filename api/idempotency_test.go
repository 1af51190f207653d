package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/idempotency"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// idempotentServer serves POST /things/{id}, which takes keys and answers
// with the status in status (201 when 0), counting its runs; and POST
// /other, which does not take keys.
func idempotentServer(runs *atomic.Int32, status *atomic.Int32, block chan struct{}) http.Handler {
	return idempotentServerOn(idempotency.NewMemoryStore(nil), runs, status, block)
}

// idempotentServerOn is idempotentServer with its keys in store.
func idempotentServerOn(store api.IdempotencyStore, runs *atomic.Int32, status *atomic.Int32, block chan struct{}) http.Handler {
	r := chi.NewRouter()
	// After routing, as a generated handler's Middlewares run: the route's
	// pattern is known.
	r = r.With(api.Idempotency(api.IdempotencyOptions{
		Store:  store,
		Routes: []string{"POST /things/{id}"},
	})).(*chi.Mux)
	handler := func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		if block != nil {
			<-block
		}
		switch status.Load() {
		case http.StatusConflict:
			api.WriteError(w, r, fmt.Errorf("save: %w", components.ErrConflict))
			return
		case businessConflict:
			api.WriteError(w, r, components.NewError(components.Conflict, "refused"))
			return
		}
		if key, _ := components.IdempotencyKeyFrom(r.Context()); key != "" {
			w.Header().Set("X-Entity-Key", key)
		}
		w.Header().Set("Location", "/things/1")
		api.WriteJSON(w, r, int(max(status.Load(), 201)), map[string]any{"run": n, "key": api.IdempotencyKey(r.Context())})
	}
	r.Post("/things/{id}", handler)
	r.Post("/other", handler)
	return r
}

// businessConflict makes idempotentServer refuse with a business 409.
const businessConflict = 4090

// noKey is post's key for a request without the header.
const noKey = "\x00"

func post(h http.Handler, path, key, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	if key != noKey {
		r.Header[api.HeaderIdempotencyKey] = []string{key}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestIdempotencyReplays: the same key and request replays the first
// answer (status, body, Location) marked replayed, and runs once; another
// body with the key is 422; a route without keys, or a request without
// one, runs each time; a bad key is 400.
func TestIdempotencyReplays(t *testing.T) {
	var runs, status atomic.Int32
	h := idempotentServer(&runs, &status, nil)
	first := post(h, "/things/1", "k1", `{"a":1}`)
	again := post(h, "/things/1", "k1", `{"a":1}`)
	if first.Code != 201 || again.Code != 201 || again.Body.String() != first.Body.String() ||
		again.Header().Get("Location") != "/things/1" || runs.Load() != 1 {
		t.Fatalf("first %d %s, again %d %s (Location %q), runs %d; want one run, replayed",
			first.Code, first.Body, again.Code, again.Body, again.Header().Get("Location"), runs.Load())
	}
	if first.Header().Get(api.HeaderIdempotencyReplayed) != "" || again.Header().Get(api.HeaderIdempotencyReplayed) != "true" {
		t.Fatal("only the replay is marked replayed")
	}
	if !strings.Contains(first.Body.String(), `"key":"k1"`) {
		t.Fatalf("the handler did not see its key: %s", first.Body)
	}
	if got := first.Header().Get("X-Entity-Key"); got != "POST /things/{id} k1" {
		t.Fatalf("the entities' key is %q, want the key scoped to its route", got)
	}
	if w := post(h, "/things/1", "k1", `{"a":2}`); w.Code != http.StatusUnprocessableEntity {
		t.Fatalf("another body with the key: %d %s, want 422", w.Code, w.Body)
	}
	if w := post(h, "/things/2", "k1", `{"a":1}`); w.Code != http.StatusUnprocessableEntity {
		t.Fatalf("another path with the key: %d %s, want 422", w.Code, w.Body)
	}
	post(h, "/other", "k1", `{"a":1}`)
	post(h, "/other", "k1", `{"a":1}`)
	post(h, "/things/1", noKey, `{"a":1}`)
	if runs.Load() != 4 {
		t.Fatalf("%d runs, want 4: routes without keys and requests without one run each time", runs.Load())
	}
	for _, bad := range []string{"a key", ""} {
		if w := post(h, "/things/1", bad, `{}`); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), api.HeaderIdempotencyKey) {
			t.Fatalf("key %q: %d %s, want 400 naming the header", bad, w.Code, w.Body)
		}
	}
}

// TestIdempotencyInFlight: a request with the key of one still running is
// 409, and runs nothing.
func TestIdempotencyInFlight(t *testing.T) {
	var runs, status atomic.Int32
	block := make(chan struct{})
	h := idempotentServer(&runs, &status, block)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- post(h, "/things/1", "k1", `{}`) }()
	for runs.Load() == 0 {
		select {
		case w := <-done:
			t.Fatalf("the first request ended before it ran: %d", w.Code)
		default:
		}
	}
	if w := post(h, "/things/1", "k1", `{}`); w.Code != http.StatusConflict || w.Header().Get("Retry-After") == "" ||
		!strings.Contains(w.Body.String(), api.ProblemTypeInProgress) {
		t.Fatalf("while in flight: %d %s (Retry-After %q), want 409 of type %s with a Retry-After",
			w.Code, w.Body, w.Header().Get("Retry-After"), api.ProblemTypeInProgress)
	}
	close(block)
	if w := <-done; w.Code != 201 || runs.Load() != 1 {
		t.Fatalf("first: %d, runs %d", w.Code, runs.Load())
	}
}

// TestIdempotencyAfterFailures: a 503, a 409 of write conflicts or a 202
// releases the key (the retry runs); a 504 keeps it as unknown (the retry
// runs, and its answer is then replayed).
func TestIdempotencyAfterFailures(t *testing.T) {
	var runs, status atomic.Int32
	h := idempotentServer(&runs, &status, nil)
	for _, failed := range []int32{http.StatusServiceUnavailable, http.StatusConflict, http.StatusGatewayTimeout, http.StatusAccepted} {
		runs.Store(0)
		key := fmt.Sprintf("k%d", failed)
		status.Store(failed)
		if w := post(h, "/things/1", key, `{}`); w.Code != int(failed) {
			t.Fatalf("first: %d", w.Code)
		}
		status.Store(0)
		retry := post(h, "/things/1", key, `{}`)
		replayed := post(h, "/things/1", key, `{}`)
		if retry.Code != 201 || replayed.Header().Get(api.HeaderIdempotencyReplayed) != "true" || runs.Load() != 2 {
			t.Fatalf("after %d: retry %d, then replayed %q, runs %d; want the retry run and then replayed",
				failed, retry.Code, replayed.Header().Get(api.HeaderIdempotencyReplayed), runs.Load())
		}
	}
}

// TestIdempotencyKeepsRefusals: a business refusal (a 409 without
// Retry-After) is an answer like any other: kept and replayed.
func TestIdempotencyKeepsRefusals(t *testing.T) {
	var runs, status atomic.Int32
	h := idempotentServer(&runs, &status, nil)
	status.Store(businessConflict)
	first := post(h, "/things/1", "r1", `{}`)
	status.Store(0)
	again := post(h, "/things/1", "r1", `{}`)
	if first.Code != http.StatusConflict || again.Code != http.StatusConflict ||
		again.Header().Get(api.HeaderIdempotencyReplayed) != "true" || runs.Load() != 1 {
		t.Fatalf("first %d, again %d (replayed %q), runs %d; want the refusal replayed",
			first.Code, again.Code, again.Header().Get(api.HeaderIdempotencyReplayed), runs.Load())
	}
}

// TestIdempotencyTakesOverAGoneHoldersClaim: a retry of a request whose
// claim is held by an instance that is gone runs at once; one whose
// holder lives is told "in progress".
func TestIdempotencyTakesOverAGoneHoldersClaim(t *testing.T) {
	for _, tt := range []struct {
		name   string
		gone   bool
		status int
	}{
		{"holder gone: taken over", true, http.StatusCreated},
		{"holder alive: in progress", false, http.StatusConflict},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := idempotency.NewMemoryStore(nil)
			serve := func(holder string, gone func(string) bool, runs *atomic.Int32, block chan struct{}) http.Handler {
				r := chi.NewRouter()
				r = r.With(api.Idempotency(api.IdempotencyOptions{Store: store, Routes: []string{"POST /things/{id}"},
					Holder: holder, HolderGone: func(_ context.Context, h string) bool { return gone(h) }})).(*chi.Mux)
				r.Post("/things/{id}", func(w http.ResponseWriter, r *http.Request) {
					runs.Add(1)
					if block != nil {
						<-block
					}
					api.WriteJSON(w, r, http.StatusCreated, map[string]string{"by": holder})
				})
				return r
			}
			var deadRuns, myRuns atomic.Int32
			block := make(chan struct{})
			dead := serve("dead", func(string) bool { return false }, &deadRuns, block)
			done := make(chan *httptest.ResponseRecorder, 1)
			go func() { done <- post(dead, "/things/1", "k", `{}`) }()
			testenv.Eventually(t, 5*time.Second, "the first request runs", func() bool { return deadRuns.Load() == 1 })

			me := serve("me", func(h string) bool { return h == "dead" && tt.gone }, &myRuns, nil)
			if w := post(me, "/things/1", "k", `{}`); w.Code != tt.status {
				t.Fatalf("retry: %d %s, want %d", w.Code, w.Body, tt.status)
			}
			close(block)
			<-done
		})
	}
}
