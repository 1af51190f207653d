package delivery

// Spawning a controller, and the argument checks every constructor shares.

import (
	"fmt"
	"reflect"

	"github.com/trellis-go/trellis/runtime"
)

// spawnController spawns the controller that factory makes under on,
// named name, so that it stops if it fails: a controller restarted empty
// would have neither producer nor consumer. what names it in errors.
func spawnController[T any](on runtime.Spawner, name, what string, factory func() runtime.Behavior[T]) (runtime.Ref[T], error) {
	if isNil(on) {
		return nil, fmt.Errorf("spawn %s: %w: the spawner is nil", what, ErrInvalidSettings)
	}
	ref, err := runtime.Spawn(on, name, factory, runtime.WithSupervision(runtime.StopOnFailure()))
	if err != nil {
		return nil, fmt.Errorf("spawn %s: %w", what, err)
	}
	return ref, nil
}

// isNil reports whether v is nil, or an interface holding a nil pointer
// (a typed nil, such as a (*durable.Memory)(nil) given as a durable.Queue),
// which a plain comparison with nil lets through to panic on first use.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}
