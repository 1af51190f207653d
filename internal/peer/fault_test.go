package peer

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/peertest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// blocking is a handler that signals each call's start on started and
// answers once release is closed (or its context ends).
func blocking(started chan<- struct{}, release <-chan struct{}) Handler {
	return func(ctx context.Context, c Call) (Reply, error) {
		started <- struct{}{}
		select {
		case <-release:
			return Reply{Value: json.RawMessage(`"done"`)}, nil
		case <-ctx.Done():
			return Reply{}, ctx.Err()
		}
	}
}

// forwardAsync runs a Forward in the background; its error arrives on the
// channel.
func forwardAsync(ctx context.Context, c *Client, addr string) <-chan error {
	errc := make(chan error, 1)
	go func() {
		_, err := c.Forward(ctx, addr, Call{ComponentID: "c", Method: "m"})
		errc <- err
	}()
	return errc
}

// TestFaultCutConnection: a connection reset under a call in flight fails
// it as unavailable with the outcome unknown; the next call dials again
// and succeeds.
func TestFaultCutConnection(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	s := startServer(t, ServerConfig{Handler: blocking(started, release)}, nil, nil)
	p := peertest.NewProxy(t, s.Addr())
	c := newClient(t, ClientConfig{})

	errc := forwardAsync(within(t, time.Minute), c, p.Addr())
	testenv.Recv(t, started, 5*time.Second)
	p.Cut()
	if err := testenv.Recv(t, errc, 5*time.Second); !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("in flight over a cut connection: %v, want unavailable, outcome unknown", err)
	}
	close(release)
	errc = forwardAsync(within(t, 5*time.Second), c, p.Addr())
	testenv.Recv(t, started, 5*time.Second)
	if err := testenv.Recv(t, errc, 5*time.Second); err != nil {
		t.Fatalf("the call after the cut: %v", err)
	}
	if p.Accepted() != 2 {
		t.Fatalf("%d connections, want 2 (one redialed)", p.Accepted())
	}
}

// TestFaultHeldConnection: a connection that stops carrying anything
// (no reset) fails a call by the caller's deadline; it does not hang.
func TestFaultHeldConnection(t *testing.T) {
	testenv.Long(t)
	s := startServer(t, ServerConfig{Handler: echo}, nil, nil)
	p := peertest.NewProxy(t, s.Addr())
	c := newClient(t, ClientConfig{})
	if _, err := c.Forward(within(t, 5*time.Second), p.Addr(), Call{ComponentID: "c", Method: "m"}); err != nil {
		t.Fatal(err) // the connection is up
	}
	p.Hold()
	start := time.Now()
	err := testenv.Recv(t, forwardAsync(within(t, 300*time.Millisecond), c, p.Addr()), 5*time.Second)
	if !errors.Is(err, ErrDeadline) || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("over a held connection: %v, want deadline exceeded, outcome unknown", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 3*time.Second { // not hung: bounded by the deadline, give or take a loaded machine
		t.Fatalf("failed after %v, want the 300ms deadline", took)
	}
}

// TestFaultDeadConnectionReplaced: the health check finds a blackholed
// connection and closes it; the next call dials a new one and succeeds.
func TestFaultDeadConnectionReplaced(t *testing.T) {
	s := startServer(t, ServerConfig{Handler: echo}, nil, nil)
	p := peertest.NewProxy(t, s.Addr())
	c := newClient(t, ClientConfig{Health: Health{Idle: 50 * time.Millisecond, Timeout: 100 * time.Millisecond}})
	if _, err := c.Forward(within(t, 5*time.Second), p.Addr(), Call{ComponentID: "c", Method: "m"}); err != nil {
		t.Fatal(err)
	}
	p.Drop()
	testenv.Eventually(t, 5*time.Second, "the client hangs up the dead connection", func() bool { return p.Open() == 0 })
	if _, err := c.Forward(within(t, 5*time.Second), p.Addr(), Call{ComponentID: "c", Method: "m"}); err != nil {
		t.Fatalf("the call after the dead connection: %v", err)
	}
	if p.Accepted() != 2 {
		t.Fatalf("%d connections, want 2", p.Accepted())
	}
}

// TestFaultPeerDown: a peer that refuses connections fails calls as
// unavailable and surely not run; once it is back, calls succeed.
func TestFaultPeerDown(t *testing.T) {
	s := startServer(t, ServerConfig{Handler: echo}, nil, nil)
	p := peertest.NewProxy(t, s.Addr())
	c := newClient(t, ClientConfig{})
	p.Refuse(true)
	_, err := c.Forward(within(t, 5*time.Second), p.Addr(), Call{ComponentID: "c", Method: "m"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("to a refusing peer: %v, want unavailable", err)
	}
	p.Refuse(false)
	if _, err := c.Forward(within(t, 5*time.Second), p.Addr(), Call{ComponentID: "c", Method: "m"}); err != nil {
		t.Fatalf("once the peer is back: %v", err)
	}
}
