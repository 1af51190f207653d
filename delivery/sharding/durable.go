package sharding

// The sharding producer controller's durable queue. A message is stored as
// it arrives, qualified by its entity id, before it is sent or buffered, so
// that a buffered message survives a crash as well as a sent one. One store
// at a time: the messages of each entity are stored, sent and confirmed in
// the order of their sequence numbers, which is what lets a confirmation
// of an entity cover everything of it up to its seqNr. A restarted
// controller keeps the stored sequence numbers: it buffers each
// unconfirmed message for its entity again, in order, ahead of new ones.

import (
	"fmt"

	"github.com/trellis-go/trellis/delivery/durable"
)

func (p *shardingProducer[A]) store(e *spEntry[A]) {
	p.storingE = e
	p.StoreNext(e.msg, e.replyTo != nil, e.entityID, e.trace)
}

// onStored sends the message just stored to its entity, or buffers it for
// the entity, and stores the next arrival.
func (p *shardingProducer[A]) onStored() {
	e := p.storingE
	p.storingE = nil
	e.seqNr = p.CurrentSeqNr
	p.CurrentSeqNr++
	if e.replyTo != nil {
		e.replyTo.Tell(e.seqNr) // stored: that is all a durable ask waits for
		e.replyTo = nil
	}
	p.accept(e)
	p.storeArrival()
}

// storeArrival stores the next message that arrived while another was
// being stored, or asks the producer for more.
func (p *shardingProducer[A]) storeArrival() {
	if p.Failed {
		return
	}
	if p.arrivals.Len() == 0 {
		p.maybeRequestNext()
		return
	}
	p.buffered--
	p.store(p.arrivals.Pop())
}

// onLoaded takes the stored state: every unconfirmed message is buffered
// for its entity again, with its sequence number.
func (p *shardingProducer[A]) onLoaded(s durable.State[A]) {
	p.CurrentSeqNr = max(s.CurrentSeqNr, 1)
	for _, u := range s.Unconfirmed {
		if u.Chunk != nil {
			p.Fail(fmt.Errorf("durable queue: load state: message %d is a chunk: the queue holds a point-to-point producer's messages, not a sharding one's", u.SeqNr))
			return
		}
		p.accept(&spEntry[A]{entityID: u.Qualifier, msg: u.Message, seqNr: u.SeqNr, trace: u.Trace, replayed: true})
	}
	p.Loaded = true
	if n := len(s.Unconfirmed); n > 0 {
		p.Log.Info("durable queue loaded", "currentSeqNr", p.CurrentSeqNr, "unconfirmed", n, "entities", len(p.entities))
	}
	p.storeArrival()
}
