package workpulling

// The work-pulling producer controller: one producer, any number of
// workers that come and go. Its protocol and behavior are here; the
// workers (discovery, demand, routing, hand-over) are in workers.go, its
// durable queue in durable.go, and what it shares with the sharding
// producer controller in delivery/internal/pattern.

import (
	"context"
	"fmt"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/controller"
	"github.com/trellis-go/trellis/delivery/internal/durablecalls"
	"github.com/trellis-go/trellis/delivery/internal/impl"
	"github.com/trellis-go/trellis/delivery/internal/pattern"
	"github.com/trellis-go/trellis/delivery/internal/ring"
	"github.com/trellis-go/trellis/internal/tracing"
	"github.com/trellis-go/trellis/runtime"
)

// Command is what a work-pulling producer controller handles:
// [Start] and [GetWorkerStats]. The producer's messages reach it
// through the refs of [RequestNext].
type Command[A any] interface{ command(A) }

// Start connects the producer to its work-pulling producer
// controller, which answers with a [RequestNext] when some
// worker has demand. Sending it again (after a producer restart) moves the
// flow to the new producer. The producer must be local to its controller,
// as for [delivery.ProducerStart]: any other makes the controller stop with
// [delivery.ErrNotLocal].
type Start[A any] struct {
	Producer runtime.Ref[RequestNext[A]]
}

// RequestNext allows the producer to send one message: to
// SendNextTo, or wrapped in a [delivery.MessageWithConfirmation] to AskNextTo. The
// message goes to a worker with demand, chosen at random. The reply of an
// ask is the controller's sequence number of the message (its own
// numbering, not a worker's), sent once the worker confirmed it or, with a
// durable queue, once it is stored.
type RequestNext[A any] struct {
	SendNextTo runtime.Ref[A]
	AskNextTo  runtime.Ref[delivery.MessageWithConfirmation[A]]
	// traced is the controller, when its System traces: SendContext and
	// AskContext hand it the message with its trace context.
	traced runtime.Ref[Command[A]]
}

// SendContext sends msg as SendNextTo does, carrying the trace context
// of ctx's span when the controller's System traces, as
// delivery.RequestNext.SendContext does.
func (r RequestNext[A]) SendContext(ctx context.Context, msg A) {
	if tc := r.capture(ctx); tc != "" {
		r.traced.Tell(&wpEntry[A]{msg: msg, trace: tc})
		return
	}
	r.SendNextTo.Tell(msg)
}

// AskContext sends msg with a confirmation to replyTo, as AskNextTo does,
// carrying the trace context of ctx's span as SendContext does.
func (r RequestNext[A]) AskContext(ctx context.Context, msg A, replyTo runtime.Ref[delivery.SeqNr]) {
	if tc := r.capture(ctx); tc != "" {
		r.traced.Tell(&wpEntry[A]{msg: msg, replyTo: replyTo, trace: tc})
		return
	}
	r.AskNextTo.Tell(delivery.MessageWithConfirmation[A]{Message: msg, ReplyTo: replyTo})
}

// capture is the trace context of ctx to carry: "" when the controller's
// System does not trace or ctx holds no span.
func (r RequestNext[A]) capture(ctx context.Context) string {
	if r.traced == nil {
		return ""
	}
	return tracing.Capture(ctx)
}

// GetWorkerStats asks a work-pulling producer controller for its
// [WorkerStats].
type GetWorkerStats[A any] struct {
	ReplyTo runtime.Ref[WorkerStats]
}

// WorkerStats describe a work-pulling producer controller's workers.
type WorkerStats struct {
	// NumberOfWorkers is how many workers are registered under the key.
	NumberOfWorkers int
	// WorkersWithDemand is how many of them may be sent a message now.
	WorkersWithDemand int
	// Buffered is how many messages wait for a worker with demand.
	Buffered int
	// Unconfirmed is how many messages workers have not yet confirmed, as
	// far as the controller knows: it hears of confirmations with the
	// workers' flow-control requests (every half window, or when a worker
	// idles), or at once for a message the producer asked about.
	Unconfirmed int
}

func (Start[A]) command(A)          {}
func (GetWorkerStats[A]) command(A) {}

