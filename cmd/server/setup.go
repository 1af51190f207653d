package main

import (
	"fmt"
	"time"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/samples/counter"
	"github.com/trellis-go/trellis/samples/ordering"
)

// endpoints is the server's implementation of the routes generated from
// the contract: one embedded endpoint per sample, each serving its own
// operations of api.ServerInterface. A sample's routes are added by
// embedding its endpoint here and starting its components in setup.
type endpoints struct {
	*counterRoutes
	*orderRoutes
}

// Every sample names its endpoint type Endpoint; the aliases give the
// embedded fields distinct names.
type (
	counterRoutes = counter.Endpoint
	orderRoutes   = ordering.Endpoint
)

var _ api.ServerInterface = endpoints{}

// samples is the samples' configuration, from the environment.
type samples struct {
	// orderExpiry is how long an order waits for its confirmation.
	orderExpiry time.Duration
}

// defaultSamples is the samples' configuration with nothing set.
func defaultSamples() samples { return samples{orderExpiry: defaultOrderExpiry} }

// setup returns the Setup that starts the samples' components on the host
// and returns their endpoints.
func setup(s samples) trellis.Setup {
	return func(h *trellis.Host) (api.ServerInterface, error) {
		if _, err := counter.Entity.Start(h.Entities()); err != nil {
			return nil, fmt.Errorf("start the counter sample: %w", err)
		}
		// The timed action before any timer can fire: the scheduler starts
		// only once setup has returned.
		if _, err := ordering.Orders.Start(h.Entities()); err != nil {
			return nil, fmt.Errorf("start the order sample's entity: %w", err)
		}
		if _, err := ordering.TimedAction.Start(h.Client); err != nil {
			return nil, fmt.Errorf("start the order sample's timed action: %w", err)
		}
		orders, err := ordering.NewEndpoint(h.Client, h.Timers, s.orderExpiry)
		if err != nil {
			return nil, fmt.Errorf("start the order sample: %w", err)
		}
		return endpoints{
			counterRoutes: counter.NewEndpoint(h.Client),
			orderRoutes:   orders,
		}, nil
	}
}
