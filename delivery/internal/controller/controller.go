// Package controller holds what delivery's controllers share and what
// delivery lends its pattern packages (delivery/workpulling,
// delivery/sharding) of its point-to-point controllers, none of which a
// user of delivery sees: the errors the patterns wrap, spawning a
// controller, the argument checks, and the hooks (see [Hooks]).
//
// Delivery imports this package, never the other way round, so the hooks
// are set by delivery itself: its init registers one function ([Register])
// that, given a value of one of delivery's generic types for some message
// type A (a *delivery.SequencedMessage[A], the probe), returns the
// [Hooks] for A, built by a generic method of that type. The pattern
// packages reach them through delivery/internal/pattern, which names
// delivery's types and asserts the result once, when a controller is made.
// No linkname, and nothing of it in delivery's exported API.
package controller

import (
	"fmt"
	"reflect"

	"github.com/trellis-go/trellis/runtime"
)

// ErrInvalidSettings is delivery's, set by its init (before any package
// that imports delivery uses it).
var ErrInvalidSettings error

// ErrNotLocal is delivery's, set by its init (before any package that
// imports delivery uses it).
var ErrNotLocal error

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
