package ordering_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/runtime"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/samples/ordering"
	"github.com/trellis-go/trellis/timers"
	"github.com/trellis-go/trellis/trellistest"
)

// The failure paths of POST /orders, which the end-to-end tests cannot
// reach cheaply (50,000 timers, a broken store), run here in process: the
// endpoint over a scheduler and an entity store the test controls.

// countingStore is an entity store that counts the states saved (the
// saves that succeed), and can
// refuse to save, or save and then lose the answer.
type countingStore struct {
	entities.Store
	saves    atomic.Int64
	failSave bool  // every Save fails with errSaveRefused
	failWith error // the next Save fails with it
	applied  bool  // and is applied all the same (its answer was lost)
}

var errSaveRefused = errors.New("save refused by the test")

func (s *countingStore) Save(ctx context.Context, typ, id string, data []byte, expected uint64) (uint64, error) {
	if s.failSave {
		return 0, errSaveRefused
	}
	if err := s.failWith; err != nil {
		s.failWith = nil
		if s.applied {
			_, _ = s.save(ctx, typ, id, data, expected)
		}
		return 0, err
	}
	return s.save(ctx, typ, id, data, expected)
}

// save saves, counting the saves that succeed (a conflict is no save).
func (s *countingStore) save(ctx context.Context, typ, id string, data []byte, expected uint64) (uint64, error) {
	rev, err := s.Store.Save(ctx, typ, id, data, expected)
	if err == nil {
		s.saves.Add(1)
	}
	return rev, err
}

// onlyOrders serves the order routes; the rest of the contract answers 501.
type onlyOrders struct {
	*ordering.Endpoint
	unimplemented // one level deeper, so the order methods win
}

type unimplemented struct{ contract.Unimplemented }

