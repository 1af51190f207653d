package peertest

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo starts a TCP server that writes back what it reads, closed at the
// test's end.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads as many bytes back within limit.
func roundTrip(c net.Conn, msg string, limit time.Duration) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	c.SetReadDeadline(time.Now().Add(limit))
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

// eventually polls cond every millisecond for at most limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(limit); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not true within %v: %s", limit, what)
		}
	}
}

func TestProxyCarriesAndCounts(t *testing.T) {
	p := NewProxy(t, echo(t))
	c := dial(t, p.Addr())
	if got, err := roundTrip(c, "hello", 5*time.Second); err != nil || got != "hello" {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	if p.Accepted() != 1 || p.Open() != 1 {
		t.Fatalf("accepted %d, open %d; want 1, 1", p.Accepted(), p.Open())
	}
	c.Close()
	eventually(t, 5*time.Second, "the closed connection is forgotten", func() bool { return p.Open() == 0 })
}

func TestProxyCutResets(t *testing.T) {
	p := NewProxy(t, echo(t))
	c := dial(t, p.Addr())
	roundTrip(c, "x", 5*time.Second)
	p.Cut()
	if _, err := roundTrip(c, "y", 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after Cut: %v, want a reset or EOF", err)
	}
	if got, err := roundTrip(dial(t, p.Addr()), "z", 5*time.Second); err != nil || got != "z" {
		t.Fatalf("a new connection after Cut: %q, %v", got, err)
	}
}

func TestProxyHoldStallsUntilRelease(t *testing.T) {
	p := NewProxy(t, echo(t))
	c := dial(t, p.Addr())
	roundTrip(c, "x", 5*time.Second)
	p.Hold()
	if _, err := roundTrip(c, "y", 50*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("held: %v, want the read deadline", err)
	}
	p.Release()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil || buf[0] != 'y' {
		t.Fatalf("after Release: %q, %v", buf, err)
	}
}

func TestProxyDropBlackholes(t *testing.T) {
	p := NewProxy(t, echo(t))
	c := dial(t, p.Addr())
	roundTrip(c, "x", 5*time.Second)
	p.Drop()
	if _, err := roundTrip(c, "y", 50*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("dropped: %v, want the read deadline", err)
	}
	c.Close()
	eventually(t, 5*time.Second, "a dropped connection's hang-up is seen", func() bool { return p.Open() == 0 })
}

func TestProxyRefuse(t *testing.T) {
	p := NewProxy(t, echo(t))
	p.Refuse(true)
	c, err := net.Dial("tcp", p.Addr()) // the reset may come back during the dial already
	if err == nil {
		_, err = roundTrip(c, "x", 5*time.Second)
		c.Close()
	}
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("refused: %v, want a reset or EOF", err)
	}
	p.Refuse(false)
	if got, err := roundTrip(dial(t, p.Addr()), "x", 5*time.Second); err != nil || got != "x" {
		t.Fatalf("after Refuse(false): %q, %v", got, err)
	}
}

// recorder starts a TCP server that writes back each byte it reads and
// sends it to the channel returned, closed at the test's end.
func recorder(t *testing.T) (string, <-chan byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan byte, 16) // what the target read
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					got <- buf[0]
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), got
}

func TestProxyAfterSent(t *testing.T) {
	target, got := recorder(t)
	p := NewProxy(t, target)
	c := dial(t, p.Addr())
	if _, err := roundTrip(c, "x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	<-got
	fired := make(chan struct{})
	p.AfterSent("y", func() { close(fired) })
	if got, err := roundTrip(c, "x", 5*time.Second); err != nil || got != "x" {
		t.Fatalf("before the marker: %q, %v", got, err)
	}
	<-got
	if _, err := roundTrip(c, "y", 100*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("answers dropped: %v, want the read deadline", err)
	}
	select {
	case b := <-got:
		if b != 'y' {
			t.Fatalf("the target read %q, want y", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not reach the target")
	}
	testRecv(t, fired)
	if got, err := roundTrip(dial(t, p.Addr()), "z", 5*time.Second); err != nil || got != "z" {
		t.Fatalf("a new connection: %q, %v", got, err)
	}
	c.Close()
	p.Close()
}

func TestProxyHoldWhenSent(t *testing.T) {
	target, got := recorder(t)
	p := NewProxy(t, target)
	c := dial(t, p.Addr())
	fired := make(chan struct{})
	stalled := p.HoldWhenSent("y", func() { close(fired) })
	if got, err := roundTrip(c, "x", 5*time.Second); err != nil || got != "x" {
		t.Fatalf("before the marker: %q, %v", got, err)
	}
	<-got
	if _, err := roundTrip(c, "y", 100*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("held: %v, want the read deadline", err)
	}
	testRecv(t, fired)
	select {
	case b := <-got:
		t.Fatalf("the target read %q while the connection was held", b)
	case <-stalled.Answered():
		t.Fatal("answered while held")
	default:
	}
	if got, err := roundTrip(dial(t, p.Addr()), "z", 5*time.Second); err != nil || got != "z" {
		t.Fatalf("a new connection while one is held: %q, %v", got, err)
	}
	<-got
	stalled.Release()
	testRecv(t, stalled.Answered())
	if b := <-got; b != 'y' {
		t.Fatalf("the target read %q, want y", b)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil || buf[0] != 'y' {
		t.Fatalf("after the stall's release: %q, %v", buf, err)
	}
	if _, err := roundTrip(c, "w", 100*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after the stalled answer: %v, want the connection held again", err)
	}
	p.Release()
	if b := <-got; b != 'w' {
		t.Fatalf("after Release the target read %q, want w", b)
	}
}

// testRecv waits (at most 5 s) until ch is closed.
func testRecv(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("not closed within 5 s")
	}
}