// NewProducerController validates the settings and returns the
// factory of a work-pulling producer controller for producerID, to give to
// runtime.Spawn. Prefer [SpawnProducerController], which also
// makes it stop, rather than restart empty, if it fails.
//
// The controller finds its workers by subscribing to the receptionist
// under key: a worker registers its consumer controller there
// (runtime.Register) and deregisters, or stops, to leave. For each worker
// the controller runs a producer controller of its own (producer id
// producerID-UUID) connected to the worker's consumer controller, and
// tracks its demand; each message goes to a random worker with demand and
// is kept until that worker confirms it. The messages a worker leaves
// unconfirmed go to other workers, so a message may be processed twice,
// never lost: delivery is at least once.
//
// With a durable queue ([delivery.WithDurableQueue]) every message is stored, with
// the worker it goes to as its qualifier, before it is sent; a new
// controller with the same producer id sends every unconfirmed message
// again, to the workers there are then.
func NewProducerController[A any](producerID string, key runtime.ServiceKey[delivery.ConsumerCommand[A]], settings Settings,
	opts ...delivery.ProducerOption[A]) (func() runtime.Behavior[Command[A]], error) {
	s, err := settings.validate()
	if err != nil {
		return nil, fmt.Errorf("work-pulling producer controller %q: %w", producerID, err)
	}
	cfg, err := impl.NewPatternProducer(producerID, s.Producer, opts)
	if err != nil {
		return nil, fmt.Errorf("work-pulling %w", err)
	}
	return func() runtime.Behavior[Command[A]] { return newWorkPulling(cfg, key, s.BufferSize) }, nil
}

// SpawnProducerController spawns a work-pulling producer
// controller under on, named name. It stops if it fails.
func SpawnProducerController[A any](on runtime.Spawner, name, producerID string, key runtime.ServiceKey[delivery.ConsumerCommand[A]],
	settings Settings, opts ...delivery.ProducerOption[A]) (runtime.Ref[Command[A]], error) {
	factory, err := NewProducerController(producerID, key, settings, opts...)
	if err != nil {
		return nil, err
	}
	return controller.Spawn(on, name, fmt.Sprintf("work-pulling producer controller %q", producerID), factory)
}

// wpEntry is one message of the producer, from its arrival until a worker
// confirms it. It is also the message by which the SendNextTo and AskNextTo
// adapters hand it to the controller.
type wpEntry[A any] struct {
	msg     A
	replyTo runtime.Ref[delivery.SeqNr] // the producer's ask, until it is answered
	seqNr   delivery.SeqNr              // the controller's number: when it arrived, or, durable, when it was stored
	// stored says that the message is in the durable queue under seqNr
	// and qualifier. Sent to another worker, it is stored again there
	// first, and only then confirmed here.
	stored    bool
	qualifier string
	trace     string // the send's trace context, "" when untraced
	// replayed says that the message was loaded from the durable queue:
	// an earlier controller of the queue sent it, or was about to.
	replayed bool
}

func (*wpEntry[A]) command(A) {}

// wpDurable is the outcome of a durable queue call, its deadline or its
// backoff.
type wpDurable[A any] struct{ durablecalls.Msg[A] }

func (wpDurable[A]) command(A) {}

// workPulling is the work-pulling producer controller's behavior and state.
type workPulling[A any] struct {
	pattern.Controller[A, Command[A], RequestNext[A]]
	key        runtime.ServiceKey[delivery.ConsumerCommand[A]]
	bufferSize int
	sendNext   runtime.Ref[A]
	askNext    runtime.Ref[delivery.MessageWithConfirmation[A]]
	traced     runtime.Ref[Command[A]] // self when the System traces

	workers   map[runtime.Ref[delivery.ConsumerCommand[A]]]*worker[A]
	demand    pattern.DemandSet[*worker[A]] // the workers with demand
	handovers ring.Ring[*wpEntry[A]]        // messages of workers that left, oldest first
	buffer    ring.Ring[*wpEntry[A]]        // messages from the producer that wait for demand

	storingE *wpEntry[A] // the message being stored, and its worker
	storingW *worker[A]
}

func newWorkPulling[A any](cfg *impl.PatternProducer[A], key runtime.ServiceKey[delivery.ConsumerCommand[A]], bufferSize int) *workPulling[A] {
	return &workPulling[A]{
		Controller: pattern.NewController[A, Command[A], RequestNext[A]]("work-pulling", cfg),
		key:        key,
		bufferSize: bufferSize,
		workers:    make(map[runtime.Ref[delivery.ConsumerCommand[A]]]*worker[A]),
	}
}

