package trellis

import (
	"flag"
	"io"
	"log/slog"
	"os"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/internal/faulthook"
)

// Option configures New and Run.
type Option interface{ apply(*options) }

// optionFunc is an Option that sets what it closes over.
type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	logger   *slog.Logger
	clock    clockwork.Clock
	clockSet bool             // WithClock was given: timers on Redis follow it too
	contract []byte           // served at GET /openapi.yaml
	faults   faulthook.Points // a test kit's (see faulthook); nil in production
	flags    []func(*flag.FlagSet)
	usage    string
	// tracerProvider replaces the pipeline of the OTEL_* variables.
	tracerProvider trace.TracerProvider

	// Run's process: what it reads and where it writes.
	args   []string
	getenv func(string) string
	stderr io.Writer
}

// newOptions applies opts over the defaults for cfg.
func newOptions(cfg Config, opts []Option) options {
	o := options{clock: clockwork.NewRealClock(), args: os.Args[1:], getenv: os.Getenv, stderr: os.Stderr}
	for _, opt := range opts {
		if f, ok := opt.(faulthook.Option); ok {
			o.faults = f.FaultPoints()
			continue
		}
		opt.apply(&o)
	}
	if o.logger == nil {
		o.logger = defaultLogger(cfg.LogLevel)
	}
	return o
}

// defaultLogger is the service's log when the application gives none:
// JSON lines on stderr, from level on.
func defaultLogger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// WithLogger sets the logger (default: JSON on stderr at Config.LogLevel).
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.logger = l }) }

// WithClock sets the clock of the actor system: its timers and passivation
// (default: the real clock). Tests pass a clockwork.FakeClock.
// With Redis, timers then also take their time from c instead of Redis TIME.
func WithClock(c clockwork.Clock) Option {
	return optionFunc(func(o *options) { o.clock, o.clockSet = c, true })
}

// WithContract serves spec, the application's OpenAPI document, at GET
// /openapi.yaml, and validates every request on one of its paths against
// it: parameters and JSON bodies that break a rule of their schema
// (pattern, format, minLength, maximum, required, ...) are answered 400,
// a problem naming each field and the rule. New fails when spec is not
// valid OpenAPI. Without it that route answers 404. The framework's own
// contract (health, metrics, admin API) is served at GET
// /admin/openapi.yaml either way.
func WithContract(spec []byte) Option { return optionFunc(func(o *options) { o.contract = spec }) }

// WithFlags defines the application's own flags for Run, on the flag set
// that holds Trellis's (-addr, -redis-url …), so that both are given on
// one command line: an unknown flag is still an error (exit 2). The
// variables they set are ready when setup runs.
func WithFlags(define func(fs *flag.FlagSet)) Option {
	return optionFunc(func(o *options) { o.flags = append(o.flags, define) })
}

// WithUsage adds text to what -h prints after the flags, such as the
// environment variables the application reads.
func WithUsage(text string) Option { return optionFunc(func(o *options) { o.usage += text }) }

// WithArgs sets the command-line arguments Run reads, without the program
// name (default: os.Args[1:]).
func WithArgs(args []string) Option { return optionFunc(func(o *options) { o.args = args }) }

// WithGetenv sets how Run reads the environment (default: os.Getenv).
func WithGetenv(getenv func(string) string) Option {
	return optionFunc(func(o *options) { o.getenv = getenv })
}

// WithStderr sets where Run writes its messages: the usage, an invalid
// setting, a failure (default: os.Stderr). The log goes to the logger.
func WithStderr(w io.Writer) Option { return optionFunc(func(o *options) { o.stderr = w }) }

// WithTracerProvider traces the service with tp instead of the pipeline
// the OTEL_* variables describe; the caller owns tp and shuts it down.
// Tests pass an SDK provider over an in-memory exporter.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(o *options) { o.tracerProvider = tp })
}
