package trellis

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

// The exit codes of Run.
const (
	// ExitOK: the service stopped gracefully (or -h was asked for).
	ExitOK = 0
	// ExitFailure: the service could not start or did not stop cleanly.
	ExitFailure = 1
	// ExitInvalidConfig: a setting (variable or flag) is invalid.
	ExitInvalidConfig = 2
)

// Run is a service's main: it reads the configuration from the environment
// and the command line (ConfigFromEnv, with the application's flags of
// WithFlags beside Trellis's), builds the service with setup (New), serves
// on Config.HTTPAddr until ctx ends or the process gets SIGINT or SIGTERM,
// then shuts down gracefully within Config.ShutdownTimeout, and returns
// the process's exit code:
//
//   - ExitOK (0) after a graceful shutdown, or after printing the usage
//     for -h;
//   - ExitInvalidConfig (2) when a setting is invalid, or setup returned
//     an error wrapping a *ConfigError (an application's own setting);
//   - ExitFailure (1) when the service fails to start, fails while
//     serving, or does not stop cleanly.
//
// What went wrong is written to stderr (WithStderr), prefixed with the
// program's name; the service's log goes to its logger.
//
//	func main() { os.Exit(trellis.Run(context.Background(), setup, trellis.WithContract(contract.Spec))) }
func Run(ctx context.Context, setup Setup, opts ...Option) int {
	o := newOptions(DefaultConfig(), opts)
	name := programName()
	cfg, err := ConfigFromEnv(o.getenv, o.args, o.flags...)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(o.stderr, ConfigUsage(o.flags...)+o.usage)
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(o.stderr, "%s: invalid configuration: %v\n", name, err)
		return ExitInvalidConfig
	}
	// The log follows the configured level, unless the caller gave a logger.
	opts = append([]Option{WithLogger(defaultLogger(cfg.LogLevel))}, opts...)
	if err := serve(ctx, cfg, setup, opts); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			fmt.Fprintf(o.stderr, "%s: invalid configuration: %v\n", name, ce)
			return ExitInvalidConfig
		}
		fmt.Fprintf(o.stderr, "%s: %v\n", name, err)
		return ExitFailure
	}
	return ExitOK
}

// serve runs the service until ctx ends or a signal arrives, then shuts it
// down within cfg.ShutdownTimeout.
func serve(ctx context.Context, cfg Config, setup Setup, opts []Option) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	svc, err := New(cfg, setup, opts...)
	if err != nil {
		return err
	}
	svc.host.parts.Tracing.MakeGlobal(svc.Logger())
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

// programName is the name messages are prefixed with: the executable's
// base name.
func programName() string {
	if len(os.Args) == 0 || os.Args[0] == "" {
		return "trellis"
	}
	return filepath.Base(os.Args[0])
}
