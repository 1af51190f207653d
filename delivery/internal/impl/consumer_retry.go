package impl

// The consumer controller's retry tick: asking the producer controller
// again for what is missing while nothing comes, registering until heard,
// and giving a Delivery that stays unconfirmed again.

import "time"

// onRetry runs every retry interval. A tick with no message since the last
// one is idle: ask the producer controller again for what is missing, and
// wait 1.5 times longer next time, up to the maximum. The first message
// after that brings the interval back to the minimum.
func (c *consumer[A]) onRetry() {
	s := c.cfg.settings
	elapsed := c.retryInterval
	next := c.retryInterval
	// Still waiting for the same resend as a tick ago: the Resend, or the
	// message it brought, was lost too (the messages after it, which do
	// come, are dropped while resending). Ask again.
	stuck := c.resendingFrom != 0 && c.resendingFrom == c.resendAtTick
	c.resendAtTick = c.resendingFrom
	switch {
	case c.heard:
		c.heard = false
		next = s.ResendIntervalMin
		if stuck {
			c.resend(c.resendingFrom)
		}
	case c.outstanding:
		// Waiting for the consumer, not for the producer controller, whose
		// messages wait meanwhile (see Receive): not idle.
		c.register()
	default:
		c.idleRetry()
		next = min(time.Duration(float64(c.retryInterval)*1.5), s.ResendIntervalMax)
	}
	if next != c.retryInterval {
		c.retryInterval = next
		c.ctx.Timers().StartPeriodic(retryKey{}, retryTick[A]{}, next)
	}
	c.checkStalled(elapsed)
}

func (c *consumer[A]) idleRetry() {
	c.register()
	if c.cfg.settings.OnlyFlowControl && c.stash.Len() == 0 {
		// Idle without resending: every message that came is done with,
		// delivered or lost (a chunk of a message that lost another is
		// lost too), and whatever is missing will never come. Ask for a
		// whole window past what came; the producer controller opens it
		// past what it sent (see Request.ViaTimeout). Confirming all that
		// came keeps that a window, not a window plus every message lost
		// since the last delivery.
		c.confirmedSeqNr = max(c.confirmedSeqNr, c.receivedSeqNr)
		c.requestedSeqNr = max(c.requestedSeqNr, c.receivedSeqNr+SeqNr(c.cfg.settings.FlowControlWindow))
	}
	switch {
	case !c.associated:
		if c.askedFirst {
			c.resend(0)
		}
	case c.resendingFrom != 0:
		c.resend(c.resendingFrom)
	default:
		// Expecting more than came: the last messages, or the Request
		// that asked for them, may be lost. Otherwise just say where the
		// consumer is, which also repeats a lost Ack.
		c.sendRequest(c.receivedSeqNr < c.requestedSeqNr)
	}
}

// register sends RegisterConsumer to the producer controller it is
// registering with: at first, and again on every retry tick until that
// one's first message shows it heard. Every copy carries the number the
// registration took, so the producer controller tells a late one from a
// newer consumer controller's.
func (c *consumer[A]) register() {
	if c.registering != nil {
		c.registering.Tell(RegisterConsumer[A]{ConsumerController: c.self, registration: c.registration})
	}
}

// checkStalled gives the outstanding Delivery again once it has been
// unconfirmed for RedeliverAfter: the consumer may have lost it (failed
// while handling it, say), and waiting on would hang the stream. The
// Delivery keeps its SeqNr and ConfirmTo, so a consumer that was only slow
// can tell, and its second Confirmed is ignored.
func (c *consumer[A]) checkStalled(elapsed time.Duration) {
	after := c.cfg.settings.RedeliverAfter
	if !c.outstanding || after < 0 {
		return
	}
	if c.stalledOf != c.deliveries {
		c.stalledOf, c.stalled = c.deliveries, 0 // delivered during this tick: count from now
		return
	}
	c.stalled += elapsed
	if c.stalled >= after {
		c.log.Warn("delivery unconfirmed; delivering it again", "producerId", c.out.ProducerID,
			"seqNr", c.out.SeqNr, "unconfirmedFor", c.stalled.String())
		c.stalled = 0
		c.redeliver()
	}
}
