package delivery

import (
	"context"
	"github.com/trellis-go/trellis/delivery/internal/impl"
	"github.com/trellis-go/trellis/runtime"
)

// Drain readies sys's reliable delivery for a shutdown: every consumer
// controller stops delivering (what it has not delivered stays
// unconfirmed, for the next producer controller to send), waits for its
// consumer to confirm the Delivery it is processing, if any, and tells its
// producer controller what was confirmed (which it otherwise does only
// every half window); then every producer controller with a durable queue
// (point to point, work pulling, sharding) stores all the confirmations it
// knows of, and Drain returns. A producer controller that replaces one of
// sys's after a Drain and a shutdown (the same producer id, on this
// process or another) sends nothing again that a consumer of sys
// confirmed.
//
// Call it just before sys.Shutdown, once nothing sends any more (the
// endpoints and timers that feed the producers are stopped): a trellis
// service does so in its Shutdown. Consumers get nothing more after it. It
// returns ctx's error if ctx ends first (a consumer that does not confirm,
// a durable queue that does not answer); Shutdown is then no worse than
// without a Drain.
func Drain(ctx context.Context, sys *runtime.System) error { return impl.Drain(ctx, sys) }
