package peer

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/peertest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestCallStreamOutOfOrder: calls on one stream run at once, a slow one
// does not hold up the others, and the replies, coming back in the order
// the calls finish, reach their own callers.
func TestCallStreamOutOfOrder(t *testing.T) {
	const n = 8
	release := make([]chan struct{}, n)
	for i := range release {
		release[i] = make(chan struct{})
	}
	arrived := make(chan struct{}, n)
	s := startServer(t, ServerConfig{Handler: func(_ context.Context, c Call) (Reply, error) {
		i, err := strconv.Atoi(string(c.Argument))
		if err != nil {
			return Reply{}, err
		}
		arrived <- struct{}{}
		<-release[i]
		return Reply{Value: c.Argument}, nil
	}}, nil, nil)
	p := peertest.NewProxy(t, s.Addr())
	c := newClient(t, ClientConfig{})

	type result struct {
		i     int
		reply string
		err   error
	}
	results := make(chan result, n)
	for i := range n {
		go func() {
			reply, err := c.Forward(within(t, 10*time.Second), p.Addr(), Call{ComponentID: "c", Method: "m", Argument: json.RawMessage(strconv.Itoa(i))})
			results <- result{i, string(reply.Value), err}
		}()
	}
	for range n {
		testenv.Recv(t, arrived, 5*time.Second) // all n run at once
	}
	for i := n - 1; i >= 0; i-- { // the last called finishes first
		close(release[i])
		r := testenv.Recv(t, results, 5*time.Second)
		if r.err != nil || r.i != i || r.reply != strconv.Itoa(i) {
			t.Fatalf("released call %d, got call %d: reply %q, %v", i, r.i, r.reply, r.err)
		}
	}
	if p.Accepted() != 1 {
		t.Fatalf("%d connections, want 1", p.Accepted())
	}
}

// TestCallStreamFailures: how a call in flight on a stream fails, and
// what its handler sees: the caller's deadline and cancellation reach the
// handler's context (the stream goes on), and a cut connection cancels
// the handler and fails the call with its outcome unknown (the next call
// dials again).
func TestCallStreamFailures(t *testing.T) {
	for _, tc := range []struct {
		name        string
		timeout     time.Duration
		fault       func(cancel context.CancelFunc, p *peertest.Proxy)
		want        error // the Forward's kind
		handlerErr  error // the handler's ctx.Err()
		connections int   // after one more call
	}{
		{"deadline", 200 * time.Millisecond, func(context.CancelFunc, *peertest.Proxy) {}, ErrDeadline, context.DeadlineExceeded, 1},
		{"canceled", time.Minute, func(cancel context.CancelFunc, _ *peertest.Proxy) { cancel() }, ErrCanceled, context.Canceled, 1},
		{"connection cut", time.Minute, func(_ context.CancelFunc, p *peertest.Proxy) { p.Cut() }, ErrUnavailable, context.Canceled, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started, ended := make(chan struct{}, 1), make(chan error, 1)
			s := startServer(t, ServerConfig{Handler: func(ctx context.Context, c Call) (Reply, error) {
				if c.Method == "quick" {
					return echo(ctx, c)
				}
				started <- struct{}{}
				<-ctx.Done()
				ended <- ctx.Err()
				return Reply{}, ctx.Err()
			}}, &logBuffer{}, nil)
			p := peertest.NewProxy(t, s.Addr())
			c := newClient(t, ClientConfig{})

			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			errc := forwardAsync(ctx, c, p.Addr())
			testenv.Recv(t, started, 5*time.Second)
			tc.fault(cancel, p)
			// At the deadline, the server's answer (the handler's error:
			// the outcome is its to say) may come in before the caller's
			// own timer; otherwise the outcome is unknown.
			err := testenv.Recv(t, errc, 5*time.Second)
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrOutcomeUnknown) && tc.want != ErrDeadline {
				t.Fatalf("Forward: %v, want %v, outcome unknown", err, tc.want)
			}
			if err := testenv.Recv(t, ended, 5*time.Second); !errors.Is(err, tc.handlerErr) {
				t.Fatalf("the handler's context ended with %v, want %v", err, tc.handlerErr)
			}
			if _, err := c.Forward(within(t, 5*time.Second), p.Addr(), Call{ComponentID: "c", Method: "quick"}); err != nil {
				t.Fatalf("the next call: %v", err)
			}
			if p.Accepted() != tc.connections {
				t.Fatalf("%d connections, want %d", p.Accepted(), tc.connections)
			}
		})
	}
}

