package eventsourced

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/entityrun"
	"github.com/trellis-go/trellis/runtime"
)

// Host is what a started event-sourced entity type runs on: the host of
// the key-value entities (trellis.Host.Entities gives it), whose Store
// must be an entities.JournalStore (every store of package entities is
// one). KeyRetention and CommandIDRetention are how long a command's
// idempotency key and command id are kept with its events.
type Host = entities.Host

// Running is an entity type started on a host: the component that the
// registry dispatches its commands to.
type Running[S any] struct {
	t        *Type[S]
	host     Host
	journal  entities.JournalStore
	fenced   bool // Host.Cluster is set: writes go under the shard's fence
	sharding *runtime.Sharding[envelope[S]]
}

var _ components.Component = (*Running[struct{}])(nil)

// Start runs the entity type on h and registers it with h.Client's
// registry.
func (t *Type[S]) Start(h Host) (*Running[S], error) {
	id := t.ComponentID()
	if h.System == nil || h.Client == nil || h.Store == nil {
		return nil, fmt.Errorf("start event-sourced entity %q: Host.System, Host.Client and Host.Store are required", id)
	}
	journal, ok := h.Store.(entities.JournalStore)
	if !ok {
		return nil, fmt.Errorf("start event-sourced entity %q: Host.Store must be an entities.JournalStore (a %T is not)", id, h.Store)
	}
	if h.MaxConflicts <= 0 {
		h.MaxConflicts = 30
	}
	if h.KeyRetention <= 0 {
		h.KeyRetention = entities.DefaultKeyRetention
	}
	if h.CommandIDRetention <= 0 {
		h.CommandIDRetention = entities.DefaultCommandIDRetention
	}
	if h.Dispatcher == nil {
		d, err := h.System.NewDispatcher("eventsourced-"+id, entities.DefaultWorkers, 5)
		if err != nil {
			return nil, fmt.Errorf("start event-sourced entity %q: %w", id, err)
		}
		h.Dispatcher = d
	}
	r := &Running[S]{t: t, host: h, journal: journal, fenced: h.Cluster != nil}
	sh, err := entityrun.StartSharding(h.System, id, h.Dispatcher, h.PassivateAfter,
		func(id string) runtime.Behavior[envelope[S]] { return &actor[S]{r: r, id: id} })
	if err != nil {
		return nil, fmt.Errorf("start event-sourced entity %q: %w", id, err)
	}
	r.sharding = sh
	if err := t.commands.Register(h.Client.Registry(), r); err != nil {
		return nil, err
	}
	return r, nil
}

// ComponentID is the entity's component id.
func (r *Running[S]) ComponentID() string { return r.t.ComponentID() }

// Kind is components.KindEventSourcedEntity.
func (r *Running[S]) Kind() components.Kind { return components.KindEventSourcedEntity }

// Methods are the command names, sorted.
func (r *Running[S]) Methods() []string { return r.t.commands.Methods() }

// Active is the number of entities in memory.
func (r *Running[S]) Active() int { return r.sharding.Active() }

// Invoke runs command method on entity entityID and waits for the reply,
// the command's error (a *components.CommandError), a failure, or ctx's
// end. With a Host.Cluster, the command runs where the entity's shard is
// served (entities.Route).
func (r *Running[S]) Invoke(ctx context.Context, entityID, method string, arg any) (any, error) {
	cmd, err := r.command(entityID, method)
	if err != nil {
		return nil, err
	}
	if r.host.Cluster != nil {
		return entities.Route(ctx, r.host.Cluster, r.ComponentID(), entityID, method, arg,
			func(ctx context.Context) (any, error) { return r.runHere(ctx, entityID, cmd, arg) })
	}
	return r.runHere(ctx, entityID, cmd, arg)
}

// InvokeJSON is Invoke with a JSON argument and reply.
func (r *Running[S]) InvokeJSON(ctx context.Context, entityID, method string, arg []byte) ([]byte, error) {
	return r.t.commands.InvokeJSON(ctx, entityID, method, arg, r.Invoke)
}

// InvokeJSONHere runs a command that another instance forwarded to this
// one: here, once admitted, or not at all, with an error wrapping
// entities.ErrMoved (entities.RunAdmitted).
func (r *Running[S]) InvokeJSONHere(ctx context.Context, entityID, method string, arg []byte) ([]byte, error) {
	return r.t.commands.InvokeJSON(ctx, entityID, method, arg, func(ctx context.Context, entityID, method string, arg any) (any, error) {
		cmd, err := r.command(entityID, method)
		if err != nil {
			return nil, err
		}
		return entities.RunAdmitted(ctx, r.host.Cluster, r.ComponentID(), entityID, method,
			func() (any, error) { return r.runHere(ctx, entityID, cmd, arg) })
	})
}

// command looks method up, for an entity id that must not be empty.
func (r *Running[S]) command(entityID, method string) (*command[S], error) {
	return entityrun.Lookup(r.t.commands, entityID, method)
}

// runHere runs cmd on this instance's actor of the entity and waits
// (entityrun.Run).
func (r *Running[S]) runHere(ctx context.Context, entityID string, cmd *command[S], arg any) (any, error) {
	return entityrun.Run(ctx, r.sharding, r.ComponentID(), entityID, cmd, arg)
}

// tracer is the service's tracer; nil when tracing is off.
func (r *Running[S]) tracer() trace.Tracer { return r.host.Client.Tracer() }

// CheckLoad loads entity entityID as a command would (its latest snapshot
// and the events after it, replayed) without running it, and returns why
// it does not load: an event name the type does not know
// (ErrUnknownEvent), an event that does not decode, a gap. The admin API
// shows it.
func (r *Running[S]) CheckLoad(ctx context.Context, entityID string) error {
	a := &actor[S]{r: r, id: entityID}
	return a.load(ctx)
}