func (p *workPulling[A]) OnSignal(ctx *runtime.Context[Command[A]], sig runtime.Signal) {
	switch sig.(type) {
	case runtime.Started:
		p.Started(ctx, ctx.Log().With("producerId", p.Cfg.ID, "serviceKey", p.key.ID()),
			func(m durablecalls.Msg[A]) Command[A] { return wpDurable[A]{m} })
		if ctx.System().Tracer() != nil {
			p.traced = ctx.Self()
		}
		p.sendNext = runtime.DirectAdapter(ctx, func(m A) Command[A] { return &wpEntry[A]{msg: m} })
		p.askNext = runtime.DirectAdapter(ctx, func(m delivery.MessageWithConfirmation[A]) Command[A] {
			return &wpEntry[A]{msg: m.Message, replyTo: m.ReplyTo}
		})
		runtime.Subscribe(ctx.System(), p.key, runtime.MessageAdapter(ctx, func(l runtime.Listing[delivery.ConsumerCommand[A]]) Command[A] {
			return wpListing[A]{refs: l.Refs}
		}))
	case runtime.Stopped, runtime.Restarting:
		p.Stopped()
	}
}

func (p *workPulling[A]) Receive(ctx *runtime.Context[Command[A]], msg Command[A]) {
	if p.Failed {
		return
	}
	switch m := msg.(type) {
	case *wpEntry[A]:
		p.onMessage(m)
	case wpWorkerNext[A]:
		p.onWorkerDemand(m.w)
	case wpConfirmed[A]:
		p.onWorkerConfirmed(m.w)
	case wpListing[A]:
		p.onListing(m.refs)
	case wpChildStopped[A]:
		if !m.w.gone {
			p.Fail(fmt.Errorf("the producer controller of worker %s stopped: it failed (see its error)", m.w.cc.Path()))
		}
	case Start[A]:
		p.OnStart("workpulling.Start", m.Producer, p.sendRequestNext, p.maybeRequestNext)
	case GetWorkerStats[A]:
		p.onStats(m)
	case wpDurable[A]:
		p.OnDurable(m.Msg, p.onLoaded, p.onStored)
	}
}

func (p *workPulling[A]) onStats(m GetWorkerStats[A]) {
	if m.ReplyTo == nil {
		return
	}
	unconfirmed := 0
	for _, w := range p.workers {
		unconfirmed += w.unconfirmed.Len()
	}
	m.ReplyTo.Tell(WorkerStats{
		NumberOfWorkers:   len(p.workers),
		WorkersWithDemand: len(p.demand),
		Buffered:          p.buffer.Len() + p.handovers.Len(),
		Unconfirmed:       unconfirmed,
	})
}

// onMessage takes a message from the producer: to a worker with demand at
// once, or into the buffer until one has.
func (p *workPulling[A]) onMessage(e *wpEntry[A]) {
	p.Requested = false
	if p.Dq == nil {
		e.seqNr = p.CurrentSeqNr
		p.CurrentSeqNr++
	}
	if !p.canRoute() || p.handovers.Len() > 0 || p.buffer.Len() > 0 {
		if p.buffer.Len() >= p.bufferSize {
			p.Fail(fmt.Errorf("%w: %d messages wait for a worker with demand (workpulling.Settings.BufferSize); the producer must wait for RequestNext",
				ErrBufferFull, p.buffer.Len()))
			return
		}
		p.buffer.Push(e)
		return
	}
	p.route(e)
	p.maybeRequestNext()
}

// canRoute reports whether a message can go to a worker now.
func (p *workPulling[A]) canRoute() bool { return p.Loaded && len(p.demand) > 0 && !p.Storing() }

// dispatch sends waiting messages, those of workers that left first, to
// workers with demand, then asks the producer for more if it may send.
func (p *workPulling[A]) dispatch() {
	for p.canRoute() {
		switch {
		case p.handovers.Len() > 0:
			p.route(p.handovers.Pop())
		case p.buffer.Len() > 0:
			p.route(p.buffer.Pop())
		default:
			p.maybeRequestNext()
			return
		}
	}
	p.maybeRequestNext()
}

// maybeRequestNext gives the producer permission for one more message
// when a worker has demand and nothing is waiting for one.
func (p *workPulling[A]) maybeRequestNext() {
	if p.Producer == nil || p.Requested || p.Failed || !p.canRoute() || p.handovers.Len() > 0 || p.buffer.Len() > 0 {
		return
	}
	p.Requested = true
	p.sendRequestNext()
}

func (p *workPulling[A]) sendRequestNext() {
	p.Producer.Tell(RequestNext[A]{SendNextTo: p.sendNext, AskNextTo: p.askNext, traced: p.traced})
}
