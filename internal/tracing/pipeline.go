package tracing

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Pipeline is a tracer provider exporting over OTLP through a bounded
// queue: a span ended while the queue is full is dropped and counted
// (trellis_tracing_spans_dropped_total), so that a slow or unreachable
// collector never holds up the work being traced. The exporter runs on
// the SDK's batch processor's goroutine, never on a request's.
type Pipeline struct {
	// Provider is the SDK's tracer provider; it samples as
	// OTEL_TRACES_SAMPLER says (parent-based always-on by default).
	Provider *sdktrace.TracerProvider
	queue    *boundedQueue
	metrics  *queueMetrics
}

// NewPipeline makes the pipeline the settings describe, with its OTLP
// exporter (which reads its endpoint, headers, timeout, compression and
// TLS from the OTEL_EXPORTER_OTLP_* variables) and a resource named
// serviceName unless OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES)
// names it. Making the exporter does not reach the collector.
func NewPipeline(ctx context.Context, s Settings, serviceName string) (*Pipeline, error) {
	var exp sdktrace.SpanExporter
	var err error
	if s.Protocol == ProtocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: make the OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", serviceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, &EnvError{EnvResourceAttrs, err.Error()}
	}
	return NewPipelineWith(exp, s.QueueSize, sdktrace.WithResource(res)), nil
}

// NewPipelineWith is a pipeline over the exporter exp, with a queue of
// queueSize spans and the provider's options opts.
func NewPipelineWith(exp sdktrace.SpanExporter, queueSize int, opts ...sdktrace.TracerProviderOption) *Pipeline {
	m := newQueueMetrics()
	q := &boundedQueue{max: int64(queueSize), metrics: m}
	// The batch processor's own queue is as large as the bound, which
	// counts every span until its export ends: it never drops itself.
	bsp := sdktrace.NewBatchSpanProcessor(&countingExporter{next: exp, q: q}, sdktrace.WithMaxQueueSize(queueSize))
	q.next = bsp
	m.queued = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "trellis", Subsystem: "tracing", Name: "queue_spans",
		Help: "Spans ended and not yet exported (or dropped by the exporter).",
	}, func() float64 { return float64(q.pending.Load()) })
	opts = append([]sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(q)}, opts...)
	return &Pipeline{Provider: sdktrace.NewTracerProvider(opts...), queue: q, metrics: m}
}

// Tracer is the platform's tracer.
func (p *Pipeline) Tracer() trace.Tracer { return p.Provider.Tracer(Scope) }

// Collectors are the pipeline's series, for the service's registry.
func (p *Pipeline) Collectors() []prometheus.Collector {
	return []prometheus.Collector{p.metrics.dropped, p.metrics.exported, p.metrics.failed, p.metrics.queued}
}

// Counts says how many spans were exported, failed and dropped so far.
func (p *Pipeline) Counts() string {
	v := func(c prometheus.Counter) float64 {
		var m dto.Metric
		_ = c.Write(&m)
		return m.GetCounter().GetValue()
	}
	return fmt.Sprintf("%.0f spans exported, %.0f failed, %.0f dropped (queue full)",
		v(p.metrics.exported), v(p.metrics.failed), v(p.metrics.dropped))
}

// Shutdown exports what is queued, within ctx, and stops the pipeline.
func (p *Pipeline) Shutdown(ctx context.Context) error {
	if err := p.Provider.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("tracing: flush and stop: %w", err)
	}
	return nil
}

type queueMetrics struct {
	dropped, exported, failed prometheus.Counter
	queued                    prometheus.GaugeFunc
}

func newQueueMetrics() *queueMetrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "trellis", Subsystem: "tracing", Name: name, Help: help})
	}
	return &queueMetrics{
		dropped:  c("spans_dropped_total", "Spans dropped because the export queue was full (the collector is slow or unreachable)."),
		exported: c("spans_exported_total", "Spans the collector accepted."),
		failed:   c("spans_export_failed_total", "Spans whose export failed (after the exporter's retries)."),
	}
}

// boundedQueue admits at most max sampled spans between their end and
// the end of their export, and counts the others as dropped.
type boundedQueue struct {
	next    sdktrace.SpanProcessor
	max     int64
	pending atomic.Int64
	metrics *queueMetrics
}

func (q *boundedQueue) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) { q.next.OnStart(ctx, s) }

func (q *boundedQueue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if q.pending.Add(1) > q.max {
		q.pending.Add(-1)
		q.metrics.dropped.Inc()
		return
	}
	q.next.OnEnd(s)
}

func (q *boundedQueue) Shutdown(ctx context.Context) error   { return q.next.Shutdown(ctx) }
func (q *boundedQueue) ForceFlush(ctx context.Context) error { return q.next.ForceFlush(ctx) }

// countingExporter counts the spans exported or failed, and frees their
// places in the queue.
type countingExporter struct {
	next sdktrace.SpanExporter
	q    *boundedQueue
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.next.ExportSpans(ctx, spans)
	e.q.pending.Add(-int64(len(spans)))
	if err != nil {
		e.q.metrics.failed.Add(float64(len(spans)))
		return fmt.Errorf("tracing: export %d spans: %w", len(spans), err)
	}
	e.q.metrics.exported.Add(float64(len(spans)))
	return nil
}

func (e *countingExporter) Shutdown(ctx context.Context) error { return e.next.Shutdown(ctx) }
