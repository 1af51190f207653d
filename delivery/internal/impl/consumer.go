package impl

// The consumer controller: it takes the producer controller's messages in
// order, drops duplicates, asks for lost ones and for more within its
// window, joins chunks, and delivers to the consumer one at a time.

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/delivery/internal/controller"
	"github.com/trellis-go/trellis/delivery/internal/ring"
	"github.com/trellis-go/trellis/delivery/internal/slab"
	"github.com/trellis-go/trellis/internal/tracing"
	"github.com/trellis-go/trellis/runtime"
)

// ConsumerOption configures a consumer controller beyond its settings.
type ConsumerOption[A any] func(*consumerConfig[A])

// WithConsumerCodec sets the codec that joins chunked messages (default
// [JSONCodec]); its manifest must be the producer controller's.
func WithConsumerCodec[A any](codec Codec[A]) ConsumerOption[A] {
	return func(c *consumerConfig[A]) { c.codec = codec }
}

type consumerConfig[A any] struct {
	settings ConsumerSettings
	codec    Codec[A]
}

// NewConsumerController validates the settings and returns the factory of
// a consumer controller, to give to runtime.Spawn. Prefer
// [SpawnConsumerController], which also makes it stop, rather than restart
// empty, if it fails.
//
// The controller delivers to the consumer of [ConsumerStart], one message
// at a time, what the producer controller it is connected to sends
// ([RegisterToProducerController], or the producer controller's
// [RegisterConsumer]). It drives the flow: it asks for at most
// FlowControlWindow messages ahead, detects lost ones by their sequence
// numbers and asks for them again, and drops duplicates.
func NewConsumerController[A any](settings ConsumerSettings, opts ...ConsumerOption[A]) (func() runtime.Behavior[ConsumerCommand[A]], error) {
	cfg, err := newConsumerConfig(settings, opts)
	if err != nil {
		return nil, err
	}
	return func() runtime.Behavior[ConsumerCommand[A]] { return &consumer[A]{cfg: cfg} }, nil
}

func newConsumerConfig[A any](settings ConsumerSettings, opts []ConsumerOption[A]) (*consumerConfig[A], error) {
	s, err := settings.validate()
	if err != nil {
		return nil, fmt.Errorf("consumer controller: %w", err)
	}
	cfg := &consumerConfig[A]{settings: s, codec: JSONCodec[A]{}}
	for _, o := range opts {
		o(cfg)
	}
	if isNil(cfg.codec) {
		return nil, fmt.Errorf("consumer controller: %w: the codec is nil", ErrInvalidSettings)
	}
	return cfg, nil
}

// SpawnConsumerController spawns a consumer controller under on, named
// name, that stops if it fails.
func SpawnConsumerController[A any](on runtime.Spawner, name string, settings ConsumerSettings, opts ...ConsumerOption[A]) (runtime.Ref[ConsumerCommand[A]], error) {
	factory, err := NewConsumerController(settings, opts...)
	if err != nil {
		return nil, err
	}
	return controller.Spawn(on, name, "consumer controller", factory)
}

// confirmOf is a Confirmed as the controller gets it: the number of the
// Delivery it confirms. Only the outstanding Delivery's number counts, so
// a stale confirmation (a second one of a Delivery that came again, or a
// first one called late) can never confirm another Delivery. It is sent by
// pointer, from a slab: a boxed uint64 would allocate for each Delivery.
type confirmOf[A any] struct{ delivery uint64 }
type retryTick[A any] struct{}
type retryKey struct{}
type consumerTerminated[A any] struct{ ref runtime.AnyRef }

func (*confirmOf[A]) consumerCommand(A)         {}
func (retryTick[A]) consumerCommand(A)          {}
func (consumerTerminated[A]) consumerCommand(A) {}

