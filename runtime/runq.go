package runtime

import "sync/atomic"

// runQueue is a bounded multi-producer, multi-consumer FIFO of mailboxes
// (Dmitry Vyukov's array queue): a push or a pop is one compare-and-swap on
// its own cache line, so senders and workers do not serialize on a lock the
// way they do on a buffered channel.
//
// It is not strictly lock-free: a pop can see a slot as empty while a push
// that claimed it is still writing. The dispatcher copes because a pusher
// always looks for an idle worker after its push completes.
type runQueue struct {
	_     [64]byte
	enq   atomic.Uint64 // next position to push
	_     [56]byte
	deq   atomic.Uint64 // next position to pop
	_     [56]byte
	mask  uint64
	slots []runSlot
}

// runSlot holds one queued mailbox. seq says whose turn the slot is: equal
// to the position, a pusher's; one past it, a popper's.
type runSlot struct {
	seq atomic.Uint64
	r   runnable
}

// newRunQueue returns a queue of size slots, a power of two.
func newRunQueue(size int) *runQueue {
	if size < 2 || size&(size-1) != 0 {
		panic("runtime: run queue size must be a power of two")
	}
	q := &runQueue{mask: uint64(size - 1), slots: make([]runSlot, size)}
	for i := range q.slots {
		q.slots[i].seq.Store(uint64(i))
	}
	return q
}

// push appends r, or reports false when the queue is full.
func (q *runQueue) push(r runnable) bool {
	pos := q.enq.Load()
	for {
		s := &q.slots[pos&q.mask]
		switch seq := s.seq.Load(); {
		case seq == pos:
			if q.enq.CompareAndSwap(pos, pos+1) {
				s.r = r
				s.seq.Store(pos + 1) // publishes r to the popper
				return true
			}
			pos = q.enq.Load()
		case seq < pos:
			return false // the slot still holds the mailbox of a lap ago
		default:
			pos = q.enq.Load() // another pusher took this position
		}
	}
}

// pop removes the oldest mailbox. ok is false when there is none.
func (q *runQueue) pop() (r runnable, ok bool) {
	pos := q.deq.Load()
	for {
		s := &q.slots[pos&q.mask]
		switch seq := s.seq.Load(); {
		case seq == pos+1:
			if q.deq.CompareAndSwap(pos, pos+1) {
				r = s.r
				s.r = nil
				s.seq.Store(pos + q.mask + 1) // free for the push one lap on
				return r, true
			}
			pos = q.deq.Load()
		case seq < pos+1:
			return nil, false // empty, or its pusher is still writing
		default:
			pos = q.deq.Load() // another popper took this position
		}
	}
}

// len is how many mailboxes are queued, give or take those being pushed or
// popped right now.
func (q *runQueue) len() int {
	n := int64(q.enq.Load()) - int64(q.deq.Load())
	return int(max(n, 0))
}

// popped is how many pops have ever completed or begun: a worker that sees
// it stand still while the queue is not empty knows nobody is taking work.
func (q *runQueue) popped() uint64 { return q.deq.Load() }
