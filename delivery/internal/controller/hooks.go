package controller

import (
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/durablecalls"
	"github.com/trellis-go/trellis/runtime"
)

// Hooks are what the pattern controllers use of delivery's point-to-point
// controllers for messages of type A, where P is delivery.ProducerCommand[A]
// and C is delivery.ConsumerCommand[A]. Settings and options travel as
// their delivery types (delivery.ProducerSettings and
// []delivery.ProducerOption[A], and the consumer's), typed any here
// because this package cannot name them; delivery/internal/pattern gives
// them their types.
type Hooks[A, P, C any] struct {
	// NewProducer validates the producer settings and options of a pattern
	// controller with producer id id, as delivery.NewProducerController
	// does, and returns what the pattern controller needs of them.
	NewProducer func(id string, settings, opts any) (*Producer[A, P], error)
	// NewConsumer validates consumer settings and options, as
	// delivery.NewConsumerController does, for the consumer controllers
	// of a sharded entity.
	NewConsumer func(settings, opts any) (*Consumer[A, C], error)
	// WrapProducer makes v a command of a producer controller, which
	// ignores it: for an actor that stands for one (a test's fault link)
	// and tells itself its own messages. UnwrapProducer gives v back.
	WrapProducer   func(v any) P
	UnwrapProducer func(m P) (any, bool)
	// WrapConsumer and UnwrapConsumer do the same for consumer commands:
	// a sharded entity's own messages (its watches) are consumer commands.
	WrapConsumer   func(v any) C
	UnwrapConsumer func(m C) (any, bool)
}

// Producer is the producer side of a pattern controller (work pulling or
// sharding): its producer id, durable queue and the calls' settings, and
// the point-to-point producer controllers it runs for its workers or
// entities.
type Producer[A, P any] struct {
	ID      string
	Queue   durable.Queue[A] // nil without one
	Durable durablecalls.Settings
	// Child returns the factory of the producer controller of one worker
	// or entity: producer id id, the pattern controller's settings and
	// codec, no durable queue (the pattern controller stores for it), and
	// generation, the pattern controller's (see
	// delivery.SequencedMessage.Generation).
	Child func(id string, generation uint64) func() runtime.Behavior[P]
	// Outgoing is the message by which the pattern controller hands msg
	// to such a producer controller, as its producer would through
	// RequestNext.AskNextTo with replyTo; quiet asks for the reply without
	// asking the consumer controller to confirm this very message at once
	// (a confirmation that comes with the next Request is soon enough).
	// traceContext is the send's W3C trace context, "" when untraced (see
	// delivery.SequencedMessage.TraceContext); resent says that the
	// message was sent before, by an earlier incarnation of the pattern
	// controller: it is replayed from the durable queue.
	Outgoing func(msg A, traceContext string, resent bool, replyTo runtime.Ref[durable.SeqNr], quiet bool) P
	// ResendUnconfirmed makes such a producer controller send again every
	// unconfirmed message, none marked first: to wake a passivated entity.
	ResendUnconfirmed P
}

// Consumer is the consumer side of a sharded entity: the consumer
// controllers it runs, one per producer.
type Consumer[A, C any] struct {
	// Child returns the factory of a consumer controller with the
	// validated settings and options that tells idleTo, each time it holds
	// nothing after it handled more messages, how many it handled (see
	// Idle).
	Child func(idleTo runtime.Ref[C]) func() runtime.Behavior[C]
	// Idle reports whether m is such a report, of consumer controller cc
	// that holds nothing of the first handled messages it was given.
	Idle func(m C) (cc runtime.AnyRef, handled uint64, ok bool)
}

// Validation of settings, set by delivery's init: the argument and result
// are a delivery.ProducerSettings (or ConsumerSettings).
var (
	ValidateProducerSettings func(s any) (any, error)
	ValidateConsumerSettings func(s any) (any, error)
)

// hooks returns the *Hooks[A, P, C] for the A of probe.
var hooks func(probe any) any

// Register sets the hooks: f returns, for probe (a value of a generic type
// of delivery), the *Hooks of its message type.
func Register(f func(probe any) any, validateProducer, validateConsumer func(s any) (any, error)) {
	hooks, ValidateProducerSettings, ValidateConsumerSettings = f, validateProducer, validateConsumer
}

// For returns the hooks of the message type of probe.
func For[A, P, C any](probe any) *Hooks[A, P, C] { return hooks(probe).(*Hooks[A, P, C]) }

// For tests of the ordering of registrations: NextRegistration takes a
// registration number, later than every one before; Registration returns
// the number of a delivery.RegisterConsumer. Set by delivery's init.
var (
	NextRegistration func() uint64
	Registration     func(m any) uint64
)