// consumer is the consumer controller's behavior and state.
type consumer[A any] struct {
	cfg       *consumerConfig[A]
	ctx       *runtime.Context[ConsumerCommand[A]]
	self      runtime.Ref[ConsumerCommand[A]]
	log       *slog.Logger
	confirmTo runtime.Ref[Confirmed]
	confirms  slab.Slab[confirmOf[A]]
	acks      slab.Slab[Ack[A]] // sent by pointer: boxing a value would allocate each
	deliverTo runtime.Ref[Delivery[A]]

	// The association with a producer controller.
	associated  bool
	pc          runtime.Ref[ProducerCommand[A]]
	producerID  string
	incarnation uint64
	association uint64 // the producer controller's association with this one
	generation  uint64 // the producer controller's (see SequencedMessage.Generation)
	askedFirst  bool   // sent Resend(0) to pc, a producer controller not yet known

	receivedSeqNr  SeqNr // the last message taken in order
	confirmedSeqNr SeqNr // the last whole message confirmed by the consumer
	requestedSeqNr SeqNr // the demand given to the producer controller
	resendingFrom  SeqNr // > 0: asked for a resend from here; drop all else

	stash  ring.Ring[*SequencedMessage[A]] // taken in order, not yet delivered
	chunks assembly

	// The Delivery out to the consumer.
	outstanding    bool
	out            Delivery[A]
	outFirst       bool
	outAck         bool
	outIncarnation uint64
	outSpan        trace.Span    // the outstanding Delivery's span, when traced
	tracer         trace.Tracer  // nil: tracing off
	deliveries     uint64        // Deliveries made: the outstanding one's number
	stalledOf      uint64        // the delivery the stall time is for
	stalled        time.Duration // how long it has been outstanding, in retry ticks

	// idleTo, when set (a sharded entity's consumer controller), hears
	// each time the controller holds nothing (no Delivery out, nothing
	// stashed) after it handled more SequencedMessages: see ccIdle.
	idleTo       runtime.Ref[ConsumerCommand[A]]
	handled      uint64 // SequencedMessages handled
	reportedIdle uint64 // handled, as of the last ccIdle

	registering   runtime.Ref[ProducerCommand[A]] // RegisterConsumer sent, no message yet
	registration  uint64                          // the number of its RegisterConsumer
	stopping      bool                            // DeliverThenStop
	failed        bool
	retryInterval time.Duration
	heard         bool  // a SequencedMessage came since the last retry tick
	resendAtTick  SeqNr // resendingFrom at the last retry tick
	undrain       func()
	// drained is set by Drain: nothing more is delivered, so that nothing
	// is confirmed that Drain did not store. drainDone is Drain's, waiting
	// for the Delivery outstanding then to be confirmed.
	drained   bool
	drainDone func()
}

func (c *consumer[A]) OnSignal(ctx *runtime.Context[ConsumerCommand[A]], sig runtime.Signal) {
	switch sig.(type) {
	case runtime.Started:
		c.init(ctx)
		c.registerDrain()
	case runtime.Stopped:
		c.endSpan("stopped")
		if c.undrain != nil {
			c.undrain()
		}
		if c.drainDone != nil {
			c.drainDone()
		}
		// Best effort: let the producer controller drop what was confirmed.
		if c.associated && !c.failed {
			c.sendAck()
		}
	}
}

// sendAck confirms to the producer controller everything up to
// confirmedSeqNr.
func (c *consumer[A]) sendAck() {
	a := c.acks.Get()
	a.ConfirmedSeqNr, a.Association = c.confirmedSeqNr, c.association
	c.pc.Tell(a)
}

func (c *consumer[A]) init(ctx *runtime.Context[ConsumerCommand[A]]) {
	c.ctx, c.self, c.log = ctx, ctx.Self(), ctx.Log()
	c.tracer = ctx.System().Tracer()
	RegisterCodecs[A](ctx.System()) // for a producer controller on another instance
	c.confirmTo = runtime.DirectAdapter(ctx, func(m Confirmed) ConsumerCommand[A] {
		confirm := c.confirms.Get()
		confirm.delivery = m.delivery
		return confirm
	})
	c.retryInterval = c.cfg.settings.ResendIntervalMin
	ctx.Timers().StartPeriodic(retryKey{}, retryTick[A]{}, c.retryInterval)
}

