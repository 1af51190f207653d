package impl

// The producer controller's use of its durable queue (the calls themselves,
// their deadlines and retries, are in durable_calls.go): every message is
// stored before it is sent, with several stores under way at once,
// confirmations are stored behind, and the state is loaded when the
// controller starts.

import (
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/durablecalls"
	"github.com/trellis-go/trellis/delivery/internal/ring"
	"github.com/trellis-go/trellis/runtime"
)

// durableResult is the outcome of a durable queue call, its deadline or its
// backoff, as a command of the producer controller.
type durableResult[A any] struct{ durablecalls.Msg[A] }

func (durableResult[A]) producerCommand(A) {}

// storePipe holds the messages handed to the durable queue and not yet
// sent, in sequence order: stores are pipelined, so the producer is given
// its next RequestNext while earlier messages are being stored, and each
// message goes out once it (and every one before it) is stored.
type storePipe[A any] struct {
	msgs   ring.Ring[pipedMsg[A]]
	stored int // how many at the front of msgs are stored
}

// pipedMsg is a message in the pipe, and the ask of the message whose last
// chunk it is.
type pipedMsg[A any] struct {
	m       *SequencedMessage[A]
	replyTo runtime.Ref[SeqNr]
}

// nextSeqNr is the sequence number of the next message to store (or, without
// a durable queue, to send).
func (p *producer[A]) nextSeqNr() SeqNr { return p.currentSeqNr + SeqNr(p.pipe.msgs.Len()) }

// storeLimit is the highest sequence number the controller takes from its
// producer: the consumer controller's demand, and with a durable queue so
// many more to store ahead (see ProducerSettings.DurableQueueStoreAhead).
func (p *producer[A]) storeLimit() SeqNr {
	if p.dq == nil {
		return p.requestedSeqNr
	}
	return p.requestedSeqNr + SeqNr(max(p.cfg.settings.DurableQueueStoreAhead, 0))
}

// storePending sends what is stored, within the consumer controller's
// demand; hands the current message's chunks to the queue up to the store
// limit; and asks for the next message.
func (p *producer[A]) storePending() {
	for p.pipe.stored > 0 && p.currentSeqNr <= p.requestedSeqNr {
		pm := p.pipe.msgs.Pop()
		p.pipe.stored--
		p.sent(pm.m, pm.replyTo)
		p.send(pm.m)
	}
	for p.hasPending() && p.nextSeqNr() <= p.storeLimit() {
		seqNr := p.nextSeqNr()
		m, replyTo := p.takePending()
		p.stamp(m, seqNr)
		p.pipe.msgs.Push(pipedMsg[A]{m: m, replyTo: replyTo})
		p.storeSent(m)
	}
	p.requestNext()
}

func (p *producer[A]) startDurable() {
	p.dq = durablecalls.Start(p.ctx, p.cfg.queue, p.cfg.id, p.cfg.settings.durable(), p.log,
		func(m durablecalls.Msg[A]) ProducerCommand[A] { return durableResult[A]{m} })
	p.dq.LoadState()
}

func (p *producer[A]) storeSent(m *SequencedMessage[A]) {
	p.dq.StoreSent(durable.MessageSent[A]{
		SeqNr:     m.SeqNr,
		Message:   m.Message,
		Chunk:     m.Chunk,
		Ack:       m.Ack,
		Qualifier: durable.NoQualifier,
		Trace:     m.TraceContext,
		Timestamp: p.dq.Now(),
	})
}

// storeConfirmed stores confirmation c, behind the flow of messages.
func (p *producer[A]) storeConfirmed(c SeqNr) { p.dq.StoreConfirmed(c, durable.NoQualifier) }

// onDurable handles the outcome of a call, its deadline and its backoff.
func (p *producer[A]) onDurable(m durablecalls.Msg[A]) {
	if p.dq == nil {
		return
	}
	switch out := p.dq.Handle(m); {
	case out.Err != nil:
		p.fail(out.Err)
	case out.Loaded != nil:
		p.onLoaded(*out.Loaded)
	case out.Stored > 0:
		p.pipe.stored += out.Stored
		p.storePending()
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
		p.unconfirmed.Push(&SequencedMessage[A]{
			ProducerID:         p.cfg.id,
			SeqNr:              u.SeqNr,
			Message:            u.Message,
			Chunk:              u.Chunk,
			Ack:                u.Ack,
			ProducerController: p.self,
			Incarnation:        p.incarnation,
			Generation:         p.generation,
			TraceContext:       u.Trace,
			Resent:             u.Trace != "", // sent, or about to be, before the restart
		})
	}
	p.loaded = true
	if n := p.unconfirmed.Len(); n > 0 {
		p.log.Info("durable queue loaded", "currentSeqNr", p.currentSeqNr, "unconfirmed", n,
			"from", p.unconfirmed.At(0).SeqNr)
	}
	p.maybeActivate()
}
