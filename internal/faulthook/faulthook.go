// Package faulthook is how Trellis's test kit injects faults into a
// service instance without an option in the public API: a trellis.Option
// that also implements Option carries fault points, which the service
// routes its cluster connections through and registers its kill with.
// It holds only these interfaces; the fault points themselves are test
// support (internal/testkit/faults), never linked into a server.
package faulthook

import (
	"context"
	"net"
)

// Points are an instance's fault points.
type Points interface {
	// Dial dials another instance (the cluster transport's client).
	Dial(ctx context.Context, network, addr string) (net.Conn, error)
	// Listen listens for the other instances (the transport's server).
	Listen(network, addr string) (net.Listener, error)
	// OnKill registers how the instance dies without a goodbye.
	OnKill(kill func())
}

// Option is what a trellis.Option implements when it carries fault
// points.
type Option interface {
	FaultPoints() Points
}