// TestCallStreamShutdownDrain: once the server stops reading a stream
// (Shutdown), its end line tells the client; the call in flight still
// gets its reply, a later call fails surely not run, and Shutdown returns
// once the call in flight has answered.
func TestCallStreamShutdownDrain(t *testing.T) {
	var calls atomic.Int32
	started, release := make(chan struct{}, 1), make(chan struct{})
	block := blocking(started, release)
	s := startOwned(t, func(ctx context.Context, c Call) (Reply, error) { calls.Add(1); return block(ctx, c) })
	c := newClient(t, ClientConfig{})
	errc := forwardAsync(within(t, 10*time.Second), c, s.Addr())
	testenv.Recv(t, started, 5*time.Second)

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(within(t, 10*time.Second)) }()
	testenv.Eventually(t, 5*time.Second, "the client sees the end line", func() bool {
		c.mu.Lock()
		p := c.calls[s.Addr()]
		c.mu.Unlock()
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.st.isEnded()
	})
	_, err := c.Forward(within(t, 5*time.Second), s.Addr(), Call{ComponentID: "c", Method: "m"})
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("a call after the end line: %v, want unavailable, surely not run", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with a call in flight", err)
	default:
	}
	close(release)
	if err := testenv.Recv(t, errc, 5*time.Second); err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	if err := testenv.Recv(t, shut, 5*time.Second); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("the handler ran %d times, want once", calls.Load())
	}
}

// TestCallStreamBoundedInFlight: a stream carries at most
// streamMaxInFlight unanswered calls; the calls past it wait for a slot
// and run once one frees.
func TestCallStreamBoundedInFlight(t *testing.T) {
	const n = streamMaxInFlight + 50
	var running, most atomic.Int32
	release := make(chan struct{})
	s := startServer(t, ServerConfig{Handler: func(_ context.Context, c Call) (Reply, error) {
		r := running.Add(1)
		for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
		}
		<-release
		running.Add(-1)
		return Reply{Value: c.Argument}, nil
	}}, nil, nil)
	c := newClient(t, ClientConfig{})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Forward(within(t, 20*time.Second), s.Addr(), Call{ComponentID: "c", Method: "m"})
			errs <- err
		}()
	}
	testenv.Eventually(t, 10*time.Second, "the bound is reached", func() bool { return running.Load() == streamMaxInFlight })
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if most.Load() > streamMaxInFlight {
		t.Fatalf("%d calls ran at once, want at most %d", most.Load(), streamMaxInFlight)
	}
}

// TestForwardLargeArgument: a call whose line would exceed callLineMax
// goes as a request of its own, and round-trips.
func TestForwardLargeArgument(t *testing.T) {
	s := startServer(t, ServerConfig{Handler: echo}, nil, nil)
	c := newClient(t, ClientConfig{})
	arg := json.RawMessage(`"` + strings.Repeat("x", callLineMax) + `"`)
	reply, err := c.Forward(within(t, 5*time.Second), s.Addr(), Call{ComponentID: "c", Method: "m", Argument: arg})
	if err != nil || string(reply.Value) != string(arg) {
		t.Fatalf("Forward: %d bytes, %v", len(reply.Value), err)
	}
}

// TestCallStreamEndLine: the server's end line fails the calls after the
// last line it read, surely not run, and leaves the others waiting for
// their replies; the stream then takes no new call.
func TestCallStreamEndLine(t *testing.T) {
	st := &callStream{slots: make(chan struct{}, streamMaxInFlight), pending: map[uint64]*pendingCall{}}
	for seq := uint64(1); seq <= 3; seq++ {
		st.slots <- struct{}{}
		st.pending[seq] = &pendingCall{done: make(chan callOutcome, 1)}
	}
	waiting := st.pending[1]
	after := []*pendingCall{st.pending[2], st.pending[3]}
	st.endAt(1, NewError(KindUnavailable, "", "the server is shutting down"))
	for _, p := range after {
		o := testenv.Recv(t, p.done, time.Second)
		if o.err == nil || o.err.Kind != KindUnavailable || o.err.OutcomeUnknown {
			t.Errorf("a call after the end line: %v, want unavailable, surely not run", o.err)
		}
	}
	select {
	case o := <-waiting.done:
		t.Fatalf("the call the server read failed: %v", o.err)
	default:
	}
	if !st.isEnded() || len(st.slots) != 1 {
		t.Fatalf("ended %v, %d slots held; want ended, 1", st.isEnded(), len(st.slots))
	}
}

// TestForwardDeadlineWhileOpening: a peer that takes the connection but
// never answers the stream's opening holds a call no longer than its
// deadline, and the call surely did not run.
func TestForwardDeadlineWhileOpening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() { // takes the connections and says nothing
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, conn := range conns {
				conn.Close()
			}
		}()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, conn)
		}
	}()
	c := newClient(t, ClientConfig{DialTimeout: time.Minute})
	start := time.Now()
	_, err = c.Forward(within(t, 300*time.Millisecond), ln.Addr().String(), Call{ComponentID: "c", Method: "m"})
	if !errors.Is(err, ErrDeadline) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Forward: %v, want deadline exceeded, surely not run", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Forward took %v past a 300ms deadline", took)
	}
}

