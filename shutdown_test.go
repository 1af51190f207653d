package trellis_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/trellistest"
)

// TestShutdownDrains: a request in flight when Shutdown starts completes
// with 200; from the moment Shutdown starts, new connections are refused;
// Shutdown returns once the request is done.
func TestShutdownDrains(t *testing.T) {
	app := &fixture.CounterApp{BlockID: "slow", Entered: make(chan struct{}), Release: make(chan struct{})}
	ts := fixture.StartCounter(t, app)
	addr := ts.Addr().String()

	type result struct {
		status int
		body   []byte
		err    error
	}
	inflight := make(chan result, 1)
	go func() {
		resp, err := ts.Call(context.Background(), http.MethodPost, "/counters/slow/increase", map[string]int{"by": 3})
		if err != nil {
			inflight <- result{err: err}
			return
		}
		inflight <- result{status: resp.Status, body: resp.Body}
	}()
	select {
	case <-app.Entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not reach the handler")
	}

	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		shutdown <- ts.Shutdown(ctx)
	}()
	trellistest.Eventually(t, 5*time.Second, "new connections are refused once Shutdown starts", func() bool { return refused(addr) })
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned (%v) while a request was in flight", err)
	default:
	}

	close(app.Release)
	r := <-inflight
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("in-flight request: status %d, err %v, body %s; want 200", r.status, r.err, r.body)
	}
	var c contract.Counter
	if err := jsonUnmarshal(r.body, &c); err != nil || c.Value != 3 {
		t.Fatalf("in-flight request replied %s, want value 3", r.body)
	}
	select {
	case err := <-shutdown:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Shutdown did not return after the last request finished")
	}
	if !refused(addr) {
		t.Fatal("a new connection was accepted after Shutdown")
	}
}
