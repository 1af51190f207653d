package sharding

// The consumer side of sharding: the sharded entity's behavior. It starts
// the consumer, keeps what arrives until the consumer has started, and
// runs one consumer controller per producer that sends to the entity.

import (
	"fmt"
	"log/slog"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/controller"
	"github.com/trellis-go/trellis/delivery/internal/impl"
	"github.com/trellis-go/trellis/delivery/internal/ring"
	"github.com/trellis-go/trellis/runtime"
)

// NewConsumerController validates the settings and returns the
// Create function of the entities of a sharded entity type whose messages
// come from sharding producer controllers ([SpawnProducerController]):
//
//	create, _ := sharding.NewConsumerController(newTodoList, sharding.ConsumerSettings{})
//	region, _ := runtime.InitSharding(sys, runtime.Entity[delivery.ConsumerCommand[Todo]]{Key: key, Create: create})
//
// Each entity spawns its consumer as a child named "consumer", with the
// behavior that newConsumer makes for the entity's id; the consumer sends
// its [delivery.ConsumerStart] to start, and handles every [delivery.Delivery] as with a
// consumer controller. Until then, what arrives is kept (up to
// BufferSize). The entity runs one consumer controller per producer id
// sending to it, all delivering to the one consumer, and tells a consumer
// controller to deliver what it has and stop ([delivery.DeliverThenStop]) when its
// producer controller stops; what a new producer controller with the same
// producer id sends meanwhile waits until it has, so one producer's
// messages reach the consumer in order, from one consumer controller at a
// time (messages of different producers may be outstanding at once). The
// entity stops when its consumer stops.
func NewConsumerController[A, C any](newConsumer func(entityID string, start runtime.Ref[delivery.ConsumerStart[A]]) runtime.Behavior[C],
	settings ConsumerSettings, opts ...delivery.ConsumerOption[A]) (func(entityID string) runtime.Behavior[delivery.ConsumerCommand[A]], error) {
	s, err := settings.validate()
	if err != nil {
		return nil, fmt.Errorf("sharding consumer controller: %w", err)
	}
	if newConsumer == nil {
		return nil, fmt.Errorf("sharding consumer controller: %w: the consumer factory is nil", delivery.ErrInvalidSettings)
	}
	cc, err := impl.NewPatternConsumer(s.Consumer, opts)
	if err != nil {
		return nil, fmt.Errorf("sharding %w", err)
	}
	cfg := &shardingConsumerConfig[A, C]{newConsumer: newConsumer, controller: cc, bufferSize: s.BufferSize}
	return func(entityID string) runtime.Behavior[delivery.ConsumerCommand[A]] {
		return &shardingConsumer[A, C]{cfg: cfg, entityID: entityID}
	}, nil
}

type shardingConsumerConfig[A, C any] struct {
	newConsumer func(entityID string, start runtime.Ref[delivery.ConsumerStart[A]]) runtime.Behavior[C]
	controller  *impl.PatternConsumer[A]
	bufferSize  int
}

// producerLink is the consumer controller of one producer id, and the
// producer controller it hears from. Once that producer controller has
// stopped, the consumer controller is draining: it delivers what it has and
// stops, and messages from a new producer controller with the same id wait
// in pending until it has, so that one producer's messages never reach the
// consumer from two consumer controllers at once, out of order.
type producerLink[A any] struct {
	cc         runtime.Ref[delivery.ConsumerCommand[A]]
	pc         runtime.Ref[delivery.ProducerCommand[A]]
	generation uint64 // the highest of the producer controllers heard from
	routed     uint64 // SequencedMessages given to cc
	idleAt     uint64 // routed, as of cc's last ccIdle: equal when cc holds nothing
	draining   bool
	pending    []*delivery.SequencedMessage[A]
}

// Internal messages of the entity, from its watches, wrapped as consumer
// commands (see impl.WrapConsumer).
type (
	scProducerStopped   struct{ pc runtime.AnyRef }
	scControllerStopped struct {
		producerID string
		cc         runtime.AnyRef
	}
	scConsumerStopped struct{}
)

var _ runtime.PassivationGuard = (*shardingConsumer[int, int])(nil)

