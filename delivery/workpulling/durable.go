package workpulling

// The work-pulling producer controller's durable queue. A message is
// stored once its worker is chosen, with the worker's producer id as its
// qualifier, and sent once stored; one store at a time, so the messages of
// each qualifier are stored, sent and confirmed in the order of their
// sequence numbers (which is what lets a confirmation of a qualifier cover
// everything of it up to its seqNr). A message that must go to another
// worker (its worker left, or the controller restarted) is stored again
// under the new worker, and only then confirmed under the old one: it is
// never in the queue zero times.

import (
	"fmt"

	"github.com/trellis-go/trellis/delivery/durable"
)

// storeFor stores e as the next message, for worker w.
func (p *workPulling[A]) storeFor(w *worker[A], e *wpEntry[A]) {
	p.storingE, p.storingW = e, w
	p.StoreNext(e.msg, e.replyTo != nil, w.key, e.trace)
}

// onStored sends the message just stored to its worker, or, if that worker
// left meanwhile, hands it over like the worker's other messages.
func (p *workPulling[A]) onStored() {
	e, w := p.storingE, p.storingW
	p.storingE, p.storingW = nil, nil
	old, oldQualifier, again := e.seqNr, e.qualifier, e.stored
	e.seqNr, e.qualifier, e.stored = p.CurrentSeqNr, w.key, true
	p.CurrentSeqNr++
	if e.replyTo != nil {
		e.replyTo.Tell(e.seqNr) // stored: that is all a durable ask waits for
		e.replyTo = nil
	}
	if again {
		p.Dq.StoreConfirmed(old, oldQualifier)
	}
	if w.gone {
		p.handovers.Push(e)
	} else {
		p.sendTo(w, e)
	}
	p.dispatch()
}

// onLoaded takes the stored state: every unconfirmed message goes to a
// worker again, as a hand-over, in the order of its sequence number.
func (p *workPulling[A]) onLoaded(s durable.State[A]) {
	p.CurrentSeqNr = max(s.CurrentSeqNr, 1)
	for _, u := range s.Unconfirmed {
		if u.Chunk != nil {
			p.Fail(fmt.Errorf("durable queue: load state: message %d is a chunk: the queue holds a point-to-point producer's messages, not a work-pulling one's", u.SeqNr))
			return
		}
		p.handovers.Push(&wpEntry[A]{msg: u.Message, seqNr: u.SeqNr, stored: true, qualifier: u.Qualifier, trace: u.Trace, replayed: true})
	}
	p.Loaded = true
	if n := p.handovers.Len(); n > 0 {
		p.Log.Info("durable queue loaded", "currentSeqNr", p.CurrentSeqNr, "unconfirmed", n)
	}
	p.dispatch()
}
