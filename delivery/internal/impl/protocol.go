package impl

import (
	"context"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/internal/tracing"
	"github.com/trellis-go/trellis/runtime"
)

// SeqNr is a message's sequence number: 1 for a producer's first message,
// one more for each message (or chunk) after it.
type SeqNr = durable.SeqNr

// Codec turns messages into bytes and back, for chunking (see
// [ProducerSettings.ChunkLargeMessages]).
type Codec[A any] = durable.Codec[A]

// JSONCodec is the default Codec.
type JSONCodec[A any] = durable.JSON[A]

// ChunkedMessage is a piece of a serialized message, carried by a
// [SequencedMessage] when the producer controller chunks messages.
type ChunkedMessage = durable.Chunk

// ProducerCommand is what a producer controller handles: [ProducerStart],
// [RegisterConsumer] and, from the consumer controller, [Request], [Resend]
// and [Ack]. The producer's messages reach it through the refs of
// [RequestNext].
type ProducerCommand[A any] interface{ producerCommand(A) }

// ConsumerCommand is what a consumer controller handles: [ConsumerStart],
// [RegisterToProducerController], [DeliverThenStop] and, from the producer
// controller, *[SequencedMessage]. The consumer's [Confirmed] goes to
// [Delivery.ConfirmTo].
type ConsumerCommand[A any] interface{ consumerCommand(A) }

// ProducerStart connects the producer to its producer controller, which
// answers with a [RequestNext] when the producer may send. Sending it again
// (after a producer restart, or from another producer) moves the flow to the
// new producer: an outstanding RequestNext is sent to it again.
//
// The producer must be local to its controller: an actor of the
// controller's own System, or a message adapter of one (see
// runtime.IsLocal). The two talk by plain tells, with nothing to make up for
// a lost one, which is only safe within one System. A controller given a
// producer of another System, or an ask's reply address, logs an error
// wrapping [ErrNotLocal] and stops; a Start without a producer is ignored.
type ProducerStart[A any] struct {
	Producer runtime.Ref[RequestNext[A]]
}

// RequestNext allows the producer to send exactly one message: to SendNextTo,
// or wrapped in a [MessageWithConfirmation] to AskNextTo. The producer must
// wait for the next RequestNext before it sends another; a message sent
// without one is a protocol error that stops the controller.
type RequestNext[A any] struct {
	ProducerID string
	// CurrentSeqNr is the sequence number the next message will have (its
	// first chunk's, with chunking).
	CurrentSeqNr SeqNr
	// ConfirmedSeqNr is the highest sequence number the consumer confirmed.
	ConfirmedSeqNr SeqNr
	SendNextTo     runtime.Ref[A]
	AskNextTo      runtime.Ref[MessageWithConfirmation[A]]
	// traced is the controller, when its System traces (see
	// runtime.WithTracer): SendContext and AskContext hand it the
	// message with its trace context.
	traced runtime.Ref[ProducerCommand[A]]
}

// SendContext sends msg as SendNextTo does, carrying the trace context
// of ctx's span with it when the controller's System traces: the
// consumer's handling of the message is then a span of that trace (see
// docs/observability.md). Without tracing, or with no span in ctx, it is
// SendNextTo.Tell(msg).
func (r RequestNext[A]) SendContext(ctx context.Context, msg A) {
	tc := traceContextFor(ctx, r.traced)
	if tc == "" {
		r.SendNextTo.Tell(msg)
		return
	}
	r.traced.Tell(&outgoing[A]{sm: SequencedMessage[A]{Message: msg, TraceContext: tc}})
}

// AskContext sends msg with a confirmation to replyTo, as AskNextTo does,
// carrying the trace context of ctx's span as SendContext does.
func (r RequestNext[A]) AskContext(ctx context.Context, msg A, replyTo runtime.Ref[SeqNr]) {
	tc := traceContextFor(ctx, r.traced)
	if tc == "" {
		r.AskNextTo.Tell(MessageWithConfirmation[A]{Message: msg, ReplyTo: replyTo})
		return
	}
	r.traced.Tell(&outgoing[A]{sm: SequencedMessage[A]{Message: msg, TraceContext: tc}, replyTo: replyTo})
}

