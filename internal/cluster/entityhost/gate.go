package entityhost

import (
	"sync"

	"github.com/trellis-go/trellis/internal/cluster"
)

// gate admits commands to the shards this instance serves and counts
// those in flight, so that a shard is handed over only once they are
// done.
type gate struct {
	serving func(shard int) (cluster.Fence, bool)
	changes signal // what the gate admits, or the owners table, changed

	mu       sync.Mutex
	handover [cluster.NumShards]cluster.Fence // the fence being handed over; zero: none
	inflight [cluster.NumShards]int
}

// admit counts a command in for shard if it is served and not being
// handed over; done counts it out (once, however often it is called).
func (g *gate) admit(shard int) (done func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f, serving := g.serving(shard)
	if !serving || f == g.handover[shard] {
		return nil, false
	}
	g.inflight[shard]++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.inflight[shard]--
			// Only a hand-over waits for a shard's last command: one that
			// was never asked for the shard has nobody to wake.
			wake := g.inflight[shard] == 0 && g.handover[shard] != (cluster.Fence{})
			g.mu.Unlock()
			if wake {
				g.changes.notify()
			}
		})
	}, true
}

// drain stops admitting commands for shard under its current fence (a
// later acquisition, under a new fence, admits again).
func (g *gate) drain(shard int) {
	g.mu.Lock()
	if f, serving := g.serving(shard); serving {
		g.handover[shard] = f
	}
	g.mu.Unlock()
	g.changes.notify()
}

// draining reports whether shard is still served under the fence being
// handed over: its commands are to wait for the new owner.
func (g *gate) draining(shard int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	f, serving := g.serving(shard)
	return serving && f == g.handover[shard]
}

// busy is the number of commands of shard in flight.
func (g *gate) busy(shard int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inflight[shard]
}

// signal wakes every waiter at each change: a waiter takes next before it
// looks at what it waits for, and waits for that channel to close.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// next is closed at the next notify.
func (s *signal) next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// notify wakes the waiters of next.
func (s *signal) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}
