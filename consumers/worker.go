package consumers

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/timers"
)

// batch is how many changes a worker reads at once.
const batch = 100

// worker consumes one shard's changes for one consumer, one change at a
// time, from the consumer's checkpoint on. A change that fails is kept
// pending and retried with backoff while the shard's other entities go
// on; a later change of a pending entity replaces the pending one
// (key-value consumers may coalesce), and the checkpoint stays before the
// oldest pending change.
type worker struct {
	r     *Runner
	c     *consumer
	shard int
	fence cluster.Fence
	prev  *worker // the shard's previous worker, which must end first

	ctx      context.Context // handlers' contexts derive from it
	cancel   context.CancelFunc
	stop     chan struct{}
	stopOnce sync.Once
	kick     chan struct{}
	done     chan struct{}

	cursor  uint64 // the last change read
	saved   uint64 // the checkpoint saved
	pending map[string]*pending
	// after a resync: the revisions handled from the current states, for
	// skipping the older changes still in the log, until resyncHead.
	resynced   map[string]uint64
	resyncHead uint64

	lagMu sync.Mutex
	lag   Lag
}

// pending is an entity whose change failed.
type pending struct {
	change   change
	since    uint64    // the Seq of its oldest change not handled
	firstAt  time.Time // when that change was recorded
	attempts int
	due      time.Time
	err      error
}

func startWorker(r *Runner, c *consumer, shard int, f cluster.Fence, prev *worker) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{r: r, c: c, shard: shard, fence: f, prev: prev, ctx: ctx, cancel: cancel,
		stop: make(chan struct{}), kick: make(chan struct{}, 1), done: make(chan struct{}),
		pending: make(map[string]*pending)}
	go w.run()
	return w
}

// wake asks for a read now.
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
	}
	for !w.stopping() {
		cp, err := w.r.cfg.Log.Register(w.ctx, w.c.id, w.shard)
		if err == nil {
			w.cursor, w.saved = cp, cp
			break
		}
		w.r.log.Warn("consumers: read the checkpoint", "consumer", w.c.id, "shard", w.shard, "err", err.Error())
		w.wait(time.Second)
	}
	for !w.stopping() {
		more, err := w.step()
		if errors.Is(err, entities.ErrFenced) {
			return // the shard is another instance's now
		}
		if err != nil {
			w.r.log.Warn("consumers: read the changes", "consumer", w.c.id, "shard", w.shard, "err", err.Error())
			w.wait(time.Second)
			continue
		}
		if !more {
			w.wait(w.r.cfg.Poll)
		}
	}
}

