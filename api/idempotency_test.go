package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/internal/idempotency"
)

// idempotentServer serves POST /things/{id}, which takes keys and answers
// with the status in status (201 when 0), counting its runs; and POST
// /other, which does not take keys.
func idempotentServer(runs *atomic.Int32, status *atomic.Int32, block chan struct{}) http.Handler {
	r := chi.NewRouter()
	// After routing, as a generated handler's Middlewares run: the route's
	// pattern is known.
	r = r.With(api.Idempotency(api.IdempotencyOptions{
		Store:  idempotency.NewMemoryStore(nil),
		Routes: []string{"POST /things/{id}"},
	})).(*chi.Mux)
	handler := func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		if block != nil {
			<-block
		}
		w.Header().Set("Location", "/things/1")
		api.WriteJSON(w, r, int(max(status.Load(), 201)), map[string]any{"run": n, "key": api.IdempotencyKey(r.Context())})
	}
	r.Post("/things/{id}", handler)
	r.Post("/other", handler)
	return r
}

func post(h http.Handler, path, key, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	if key != "" {
		r.Header.Set(api.HeaderIdempotencyKey, key)
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
	if w := post(h, "/things/1", "k1", `{"a":2}`); w.Code != http.StatusUnprocessableEntity {
		t.Fatalf("another body with the key: %d %s, want 422", w.Code, w.Body)
	}
	if w := post(h, "/things/2", "k1", `{"a":1}`); w.Code != http.StatusUnprocessableEntity {
		t.Fatalf("another path with the key: %d %s, want 422", w.Code, w.Body)
	}
	post(h, "/other", "k1", `{"a":1}`)
	post(h, "/other", "k1", `{"a":1}`)
	post(h, "/things/1", "", `{"a":1}`)
	if runs.Load() != 4 {
		t.Fatalf("%d runs, want 4: routes without keys and requests without one run each time", runs.Load())
	}
	if w := post(h, "/things/1", "a key", `{}`); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), api.HeaderIdempotencyKey) {
		t.Fatalf("a key with a space: %d %s, want 400 naming the header", w.Code, w.Body)
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
	if w := post(h, "/things/1", "k1", `{}`); w.Code != http.StatusConflict {
		t.Fatalf("while in flight: %d %s, want 409", w.Code, w.Body)
	}
	close(block)
	if w := <-done; w.Code != 201 || runs.Load() != 1 {
		t.Fatalf("first: %d, runs %d", w.Code, runs.Load())
	}
}

// TestIdempotencyAfterFailures: a 503 or a 409 (write conflicts) releases
// the key (the retry runs); a 504 keeps it as unknown (the retry runs, and
// its answer is then replayed).
func TestIdempotencyAfterFailures(t *testing.T) {
	var runs, status atomic.Int32
	h := idempotentServer(&runs, &status, nil)
	for _, failed := range []int32{http.StatusServiceUnavailable, http.StatusConflict, http.StatusGatewayTimeout} {
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
