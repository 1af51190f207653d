// Package peertest holds test helpers for code that talks to peers over
// TCP: a fault-injecting proxy.
package peertest

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a TCP proxy on loopback in front of a target address, that
// tests put between a client and a server to break the network on
// demand: Cut resets the connections, Hold stalls them (HoldWhenSent the
// one that carries a given request), Drop blackholes them, Refuse turns
// new ones away. It counts the connections it accepts
// and those open. Close (run by the test's cleanup) stops it and waits
// for its goroutines.
type Proxy struct {
	target   string
	ln       net.Listener
	accepted atomic.Int64
	refuse   atomic.Bool
	trigger  atomic.Pointer[trigger] // armed by AfterSent or HoldWhenSent; nil once fired

	mu     sync.Mutex
	links  map[*link]struct{}
	closed bool
	wg     sync.WaitGroup
}

// trigger is what AfterSent or HoldWhenSent (stalled not nil) armed.
type trigger struct {
	marker  []byte
	then    func()
	stalled *Stalled
}

// link is one proxied connection: the accepted one and the one to the
// target.
type link struct {
	client, server net.Conn

	ended   atomic.Int32 // directions that have ended, of two
	dropped atomic.Bool  // bytes read are thrown away
	mute    atomic.Bool  // bytes read from the target are thrown away
	dup     atomic.Bool  // the next bytes read are written twice

	mu   sync.Mutex
	held chan struct{} // non-nil while held; closed on release
	// stalled, when not nil, is the Stalled whose request the link
	// carries: at its answer, the link is held again.
	stalled *Stalled
}

// NewProxy starts a proxy to target on 127.0.0.1 and registers its Close
// with tb.Cleanup.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("peertest: proxy listen: %v", err)
	}
	p := &Proxy{target: target, ln: ln, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.Close)
	return p
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted is how many connections the proxy has accepted so far.
func (p *Proxy) Accepted() int { return int(p.accepted.Load()) }

// Open is how many proxied connections are open now: a side that hangs up
// is seen at once, except on a held connection (see Hold).
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Refuse makes the proxy close new connections at once (on) or carry them
// again (off). Open connections are not touched.
func (p *Proxy) Refuse(on bool) { p.refuse.Store(on) }

// Cut resets every open connection, both sides, as a crashed peer or a
// broken network would. New connections are carried as before.
func (p *Proxy) Cut() {
	for _, l := range p.snapshot() {
		l.close()
	}
}

// Hold stalls every open connection: it stays open, and nothing more
// passes either way, until Release; the proxy stops reading it, so the
// senders' buffers fill up and a side hanging up goes unseen. New
// connections are carried as before.
func (p *Proxy) Hold() {
	for _, l := range p.snapshot() {
		l.hold()
	}
}

// Drop blackholes every open connection for good, as a partition does:
// it stays open, and what either side sends is read and thrown away, so a
// side hanging up is seen (see Open). New connections are carried as
// before.
func (p *Proxy) Drop() {
	for _, l := range p.snapshot() {
		l.dropped.Store(true)
	}
}

// AfterSent arms a one-shot trigger: the first read of a client's bytes
// that contains marker (within that one read), on any connection, open
// or new, mutes that connection's answers for good (what the target
// sends back is thrown away), is passed on to the target, and then f runs
// (when not nil). So a command of the client's takes effect and its
// answer is lost, and f can break the rest of the network (Drop, Refuse)
// before that answer could have arrived. It replaces a trigger armed
// before that has not fired.
func (p *Proxy) AfterSent(marker string, f func()) {
	p.trigger.Store(&trigger{marker: []byte(marker), then: f})
}

// HoldWhenSent arms a one-shot trigger: the first read of a client's
// bytes that contains marker (within that one read), on any connection,
// open or new, holds that connection as Hold does, those bytes included,
// and then f runs (when not nil). So a command of the client's is stalled
// in the network, to reach the target late (Stalled.Release), as one
// delayed by a partition or a paused process does. It replaces a trigger
// armed before that has not fired.
func (p *Proxy) HoldWhenSent(marker string, f func()) *Stalled {
	s := &Stalled{answered: make(chan struct{})}
	p.trigger.Store(&trigger{marker: []byte(marker), then: f, stalled: s})
	return s
}

// Stalled is the connection HoldWhenSent holds, once its trigger fired.
type Stalled struct {
	mu       sync.Mutex
	link     *link
	answered chan struct{}
}

// Release lets the stalled command reach the target, and its answer
// come back: then the connection is held again (until Proxy.Release), so
// that the client's other commands do not pass. The proxy's other
// connections are left as they are. Releasing before the trigger fired
// does nothing.
func (s *Stalled) Release() {
	s.mu.Lock()
	l := s.link
	s.mu.Unlock()
	if l != nil {
		l.release()
	}
}

