package faults

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// conn is a cluster connection of the instance. Once dropped (the
// instance is partitioned) it is a blackhole at this end: what is written
// to it is thrown away, reported as sent, and what arrives on it is read
// and thrown away; closing it sends nothing either. So each side waits
// for the other until its own deadline or health check gives up, as
// across a real partition.
type conn struct {
	net.Conn
	p       *Points
	dropped atomic.Bool
	closed  atomic.Bool // closed by this side while dropped: parked until reset
	once    sync.Once
}

func (c *conn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		switch {
		case c.closed.Load():
			return 0, net.ErrClosed
		case !c.dropped.Load():
			return n, err
		case err != nil:
			return 0, err
		}
	}
}

func (c *conn) Write(b []byte) (int, error) {
	switch {
	case c.closed.Load():
		return 0, net.ErrClosed
	case c.dropped.Load():
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// Close closes the connection; a dropped one is only parked (its reads
// and writes end here, nothing reaches the other side) until Heal or
// Kill resets it.
func (c *conn) Close() error {
	if c.dropped.Load() {
		c.closed.Store(true)
		return c.Conn.SetDeadline(time.Unix(1, 0)) // ends the reads and writes in progress
	}
	c.p.forget(c)
	return c.Conn.Close()
}

// reset closes the connection with a TCP reset rather than a FIN, so
// that the other side sees it break, as when a process dies or TCP gives
// up on it.
func (c *conn) reset() {
	c.once.Do(func() {
		c.p.forget(c)
		if tc, ok := c.Conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Conn.Close()
	})
}
