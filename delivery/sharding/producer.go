package sharding

// The sharding producer controller: one producer sending to any entity of
// one sharded entity type. Its protocol and behavior are here; the
// entities' producer controllers (demand, buffers, cleanup, waking) are in
// entities.go, its durable queue in durable.go, what it shares with the
// work-pulling producer controller in delivery/internal/pattern, and the
// entity side in consumer.go.

import (
	"context"
	"fmt"
	"maps"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/controller"
	"github.com/trellis-go/trellis/delivery/internal/durablecalls"
	"github.com/trellis-go/trellis/delivery/internal/impl"
	"github.com/trellis-go/trellis/delivery/internal/pattern"
	"github.com/trellis-go/trellis/delivery/internal/ring"
	"github.com/trellis-go/trellis/internal/tracing"
	"github.com/trellis-go/trellis/runtime"
)

// Command is what a sharding producer controller handles:
// [Start] and [GetStats]. The producer's messages reach it through the refs of
// [RequestNext].
type Command[A any] interface{ command(A) }

// Start connects the producer to its sharding producer controller,
// which answers with a [RequestNext]. Sending it again (after a
// producer restart) moves the flow to the new producer. The producer must
// be local to its controller, as for [delivery.ProducerStart]: any other makes the
// controller stop with [delivery.ErrNotLocal].
type Start[A any] struct {
	Producer runtime.Ref[RequestNext[A]]
}

// Envelope is a message for one entity.
type Envelope[A any] struct {
	EntityID string
	Message  A
}

// MessageWithConfirmation is a message for one entity whose
// sequence number (the sharding producer controller's numbering) is sent
// to ReplyTo once the entity has confirmed it or, with a durable queue,
// once it is stored.
type MessageWithConfirmation[A any] struct {
	EntityID string
	Message  A
	ReplyTo  runtime.Ref[delivery.SeqNr]
}

// RequestNext allows the producer to send one message, to any
// entity: to SendNextTo, or to AskNextTo with a confirmation reply. A
// message to an entity without demand is buffered until the entity has
// demand; the controller sends no RequestNext while its buffer is full.
// The producer should prefer the entities with demand. The slice and the
// map are the producer's to read, never to modify.
type RequestNext[A any] struct {
	SendNextTo runtime.Ref[Envelope[A]]
	AskNextTo  runtime.Ref[MessageWithConfirmation[A]]
	// EntitiesWithDemand are the entities that can take a message at
	// once, in no particular order.
	EntitiesWithDemand []string
	// BufferedForEntitiesWithoutDemand is how many messages are buffered
	// for each entity that has some.
	BufferedForEntitiesWithoutDemand map[string]int
	// traced is the controller, when its System traces: SendContext and
	// AskContext hand it the message with its trace context.
	traced runtime.Ref[Command[A]]
}

// SendContext sends m as SendNextTo does, carrying the trace context of
// ctx's span when the controller's System traces, as
// delivery.RequestNext.SendContext does.
func (r RequestNext[A]) SendContext(ctx context.Context, m Envelope[A]) {
	if tc := r.capture(ctx); tc != "" {
		r.traced.Tell(&spEntry[A]{entityID: m.EntityID, msg: m.Message, trace: tc})
		return
	}
	r.SendNextTo.Tell(m)
}

// AskContext sends m as AskNextTo does, carrying the trace context of
// ctx's span as SendContext does.
func (r RequestNext[A]) AskContext(ctx context.Context, m MessageWithConfirmation[A]) {
	if tc := r.capture(ctx); tc != "" {
		r.traced.Tell(&spEntry[A]{entityID: m.EntityID, msg: m.Message, replyTo: m.ReplyTo, trace: tc})
		return
	}
	r.AskNextTo.Tell(m)
}

// capture is the trace context of ctx to carry: "" when the controller's
// System does not trace or ctx holds no span.
func (r RequestNext[A]) capture(ctx context.Context) string {
	if r.traced == nil {
		return ""
	}
	return tracing.Capture(ctx)
}

// GetStats asks a sharding producer controller for its
// [Stats].
type GetStats[A any] struct {
	ReplyTo runtime.Ref[Stats]
}

// Stats describe a sharding producer controller's entities.
type Stats struct {
	// Entities is how many entities have a producer controller: those
	// sent to and not cleaned up since.
	Entities int
	// EntitiesWithDemand is how many of them may be sent a message now.
	EntitiesWithDemand int
	// Buffered is how many messages wait for their entity's demand (or,
	// with a durable queue, to be stored).
	Buffered int
	// Unconfirmed is how many messages entities have not yet confirmed, as
	// far as the controller knows (see workpulling.WorkerStats.Unconfirmed).
	Unconfirmed int
}

func (Start[A]) command(A)    {}
func (GetStats[A]) command(A) {}

