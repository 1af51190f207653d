// Package trellis assembles the Trellis service: configuration, the state
// store (the embedded in-memory store, or Redis), the actor system, the
// component client, the timer scheduler, and the HTTP server with its
// middleware, health routes, Prometheus metrics (GET /metrics), the admin
// API behind the admin token (/admin/timers, package api/admin) and the
// application's routes generated from the contract (package api).
//
// An application hands [New] a setup function that starts its components on
// the [Host] and returns its implementation of api.ServerInterface:
//
//	cfg, err := trellis.ConfigFromEnv(os.Getenv, os.Args[1:])
//	svc, err := trellis.New(cfg, func(h *trellis.Host) (api.ServerInterface, error) {
//		if _, err := counter.Entity.Start(h.Entities()); err != nil {
//			return nil, err
//		}
//		return counter.NewEndpoint(h.Client), nil
//	})
//	err = svc.Start(ctx)
//	...
//	err = svc.Shutdown(ctx) // drain HTTP, stop the entities, close Redis
//
// Tests boot the same service in-process with [StartTest], on a free
// loopback port and a fake clock.
package trellis
