package consumers

import (
	"context"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/tracing"
	"github.com/trellis-go/trellis/timers"
)

// pending is an entity whose change failed.
type pending struct {
	change   change
	since    uint64    // the Seq of its oldest change not handled
	firstAt  time.Time // when that change was recorded
	attempts int
	due      time.Time
	err      error
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
	ctx, span := tracing.StartConsume(ctx, w.r.cfg.Client.Tracer(), w.c.id, c.EntityType, c.EntityID, c.TraceContext)
	ignored, err := w.c.handle(ctx, w.r.cfg.Client, c)
	tracing.End(span, components.ErrorType(err))
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
