package delivery

import (
	"errors"
	"fmt"

	"github.com/trellis-go/trellis/runtime"
)

// ErrNotLocal is wrapped by the error with which a controller stops when
// it is given a producer or consumer that is not local to it: not an actor
// of the controller's own System (or a message adapter of one), such as an
// actor of another System or an ask's reply address. Between a controller
// and its producer or consumer messages are plain tells, with nothing to
// make up for a lost one, so the rule is checked where the runtime can
// tell (see runtime.IsLocal), as the reference implementation does.
var ErrNotLocal = errors.New("delivery: not local to its controller")

// requireLocal returns an error wrapping ErrNotLocal unless ref is local to
// sys, the system of the controller (named controller) that got ref in the
// field named field of a Start message, for the role it plays (producer or
// consumer).
func requireLocal(sys *runtime.System, ref runtime.AnyRef, field, role, controller string) error {
	if runtime.IsLocal(sys, ref) {
		return nil
	}
	return fmt.Errorf("%s %s: %w: the %s must be an actor of the %s's own system %q, or a message adapter of one: "+
		"messages between them are plain tells, reliable only within one system",
		field, ref.Path(), ErrNotLocal, role, controller, sys.Name())
}