// shardingConsumer is the behavior and state of one entity.
type shardingConsumer[A, C any] struct {
	cfg      *shardingConsumerConfig[A, C]
	entityID string
	ctx      *runtime.Context[delivery.ConsumerCommand[A]]
	log      *slog.Logger

	deliverTo  runtime.Ref[delivery.Delivery[A]] // nil until the consumer starts
	stash      ring.Ring[*delivery.SequencedMessage[A]]
	byProducer map[string]*producerLink[A]
	byPC       map[runtime.AnyRef]string // the producer id of each watched producer controller
	stopping   bool                      // DeliverThenStop
}

func (s *shardingConsumer[A, C]) OnSignal(ctx *runtime.Context[delivery.ConsumerCommand[A]], sig runtime.Signal) {
	if _, ok := sig.(runtime.Started); !ok {
		return
	}
	s.ctx, s.log = ctx, ctx.Log().With("entityId", s.entityID)
	s.byProducer = make(map[string]*producerLink[A])
	s.byPC = make(map[runtime.AnyRef]string)
	start := runtime.MessageAdapter(ctx, func(m delivery.ConsumerStart[A]) delivery.ConsumerCommand[A] { return m })
	consumer, err := runtime.Spawn(ctx, "consumer", func() runtime.Behavior[C] { return s.cfg.newConsumer(s.entityID, start) })
	if err != nil {
		s.log.Error("sharding consumer controller: spawn the consumer failed; stopping", "err", err)
		_ = ctx.Stop(ctx.Self())
		return
	}
	ctx.WatchWith(consumer, impl.WrapConsumer[A](scConsumerStopped{}))
}

func (s *shardingConsumer[A, C]) Receive(ctx *runtime.Context[delivery.ConsumerCommand[A]], msg delivery.ConsumerCommand[A]) {
	switch m := msg.(type) {
	case *delivery.SequencedMessage[A]:
		if m == nil {
			return
		}
		if s.deliverTo == nil {
			if s.stash.Len() < s.cfg.bufferSize {
				s.stash.Push(m)
			} // beyond the bound dropped: its producer controller sends it again
			return
		}
		s.route(m)
	case delivery.ConsumerStart[A]:
		s.onStart(m)
	case delivery.DeliverThenStop[A]:
		s.stopping = true
		for _, l := range s.byProducer {
			l.cc.Tell(m)
		}
		s.maybeStop()
	default:
		s.onOwn(ctx, msg)
	}
}

// onOwn handles the entity's own messages: a consumer controller's report
// that it holds nothing, and the entity's watches.
func (s *shardingConsumer[A, C]) onOwn(ctx *runtime.Context[delivery.ConsumerCommand[A]], msg delivery.ConsumerCommand[A]) {
	if cc, handled, ok := impl.Idle(msg); ok {
		s.onIdle(cc, handled)
		return
	}
	v, _ := impl.UnwrapConsumer(msg)
	switch m := v.(type) {
	case scProducerStopped:
		s.onProducerStopped(m.pc)
	case scControllerStopped:
		s.onControllerStopped(m.producerID, m.cc)
	case scConsumerStopped:
		s.log.Debug("consumer stopped; stopping the entity")
		_ = ctx.Stop(ctx.Self())
	default:
		s.log.Warn("sharding consumer controller: message ignored", "type", fmt.Sprintf("%T", msg))
	}
}

// onStart connects the consumer: every consumer controller delivers to
// it, and what was kept is routed now.
func (s *shardingConsumer[A, C]) onStart(m delivery.ConsumerStart[A]) {
	if m.DeliverTo == nil {
		s.log.Error("ConsumerStart without a consumer ref: ignored")
		return
	}
	if err := controller.RequireLocal(s.ctx.System(), m.DeliverTo, "ConsumerStart.DeliverTo", "consumer", "sharding consumer controller"); err != nil {
		// Its consumer controllers would deliver to it: the entity
		// stops, and its consumer with it, as when it cannot spawn one.
		s.log.Error("sharding consumer controller failed; stopping", "err", err)
		_ = s.ctx.Stop(s.ctx.Self())
		return
	}
	s.deliverTo = m.DeliverTo
	for _, l := range s.byProducer {
		l.cc.Tell(m)
	}
	for s.stash.Len() > 0 {
		s.route(s.stash.Pop())
	}
}

