package consumers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/tracing"
	"github.com/trellis-go/trellis/timers"
)

// maxWaiting bounds the changes an entity keeps waiting behind its failed
// one: the change log keeps about as many per shard, so a longer wait
// loses changes from the log anyway. Beyond it the latest change waiting
// takes the newest state (coalesced).
const maxWaiting = entities.DefaultChangeLogLimit

// pending is an entity whose change failed, with its later changes
// waiting behind it.
type pending struct {
	change   change    // the change being retried
	since    uint64    // its Seq: the oldest change of the entity not handled
	firstAt  time.Time // when that change was recorded
	waiting  []queued  // the entity's later changes, oldest first (none when the consumer coalesces)
	attempts int
	due      time.Time
	err      error
}

// queued is a change waiting behind its entity's failed one.
type queued struct {
	change change
	seq    uint64
}

// next makes the first change waiting the one to handle, due now; it
// reports false when none waits.
func (p *pending) next(now time.Time) bool {
	if len(p.waiting) == 0 {
		return false
	}
	q := p.waiting[0]
	p.waiting = p.waiting[1:]
	p.change, p.since, p.firstAt = q.change, q.seq, q.change.At
	p.attempts, p.due, p.err = 0, now, nil
	return true
}

// deliver handles c, or queues it behind its entity's pending change:
// every change in order, or, for a consumer that coalesces, the latest
// state in place of the one pending.
func (w *worker) deliver(c change, seq uint64) {
	if p := w.pending[c.EntityID]; p != nil {
		switch {
		case w.c.coalesce:
			p.change = c
		case len(p.waiting) < maxWaiting:
			p.waiting = append(p.waiting, queued{c, seq})
		default:
			p.waiting[len(p.waiting)-1].change = c
			w.r.log.Warn("consumers: too many changes wait behind a failed one; the latest are coalesced",
				"consumer", w.c.id, "shard", w.shard, "entity", c.EntityID, "waiting", maxWaiting)
		}
		return
	}
	// The backoff counts from the attempt's start, as a retry's does
	// (retryDue): attempts start at least the backoff apart.
	now := w.r.cfg.Clock.Now()
	if err := w.attempt(c); err != nil {
		p := &pending{change: c, since: seq, firstAt: c.At, attempts: 1, err: err}
		w.pending[c.EntityID] = p
		w.failed(p, now)
	}
}

// attempt runs the handler once, bounded by the consumer's handler
// timeout.
func (w *worker) attempt(c change) error {
	ctx, cancelTimeout := context.WithTimeout(w.ctx, w.c.handlerTimeout(w.r.cfg.HandlerTimeout))
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctx = w.call.begin(ctx, cancel)
	defer w.call.end()
	ctx, span := tracing.StartConsume(ctx, w.r.cfg.Client.Tracer(), w.c.id, c.EntityType, c.EntityID, c.TraceContext)
	ignored, err := w.c.handle(ctx, w.r.handlerDeps(), c)
	tracing.End(span, components.ErrorType(err))
	w.r.metrics.handled(w.c.id, ignored, err)
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, errLeftWaiting) {
		w.r.log.Info("consumers: the hand-over cancelled a handler that waited for another shard's owner; "+
			"the new owner handles the change again", "consumer", w.c.id, "shard", w.shard,
			"entity", c.EntityID, "revision", c.Revision, "cause", cause.Error())
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}

// failed schedules p's next attempt the backoff after the failed one
// started (now), or makes it a dead letter when it ran out of retries.
func (w *worker) failed(p *pending, now time.Time) {
	if w.c.maxRetries > 0 && p.attempts > w.c.maxRetries {
		w.bury(p, now)
		return
	}
	wait := timers.Backoff(p.attempts)
	p.due = now.Add(wait)
	if errors.Is(p.err, errLeftWaiting) {
		return // logged as such; the worker stops
	}
	w.r.log.Warn("consumers: handler failed; retrying", "consumer", w.c.id, "shard", w.shard, "entity", p.change.EntityID,
		"revision", p.change.Revision, "attempt", p.attempts, "retry_in", wait.String(), "waiting", len(p.waiting), "err", p.err.Error())
}

// retryDue retries the pending changes that are due, each followed by
// the changes waiting behind it until one fails.
func (w *worker) retryDue() {
	now := w.r.cfg.Clock.Now()
	for id, p := range w.pending {
		for w.pending[id] == p && !w.stopping() && !p.due.After(now) {
			if p.err = w.attempt(p.change); p.err != nil {
				p.attempts++
				w.failed(p, now)
				continue
			}
			if !p.next(now) {
				delete(w.pending, id)
				break
			}
		}
	}
}

// bury keeps p's change as a dead letter and lets its entity go on (its
// next change waiting is due now); a dead letter that cannot be stored
// stays pending, retried later.
func (w *worker) bury(p *pending, now time.Time) {
	d := deadLetterOf(w.c.id, w.shard, p, now)
	if err := w.r.cfg.DeadLetters.Put(w.ctx, d); err != nil {
		p.due = now.Add(timers.Backoff(p.attempts))
		w.r.log.Error("consumers: store a dead letter", "consumer", w.c.id, "shard", w.shard, "entity", d.EntityID, "err", err.Error())
		return
	}
	if !p.next(now) {
		delete(w.pending, p.change.EntityID)
	}
	w.r.metrics.dead(w.c.id)
	w.r.log.Error("consumers: a change ran out of retries: kept as a dead letter", "consumer", w.c.id, "shard", w.shard,
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
