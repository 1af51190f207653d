package trellis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/redisqueue"
	"github.com/trellis-go/trellis/internal/assembly"
	"github.com/trellis-go/trellis/internal/cluster/entityhost"
	"github.com/trellis-go/trellis/internal/peer"
	"github.com/trellis-go/trellis/runtime"
)

// DurableProducer sends messages reliably from a service's own code (an
// endpoint, a timed action, an entity's caller) on every instance: the
// producer of one producer id, whose durable queue lives in the service's
// store. On several instances one of them owns the queue at a time (see
// DurableQueue); Send on any other instance hands the message to the
// owner over the cluster transport and returns once the owner stored it.
// When the owner stops or dies, another instance takes the queue over
// (at once after a graceful stop, once the owner's lease lapses after a
// crash) and sends what was unconfirmed; a Send meanwhile waits for the
// new owner, within its context.
//
// Connect the consumer side to Controller on every instance: the owner's
// controller is the one that delivers. With the cluster mode off
// (TRELLIS_CLUSTER_ADDR=off) there is no transport between the instances:
// Send on one that does not own the queue waits until it does.
// Send reads the queue's owner from the store (one round trip) each time.
// A hand-over to the owner that broke off with no answer (a cut
// connection) is made again, under the same id: an owner that took it
// already answers with its sequence number and stores it once; one that
// died meanwhile may have stored it, and then it is sent twice, as after
// any crash.
type DurableProducer[A any] struct {
	id     string
	local  *delivery.Producer[A]
	codec  durable.Codec[A]
	queue  *redisqueue.Queue[A] // nil with the embedded store
	hand   *assembly.Handovers  // nil without a cluster transport: Send is local
	holder string               // this instance's name as the queue's holder
	sends  *rememberedSends     // as the owner: the sends other instances handed over
}

// DurableQueue returns the durable producer queue of producerID for a
// producer controller of the service (delivery.WithDurableQueue): in the
// service's Redis, under its key prefix (redisqueue.ForService), owned by
// one producer controller at a time across the service's instances; with
// the embedded store, in memory (durable.NewMemory: it does not outlive
// the process). codec encodes whole messages (nil: JSON).
func DurableQueue[A any](h *Host, producerID string, codec durable.Codec[A]) (durable.Queue[A], error) {
	if h.Redis == nil {
		return durable.NewMemory[A](), nil
	}
	q, err := redisqueue.ForService(h.Redis, h.Config.RedisPrefix, producerID, codec)
	if err != nil {
		return nil, fmt.Errorf("trellis: durable queue of producer %q: %w", producerID, err)
	}
	return q, nil
}

// NewDurableProducer starts, on h's actor system, the producer controller
// of producerID (named producerID) with its durable queue in the
// service's store (DurableQueue), and the handle behind Send. codec
// encodes whole messages, in the queue and on the way to the owner (nil:
// JSON). Call it during setup, once per producer id.
func NewDurableProducer[A any](h *Host, producerID string, settings delivery.ProducerSettings, codec durable.Codec[A]) (*DurableProducer[A], error) {
	if codec == nil {
		codec = durable.JSON[A]{}
	}
	p := &DurableProducer[A]{id: producerID, codec: codec}
	var queue durable.Queue[A] = durable.NewMemory[A]()
	if h.Redis != nil {
		var opts []redisqueue.Option
		if hs := h.parts.Handovers; hs != nil {
			p.hand, p.holder = hs, hs.Holder()
			p.sends = newRememberedSends(maxRememberedSends)
			opts = append(opts, redisqueue.WithHolder(p.holder))
		}
		q, err := redisqueue.ForService(h.Redis, h.Config.RedisPrefix, producerID, codec, opts...)
		if err != nil {
			return nil, fmt.Errorf("trellis: durable producer %q: %w", producerID, err)
		}
		p.queue, queue = q, q
	}
	local, err := delivery.NewProducer[A](h.System, producerID, producerID, settings, delivery.WithDurableQueue(queue))
	if err != nil {
		return nil, fmt.Errorf("trellis: durable producer %q: %w", producerID, err)
	}
	p.local = local
	if p.hand != nil {
		if err := p.hand.Add(producerID, p.receive); err != nil {
			return nil, fmt.Errorf("trellis: durable producer %q: %w", producerID, err)
		}
	}
	return p, nil
}

