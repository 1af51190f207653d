package httpserver

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// LimitConnections wraps ln so that at most max connections are open at
// once. At the cap, a new connection is not made to wait (a health probe
// must get through a flood of stalled clients): the connection that has
// been quiet the longest, the one whose last byte arrived earliest, is
// closed to make room. That is an idle keep-alive connection, or a client
// stalled in its headers or body, before any client that is still
// sending; a request being served keeps its connection unless every other
// one is busier. Each connection closed so is counted in
// trellis_http_connections_shed_total.
func (m *Metrics) LimitConnections(ln net.Listener, max int) net.Listener {
	return &limitListener{Listener: ln, max: max, conns: make(map[*trackedConn]struct{}), shed: m.shed.Inc}
}

type limitListener struct {
	net.Listener
	max  int
	shed func() // counts a connection closed to make room

	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

// Accept accepts a connection, first closing the quietest one if the
// listener is at its cap.
func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	tc.lastRead.Store(time.Now().UnixNano())
	l.mu.Lock()
	var victim *trackedConn
	if len(l.conns) >= l.max {
		victim = l.quietest()
		delete(l.conns, victim)
	}
	l.conns[tc] = struct{}{}
	l.mu.Unlock()
	if victim != nil {
		_ = victim.Conn.Close()
		l.shed()
	}
	return tc, nil
}

// quietest is the open connection whose last read is the oldest; l.mu is
// held. A linear scan: it runs only at the cap, and the cap is thousands.
func (l *limitListener) quietest() *trackedConn {
	var q *trackedConn
	var oldest int64
	for c := range l.conns {
		if t := c.lastRead.Load(); q == nil || t < oldest {
			q, oldest = c, t
		}
	}
	return q
}

// trackedConn is a connection that records when it last read something,
// and leaves its listener's set when it closes.
type trackedConn struct {
	net.Conn
	l        *limitListener
	lastRead atomic.Int64 // Unix nanoseconds
	once     sync.Once
}

func (c *trackedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
