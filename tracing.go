package trellis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/trellis-go/trellis/internal/tracing"
)

// maxTraceFlush bounds how long Shutdown waits for the spans still queued
// to reach the collector: an unreachable one must not hold up a stop.
const maxTraceFlush = 5 * time.Second

// serviceTracing is the tracer provider the service traces with: its own
// pipeline (from the OTEL_* variables), the application's
// (WithTracerProvider), or none (tracing off: tracer is nil).
type serviceTracing struct {
	provider trace.TracerProvider // a no-op one when off
	tracer   trace.Tracer         // nil when off
	pipeline *tracing.Pipeline    // the service's own, to flush at shutdown; nil otherwise
}

// newTracing sets up tracing from the OTEL_* variables of the process's
// environment, as the OpenTelemetry SDK reads them: off unless an
// exporter is configured (see docs/observability.md). A bad value is a
// *ConfigError naming its variable.
func newTracing(o options) (serviceTracing, error) {
	if o.tracerProvider != nil {
		return serviceTracing{provider: o.tracerProvider, tracer: o.tracerProvider.Tracer(tracing.Scope)}, nil
	}
	off := serviceTracing{provider: noop.NewTracerProvider()}
	s, err := tracing.ReadEnv(os.Getenv)
	var ee *tracing.EnvError
	if errors.As(err, &ee) {
		return off, &ConfigError{Var: ee.Var, Reason: ee.Reason}
	}
	if err != nil || !s.On {
		return off, err
	}
	p, err := tracing.NewPipeline(context.Background(), s, programName())
	if errors.As(err, &ee) {
		return off, &ConfigError{Var: ee.Var, Reason: ee.Reason}
	}
	if err != nil {
		return off, err
	}
	return serviceTracing{provider: p.Provider, tracer: p.Tracer(), pipeline: p}, nil
}

// logger is l, with each line written inside a span stamped with its
// trace_id and span_id when tracing is on.
func (t serviceTracing) logger(l *slog.Logger) *slog.Logger {
	if t.tracer == nil {
		return l
	}
	return slog.New(tracing.LogHandler(l.Handler()))
}

// shutdown flushes the service's own pipeline, within ctx and
// maxTraceFlush.
func (t serviceTracing) shutdown(ctx context.Context) error {
	if t.pipeline == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, maxTraceFlush)
	defer cancel()
	if err := t.pipeline.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush the traces: %w", err)
	}
	return nil
}

// collectors are the pipeline's series: its queue and its drops.
func (t serviceTracing) collectors() []prometheus.Collector {
	if t.pipeline == nil {
		return nil
	}
	return t.pipeline.Collectors()
}

// httpProvider is the provider the HTTP layer traces requests with; nil
// when tracing is off, so that it adds no middleware at all.
func (t serviceTracing) httpProvider() trace.TracerProvider {
	if t.tracer == nil {
		return nil
	}
	return t.provider
}

// makeGlobal makes the service's tracing the process's OpenTelemetry
// globals, when it is on: the tracer provider and the W3C propagator
// (so that libraries the application uses, such as otelhttp's client
// transport, trace into it and carry the trace on their calls), and the
// SDK's error handler, which then logs to log at warn. Run does it: a
// process that runs one service.
func (t serviceTracing) makeGlobal(log *slog.Logger) {
	if t.tracer == nil {
		return
	}
	otel.SetTracerProvider(t.provider)
	otel.SetTextMapPropagator(tracing.Propagator)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: the OpenTelemetry SDK reports an error", "err", err.Error())
	}))
}

// WithTracerProvider traces the service with tp instead of the pipeline
// the OTEL_* variables describe; the caller owns tp and shuts it down.
// Tests pass an SDK provider over an in-memory exporter.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(o *options) { o.tracerProvider = tp })
}
