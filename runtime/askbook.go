package runtime

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// askBook keeps an actor's outstanding AskFrom timeouts on one clock timer,
// so that an ask costs no timer (and no allocation for one) of its own.
//
// A reply takes no lock and touches no timer: it only marks its ask
// answered. The asker sweeps answered asks out when it adds the next one,
// and the timer sweeps them when it fires; the timer is set again only for
// an ask due earlier than it, so an actor that asks in a loop with one
// timeout sets it about once per timeout, not twice per ask. Timeouts
// arrive on the timer's goroutine and new asks on the asker's, hence the
// lock; it is a leaf: nothing else is locked while it is held.
type askBook struct {
	mu       sync.Mutex
	clock    clockwork.Clock
	asks     askHeap         // not yet swept, earliest deadline first; some may be answered
	swept    int             // len(asks) after the last full sweep (see add)
	timer    clockwork.Timer // nil until the first ask
	armedFor time.Time       // when the timer fires; zero while it is not set
}

// askTimeout is an outstanding ask as its book sees it.
type askTimeout interface {
	entry() *askEntry
	// expire delivers the timeout unless the ask was answered; the book
	// calls it without its lock.
	expire()
}

// askEntry is an ask's place in its book.
type askEntry struct {
	due  time.Time
	done atomic.Bool // the reply came or the timeout passed: the book may forget it
}

func newAskBook(clock clockwork.Clock) *askBook { return &askBook{clock: clock} }

// minSweep is the book size under which add only sweeps answered asks off
// the top of the heap.
const minSweep = 32

// add keeps a until it is answered or its deadline passes. Answered asks at
// the top of the heap go first; when the heap has doubled since the last
// full sweep, every answered ask goes. So the book holds at most about
// twice the asks outstanding, and sweeping costs O(1) per ask, amortized,
// however late the earliest ask is answered.
func (b *askBook) add(a askTimeout, timeout time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweepTop()
	if len(b.asks) >= max(minSweep, 2*b.swept) {
		b.sweepAll()
	}
	e := a.entry()
	e.due = b.clock.Now().Add(timeout)
	heap.Push(&b.asks, a)
	if b.armedFor.IsZero() || e.due.Before(b.armedFor) {
		b.arm(e.due)
	}
}

// sweepTop pops answered asks off the top of the heap. The caller holds the
// lock.
func (b *askBook) sweepTop() {
	for len(b.asks) > 0 && b.asks[0].entry().done.Load() {
		heap.Pop(&b.asks)
	}
}

// sweepAll drops every answered ask. The caller holds the lock.
func (b *askBook) sweepAll() {
	kept := b.asks[:0]
	for _, a := range b.asks {
		if !a.entry().done.Load() {
			kept = append(kept, a)
		}
	}
	clear(b.asks[len(kept):]) // let the GC have the dropped ones
	b.asks = kept
	heap.Init(&b.asks)
	b.swept = len(b.asks)
}

// abandon forgets every ask, for an asker that has stopped: nothing is
// delivered for them, and their replies are dead letters.
func (b *askBook) abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asks, b.swept = nil, 0
	if b.timer != nil {
		b.timer.Stop()
	}
	b.armedFor = time.Time{}
}

// arm sets the timer to fire at due. The caller holds the lock.
func (b *askBook) arm(due time.Time) {
	b.armedFor = due
	d := due.Sub(b.clock.Now())
	if b.timer == nil {
		b.timer = b.clock.AfterFunc(d, b.fire)
		return
	}
	b.timer.Reset(d)
}

// fire expires the asks whose deadline has passed, sweeps answered ones
// off the top, and sets the timer for the earliest left, if any.
func (b *askBook) fire() {
	var due []askTimeout
	b.mu.Lock()
	now := b.clock.Now()
	for len(b.asks) > 0 && !b.asks[0].entry().due.After(now) {
		due = append(due, heap.Pop(&b.asks).(askTimeout))
	}
	b.sweepTop()
	b.armedFor = time.Time{}
	if len(b.asks) > 0 {
		b.arm(b.asks[0].entry().due)
	}
	b.mu.Unlock()
	for _, a := range due {
		a.expire()
	}
}

// askHeap is a container/heap of asks by deadline.
type askHeap []askTimeout

func (h askHeap) Len() int           { return len(h) }
func (h askHeap) Less(i, j int) bool { return h[i].entry().due.Before(h[j].entry().due) }
func (h askHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }

func (h *askHeap) Push(x any) {
	*h = append(*h, x.(askTimeout))
}

func (h *askHeap) Pop() any {
	old := *h
	a := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return a
}
