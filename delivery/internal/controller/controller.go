// Package controller holds what every controller of delivery (the
// point-to-point ones of delivery/internal/impl and the pattern ones)
// shares: the errors they wrap, spawning a controller, and the argument
// checks.
package controller

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/trellis-go/trellis/runtime"
)

// ErrInvalidSettings is wrapped by the errors of settings out of range
// (delivery.ErrInvalidSettings).
var ErrInvalidSettings = errors.New("delivery: invalid settings")

// ErrNotLocal is wrapped by the error of a producer or consumer that is
// not local to its controller (delivery.ErrNotLocal).
var ErrNotLocal = errors.New("delivery: not local to its controller")

// Invalid returns the error of a settings field out of range, wrapping
// ErrInvalidSettings.
func Invalid(field string, value any, rule string) error {
	return fmt.Errorf("%w: %s is %v: %s", ErrInvalidSettings, field, value, rule)
}

// Spawn spawns the controller that factory makes under on, named name, so
// that it stops if it fails: a controller restarted empty would have
// neither producer nor consumer. what names it in errors.
func Spawn[T any](on runtime.Spawner, name, what string, factory func() runtime.Behavior[T]) (runtime.Ref[T], error) {
	if IsNil(on) {
		return nil, fmt.Errorf("spawn %s: %w: the spawner is nil", what, ErrInvalidSettings)
	}
	ref, err := runtime.Spawn(on, name, factory, runtime.WithSupervision(runtime.StopOnFailure()))
	if err != nil {
		return nil, fmt.Errorf("spawn %s: %w", what, err)
	}
	return ref, nil
}

// IsNil reports whether v is nil, or an interface holding a nil pointer
// (a typed nil, such as a (*durable.Memory)(nil) given as a durable.Queue),
// which a plain comparison with nil lets through to panic on first use.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// RequireLocal returns an error wrapping ErrNotLocal unless ref is local to
// sys, the system of the controller (named controller) that got ref in the
// field named field of a Start message, for the role it plays (producer or
// consumer).
func RequireLocal(sys *runtime.System, ref runtime.AnyRef, field, role, controller string) error {
	if runtime.IsLocal(sys, ref) {
		return nil
	}
	return fmt.Errorf("%s %s: %w: the %s must be an actor of the %s's own system %q, or a message adapter of one: "+
		"messages between them are plain tells, reliable only within one system",
		field, ref.Path(), ErrNotLocal, role, controller, sys.Name())
}
