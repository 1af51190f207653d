// Package pattern is what the work-pulling and the sharding producer
// controllers (packages delivery/workpulling and delivery/sharding) share:
// they face one producer the same way, own a durable queue the same way,
// fail the same way, and reach each worker or entity through a
// point-to-point producer controller of package delivery, made the same
// way, whose demand they track in a [DemandSet]. Each embeds a
// [Controller]; what differs (which worker or entity a message goes to,
// buffering, stats) is theirs. The point-to-point controllers are
// delivery/internal/impl's, which the public package delivery faces.
package pattern

import (
	"errors"
	"log/slog"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/controller"
	"github.com/trellis-go/trellis/delivery/internal/durablecalls"
	"github.com/trellis-go/trellis/delivery/internal/impl"
	"github.com/trellis-go/trellis/runtime"
)

// ErrBufferFull is wrapped by the error with which a work-pulling or
// sharding producer controller stops when its producer sends more messages
// than its buffer holds, which only a producer that does not wait for
// RequestNext can do.
var ErrBufferFull = errors.New("delivery: buffer full")

// Controller is the part of a work-pulling or sharding producer
// controller that is not about its workers or entities. C is the
// controller's command type, N its RequestNext type.
type Controller[A, C, N any] struct {
	kind string // "work-pulling" or "sharding": names the controller in its log and errors
	Cfg  *impl.PatternProducer[A]
	Ctx  *runtime.Context[C]
	self runtime.Ref[C]
	Log  *slog.Logger

	Producer  runtime.Ref[N]
	Requested bool // a RequestNext is out and unused
	Loaded    bool // the durable state is loaded (at once without a queue)
	Failed    bool

	CurrentSeqNr impl.SeqNr // the next message's number
	generation   uint64     // of the internal producer controllers: the queue's incarnation
	Dq           *durablecalls.Calls[A, C]
}

// NewController makes the controller of kind ("work-pulling" or
// "sharding") with cfg's hooks; it is loaded at once if it has no queue.
func NewController[A, C, N any](kind string, cfg *impl.PatternProducer[A]) Controller[A, C, N] {
	return Controller[A, C, N]{kind: kind, Cfg: cfg, Loaded: cfg.Queue == nil, CurrentSeqNr: 1}
}

// Started takes the actor's context and logger when it starts and, with a
// durable queue, starts loading its state; wrap makes the outcomes of the
// queue's calls commands of the controller.
func (f *Controller[A, C, N]) Started(ctx *runtime.Context[C], log *slog.Logger, wrap func(durablecalls.Msg[A]) C) {
	f.Ctx, f.self, f.Log = ctx, ctx.Self(), log
	if f.Cfg.Queue != nil {
		f.Dq = durablecalls.Start(ctx, f.Cfg.Queue, f.Cfg.ID, f.Cfg.Durable, f.Log, wrap)
		f.Dq.LoadState()
	}
}

// Stopped ends the durable queue's calls when the actor stops or restarts.
func (f *Controller[A, C, N]) Stopped() {
	if f.Dq != nil {
		f.Dq.Stop()
	}
}

// Fail stops the controller: something it cannot recover from happened.
func (f *Controller[A, C, N]) Fail(err error) {
	if f.Failed {
		return
	}
	f.Failed = true
	if f.Dq != nil {
		f.Dq.LeaveDrain() // it takes no more messages
	}
	f.Log.Error(f.kind+" producer controller failed", "err", err)
	_ = f.Ctx.Stop(f.self)
}

// OnStart takes the producer of the Start message named start. A new
// producer (after a producer restart, say) gets again the RequestNext the
// old one did not use, since it may never have seen it; otherwise it gets
// one as soon as the controller may send it (maybeRequestNext). A producer
// that is not local to the controller fails it.
func (f *Controller[A, C, N]) OnStart(start string, producer runtime.Ref[N], sendRequestNext, maybeRequestNext func()) {
	if producer == nil {
		f.Log.Error(start + " without a producer ref: ignored")
		return
	}
	if err := controller.RequireLocal(f.Ctx.System(), producer, start+".Producer", "producer", f.kind+" producer controller"); err != nil {
		f.Fail(err)
		return
	}
	f.Producer = producer
	if f.Requested {
		sendRequestNext()
		return
	}
	maybeRequestNext()
}

