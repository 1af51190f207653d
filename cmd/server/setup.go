package main

import (
	"fmt"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/samples/counter"
)

// endpoints is the server's implementation of the routes generated from
// the contract: one embedded endpoint per sample, each serving its own
// operations of api.ServerInterface. A sample's routes are added by
// embedding its endpoint here and starting its components in setup.
type endpoints struct {
	*counter.Endpoint
}

var _ api.ServerInterface = endpoints{}

// setup starts the samples' components on h and returns their endpoints.
func setup(h *trellis.Host) (api.ServerInterface, error) {
	if _, err := counter.Entity.Start(h.Entities()); err != nil {
		return nil, fmt.Errorf("start the counter sample: %w", err)
	}
	return endpoints{
		Endpoint: counter.NewEndpoint(h.Client),
	}, nil
}