// EntityRegion is where a sharding producer controller finds its entities:
// the *runtime.Sharding of their entity type, whose entities are
// [NewConsumerController]s, or anything that forwards to one.
type EntityRegion[A any] interface {
	EntityRef(entityID string) runtime.Ref[delivery.ConsumerCommand[A]]
}

// NewProducerController validates the settings and returns the
// factory of a sharding producer controller for producerID, to give to
// runtime.Spawn. Prefer [SpawnProducerController], which also
// makes it stop, rather than restart empty, if it fails.
//
// For each entity it sends to, the controller runs a producer controller
// of its own (producer id producerID-entityID) whose consumer is the
// entity's ref in region: its first message starts the entity, and the
// entity's [NewConsumerController] makes the consumer controller that
// answers it. The messages to each entity arrive in the order they were
// sent, without loss or duplicates while neither side crashes. An entity
// that is passivated with messages it has not confirmed is started again
// by their resending after ResendFirstUnconfirmedIdleTimeout; the
// producer controller of an entity unused for CleanupUnusedAfter is
// stopped.
//
// With a durable queue ([delivery.WithDurableQueue]) every message is stored as it
// arrives, qualified by its entity id, and a new controller with the same
// producer id sends every unconfirmed message again, in order.
func NewProducerController[A any](producerID string, region EntityRegion[A], settings Settings,
	opts ...delivery.ProducerOption[A]) (func() runtime.Behavior[Command[A]], error) {
	s, err := settings.validate()
	if err != nil {
		return nil, fmt.Errorf("sharding producer controller %q: %w", producerID, err)
	}
	if controller.IsNil(region) {
		return nil, fmt.Errorf("sharding producer controller %q: %w: the entity region is nil", producerID, delivery.ErrInvalidSettings)
	}
	cfg, err := impl.NewPatternProducer(producerID, s.Producer, opts)
	if err != nil {
		return nil, fmt.Errorf("sharding %w", err)
	}
	return func() runtime.Behavior[Command[A]] { return newShardingProducer(cfg, region, s) }, nil
}

// SpawnProducerController spawns a sharding producer controller
// under on, named name. It stops if it fails.
func SpawnProducerController[A any](on runtime.Spawner, name, producerID string, region EntityRegion[A],
	settings Settings, opts ...delivery.ProducerOption[A]) (runtime.Ref[Command[A]], error) {
	factory, err := NewProducerController(producerID, region, settings, opts...)
	if err != nil {
		return nil, err
	}
	return controller.Spawn(on, name, fmt.Sprintf("sharding producer controller %q", producerID), factory)
}

// spEntry is one message of the producer, from its arrival until its
// entity confirms it; also the message by which the SendNextTo and
// AskNextTo adapters hand it to the controller.
type spEntry[A any] struct {
	entityID string
	msg      A
	replyTo  runtime.Ref[delivery.SeqNr] // the producer's ask, until it is answered
	seqNr    delivery.SeqNr              // the controller's number (under which it is stored, if durable)
	trace    string                      // the send's trace context, "" when untraced
	// replayed says that the message was loaded from the durable queue:
	// an earlier controller of the queue sent it, or was about to.
	replayed bool
}

func (*spEntry[A]) command(A) {}

// spDurable is the outcome of a durable queue call, its deadline or its
// backoff.
type spDurable[A any] struct{ durablecalls.Msg[A] }

func (spDurable[A]) command(A) {}

// shardingProducer is the sharding producer controller's behavior and state.
type shardingProducer[A any] struct {
	pattern.Controller[A, Command[A], RequestNext[A]]
	settings Settings
	region   EntityRegion[A]
	sendNext runtime.Ref[Envelope[A]]
	askNext  runtime.Ref[MessageWithConfirmation[A]]

	entities map[string]*entityOut[A]
	demand   pattern.DemandSet[*entityOut[A]] // the entities with demand
	buffered int                              // messages in the entities' buffers and in arrivals
	// bufferedBy counts the buffered messages of each entity that has
	// some, for RequestNext; snapshot holds the slice and map last sent,
	// reused until something changes.
	bufferedBy map[string]int
	snapshot   RequestNext[A]
	stale      bool

	arrivals ring.Ring[*spEntry[A]] // durable: messages waiting to be stored
	storingE *spEntry[A]
}

func newShardingProducer[A any](cfg *impl.PatternProducer[A], region EntityRegion[A], s Settings) *shardingProducer[A] {
	return &shardingProducer[A]{
		Controller: pattern.NewController[A, Command[A], RequestNext[A]]("sharding", cfg),
		settings:   s,
		region:     region,
		entities:   make(map[string]*entityOut[A]),
		bufferedBy: make(map[string]int),
		stale:      true,
	}
}

// Timers of the controller: they look at every entity, so they run at half
// the period they check for.
type spCleanupTick[A any] struct{}
type spWakeTick[A any] struct{}
type spCleanupKey struct{}
type spWakeKey struct{}

func (spCleanupTick[A]) command(A) {}
func (spWakeTick[A]) command(A)    {}

