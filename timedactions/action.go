package timedactions

import (
	"context"
	"fmt"

	"github.com/trellis-go/trellis/components"
)

// Action is the definition of a timed action: its component id and methods.
// It holds no running state.
type Action struct {
	methods *components.MethodSet[call, components.Done]
}

// Define defines a timed action with a stable component id.
func Define(componentID string) *Action {
	return &Action{methods: components.NewMethodSet[call, components.Done](components.KindTimedAction, componentID)}
}

// ComponentID is the action's component id.
func (a *Action) ComponentID() string { return a.methods.ComponentID() }

// call is what a method's handler is run with, besides its argument.
type call struct {
	ctx    context.Context
	client *components.Client
}

// Effect is how a timed action method ends: made by Ctx.Done or Ctx.Error.
type Effect struct {
	set     bool
	failed  bool
	message string
}

// Ctx is a method's view of its call.
type Ctx struct {
	ctx    context.Context
	client *components.Client
}

// Context is the call's context (the timer's deadline for the call).
func (c *Ctx) Context() context.Context { return c.ctx }

// Client is the component client.
func (c *Ctx) Client() *components.Client { return c.client }

// Done ends the call successfully: the timer that made it is removed.
func (c *Ctx) Done() Effect { return Effect{set: true} }

// Error ends the call in failure: the timer retries it with backoff.
func (c *Ctx) Error(format string, args ...any) Effect {
	return Effect{set: true, failed: true, message: fmt.Sprintf(format, args...)}
}

// Method adds a method named name (stable: it is stored in deferred calls)
// to the action and returns its typed handle. A duplicate name panics.
func Method[A any](a *Action, name string, handler func(ctx *Ctx, arg A) Effect) components.ActionMethod[A] {
	id := a.ComponentID()
	a.methods.Add(components.NewMethod(id, name, func(c call, arg A) (components.Done, error) {
		eff := handler(&Ctx{ctx: c.ctx, client: c.client}, arg)
		switch {
		case !eff.set:
			return components.Done{}, fmt.Errorf("%s.%s returned no effect (the zero Effect)", id, name)
		case eff.failed:
			return components.Done{}, &components.CommandError{Message: eff.message}
		}
		return components.Done{}, nil
	}))
	return components.NewActionMethod[A](id, name)
}

// Running is an action started with a client: the component the registry
// dispatches its calls to.
type Running struct {
	a      *Action
	client *components.Client
}

var _ components.Component = (*Running)(nil)

// Start registers the action with client's registry.
func (a *Action) Start(client *components.Client) (*Running, error) {
	r := &Running{a: a, client: client}
	if err := a.methods.Register(client.Registry(), r); err != nil {
		return nil, err
	}
	return r, nil
}

// ComponentID is the action's component id.
func (r *Running) ComponentID() string { return r.a.ComponentID() }

// Kind is components.KindTimedAction.
func (r *Running) Kind() components.Kind { return components.KindTimedAction }

// Methods are the method names, sorted.
func (r *Running) Methods() []string { return r.a.methods.Methods() }

// Invoke runs method on the caller's goroutine: a timed action is
// stateless, so calls need no ordering. The reply is components.Done{}.
func (r *Running) Invoke(ctx context.Context, entityID, name string, arg any) (any, error) {
	m, err := r.a.methods.Lookup(name)
	if err != nil {
		return nil, err
	}
	if entityID != "" {
		return nil, fmt.Errorf("%s.%s: a timed action takes no entity id (got %q): %w", r.ComponentID(), name, entityID, components.ErrMissingEntityID)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s.%s: %w", r.ComponentID(), name, err)
	}
	return m.Run(call{ctx: ctx, client: r.client}, arg)
}

// InvokeJSON is Invoke with a JSON argument; the reply is {}.
func (r *Running) InvokeJSON(ctx context.Context, entityID, name string, arg []byte) ([]byte, error) {
	return r.a.methods.InvokeJSON(ctx, entityID, name, arg, r.Invoke)
}

// Try runs one method with no registry, the unit test kit: it returns nil
// for Done, a *components.CommandError for Error, or a failure (a panic).
func Try[A any](a *Action, m components.ActionMethod[A], arg A, client *components.Client) error {
	meth, err := a.methods.Lookup(m.Name())
	if err != nil {
		return err
	}
	_, err = meth.Run(call{ctx: context.Background(), client: client}, arg)
	return err
}
