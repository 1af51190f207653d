package workpulling

// The workers of a work-pulling producer controller: found through the
// receptionist, each one reached through a producer controller of its own,
// chosen at random among those with demand, and, when one leaves, its
// unconfirmed messages handed over to the others.

import (
	"fmt"
	"math/rand/v2"

	"github.com/google/uuid"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/ring"
	"github.com/trellis-go/trellis/runtime"
)

// worker is one registered consumer controller and the producer controller
// that sends to it.
type worker[A any] struct {
	key      string // the producer id of its producer controller, and its durable qualifier
	cc       runtime.Ref[delivery.ConsumerCommand[A]]
	pc       runtime.Ref[delivery.ProducerCommand[A]]
	replyTo  runtime.Ref[delivery.SeqNr] // where pc confirms each message
	demandAt int                         // index in workPulling.demand, or -1 (see demandSet)
	// unconfirmed are the messages sent to pc, in order: pc confirms them
	// in that order, one reply each.
	unconfirmed ring.Ring[*wpEntry[A]]
	gone        bool // it left: messages about it are stale
}

func (w *worker[A]) DemandIndex() *int { return &w.demandAt }

// Internal messages about workers, made by adapters and watches.
type (
	wpListing[A any] struct {
		refs []runtime.Ref[delivery.ConsumerCommand[A]]
	}
	wpWorkerNext[A any]   struct{ w *worker[A] }
	wpConfirmed[A any]    struct{ w *worker[A] }
	wpChildStopped[A any] struct{ w *worker[A] }
)

func (wpListing[A]) command(A)      {}
func (wpWorkerNext[A]) command(A)   {}
func (wpConfirmed[A]) command(A)    {}
func (wpChildStopped[A]) command(A) {}

// onListing takes the workers registered now: new ones get a producer
// controller, those no longer listed (deregistered or stopped) leave.
func (p *workPulling[A]) onListing(refs []runtime.Ref[delivery.ConsumerCommand[A]]) {
	listed := make(map[runtime.Ref[delivery.ConsumerCommand[A]]]bool, len(refs))
	for _, cc := range refs {
		listed[cc] = true
		if p.workers[cc] == nil {
			if err := p.addWorker(cc); err != nil {
				p.Fail(err)
				return
			}
		}
	}
	for cc, w := range p.workers {
		if !listed[cc] {
			p.removeWorker(w)
		}
	}
	p.dispatch()
}

func (p *workPulling[A]) addWorker(cc runtime.Ref[delivery.ConsumerCommand[A]]) error {
	w := &worker[A]{key: p.Cfg.ID + "-" + uuid.NewString(), cc: cc, demandAt: -1}
	var err error
	w.pc, w.replyTo, err = p.SpawnChild(w.key, cc, wpWorkerNext[A]{w: w}, wpConfirmed[A]{w: w}, wpChildStopped[A]{w: w})
	if err != nil {
		return fmt.Errorf("spawn the producer controller of worker %s: %w", cc.Path(), err)
	}
	p.workers[cc] = w
	p.Log.Info("worker registered", "worker", cc.Path(), "workerProducerId", w.key, "workers", len(p.workers))
	return nil
}

// removeWorker stops the producer controller of a worker that left and
// hands its unconfirmed messages, in order, to the other workers. Some may
// have been processed already: they are processed again.
func (p *workPulling[A]) removeWorker(w *worker[A]) {
	delete(p.workers, w.cc)
	p.demand.Remove(w)
	w.gone = true
	p.Ctx.Unwatch(w.pc)
	_ = p.Ctx.Stop(w.pc)
	n := w.unconfirmed.Len()
	for w.unconfirmed.Len() > 0 {
		p.handovers.Push(w.unconfirmed.Pop())
	}
	p.Log.Info("worker left", "worker", w.cc.Path(), "workerProducerId", w.key, "handedOver", n, "workers", len(p.workers))
}

// onWorkerDemand takes a worker's RequestNext: it may be sent a message.
func (p *workPulling[A]) onWorkerDemand(w *worker[A]) {
	if w.gone || w.demandAt >= 0 {
		return
	}
	p.demand.Add(w)
	p.dispatch()
}

// route sends e to a random worker with demand, storing it first with a
// durable queue. The caller checked canRoute.
func (p *workPulling[A]) route(e *wpEntry[A]) {
	w := p.demand[rand.IntN(len(p.demand))]
	p.demand.Remove(w)
	if p.Dq != nil {
		p.storeFor(w, e)
		return
	}
	p.sendTo(w, e)
}

func (p *workPulling[A]) sendTo(w *worker[A], e *wpEntry[A]) {
	w.unconfirmed.Push(e)
	// The producer's ask wants its reply soon: only then is the worker
	// asked to confirm this very message at once.
	w.pc.Tell(p.Cfg.Outgoing(e.msg, e.trace, e.replayed, w.replyTo, e.replyTo == nil))
}

// onWorkerConfirmed takes the confirmation of the oldest message sent to w.
func (p *workPulling[A]) onWorkerConfirmed(w *worker[A]) {
	if w.gone || w.unconfirmed.Len() == 0 {
		return
	}
	e := w.unconfirmed.Pop()
	switch {
	case p.Dq != nil:
		p.Dq.StoreConfirmed(e.seqNr, w.key)
	case e.replyTo != nil:
		e.replyTo.Tell(e.seqNr)
		e.replyTo = nil
	}
}
