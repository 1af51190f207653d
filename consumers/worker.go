package consumers

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/clocks"
)

const (
	// batch is how many changes a worker reads from the log at once.
	batch = 100
	// checkpointEvery is how long a worker waits at least between two
	// saves of its checkpoint: a crash replays at most the changes handled
	// since (see the package doc).
	checkpointEvery = 100 * time.Millisecond
	// gapGrace is how long a worker waits for a change it did not hear
	// (a write whose notice comes late, or whose reply was lost) before it
	// reads the log for it.
	gapGrace = 10 * time.Millisecond
)

// worker consumes one shard's changes for one consumer, one change at a
// time and in the log's order, from the consumer's checkpoint on. It gets
// the changes this instance commits from the writes themselves (offer),
// and reads the log for the others: from the checkpoint when it starts,
// when a change was not heard, and every Config.Poll. A change that fails
// is kept pending and retried with backoff while the shard's other
// entities go on; a later change of a pending entity waits behind it (or,
// for a consumer that coalesces, replaces it), and the checkpoint stays
// before the oldest pending change.
type worker struct {
	r     *Runner
	c     *consumer
	shard int
	fence entities.Fence
	prev  *worker // the shard's previous worker, which must end first

	ctx      context.Context // handlers' contexts derive from it
	cancel   context.CancelFunc
	stop     chan struct{}
	stopOnce sync.Once
	kick     chan struct{}
	done     chan struct{}

	in   inbox
	call call // the handler call in flight

	cursor   uint64    // the last change consumed
	head     uint64    // the shard's last change known (read or heard)
	lastAt   time.Time // when the last change consumed was recorded
	saved    uint64    // the checkpoint saved
	savedAt  time.Time
	readAt   time.Time // the last read of the log; zero: read now
	more     bool      // the last read filled its batch: read on
	gapSince time.Time // since when a change after the cursor is missing; zero: none
	pending  map[string]*pending
	// after a resync: the revisions handled from the current states, for
	// skipping the older changes still in the log, until resyncHead.
	resynced   map[string]uint64
	resyncHead uint64

	lagMu sync.Mutex
	lag   Lag
}

func startWorker(r *Runner, c *consumer, shard int, f entities.Fence, prev *worker) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{r: r, c: c, shard: shard, fence: f, prev: prev, ctx: ctx, cancel: cancel,
		stop: make(chan struct{}), kick: make(chan struct{}, 1), done: make(chan struct{}),
		pending: make(map[string]*pending)}
	go w.run()
	return w
}

// wake asks for a step now.
func (w *worker) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// halt asks the worker to stop after the handler in flight.
func (w *worker) halt() { w.stopOnce.Do(func() { close(w.stop) }) }

func (w *worker) stopping() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

func (w *worker) run() {
	defer close(w.done)
	defer w.cancel()
	if w.prev != nil {
		<-w.prev.done
		w.prev = nil // its checkpoint is saved; let it go
	}
	for !w.stopping() {
		cp, err := w.r.cfg.Log.Register(w.ctx, w.c.id, w.shard)
		if err == nil {
			w.cursor, w.head, w.saved = cp, cp, cp
			break
		}
		w.r.log.Warn("consumers: read the checkpoint", "consumer", w.c.id, "shard", w.shard, "err", err.Error())
		w.wait(time.Second)
	}
	for !w.stopping() {
		next, err := w.step()
		if errors.Is(err, entities.ErrFenced) {
			return // the shard is another instance's now
		}
		if err != nil {
			w.r.log.Warn("consumers: read the changes", "consumer", w.c.id, "shard", w.shard, "err", err.Error())
			w.readAt = time.Time{}
			w.wait(time.Second)
			continue
		}
		if next > 0 {
			w.wait(next)
		}
	}
	if err := w.checkpoint(); err != nil && !errors.Is(err, entities.ErrFenced) {
		w.r.log.Warn("consumers: save the checkpoint", "consumer", w.c.id, "shard", w.shard, "err", err.Error())
	}
}

// wait waits for a change heard, a pending change's retry, d, or the
// stop. A retry due already (the clock moved to it meanwhile) ends it at
// once.
func (w *worker) wait(d time.Duration) {
	var retry <-chan time.Time
	if due, ok := w.nextDue(); ok {
		t, passed := clocks.TimerAt(w.r.cfg.Clock, due)
		if passed {
			return
		}
		defer t.Stop()
		retry = t.Chan()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.kick:
	case <-retry:
	case <-t.C:
	case <-w.stop:
	}
}