func (c *consumer[A]) Receive(ctx *runtime.Context[ConsumerCommand[A]], msg ConsumerCommand[A]) {
	if c.failed {
		return
	}
	if c.ctx == nil {
		c.init(ctx)
	}
	switch m := msg.(type) {
	case *SequencedMessage[A]:
		c.handled++
		if m != nil {
			c.onSequenced(m)
		}
	case *confirmOf[A]:
		c.onConfirmed(m.delivery)
	case retryTick[A]:
		c.onRetry()
	case ConsumerStart[A]:
		c.onStart(m)
	case RegisterToProducerController[A]:
		c.onRegister(m)
	case drainStage[A]:
		c.onDrain(m)
	case DeliverThenStop[A]:
		c.stopping = true
		c.maybeStop()
	case consumerTerminated[A]:
		if m.ref == runtime.AnyRef(c.deliverTo) {
			c.log.Debug("consumer stopped; stopping its controller")
			_ = ctx.Stop(c.self)
		}
	}
	// While a delivery is out, messages from the producer controller can
	// wait for its confirmation, which runs this actor directly (confirmTo
	// is a DirectAdapter): they need not wake it in between, and they are
	// taken, all that came, once the stash is empty. A controller told to
	// deliver and stop takes them at once: they are part of what it
	// delivers.
	ctx.PostponeWakeups(c.outstanding && !c.stopping)
	if c.idleTo != nil {
		c.reportIdle()
	}
}

func (c *consumer[A]) fail(err error) {
	c.failed = true
	c.undrain() // it takes no more messages
	c.log.Error("consumer controller failed", "producerId", c.producerID, "err", err)
	_ = c.ctx.Stop(c.self)
}

func (c *consumer[A]) onStart(m ConsumerStart[A]) {
	if m.DeliverTo == nil {
		c.log.Error("ConsumerStart without a consumer ref: ignored")
		return
	}
	if err := requireLocal(c.ctx.System(), m.DeliverTo, "ConsumerStart.DeliverTo", "consumer", "consumer controller"); err != nil {
		c.fail(err)
		return
	}
	if c.deliverTo != nil && c.deliverTo != m.DeliverTo {
		c.ctx.Unwatch(c.deliverTo)
	}
	c.deliverTo = m.DeliverTo
	c.ctx.WatchWith(m.DeliverTo, consumerTerminated[A]{ref: m.DeliverTo})
	if c.outstanding {
		// A consumer that starts again (restarted, or replaced) has lost
		// the Delivery it was given: give it again.
		c.stalled = 0
		c.redeliver()
		return
	}
	c.drain()
}

func (c *consumer[A]) onRegister(m RegisterToProducerController[A]) {
	if m.ProducerController == nil {
		c.log.Error("RegisterToProducerController without a producer controller ref: ignored")
		return
	}
	if c.associated && m.ProducerController == c.pc {
		return
	}
	c.registering, c.registration = m.ProducerController, nextRegistration()
	c.register()
}

func (c *consumer[A]) onSequenced(m *SequencedMessage[A]) {
	c.heard = true
	if c.associated && m.Generation < c.generation && m.ProducerID == c.producerID {
		return // from a producer controller replaced by the current one
	}
	if c.registering != nil && m.ProducerController == c.registering {
		c.registering = nil
	}
	if !c.associated || m.Incarnation != c.incarnation {
		switch {
		case m.First || c.cfg.settings.OnlyFlowControl:
			c.adopt(m)
			c.accept(m)
		case !c.associated:
			// A producer controller whose first message was lost: ask it
			// for everything unconfirmed, first marked. Once; the retry
			// timer asks again.
			if !c.askedFirst || c.pc != m.ProducerController {
				c.pc, c.askedFirst, c.association = m.ProducerController, true, m.Association
				c.pc.Tell(Resend[A]{FromSeqNr: 0, Association: m.Association})
			}
		}
		// Otherwise the message is from a producer controller that was
		// replaced, or from a new one before its first message: drop it.
		return
	}
	if m.First && m.Association > c.association {
		// The producer controller started a new association with this
		// consumer controller (it registered again): answer in it.
		c.association = m.Association
	}
	switch expected := c.receivedSeqNr + 1; {
	case m.SeqNr == expected:
		c.accept(m)
	case m.SeqNr > expected:
		switch {
		case m.First:
			c.adopt(m) // the producer controller started over
			c.accept(m)
		case c.cfg.settings.OnlyFlowControl:
			c.accept(m) // lost messages stay lost
		case c.resendingFrom != expected:
			c.resendingFrom = expected
			c.resend(expected)
		}
		// While resending, everything but the expected message is dropped:
		// it comes again after it.
	default:
		// A duplicate. A first one means the producer controller has not
		// heard the Request that confirms it: say it again.
		if m.First {
			c.sendRequest(false)
		}
	}
}

