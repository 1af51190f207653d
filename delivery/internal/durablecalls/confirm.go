package durablecalls

// Confirmations: written behind the flow of messages, at most one call of
// their own in flight, the rest riding on the next store of messages.

import (
	"context"

	"github.com/trellis-go/trellis/delivery/durable"
)

// StoreConfirmed stores, behind the flow of messages, that the messages of
// qualifier up to seqNr are confirmed. The seqNrs of one qualifier must
// not go down.
func (d *Calls[A, T]) StoreConfirmed(seqNr durable.SeqNr, qualifier string) {
	c := d.confirms[qualifier]
	if c == nil {
		c = &confirmation{}
		d.confirms[qualifier] = c
	}
	if seqNr <= c.wanted {
		return
	}
	c.wanted = seqNr
	if !c.queued {
		c.queued = true
		d.confirmQueue.Push(qualifier)
	}
	if d.batch != nil && d.sent.n > 0 {
		return // it goes with the next store
	}
	d.maybeIssueConfirm()
}

// maybeIssueConfirm stores the next confirmation unless one is in flight
// or waits for its retry.
func (d *Calls[A, T]) maybeIssueConfirm() {
	if d.confirm.cancel == nil && !d.timers.IsActive(durableTimerKey{op: opStoreConfirmed, retry: true}) {
		d.issueStoreConfirmed()
	}
}

// takeConfirms takes every wanted confirmation to go with a store. The
// qualifier of a confirmation call in flight may be among them: both
// writes are idempotent, and the higher one stays.
func (d *Calls[A, T]) takeConfirms() []durable.QualifiedConfirmation {
	var cs []durable.QualifiedConfirmation
	now := d.clock.Now()
	for d.confirmQueue.Len() > 0 {
		qual := d.confirmQueue.Pop()
		c := d.confirms[qual]
		c.queued = false
		if c.wanted > c.stored {
			cs = append(cs, durable.QualifiedConfirmation{Qualifier: qual, SeqNr: c.wanted, Timestamp: now})
		}
	}
	return cs
}

// landRiding takes the outcome of the confirmations that went with a
// store: stored, or back in line.
func (d *Calls[A, T]) landRiding(ok bool) {
	for _, rc := range d.riding {
		c := d.confirms[rc.Qualifier]
		if c == nil {
			continue // a confirmation call stored as much meanwhile
		}
		if ok {
			c.stored = max(c.stored, rc.SeqNr)
		}
		if c.wanted > c.stored && !c.queued {
			c.queued = true
			d.confirmQueue.Push(rc.Qualifier)
		}
	}
	d.riding = nil
}

// issueStoreConfirmed stores the wanted confirmation of the next qualifier
// that has one, if any. Qualifiers take turns, so a busy one cannot keep
// the others' confirmations from being stored.
func (d *Calls[A, T]) issueStoreConfirmed() {
	for d.confirmQueue.Len() > 0 {
		qual := d.confirmQueue.Pop()
		c := d.confirms[qual]
		c.queued = false
		if c.wanted <= c.stored {
			delete(d.confirms, qual) // keeps the map as small as the qualifiers in flight
			continue
		}
		seqNr, now, q := c.wanted, d.clock.Now(), d.q
		d.confirmQ = qual
		d.confirm.attempt++
		d.confirm.seqNr = seqNr
		d.call(&d.confirm, opStoreConfirmed, func(ctx context.Context) Msg[A] {
			return Msg[A]{seqNr: seqNr, err: q.StoreMessageConfirmed(ctx, seqNr, qual, now)}
		})
		return
	}
}

// requeueConfirm puts the qualifier of the confirmation that was in flight
// back in line, when it has more to store (or its store failed).
func (d *Calls[A, T]) requeueConfirm() {
	c := d.confirms[d.confirmQ]
	if c == nil || c.queued {
		return
	}
	if c.wanted <= c.stored {
		delete(d.confirms, d.confirmQ)
		return
	}
	c.queued = true
	d.confirmQueue.Push(d.confirmQ)
}