func (p *shardingProducer[A]) OnSignal(ctx *runtime.Context[Command[A]], sig runtime.Signal) {
	switch sig.(type) {
	case runtime.Started:
		p.Started(ctx, ctx.Log().With("producerId", p.Cfg.ID), func(m durablecalls.Msg[A]) Command[A] { return spDurable[A]{m} })
		if ctx.System().Tracer() != nil {
			p.snapshot.traced = ctx.Self()
		}
		p.sendNext = runtime.DirectAdapter(ctx, func(m Envelope[A]) Command[A] {
			return &spEntry[A]{entityID: m.EntityID, msg: m.Message}
		})
		p.askNext = runtime.DirectAdapter(ctx, func(m MessageWithConfirmation[A]) Command[A] {
			return &spEntry[A]{entityID: m.EntityID, msg: m.Message, replyTo: m.ReplyTo}
		})
		ctx.Timers().StartPeriodic(spCleanupKey{}, spCleanupTick[A]{}, max(p.settings.CleanupUnusedAfter/2, 1))
		ctx.Timers().StartPeriodic(spWakeKey{}, spWakeTick[A]{}, max(p.settings.ResendFirstUnconfirmedIdleTimeout/2, 1))
	case runtime.Stopped, runtime.Restarting:
		p.Stopped()
	}
}

func (p *shardingProducer[A]) Receive(_ *runtime.Context[Command[A]], msg Command[A]) {
	if p.Failed {
		return
	}
	switch m := msg.(type) {
	case *spEntry[A]:
		p.onMessage(m)
	case spEntityNext[A]:
		p.onEntityDemand(m.e)
	case spConfirmed[A]:
		p.onEntityConfirmed(m.e)
	case spChildStopped[A]:
		if !m.e.gone {
			p.Fail(fmt.Errorf("the producer controller of entity %q stopped: it failed (see its error)", m.e.id))
		}
	case spCleanupTick[A]:
		p.cleanup()
	case spWakeTick[A]:
		p.wake()
	case Start[A]:
		p.OnStart("sharding.Start", m.Producer, p.sendRequestNext, p.maybeRequestNext)
	case GetStats[A]:
		p.onStats(m)
	case spDurable[A]:
		p.OnDurable(m.Msg, p.onLoaded, p.onStored)
	}
}

func (p *shardingProducer[A]) onStats(m GetStats[A]) {
	if m.ReplyTo == nil {
		return
	}
	unconfirmed := 0
	for _, e := range p.entities {
		unconfirmed += e.unconfirmed.Len()
	}
	m.ReplyTo.Tell(Stats{Entities: len(p.entities), EntitiesWithDemand: len(p.demand), Buffered: p.buffered, Unconfirmed: unconfirmed})
}

// onMessage takes a message from the producer: stored first with a
// durable queue, then sent to its entity or buffered for it.
func (p *shardingProducer[A]) onMessage(e *spEntry[A]) {
	p.Requested = false
	if p.Dq != nil {
		if p.Loaded && !p.Storing() && p.arrivals.Len() == 0 {
			p.store(e)
			return
		}
		if !p.admit() {
			return
		}
		p.arrivals.Push(e)
		p.buffered++
		return
	}
	e.seqNr = p.CurrentSeqNr
	p.CurrentSeqNr++
	if !p.hasDemand(e.entityID) && !p.admit() {
		return
	}
	p.accept(e)
	p.maybeRequestNext()
}

// admit checks that one more message fits in the buffer, and fails the
// controller if not.
func (p *shardingProducer[A]) admit() bool {
	if p.buffered < p.settings.BufferSize {
		return true
	}
	p.Fail(fmt.Errorf("%w: %d messages are buffered for entities without demand (sharding.Settings.BufferSize); the producer must wait for RequestNext",
		ErrBufferFull, p.buffered))
	return false
}

// maybeRequestNext gives the producer permission for one more message when
// the buffer has room and nothing else waits.
func (p *shardingProducer[A]) maybeRequestNext() {
	if p.Producer == nil || p.Requested || p.Failed || !p.Loaded || p.Storing() || p.arrivals.Len() > 0 ||
		p.buffered >= p.settings.BufferSize {
		return
	}
	p.Requested = true
	p.sendRequestNext()
}

func (p *shardingProducer[A]) sendRequestNext() {
	if p.stale {
		// A fresh snapshot: the producer may still be reading the last one.
		ids := make([]string, len(p.demand))
		for i, e := range p.demand {
			ids[i] = e.id
		}
		p.snapshot.EntitiesWithDemand = ids
		p.snapshot.BufferedForEntitiesWithoutDemand = nil
		if len(p.bufferedBy) > 0 {
			p.snapshot.BufferedForEntitiesWithoutDemand = maps.Clone(p.bufferedBy)
		}
		p.stale = false
	}
	p.snapshot.SendNextTo, p.snapshot.AskNextTo = p.sendNext, p.askNext
	p.Producer.Tell(p.snapshot)
}
