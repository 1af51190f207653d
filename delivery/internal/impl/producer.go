package impl

// The producer controller: it numbers the producer's messages, sends them
// to the consumer controller as its demand allows, keeps them until they
// are confirmed, resends on request, and answers asks. Its configuration
// is in producer_config.go, its durable queue calls in producer_durable.go,
// its resending in producer_resend.go.

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"

	"github.com/trellis-go/trellis/delivery/internal/durablecalls"
	"github.com/trellis-go/trellis/delivery/internal/ring"
	"github.com/trellis-go/trellis/delivery/internal/slab"
	"github.com/trellis-go/trellis/runtime"
)

// ErrProtocol is wrapped by the error with which a controller stops when
// its peer breaks the protocol, such as a producer that sends without a
// RequestNext.
var ErrProtocol = errors.New("delivery: protocol error")

// outgoing is a message from the producer, made by the SendNextTo and
// AskNextTo adapters on the producer's goroutine. It holds the
// SequencedMessage that will carry it, and comes from a slab, so a stream
// of messages costs one allocation per slab block from the producer to the
// consumer controller.
type outgoing[A any] struct {
	sm      SequencedMessage[A]
	replyTo runtime.Ref[SeqNr]
	// quiet, with replyTo, asks for the reply without asking the consumer
	// controller for an Ack of this very message: the work-pulling and
	// sharding controllers track every message they hand to their internal
	// producer controllers this way, and a confirmation that comes with the
	// next Request is soon enough for them.
	quiet bool
}

// pendingReply is an ask waiting for the confirmation of seqNr.
type pendingReply struct {
	seqNr   SeqNr
	replyTo runtime.Ref[SeqNr]
}

type resendFirstTick[A any] struct{}
type resendFirstKey struct{}

// resendUnconfirmed makes the controller send everything unconfirmed
// again (see producer.wake). The sharding producer controller sends it to
// an entity that has not answered for a while: passivated while messages
// to it were on their way, it lost them, and nothing else would bring it
// back.
type resendUnconfirmed[A any] struct{}

func (*outgoing[A]) producerCommand(A)         {}
func (resendFirstTick[A]) producerCommand(A)   {}
func (resendUnconfirmed[A]) producerCommand(A) {}

// producer is the producer controller's behavior and state.
type producer[A any] struct {
	cfg         *producerConfig[A]
	ctx         *runtime.Context[ProducerCommand[A]]
	self        runtime.Ref[ProducerCommand[A]]
	log         *slog.Logger
	incarnation uint64
	association uint64 // counts the associations with consumer controllers
	generation  uint64 // see SequencedMessage.Generation
	sendNext    runtime.Ref[A]
	askNext     runtime.Ref[MessageWithConfirmation[A]]
	traced      runtime.Ref[ProducerCommand[A]] // self when the System traces (see RequestNext.SendContext)
	outgoings   slab.Slab[outgoing[A]]          // what sendNext and askNext make

	producer runtime.Ref[RequestNext[A]]
	consumer runtime.Ref[ConsumerCommand[A]]
	// registration is the number of the consumer controller's
	// registration (see RegisterConsumer): an older one is ignored.
	registration uint64
	loaded       bool // the durable state is loaded (at once without a queue)
	active       bool
	failed       bool

	currentSeqNr   SeqNr // the next message's
	confirmedSeqNr SeqNr
	requestedSeqNr SeqNr // the consumer controller's demand: send up to it
	firstSeqNr     SeqNr // the first of the current association
	requested      bool  // a RequestNext is out and unused
	supportResend  bool
	resendFirstOn  bool

	unconfirmed ring.Ring[*SequencedMessage[A]] // sent, kept for resending
	replies     ring.Ring[pendingReply]         // asks waiting for a confirmation
	pending     []*SequencedMessage[A]          // the current message's chunks, sent from pendingAt on
	pendingAt   int
	replyTo     runtime.Ref[SeqNr] // the current message's ask

	undrain func()                                     // leaves Drain's second stage
	dq      *durablecalls.Calls[A, ProducerCommand[A]] // nil without a durable queue
	pipe    storePipe[A]                               // with a durable queue: stored or being stored, not yet sent
}

func newProducer[A any](cfg *producerConfig[A]) *producer[A] {
	return &producer[A]{
		cfg:           cfg,
		incarnation:   newIncarnation(),
		generation:    generationOf(cfg),
		currentSeqNr:  1,
		supportResend: true,
		loaded:        cfg.queue == nil,
	}
}

