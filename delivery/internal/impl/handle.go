package impl

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/internal/tracing"
	"github.com/trellis-go/trellis/runtime"
)

// ErrProducerStopped is wrapped by the error of Send once the producer
// controller behind a [Producer] has stopped (it failed, or its system
// shut down); [Producer.Err] says so from then on.
var ErrProducerStopped = errors.New("delivery: producer controller stopped")

// ErrNotSent is wrapped by the error of a Send that ended before the
// message was handed to the producer controller: it will never be sent,
// and sending it again sends it once.
var ErrNotSent = errors.New("delivery: not sent")

// Producer is a handle on a producer controller for code that is not an
// actor: an HTTP endpoint, a timed action, an entity's command. [Send]
// waits for the consumer's demand and hands the message over; it is safe
// for concurrent use, and concurrent sends go out in the order they were
// taken (one at a time, each on a RequestNext). The handle is the
// controller's producer: do not send it a [ProducerStart] of your own.
type Producer[A any] struct {
	pc      runtime.Ref[ProducerCommand[A]]
	ref     runtime.Ref[handleCommand[A]]
	durable bool
	done    chan struct{} // closed once the controller stopped

	mu  sync.Mutex
	err error
}

// NewProducer spawns, under on, a producer controller named name for
// producerID (as [SpawnProducerController] does) and the actor behind the
// handle (named name + "-handle"), and returns the handle. Connect a
// consumer controller to [Producer.Controller] as with any producer
// controller.
func NewProducer[A any](on runtime.Spawner, name, producerID string, settings ProducerSettings, opts ...ProducerOption[A]) (*Producer[A], error) {
	cfg, err := newProducerConfig(producerID, settings, opts)
	if err != nil {
		return nil, err
	}
	pc, err := SpawnProducerController[A](on, name, producerID, settings, opts...)
	if err != nil {
		return nil, err
	}
	p := &Producer[A]{pc: pc, durable: cfg.queue != nil, done: make(chan struct{})}
	p.ref, err = runtime.Spawn(on, name+"-handle", func() runtime.Behavior[handleCommand[A]] { return &handleActor[A]{p: p, id: producerID} })
	if err != nil {
		return nil, fmt.Errorf("delivery: producer %q: spawn its handle: %w", producerID, err)
	}
	return p, nil
}

// Controller returns the producer controller, to connect consumer
// controllers to ([RegisterToProducerController]).
func (p *Producer[A]) Controller() runtime.Ref[ProducerCommand[A]] { return p.pc }

// Send hands msg to the producer controller as soon as the consumer has
// demand for it, and returns its sequence number: without a durable queue
// once it is handed over (sent), with one once it is stored, so that it
// survives the process. It waits at most until ctx ends; then the error
// wraps ctx's and says whether msg was left unsent (it was still waiting
// for demand: it will never be sent, and the error wraps [ErrNotSent]) or
// was handed over and may still be stored and sent. Once the controller
// stopped, Send returns an error wrapping [ErrProducerStopped]. With a
// durable queue that another process owns (see durable.Owned), the
// controller stands by and Send waits; trellis.NewProducer sends through
// the owner instead.
func (p *Producer[A]) Send(ctx context.Context, msg A) (SeqNr, error) {
	if err := p.Err(); err != nil {
		return 0, err
	}
	s := &pendingSend[A]{msg: msg, ctx: ctx, result: make(chan sendResult, 1)}
	p.ref.Tell(s)
	select {
	case r := <-s.result:
		return r.seqNr, r.err
	case <-p.done:
		select {
		case r := <-s.result:
			return r.seqNr, r.err
		default:
			return 0, p.Err()
		}
	case <-ctx.Done():
	}
	removed := make(chan bool, 1)
	p.ref.Tell(cancelSend[A]{s: s, removed: removed})
	select {
	case r := <-s.result: // it came meanwhile
		return r.seqNr, r.err
	case ok := <-removed:
		if ok {
			return 0, fmt.Errorf("delivery: send: %w (no demand in time): %w", ErrNotSent, ctx.Err())
		}
		return 0, fmt.Errorf("delivery: send: handed over, not yet known to be stored: %w", ctx.Err())
	case <-p.done:
		return 0, p.Err()
	}
}

// Err returns nil while the producer controller runs, and an error
// wrapping ErrProducerStopped once it stopped: for a readiness check.
func (p *Producer[A]) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Done is closed once the producer controller stopped.
func (p *Producer[A]) Done() <-chan struct{} { return p.done }

type sendResult struct {
	seqNr SeqNr
	err   error
}

// pendingSend is a Send waiting for demand, or for its store.
type pendingSend[A any] struct {
	msg    A
	ctx    context.Context // the Send's: the parent of its span
	result chan sendResult
	// With tracing, the send's span, open until the result, and its
	// context, carried by the message.
	span  trace.Span
	trace string
}