// wait waits for a write to the shard, a pending change's retry, d, or
// the stop.
func (w *worker) wait(d time.Duration) {
	var retry <-chan time.Time
	if due, ok := w.nextDue(); ok {
		t := w.r.cfg.Clock.NewTimer(due.Sub(w.r.cfg.Clock.Now()))
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

// step reads a batch and handles it, retries the pending changes that are
// due, and saves the checkpoint; more is true when the log may hold more.
func (w *worker) step() (more bool, err error) {
	log := w.r.cfg.Log
	changes, head, missed, err := log.Changes(w.ctx, w.shard, w.cursor, batch)
	if err != nil {
		return false, err
	}
	if missed {
		// Go on from the oldest change kept, once the current states are
		// handled (a state still pending holds the checkpoint there).
		from := head
		if len(changes) > 0 {
			from = changes[0].Seq - 1
		}
		if err := w.resync(head, from); err != nil {
			return false, err
		}
		w.cursor = from
	}
	w.noteBatch(head, changes)
	for _, c := range changes {
		if w.stopping() {
			break
		}
		w.cursor = c.Seq
		if c.EntityType == w.c.entityType && !w.stale(c) {
			w.deliver(c, c.Seq)
		}
	}
	w.retryDue()
	if err := w.checkpoint(); err != nil {
		return false, err
	}
	w.noteDone(head)
	return len(changes) == batch, nil
}

// resync handles the current state of every entity of the consumer's
// type in the shard: the changes the log no longer holds are coalesced
// into them (deletions in the gap are not seen). from is where reading
// goes on after it.
func (w *worker) resync(head, from uint64) error {
	w.r.log.Warn("consumers: behind the change log's bound; catching up from the current states",
		"consumer", w.c.id, "shard", w.shard, "checkpoint", w.cursor, "head", head)
	w.resynced, w.resyncHead = make(map[string]uint64), head
	return w.r.cfg.Log.Current(w.ctx, w.shard, w.c.entityType, func(c change) error {
		if w.stopping() {
			return errStopping
		}
		w.resynced[c.EntityID] = c.Revision
		w.deliver(c, from+1)
		return nil
	})
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

// deliver handles c, or queues it behind its entity's pending change.
func (w *worker) deliver(c change, seq uint64) {
	if p := w.pending[c.EntityID]; p != nil {
		p.change = c // coalesced: the retry handles the latest state
		return
	}
	if err := w.attempt(c); err != nil {
		now := w.r.cfg.Clock.Now()
		p := &pending{change: c, since: seq, firstAt: c.At, attempts: 1, err: err}
		w.pending[c.EntityID] = p
		w.failed(p, now)
	}
}

// attempt runs the handler once.
func (w *worker) attempt(c change) error {
	ctx, cancel := context.WithTimeout(w.ctx, w.r.cfg.HandlerTimeout)
	defer cancel()
	ignored, err := w.c.handle(ctx, w.r.cfg.Client, c)
	w.r.metrics.handled(w.c.id, ignored, err)
	return err
}

// failed schedules p's next attempt, or makes it a dead letter when it
// ran out of retries.
func (w *worker) failed(p *pending, now time.Time) {
	if w.c.maxRetries > 0 && p.attempts > w.c.maxRetries {
		w.bury(p, now)
		return
	}
	wait := timers.Backoff(p.attempts)
	p.due = now.Add(wait)
	w.r.log.Warn("consumers: handler failed; retrying", "consumer", w.c.id, "entity", p.change.EntityID,
		"revision", p.change.Revision, "attempt", p.attempts, "retry_in", wait.String(), "err", p.err.Error())
}

// retryDue retries the pending changes that are due.
func (w *worker) retryDue() {
	now := w.r.cfg.Clock.Now()
	for id, p := range w.pending {
		if w.stopping() {
			return
		}
		if p.due.After(now) {
			continue
		}
		if p.err = w.attempt(p.change); p.err == nil {
			delete(w.pending, id)
			continue
		}
		p.attempts++
		w.failed(p, now)
	}
}

// bury keeps p as a dead letter and lets its entity go on; a dead letter
// that cannot be stored stays pending, retried later.
func (w *worker) bury(p *pending, now time.Time) {
	d := deadLetterOf(w.c.id, w.shard, p, now)
	if err := w.r.cfg.DeadLetters.Put(w.ctx, d); err != nil {
		p.due = now.Add(timers.Backoff(p.attempts))
		w.r.log.Error("consumers: store a dead letter", "consumer", w.c.id, "entity", d.EntityID, "err", err.Error())
		return
	}
	delete(w.pending, p.change.EntityID)
	w.r.metrics.dead(w.c.id)
	w.r.log.Error("consumers: a change ran out of retries: kept as a dead letter", "consumer", w.c.id,
		"entity", d.EntityID, "revision", d.Revision, "attempts", d.Attempts, "err", d.Error)
}

// nextDue is when the earliest pending change is due.
func (w *worker) nextDue() (time.Time, bool) {
	var due time.Time
	for _, p := range w.pending {
		if due.IsZero() || p.due.Before(due) {
			due = p.due
		}
	}
	return due, !due.IsZero()
}

// checkpoint saves the checkpoint: the last change read, or just before
// the oldest pending one.
func (w *worker) checkpoint() error {
	target := w.cursor
	for _, p := range w.pending {
		target = min(target, p.since-1)
	}
	if target <= w.saved {
		return nil
	}
	if err := w.r.cfg.Log.SaveCheckpoint(w.ctx, w.fence, w.c.id, w.shard, target); err != nil {
		return err
	}
	w.saved = target
	return nil
}
