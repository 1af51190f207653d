package tracing

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// stalledExporter is a collector that does not answer until released: a
// fault.
type stalledExporter struct {
	release chan struct{}
	got     *tracetest.InMemoryExporter
}

func (e *stalledExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return e.got.ExportSpans(ctx, spans)
}

func (e *stalledExporter) Shutdown(context.Context) error { return nil }

// TestPipelineDropsWhenTheQueueIsFull: with the collector stalled, the
// spans beyond the queue's bound are dropped at once and counted, and
// those admitted are exported once it answers.
func TestPipelineDropsWhenTheQueueIsFull(t *testing.T) {
	exp := &stalledExporter{release: make(chan struct{}), got: tracetest.NewInMemoryExporter()}
	const queue, ended = 4, 20
	p := NewPipelineWith(exp, queue)
	tr := p.Tracer()
	for range ended {
		_, span := tr.Start(context.Background(), "work")
		span.End() // never waits on the collector
	}
	if got := testutil.ToFloat64(p.metrics.dropped); got != ended-queue {
		t.Fatalf("dropped = %v, want %d", got, ended-queue)
	}
	close(exp.release)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.got.GetSpans()); n != queue {
		t.Fatalf("exported %d spans, want %d", n, queue)
	}
	if got := testutil.ToFloat64(p.metrics.exported); got != queue {
		t.Fatalf("exported counter = %v, want %d", got, queue)
	}
	if got := p.queue.pending.Load(); got != 0 {
		t.Fatalf("pending = %d after shutdown", got)
	}
}
