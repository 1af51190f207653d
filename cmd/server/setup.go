package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/consumers"
	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/samples/counter"
	"github.com/trellis-go/trellis/samples/ordering"
	"github.com/trellis-go/trellis/views"
)

// endpoints is the server's implementation of the samples' contract: one
// embedded endpoint per sample, each serving its own operations of
// contract.ServerInterface. A sample's routes are added by embedding its
// endpoint here and starting its components in setup.
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

var _ contract.ServerInterface = endpoints{}

// samples are the samples' settings, as their flags leave them.
type samples struct {
	// orderExpiry is the text of -order-expiry (TRELLIS_ORDER_EXPIRY).
	orderExpiry string
}

// setup returns the Setup that checks the samples' settings s, starts
// their components on the host and mounts their endpoints. An invalid
// setting is a *trellis.ConfigError, which trellis.Run answers with exit
// code 2.
func setup(s *samples) trellis.Setup {
	return func(h *trellis.Host, r chi.Router) error {
		expiry, err := parseOrderExpiry(s.orderExpiry)
		if err != nil {
			return err
		}
		if _, err := counter.Entity.Start(h.Entities()); err != nil {
			return fmt.Errorf("start the counter sample: %w", err)
		}
		// The timed action before any timer can fire: the scheduler starts
		// only once setup has returned.
		if _, err := ordering.Orders.Start(h.Entities()); err != nil {
			return fmt.Errorf("start the order sample's entity: %w", err)
		}
		if _, err := ordering.TimedAction.Start(h.Client); err != nil {
			return fmt.Errorf("start the order sample's timed action: %w", err)
		}
		if _, err := ordering.NewNotices(h.Logger).Consumer().Start(h.Consumers()); errors.Is(err, consumers.ErrNoChangeLog) {
			h.Logger.Warn("order notices are off: " + err.Error())
		} else if err != nil {
			return fmt.Errorf("start the order sample's notices: %w", err)
		}
		orders, err := ordering.NewEndpoint(h.Client, h.Timers, expiry)
		if err != nil {
			return fmt.Errorf("start the order sample: %w", err)
		}
		switch err := ordering.CustomerOrders.Start(h.Views()); {
		case errors.Is(err, views.ErrNoChangeLog):
			h.Logger.Warn("the customers' order lists are off: " + err.Error())
		case err != nil:
			return fmt.Errorf("start the order sample's view: %w", err)
		default:
			orders.ServeViews(h.Views(), h.Clock)
		}
		contract.HandlerWithOptions(endpoints{
			counterRoutes: counter.NewEndpoint(h.Client),
			orderRoutes:   orders,
		}, contract.ChiServerOptions{
			BaseRouter: r, ErrorHandlerFunc: api.WriteParamError,
			// The samples' POSTs take Idempotency-Keys: each is idempotent
			// per key (see ordering.IdempotentRoutes; counter.Increase is
			// applied once per key by the platform), so a retry after an
			// unknown outcome (504) is safe.
			Middlewares: []contract.MiddlewareFunc{
				h.Idempotent(slices.Concat(ordering.IdempotentRoutes, counter.IdempotentRoutes)...),
			},
		})
		return nil
	}
}
