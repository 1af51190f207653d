package components

import "errors"

// The failures a call may end with that are not a component's own
// refusal: the stores (entities, timers) wrap them with %w, so that a
// caller (api.WriteError) can answer each with the right status without
// knowing which store, or which client library, failed. They live here,
// at the bottom of the import graph, because the stores and api all
// import this package already.
var (
	// ErrUnavailable: the state store cannot serve the call now, whatever
	// its data: it is unreachable, or it answered that it cannot work now
	// (loading, read-only, out of memory, a cluster or primary down, a
	// login refused), or it is full. Retrying later may succeed (HTTP 503).
	ErrUnavailable = errors.New("state store unavailable")
	// ErrOutcomeUnknown: a write was sent to the state store and no
	// answer came back (the reply timed out, the connection broke after
	// the command was written, the caller's deadline passed while it
	// waited). The store may or may not have applied it: the caller
	// cannot tell "not done" from "done", and must not say "nothing was
	// changed" (HTTP 504, see api.WriteError). It never wraps
	// ErrUnavailable, whose promise is that nothing was changed.
	ErrOutcomeUnknown = errors.New("state store outcome unknown")
	// ErrConflict: a write found a revision other than the one it was
	// computed from, someone else wrote first (entities.ErrConflict is
	// this error). After too many in a row, HTTP 409.
	ErrConflict = errors.New("revision conflict")
	// ErrLimit: the call would break a configured limit. The error that
	// wraps ErrLimit itself (timers.LimitError) says which, in words a
	// client may read. A limit on the call (a name, a payload) is HTTP
	// 400; one on what the store holds (the active timers) wraps
	// ErrUnavailable as well, since room comes back: HTTP 503.
	ErrLimit = errors.New("limit exceeded")
	// ErrOwnerUnreachable: in a cluster, the instance that owns the
	// entity's shard could not be reached, and no other instance took the
	// shard over in time; the call did not run. It is always wrapped
	// together with ErrUnavailable (retrying later may succeed, HTTP
	// 503), so that the answer names this cause and not the store.
	ErrOwnerUnreachable = errors.New("the instance that owns the entity could not be reached")
	// ErrShardMoving: in a cluster, the call was routed to the owner of
	// the entity's shard as many times as it may be, and the shard had
	// moved each time (it is being handed over, or the instances disagree
	// on its owner); the call did not run. Wrapped together with
	// ErrUnavailable (HTTP 503), like ErrOwnerUnreachable.
	ErrShardMoving = errors.New("the entity's shard moved each time the call was routed")
)
