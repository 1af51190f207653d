package assembly

import (
	"context"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/runtime"
)

// newActorSystem makes the host's actor system and component client.
func newActorSystem(a *assembly) error {
	h := a.host
	h.System = runtime.NewSystem("trellis", runtime.WithClock(h.Clock), runtime.WithLogger(h.Logger), runtime.WithTracer(h.Tracing.tracer))
	h.Client = components.NewClient(components.NewRegistry(), components.WithTracer(h.Tracing.tracer))
	a.add(part{name: "entities", stop: func(ctx context.Context) error {
		return h.System.Shutdown(ctx)
	}})
	return nil
}

// drainDelivery stores, at shutdown, what consumers confirmed in the
// durable producer queues (delivery.Drain), so that a restart sends none
// of it again: after the cluster stops, before the actor system does.
func drainDelivery(a *assembly) error {
	sys := a.host.System
	a.add(part{name: "reliable delivery", farewell: true, stop: func(ctx context.Context) error {
		return delivery.Drain(ctx, sys)
	}})
	return nil
}