// route hands m to the consumer controller of its producer id, made on
// its first message.
func (s *shardingConsumer[A, C]) route(m *delivery.SequencedMessage[A]) {
	l := s.byProducer[m.ProducerID]
	if l != nil && m.Generation < l.generation {
		return // a late message of a producer controller that was replaced
	}
	if l != nil && l.draining {
		if len(l.pending) < s.cfg.bufferSize {
			l.pending = append(l.pending, m)
		} // beyond the bound dropped: its producer controller sends it again
		return
	}
	if l == nil {
		self := s.ctx.Self()
		cc, err := runtime.Spawn(s.ctx, "", s.cfg.controller.Child(self), runtime.WithSupervision(runtime.StopOnFailure()))
		if err != nil {
			s.log.Error("sharding consumer controller: spawn a consumer controller failed", "producerId", m.ProducerID, "err", err)
			return
		}
		l = &producerLink[A]{cc: cc}
		s.byProducer[m.ProducerID] = l
		s.ctx.WatchWith(cc, impl.WrapConsumer[A](scControllerStopped{producerID: m.ProducerID, cc: cc}))
		cc.Tell(delivery.ConsumerStart[A]{DeliverTo: s.deliverTo})
	}
	if l.pc != m.ProducerController {
		// A new producer controller for the producer id (the old one was
		// stopped and replaced): watch it instead.
		if l.pc != nil {
			s.forgetPC(l.pc)
		}
		l.pc, l.generation = m.ProducerController, m.Generation
		s.byPC[l.pc] = m.ProducerID
		s.ctx.WatchWith(l.pc, impl.WrapConsumer[A](scProducerStopped{pc: l.pc}))
	}
	l.routed++
	l.cc.Tell(m)
}

// HoldsPassivation keeps the entity from being passivated while one of
// its consumer controllers holds a message it was given (a Delivery its
// consumer has not confirmed, or one not yet delivered), or while it keeps
// messages itself (until its consumer starts, or for the next consumer
// controller of a producer). Passivated then,
// the consumer could have processed a message whose confirmation is lost
// with it, and its producer controller would send it again to the next
// incarnation: a duplicate with nothing crashed. Once every consumer
// controller holds nothing, what the producer controllers have not heard
// confirmed is (the consumer controllers' last Acks say so as they stop).
func (s *shardingConsumer[A, C]) HoldsPassivation() bool {
	if s.stash.Len() > 0 {
		return true // kept until the consumer starts, which it is about to
	}
	for _, l := range s.byProducer {
		if l.routed != l.idleAt || len(l.pending) > 0 {
			return true
		}
	}
	return false
}

// onIdle takes consumer controller cc's word that it holds nothing of the
// first handled messages it was given.
func (s *shardingConsumer[A, C]) onIdle(cc runtime.AnyRef, handled uint64) {
	for _, l := range s.byProducer {
		if runtime.AnyRef(l.cc) == cc {
			l.idleAt = handled
			return
		}
	}
}

func (s *shardingConsumer[A, C]) forgetPC(pc runtime.AnyRef) {
	delete(s.byPC, pc)
	s.ctx.Unwatch(pc)
}

// onProducerStopped stops the consumer controller of a producer controller
// that stopped, once it has delivered what it has.
func (s *shardingConsumer[A, C]) onProducerStopped(pc runtime.AnyRef) {
	id, ok := s.byPC[pc]
	if !ok {
		return
	}
	delete(s.byPC, pc)
	if l := s.byProducer[id]; l != nil && runtime.AnyRef(l.pc) == pc && !l.draining {
		l.draining = true
		l.cc.Tell(delivery.DeliverThenStop[A]{})
	}
}

func (s *shardingConsumer[A, C]) onControllerStopped(producerID string, cc runtime.AnyRef) {
	if l := s.byProducer[producerID]; l != nil && runtime.AnyRef(l.cc) == cc {
		delete(s.byProducer, producerID)
		if l.pc != nil {
			s.forgetPC(l.pc)
		}
		// What a new producer controller sent meanwhile goes to a new
		// consumer controller now (unless the entity is stopping: then it
		// is dropped and sent again to the next incarnation).
		if !s.stopping {
			for _, m := range l.pending {
				s.route(m)
			}
		}
	}
	s.maybeStop()
}

func (s *shardingConsumer[A, C]) maybeStop() {
	if s.stopping && len(s.byProducer) == 0 {
		_ = s.ctx.Stop(s.ctx.Self())
	}
}
