package delivery

// What delivery lends its pattern packages (work pulling, sharding) of its
// point-to-point controllers, through delivery/internal/controller: see
// that package for the mechanism.

import (
	"github.com/trellis-go/trellis/delivery/internal/controller"
	"github.com/trellis-go/trellis/runtime"
)

func init() {
	controller.ErrInvalidSettings, controller.ErrNotLocal = ErrInvalidSettings, ErrNotLocal
	controller.Register(func(probe any) any { return probe.(hooker).hooks() },
		func(s any) (any, error) { return s.(ProducerSettings).validate() },
		func(s any) (any, error) { return s.(ConsumerSettings).validate() })
	controller.NextRegistration = nextRegistration
	controller.Registration = func(m any) uint64 { return m.(registered).registrationNumber() }
}

// registered is a RegisterConsumer, of any message type.
type registered interface{ registrationNumber() uint64 }

func (m RegisterConsumer[A]) registrationNumber() uint64 { return m.registration }

// hooker is a value of one of delivery's generic types, for some message
// type A, that gives the hooks of A.
type hooker interface{ hooks() any }

// hooks returns the *controller.Hooks of A. The receiver is a probe: only
// its type counts.
func (*SequencedMessage[A]) hooks() any {
	return &controller.Hooks[A, ProducerCommand[A], ConsumerCommand[A]]{
		NewProducer: func(id string, settings, opts any) (*controller.Producer[A, ProducerCommand[A]], error) {
			cfg, err := newProducerConfig(id, settings.(ProducerSettings), opts.([]ProducerOption[A]))
			if err != nil {
				return nil, err
			}
			return &controller.Producer[A, ProducerCommand[A]]{
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
		},
		NewConsumer: func(settings, opts any) (*controller.Consumer[A, ConsumerCommand[A]], error) {
			cfg, err := newConsumerConfig(settings.(ConsumerSettings), opts.([]ConsumerOption[A]))
			if err != nil {
				return nil, err
			}
			return &controller.Consumer[A, ConsumerCommand[A]]{
				Child: func(idleTo runtime.Ref[ConsumerCommand[A]]) func() runtime.Behavior[ConsumerCommand[A]] {
					return func() runtime.Behavior[ConsumerCommand[A]] { return &consumer[A]{cfg: cfg, idleTo: idleTo} }
				},
				Idle: func(m ConsumerCommand[A]) (runtime.AnyRef, uint64, bool) {
					i, ok := m.(ccIdle[A])
					return i.cc, i.handled, ok
				},
			}, nil
		},
		WrapProducer: func(v any) ProducerCommand[A] { return extension[A]{v} },
		UnwrapProducer: func(m ProducerCommand[A]) (any, bool) {
			e, ok := m.(extension[A])
			return e.v, ok
		},
		WrapConsumer: func(v any) ConsumerCommand[A] { return extension[A]{v} },
		UnwrapConsumer: func(m ConsumerCommand[A]) (any, bool) {
			e, ok := m.(extension[A])
			return e.v, ok
		},
	}
}

// extension is a message of another package (see controller.Hooks), which
// the producer and consumer controllers ignore.
type extension[A any] struct{ v any }

func (extension[A]) producerCommand(A) {}
func (extension[A]) consumerCommand(A) {}