// orderHandler runs the order sample on store and sched and returns its
// HTTP handler.
func orderHandler(t *testing.T, store entities.Store, sched *timers.Scheduler, client *components.Client) http.Handler {
	t.Helper()
	sys := runtime.NewSystem(t.Name(), runtime.WithLogger(discard))
	t.Cleanup(func() { _ = sys.Shutdown(context.Background()) })
	if _, err := ordering.Orders.Start(entities.Host{System: sys, Client: client, Store: store}); err != nil {
		t.Fatal(err)
	}
	if _, err := ordering.TimedAction.Start(client); err != nil {
		t.Fatal(err)
	}
	ep, err := ordering.NewEndpoint(client, sched, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return contract.HandlerWithOptions(onlyOrders{Endpoint: ep}, contract.ChiServerOptions{
		ErrorHandlerFunc: api.WriteParamError,
		Middlewares: []contract.MiddlewareFunc{api.Idempotency(api.IdempotencyOptions{
			Store: trellistest.NewIdempotencyStore(nil), Routes: ordering.IdempotentRoutes,
		})},
	})
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// postOrder sends POST /orders to h, with the Idempotency-Key key if any.
func postOrder(h http.Handler, key ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"item":"Pizza","quantity":1}`))
	req.Header.Set("Content-Type", api.ContentTypeJSON)
	for _, k := range key {
		req.Header.Set(api.HeaderIdempotencyKey, k)
	}
	req = req.WithContext(api.ContextWithLogger(req.Context(), discard))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// problemOf decodes a recorded problem+json response.
func problemOf(t *testing.T, rec *httptest.ResponseRecorder) api.Problem {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != api.ContentTypeProblem {
		t.Fatalf("Content-Type %q, want %q: %d %s", ct, api.ContentTypeProblem, rec.Code, rec.Body)
	}
	var p api.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// When the timer limit is reached, POST /orders is a 503 that says so, and
// no order is stored.
func TestPlaceOrderTimerLimit(t *testing.T) {
	client := components.NewClient(components.NewRegistry())
	sched, err := timers.New(timers.NewMemoryStore(clockwork.NewFakeClock()), client, timers.Config{MaxActive: 1, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	store := &countingStore{Store: entities.NewMemoryStore()}
	h := orderHandler(t, store, sched, client)

	if rec := postOrder(h); rec.Code != http.StatusCreated {
		t.Fatalf("first order: %d %s, want 201", rec.Code, rec.Body)
	}
	rec := postOrder(h)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("order beyond the timer limit: %d %s, want 503", rec.Code, rec.Body)
	}
	p := problemOf(t, rec)
	for _, want := range []string{"no order was placed", "active timers limit exceeded", "the limit is 1"} {
		if !strings.Contains(p.Detail, want) {
			t.Errorf("detail %q does not say %q", p.Detail, want)
		}
	}
	if n := store.saves.Load(); n != 1 {
		t.Errorf("%d orders stored, want only the first", n)
	}
}

// When the timer store does not answer, POST /orders is a 503 that says no
// order was placed, without the store's error, and no order is stored.
func TestPlaceOrderTimerStoreDown(t *testing.T) {
	client := components.NewClient(components.NewRegistry())
	// Nothing listens on port 1: every Redis call fails at once.
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rc.Close() })
	sched, err := timers.New(timers.NewRedisStore(rc, "ordering-test"), client, timers.Config{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	store := &countingStore{Store: entities.NewMemoryStore()}
	h := orderHandler(t, store, sched, client)

	rec := postOrder(h)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("%d %s, want 503", rec.Code, rec.Body)
	}
	p := problemOf(t, rec)
	if !strings.Contains(p.Detail, "no order was placed") || strings.Contains(p.Detail, "127.0.0.1") {
		t.Errorf("detail %q: want it to say no order was placed, without internals", p.Detail)
	}
	if n := store.saves.Load(); n != 0 {
		t.Errorf("%d orders stored, want none", n)
	}
}

// When placing the order fails after its timer was created, the answer is
// an error and the timer stays, so that the order expires should it have
// been stored after all.
func TestPlaceOrderFailureKeepsTimer(t *testing.T) {
	client := components.NewClient(components.NewRegistry())
	sched, err := timers.New(timers.NewMemoryStore(clockwork.NewFakeClock()), client, timers.Config{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	h := orderHandler(t, &countingStore{Store: entities.NewMemoryStore(), failSave: true}, sched, client)

	rec := postOrder(h)
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("%d %s, want 500", rec.Code, rec.Body)
	}
	st, err := sched.Stats(context.Background())
	if err != nil || st.Active != 1 {
		t.Fatalf("timers after the failed order: %+v, %v; want the order's timer kept", st, err)
	}
}

// When the order's write provably did not reach the store, POST /orders
// is a 503 (nothing was changed), and its timer is deleted: nothing of the
// order is left.
func TestPlaceOrderNotDoneLeavesNothing(t *testing.T) {
	client := components.NewClient(components.NewRegistry())
	sched, err := timers.New(timers.NewMemoryStore(clockwork.NewFakeClock()), client, timers.Config{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	store := &countingStore{Store: entities.NewMemoryStore(), failWith: fmt.Errorf("dial: %w", components.ErrUnavailable)}
	h := orderHandler(t, store, sched, client)

	rec := postOrder(h)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("%d %s, want 503 with Retry-After", rec.Code, rec.Body)
	}
	st, err := sched.Stats(context.Background())
	if err != nil || st.Active != 0 || store.saves.Load() != 0 {
		t.Fatalf("after the 503: timers %+v (%v), %d orders stored; want nothing", st, err, store.saves.Load())
	}
}

// When the order's write was applied and its answer lost, POST /orders is
// the 504 outcome-unknown problem and the timer stays (it will expire the
// order); the retry with the same Idempotency-Key answers 201 with the
// same order, and stores nothing more.
func TestPlaceOrderUnknownThenRetry(t *testing.T) {
	client := components.NewClient(components.NewRegistry())
	sched, err := timers.New(timers.NewMemoryStore(clockwork.NewFakeClock()), client, timers.Config{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	store := &countingStore{Store: entities.NewMemoryStore(), failWith: fmt.Errorf("read: %w", components.ErrOutcomeUnknown), applied: true}
	h := orderHandler(t, store, sched, client)

	first := postOrder(h, "key-1")
	if p := problemOf(t, first); first.Code != http.StatusGatewayTimeout || p.Type != api.ProblemTypeOutcomeUnknown {
		t.Fatalf("%d %+v, want the 504 outcome-unknown problem", first.Code, p)
	}
	if st, err := sched.Stats(context.Background()); err != nil || st.Active != 1 {
		t.Fatalf("timers after the 504: %+v, %v; want the order's timer kept", st, err)
	}
	retry := postOrder(h, "key-1")
	var o contract.Order
	if err := json.Unmarshal(retry.Body.Bytes(), &o); err != nil || retry.Code != http.StatusCreated || !o.Placed {
		t.Fatalf("retry: %d %s, want 201 and the order", retry.Code, retry.Body)
	}
	again := postOrder(h, "key-1")
	if again.Body.String() != retry.Body.String() || again.Header().Get(api.HeaderIdempotencyReplayed) != "true" {
		t.Fatalf("a second retry: %d %s, want the retry's answer replayed", again.Code, again.Body)
	}
	st, err := sched.Stats(context.Background())
	if err != nil || st.Active != 1 || store.saves.Load() != 1 {
		t.Fatalf("after the retries: timers %+v (%v), %d orders stored; want one of each", st, err, store.saves.Load())
	}
}

// ParseID accepts a UUID in its 36-character form, in either case, and
// returns it in lower case; it refuses every other form.
func TestParseID(t *testing.T) {
	const id = "6f1c9a7e-2d4b-4c1e-9a57-3b8d0f2e4a61"
	tests := []struct {
		in     string // the path parameter
		want   string // the canonical id
		wantOK bool   // it is accepted
	}{
		{id, id, true},
		{strings.ToUpper(id), id, true},
		{"00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000", true},
		{"", "", false},
		{"not-a-uuid", "", false},
		{strings.ReplaceAll(id, "-", ""), "", false},
		{"{" + id + "}", "", false},
		{"urn:uuid:" + id, "", false},
		{id[:35] + "g", "", false},
		{id + "0", "", false},
	}
	for _, tt := range tests {
		got, ok := ordering.ParseID(tt.in)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseID(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

// NewEndpoint refuses what would make a broken endpoint.
func TestNewEndpointRefuses(t *testing.T) {
	client := components.NewClient(components.NewRegistry())
	sched, err := timers.New(timers.NewMemoryStore(clockwork.NewFakeClock()), client, timers.Config{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string             // the case
		client *components.Client // the component client
		sched  *timers.Scheduler  // the scheduler
		expiry time.Duration      // the expiry
	}{
		{"no client", nil, sched, time.Second},
		{"no scheduler", client, nil, time.Second},
		{"zero expiry", client, sched, 0},
		{"negative expiry", client, sched, -time.Second},
	}
	for _, tt := range tests {
		if ep, err := ordering.NewEndpoint(tt.client, tt.sched, tt.expiry); err == nil || ep != nil {
			t.Errorf("%s: %v, %v; want an error", tt.name, ep, err)
		}
	}
}
