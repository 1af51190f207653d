package runtime

// IsLocal reports whether ref addresses an actor of sys: one of its actors
// (alive or already stopped: a stopped actor was still sys's, and mail to it
// is sys's dead letter), a MessageAdapter of one, or an entity of one of its
// sharding regions. Protocols that rely on plain tells being reliable, such
// as reliable delivery between a producer and its controller, use it to
// refuse a ref that is not.
//
// Every ref of this runtime is in-process, so all the runtime can tell is
// "this System or not". A ref of another System counts as remote even when
// that System runs in the same process, as an actor of another ActorSystem
// would in Akka: its actors run on other workers, stop with another
// Shutdown, and nothing ties their lifecycle to sys. A ref that addresses no
// actor at all, the reply address of an Ask or AskFrom, is not local
// either, and neither is a nil ref or a nil sys.
func IsLocal(sys *System, ref AnyRef) bool {
	if sys == nil || ref == nil {
		return false
	}
	if t := ref.target(); t != nil {
		// A cell, or the cell an adapter delivers to.
		return t.system() == sys
	}
	if e, ok := ref.(regionRef); ok {
		return e.regionSystem() == sys
	}
	return false
}

// regionRef is a ref to a sharded entity: no actor stands behind it (the
// entity may be passivated), but its region belongs to one System.
type regionRef interface{ regionSystem() *System }

func (r *entityRef[T]) regionSystem() *System { return r.s.sys }