// Answered is closed once the target's answer to the stalled command has
// been passed on to the client (or the client was gone): the target ran
// the command.
func (s *Stalled) Answered() <-chan struct{} { return s.answered }

// Duplicate makes every open connection write the next bytes it carries
// (in one direction, whichever reads first) twice, as a faulty middlebox
// would: the receiver sees its stream garbled, and the protocol above
// must notice. New connections are carried as before.
func (p *Proxy) Duplicate() {
	for _, l := range p.snapshot() {
		l.dup.Store(true)
	}
}

// Release lets the held connections carry bytes again.
func (p *Proxy) Release() {
	for _, l := range p.snapshot() {
		l.release()
	}
}

// Close stops accepting, closes every connection and waits until the
// proxy's goroutines have returned. It may be called more than once.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, l := range p.snapshot() {
		l.close()
		l.release()
	}
	p.wg.Wait()
}

func (p *Proxy) snapshot() []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls := make([]*link, 0, len(p.links))
	for l := range p.links {
		ls = append(ls, l)
	}
	return ls
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.accepted.Add(1)
		if p.refuse.Load() {
			resetClose(c)
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			resetClose(c)
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.close()
			return
		}
		p.links[l] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(l, s, c, false) // not l's fields: Cut may clear them already
		go p.pipe(l, c, s, true)
	}
}

// pipe copies src to dst, waiting before each write while the link is
// held and throwing the bytes away once it is dropped (or, for answers,
// the target's bytes, once it is muted). An orderly end
// (EOF) is passed on as a half-close, except on a dropped link; any other
// end resets both sides. The link is forgotten once both directions ended.
func (p *Proxy) pipe(l *link, dst, src net.Conn, answers bool) {
	defer p.wg.Done()
	defer func() {
		if l.ended.Add(1) == 2 {
			l.close()
			p.mu.Lock()
			delete(p.links, l)
			p.mu.Unlock()
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if tr := p.fire(buf[:n], answers, true); tr != nil {
			l.stall(tr.stalled)
			if tr.then != nil {
				tr.then()
			}
		}
		if n > 0 && !l.wait() {
			return
		}
		fired := p.fire(buf[:n], answers, false)
		if fired != nil {
			l.mute.Store(true)
		}
		if n > 0 && !l.dropped.Load() && !(answers && l.mute.Load()) {
			times := 1
			if l.dup.CompareAndSwap(true, false) {
				times = 2
			}
			for range times {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					l.answered(answers)
					l.close()
					return
				}
			}
		}
		if n > 0 {
			l.answered(answers)
		}
		if fired != nil && fired.then != nil {
			fired.then()
		}
		if err == nil {
			continue
		}
		if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) && !l.dropped.Load() {
			_ = tc.CloseWrite()
		} else {
			l.close()
		}
		return
	}
}

// fire disarms and returns the trigger when b, bytes of a client's (not
// answers), holds its marker and the trigger is of the kind hold says
// (HoldWhenSent's, else AfterSent's); else nil.
func (p *Proxy) fire(b []byte, answers, hold bool) *trigger {
	tr := p.trigger.Load()
	if len(b) == 0 || answers || tr == nil || (tr.stalled != nil) != hold || !bytes.Contains(b, tr.marker) ||
		!p.trigger.CompareAndSwap(tr, nil) {
		return nil
	}
	return tr
}

// hold stalls the link until release.
func (l *link) hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = make(chan struct{})
	}
}

// stall holds the link for s.
func (l *link) stall(s *Stalled) {
	l.mu.Lock()
	if l.held == nil {
		l.held = make(chan struct{})
	}
	l.stalled = s
	l.mu.Unlock()
	s.mu.Lock()
	s.link = l
	s.mu.Unlock()
}

// answered notes that the link passed on bytes, in the answers' direction
// when answers is true: the answer to a stalled command ends its stall,
// and the link is held again.
func (l *link) answered(answers bool) {
	if !answers {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.stalled; s != nil {
		l.stalled = nil
		if l.held == nil && l.client != nil {
			l.held = make(chan struct{})
		}
		close(s.answered)
	}
}

// wait blocks while the link is held; false when the link closed
// meanwhile.
func (l *link) wait() bool {
	l.mu.Lock()
	held := l.held
	l.mu.Unlock()
	if held == nil {
		return true
	}
	<-held
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.client != nil
}

func (l *link) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held != nil {
		close(l.held)
		l.held = nil
	}
}

// close resets both connections; a pipe waiting on a hold is let go.
func (l *link) close() {
	l.mu.Lock()
	c, s := l.client, l.server
	l.client, l.server = nil, nil
	l.mu.Unlock()
	if c != nil {
		resetClose(c)
		resetClose(s)
	}
	l.release()
}

// resetClose closes c with a TCP reset rather than a FIN, so that the
// other side sees a broken connection, not an orderly end.
func resetClose(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