// step handles the changes heard, reads the log when it is due, retries
// the pending changes that are due, and saves the checkpoint when it is
// due; it returns how long to wait for (0: step again now).
func (w *worker) step() (time.Duration, error) {
	w.takeHeard()
	now := time.Now()
	gap := !w.gapSince.IsZero() && now.Sub(w.gapSince) >= gapGrace
	if w.more || w.readAt.IsZero() || now.Sub(w.readAt) >= w.r.cfg.Poll || gap {
		if err := w.read(); err != nil {
			return 0, err
		}
		w.takeHeard()
	}
	w.retryDue()
	if now.Sub(w.savedAt) >= checkpointEvery {
		if err := w.checkpoint(); err != nil {
			return 0, err
		}
	}
	w.noteLag()
	if w.more {
		return 0, nil
	}
	next := w.r.cfg.Poll - now.Sub(w.readAt)
	if !w.gapSince.IsZero() {
		next = min(next, gapGrace-now.Sub(w.gapSince))
	}
	if w.target() > w.saved {
		next = min(next, checkpointEvery-now.Sub(w.savedAt))
	}
	return max(next, time.Millisecond), nil
}

// read reads a batch of the log after the cursor and consumes it.
func (w *worker) read() error {
	changes, head, missed, err := w.r.cfg.Log.Changes(w.ctx, w.shard, w.cursor, batch)
	if err != nil {
		return err
	}
	w.readAt, w.head = time.Now(), max(w.head, head)
	if missed {
		// Go on from the oldest change kept, once the current states are
		// handled (a state still pending holds the checkpoint there).
		from := head
		if len(changes) > 0 {
			from = changes[0].Seq - 1
		}
		if err := w.resync(head, from); err != nil {
			return err
		}
		w.cursor = from
	}
	for _, c := range changes {
		if w.stopping() {
			break
		}
		w.consume(c)
	}
	w.more = len(changes) == batch
	w.noteGap()
	return nil
}

// consume handles c, the change after the cursor, if it is of the
// consumer's type and not older than a state a resync handled.
func (w *worker) consume(c change) {
	w.cursor, w.lastAt = c.Seq, c.At
	if c.EntityType == w.c.entityType && !w.stale(c) {
		w.deliver(c, c.Seq)
	}
}

// noteGap notes whether changes after the cursor are known and missing.
func (w *worker) noteGap() {
	switch {
	case w.cursor >= w.head:
		w.gapSince = time.Time{}
	case w.gapSince.IsZero():
		w.gapSince = time.Now()
	}
}

// resync handles the current state of every entity of the consumer's
// type in the shard: the changes the log no longer holds are coalesced
// into them (deletions in the gap are not seen). from is where reading
// goes on after it.
func (w *worker) resync(head, from uint64) error {
	w.r.log.Warn("consumers: behind the change log's bound; catching up from the current states",
		"consumer", w.c.id, "shard", w.shard, "checkpoint", w.cursor, "head", head)
	w.resynced, w.resyncHead = make(map[string]uint64), head
	return w.currentStates(func(c change) error {
		if w.stopping() {
			return errStopping
		}
		w.resynced[c.EntityID] = c.Revision
		w.deliver(c, from+1)
		return nil
	})
}

// currentStates calls fn with the current state of every entity of the
// consumer's type in the shard, from a listing shared with the workers of
// the other shards that catch up then, begun after this worker read the
// log's head (listing.States).
func (w *worker) currentStates(fn func(change) error) error {
	return w.r.listings.States(w.ctx, w.r.cfg.Log, w.shard, w.c.entityType, w.readAt, fn)
}

var errStopping = errors.New("stopping")

// stale reports whether c is older than a state a resync handled.
func (w *worker) stale(c change) bool {
	if w.resynced == nil {
		return false
	}
	if c.Seq > w.resyncHead {
		w.resynced = nil
		return false
	}
	rev, ok := w.resynced[c.EntityID]
	return ok && (c.Revision < rev || c.Revision == rev && !c.Deleted)
}

// target is the checkpoint to save: the last change consumed, or just
// before the oldest pending one.
func (w *worker) target() uint64 {
	target := w.cursor
	for _, p := range w.pending {
		target = min(target, p.since-1)
	}
	return target
}

// checkpoint saves the checkpoint if it moved.
func (w *worker) checkpoint() error {
	target := w.target()
	if target <= w.saved {
		return nil
	}
	if err := w.r.cfg.Log.SaveCheckpoint(w.ctx, w.fence, w.c.id, w.shard, target); err != nil {
		return err
	}
	w.saved, w.savedAt = target, time.Now()
	return nil
}
