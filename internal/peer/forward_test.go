package peer

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/peertest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestForwardRoundTrip: the call's names (escaped in the path, whatever
// they hold) and argument arrive as sent, the reply comes back, and the
// request really is HTTP/2.
func TestForwardRoundTrip(t *testing.T) {
	got := make(chan Call, 1)
	var proto atomic.Int32
	s := startServer(t, ServerConfig{Handler: func(_ context.Context, c Call) (Reply, error) {
		got <- c
		return Reply{Value: json.RawMessage(`{"ok":true}`)}, nil
	}}, nil, func(r *http.Request) { proto.Store(int32(r.ProtoMajor)) })
	c := newClient(t, ClientConfig{})

	for _, want := range []Call{
		{ComponentID: "orders", Method: "Place", EntityID: "o-1", Argument: json.RawMessage(`{"qty":2}`)},
		{ComponentID: "weird id", Method: "Do/It", EntityID: "a/b?c#d%e f ü", Argument: json.RawMessage(`"x"`)},
		{ComponentID: "timed", Method: "Expire", EntityID: ""}, // no entity, no argument
	} {
		reply, err := c.Forward(within(t, 5*time.Second), s.Addr(), want)
		if err != nil {
			t.Fatalf("forward %s: %v", want, err)
		}
		if string(reply.Value) != `{"ok":true}` {
			t.Errorf("reply %s", reply.Value)
		}
		call := testenv.Recv(t, got, 5*time.Second)
		if call.ComponentID != want.ComponentID || call.Method != want.Method || call.EntityID != want.EntityID ||
			string(call.Argument) != string(want.Argument) {
			t.Errorf("server saw %s %q, want %s %q", call, call.Argument, want, want.Argument)
		}
	}
	if proto.Load() != 2 {
		t.Fatalf("the server saw HTTP/%d, want HTTP/2", proto.Load())
	}
}

// TestForwardDeadlinePropagates: the handler's context ends when the
// caller's does, give or take the trip, and Call.Deadline says when; a
// caller without a deadline gets DefaultTimeout.
func TestForwardDeadlinePropagates(t *testing.T) {
	got := make(chan time.Time, 1)
	s := startServer(t, ServerConfig{Handler: func(ctx context.Context, c Call) (Reply, error) {
		d, ok := ctx.Deadline()
		if !ok || !d.Equal(c.Deadline) {
			return Reply{}, errors.New("the context's deadline is not Call.Deadline")
		}
		got <- d
		return Reply{Value: json.RawMessage(`1`)}, nil
	}}, nil, nil)
	c := newClient(t, ClientConfig{DefaultTimeout: 7 * time.Second})

	for _, tc := range []struct {
		name    string
		timeout time.Duration // 0: no deadline on the caller's ctx
	}{
		{"caller's deadline", 3 * time.Second},
		{"default timeout", 0},
	} {
		ctx, want := context.Background(), time.Now().Add(7*time.Second)
		if tc.timeout > 0 {
			ctx = within(t, tc.timeout)
			want, _ = ctx.Deadline()
		}
		if _, err := c.Forward(ctx, s.Addr(), Call{ComponentID: "c", Method: "m"}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// The timeout travels as a duration, so the server's deadline is
		// the caller's plus the time on the way there (bounded loosely:
		// a loaded machine may take a while to run the server).
		if off := testenv.Recv(t, got, 5*time.Second).Sub(want); off < -10*time.Millisecond || off > time.Second {
			t.Errorf("%s: the server's deadline is %v off the caller's", tc.name, off)
		}
	}
}

// TestForwardCancelReachesHandler: canceling the caller's context
// cancels the handler's, and Forward fails with context.Canceled.
func TestForwardCancelReachesHandler(t *testing.T) {
	started, ended := make(chan struct{}), make(chan error, 1)
	s := startServer(t, ServerConfig{Handler: func(ctx context.Context, _ Call) (Reply, error) {
		close(started)
		<-ctx.Done()
		ended <- ctx.Err()
		return Reply{}, ctx.Err()
	}}, nil, nil)
	c := newClient(t, ClientConfig{})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Forward(ctx, s.Addr(), Call{ComponentID: "c", Method: "m"})
		errc <- err
	}()
	testenv.Recv(t, started, 5*time.Second)
	cancel()
	if err := testenv.Recv(t, errc, 5*time.Second); !errors.Is(err, context.Canceled) || !errors.Is(err, ErrCanceled) {
		t.Errorf("Forward: %v, want context.Canceled", err)
	}
	if err := testenv.Recv(t, ended, 5*time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("the handler's context ended with %v, want canceled", err)
	}
}

// TestForwardDeadlineExceeded: a handler slower than the caller's
// deadline fails the forward with context.DeadlineExceeded by then.
func TestForwardDeadlineExceeded(t *testing.T) {
	s := startServer(t, ServerConfig{Handler: func(ctx context.Context, _ Call) (Reply, error) {
		<-ctx.Done()
		return Reply{}, ctx.Err()
	}}, nil, nil)
	c := newClient(t, ClientConfig{})

	start := time.Now()
	_, err := c.Forward(within(t, 200*time.Millisecond), s.Addr(), Call{ComponentID: "c", Method: "m"})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrDeadline) {
		t.Fatalf("Forward: %v, want deadline exceeded", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Forward took %v past a 200ms deadline", took)
	}
}

// TestForwardManyShareOneConnection: concurrent forwards to one peer run
// at once over a single connection.
func TestForwardManyShareOneConnection(t *testing.T) {
	const n = 64
	arrived, release := make(chan struct{}, n), make(chan struct{})
	s := startServer(t, ServerConfig{Handler: func(_ context.Context, c Call) (Reply, error) {
		arrived <- struct{}{}
		<-release
		return Reply{Value: c.Argument}, nil
	}}, nil, nil)
	p := peertest.NewProxy(t, s.Addr())
	c := newClient(t, ClientConfig{})

	errc := make(chan error, n)
	for i := range n {
		go func() {
			arg := json.RawMessage(strings.Repeat("1", i+1))
			reply, err := c.Forward(within(t, 10*time.Second), p.Addr(), Call{ComponentID: "c", Method: "m", Argument: arg})
			if err == nil && string(reply.Value) != string(arg) {
				err = errors.New("reply " + string(reply.Value) + ", want " + string(arg))
			}
			errc <- err
		}()
	}
	for range n {
		testenv.Recv(t, arrived, 10*time.Second) // all n are in the handler at once
	}
	close(release)
	for range n {
		if err := testenv.Recv(t, errc, 10*time.Second); err != nil {
			t.Error(err)
		}
	}
	if p.Accepted() != 1 {
		t.Fatalf("%d connections for %d concurrent forwards, want 1", p.Accepted(), n)
	}
}

// TestForwardUnreachable: a peer that cannot be reached fails the forward
// with ErrUnavailable, and the call surely did not run.
func TestForwardUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	c := newClient(t, ClientConfig{})
	_, err = c.Forward(within(t, 5*time.Second), addr, Call{ComponentID: "c", Method: "m"})
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Forward: %v, want unavailable, outcome known", err)
	}
}