// traceContextFor is the trace context of ctx to carry in a message to
// the controller pc: "" when pc is nil (its System does not trace) or ctx
// holds no span.
func traceContextFor[A any](ctx context.Context, pc runtime.Ref[ProducerCommand[A]]) string {
	if pc == nil {
		return ""
	}
	return tracing.Capture(ctx)
}

// MessageWithConfirmation is a message whose sequence number is sent to
// ReplyTo once the consumer has confirmed it or, with a durable queue, once
// it is stored. Send it to [RequestNext.AskNextTo], typically with
// runtime.AskFrom.
type MessageWithConfirmation[A any] struct {
	Message A
	ReplyTo runtime.Ref[SeqNr]
}

// RegisterConsumer connects a producer controller to a consumer controller.
// Sent to a controller that already has a consumer, it replaces it: the
// unconfirmed messages are sent to the new one, the first marked as the
// start of a new association.
//
// Registrations are ordered: each takes a number from one counter of the
// process when it is made, and the producer controller takes none older
// than the one it has. One sent by a consumer
// controller ([RegisterToProducerController]) is numbered when that
// command is handled, and keeps its number on every retry; one sent to the
// producer controller directly, when the producer controller gets it. So a
// RegisterConsumer that arrives late, from a consumer controller that was
// replaced meanwhile, gone or still running, is ignored, and so are the
// retries of one that was replaced: the stream stays with the consumer
// controller registered last.
type RegisterConsumer[A any] struct {
	ConsumerController runtime.Ref[ConsumerCommand[A]]
	// registration orders the registrations; 0 (sent directly) is
	// numbered on arrival.
	registration uint64
}

// registrations numbers the registrations of consumer controllers: by
// stamps, so that a later registration, on this instance or another, has
// the higher number (see stamps for how far that holds across instances).
var registrations stamps

// nextRegistration numbers a registration, later than every one before.
func nextRegistration() uint64 { return registrations.next() }

// ConsumerStart connects the consumer to its consumer controller, which then
// sends it one [Delivery] at a time. The controller watches the consumer
// and stops when it stops. Sending Start again (after a consumer restart, or
// from a new consumer) sends an unconfirmed Delivery again, to the new
// consumer. The consumer must be local to its controller, as for
// [ProducerStart]: an actor of the controller's own System, or a message
// adapter of one; any other consumer makes the controller log an error
// wrapping [ErrNotLocal] and stop.
type ConsumerStart[A any] struct {
	DeliverTo runtime.Ref[Delivery[A]]
}

// Delivery is a message for the consumer, which must confirm it by calling
// [Delivery.Confirm] once it has processed it. The next Delivery comes
// only after that.
type Delivery[A any] struct {
	Message    A
	ConfirmTo  runtime.Ref[Confirmed]
	ProducerID string
	// SeqNr is the message's sequence number (its last chunk's, with
	// chunking). A Delivery that comes again has the same SeqNr.
	SeqNr SeqNr
	// n numbers the controller's deliveries: what Confirm confirms.
	n uint64
	// ctx holds the delivery's span, when it is traced.
	ctx context.Context
}

// Context is the context of the consumer's handling of this Delivery:
// when the message was sent traced and the consumer controller's System
// traces, it holds the delivery's span ("deliver <producer id>", a child
// of the send, ended when the Delivery is confirmed), under which the
// consumer can open its own; otherwise context.Background().
func (d Delivery[A]) Context() context.Context {
	if d.ctx == nil {
		return context.Background()
	}
	return d.ctx
}

// Confirm tells the consumer controller that this Delivery was processed.
// It confirms this Delivery and no other, however late it is called: a
// second Confirm of a Delivery that came again (see
// [ConsumerSettings.RedeliverAfter]), or one called after the next
// Delivery came, is ignored.
func (d Delivery[A]) Confirm() { d.ConfirmTo.Tell(Confirmed{delivery: d.n}) }

// Confirmed is what [Delivery.Confirm] tells ConfirmTo: it names the
// Delivery it confirms. A Confirmed made otherwise (its zero value)
// confirms nothing.
type Confirmed struct{ delivery uint64 }

// RegisterToProducerController connects a consumer controller to a producer
// controller: the consumer controller sends it [RegisterConsumer], again on
// every retry tick until the producer controller's first message arrives.
//
// The registration is numbered when the consumer controller handles this
// command, not when it is told (see [RegisterConsumer]): of two consumer
// controllers told to register with one producer controller, the one that
// handles it last gets the stream, whatever the order of the tells.
type RegisterToProducerController[A any] struct {
	ProducerController runtime.Ref[ProducerCommand[A]]
}

