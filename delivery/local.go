package delivery

import (
	"github.com/trellis-go/trellis/delivery/internal/impl"
)

// ErrNotLocal is wrapped by the error with which a controller stops when
// it is given a producer or consumer that is not local to it: not an actor
// of the controller's own System (or a message adapter of one), such as an
// actor of another System or an ask's reply address. Between a controller
// and its producer or consumer messages are plain tells, with nothing to
// make up for a lost one, so the rule is checked where the runtime can
// tell (see runtime.IsLocal), as the reference implementation does.
var ErrNotLocal = impl.ErrNotLocal