// TestCallStreamIdleRetired: a stream without calls for streamIdle is
// ended and its peer forgotten; the next call opens a new one.
func TestCallStreamIdleRetired(t *testing.T) {
	defer func(d time.Duration) { streamIdle = d }(streamIdle)
	streamIdle = 20 * time.Millisecond
	s := startServer(t, ServerConfig{Handler: echo}, nil, nil)
	c := newClient(t, ClientConfig{})
	for range 2 {
		if _, err := c.Forward(within(t, 5*time.Second), s.Addr(), Call{ComponentID: "c", Method: "m"}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 5*time.Second, "the idle stream is forgotten", func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return len(c.calls) == 0
		})
	}
}

// TestForwardToPeerWithoutCallStreams: a peer that answers a stream's
// opening 404 (a version without call streams) gets the call as a
// request of its own.
func TestForwardToPeerWithoutCallStreams(t *testing.T) {
	s, err := NewServer(ServerConfig{Secret: testSecret, Handler: echo, Logger: (&logBuffer{}).logger()})
	if err != nil {
		t.Fatal(err)
	}
	next := s.srv.Handler
	s.srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == callsPath {
			http.NotFound(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(within(t, 5*time.Second)) })
	c := newClient(t, ClientConfig{})
	reply, err := c.Forward(within(t, 5*time.Second), s.Addr(), Call{ComponentID: "c", Method: "m", Argument: json.RawMessage(`7`)})
	if err != nil || string(reply.Value) != "7" {
		t.Fatalf("Forward: %s, %v", reply.Value, err)
	}
}

// TestCallStreamUnsentCallsSurelyNotRun: when a stream breaks with a
// call whose line the transport had not taken yet (the connection
// stalled, HTTP/2 flow control holding the rest back), that call surely
// did not run, and Forward sends it once more on a new stream, where it
// runs once; the calls whose lines the transport took fail with their
// outcome unknown (here they did not run: the connection held them).
func TestCallStreamUnsentCallsSurelyNotRun(t *testing.T) {
	const maxCalls = 200
	var ran atomic.Int32
	s := startServer(t, ServerConfig{Handler: func(ctx context.Context, c Call) (Reply, error) {
		if c.Method == "big" {
			ran.Add(1)
		}
		return echo(ctx, c)
	}}, &logBuffer{}, nil)
	p := peertest.NewProxy(t, s.Addr())
	c := newClient(t, ClientConfig{})
	if _, err := c.Forward(within(t, 5*time.Second), p.Addr(), Call{ComponentID: "c", Method: "quick"}); err != nil {
		t.Fatal(err) // the stream is open
	}
	c.mu.Lock()
	st := c.calls[p.Addr()].st
	c.mu.Unlock()
	p.Hold()

	// One call at a time, each once its line is written, until lines
	// wait in the pipe that the transport does not take (HTTP/2 flow
	// control and the held connection hold it back: it took nothing for
	// a settle time while two lines or more waited): no call waits to be
	// written when the cut comes. A transport that is only slow to be
	// scheduled takes them within the settle time and more calls follow.
	const settle = 150 * time.Millisecond
	arg := json.RawMessage(`"` + strings.Repeat("x", 32<<10) + `"`)
	lineLen := uint64(callLineLen("/peer/v1/forward/c/big/", "", arg))
	errs := make(chan error, maxCalls)
	calls := 0
	for {
		before, _ := st.pipe.counts()
		calls++
		go func() {
			_, err := c.Forward(within(t, 30*time.Second), p.Addr(), Call{ComponentID: "c", Method: "big", Argument: arg})
			errs <- err
		}()
		deadline := time.Now().Add(10 * time.Second)
		written, taken := st.pipe.counts()
		for written == before {
			if time.Now().After(deadline) {
				t.Fatalf("call %d was not written", calls)
			}
			time.Sleep(time.Millisecond) // a poll, bounded by the deadline
			written, taken = st.pipe.counts()
		}
		held := written-taken >= 2*lineLen
		for since := time.Now(); held && time.Since(since) < settle; {
			time.Sleep(time.Millisecond) // a poll, bounded by the settle time
			_, now := st.pipe.counts()
			held = now == taken
		}
		if held {
			break
		}
		if calls == maxCalls {
			t.Fatalf("%d calls' lines all taken by the transport: nothing held them back", calls)
		}
	}
	p.Cut()
	resent, unknown := 0, 0
	for range calls {
		err := testenv.Recv(t, errs, 10*time.Second)
		switch {
		case err == nil:
			resent++
		case errors.Is(err, ErrOutcomeUnknown):
			unknown++
		default:
			t.Fatalf("a call: %v, want its reply (sent again) or its outcome unknown", err)
		}
	}
	written, taken := st.pipe.counts() // final: the broken pipe gives nothing more
	if written-taken < lineLen {
		t.Fatalf("the transport took the lines after all (%d bytes left of %d): the case was not reached", written-taken, written)
	}
	if resent == 0 {
		t.Fatalf("no call whose line waited in the pipe (%d bytes) was sent again (%d outcome unknown)", written-taken, unknown)
	}
	if n := int(ran.Load()); n != resent {
		t.Fatalf("%d calls ran, want the %d sent again, once each", n, resent)
	}
	t.Logf("%d calls sent again on a new stream, %d with their outcome unknown", resent, unknown)
}
