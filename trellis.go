// Package trellis runs a Trellis service: configuration (Config, from the
// environment and flags), the state store (the embedded in-memory store,
// or Redis), the actor system, the component client, the timer scheduler,
// and the HTTP server, whose middleware, health routes, Prometheus metrics
// (GET /metrics) and admin API (under /admin, behind the admin token) it
// provides. The application brings its components and its routes.
//
// An application's main is a few lines: Run reads the configuration (the
// application's own flags beside Trellis's, with WithFlags), calls setup,
// serves until SIGINT or SIGTERM, shuts down gracefully and returns the
// exit code.
//
//	func main() {
//		os.Exit(trellis.Run(context.Background(), setup, trellis.WithContract(contract.Spec)))
//	}
//
//	func setup(h *trellis.Host, r chi.Router) error {
//		if _, err := carts.Entity.Start(h.Entities()); err != nil {
//			return err
//		}
//		contract.HandlerWithOptions(carts.NewEndpoint(h.Client), contract.ChiServerOptions{
//			BaseRouter: r, ErrorHandlerFunc: api.WriteParamError,
//		})
//		return nil
//	}
//
// New and Service are the same service under the application's own
// control (Start, Shutdown). Package api has the helpers endpoints are
// written with; package trellistest boots the service in a test, on a
// free loopback port and a fake clock.
package trellis
