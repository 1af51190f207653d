package httpserver_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/internal/testkit/fixture"
	"github.com/trellis-go/trellis/trellistest"
)

// stalledRequest announces a body of 100,000 bytes and sends none of it.
const stalledRequest = "POST /counters/stalled/increase HTTP/1.1\r\nHost: test\r\n" +
	"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"

// dialStalled opens a connection to ts and sends stalledRequest on it.
func dialStalled(t *testing.T, ts *trellistest.Service) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", ts.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, stalledRequest); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStalledBodyIs408: a body that does not arrive by the request's
// deadline is answered 408 and its connection closed, instead of being
// waited for forever.
func TestStalledBodyIs408(t *testing.T) {
	ts := fixture.StartCounter(t, &fixture.CounterApp{}, trellistest.WithConfig(func(c *trellis.Config) { c.RequestTimeout = time.Second }))
	c := dialStalled(t, ts)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response to a stalled body within 10 s: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("status %d %s, want a 408 problem", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestStalledConnectionsLeaveRoomForProbes opens six times as many
// stalled connections as the service's cap: /healthz and /readyz still
// answer at once, and the server has closed the stalled connections
// beyond the cap.
func TestStalledConnectionsLeaveRoomForProbes(t *testing.T) {
	const maxConns, stalled = 50, 300
	ts := fixture.StartCounter(t, &fixture.CounterApp{}, trellistest.WithConfig(func(c *trellis.Config) { c.MaxConnections = maxConns }))
	conns := make([]net.Conn, stalled)
	for i := range conns {
		conns[i] = dialStalled(t, ts)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := client.Get(ts.URL + path)
		if err != nil {
			t.Fatalf("GET %s with %d stalled connections open: %v", path, stalled, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
	}
	// A closed connection reads EOF (or a reset) at once; an open one
	// reads nothing until the deadline.
	var mu sync.Mutex
	open := 0
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			_, err := c.Read(make([]byte, 1))
			if errors.Is(err, os.ErrDeadlineExceeded) {
				mu.Lock()
				open++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if open > maxConns {
		t.Fatalf("%d of %d stalled connections still open, want at most the cap %d", open, stalled, maxConns)
	}
	if !strings.Contains(string(ts.Get(t, "/metrics").Body), "trellis_http_connections_shed_total") {
		t.Fatal("no trellis_http_connections_shed_total in /metrics")
	}
}