// Storing reports whether a message is sent to the durable queue and not
// yet stored.
func (f *Controller[A, C, N]) Storing() bool { return f.Dq != nil && f.Dq.Storing() }

// SpawnChild spawns the point-to-point producer controller of one worker
// or entity, with the producer id producerID and no durable queue (the
// controller stores for it), connected to consumer. Its RequestNexts come
// to the controller as next, its replies to asks sent with replyTo (one
// per message, in order) as confirmed, and its stop as stopped.
func (f *Controller[A, C, N]) SpawnChild(producerID string, consumer runtime.Ref[impl.ConsumerCommand[A]],
	next, confirmed, stopped C) (pc runtime.Ref[impl.ProducerCommand[A]], replyTo runtime.Ref[impl.SeqNr], err error) {
	pc, err = runtime.Spawn(f.Ctx, "", f.Cfg.Child(producerID, f.generation), runtime.WithSupervision(runtime.StopOnFailure()))
	if err != nil {
		return nil, nil, err
	}
	replyTo = runtime.MessageAdapter(f.Ctx, func(impl.SeqNr) C { return confirmed })
	f.Ctx.WatchWith(pc, stopped)
	pc.Tell(impl.ProducerStart[A]{Producer: runtime.MessageAdapter(f.Ctx, func(impl.RequestNext[A]) C { return next })})
	pc.Tell(impl.RegisterConsumer[A]{ConsumerController: consumer})
	return pc, replyTo, nil
}

// StoreNext stores msg in the durable queue under the next sequence number
// and qualifier (the worker or entity it goes to); ack says the producer
// asked for a reply; traceContext is the send's (see
// durable.MessageSent.Trace). One store at a time: the outcome comes to
// onDurable.
func (f *Controller[A, C, N]) StoreNext(msg A, ack bool, qualifier, traceContext string) {
	f.Dq.StoreSent(durable.MessageSent[A]{
		SeqNr:     f.CurrentSeqNr,
		Message:   msg,
		Ack:       ack,
		Qualifier: qualifier,
		Timestamp: f.Dq.Now(),
		Trace:     traceContext,
	})
}

// OnDurable handles the outcome of a durable queue call, its deadline or
// its backoff: a queue that keeps failing fails the controller, a loaded
// state goes to loaded, the end of a storeNext to stored.
func (f *Controller[A, C, N]) OnDurable(m durablecalls.Msg[A], loaded func(durable.State[A]), stored func()) {
	if f.Dq == nil {
		return
	}
	switch out := f.Dq.Handle(m); {
	case out.Err != nil:
		f.Fail(out.Err)
	case out.Loaded != nil:
		f.generation = out.Loaded.Incarnation
		loaded(*out.Loaded)
	case out.Stored > 0: // one message: a pattern controller stores one at a time
		stored()
	}
}

// DemandSet holds the workers or entities that have demand, in no order.
// Each member knows its index in the set (-1 when it is not in it), so it
// joins and leaves in constant time.
type DemandSet[T interface{ DemandIndex() *int }] []T

// Add puts x, which is not in the set, in it.
func (s *DemandSet[T]) Add(x T) {
	*x.DemandIndex() = len(*s)
	*s = append(*s, x)
}

// Remove takes x out of the set, and reports whether it was in it.
func (s *DemandSet[T]) Remove(x T) bool {
	i := *x.DemandIndex()
	if i < 0 {
		return false
	}
	last := len(*s) - 1
	(*s)[i] = (*s)[last]
	*(*s)[i].DemandIndex() = i
	var zero T
	(*s)[last] = zero
	*s = (*s)[:last]
	*x.DemandIndex() = -1
	return true
}
