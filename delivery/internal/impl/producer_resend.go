package impl

// The producer controller's resending: on a consumer controller's Resend,
// to wake a silent entity, and of the first message of an association
// until it is confirmed.

// onResend sends again what a consumer controller that saw a gap asks
// for. Resend(0) comes from a consumer controller that does not know this
// producer controller yet, which cannot name an association: it is taken
// from anyone (at worst the current consumer controller gets duplicates,
// which it drops). A Resend from a seqNr that is no longer kept (confirmed
// meanwhile) is taken as Resend(0): the head is marked first, so the
// consumer controller starts over there instead of waiting for ever for a
// message that will never come again.
func (p *producer[A]) onResend(r Resend[A]) {
	if !p.active || !p.supportResend || (r.FromSeqNr != 0 && r.Association != p.association) {
		return
	}
	from := r.FromSeqNr
	if p.unconfirmed.Len() == 0 || from < p.unconfirmed.At(0).SeqNr {
		from = 0
	}
	if from == 0 {
		p.markHeadFirst()
	}
	p.resend(from)
}

// wake sends again every unconfirmed message, none marked first, not even
// the head. A live consumer controller drops what it has and takes the
// rest; a new one (the entity was passivated and starts again) does not
// know this producer controller, and asks for Resend(0), which marks the
// head first. That Resend comes after the last Ack of the consumer
// controller that was passivated, sent as it stopped: so what that one
// confirmed is no longer unconfirmed, and is not delivered twice. Marked
// first here, the head could reach the new consumer controller before that
// Ack reached this one, and the new one would take it, and what follows,
// again.
func (p *producer[A]) wake() {
	if !p.active || !p.supportResend {
		return
	}
	for i := range p.unconfirmed.Len() {
		m := p.markResent(i)
		if m.First {
			c := *m // shared with the consumer side: copy, never modify
			c.First = false
			m = &c
		}
		p.send(m)
	}
}

// resend sends again the unconfirmed messages from seqNr from on.
func (p *producer[A]) resend(from SeqNr) {
	for i := range p.unconfirmed.Len() {
		if m := p.unconfirmed.At(i); m.SeqNr >= from {
			p.send(p.markResent(i))
		}
	}
}

// markResent returns the unconfirmed message at i marked as resent, when
// it is traced and not marked yet: a copy, put in its place, since sent
// messages are shared with the consumer side.
func (p *producer[A]) markResent(i int) *SequencedMessage[A] {
	m := p.unconfirmed.At(i)
	if m.TraceContext == "" || m.Resent {
		return m
	}
	c := *m
	c.Resent = true
	p.unconfirmed.Set(i, &c)
	return &c
}

// markHeadFirst starts a new association at the oldest unconfirmed message,
// or at the next message when nothing is unconfirmed. The head is marked
// before anything is resent, so one round trip suffices.
func (p *producer[A]) markHeadFirst() {
	if p.unconfirmed.Len() == 0 {
		p.firstSeqNr = p.currentSeqNr
		return
	}
	head := p.unconfirmed.At(0)
	if !head.First || head.Association != p.association {
		// Sent messages are shared with the consumer side: copy, never modify.
		c := *head
		c.First, c.Association = true, p.association
		head = &c
		p.unconfirmed.Set(0, head)
	}
	p.firstSeqNr = head.SeqNr
	p.startResendFirst()
}

func (p *producer[A]) startResendFirst() {
	if !p.resendFirstOn {
		p.resendFirstOn = true
		p.ctx.Timers().StartPeriodic(resendFirstKey{}, resendFirstTick[A]{}, p.cfg.settings.ResendFirstInterval)
	}
}

func (p *producer[A]) stopResendFirst() {
	if p.resendFirstOn {
		p.resendFirstOn = false
		p.ctx.Timers().Cancel(resendFirstKey{})
	}
}

// onResendFirst sends the first message of the association again until it
// is confirmed: until then the consumer controller may not know this
// producer controller.
func (p *producer[A]) onResendFirst() {
	if p.unconfirmed.Len() > 0 && p.unconfirmed.At(0).SeqNr == p.firstSeqNr {
		p.send(p.markResent(0))
		return
	}
	p.stopResendFirst()
}
