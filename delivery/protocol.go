package delivery

import (
	"github.com/trellis-go/trellis/delivery/internal/impl"
)

// SeqNr is a message's sequence number: 1 for a producer's first message,
// one more for each message (or chunk) after it.
type SeqNr = impl.SeqNr

// Codec turns messages into bytes and back, for chunking (see
// [ProducerSettings.ChunkLargeMessages]).
type Codec[A any] = impl.Codec[A]

// JSONCodec is the default Codec.
type JSONCodec[A any] = impl.JSONCodec[A]

// ChunkedMessage is a piece of a serialized message, carried by a
// [SequencedMessage] when the producer controller chunks messages.
type ChunkedMessage = impl.ChunkedMessage

// ProducerCommand is what a producer controller handles: [ProducerStart],
// [RegisterConsumer] and, from the consumer controller, [Request], [Resend]
// and [Ack]. The producer's messages reach it through the refs of
// [RequestNext].
type ProducerCommand[A any] = impl.ProducerCommand[A]

// ConsumerCommand is what a consumer controller handles: [ConsumerStart],
// [RegisterToProducerController], [DeliverThenStop] and, from the producer
// controller, *[SequencedMessage]. The consumer's [Confirmed] goes to
// [Delivery.ConfirmTo].
type ConsumerCommand[A any] = impl.ConsumerCommand[A]

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
type ProducerStart[A any] = impl.ProducerStart[A]

// RequestNext allows the producer to send exactly one message: to SendNextTo,
// or wrapped in a [MessageWithConfirmation] to AskNextTo. The producer must
// wait for the next RequestNext before it sends another; a message sent
// without one is a protocol error that stops the controller.
type RequestNext[A any] = impl.RequestNext[A]

// MessageWithConfirmation is a message whose sequence number is sent to
// ReplyTo once the consumer has confirmed it or, with a durable queue, once
// it is stored. Send it to [RequestNext.AskNextTo], typically with
// runtime.AskFrom.
type MessageWithConfirmation[A any] = impl.MessageWithConfirmation[A]

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
type RegisterConsumer[A any] = impl.RegisterConsumer[A]

// ConsumerStart connects the consumer to its consumer controller, which then
// sends it one [Delivery] at a time. The controller watches the consumer
// and stops when it stops. Sending Start again (after a consumer restart, or
// from a new consumer) sends an unconfirmed Delivery again, to the new
// consumer. The consumer must be local to its controller, as for
// [ProducerStart]: an actor of the controller's own System, or a message
// adapter of one; any other consumer makes the controller log an error
// wrapping [ErrNotLocal] and stop.
type ConsumerStart[A any] = impl.ConsumerStart[A]

// Delivery is a message for the consumer, which must confirm it by calling
// [Delivery.Confirm] once it has processed it. The next Delivery comes
// only after that.
type Delivery[A any] = impl.Delivery[A]

// Confirmed is what [Delivery.Confirm] tells ConfirmTo: it names the
// Delivery it confirms. A Confirmed made otherwise (its zero value)
// confirms nothing.
type Confirmed = impl.Confirmed

// RegisterToProducerController connects a consumer controller to a producer
// controller: the consumer controller sends it [RegisterConsumer], again on
// every retry tick until the producer controller's first message arrives.
//
// The registration is numbered when the consumer controller handles this
// command, not when it is told (see [RegisterConsumer]): of two consumer
// controllers told to register with one producer controller, the one that
// handles it last gets the stream, whatever the order of the tells.
type RegisterToProducerController[A any] = impl.RegisterToProducerController[A]

// DeliverThenStop stops the consumer controller once every message it has
// received is delivered and confirmed.
type DeliverThenStop[A any] = impl.DeliverThenStop[A]

// SequencedMessage is the internal message from a producer controller to a
// consumer controller: one message, or one chunk of one, with its sequence
// number. It travels as a pointer that both controllers only read.
type SequencedMessage[A any] = impl.SequencedMessage[A]

// Request is the internal message by which a consumer controller confirms
// messages and asks for more: the producer controller may send up to
// RequestUpToSeqNr.
type Request[A any] = impl.Request[A]

// Resend is the internal message by which a consumer controller that saw a
// gap asks for the unconfirmed messages from FromSeqNr on. FromSeqNr 0 asks
// for all of them, the first marked as the start of a new association.
type Resend[A any] = impl.Resend[A]

// Ack is the internal message by which a consumer controller confirms
// messages without asking for more: after a message sent with
// confirmation, and when it stops. Consumer controllers send it by pointer
// (*Ack); a producer controller takes either.
type Ack[A any] = impl.Ack[A]