// Controller returns the producer controller, to connect consumer
// controllers to (delivery.RegisterToProducerController).
func (p *DurableProducer[A]) Controller() runtime.Ref[delivery.ProducerCommand[A]] {
	return p.local.Controller()
}

// Err returns nil while this instance's producer controller runs, and an
// error wrapping delivery.ErrProducerStopped once it stopped: for a
// readiness check.
func (p *DurableProducer[A]) Err() error { return p.local.Err() }

// Send stores msg in the queue, through whichever instance owns it, and
// returns its sequence number once it is stored: from then on it is sent
// at least once, whatever happens to either instance. It waits at most
// until ctx ends; then, when msg was not handed over anywhere, the error
// wraps ctx's and delivery.ErrNotSent (sending it again sends it once).
// An error wrapping components.ErrOutcomeUnknown says a hand-over got no
// answer: it may still be stored and sent. An error wrapping
// components.ErrUnavailable alone says the store did not answer (nothing
// sent).
func (p *DurableProducer[A]) Send(ctx context.Context, msg A) (delivery.SeqNr, error) {
	if p.hand == nil {
		return p.local.Send(ctx, msg)
	}
	body, err := p.codec.Encode(msg)
	if err != nil {
		return 0, fmt.Errorf("trellis: durable producer %q: encode: %w", p.id, err)
	}
	arg, err := json.Marshal(forwardedSend{Msg: body, ID: uuid.NewString()})
	if err != nil {
		return 0, fmt.Errorf("trellis: durable producer %q: encode: %w", p.id, err)
	}
	// maybe is the error of an attempt that may have stored the message:
	// once there is one, a later failure is reported as that (outcome
	// unknown), never as not sent.
	var maybe error
	fail := func(err error) (delivery.SeqNr, error) {
		if maybe != nil {
			return 0, fmt.Errorf("%w; then: %v", maybe, err)
		}
		return 0, err
	}
	for wait := sendRetryMin; ; wait = min(2*wait, sendRetryMax) {
		holder, held, err := p.queue.Holder(ctx)
		if err != nil {
			return fail(fmt.Errorf("trellis: durable producer %q: %w: %w", p.id, components.ErrUnavailable, err))
		}
		switch {
		case holder == p.holder || held && holder == "":
			// This instance owns the queue, or an owner that cannot be
			// reached (it recorded no address) does: this instance's
			// controller sends, or stands by until it owns the queue.
			seqNr, err := p.local.Send(ctx, msg)
			if err != nil {
				return fail(err)
			}
			return seqNr, nil
		case held:
			_, addr, _ := strings.Cut(holder, " ")
			seqNr, err := p.sendThrough(ctx, addr, arg)
			switch {
			case err == nil:
				return seqNr, nil
			case errors.Is(err, components.ErrOutcomeUnknown):
				// No answer: make it again (the owner knows it by its
				// id), while there is time.
				maybe = err
				if ctx.Err() != nil {
					return 0, err
				}
			case !errors.Is(err, delivery.ErrNotSent): // not taken: look again
				return fail(err)
			}
		}
		// Nobody owns the queue (a standby takes it within a tenth of
		// the lease), or the owner did not take the message: look again.
		if err := sleepCtx(ctx, wait); err != nil {
			return fail(fmt.Errorf("trellis: durable producer %q: no owner took the message: %w: %w", p.id, delivery.ErrNotSent, err))
		}
	}
}