// volatileGenerations numbers the producer controllers that keep nothing
// (no durable queue of their own or of their pattern controller), by
// stamps: a replacement, on this instance or another, ranks above the
// controller it replaces, however late a message of that one comes.
var volatileGenerations stamps

// generationOf is the generation a new producer controller starts with:
// its pattern controller's, or with a durable queue 0 until the loaded state
// gives it the queue's incarnation, or else the next of volatileGenerations.
func generationOf[A any](cfg *producerConfig[A]) uint64 {
	if cfg.generation != 0 || cfg.queue != nil {
		return cfg.generation
	}
	return volatileGenerations.next()
}

// newIncarnation returns a random non-zero id.
func newIncarnation() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

func (p *producer[A]) OnSignal(ctx *runtime.Context[ProducerCommand[A]], sig runtime.Signal) {
	switch sig.(type) {
	case runtime.Started:
		p.init(ctx)
		if p.cfg.queue != nil {
			p.startDurable()
		}
		p.registerDrain()
	case runtime.Stopped, runtime.Restarting:
		p.leaveDrain()
		if p.dq != nil {
			p.dq.Stop()
		}
	}
}

func (p *producer[A]) init(ctx *runtime.Context[ProducerCommand[A]]) {
	p.ctx, p.self, p.log = ctx, ctx.Self(), ctx.Log().With("producerId", p.cfg.id)
	RegisterCodecs[A](ctx.System()) // for a consumer controller on another instance
	if ctx.System().Tracer() != nil {
		p.traced = p.self
	}
	p.sendNext = runtime.DirectAdapter(ctx, func(m A) ProducerCommand[A] {
		o := p.outgoings.Get()
		o.sm.Message = m
		return o
	})
	p.askNext = runtime.DirectAdapter(ctx, func(m MessageWithConfirmation[A]) ProducerCommand[A] {
		o := p.outgoings.Get()
		o.sm.Message, o.replyTo = m.Message, m.ReplyTo
		return o
	})
}

func (p *producer[A]) Receive(ctx *runtime.Context[ProducerCommand[A]], msg ProducerCommand[A]) {
	if p.failed {
		return
	}
	if p.ctx == nil {
		p.init(ctx) // defensive: Started comes first
	}
	switch m := msg.(type) {
	case *outgoing[A]:
		p.onProducerMessage(m)
	case Request[A]:
		p.onRequest(m)
	case *Ack[A]: // as consumer controllers send it
		if m != nil {
			p.takeAck(*m)
		}
	case Ack[A]:
		p.takeAck(m)
	case Resend[A]:
		p.onResend(m)
	case resendFirstTick[A]:
		p.onResendFirst()
	case resendUnconfirmed[A]:
		p.wake()
	case ProducerStart[A]:
		p.onStart(m)
	case RegisterConsumer[A]:
		p.onRegisterConsumer(m)
	case durableResult[A]:
		p.onDurable(m.Msg)
	case drainStage[A]:
		m.done() // what came before is handled
	}
}

// fail stops the controller: something it cannot recover from happened.
func (p *producer[A]) fail(err error) {
	if p.failed {
		return
	}
	p.failed = true
	p.leaveDrain() // it takes no more messages
	p.log.Error("producer controller failed", "err", err)
	_ = p.ctx.Stop(p.self)
}

func (p *producer[A]) onStart(m ProducerStart[A]) {
	if m.Producer == nil {
		p.log.Error("ProducerStart without a producer ref: ignored")
		return
	}
	if err := requireLocal(p.ctx.System(), m.Producer, "ProducerStart.Producer", "producer", "producer controller"); err != nil {
		p.fail(err)
		return
	}
	p.producer = m.Producer
	if !p.active {
		p.maybeActivate()
		return
	}
	if p.requested {
		p.sendRequestNext()
	}
}

func (p *producer[A]) onRegisterConsumer(m RegisterConsumer[A]) {
	if m.ConsumerController == nil {
		p.log.Error("RegisterConsumer without a consumer controller ref: ignored")
		return
	}
	if m.registration == 0 {
		m.registration = nextRegistration() // sent directly: made now
	}
	if m.registration < p.registration {
		// Made before the registration this controller has: a late one,
		// or a retry, of a consumer controller replaced since, which must
		// not take the stream from its successor.
		p.log.Debug("RegisterConsumer older than the current registration: ignored",
			"registration", m.registration, "current", p.registration)
		return
	}
	p.registration = m.registration
	switch {
	case !p.active:
		p.consumer = m.ConsumerController
		p.maybeActivate()
	case m.ConsumerController == p.consumer:
		// The same consumer controller again (it registers until it hears
		// from this one): send it what it has not confirmed, the head
		// marked first, in the association it already has.
		p.markHeadFirst()
		p.resend(0)
	default:
		p.consumer = m.ConsumerController
		p.associate()
	}
}

