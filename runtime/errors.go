package runtime

import (
	"errors"
	"fmt"
)

var (
	// ErrSystemStopped is returned by operations on a system that is shutting down.
	ErrSystemStopped = errors.New("runtime: actor system is shut down")
	// ErrStopping is returned when spawning a child of an actor that is stopping.
	ErrStopping = errors.New("runtime: actor is stopping")
	// ErrNameTaken is wrapped by the error that Spawn returns for a name in use.
	ErrNameTaken = errors.New("runtime: actor name is taken")
	// ErrAskTimeout is the error of an ask that got no reply in time.
	ErrAskTimeout = errors.New("runtime: ask timed out")
	// ErrStashFull is wrapped by the error of Stash.Stash on a full stash.
	ErrStashFull = errors.New("runtime: stash is full")
	// ErrNotChild is returned by Context.Stop for an actor that is neither
	// the actor itself nor one of its children.
	ErrNotChild = errors.New("runtime: only the actor itself or its children can be stopped from its context")
)

func nameTakenError(parentPath, name string) error {
	return fmt.Errorf("spawn %q under %s: %w (names are unique among siblings until the holder has stopped)", name, parentPath, ErrNameTaken)
}
