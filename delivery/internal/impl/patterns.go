package impl

// What the pattern controllers (delivery/workpulling, delivery/sharding,
// through delivery/internal/pattern) use of the point-to-point
// controllers: they run one per worker or entity.

import (
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/durablecalls"
	"github.com/trellis-go/trellis/runtime"
)

// PatternProducer is the producer side of a pattern controller (work
// pulling or sharding): its producer id, durable queue and the calls'
// settings, and the point-to-point producer controllers it runs for its
// workers or entities.
type PatternProducer[A any] struct {
	ID      string
	Queue   durable.Queue[A] // nil without one
	Durable durablecalls.Settings
	// Child returns the factory of the producer controller of one worker
	// or entity: producer id id, the pattern controller's settings and
	// codec, no durable queue (the pattern controller stores for it), and
	// generation, the pattern controller's (see
	// SequencedMessage.Generation).
	Child func(id string, generation uint64) func() runtime.Behavior[ProducerCommand[A]]
	// Outgoing is the message by which the pattern controller hands msg
	// to such a producer controller, as its producer would through
	// RequestNext.AskNextTo with replyTo; quiet asks for the reply without
	// asking the consumer controller to confirm this very message at once
	// (a confirmation that comes with the next Request is soon enough).
	// traceContext is the send's W3C trace context, "" when untraced (see
	// SequencedMessage.TraceContext); resent says that the message was
	// sent before, by an earlier incarnation of the pattern controller: it
	// is replayed from the durable queue.
	Outgoing func(msg A, traceContext string, resent bool, replyTo runtime.Ref[SeqNr], quiet bool) ProducerCommand[A]
	// ResendUnconfirmed makes such a producer controller send again every
	// unconfirmed message, none marked first: to wake a passivated entity.
	ResendUnconfirmed ProducerCommand[A]
}

// NewPatternProducer validates the producer settings and options of a
// pattern controller with producer id id, as NewProducerController does,
// and returns what the pattern controller needs of them.
func NewPatternProducer[A any](id string, settings ProducerSettings, opts []ProducerOption[A]) (*PatternProducer[A], error) {
	cfg, err := newProducerConfig(id, settings, opts)
	if err != nil {
		return nil, err
	}
	return &PatternProducer[A]{
		ID:      cfg.id,
		Queue:   cfg.queue,
		Durable: cfg.settings.durable(),
		Child: func(id string, generation uint64) func() runtime.Behavior[ProducerCommand[A]] {
			child := *cfg
			child.id, child.queue, child.queueSet, child.generation = id, nil, false, generation
			return func() runtime.Behavior[ProducerCommand[A]] { return newProducer(&child) }
		},
		Outgoing: func(msg A, traceContext string, resent bool, replyTo runtime.Ref[SeqNr], quiet bool) ProducerCommand[A] {
			sm := SequencedMessage[A]{Message: msg, TraceContext: traceContext, Resent: resent && traceContext != ""}
			return &outgoing[A]{sm: sm, replyTo: replyTo, quiet: quiet}
		},
		ResendUnconfirmed: resendUnconfirmed[A]{},
	}, nil
}

// PatternConsumer is the consumer side of a sharded entity: the consumer
// controllers it runs, one per producer.
type PatternConsumer[A any] struct {
	// Child returns the factory of a consumer controller with the
	// validated settings and options that tells idleTo, each time it holds
	// nothing after it handled more messages, how many it handled (see
	// Idle).
	Child func(idleTo runtime.Ref[ConsumerCommand[A]]) func() runtime.Behavior[ConsumerCommand[A]]
}

// NewPatternConsumer validates consumer settings and options, as
// NewConsumerController does, for the consumer controllers of a sharded
// entity.
func NewPatternConsumer[A any](settings ConsumerSettings, opts []ConsumerOption[A]) (*PatternConsumer[A], error) {
	cfg, err := newConsumerConfig(settings, opts)
	if err != nil {
		return nil, err
	}
	return &PatternConsumer[A]{
		Child: func(idleTo runtime.Ref[ConsumerCommand[A]]) func() runtime.Behavior[ConsumerCommand[A]] {
			return func() runtime.Behavior[ConsumerCommand[A]] { return &consumer[A]{cfg: cfg, idleTo: idleTo} }
		},
	}, nil
}

// Idle reports whether m is an idle report of a consumer controller made
// by PatternConsumer.Child: that controller, cc, holds nothing of the
// first handled messages it was given.
func Idle[A any](m ConsumerCommand[A]) (cc runtime.AnyRef, handled uint64, ok bool) {
	i, ok := m.(ccIdle[A])
	return i.cc, i.handled, ok
}

// ValidateProducerSettings returns s with its defaults, or an error naming
// the first field out of range.
func ValidateProducerSettings(s ProducerSettings) (ProducerSettings, error) { return s.validate() }

// ValidateConsumerSettings is ValidateProducerSettings for consumer
// settings.
func ValidateConsumerSettings(s ConsumerSettings) (ConsumerSettings, error) { return s.validate() }

// WrapProducer makes v a command of a producer controller, which ignores
// it: for an actor that stands for one (a test's fault link) and tells
// itself its own messages. UnwrapProducer gives v back.
func WrapProducer[A any](v any) ProducerCommand[A] { return extension[A]{v} }

// UnwrapProducer returns the v of WrapProducer, if m is one.
func UnwrapProducer[A any](m ProducerCommand[A]) (any, bool) {
	e, ok := m.(extension[A])
	return e.v, ok
}

// WrapConsumer and UnwrapConsumer do for consumer commands what
// WrapProducer and UnwrapProducer do: a sharded entity's own messages (its
// watches) are consumer commands.
func WrapConsumer[A any](v any) ConsumerCommand[A] { return extension[A]{v} }

// UnwrapConsumer returns the v of WrapConsumer, if m is one.
func UnwrapConsumer[A any](m ConsumerCommand[A]) (any, bool) {
	e, ok := m.(extension[A])
	return e.v, ok
}

// extension is a message of another package (see WrapProducer), which
// the producer and consumer controllers ignore.
type extension[A any] struct{ v any }

func (extension[A]) producerCommand(A) {}
func (extension[A]) consumerCommand(A) {}

// NextRegistration takes a registration number, later than every one
// before: for tests of the ordering of registrations.
func NextRegistration() uint64 { return nextRegistration() }

// Registration returns the number of a RegisterConsumer.
func Registration[A any](m RegisterConsumer[A]) uint64 { return m.registration }
