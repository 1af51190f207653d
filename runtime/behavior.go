package runtime

// Behavior handles an actor's messages, one at a time. The value is the
// actor's state: the factory given to [Spawn] builds a fresh one when the
// actor starts and again when it is restarted after a failure.
type Behavior[T any] interface {
	Receive(ctx *Context[T], msg T)
}

// SignalHandler is implemented by behaviors that want lifecycle signals:
// [Started], [Stopped], [Restarting] and [Terminated]. Only behaviors that
// implement it are sent them, so an actor that ignores signals costs less.
type SignalHandler[T any] interface {
	OnSignal(ctx *Context[T], sig Signal)
}

// Signal is a lifecycle event delivered to [SignalHandler.OnSignal].
type Signal interface{ signal() }

// Started is the first thing an actor handles, before any message, after it
// is spawned and after every restart.
type Started struct{}

// Stopped is the last thing an actor handles: its children have stopped,
// its timers are cancelled, and no more messages will arrive.
type Stopped struct{}

// Restarting is handled by the failed incarnation just before it is
// replaced by a fresh one from the factory. Cause is what the panic carried.
type Restarting struct{ Cause any }

// Terminated says that an actor this one watched (with [Context.Watch]) has
// stopped.
type Terminated struct{ Ref AnyRef }

func (Started) signal()    {}
func (Stopped) signal()    {}
func (Restarting) signal() {}
func (Terminated) signal() {}

// Receive is a Behavior made of a function, for actors whose state fits in
// a closure. [ReceiveFunc] makes one without spelling out T.
type Receive[T any] func(ctx *Context[T], msg T)

// Receive calls f.
func (f Receive[T]) Receive(ctx *Context[T], msg T) { f(ctx, msg) }

// ReceiveFunc makes a Behavior of f; T is inferred from f:
//
//	runtime.Spawn(sys, "echo", func() runtime.Behavior[Msg] {
//		seen := 0
//		return runtime.ReceiveFunc(func(ctx *runtime.Context[Msg], m Msg) { seen++ })
//	})
func ReceiveFunc[T any](f func(ctx *Context[T], msg T)) Behavior[T] { return Receive[T](f) }

// Funcs is a Behavior of two functions: one per message and, when not nil,
// one per signal.
type Funcs[T any] struct {
	Message func(ctx *Context[T], msg T)
	Signal  func(ctx *Context[T], sig Signal)
}

// Receive calls Message.
func (f Funcs[T]) Receive(ctx *Context[T], msg T) { f.Message(ctx, msg) }

// OnSignal calls Signal when it is set.
func (f Funcs[T]) OnSignal(ctx *Context[T], sig Signal) {
	if f.Signal != nil {
		f.Signal(ctx, sig)
	}
}

var (
	_ Behavior[int]      = Receive[int](nil)
	_ Behavior[int]      = Funcs[int]{}
	_ SignalHandler[int] = Funcs[int]{}
)
