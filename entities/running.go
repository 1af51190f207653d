package entities

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/entityrun"
	"github.com/trellis-go/trellis/runtime"
)

// Host is what a started entity type runs on.
type Host struct {
	// System runs the entity actors (required).
	System *runtime.System
	// Client is the component client; the entity registers in its
	// registry, and handlers reach it through Ctx.Client (required).
	Client *components.Client
	// Store keeps the state (required).
	Store Store
	// Dispatcher runs the entity actors, which wait on the store while they
	// handle a command; nil gives the type a pool of DefaultWorkers of its own.
	Dispatcher *runtime.Dispatcher
	// PassivateAfter is how long an entity stays in memory without a command
	// (zero: runtime.DefaultPassivateAfter; negative: forever).
	PassivateAfter time.Duration
	// MaxConflicts is how many write conflicts in a row a command survives
	// (reloading and running again each time, after a short random pause
	// on the System's clock from the second on: a fake clock must be
	// advanced for it to end) before it fails (zero: 30).
	MaxConflicts int
	// Cluster, when set, makes this instance one of a cluster with one
	// owner per entity: a command runs on the instance that serves its
	// entity's shard (forwarded there when that is another), reads are
	// answered from memory with no store round trip, and writes go under
	// the shard's fence (Store must then be a FencedStore). Nil: the
	// entity runs here, checking the stored revision on every command.
	Cluster Cluster
	// KeyRetention is how long an entity keeps the answer of a command
	// invoked with an idempotency key (components.WithIdempotencyKey), to
	// answer a retry with it (zero: DefaultKeyRetention).
	KeyRetention time.Duration
	// CommandIDRetention is how long it keeps the answer of a command that
	// carried only the platform's command id (components.WithCommandID;
	// zero: DefaultCommandIDRetention).
	CommandIDRetention time.Duration
}

// DefaultWorkers is the size of an entity type's own worker pool: how many
// of its entities can wait on the store at once.
const DefaultWorkers = 64

// Running is an entity type started on a host: the component that the
// registry dispatches its commands to.
type Running[S any] struct {
	t        *Type[S]
	host     Host
	fenced   FencedStore  // Host.Store, when Host.Cluster is set
	batch    BatchStore   // fenced, when it writes batches
	recorder AppliedStore // Host.Store, when it records answers alone
	sharding *runtime.Sharding[envelope[S]]
}

var _ components.Component = (*Running[struct{}])(nil)

// Start runs the entity type on h and registers it with h.Client's registry.
func (t *Type[S]) Start(h Host) (*Running[S], error) {
	id := t.ComponentID()
	if h.System == nil || h.Client == nil || h.Store == nil {
		return nil, fmt.Errorf("start entity %q: Host.System, Host.Client and Host.Store are required", id)
	}
	if h.MaxConflicts <= 0 {
		h.MaxConflicts = 30
	}
	if h.KeyRetention <= 0 {
		h.KeyRetention = DefaultKeyRetention
	}
	if h.CommandIDRetention <= 0 {
		h.CommandIDRetention = DefaultCommandIDRetention
	}
	if h.Dispatcher == nil {
		d, err := h.System.NewDispatcher("entity-"+id, DefaultWorkers, 5)
		if err != nil {
			return nil, fmt.Errorf("start entity %q: %w", id, err)
		}
		h.Dispatcher = d
	}
	r := &Running[S]{t: t, host: h}
	r.recorder, _ = h.Store.(AppliedStore)
	if h.Cluster != nil {
		fenced, ok := h.Store.(FencedStore)
		if !ok {
			return nil, fmt.Errorf("start entity %q: with a Host.Cluster, Host.Store must be a FencedStore (a %T is not)", id, h.Store)
		}
		r.fenced = fenced
		r.batch, _ = fenced.(BatchStore)
	}
	sh, err := entityrun.StartSharding(h.System, id, h.Dispatcher, h.PassivateAfter,
		func(id string) runtime.Behavior[envelope[S]] { return &entityActor[S]{r: r, id: id} })
	if err != nil {
		return nil, fmt.Errorf("start entity %q: %w", id, err)
	}
	r.sharding = sh
	if err := t.commands.Register(h.Client.Registry(), r); err != nil {
		return nil, err
	}
	return r, nil
}

// ComponentID is the entity's component id.
func (r *Running[S]) ComponentID() string { return r.t.ComponentID() }

// Kind is components.KindKeyValueEntity.
func (r *Running[S]) Kind() components.Kind { return components.KindKeyValueEntity }

// Methods are the command names, sorted.
func (r *Running[S]) Methods() []string { return r.t.commands.Methods() }

// Active is the number of entities in memory.
func (r *Running[S]) Active() int { return r.sharding.Active() }

// Invoke runs command method on entity entityID and waits for the reply,
// the command's error (a *components.CommandError), a failure, or ctx's end.
// With a Host.Cluster, the command runs where the entity's shard is
// served, and a reply from another instance is a components.RemoteReply.
func (r *Running[S]) Invoke(ctx context.Context, entityID, method string, arg any) (any, error) {
	cmd, err := r.command(entityID, method)
	if err != nil {
		return nil, err
	}
	if r.host.Cluster != nil {
		return r.route(ctx, entityID, cmd, arg)
	}
	return r.runHere(ctx, entityID, cmd, arg)
}

// InvokeLocal runs command method on entity entityID on this instance,
// which must serve the entity's shard (else the error wraps ErrMoved: the
// command did not run), and waits, as Invoke does. It is for a component
// that drives entities of its own on the owner of their shard (package
// workflows' runner): the command is neither forwarded nor given a
// command id, so no answer of it is recorded, and a command whose write
// may be made twice (its outcome lost, then run again) must change
// nothing the second time by itself. An idle entity runs it on this
// goroutine.
func (r *Running[S]) InvokeLocal(ctx context.Context, entityID, method string, arg any) (any, error) {
	cmd, err := r.command(entityID, method)
	if err != nil {
		return nil, err
	}
	if r.host.Cluster == nil {
		return r.runHere(ctx, entityID, cmd, arg)
	}
	addr, done, err := r.host.Cluster.Route(ctx, r.ComponentID(), entityID)
	if err != nil {
		return nil, fmt.Errorf("%s.%s on %q: route: %w", r.ComponentID(), method, entityID, err)
	}
	if addr != "" {
		return nil, fmt.Errorf("%s.%s on %q: its shard is served by %s: %w", r.ComponentID(), method, entityID, addr, ErrMoved)
	}
	defer done()
	return r.runHere(ctx, entityID, cmd, arg)
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

// InvokeJSON is Invoke with a JSON argument and reply.
func (r *Running[S]) InvokeJSON(ctx context.Context, entityID, method string, arg []byte) ([]byte, error) {
	return r.t.commands.InvokeJSON(ctx, entityID, method, arg, r.Invoke)
}

// tracer is the service's tracer, from the client; nil when tracing is
// off.
func (r *Running[S]) tracer() trace.Tracer {
	if r.host.Client == nil {
		return nil
	}
	return r.host.Client.Tracer()
}