// maybeActivate starts sending once producer, consumer and state are there.
func (p *producer[A]) maybeActivate() {
	if p.active || p.producer == nil || p.consumer == nil || !p.loaded {
		return
	}
	p.active = true
	p.associate()
}

// associate starts an association with the consumer controller: the
// first, or a new one that replaces its predecessor. The demand of the
// predecessor is void, and from now on nothing it sends counts (see
// accepts). Whatever is unconfirmed goes to the new consumer controller,
// the head marked first before it is sent, so it can take it at once; with
// nothing unconfirmed the next message is the first, and it goes out
// without a Request, as a controller's very first message does (that is
// also what lets sharding start the consumer's entity). Either way the new
// consumer controller gets a message with nothing more from anyone.
func (p *producer[A]) associate() {
	p.association++
	if p.unconfirmed.Len() == 0 {
		p.firstSeqNr, p.requestedSeqNr = p.currentSeqNr, p.currentSeqNr
		p.sendPending()
		return
	}
	p.requestedSeqNr = p.currentSeqNr - 1
	p.markHeadFirst()
	p.resend(0)
}

// accepts reports whether a Request, Ack or Resend of association a is from
// the current consumer controller. One from a consumer controller that was
// replaced, however late it comes, must not confirm, open the window nor
// resend: it speaks of messages the current one may never have had.
func (p *producer[A]) accepts(a uint64) bool { return p.active && a == p.association }

// requestNext gives the producer permission for one more message when the
// consumer controller's demand (and the store ahead) allows it and nothing
// is still being sent.
func (p *producer[A]) requestNext() {
	if p.requested || p.hasPending() || p.nextSeqNr() > p.storeLimit() {
		return
	}
	p.requested = true
	p.sendRequestNext()
}

func (p *producer[A]) sendRequestNext() {
	p.producer.Tell(RequestNext[A]{
		ProducerID:     p.cfg.id,
		CurrentSeqNr:   p.nextSeqNr(),
		ConfirmedSeqNr: p.confirmedSeqNr,
		SendNextTo:     p.sendNext,
		AskNextTo:      p.askNext,
		traced:         p.traced,
	})
}

func (p *producer[A]) onProducerMessage(o *outgoing[A]) {
	if !p.active || !p.requested {
		p.fail(fmt.Errorf("%w: a message from the producer without demand (requested %t, currentSeqNr %d, requestedSeqNr %d): wait for RequestNext",
			ErrProtocol, p.requested, p.currentSeqNr, p.requestedSeqNr))
		return
	}
	p.requested = false
	if p.cfg.settings.ChunkLargeMessages > 0 {
		chunks, err := chunkMessage(p.cfg.codec, o.sm.Message, p.cfg.settings.ChunkLargeMessages)
		if err != nil {
			p.fail(fmt.Errorf("chunk message %d: %w", p.currentSeqNr, err))
			return
		}
		p.pending, p.pendingAt = chunks, 0
		if tc := o.sm.TraceContext; tc != "" {
			for _, c := range chunks {
				c.TraceContext, c.Resent = tc, o.sm.Resent
			}
		}
	} else {
		p.pending, p.pendingAt = append(p.pending[:0], &o.sm), 0
	}
	if o.replyTo != nil {
		p.pending[len(p.pending)-1].Ack = !o.quiet
		p.replyTo = o.replyTo
	}
	p.sendPending()
}

// sendPending sends (or, with a durable queue, stores) the current
// message's chunks while there is demand, then asks for the next message.
func (p *producer[A]) sendPending() {
	if p.dq != nil {
		p.storePending()
		return
	}
	for p.hasPending() && p.currentSeqNr <= p.requestedSeqNr {
		p.stamp(p.pending[p.pendingAt], p.currentSeqNr)
		p.emit()
	}
	p.requestNext()
}

// stamp gives m its sequence number and what says where it comes from.
func (p *producer[A]) stamp(m *SequencedMessage[A], seqNr SeqNr) {
	m.ProducerID = p.cfg.id
	m.SeqNr = seqNr
	m.ProducerController = p.self
	m.Incarnation = p.incarnation
	m.Generation = p.generation
}

