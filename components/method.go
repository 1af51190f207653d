package components

import (
	"context"
	"encoding/json"
	"fmt"
)

// EntityMethod is a typed handle on one command of a key-value entity: it
// names the component id and the method once, with the argument type A and
// the reply type R, and is used both to invoke and to defer. Package
// entities makes them (entities.Command); call sites read
//
//	order, err := PlaceOrder.Invoke(ctx, client, id, req)
type EntityMethod[A, R any] struct {
	componentID, name string
}

// NewEntityMethod makes a handle; component packages call it, users get
// handles from them.
func NewEntityMethod[A, R any](componentID, name string) EntityMethod[A, R] {
	return EntityMethod[A, R]{componentID: componentID, name: name}
}

// ComponentID is the entity's component id.
func (m EntityMethod[A, R]) ComponentID() string { return m.componentID }

// Name is the command's method name.
func (m EntityMethod[A, R]) Name() string { return m.name }

// Invoke runs the command on entity entityID and waits for the reply.
func (m EntityMethod[A, R]) Invoke(ctx context.Context, c *Client, entityID string, arg A) (R, error) {
	return invoke[R](ctx, c, m.componentID, entityID, m.name, arg)
}

// InvokeAsync runs the command without waiting: the outcome arrives on the
// returned channel, which has room for it, so nobody has to read it.
func (m EntityMethod[A, R]) InvokeAsync(ctx context.Context, c *Client, entityID string, arg A) <-chan Result[R] {
	out := make(chan Result[R], 1)
	go func() {
		v, err := m.Invoke(ctx, c, entityID, arg)
		out <- Result[R]{Value: v, Err: err}
	}()
	return out
}

// Deferred builds the call of this command on entityID with arg, to be
// dispatched later by name.
func (m EntityMethod[A, R]) Deferred(entityID string, arg A) (DeferredCall, error) {
	return deferred(m.componentID, m.name, entityID, arg)
}

// ActionMethod is a typed handle on one method of a timed action, which
// only timers call: it builds deferred calls.
//
//	call, err := ExpireOrder.Deferred(orderID)
type ActionMethod[A any] struct {
	componentID, name string
}

// NewActionMethod makes a handle; package timedactions calls it.
func NewActionMethod[A any](componentID, name string) ActionMethod[A] {
	return ActionMethod[A]{componentID: componentID, name: name}
}

// ComponentID is the timed action's component id.
func (m ActionMethod[A]) ComponentID() string { return m.componentID }

// Name is the method name.
func (m ActionMethod[A]) Name() string { return m.name }

// Deferred builds the call of this method with arg.
func (m ActionMethod[A]) Deferred(arg A) (DeferredCall, error) {
	return deferred(m.componentID, m.name, "", arg)
}

// Invoke runs the method now and waits; for tests and tools, since in a
// service only timers call timed actions.
func (m ActionMethod[A]) Invoke(ctx context.Context, c *Client, arg A) error {
	_, err := invoke[Done](ctx, c, m.componentID, "", m.name, arg)
	return err
}

func deferred(componentID, method, entityID string, arg any) (DeferredCall, error) {
	b, err := json.Marshal(arg)
	if err != nil {
		return DeferredCall{}, fmt.Errorf("defer %s.%s: encode the argument: %w", componentID, method, err)
	}
	return DeferredCall{ComponentID: componentID, Method: method, EntityID: entityID, Argument: b}, nil
}
