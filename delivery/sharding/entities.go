package sharding

// The entities of a sharding producer controller: each one reached through
// a producer controller of its own, with a buffer for when it has no
// demand; idle ones cleaned up, silent ones with unconfirmed messages
// woken.

import (
	"fmt"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/ring"
	"github.com/trellis-go/trellis/runtime"
)

// entityOut is one entity and the producer controller that sends to it.
type entityOut[A any] struct {
	id       string
	pc       runtime.Ref[delivery.ProducerCommand[A]]
	replyTo  runtime.Ref[delivery.SeqNr] // where pc confirms each message
	demandAt int                         // index in shardingProducer.demand, or -1 (see demandSet)
	// buffer holds the messages waiting for demand; unconfirmed those sent
	// to pc, which confirms them in order, one reply each.
	buffer      ring.Ring[*spEntry[A]]
	unconfirmed ring.Ring[*spEntry[A]]
	// lastActivity is when pc last asked for a message, confirmed one or
	// was sent one.
	lastActivity time.Time
	gone         bool // cleaned up: messages about it are stale
}

func (e *entityOut[A]) DemandIndex() *int { return &e.demandAt }

// Internal messages about entities, made by adapters and watches.
type (
	spEntityNext[A any]   struct{ e *entityOut[A] }
	spConfirmed[A any]    struct{ e *entityOut[A] }
	spChildStopped[A any] struct{ e *entityOut[A] }
)

func (spEntityNext[A]) command(A)   {}
func (spConfirmed[A]) command(A)    {}
func (spChildStopped[A]) command(A) {}

func (p *shardingProducer[A]) now() time.Time { return p.Ctx.System().Clock().Now() }

func (p *shardingProducer[A]) hasDemand(id string) bool {
	e := p.entities[id]
	return e != nil && e.demandAt >= 0
}

// entity returns the entity id, starting its producer controller if it has
// none; nil if that fails (and the controller fails).
func (p *shardingProducer[A]) entity(id string) *entityOut[A] {
	if e := p.entities[id]; e != nil {
		return e
	}
	e := &entityOut[A]{id: id, demandAt: -1, lastActivity: p.now()}
	// Its consumer is the entity itself: the first message goes out before
	// any demand, which starts the entity.
	var err error
	e.pc, e.replyTo, err = p.SpawnChild(p.Cfg.ID+"-"+id, p.region.EntityRef(id),
		spEntityNext[A]{e: e}, spConfirmed[A]{e: e}, spChildStopped[A]{e: e})
	if err != nil {
		p.Fail(fmt.Errorf("spawn the producer controller of entity %q: %w", id, err))
		return nil
	}
	p.entities[id] = e
	return e
}

// accept sends m to its entity if it has demand and nothing buffered, and
// buffers it otherwise.
func (p *shardingProducer[A]) accept(m *spEntry[A]) {
	e := p.entity(m.entityID)
	if e == nil {
		return
	}
	if e.demandAt >= 0 && e.buffer.Len() == 0 {
		p.sendTo(e, m)
		return
	}
	e.buffer.Push(m)
	p.buffered++
	p.bufferedBy[e.id]++
	p.stale = true
}

func (p *shardingProducer[A]) sendTo(e *entityOut[A], m *spEntry[A]) {
	p.dropDemand(e)
	e.unconfirmed.Push(m)
	e.lastActivity = p.now()
	// The producer's ask wants its reply soon: only then is the entity
	// asked to confirm this very message at once.
	e.pc.Tell(p.Cfg.Outgoing(m.msg, m.trace, m.replayed, e.replyTo, m.replyTo == nil))
}

// onEntityDemand takes the RequestNext of an entity's producer controller:
// the oldest buffered message goes, or the entity has demand.
func (p *shardingProducer[A]) onEntityDemand(e *entityOut[A]) {
	if e.gone || e.demandAt >= 0 {
		return
	}
	e.lastActivity = p.now()
	p.stale = true
	if e.buffer.Len() == 0 {
		p.demand.Add(e)
		return
	}
	m := e.buffer.Pop()
	p.buffered--
	if p.bufferedBy[e.id]--; p.bufferedBy[e.id] == 0 {
		delete(p.bufferedBy, e.id)
	}
	p.sendTo(e, m)
	p.maybeRequestNext()
}

func (p *shardingProducer[A]) dropDemand(e *entityOut[A]) {
	if p.demand.Remove(e) {
		p.stale = true
	}
}

// onEntityConfirmed takes the confirmation of the oldest message sent to e.
func (p *shardingProducer[A]) onEntityConfirmed(e *entityOut[A]) {
	if e.gone || e.unconfirmed.Len() == 0 {
		return
	}
	m := e.unconfirmed.Pop()
	e.lastActivity = p.now()
	switch {
	case p.Dq != nil:
		p.Dq.StoreConfirmed(m.seqNr, e.id)
	case m.replyTo != nil:
		m.replyTo.Tell(m.seqNr)
		m.replyTo = nil
	}
}

// cleanup stops the producer controllers of entities that have been idle
// for CleanupUnusedAfter with nothing unconfirmed or buffered. The
// entity's consumer side sees its producer controller stop and stops its
// consumer controller.
func (p *shardingProducer[A]) cleanup() {
	now := p.now()
	for id, e := range p.entities {
		if e.unconfirmed.Len() > 0 || e.buffer.Len() > 0 || now.Sub(e.lastActivity) < p.settings.CleanupUnusedAfter {
			continue
		}
		delete(p.entities, id)
		p.dropDemand(e)
		e.gone = true
		p.Ctx.Unwatch(e.pc)
		_ = p.Ctx.Stop(e.pc)
		p.Log.Debug("producer controller of an unused entity stopped", "entityId", id)
	}
}

// wake sends again the unconfirmed messages of each entity that has not
// answered for ResendFirstUnconfirmedIdleTimeout. An entity passivated
// with unconfirmed messages lost them, and its producer controller would
// wait for it forever: the first of them starts it again, marked as the
// start of an association that its new consumer controller takes.
func (p *shardingProducer[A]) wake() {
	now := p.now()
	for _, e := range p.entities {
		if e.unconfirmed.Len() == 0 || now.Sub(e.lastActivity) < p.settings.ResendFirstUnconfirmedIdleTimeout {
			continue
		}
		e.lastActivity = now
		p.Log.Debug("entity silent with unconfirmed messages: sending them again", "entityId", e.id, "unconfirmed", e.unconfirmed.Len())
		e.pc.Tell(p.Cfg.ResendUnconfirmed)
	}
}
