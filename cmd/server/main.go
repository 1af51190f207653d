// Command server is the samples' server: the counter sample, at
// /counters/{id}, and the order-expiry sample, at /orders, on trellis.Run,
// as any application runs. Its configuration is Trellis's (the environment
// with flag overrides: see trellis.ConfigFromEnv, or run it with -h) and
// the samples' own, in the same way: TRELLIS_ORDER_EXPIRY, or
// -order-expiry. It serves the samples' contract (package
// samples/contract) at GET /openapi.yaml.
//
// Exit codes: 0 after a graceful shutdown on SIGINT or SIGTERM (or -h); 1
// when the service fails; 2 when the configuration is invalid.
//
// `server -healthcheck` instead checks a server running on the same host
// (see healthcheck) and exits 0 when it is healthy, 1 when it is not.
package main

import (
	"context"
	"os"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/samples/contract"
)

func main() {
	if isHealthcheck(os.Args[1:]) {
		os.Exit(healthcheck(os.Getenv, os.Args[2:], os.Stderr))
	}
	var s samples
	os.Exit(trellis.Run(context.Background(), setup(&s),
		trellis.WithContract(contract.Spec),
		trellis.WithFlags(orderExpiryFlag(os.Getenv, &s.orderExpiry)),
		trellis.WithUsage(healthcheckUsage()),
	))
}
