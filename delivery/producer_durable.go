package delivery

// The producer controller's use of its durable queue (the calls themselves,
// their deadlines and retries, are in durable_calls.go): every message is
// stored before it is sent, confirmations are stored behind, and the state
// is loaded when the controller starts.

import (
	"github.com/trellis-go/trellis/delivery/durable"
)

func (p *producer[A]) startDurable() {
	p.dq = startDurableCalls(p.ctx, p.cfg.queue, p.cfg.id, p.cfg.settings, p.log,
		func(m durableMsg[A]) ProducerCommand[A] { return m })
	p.dq.loadState()
}

func (p *producer[A]) storing() bool { return p.dq != nil && p.dq.storing() }

func (p *producer[A]) storeSent(m *SequencedMessage[A]) {
	p.dq.storeSent(durable.MessageSent[A]{
		SeqNr:     m.SeqNr,
		Message:   m.Message,
		Chunk:     m.Chunk,
		Ack:       m.Ack,
		Qualifier: durable.NoQualifier,
		Timestamp: p.dq.now(),
	})
}

// storeConfirmed stores confirmation c, behind the flow of messages.
func (p *producer[A]) storeConfirmed(c SeqNr) { p.dq.storeConfirmed(c, durable.NoQualifier) }

// onDurable handles the outcome of a call, its deadline and its backoff.
func (p *producer[A]) onDurable(m durableMsg[A]) {
	if p.dq == nil {
		return
	}
	switch out := p.dq.handle(m); {
	case out.err != nil:
		p.fail(out.err)
	case out.loaded != nil:
		p.onLoaded(*out.loaded)
	case out.stored:
		p.emit()
		p.sendPending()
	}
}

// onLoaded takes the stored state: unconfirmed messages keep their
// sequence numbers and are sent again when the controller is active.
func (p *producer[A]) onLoaded(s durable.State[A]) {
	s = s.DropPartialChunks()
	p.currentSeqNr = max(s.CurrentSeqNr, 1)
	p.generation = s.Incarnation
	p.confirmedSeqNr = s.HighestConfirmedSeqNr
	for _, u := range s.Unconfirmed {
		p.unconfirmed.push(&SequencedMessage[A]{
			ProducerID:         p.cfg.id,
			SeqNr:              u.SeqNr,
			Message:            u.Message,
			Chunk:              u.Chunk,
			Ack:                u.Ack,
			ProducerController: p.self,
			Incarnation:        p.incarnation,
			Generation:         p.generation,
		})
	}
	p.loaded = true
	if n := p.unconfirmed.len(); n > 0 {
		p.log.Info("durable queue loaded", "currentSeqNr", p.currentSeqNr, "unconfirmed", n,
			"from", p.unconfirmed.at(0).SeqNr)
	}
	p.maybeActivate()
}