// DeliverThenStop stops the consumer controller once every message it has
// received is delivered and confirmed.
type DeliverThenStop[A any] struct{}

// SequencedMessage is the internal message from a producer controller to a
// consumer controller: one message, or one chunk of one, with its sequence
// number. It travels as a pointer that both controllers only read.
type SequencedMessage[A any] struct {
	ProducerID string
	SeqNr      SeqNr
	// Message is the producer's message, unless Chunk is set.
	Message A
	// Chunk is a piece of the serialized message when the producer
	// controller chunks messages.
	Chunk *ChunkedMessage
	// First says that SeqNr is the first of an association between this
	// producer controller and a consumer controller.
	First bool
	// Ack says that the producer asked for a confirmation reply.
	Ack bool
	// ProducerController is where the consumer controller answers.
	ProducerController runtime.Ref[ProducerCommand[A]]
	// Incarnation identifies the producer controller instance: a consumer
	// controller takes a new one for a new producer.
	Incarnation uint64
	// Generation places the producer controller instance among those of
	// its producer id: the incarnation of its durable queue (see
	// durable.Queue.LoadState), or, without one, the order in which the
	// process made the controllers. A consumer controller never goes back
	// from a producer controller to one of an earlier generation, however
	// late a message of that one comes. The two orders are not comparable:
	// a producer id keeps either a durable queue or none while its consumer
	// controllers live.
	Generation uint64
	// Association numbers the producer controller's associations with
	// consumer controllers (it starts a new one for each RegisterConsumer),
	// as of the last message marked first. The consumer controller says it
	// in its Request, Ack and Resend, and the producer controller takes
	// them only from its current association.
	Association uint64
	// TraceContext is the W3C trace context (traceparent, then a newline
	// and the tracestate when there is one) of the send, when the message
	// was sent traced; "" otherwise. It travels and is stored with the
	// message, so that its delivery, however late, joins the send's trace.
	TraceContext string
	// Resent marks a traced message that the producer controller sends
	// again (on a Resend, or after a restart from its durable queue, its
	// own or its work-pulling or sharding controller's); it is set only
	// with a TraceContext.
	Resent bool
}

// Request is the internal message by which a consumer controller confirms
// messages and asks for more: the producer controller may send up to
// RequestUpToSeqNr.
type Request[A any] struct {
	ConfirmedSeqNr   SeqNr
	RequestUpToSeqNr SeqNr
	// SupportResend is false when the consumer controller only wants flow
	// control: the producer controller then keeps nothing for resending.
	SupportResend bool
	// ViaTimeout says that the consumer controller has heard nothing for a
	// while: the last messages may have been lost.
	ViaTimeout bool
	// Association is the association of the consumer controller (see
	// [SequencedMessage.Association]).
	Association uint64
}

// Resend is the internal message by which a consumer controller that saw a
// gap asks for the unconfirmed messages from FromSeqNr on. FromSeqNr 0 asks
// for all of them, the first marked as the start of a new association.
type Resend[A any] struct {
	FromSeqNr SeqNr
	// Association is the association of the consumer controller (see
	// [SequencedMessage.Association]).
	Association uint64
}

// Ack is the internal message by which a consumer controller confirms
// messages without asking for more: after a message sent with
// confirmation, and when it stops. Consumer controllers send it by pointer
// (*Ack); a producer controller takes either.
type Ack[A any] struct {
	ConfirmedSeqNr SeqNr
	// Association is the association of the consumer controller (see
	// [SequencedMessage.Association]).
	Association uint64
}

func (ProducerStart[A]) producerCommand(A)    {}
func (RegisterConsumer[A]) producerCommand(A) {}
func (Request[A]) producerCommand(A)          {}
func (Resend[A]) producerCommand(A)           {}
func (Ack[A]) producerCommand(A)              {}

func (ConsumerStart[A]) consumerCommand(A)                {}
func (RegisterToProducerController[A]) consumerCommand(A) {}
func (DeliverThenStop[A]) consumerCommand(A)              {}
func (*SequencedMessage[A]) consumerCommand(A)            {}
