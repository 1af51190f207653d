package timedactions

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/trellis-go/trellis/components"
)

// Action is the definition of a timed action: its component id and methods.
// It holds no running state.
type Action struct {
	id string

	mu      sync.Mutex
	methods map[string]*method
}

// Define defines a timed action with a stable component id.
func Define(componentID string) *Action {
	return &Action{id: componentID, methods: make(map[string]*method)}
}

// ComponentID is the action's component id.
func (a *Action) ComponentID() string { return a.id }

// method is one method with its argument type erased.
type method struct {
	name   string
	run    func(ctx context.Context, client *components.Client, arg any) error
	decode func([]byte) (any, error)
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
	m := &method{
		name: name,
		run: func(ctx context.Context, client *components.Client, arg any) (err error) {
			v, ok := arg.(A)
			if !ok && arg != nil {
				var want A
				return fmt.Errorf("%s.%s: argument is %T, want %T: %w", a.id, name, arg, want, components.ErrBadArgument)
			}
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("%s.%s panicked: %v", a.id, name, r)
				}
			}()
			eff := handler(&Ctx{ctx: ctx, client: client}, v)
			switch {
			case !eff.set:
				return fmt.Errorf("%s.%s returned no effect (the zero Effect)", a.id, name)
			case eff.failed:
				return &components.CommandError{Message: eff.message}
			}
			return nil
		},
		decode: func(b []byte) (any, error) { return components.DecodeArgument[A](b) },
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, dup := a.methods[name]; dup {
		panic(fmt.Sprintf("timedactions: %s.%s: %v: the method is defined twice", a.id, name, components.ErrDuplicate))
	}
	a.methods[name] = m
	return components.NewActionMethod[A](a.id, name)
}

func (a *Action) method(name string) (*method, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m, ok := a.methods[name]
	if !ok {
		return nil, fmt.Errorf("%s.%s: %w", a.id, name, components.ErrUnknownMethod)
	}
	return m, nil
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
	if err := client.Registry().Register(r); err != nil {
		return nil, fmt.Errorf("start timed action %q: %w", a.id, err)
	}
	return r, nil
}

// ComponentID is the action's component id.
func (r *Running) ComponentID() string { return r.a.id }

// Kind is components.KindTimedAction.
func (r *Running) Kind() components.Kind { return components.KindTimedAction }

// Methods are the method names, sorted.
func (r *Running) Methods() []string {
	r.a.mu.Lock()
	defer r.a.mu.Unlock()
	names := make([]string, 0, len(r.a.methods))
	for name := range r.a.methods {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Invoke runs method on the caller's goroutine: a timed action is
// stateless, so calls need no ordering. The reply is components.Done{}.
func (r *Running) Invoke(ctx context.Context, entityID, name string, arg any) (any, error) {
	m, err := r.a.method(name)
	if err != nil {
		return nil, err
	}
	if entityID != "" {
		return nil, fmt.Errorf("%s.%s: a timed action takes no entity id (got %q): %w", r.a.id, name, entityID, components.ErrMissingEntityID)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s.%s: %w", r.a.id, name, err)
	}
	if err := m.run(ctx, r.client, arg); err != nil {
		return nil, err
	}
	return components.Done{}, nil
}

// InvokeJSON is Invoke with a JSON argument; the reply is {}.
func (r *Running) InvokeJSON(ctx context.Context, entityID, name string, arg []byte) ([]byte, error) {
	m, err := r.a.method(name)
	if err != nil {
		return nil, err
	}
	v, err := m.decode(arg)
	if err != nil {
		return nil, fmt.Errorf("%s.%s: %w", r.a.id, name, err)
	}
	if _, err := r.Invoke(ctx, entityID, name, v); err != nil {
		return nil, err
	}
	return []byte("{}"), nil
}

// Try runs one method with no registry, the unit test kit: it returns nil
// for Done, a *components.CommandError for Error, or a failure (a panic).
func Try[A any](a *Action, m components.ActionMethod[A], arg A, client *components.Client) error {
	meth, err := a.method(m.Name())
	if err != nil {
		return err
	}
	return meth.run(context.Background(), client, arg)
}
