package runtime

import (
	"container/heap"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// askBook keeps an actor's outstanding AskFrom timeouts on one clock timer,
// armed for the earliest of them, so that an ask costs no timer (and no
// allocation for one) of its own. Replies arrive on the repliers'
// goroutines, timeouts on the timer's and new asks on the asker's, hence
// the lock; it is a leaf: nothing else is locked while it is held.
type askBook struct {
	mu    sync.Mutex
	clock clockwork.Clock
	asks  askHeap         // outstanding, earliest deadline first
	timer clockwork.Timer // nil until the first ask; stopped while asks is empty
}

// askTimeout is an outstanding ask as its book sees it.
type askTimeout interface {
	entry() *askEntry
	// expire delivers the timeout; the book calls it without its lock.
	expire()
}

// askEntry is an ask's place in its book.
type askEntry struct {
	due   time.Time
	index int // in the book's heap; -1 once out of it
}

func newAskBook(clock clockwork.Clock) *askBook { return &askBook{clock: clock} }

// add keeps a until it is removed or its deadline passes.
func (b *askBook) add(a askTimeout, timeout time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a.entry().due = b.clock.Now().Add(timeout)
	heap.Push(&b.asks, a)
	if b.asks[0] == a {
		b.arm()
	}
}

// remove forgets a, whose reply came. The timer is not moved forward when a
// was the earliest (it fires early and is armed again), only stopped when
// nothing is left, so a reply costs no timer operation while others wait.
func (b *askBook) remove(a askTimeout) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := a.entry().index; i >= 0 {
		heap.Remove(&b.asks, i)
	}
	if len(b.asks) == 0 && b.timer != nil {
		b.timer.Stop()
	}
}

// abandon forgets every ask, for an asker that has stopped: nothing is
// delivered for them, and their replies are dead letters.
func (b *askBook) abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range b.asks {
		a.entry().index = -1
	}
	b.asks = nil
	if b.timer != nil {
		b.timer.Stop()
	}
}

// arm sets the timer for the earliest deadline. The caller holds the lock.
func (b *askBook) arm() {
	d := b.asks[0].entry().due.Sub(b.clock.Now())
	if b.timer == nil {
		b.timer = b.clock.AfterFunc(d, b.fire)
		return
	}
	b.timer.Reset(d)
}

// fire expires the asks whose deadline has passed and arms the timer for
// the next. A fire with none due (the earliest was answered) only re-arms.
func (b *askBook) fire() {
	var due []askTimeout
	b.mu.Lock()
	now := b.clock.Now()
	for len(b.asks) > 0 && !b.asks[0].entry().due.After(now) {
		due = append(due, heap.Pop(&b.asks).(askTimeout))
	}
	if len(b.asks) > 0 {
		b.arm()
	}
	b.mu.Unlock()
	for _, a := range due {
		a.expire()
	}
}

// askHeap is a container/heap of asks by deadline that keeps each ask's
// index, so that a reply removes its ask in O(log n).
type askHeap []askTimeout

func (h askHeap) Len() int           { return len(h) }
func (h askHeap) Less(i, j int) bool { return h[i].entry().due.Before(h[j].entry().due) }
func (h askHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].entry().index, h[j].entry().index = i, j
}

func (h *askHeap) Push(x any) {
	a := x.(askTimeout)
	a.entry().index = len(*h)
	*h = append(*h, a)
}

func (h *askHeap) Pop() any {
	old := *h
	a := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	a.entry().index = -1
	return a
}
