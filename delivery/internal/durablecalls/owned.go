package durablecalls

// The lease of a queue that is durable.Owned: a controller that finds the
// queue owned stands by, loading again when the owner's lease would lapse;
// once loaded it renews the lease every RenewEvery, and a renewal refused
// with durable.ErrFenced fails it (see failed); it releases the lease as it
// stops, so that a standby takes over at once.
//
// The lease runs out by the store's clock (Redis expires it), so its
// renewals and a standby's loads keep real time, whatever clock the actor
// system runs on (a test's fake clock would otherwise let the lease lapse
// unrenewed, and keep a standby waiting for ever).

import (
	"context"
	"time"

	"github.com/trellis-go/trellis/delivery/durable"
)

// standBy waits for the owner's lease to lapse, then loads again: an
// attempt that never counts against DurableQueueRetryAttempts.
func (d *Calls[A, T]) standBy(owned *durable.OwnedError) {
	if !d.standby {
		d.standby = true
		d.log.Info("durable queue owned by another producer controller: standing by", "producerID", d.id, "retryIn", owned.RetryIn.String())
	}
	d.leaseAfter(owned.RetryIn, Msg[A]{op: opLoad, attempt: d.load.attempt, retry: true})
}

// loaded starts renewing the lease of an owned queue.
func (d *Calls[A, T]) loaded() {
	if d.standby {
		d.standby = false
		d.log.Info("durable queue taken over", "producerID", d.id)
	}
	d.renewLater()
}

// renewLater arms the next renewal of an owned queue's lease.
func (d *Calls[A, T]) renewLater() {
	if d.owned != nil {
		d.leaseAfter(d.owned.RenewEvery(), Msg[A]{op: opRenew, tick: true})
	}
}

// leaseAfter tells the controller m after d of real time, in place of
// what it was to be told before.
func (d *Calls[A, T]) leaseAfter(after time.Duration, m Msg[A]) {
	if d.lease != nil {
		d.lease.Stop()
	}
	self, msg := d.self, d.wrap(m)
	d.lease = time.AfterFunc(after, func() { self.Tell(msg) })
}

func (d *Calls[A, T]) issueRenew() {
	owned := d.owned
	d.call(&d.renew, opRenew, func(ctx context.Context) Msg[A] { return Msg[A]{err: owned.Renew(ctx)} })
}

// release gives the lease up, waiting at most DurableQueueRequestTimeout.
func (d *Calls[A, T]) release() {
	if d.lease != nil {
		d.lease.Stop()
	}
	if d.owned == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(d.s.DurableQueueRequestTimeout, time.Second))
	defer cancel()
	if err := d.owned.Release(ctx); err != nil {
		d.log.Warn("durable queue: releasing the lease failed: a standby takes over when it lapses", "err", err)
	}
}
