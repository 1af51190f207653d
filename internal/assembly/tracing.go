package assembly

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

// Tracing is the tracer provider the service traces with: its own
// pipeline (from the OTEL_* variables), the application's
// (trellis.WithTracerProvider), or none (tracing off: tracer is nil).
type Tracing struct {
	provider trace.TracerProvider // a no-op one when off
	tracer   trace.Tracer         // nil when off
	pipeline *tracing.Pipeline    // the service's own, to flush at shutdown; nil otherwise
}

// openTracing makes the service's tracing, and stamps the lines its
// logger writes inside a span. The spans still queued are exported when
// the service stops, within a few seconds of their own (an unreachable
// collector loses them); a kill loses them.
func openTracing(a *assembly) error {
	tr, err := newTracing(a.cfg)
	if err != nil {
		return fmt.Errorf("trellis: %w", err)
	}
	a.host.Tracing = tr
	a.host.Logger = tr.logger(a.host.Logger)
	a.add(part{name: "tracing", farewell: true, stop: func(ctx context.Context) error {
		return tr.shutdown(context.WithoutCancel(ctx))
	}})
	return nil
}

// newTracing sets up tracing from the OTEL_* variables of the process's
// environment, as the OpenTelemetry SDK reads them: off unless an
// exporter is configured (see docs/observability.md), or with the
// application's provider (cfg.TracerProvider). A bad value is a
// *SettingError naming its variable.
func newTracing(cfg Config) (Tracing, error) {
	if cfg.TracerProvider != nil {
		return Tracing{provider: cfg.TracerProvider, tracer: cfg.TracerProvider.Tracer(tracing.Scope)}, nil
	}
	off := Tracing{provider: noop.NewTracerProvider()}
	s, err := tracing.ReadEnv(os.Getenv)
	var ee *tracing.EnvError
	if errors.As(err, &ee) {
		return off, &SettingError{Setting: Setting{Var: ee.Var}, Reason: ee.Reason}
	}
	if err != nil || !s.On {
		return off, err
	}
	p, err := tracing.NewPipeline(context.Background(), s, cfg.Program)
	if errors.As(err, &ee) {
		return off, &SettingError{Setting: Setting{Var: ee.Var}, Reason: ee.Reason}
	}
	if err != nil {
		return off, err
	}
	return Tracing{provider: p.Provider, tracer: p.Tracer(), pipeline: p}, nil
}

// logger is l, with each line written inside a span stamped with its
// trace_id and span_id when tracing is on.
func (t Tracing) logger(l *slog.Logger) *slog.Logger {
	if t.tracer == nil {
		return l
	}
	return slog.New(tracing.LogHandler(l.Handler()))
}

// shutdown flushes the service's own pipeline, within ctx and
// maxTraceFlush.
func (t Tracing) shutdown(ctx context.Context) error {
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
func (t Tracing) collectors() []prometheus.Collector {
	if t.pipeline == nil {
		return nil
	}
	return t.pipeline.Collectors()
}

// Provider is the service's tracer provider (trellis.Host.Tracing): a
// no-op one when tracing is off.
func (t Tracing) Provider() trace.TracerProvider { return t.provider }

// httpProvider is the provider the HTTP layer traces requests with; nil
// when tracing is off, so that it adds no middleware at all.
func (t Tracing) httpProvider() trace.TracerProvider {
	if t.tracer == nil {
		return nil
	}
	return t.provider
}

// MakeGlobal makes the service's tracing the process's OpenTelemetry
// globals, when it is on: the tracer provider and the W3C propagator
// (so that libraries the application uses, such as otelhttp's client
// transport, trace into it and carry the trace on their calls), and the
// SDK's error handler, which then logs to log at warn. trellis.Run does
// it: a process that runs one service.
func (t Tracing) MakeGlobal(log *slog.Logger) {
	if t.tracer == nil {
		return
	}
	otel.SetTracerProvider(t.provider)
	otel.SetTextMapPropagator(tracing.Propagator)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: the OpenTelemetry SDK reports an error", "err", err.Error())
	}))
}
