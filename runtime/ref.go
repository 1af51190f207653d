package runtime

// AnyRef is a reference to an actor of any message type: what Watch,
// Terminated and Stop take.
type AnyRef interface {
	// Path names the actor, such as /user/orders.
	Path() string
	// target is the actor behind the ref, or nil for refs that are not
	// actors (an ask's reply address).
	target() actorCell
}

// Ref is the address of an actor that handles messages of type T. Tell never
// blocks; a message to an actor that has stopped is a dead letter. Refs are
// comparable and safe to share between goroutines.
type Ref[T any] interface {
	AnyRef
	Tell(msg T)
}

var _ Ref[int] = (*cell[int])(nil)

// adapterRef turns messages of type U into the target actor's type T.
type adapterRef[U, T any] struct {
	to     *cell[T]
	adapt  func(U) T
	direct bool // see DirectAdapter
}

// MessageAdapter returns a ref that accepts messages of another actor's
// protocol U and delivers them to this actor as T. adapt runs on the sending
// goroutine, so it must only map the value. Watching the adapter watches the
// actor. Make it once (in Started, say) and reuse it.
func MessageAdapter[T, U any](ctx *Context[T], adapt func(U) T) Ref[U] {
	return &adapterRef[U, T]{to: ctx.c, adapt: adapt}
}

func (a *adapterRef[U, T]) Tell(msg U) {
	how := wakeSchedule
	if a.direct {
		how = wakeDirect
	}
	m := a.adapt(msg)
	if ok, _ := a.to.tellWaking(m, how); !ok {
		a.to.sys.deadLetter(a.to, m)
	}
}

// DirectAdapter is [MessageAdapter], except that a message sent through
// it while the actor is idle, with nothing queued, is handled at once on the
// sender's goroutine, and so is the mail that comes meanwhile (up to the
// throughput budget), instead of the mailbox waiting for a worker. Order
// and one-at-a-time handling are kept.
//
// It is for actors whose handlers are short and never block, such as
// reliable delivery's controllers, on the path where an actor that keeps
// them busy talks to them: a request/response loop then costs one actor
// turn per round trip instead of two. The sender waits while the handler
// runs, and may be any goroutine.
func DirectAdapter[T, U any](ctx *Context[T], adapt func(U) T) Ref[U] {
	return &adapterRef[U, T]{to: ctx.c, adapt: adapt, direct: true}
}

// TellPostponable tells ref msg, except that while ref's actor postpones
// its wake-ups ([Context.PostponeWakeups]) msg is held: it waits until the
// actor stops postponing. Use it for mail that the receiver has said can
// wait.
//
// Postponable mail waits in a queue of its own, which the actor empties
// before its mailbox: it keeps its order with the sender's other
// postponable mail, but not with the sender's plain mail. A sender whose
// messages must stay in order sends them all the same way. (The queue of
// its own keeps a sender that streams to a busy actor from another
// processor off the lock the actor's own runs take.)
func TellPostponable[T any](ref Ref[T], msg T) {
	c, ok := ref.(*cell[T])
	if !ok {
		ref.Tell(msg)
		return
	}
	if !c.tellPostponable(msg) {
		c.sys.deadLetter(c, msg)
	}
}

func (a *adapterRef[U, T]) Path() string      { return a.to.Path() + "/$adapter" }
func (a *adapterRef[U, T]) target() actorCell { return a.to }
