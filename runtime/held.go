package runtime

import (
	"sync"
	"sync/atomic"
)

// heldQueue is an actor's queue of postponable mail ([TellPostponable]),
// kept apart from its mailbox.
//
// Why apart: postponable mail usually streams in from another processor
// (a producer controller feeding its consumer controller) while the actor
// is run by its own busy loop (the consumer's confirmations). In one queue,
// both sides would take the same lock for every message, and the lock's
// cache line would cross between the processors each time. With its own
// lock, the streaming sender only meets the actor when the actor takes the
// whole queue at once, and the actor's own runs take a lock nobody else is
// holding.
//
// The price is order: a sender's postponable mail keeps its order, and its
// other mail keeps its order, but the two may overtake each other.
type heldQueue[T any] struct {
	mu     sync.Mutex
	q      []T
	closed bool         // the actor has terminated: new mail is a dead letter
	n      atomic.Int32 // len(q), for the run loop to look without the lock
	_      [24]byte     // a cache line of its own (see cell)
}

// heldMail returns the actor's held queue, made on first use.
func (c *cell[T]) heldMail() *heldQueue[T] {
	if h := c.held.Load(); h != nil {
		return h
	}
	c.held.CompareAndSwap(nil, &heldQueue[T]{})
	return c.held.Load()
}

// tellPostponable queues msg in the held queue and wakes the actor unless
// it postpones its wake-ups (or is already awake); false means the actor
// has terminated.
//
// No wake-up is lost: the sender stores the queue length before it reads
// the postpone flag and, under mu, the scheduled flag; the run loop reads
// the length after it has turned postponing off (in a handler) and, under
// mu, before it stops being scheduled (see take). Either the run loop sees
// the mail, or the sender sees that it must wake the actor.
func (c *cell[T]) tellPostponable(msg T) bool {
	h := c.heldMail()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return false
	}
	h.q = append(h.q, msg)
	h.n.Store(int32(len(h.q)))
	h.mu.Unlock()
	if c.postpone.Load() {
		return true
	}
	c.mu.Lock()
	// A stopping actor's held mail becomes dead letters when it finishes.
	if c.scheduled || c.suspended || c.state != alive {
		c.mu.Unlock()
		return true
	}
	c.scheduled = true
	c.mu.Unlock()
	c.d.schedule(c)
	return true
}

// hasHeld reports whether held mail waits, postponed or not.
func (c *cell[T]) hasHeld() bool {
	h := c.held.Load()
	return h != nil && h.n.Load() > 0
}

// heldReady reports whether held mail waits for the run loop to take it:
// while the actor postpones its wake-ups, it stays where it is. So a
// consumer controller that gets a message from its producer controller
// for each one its consumer confirms takes them in batches, when it has
// none left, instead of one per confirmation through the lock the
// producer controller takes for each.
func (c *cell[T]) heldReady() bool { return !c.postpone.Load() && c.hasHeld() }

// takeHeld makes the held mail the batch to handle, from its second message
// on, and returns the first. The batch has been handled; its buffer becomes
// the held queue's, as in swapInbox.
func (c *cell[T]) takeHeld() T {
	h := c.held.Load()
	spent := c.batch[:0]
	if cap(spent) > 4096 {
		spent = nil
	}
	h.mu.Lock()
	q := h.q
	h.q = spent
	h.n.Store(0)
	h.mu.Unlock()
	var zero T
	msg := q[0]
	q[0] = zero
	c.batch, c.next = q, 1
	return msg
}

// closeHeld turns the held queue away from new mail and returns what was
// left in it, for finish to make dead letters.
func (c *cell[T]) closeHeld() []T {
	h := c.held.Load()
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	left := h.q
	h.q = nil
	h.n.Store(0)
	return left
}
