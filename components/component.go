package components

import (
	"context"
	"errors"
)

// Kind is what sort of component a component is.
type Kind string

// The kinds of component.
const (
	KindKeyValueEntity     Kind = "key-value-entity"
	KindEventSourcedEntity Kind = "event-sourced-entity"
	KindTimedAction        Kind = "timed-action"
)

// Component is what the registry dispatches to. Implementations live in
// packages entities and timedactions; user code defines components through
// those packages, not by implementing this.
type Component interface {
	// ComponentID is the stable id: it is stored in deferred calls, so it
	// must not change between deployments.
	ComponentID() string
	Kind() Kind
	// Methods are the stable method names, sorted.
	Methods() []string
	// Invoke runs method with a typed argument, boxed: the typed handles'
	// path, with no JSON in between. entityID is empty for stateless kinds.
	Invoke(ctx context.Context, entityID, method string, arg any) (any, error)
	// InvokeJSON runs method with a JSON argument and returns the JSON reply:
	// the path of deferred calls. An argument that does not decode is an
	// error wrapping ErrBadArgument.
	InvokeJSON(ctx context.Context, entityID, method string, arg []byte) ([]byte, error)
}

// Errors of dispatch. Each is distinct so that a timer can say why its call
// failed; all of them are wrapped with the component id and method.
var (
	// ErrUnknownComponent: no component is registered under the id.
	ErrUnknownComponent = errors.New("unknown component")
	// ErrUnknownMethod: the component has no method of that name.
	ErrUnknownMethod = errors.New("unknown method")
	// ErrBadArgument: the argument does not decode into (or is not of) the
	// method's argument type.
	ErrBadArgument = errors.New("bad argument")
	// ErrMissingEntityID: an entity method was called without an entity id,
	// or a stateless one with one.
	ErrMissingEntityID = errors.New("entity id required")
	// ErrDuplicate: a component id or method name is registered twice.
	ErrDuplicate = errors.New("duplicate registration")
)

// Done is the reply of methods that have nothing to say but "it happened".
type Done struct{}