// The waits between attempts to find the queue's owner.
const (
	sendRetryMin = 20 * time.Millisecond
	sendRetryMax = 500 * time.Millisecond
)

// sendThrough hands the message to the owner at addr. An error wrapping
// delivery.ErrNotSent means it did not take it (it is not the owner any
// more, could not be reached, or its controller stopped).
func (p *DurableProducer[A]) sendThrough(ctx context.Context, addr string, arg json.RawMessage) (delivery.SeqNr, error) {
	reply, err := p.hand.Forward(ctx, addr, p.id, arg)
	switch {
	case err == nil:
		var r forwardedSent
		if err := json.Unmarshal(reply.Value, &r); err != nil {
			return 0, fmt.Errorf("trellis: durable producer %q: the owner's answer: %w", p.id, err)
		}
		return r.SeqNr, nil
	case errors.Is(err, peer.ErrOutcomeUnknown), errors.Is(err, peer.ErrDeadline), errors.Is(err, peer.ErrCanceled):
		return 0, fmt.Errorf("trellis: durable producer %q: send through %s: %w: %w", p.id, addr, components.ErrOutcomeUnknown, err)
	case errors.Is(err, peer.ErrMoved), errors.Is(err, peer.ErrUnavailable):
		return 0, fmt.Errorf("trellis: durable producer %q: send through %s: %w: %w", p.id, addr, delivery.ErrNotSent, err)
	}
	return 0, fmt.Errorf("trellis: durable producer %q: send through %s: %w", p.id, addr, err)
}

// receive takes a message another instance sends through this one, when
// this one owns the queue.
func (p *DurableProducer[A]) receive(ctx context.Context, arg json.RawMessage) (json.RawMessage, error) {
	holder, _, err := p.queue.Holder(ctx)
	if err != nil {
		return nil, peer.NewError(peer.KindUnavailable, "store_unavailable", "producer %q: the store did not answer", p.id)
	}
	if holder != p.holder {
		return nil, peer.NewError(peer.KindMoved, "not_owner", "producer %q: this instance does not own the queue", p.id)
	}
	var in forwardedSend
	if err := json.Unmarshal(arg, &in); err != nil {
		return nil, peer.NewError(peer.KindBadRequest, "bad_message", "producer %q: %v", p.id, err)
	}
	msg, err := p.codec.Decode(in.Msg)
	if err != nil {
		return nil, peer.NewError(peer.KindBadRequest, "bad_message", "producer %q: decode: %v", p.id, err)
	}
	// The send goes on if the caller's connection breaks, within its
	// deadline, so that the caller's next attempt finds it stored.
	sendCtx, cancel := detach(ctx, sendDetachedMax)
	defer cancel()
	seqNr, err := p.sends.do(ctx, in.ID, func() (delivery.SeqNr, error) { return p.local.Send(sendCtx, msg) })
	switch {
	case notStored(err):
		return nil, peer.NewError(peer.KindUnavailable, "not_sent", "producer %q: not sent here", p.id)
	case err != nil:
		return nil, entityhost.ToPeer(err) // stored or not, as far as this instance knows, travels as such
	}
	return json.Marshal(forwardedSent{SeqNr: seqNr})
}

// forwardedSend and forwardedSent are a send to the owner and its answer.
type (
	forwardedSend struct {
		Msg []byte `json:"msg"`          // the codec's bytes
		ID  string `json:"id,omitempty"` // the same on every attempt of one Send
	}
	forwardedSent struct {
		SeqNr delivery.SeqNr `json:"seqNr"`
	}
)

// sendDetachedMax bounds a handed-over send whose caller gave no deadline.
const sendDetachedMax = 30 * time.Second

// detach is a context that keeps ctx's values and deadline (at most max
// from now) but not its cancellation.
func detach(ctx context.Context, max time.Duration) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(max)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}

// sleepCtx waits d, or until ctx ends (then its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