// finish gives the Send its result and ends its span.
func (s *pendingSend[A]) finish(r sendResult) {
	s.result <- r
	if s.span != nil {
		errType := ""
		if r.err != nil {
			errType = "stopped"
		}
		tracing.End(s.span, errType)
	}
}

type (
	handleCommand[A any] interface{ handleCommand(A) }
	cancelSend[A any]    struct {
		s       *pendingSend[A]
		removed chan bool
	}
	handleNext[A any]   struct{ next RequestNext[A] }
	handleStored[A any] struct{ seqNr SeqNr }
)

func (*pendingSend[A]) handleCommand(A) {}
func (cancelSend[A]) handleCommand(A)   {}
func (handleNext[A]) handleCommand(A)   {}
func (handleStored[A]) handleCommand(A) {}

// handleActor is the producer behind a Producer: it holds the sends that
// wait for demand, in order, and hands one over on each RequestNext.
type handleActor[A any] struct {
	p       *Producer[A]
	waiting []*pendingSend[A] // for demand
	storing []*pendingSend[A] // handed over, their store's reply to come, in order
	next    *RequestNext[A]   // unused demand
	stored  runtime.Ref[SeqNr]
	tracer  trace.Tracer // nil: tracing off
	id      string       // the producer id, naming the send spans
}

func (h *handleActor[A]) OnSignal(ctx *runtime.Context[handleCommand[A]], sig runtime.Signal) {
	switch s := sig.(type) {
	case runtime.Started:
		h.tracer = ctx.System().Tracer()
		ctx.Watch(h.p.pc)
		h.stored = runtime.MessageAdapter(ctx, func(n SeqNr) handleCommand[A] { return handleStored[A]{seqNr: n} })
		h.p.pc.Tell(ProducerStart[A]{Producer: runtime.MessageAdapter(ctx, func(n RequestNext[A]) handleCommand[A] { return handleNext[A]{next: n} })})
	case runtime.Terminated:
		if s.Ref.Path() == h.p.pc.Path() {
			_ = ctx.Stop(ctx.Self())
		}
	case runtime.Stopped:
		h.p.mu.Lock()
		h.p.err = fmt.Errorf("%w: %s", ErrProducerStopped, h.p.pc.Path())
		h.p.mu.Unlock()
		for _, s := range append(h.waiting, h.storing...) {
			s.finish(sendResult{err: fmt.Errorf("delivery: send: %w", h.p.err)})
		}
		close(h.p.done)
	}
}

func (h *handleActor[A]) Receive(_ *runtime.Context[handleCommand[A]], msg handleCommand[A]) {
	switch m := msg.(type) {
	case *pendingSend[A]:
		if h.tracer != nil {
			var sctx context.Context
			sctx, m.span = tracing.StartSend(m.ctx, h.tracer, h.id)
			m.trace = tracing.Capture(sctx)
		}
		m.ctx = nil
		h.waiting = append(h.waiting, m)
	case handleNext[A]:
		h.next = &m.next
	case handleStored[A]:
		if len(h.storing) > 0 {
			h.storing[0].finish(sendResult{seqNr: m.seqNr})
			h.storing = h.storing[1:]
		}
	case cancelSend[A]:
		for i, s := range h.waiting {
			if s == m.s {
				h.waiting = append(h.waiting[:i], h.waiting[i+1:]...)
				if s.span != nil {
					tracing.End(s.span, "not sent")
				}
				m.removed <- true
				return
			}
		}
		m.removed <- false
	}
	h.handOver()
}

// handOver gives the oldest waiting send the demand there is.
func (h *handleActor[A]) handOver() {
	if h.next == nil || len(h.waiting) == 0 {
		return
	}
	s, next := h.waiting[0], h.next
	h.waiting, h.next = h.waiting[1:], nil
	if !h.p.durable {
		h.tell(next, s, nil)
		s.finish(sendResult{seqNr: next.CurrentSeqNr})
		return
	}
	h.storing = append(h.storing, s)
	h.tell(next, s, h.stored)
}

// tell hands s's message to the controller on next, with an ask to
// replyTo when it is not nil, and with its trace context when it has one.
func (h *handleActor[A]) tell(next *RequestNext[A], s *pendingSend[A], replyTo runtime.Ref[SeqNr]) {
	switch {
	case s.trace != "":
		h.p.pc.Tell(&outgoing[A]{sm: SequencedMessage[A]{Message: s.msg, TraceContext: s.trace}, replyTo: replyTo})
	case replyTo != nil:
		next.AskNextTo.Tell(MessageWithConfirmation[A]{Message: s.msg, ReplyTo: replyTo})
	default:
		next.SendNextTo.Tell(s.msg)
	}
}