// adopt starts an association at m, the first message of a producer
// controller (or any message without resending).
func (c *consumer[A]) adopt(m *SequencedMessage[A]) {
	if c.associated && c.incarnation != m.Incarnation {
		c.log.Info("new producer controller", "producerId", m.ProducerID, "seqNr", m.SeqNr, "previousProducerId", c.producerID)
		c.stash.Clear() // the old producer controller's: it is gone
		c.chunks.reset()
	}
	c.associated, c.askedFirst, c.resendingFrom = true, false, 0
	c.pc, c.producerID, c.incarnation, c.association = m.ProducerController, m.ProducerID, m.Incarnation, m.Association
	c.generation = m.Generation
	c.receivedSeqNr = m.SeqNr - 1
	c.confirmedSeqNr = m.SeqNr - 1
	c.requestedSeqNr = m.SeqNr - 1 + SeqNr(c.cfg.settings.FlowControlWindow)
	c.pc.Tell(Request[A]{ConfirmedSeqNr: 0, RequestUpToSeqNr: c.requestedSeqNr, SupportResend: !c.cfg.settings.OnlyFlowControl,
		Association: c.association})
}

// resend asks the producer controller for its messages from seqNr from on.
func (c *consumer[A]) resend(from SeqNr) {
	c.pc.Tell(Resend[A]{FromSeqNr: from, Association: c.association})
}

// accept takes m, the next message in order: it is delivered now or
// stashed until the consumer has confirmed the messages before it.
func (c *consumer[A]) accept(m *SequencedMessage[A]) {
	c.receivedSeqNr, c.resendingFrom = m.SeqNr, 0
	if c.outstanding || c.deliverTo == nil || c.stash.Len() > 0 {
		if c.stash.Len() >= c.cfg.settings.FlowControlWindow {
			// More than the window: the producer controller sent beyond
			// the demand. With resending, forget it: it is resent when its
			// gap shows. Without, it is lost like any other.
			if !c.cfg.settings.OnlyFlowControl {
				c.receivedSeqNr = m.SeqNr - 1
			}
			return
		}
		c.stash.Push(m)
		return
	}
	c.process(m)
}

// drain delivers stashed messages while the consumer is free.
func (c *consumer[A]) drain() {
	for !c.outstanding && !c.failed && c.deliverTo != nil && c.stash.Len() > 0 {
		c.process(c.stash.Pop())
	}
	c.maybeStop()
}

// process delivers m, or takes it as the next chunk of a message.
func (c *consumer[A]) process(m *SequencedMessage[A]) {
	if m.Chunk == nil {
		c.deliver(m.Message, m, m.First)
		return
	}
	if !c.chunks.add(m.Chunk, m.SeqNr, m.First) {
		c.processed(m.SeqNr, m.First, false) // the rest of a message whose start was lost
		return
	}
	if !m.Chunk.Last {
		c.processed(m.SeqNr, m.First, false)
		return
	}
	first := c.chunks.first
	msg, err := decodeChunks(&c.chunks, c.cfg.codec)
	if err != nil {
		c.fail(fmt.Errorf("message %d of producer %q: %w", m.SeqNr, m.ProducerID, err))
		return
	}
	c.deliver(msg, m, first || m.First)
}

func (c *consumer[A]) deliver(msg A, m *SequencedMessage[A], first bool) {
	if c.drained {
		return // left unconfirmed: the next producer controller sends it
	}
	c.deliveries++
	c.out = Delivery[A]{Message: msg, ConfirmTo: c.confirmTo, ProducerID: m.ProducerID, SeqNr: m.SeqNr, n: c.deliveries}
	c.outstanding, c.outFirst, c.outAck, c.outIncarnation = true, first, m.Ack, m.Incarnation
	if c.tracer != nil {
		c.startSpan(m)
	}
	c.deliverTo.Tell(c.out)
}

