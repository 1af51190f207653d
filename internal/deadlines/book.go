// Package deadlines keeps the deadlines of many waits on one clock timer:
// the runtime's asks from actors, a workflow runner's step runs.
package deadlines

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// Book keeps the deadlines of outstanding waits (an actor's asks, a
// runner's step runs) on one clock timer, so that a wait costs no timer
// (and no allocation for one) of its own: on a fake clock, where each
// timer set sorts every pending one, that matters.
//
// The end of a wait takes no lock and touches no timer: it only marks the
// wait done (Entry.Done). The book sweeps done waits out when the next
// one is added, and when its timer fires; the timer is set again only for
// a wait due earlier than it, so waits added in a loop with one timeout
// set it about once per timeout, not twice per wait. Expiries arrive on
// the timer's goroutine and new waits on the waiters', hence the lock; it
// is a leaf: nothing else is locked while it is held.
type Book struct {
	mu       sync.Mutex
	clock    clockwork.Clock
	waits    waitHeap        // not yet swept, earliest deadline first; some may be done
	swept    int             // len(waits) after the last full sweep (see Add)
	timer    clockwork.Timer // nil until the first wait
	armedFor time.Time       // when the timer fires; zero while it is not set
}

// Wait is an outstanding wait as its book sees it.
type Wait interface {
	// BookEntry is the wait's place in its book (an Entry it embeds).
	BookEntry() *Entry
	// Expire ends the wait at its deadline unless it is done (it sets
	// Done itself); the book calls it without its lock.
	Expire()
}

// Entry is a wait's place in its book.
type Entry struct {
	due time.Time
	// Done: the wait ended (its reply came, its run returned) or expired:
	// the book may forget it.
	Done atomic.Bool
}

// New is an empty book on clock.
func New(clock clockwork.Clock) *Book { return &Book{clock: clock} }

// minSweep is the book size under which Add only sweeps done waits off
// the top of the heap.
const minSweep = 32

// Add keeps a until it is done or its deadline, timeout from now, passes.
// Done waits at the top of the heap go first; when the heap has doubled
// since the last full sweep, every done wait goes. So the book holds at
// most about twice the waits outstanding, and sweeping costs O(1) per
// wait, amortized, however late the earliest wait ends.
func (b *Book) Add(a Wait, timeout time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweepTop()
	if len(b.waits) >= max(minSweep, 2*b.swept) {
		b.sweepAll()
	}
	e := a.BookEntry()
	e.due = b.clock.Now().Add(timeout)
	heap.Push(&b.waits, a)
	if b.armedFor.IsZero() || e.due.Before(b.armedFor) {
		b.arm(e.due)
	}
}

// sweepTop pops done waits off the top of the heap. The caller holds the
// lock.
func (b *Book) sweepTop() {
	for len(b.waits) > 0 && b.waits[0].BookEntry().Done.Load() {
		heap.Pop(&b.waits)
	}
}

// sweepAll drops every done wait. The caller holds the lock.
func (b *Book) sweepAll() {
	kept := b.waits[:0]
	for _, a := range b.waits {
		if !a.BookEntry().Done.Load() {
			kept = append(kept, a)
		}
	}
	clear(b.waits[len(kept):]) // let the GC have the dropped ones
	b.waits = kept
	heap.Init(&b.waits)
	b.swept = len(b.waits)
}

// Abandon forgets every wait, for a waiter that has stopped: none
// expires, and the timer is stopped.
func (b *Book) Abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waits, b.swept = nil, 0
	if b.timer != nil {
		b.timer.Stop()
	}
	b.armedFor = time.Time{}
}

// arm sets the timer to fire at due. The caller holds the lock.
func (b *Book) arm(due time.Time) {
	b.armedFor = due
	d := due.Sub(b.clock.Now())
	if b.timer == nil {
		b.timer = b.clock.AfterFunc(d, b.fire)
		return
	}
	b.timer.Reset(d)
}

// fire expires the waits whose deadline has passed, sweeps done ones off
// the top, and sets the timer for the earliest left, if any.
func (b *Book) fire() {
	var due []Wait
	b.mu.Lock()
	now := b.clock.Now()
	for len(b.waits) > 0 && !b.waits[0].BookEntry().due.After(now) {
		due = append(due, heap.Pop(&b.waits).(Wait))
	}
	b.sweepTop()
	b.armedFor = time.Time{}
	if len(b.waits) > 0 {
		b.arm(b.waits[0].BookEntry().due)
	}
	b.mu.Unlock()
	for _, a := range due {
		a.Expire()
	}
}

// waitHeap is a container/heap of waits by deadline.
type waitHeap []Wait

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].BookEntry().due.Before(h[j].BookEntry().due) }
func (h waitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }

func (h *waitHeap) Push(x any) {
	*h = append(*h, x.(Wait))
}

func (h *waitHeap) Pop() any {
	old := *h
	a := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return a
}
