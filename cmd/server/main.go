// Command server runs the Trellis HTTP/JSON service with the samples (the
// counter, at /counters/{id}, and the order-expiry sample, at /orders). Its
// configuration comes from the environment with flag overrides (see
// trellis.ConfigFromEnv, or run it with -h); the samples' own setting is
// TRELLIS_ORDER_EXPIRY.
//
// Exit codes: 0 after a graceful shutdown on SIGINT or SIGTERM (or -h); 1
// when the service fails; 2 when the configuration is invalid.
//
// `server -healthcheck` instead checks a server running on the same host
// (see healthcheck) and exits 0 when it is healthy, 1 when it is not.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/trellis-go/trellis"
)

func main() {
	if isHealthcheck(os.Args[1:]) {
		os.Exit(healthcheck(os.Getenv, os.Args[2:], os.Stderr))
	}
	cfg, err := trellis.ConfigFromEnv(os.Getenv, os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(os.Stderr, trellis.ConfigUsage()+healthcheckUsage()+orderExpiryUsage())
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "server: invalid configuration:", err)
		os.Exit(2)
	}
	expiry, err := orderExpiryFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "server: invalid configuration:", err)
		os.Exit(2)
	}
	if err := run(cfg, samples{orderExpiry: expiry}); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

// run serves the samples configured by s until SIGINT or SIGTERM, then
// shuts down gracefully within cfg.ShutdownTimeout.
func run(cfg trellis.Config, s samples) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	svc, err := trellis.New(cfg, setup(s))
	if err != nil {
		return err
	}
	if err := svc.Start(ctx); err != nil {
		_ = svc.Shutdown(context.Background())
		return err
	}
	select {
	case <-ctx.Done():
		svc.Logger().Info("signal received: shutting down", "timeout", cfg.ShutdownTimeout.String())
	case <-svc.Done(): // serving failed; Shutdown reports why
	}
	stop() // a second signal now kills the process at once

	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	return svc.Shutdown(sctx)
}
