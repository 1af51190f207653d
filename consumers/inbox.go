package consumers

import (
	"cmp"
	"slices"
	"sync"
)

// inboxLimit bounds the changes a worker keeps heard and not consumed;
// beyond it, it reads them from the log.
const inboxLimit = batch

// inbox is the changes a worker heard from this instance's writes to its
// shard, not consumed yet: they save it a read of the log.
type inbox struct {
	mu      sync.Mutex
	changes []change // in any order
	head    uint64   // the highest Seq heard
}

// offer hands w a change recorded in its shard by this instance.
func (w *worker) offer(c change) {
	w.in.mu.Lock()
	w.in.head = max(w.in.head, c.Seq)
	if len(w.in.changes) < inboxLimit {
		w.in.changes = append(w.in.changes, c)
	}
	w.in.mu.Unlock()
	w.wake()
}

// takeHeard consumes the changes heard that follow the cursor without a
// gap, and keeps the later ones for when the gap is filled.
func (w *worker) takeHeard() {
	w.in.mu.Lock()
	heard, head := w.in.changes, w.in.head
	w.in.changes = nil
	w.in.mu.Unlock()
	w.head = max(w.head, head)
	slices.SortFunc(heard, func(a, b change) int { return cmp.Compare(a.Seq, b.Seq) })
	rest := heard[:0]
	for _, c := range heard {
		switch {
		case c.Seq <= w.cursor: // read from the log already
		case c.Seq == w.cursor+1 && !w.stopping():
			w.consume(c)
		default:
			rest = append(rest, c)
		}
	}
	if len(rest) > 0 {
		w.in.mu.Lock()
		w.in.changes = append(rest, w.in.changes...)
		w.in.mu.Unlock()
	}
	w.noteGap()
}
