package peer

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/peertest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// told is a message as a Receiver got it.
type told struct {
	to  string
	msg string
}

// receiving starts a server whose Receiver sends what it gets on the
// returned channel.
func receiving(t *testing.T, logs *logBuffer) (*Server, <-chan told) {
	got := make(chan told, 4096)
	s := startServer(t, ServerConfig{Handler: echo, Receive: func(to string, msg []byte) {
		got <- told{to, string(msg)}
	}}, logs, nil)
	return s, got
}

// TestTellInOrder: messages to several actors on a peer arrive whole, in
// the order told.
func TestTellInOrder(t *testing.T) {
	s, got := receiving(t, nil)
	c := newClient(t, ClientConfig{})
	const n = 500
	for i := range n {
		if err := c.Tell(s.Addr(), "actor/"+strconv.Itoa(i%3), []byte(strconv.Itoa(i))); err != nil {
			t.Fatalf("tell %d: %v", i, err)
		}
	}
	for i := range n {
		m := testenv.Recv(t, got, 5*time.Second)
		if want := (told{"actor/" + strconv.Itoa(i%3), strconv.Itoa(i)}); m != want {
			t.Fatalf("message %d: %+v, want %+v", i, m, want)
		}
	}
}

// TestTellAcrossCut: after a cut, the sender opens a new stream; what
// arrives keeps the order told, though what was in flight may be lost,
// and StreamFailures counts the broken stream.
func TestTellAcrossCut(t *testing.T) {
	s, got := receiving(t, nil)
	p := peertest.NewProxy(t, s.Addr())
	c := newClient(t, ClientConfig{})
	last := -1
	take := func(limit time.Duration) bool { // the next message, in order, if one comes within limit
		select {
		case m := <-got:
			i, _ := strconv.Atoi(m.msg)
			if i <= last {
				t.Fatalf("message %d after %d", i, last)
			}
			last = i
			return true
		case <-time.After(limit):
			return false
		}
	}
	for i := range 10 {
		c.Tell(p.Addr(), "a", []byte(strconv.Itoa(i)))
		if !take(5 * time.Second) {
			t.Fatalf("message %d did not arrive", i)
		}
	}
	if n := c.StreamFailures(); n != 0 {
		t.Fatalf("%d stream failures before the cut", n)
	}
	p.Cut()
	for i := 10; last < 10; i++ { // tell on until one arrives over a new stream
		if i > 1000 {
			t.Fatal("nothing arrived after the cut")
		}
		c.Tell(p.Addr(), "a", []byte(strconv.Itoa(i)))
		take(10 * time.Millisecond)
	}
	if p.Accepted() != 2 {
		t.Fatalf("%d connections, want 2", p.Accepted())
	}
	if n := c.StreamFailures(); n == 0 {
		t.Fatal("no stream failure counted after the cut")
	}
}

// TestTellRefusals: a client with another secret delivers nothing, and
// Tell says why once the queue is full; bad arguments fail at once.
func TestTellRefusals(t *testing.T) {
	logs := &logBuffer{}
	s, got := receiving(t, logs)
	other := newClient(t, ClientConfig{Secret: bytes.Repeat([]byte("z"), MinSecretLen), TellQueue: 1})
	testenv.Eventually(t, 5*time.Second, "Tell reports the refusal", func() bool {
		err := other.Tell(s.Addr(), "a", []byte("x"))
		return errors.Is(err, ErrUnavailable) && strings.Contains(err.Error(), "unauthorized")
	})
	select {
	case m := <-got:
		t.Fatalf("a refused client delivered %+v", m)
	default:
	}

	c := newClient(t, ClientConfig{MaxBodyBytes: 10})
	for _, tc := range []struct {
		name, path string
		msg        []byte
		want       error
	}{
		{"empty path", "", nil, ErrBadRequest},
		{"line break in path", "a\nb", nil, ErrBadRequest},
		{"too large", "a", make([]byte, 11), ErrTooLarge},
	} {
		if err := c.Tell(s.Addr(), tc.path, tc.msg); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := newClient(t, ClientConfig{Secret: []byte{}}).Tell(s.Addr(), "a", nil); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("without a secret: %v", err)
	}
	c.Close()
	if err := c.Tell(s.Addr(), "a", nil); !errors.Is(err, ErrUnavailable) {
		t.Errorf("after Close: %v", err)
	}
}

// TestTellOrdersNewestStream: once a newer stream of a client has come,
// the older one delivers nothing more; the client is forgotten with its
// last stream.
func TestTellOrdersNewestStream(t *testing.T) {
	var o tellOrders
	old := o.enter("c", 1)
	if !old.deliver(1, func() {}) {
		t.Fatal("the only stream does not deliver")
	}
	newer := o.enter("c", 2)
	if old.deliver(1, func() {}) || !newer.deliver(2, func() {}) {
		t.Fatal("the older stream delivers after the newer came")
	}
	o.enter("c", 1) // late: an older stream opening after the newer one
	if newer.deliver(1, func() {}) {
		t.Fatal("a late older stream delivers")
	}
	for range 3 {
		o.leave("c", newer)
	}
	if len(o.clients) != 0 {
		t.Fatalf("%d clients remembered", len(o.clients))
	}
}

// TestTellBackpressure: when the peer does not take messages, the queue
// fills and Tell fails at once, rather than block or buffer without end.
func TestTellBackpressure(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	s := startServer(t, ServerConfig{Handler: echo, Receive: func(string, []byte) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-release
	}}, nil, nil)
	defer close(release) // before the shutdown, which waits for the stream
	c := newClient(t, ClientConfig{TellQueue: 4})
	msg := make([]byte, 64<<10)
	if err := c.Tell(s.Addr(), "a", msg); err != nil {
		t.Fatal(err)
	}
	testenv.Recv(t, arrived, 5*time.Second) // the stream is up, and the receiver stuck
	for i := 0; ; i++ {
		err := c.Tell(s.Addr(), "a", msg)
		if errors.Is(err, ErrUnavailable) && strings.Contains(err.Error(), "queue is full") {
			break
		}
		if err != nil || i > 10000 { // 10000 x 64 KiB: nothing held the sender back
			t.Fatalf("tell %d: %v", i, err)
		}
	}
}

// TestTellShutdown: a server's Shutdown ends its tell streams rather than
// wait for them, and the client's Close stops its senders.
func TestTellShutdown(t *testing.T) {
	got := make(chan struct{}, 1)
	s, err := NewServer(ServerConfig{Secret: testSecret, Handler: echo, Logger: (&logBuffer{}).logger(),
		Receive: func(string, []byte) { got <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, ClientConfig{})
	if err := c.Tell(s.Addr(), "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	testenv.Recv(t, got, 5*time.Second) // the stream is open
	if err := s.Shutdown(within(t, 5*time.Second)); err != nil {
		t.Fatalf("Shutdown with a tell stream open: %v", err)
	}
	c.Close()
}
