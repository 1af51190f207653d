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
	to    *cell[T]
	adapt func(U) T
}

// MessageAdapter returns a ref that accepts messages of another actor's
// protocol U and delivers them to this actor as T. adapt runs on the sending
// goroutine, so it must only map the value. Watching the adapter watches the
// actor. Make it once (in Started, say) and reuse it.
func MessageAdapter[T, U any](ctx *Context[T], adapt func(U) T) Ref[U] {
	return &adapterRef[U, T]{to: ctx.c, adapt: adapt}
}

func (a *adapterRef[U, T]) Tell(msg U)        { a.to.Tell(a.adapt(msg)) }
func (a *adapterRef[U, T]) Path() string      { return a.to.Path() + "/$adapter" }
func (a *adapterRef[U, T]) target() actorCell { return a.to }
