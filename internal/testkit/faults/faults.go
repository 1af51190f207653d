// Package faults holds the fault points of one service instance, which
// Trellis's test kit (trellistest) controls: it can kill the instance
// without a goodbye, and cut its cluster transport off from the other
// instances while it keeps Redis (a network partition), then heal it.
//
// An instance given Points (through an option that implements faulthook.Option) dials the other
// instances through Points.Dial, listens for them through Points.Listen,
// and registers how it dies with Points.OnKill. Every cluster connection
// of the instance, in either direction, is then one of the Points', so a
// partition acts at this instance's end alone: the others need no fault
// points of their own to be cut off from it. Applications cannot import
// this package, so they cannot make Points: the fault points are test
// machinery only.
package faults

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/trellis-go/trellis/internal/faulthook"
)

// ErrKilled is what Dial answers once the instance was killed.
var ErrKilled = errors.New("faults: the instance was killed")

// Points are one instance's fault points. The zero value is not usable;
// make them with New. They are safe for concurrent use.
type Points struct {
	mu     sync.Mutex
	cut    bool          // partitioned now
	healed chan struct{} // closed at Heal; a new one at each Partition
	conns  map[*conn]struct{}
	kill   func()
	killed bool
	// crashWorkflow says where the workflow runners crash (CrashWorkflowsAt).
	crashWorkflow func(faulthook.WorkflowPoint) bool
	// steps hold the workflows' steps (HoldWorkflowSteps); nil: they run
	// freely.
	steps faulthook.WorkflowSteps
}

// New returns fault points that let everything through.
func New() *Points {
	healed := make(chan struct{})
	close(healed)
	return &Points{healed: healed, conns: map[*conn]struct{}{}}
}

// Dial connects to addr. While the instance is partitioned it waits, as
// a dial whose packets are dropped does, until the partition heals (then
// it connects) or ctx ends (the dial's timeout: then it fails).
func (p *Points) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	p.mu.Lock()
	healed, killed := p.healed, p.killed
	p.mu.Unlock()
	if killed {
		return nil, &net.OpError{Op: "dial", Net: network, Err: ErrKilled}
	}
	select {
	case <-healed:
	case <-ctx.Done():
		return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return p.track(c), nil
}

// Listen listens on addr; the connections it accepts are cut off like
// the dialed ones while the instance is partitioned.
func (p *Points) Listen(network, addr string) (net.Listener, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	return &listener{Listener: ln, p: p}, nil
}

// Partition cuts the instance off from the other instances, both ways:
// from now on its connections carry nothing (what either side sends is
// thrown away, and neither side sees the connection break), and a dial
// waits (see Dial). Redis is not touched. Partitioning twice is harmless.
func (p *Points) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return
	}
	p.cut, p.healed = true, make(chan struct{})
	for c := range p.conns {
		c.dropped.Store(true)
	}
}

// Heal ends the partition: the connections that lived through it are
// reset, as TCP gives up on a connection that lost bytes, and the dials
// that wait connect. Healing an instance that is not partitioned is
// harmless.
func (p *Points) Heal() {
	p.mu.Lock()
	if !p.cut {
		p.mu.Unlock()
		return
	}
	p.cut = false
	close(p.healed)
	var broken []*conn
	for c := range p.conns {
		if c.dropped.Load() {
			broken = append(broken, c)
		}
	}
	p.mu.Unlock()
	for _, c := range broken {
		c.reset()
	}
}

// OnKill registers what the instance does when Kill is called: stop
// without a goodbye. The service calls it once, when it is made.
func (p *Points) OnKill(kill func()) {
	p.mu.Lock()
	p.kill = kill
	p.mu.Unlock()
}

// Kill resets every cluster connection of the instance, in flight or
// not, then runs what OnKill registered, and returns once it has
// returned. Later dials fail with ErrKilled. Killing twice is harmless.
func (p *Points) Kill() {
	p.mu.Lock()
	if p.killed {
		p.mu.Unlock()
		return
	}
	p.killed = true
	kill := p.kill
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.reset()
	}
	if kill != nil {
		kill()
	}
}

// track wraps c so that a partition and a kill reach it; a connection
// made while the instance is partitioned (an accepted one) carries
// nothing from the start.
func (p *Points) track(c net.Conn) net.Conn {
	tc := &conn{Conn: c, p: p}
	p.mu.Lock()
	killed := p.killed
	if !killed {
		tc.dropped.Store(p.cut)
		p.conns[tc] = struct{}{}
	}
	p.mu.Unlock()
	if killed {
		tc.reset()
	}
	return tc
}

func (p *Points) forget(c *conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// listener wraps the accepted connections.
type listener struct {
	net.Listener
	p *Points
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.p.track(c), nil
}