// startSpan opens the span of the Delivery going out for m, when m was
// sent traced: the Delivery's context holds it until it is confirmed.
func (c *consumer[A]) startSpan(m *SequencedMessage[A]) {
	ctx, span, ok := tracing.StartDelivery(c.tracer, m.ProducerID, m.SeqNr, m.Resent, m.TraceContext)
	if ok {
		c.out.ctx, c.outSpan = ctx, span
	}
}

// endSpan ends the outstanding Delivery's span, if it has one; errType
// says why it ended unconfirmed ("" when it was confirmed).
func (c *consumer[A]) endSpan(errType string) {
	if c.outSpan != nil {
		tracing.End(c.outSpan, errType)
		c.outSpan = nil
	}
}

// redeliver gives the outstanding Delivery to the consumer again.
func (c *consumer[A]) redeliver() {
	if c.outSpan != nil {
		c.outSpan.AddEvent(tracing.EventRedelivered)
	}
	c.deliverTo.Tell(c.out)
}

func (c *consumer[A]) onConfirmed(n uint64) {
	if !c.outstanding || n != c.out.n {
		return // stale: of a Delivery that came again, or of an earlier one
	}
	seqNr, first, ack, ours := c.out.SeqNr, c.outFirst, c.outAck, c.associated && c.outIncarnation == c.incarnation
	c.endSpan("")
	c.outstanding, c.out = false, Delivery[A]{}
	if c.stash.Len() > 0 && c.stash.At(0).Chunk == nil && c.deliverTo != nil {
		// Deliver the next message before the bookkeeping: the consumer
		// works on it meanwhile.
		c.process(c.stash.Pop())
	}
	if ours {
		c.confirmedSeqNr = max(c.confirmedSeqNr, seqNr)
		c.processed(seqNr, first, ack)
	}
	if c.drainDone != nil {
		c.drainReported()
	}
	c.drain()
}

// processed runs the flow control after message (or chunk) n is done: ask
// for W/2 more once only W/2 of the demand is left, so at most W messages
// are in flight and the producer controller hears of confirmations every
// W/2 messages.
func (c *consumer[A]) processed(n SeqNr, first, ack bool) {
	half := SeqNr(c.cfg.settings.FlowControlWindow / 2)
	switch {
	case c.requestedSeqNr-n <= half:
		c.requestedSeqNr = max(c.requestedSeqNr, n) + half
		c.sendRequest(false)
	case first:
		c.sendRequest(false) // confirms the first message: the association stands
	case ack:
		c.sendAck()
	}
}

func (c *consumer[A]) sendRequest(viaTimeout bool) {
	c.pc.Tell(Request[A]{
		ConfirmedSeqNr:   c.confirmedSeqNr,
		RequestUpToSeqNr: c.requestedSeqNr,
		SupportResend:    !c.cfg.settings.OnlyFlowControl,
		ViaTimeout:       viaTimeout,
		Association:      c.association,
	})
}

func (c *consumer[A]) maybeStop() {
	if c.stopping && !c.outstanding && c.stash.Len() == 0 {
		_ = c.ctx.Stop(c.self)
	}
}

// ccIdle tells a sharded entity that its consumer controller cc holds
// nothing of the first handled SequencedMessages the entity gave it:
// every one it delivered is confirmed. Until it has said so of every one,
// the entity is not passivated (see the HoldsPassivation of package sharding's entities).
type ccIdle[A any] struct {
	cc      runtime.AnyRef
	handled uint64
}

func (ccIdle[A]) consumerCommand(A) {}

// reportIdle tells the entity of a consumer controller that it holds
// nothing, once for each count of handled messages.
func (c *consumer[A]) reportIdle() {
	if !c.outstanding && c.stash.Len() == 0 && c.handled != c.reportedIdle {
		c.reportedIdle = c.handled
		c.idleTo.Tell(ccIdle[A]{cc: c.self, handled: c.handled})
	}
}
