package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestServerBodyTooLarge: an argument over the server's MaxBodyBytes is
// refused with ErrTooLarge naming the limit, before the handler; a reply
// over the client's is refused too. At the limit, both pass.
func TestServerBodyTooLarge(t *testing.T) {
	const limit = 1 << 10
	var calls atomic.Int32
	s := startServer(t, ServerConfig{MaxBodyBytes: limit, Handler: func(ctx context.Context, c Call) (Reply, error) {
		calls.Add(1)
		if c.Method == "big" {
			return Reply{Value: json.RawMessage(`"` + strings.Repeat("r", limit) + `"`)}, nil
		}
		return echo(ctx, c)
	}}, nil, nil)
	c := newClient(t, ClientConfig{MaxBodyBytes: limit})
	arg := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("a", n-2) + `"`) }

	if _, err := c.Forward(within(t, 5*time.Second), s.Addr(), Call{ComponentID: "c", Method: "m", Argument: arg(limit)}); err != nil {
		t.Fatalf("an argument of exactly the limit: %v", err)
	}
	_, err := c.Forward(within(t, 5*time.Second), s.Addr(), Call{ComponentID: "c", Method: "m", Argument: arg(limit + 1)})
	if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), "argument exceeds the limit of 1024 bytes") {
		t.Fatalf("an argument over the limit: %v", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("the handler ran %d times, want once", calls.Load())
	}
	_, err = c.Forward(within(t, 5*time.Second), s.Addr(), Call{ComponentID: "c", Method: "big"})
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), "reply exceeds") {
		t.Fatalf("a reply over the limit: %v", err)
	}
}

// TestServerShutdownDrains: Shutdown stops taking connections and calls
// at once (a new call fails, surely not run, so that the caller may retry
// it elsewhere), lets the calls in flight finish and answer, and only
// then returns.
func TestServerShutdownDrains(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	block := blocking(started, release)
	s := startOwned(t, func(ctx context.Context, c Call) (Reply, error) {
		if c.Method == "quick" {
			return echo(ctx, c)
		}
		return block(ctx, c)
	})
	c := newClient(t, ClientConfig{})
	errc := forwardAsync(within(t, 10*time.Second), c, s.Addr())
	testenv.Recv(t, started, 5*time.Second)

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(within(t, 10*time.Second)) }()
	testenv.Eventually(t, 5*time.Second, "the listener closes", func() bool {
		conn, err := net.Dial("tcp", s.Addr())
		if err == nil {
			conn.Close()
		}
		return err != nil
	})
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with a call in flight", err)
	default:
	}
	// A call that reaches the connection before the server's GOAWAY is
	// served (it is in flight); one after it is refused, surely not run.
	_, err := c.Forward(within(t, 5*time.Second), s.Addr(), Call{ComponentID: "c", Method: "quick"})
	if err != nil && (!errors.Is(err, ErrUnavailable) || errors.Is(err, ErrOutcomeUnknown)) {
		t.Fatalf("a new call while shutting down: %v, want served, or unavailable and surely not run", err)
	}
	close(release)
	if err := testenv.Recv(t, errc, 5*time.Second); err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	if err := testenv.Recv(t, shut, 5*time.Second); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := s.Start("127.0.0.1:0"); err == nil {
		t.Fatal("Start after Shutdown succeeded")
	}
}

// TestServerShutdownTimeout: when Shutdown's context ends before the
// calls in flight, it closes the connections, which cancels their
// handlers, and returns the context's error.
func TestServerShutdownTimeout(t *testing.T) {
	started, ended := make(chan struct{}, 1), make(chan error, 1)
	s := startOwned(t, func(ctx context.Context, _ Call) (Reply, error) {
		started <- struct{}{}
		<-ctx.Done()
		ended <- ctx.Err()
		return Reply{}, ctx.Err()
	})
	c := newClient(t, ClientConfig{})
	errc := forwardAsync(within(t, time.Minute), c, s.Addr())
	testenv.Recv(t, started, 5*time.Second)

	if err := s.Shutdown(within(t, 100*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want its deadline", err)
	}
	if err := testenv.Recv(t, ended, 5*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("the handler's context: %v, want canceled", err)
	}
	if err := testenv.Recv(t, errc, 5*time.Second); !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("the call in flight: %v, want unavailable, outcome unknown", err)
	}
}

// TestServerRejectsHTTP1: the internal port speaks HTTP/2 only.
func TestServerRejectsHTTP1(t *testing.T) {
	s := startServer(t, ServerConfig{Handler: echo}, &logBuffer{}, nil)
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("POST " + forwardPrefix + "c/m/e HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, _ := conn.Read(buf)
	if bytes.HasPrefix(buf[:n], []byte("HTTP/1.1 2")) || bytes.HasPrefix(buf[:n], []byte("HTTP/1.1 401")) {
		t.Fatalf("an HTTP/1 request was served: %q", buf[:n])
	}
}
