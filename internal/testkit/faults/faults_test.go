package faults

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair is a connection dialed through p and the server's end of it.
func pair(t *testing.T, p *Points) (local, remote net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	local, err = p.Dial(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	remote = <-accepted
	t.Cleanup(func() { _ = local.Close(); _ = remote.Close() })
	return local, remote
}

// silent reports whether nothing arrives on c within d.
func silent(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// TestPartitionDropsBothWays: a partitioned connection carries nothing
// either way, its close is not seen by the other side, and the heal
// resets it.
func TestPartitionDropsBothWays(t *testing.T) {
	p := New()
	local, remote := pair(t, p)
	p.Partition()
	if n, err := local.Write([]byte("x")); n != 1 || err != nil {
		t.Fatalf("write while partitioned: %d, %v; want it taken and thrown away", n, err)
	}
	if !silent(remote, 50*time.Millisecond) {
		t.Errorf("the other side got what was written across the partition")
	}
	_, _ = remote.Write([]byte("y"))
	if !silent(local, 50*time.Millisecond) {
		t.Errorf("this side got what the other wrote across the partition")
	}
	_ = local.Close()
	if !silent(remote, 50*time.Millisecond) {
		t.Errorf("the other side saw the close across the partition")
	}
	p.Heal()
	_ = remote.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := remote.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, io.EOF) {
		t.Errorf("read after the heal: %v, want a reset", err)
	}
}

// TestDialWaitsForTheHeal: a dial while partitioned waits until the heal,
// or fails when its context ends first.
func TestDialWaitsForTheHeal(t *testing.T) {
	p := New()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p.Partition()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Dial(ctx, "tcp", ln.Addr().String()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("dial while partitioned: %v, want the context's deadline", err)
	}
	dialed := make(chan error, 1)
	go func() {
		c, err := p.Dial(t.Context(), "tcp", ln.Addr().String())
		if err == nil {
			_ = c.Close()
		}
		dialed <- err
	}()
	select {
	case err := <-dialed:
		t.Fatalf("dial returned while partitioned: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	p.Heal()
	if err := <-dialed; err != nil {
		t.Errorf("dial after the heal: %v", err)
	}
}

// TestKill: a kill resets the connections, runs what was registered once,
// and refuses later dials.
func TestKill(t *testing.T) {
	p := New()
	kills := 0
	p.OnKill(func() { kills++ })
	_, remote := pair(t, p)
	p.Kill()
	p.Kill()
	if kills != 1 {
		t.Errorf("the kill ran %d times, want once", kills)
	}
	_ = remote.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := remote.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read after the kill: %v, want the connection broken", err)
	}
	if _, err := p.Dial(t.Context(), "tcp", remote.LocalAddr().String()); !errors.Is(err, ErrKilled) {
		t.Errorf("dial after the kill: %v, want ErrKilled", err)
	}
}
