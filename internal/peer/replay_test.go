package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// recorder keeps every byte a client writes on its connections, as a
// wiretap would capture them.
type recorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// dial connects like the client's default, recording what is written.
func (rec *recorder) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return recordedConn{Conn: c, rec: rec}, nil
}

func (rec *recorder) bytes() []byte {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return bytes.Clone(rec.buf.Bytes())
}

type recordedConn struct {
	net.Conn
	rec *recorder
}

func (c recordedConn) Write(p []byte) (int, error) {
	c.rec.mu.Lock()
	c.rec.buf.Write(p)
	c.rec.mu.Unlock()
	return c.Conn.Write(p)
}

// replay sends captured bytes to addr on a connection of their own, as
// an attacker who captured them would, reading (and discarding) what
// comes back until the test ends.
func replay(t *testing.T, addr string, captured []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() { defer close(read); io.Copy(io.Discard, conn) }()
	t.Cleanup(func() { conn.Close(); <-read })
	if _, err := conn.Write(captured); err != nil {
		t.Fatalf("replay: %v", err)
	}
}

// TestReplayCapturedTrafficRefused: the bytes of a client's connection
// (its call stream with its forwards, its tell stream, a forward of its
// own), captured on the wire and sent again 10 s later, within MaxSkew,
// are refused as a replay: nothing runs again.
func TestReplayCapturedTrafficRefused(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("b", callLineMax) + `"`) // goes as a request of its own
	for _, tc := range []struct {
		name string
		n    int                                // what runs: forwards, or messages told
		send func(c *Client, addr string) error // the genuine traffic
	}{
		{"call stream", 20, func(c *Client, addr string) error {
			for i := range 20 {
				arg := json.RawMessage(strconv.Itoa(i))
				if _, err := c.Forward(within(t, 5*time.Second), addr, Call{ComponentID: "c", Method: "m", Argument: arg}); err != nil {
					return err
				}
			}
			return nil
		}},
		{"forward of its own", 1, func(c *Client, addr string) error {
			_, err := c.Forward(within(t, 5*time.Second), addr, Call{ComponentID: "c", Method: "m", Argument: big})
			return err
		}},
		{"tell stream", 5, func(c *Client, addr string) error {
			for i := range 5 {
				if err := c.Tell(addr, "actor", []byte(strconv.Itoa(i))); err != nil {
					return err
				}
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			clock := clockwork.NewFakeClockAt(time.Now())
			logs := &logBuffer{}
			s := startServer(t, ServerConfig{Handler: countingEcho(&runs), Now: clock.Now,
				Receive: func(string, []byte) { runs.Add(1) }}, logs, nil)
			rec := &recorder{}
			c := newClient(t, ClientConfig{Dial: rec.dial})
			if err := tc.send(c, s.Addr()); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 5*time.Second, "the genuine traffic ran", func() bool { return int(runs.Load()) == tc.n })

			clock.Advance(10 * time.Second)
			replay(t, s.Addr(), rec.bytes())
			testenv.Eventually(t, 5*time.Second, "the replay refused, or run", func() bool {
				return strings.Contains(logs.String(), errReplayed.Error()) || int(runs.Load()) > tc.n
			})
			if got := int(runs.Load()); got != tc.n {
				t.Fatalf("the replay ran: %d runs, want %d", got, tc.n)
			}
		})
	}
}

// TestReplayGuard: a signature is admitted once while its timestamp is
// within the window, and forgotten once it leaves it; when full, the
// guard refuses until some leave.
func TestReplayGuard(t *testing.T) {
	sg, err := newSigner(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	sig := func(i int) string { return sg.signRequest("POST", "/x/"+strconv.Itoa(i), "0", "", nil) }
	start := time.UnixMilli(1_000_000_500)
	at := func(d time.Duration) int64 { return start.Add(d).UnixMilli() }
	g := newReplayGuard(30*time.Second, 3)
	for _, step := range []struct {
		name string
		ms   int64 // the request's timestamp
		sig  string
		now  time.Duration // the server's clock, from start
		want error
	}{
		{"first", at(0), sig(1), 0, nil},
		{"replayed", at(0), sig(1), 10 * time.Second, errReplayed},
		{"another", at(0), sig(2), 10 * time.Second, nil},
		{"stamped ahead", at(29 * time.Second), sig(3), 10 * time.Second, nil},
		{"full", at(0), sig(4), 10 * time.Second, errReplayFull{3}},
		{"replayed at the window's end", at(0), sig(1), 30 * time.Second, errReplayed},
		{"room again once the first second left", at(31 * time.Second), sig(4), 31 * time.Second, nil},
		{"the one ahead still remembered", at(29 * time.Second), sig(3), 58 * time.Second, errReplayed},
	} {
		if err := g.admit(step.ms, step.sig, start.Add(step.now)); !errors.Is(err, step.want) {
			t.Errorf("%s: %v, want %v", step.name, err, step.want)
		}
	}
	g.expire(start.Add(time.Hour))
	if g.n != 0 || len(g.buckets) != 0 {
		t.Errorf("after the window: %d kept in %d seconds", g.n, len(g.buckets))
	}
}
