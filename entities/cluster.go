package entities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/trellis-go/trellis/components"
)

// Fence is what an owner's write carries: the shard, and the incarnation
// (of the member that owns it) and epoch under which it was acquired (see
// components.Fence).
type Fence = components.Fence

// Cluster is what an entity type started with [Host.Cluster] needs of the
// cluster its instance belongs to: whether it serves an entity's shard,
// and how to reach the instance that does. Package internal/cluster/entityhost
// implements it over a cluster member, its rebalancer and the peer
// transport.
type Cluster interface {
	// Fence reports whether this instance serves the entity's shard now
	// (it owns it and its lease is surely valid) and under which fence.
	// The entity actor calls it on every command: it must be cheap.
	Fence(entityType, id string) (Fence, bool)
	// Route says where a command for the entity runs, waiting (bounded by
	// ctx) while its shard has no owner or is being handed over. When
	// this instance serves it, the command is admitted here: addr is ""
	// and done must be called once the command has finished (a shard is
	// handed over only when its admitted commands are done). Otherwise
	// addr is the owner's transport address and done is nil.
	Route(ctx context.Context, entityType, id string) (addr string, done func(), err error)
	// Admit admits a command that another instance forwarded here: it
	// waits (bounded by ctx) while the shard is being handed over by this
	// instance, then admits it (call done when finished) or fails with an
	// error wrapping ErrMoved when this instance does not serve the shard.
	// It never sends the command on.
	Admit(ctx context.Context, entityType, id string) (done func(), err error)
	// Forward runs call on the instance at addr and returns its JSON
	// reply. Its errors are those the command would have had here
	// (a *components.CommandError, ErrUnknownMethod, ErrBadArgument,
	// ErrUnavailable, ErrConflict, ErrOutcomeUnknown, ctx's error, ...),
	// or wrap ErrMoved when the command surely did not run because that
	// instance does not serve the shard (any more). A command that may
	// have run there is components.ErrOutcomeUnknown and never ErrMoved.
	Forward(ctx context.Context, addr string, call components.DeferredCall) (json.RawMessage, error)
}

// ErrMoved is wrapped by a command that reached an instance that does not
// serve its entity's shard (any more): the command was not run, and the
// caller routes it again, once.
var ErrMoved = errors.New("moved: this instance does not serve the entity's shard")

// maxRoutes bounds how often a command follows its entity's shard: during
// a rolling restart a shard can move more than once while the command is
// on its way (old owner, a member that holds it for a pass, its preferred
// owner).
const maxRoutes = 4

// route runs a command where its entity's shard is served (see Route).
func (r *Running[S]) route(ctx context.Context, entityID string, cmd *command[S], arg any) (any, error) {
	return Route(ctx, r.host.Cluster, r.ComponentID(), entityID, cmd.Name, arg,
		func(ctx context.Context) (any, error) { return r.runHere(ctx, entityID, cmd, arg) })
}

// Route runs the command method of the entity componentID/entityID where
// its shard is served: here (calling here, with the command's context),
// or on its owner through c's transport, whose reply comes back as a
// components.RemoteReply. A command refused with ErrMoved (the shard
// moved meanwhile, or a write was fenced), which surely did not run, is
// routed again, up to maxRoutes times in all; then it is ErrMoved and
// components.ErrUnavailable (retry later). One that may have run
// (components.ErrOutcomeUnknown) is never routed again, whatever else
// its error wraps: it could take effect twice.
//
// A command is given a command id before it is first forwarded (the
// caller's idempotency key, or an id the caller set, stands for one), and
// every attempt from then on carries it, so that the owner applies once a
// command routed again after a forward that was answered as not run but
// did run. Only a forward's outcome can be mistaken that way: an attempt
// here that ran returns its answer or an unknown outcome, and neither is
// routed again. A command that runs here at once therefore carries no id
// and writes no record of one. Entity kinds other than key-value ones
// (package eventsourced) route their commands through it too.
func Route(ctx context.Context, c Cluster, componentID, entityID, method string, arg any,
	here func(ctx context.Context) (any, error)) (any, error) {
	_, identified := components.IdempotencyKeyFrom(ctx)
	if !identified {
		_, identified = components.CommandIDFrom(ctx)
	}
	var moved error
	owners := make([]string, 0, maxRoutes) // where each attempt went, for the error
	for range maxRoutes {
		addr, done, err := c.Route(ctx, componentID, entityID)
		if err != nil {
			return nil, fmt.Errorf("%s.%s on %q: route: %w", componentID, method, entityID, err)
		}
		var reply any
		if addr == "" {
			owners = append(owners, "this instance")
			reply, err = here(ctx)
			done()
		} else {
			if !identified {
				ctx, identified = components.WithCommandID(ctx, uuid.NewString()), true
			}
			owners = append(owners, addr)
			reply, err = forward(ctx, c, addr, componentID, entityID, method, arg)
		}
		if !errors.Is(err, ErrMoved) || errors.Is(err, components.ErrOutcomeUnknown) {
			return reply, err
		}
		moved = err
	}
	return nil, fmt.Errorf("%s.%s on %q: its shard moved each time it was routed, %d times "+
		"(owners tried in turn: %s; the shard is being handed over, or the members disagree on its owner); it did not run: %w: %w: %w",
		componentID, method, entityID, maxRoutes, strings.Join(owners, ", "), components.ErrShardMoving, components.ErrUnavailable, moved)
}

// forward sends a command to the instance at addr. Its reply comes back
// as a components.RemoteReply, which the typed handles decode.
func forward(ctx context.Context, c Cluster, addr, componentID, entityID, method string, arg any) (any, error) {
	b, err := json.Marshal(arg)
	if err != nil {
		return nil, fmt.Errorf("%s.%s on %q: encode the argument: %w", componentID, method, entityID, err)
	}
	reply, err := c.Forward(ctx, addr, components.DeferredCall{
		ComponentID: componentID, Method: method, EntityID: entityID, Argument: b,
	})
	if err != nil {
		return nil, err
	}
	return components.RemoteReply(reply), nil
}

// InvokeJSONHere runs a command that another instance forwarded to this
// one: here, once admitted (see Cluster.Admit), or not at all, with an
// error wrapping ErrMoved. Without a Cluster it is InvokeJSON.
func (r *Running[S]) InvokeJSONHere(ctx context.Context, entityID, method string, arg []byte) ([]byte, error) {
	return r.t.commands.InvokeJSON(ctx, entityID, method, arg, r.invokeHere)
}

// invokeHere is Invoke for a forwarded command: never routed on.
func (r *Running[S]) invokeHere(ctx context.Context, entityID, method string, arg any) (any, error) {
	cmd, err := r.command(entityID, method)
	if err != nil {
		return nil, err
	}
	return RunAdmitted(ctx, r.host.Cluster, r.ComponentID(), entityID, method,
		func() (any, error) { return r.runHere(ctx, entityID, cmd, arg) })
}

// RunAdmitted runs a command that another instance forwarded to this one
// (run, once admitted: see Cluster.Admit), or not at all, with an error
// wrapping ErrMoved. With no Cluster it just runs it.
func RunAdmitted(ctx context.Context, c Cluster, componentID, entityID, method string, run func() (any, error)) (any, error) {
	if c == nil {
		return run()
	}
	done, err := c.Admit(ctx, componentID, entityID)
	if err != nil {
		return nil, fmt.Errorf("%s.%s on %q: %w", componentID, method, entityID, err)
	}
	defer done()
	return run()
}
