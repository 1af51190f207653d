package runtime

import (
	"log/slog"
	"slices"
)

// Context is an actor's view of itself and the runtime. It is valid only on
// the actor's own goroutine, inside Receive or OnSignal.
type Context[T any] struct{ c *cell[T] }

// Self is the actor's own ref.
func (ctx *Context[T]) Self() Ref[T] { return ctx.c }

// System is the actor system the actor runs in.
func (ctx *Context[T]) System() *System { return ctx.c.sys }

// Log is the system's logger with the actor's path as attribute "actor".
func (ctx *Context[T]) Log() *slog.Logger { return ctx.c.logger() }

// Become replaces the actor's behavior from the next message on. A restart
// after a failure goes back to the factory's behavior.
func (ctx *Context[T]) Become(b Behavior[T]) { ctx.c.setBehavior(b) }

// Stop stops the actor itself (after the current message) or one of its
// children. Stopping is asynchronous: watch the actor to learn when it is done.
func (ctx *Context[T]) Stop(ref AnyRef) error {
	t := ref.target()
	if t == actorCell(ctx.c) {
		ctx.c.stopSelf = true
		return nil
	}
	if x := ctx.c.x; x != nil {
		for _, child := range x.children {
			if child == t {
				t.sendSystem(sysMsg{kind: sysStop})
				return nil
			}
		}
	}
	return ErrNotChild
}

// TakeQueued appends to dst, in order, up to max of the messages that
// were queued behind the one being handled and taken from the mailbox with
// it, and returns it: the actor handles them now, with this one (one write
// for several commands, say), and they are not delivered again. It takes
// none while stashed messages are due first, while system messages wait
// (a stop, a watch, a timer) or once the actor is stopping, so that what
// they would change comes first. Messages that arrive while this one is
// handled are not among them: they come after, as always.
func (ctx *Context[T]) TakeQueued(max int, dst []T) []T { return ctx.c.takeQueued(max, dst) }

// PostponeWakeups says whether mail sent to the actor with
// [TellPostponable] is held: while it is on, such mail neither wakes the
// actor nor is handled; it waits, in order, until the actor turns it off,
// and is then handled before the mailbox. Other mail, system messages
// (timers, watches) and mail through a [DirectAdapter] wake the actor as
// always. An actor that waits for one particular message (a reply it will
// get through a DirectAdapter) turns it on while it waits, so that mail
// that can wait does not make it run in between, and is taken in one batch
// afterwards. A restart turns it off.
func (ctx *Context[T]) PostponeWakeups(on bool) {
	if ctx.c.postpone.Load() != on {
		ctx.c.postpone.Store(on)
	}
}

// Children are the actor's children that have not yet stopped.
func (ctx *Context[T]) Children() []AnyRef {
	if ctx.c.x == nil {
		return nil
	}
	out := make([]AnyRef, 0, len(ctx.c.x.children))
	for _, child := range ctx.c.x.children {
		out = append(out, child)
	}
	slices.SortFunc(out, func(a, b AnyRef) int {
		switch pa, pb := a.Path(), b.Path(); {
		case pa < pb:
			return -1
		case pa > pb:
			return 1
		}
		return 0
	})
	return out
}

// Child is the child with the given name, if it has not stopped.
func (ctx *Context[T]) Child(name string) (AnyRef, bool) {
	if ctx.c.x == nil {
		return nil, false
	}
	child, ok := ctx.c.x.children[name]
	return child, ok
}

// Watch asks for the [Terminated] signal when ref's actor stops; if it has
// already stopped, the signal comes at once. Watching a ref that is not an
// actor (an ask's reply address) does nothing.
func (ctx *Context[T]) Watch(ref AnyRef) { ctx.watch(ref, nil) }

// WatchWith is Watch, but msg is delivered as a message instead of the
// Terminated signal.
func (ctx *Context[T]) WatchWith(ref AnyRef, msg T) { ctx.watch(ref, &msg) }

func (ctx *Context[T]) watch(ref AnyRef, msg *T) {
	t := ref.target()
	if t == nil || t == actorCell(ctx.c) {
		return
	}
	x := ctx.c.ext()
	if x.watching == nil {
		x.watching = make(map[actorCell]*T)
	}
	_, already := x.watching[t]
	x.watching[t] = msg
	if !already {
		t.sendSystem(sysMsg{kind: sysWatch, ref: ctx.c})
	}
}

// Unwatch cancels Watch or WatchWith: no Terminated for ref arrives after it,
// even one already on its way.
func (ctx *Context[T]) Unwatch(ref AnyRef) {
	t := ref.target()
	if t == nil || ctx.c.x == nil {
		return
	}
	if _, ok := ctx.c.x.watching[t]; ok {
		delete(ctx.c.x.watching, t)
		t.sendSystem(sysMsg{kind: sysUnwatch, ref: ctx.c})
	}
}

// watchedTerminated delivers a watched actor's end, unless it was unwatched.
// During a restart backoff it is left for the next incarnation: the watch is
// kept, and restart watches again to hear of the end once more.
func (c *cell[T]) watchedTerminated(ref actorCell) {
	if c.x == nil {
		return
	}
	msg, watched := c.x.watching[ref]
	if !watched || c.state != alive || c.suspended {
		return
	}
	delete(c.x.watching, ref)
	if msg != nil {
		c.invoke(*msg)
		return
	}
	if c.signals == nil {
		c.logger().Debug("watched actor stopped; the behavior handles no signals", "watched", ref.Path())
		return
	}
	c.signalFailable(Terminated{Ref: ref})
}

// spawnParent makes a Context a place to spawn children.
func (ctx *Context[T]) spawnParent() parent { return ctx.c }
