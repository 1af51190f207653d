package delivery

// What the work-pulling and the sharding producer controllers share: they
// face one producer the same way, own a durable queue the same way, fail
// the same way, and reach each worker or entity through a point-to-point
// producer controller of their own, made the same way, whose demand they
// track in a demandSet. Each embeds a patternProducer; what differs (which
// worker or entity a message goes to, buffering, stats) is theirs.

import (
	"log/slog"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/runtime"
)

// patternProducer is the part of a work-pulling or sharding producer
// controller that is not about its workers or entities. C is the
// controller's command type, N its RequestNext type.
type patternProducer[A, C, N any] struct {
	kind string // "work-pulling" or "sharding": names the controller in its log and errors
	cfg  *producerConfig[A]
	ctx  *runtime.Context[C]
	self runtime.Ref[C]
	log  *slog.Logger

	producer  runtime.Ref[N]
	requested bool // a RequestNext is out and unused
	loaded    bool // the durable state is loaded (at once without a queue)
	failed    bool

	currentSeqNr SeqNr  // the next message's number
	generation   uint64 // of the internal producer controllers: the queue's incarnation
	dq           *durableCalls[A, C]
}

func newPatternProducer[A, C, N any](kind string, cfg *producerConfig[A]) patternProducer[A, C, N] {
	return patternProducer[A, C, N]{kind: kind, cfg: cfg, loaded: cfg.queue == nil, currentSeqNr: 1}
}

// started takes the actor's context and logger when it starts and, with a
// durable queue, starts loading its state; wrap makes the outcomes of the
// queue's calls commands of the controller.
func (f *patternProducer[A, C, N]) started(ctx *runtime.Context[C], log *slog.Logger, wrap func(durableMsg[A]) C) {
	f.ctx, f.self, f.log = ctx, ctx.Self(), log
	if f.cfg.queue != nil {
		f.dq = startDurableCalls(ctx, f.cfg.queue, f.cfg.id, f.cfg.settings, f.log, wrap)
		f.dq.loadState()
	}
}

// stopped ends the durable queue's calls when the actor stops or restarts.
func (f *patternProducer[A, C, N]) stopped() {
	if f.dq != nil {
		f.dq.stop()
	}
}

// fail stops the controller: something it cannot recover from happened.
func (f *patternProducer[A, C, N]) fail(err error) {
	if f.failed {
		return
	}
	f.failed = true
	f.log.Error(f.kind+" producer controller failed", "err", err)
	_ = f.ctx.Stop(f.self)
}

// onStart takes the producer of the Start message named start. A new
// producer (after a producer restart, say) gets again the RequestNext the
// old one did not use, since it may never have seen it; otherwise it gets
// one as soon as the controller may send it (maybeRequestNext). A producer
// that is not local to the controller fails it.
func (f *patternProducer[A, C, N]) onStart(start string, producer runtime.Ref[N], sendRequestNext, maybeRequestNext func()) {
	if producer == nil {
		f.log.Error(start + " without a producer ref: ignored")
		return
	}
	if err := requireLocal(f.ctx.System(), producer, start+".Producer", "producer", f.kind+" producer controller"); err != nil {
		f.fail(err)
		return
	}
	f.producer = producer
	if f.requested {
		sendRequestNext()
		return
	}
	maybeRequestNext()
}

func (f *patternProducer[A, C, N]) storing() bool { return f.dq != nil && f.dq.storing() }

// spawnChild spawns the point-to-point producer controller of one worker
// or entity, with the producer id producerID and no durable queue (the
// controller stores for it), connected to consumer. Its RequestNexts come
// to the controller as next, its replies to asks sent with replyTo (one
// per message, in order) as confirmed, and its stop as stopped.
func (f *patternProducer[A, C, N]) spawnChild(producerID string, consumer runtime.Ref[ConsumerCommand[A]],
	next, confirmed, stopped C) (pc runtime.Ref[ProducerCommand[A]], replyTo runtime.Ref[SeqNr], err error) {
	cfg := *f.cfg
	cfg.id, cfg.queue, cfg.generation = producerID, nil, f.generation
	pc, err = runtime.Spawn(f.ctx, "", func() runtime.Behavior[ProducerCommand[A]] { return newProducer(&cfg) },
		runtime.WithSupervision(runtime.StopOnFailure()))
	if err != nil {
		return nil, nil, err
	}
	replyTo = runtime.MessageAdapter(f.ctx, func(SeqNr) C { return confirmed })
	f.ctx.WatchWith(pc, stopped)
	pc.Tell(ProducerStart[A]{Producer: runtime.MessageAdapter(f.ctx, func(RequestNext[A]) C { return next })})
	pc.Tell(RegisterConsumer[A]{ConsumerController: consumer})
	return pc, replyTo, nil
}

// storeNext stores msg in the durable queue under the next sequence number
// and qualifier (the worker or entity it goes to); ack says the producer
// asked for a reply. One store at a time: the outcome comes to onDurable.
func (f *patternProducer[A, C, N]) storeNext(msg A, ack bool, qualifier string) {
	f.dq.storeSent(durable.MessageSent[A]{
		SeqNr:     f.currentSeqNr,
		Message:   msg,
		Ack:       ack,
		Qualifier: qualifier,
		Timestamp: f.dq.now(),
	})
}

// onDurable handles the outcome of a durable queue call, its deadline or
// its backoff: a queue that keeps failing fails the controller, a loaded
// state goes to loaded, the end of a storeNext to stored.
func (f *patternProducer[A, C, N]) onDurable(m durableMsg[A], loaded func(durable.State[A]), stored func()) {
	if f.dq == nil {
		return
	}
	switch out := f.dq.handle(m); {
	case out.err != nil:
		f.fail(out.err)
	case out.loaded != nil:
		f.generation = out.loaded.Incarnation
		loaded(*out.loaded)
	case out.stored > 0: // one message: a pattern controller stores one at a time
		stored()
	}
}

// demandSet holds the workers or entities that have demand, in no order.
// Each member knows its index in the set (-1 when it is not in it), so it
// joins and leaves in constant time.
type demandSet[T interface{ demandIndex() *int }] []T

// add puts x, which is not in the set, in it.
func (s *demandSet[T]) add(x T) {
	*x.demandIndex() = len(*s)
	*s = append(*s, x)
}

// remove takes x out of the set, and reports whether it was in it.
func (s *demandSet[T]) remove(x T) bool {
	i := *x.demandIndex()
	if i < 0 {
		return false
	}
	last := len(*s) - 1
	(*s)[i] = (*s)[last]
	*(*s)[i].demandIndex() = i
	var zero T
	(*s)[last] = zero
	*s = (*s)[:last]
	*x.demandIndex() = -1
	return true
}