// emit sends the next pending chunk. When it is the message's last, the
// producer is given its next RequestNext first: it can work on the next
// message while this one travels.
func (p *producer[A]) emit() {
	m, replyTo := p.takePending()
	p.sent(m, replyTo)
	if !p.hasPending() {
		p.requestNext()
	}
	p.send(m)
}

// send sends m to the consumer controller. Every message to it goes this
// way, postponable, so that they all keep their order (TellPostponable
// keeps order only with the sender's other postponable mail). A consumer
// controller with a delivery out does not run for them: its consumer's
// confirmation will (see consumer.Receive).
func (p *producer[A]) send(m *SequencedMessage[A]) {
	runtime.TellPostponable(p.consumer, ConsumerCommand[A](m))
}

func (p *producer[A]) hasPending() bool { return p.pendingAt < len(p.pending) }

// takePending takes the next pending chunk and, with the message's last
// chunk, the message's ask.
func (p *producer[A]) takePending() (m *SequencedMessage[A], replyTo runtime.Ref[SeqNr]) {
	m = p.pending[p.pendingAt]
	p.pending[p.pendingAt] = nil
	if p.pendingAt++; p.pendingAt == len(p.pending) {
		// Keep the buffer for the next message unless a large one grew it.
		if cap(p.pending) > 64 {
			p.pending = nil
		}
		p.pending, p.pendingAt = p.pending[:0], 0
		replyTo, p.replyTo = p.replyTo, nil
	}
	return m, replyTo
}

// sent does the bookkeeping of sending m, the next message; replyTo is the
// ask of the message whose last chunk m is, if any.
func (p *producer[A]) sent(m *SequencedMessage[A], replyTo runtime.Ref[SeqNr]) {
	// Set as it goes out, not as it is stored: a new consumer controller
	// may have come meanwhile.
	m.First, m.Association = m.SeqNr == p.firstSeqNr, p.association
	p.currentSeqNr++
	if p.supportResend {
		p.unconfirmed.Push(m)
	}
	if replyTo != nil {
		if p.dq != nil {
			replyTo.Tell(m.SeqNr) // stored: that is all a durable ask waits for
		} else {
			p.replies.Push(pendingReply{seqNr: m.SeqNr, replyTo: replyTo})
		}
	}
	if m.SeqNr == p.firstSeqNr {
		p.startResendFirst()
	}
}

func (p *producer[A]) onRequest(r Request[A]) {
	if !p.accepts(r.Association) {
		return
	}
	p.onAck(r.ConfirmedSeqNr)
	p.supportResend = r.SupportResend
	if !r.SupportResend {
		p.unconfirmed.Clear()
		p.stopResendFirst()
	} else if r.ViaTimeout {
		// The consumer controller heard nothing for a while: the last
		// messages may be lost, and nothing after them would show the gap.
		p.resend(0)
	}
	upTo := r.RequestUpToSeqNr
	if !r.SupportResend && r.ViaTimeout && upTo < p.currentSeqNr {
		// Without resending, lost messages are never confirmed: open the
		// window past what was sent, or the flow would stop for good.
		upTo = p.currentSeqNr - 1 + max(r.RequestUpToSeqNr-r.ConfirmedSeqNr, 1)
	}
	if upTo > p.requestedSeqNr {
		p.requestedSeqNr = upTo
		p.sendPending()
	}
}

// takeAck takes an Ack from the consumer controller, if associated.
func (p *producer[A]) takeAck(a Ack[A]) {
	if p.accepts(a.Association) {
		p.onAck(a.ConfirmedSeqNr)
	}
}

// onAck takes a confirmation of everything up to c.
func (p *producer[A]) onAck(c SeqNr) {
	// A confirmation of what was never sent comes from a consumer
	// controller of another incarnation at the same ref: ignore it.
	if c <= p.confirmedSeqNr || c >= p.currentSeqNr {
		return
	}
	p.confirmedSeqNr = c
	for p.unconfirmed.Len() > 0 && p.unconfirmed.At(0).SeqNr <= c {
		p.unconfirmed.Pop()
	}
	for p.replies.Len() > 0 && p.replies.At(0).seqNr <= c {
		r := p.replies.Pop()
		r.replyTo.Tell(r.seqNr)
	}
	if p.resendFirstOn && c >= p.firstSeqNr {
		p.stopResendFirst()
	}
	if p.dq != nil {
		p.storeConfirmed(c)
	}
}
