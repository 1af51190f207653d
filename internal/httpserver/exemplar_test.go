package httpserver

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/trace"
)

func sampledCtx(t *testing.T, traceID string) context.Context {
	t.Helper()
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		t.Fatal(err)
	}
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	return trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
}

// exemplarOf is the trace id of the exemplar of the bucket holding v, ""
// for none.
func exemplarOf(t *testing.T, h prometheus.Histogram, v float64) string {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	for _, b := range m.GetHistogram().GetBucket() {
		if v <= b.GetUpperBound() {
			for _, l := range b.GetExemplar().GetLabel() {
				return l.GetValue()
			}
			return ""
		}
	}
	return ""
}

// TestExemplarOncePerBucketAndSecond: a sampled request's duration
// carries its trace id when its bucket had none for a second; another in
// the same bucket within that second is counted without one, while one
// in another bucket gets its own; an unsampled one never does.
func TestExemplarOncePerBucketAndSecond(t *testing.T) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "d", Buckets: durationBuckets})
	s := &seriesPair{duration: h, exemplarAt: make([]atomic.Int64, len(durationBuckets)+1)}
	const first, second, other = "4bf92f3577b34da6a3ce929d0e0e4736", "5bf92f3577b34da6a3ce929d0e0e4736", "6bf92f3577b34da6a3ce929d0e0e4736"
	now := time.Unix(1000, 0)
	s.observe(sampledCtx(t, first), 0.003, now)
	s.observe(sampledCtx(t, second), 0.004, now.Add(exemplarEvery/2))
	s.observe(sampledCtx(t, other), 2, now.Add(exemplarEvery/2))
	s.observe(context.Background(), 0.004, now.Add(2*exemplarEvery))
	if got := exemplarOf(t, h, 0.003); got != first {
		t.Fatalf("exemplar %q, want the first request's %s", got, first)
	}
	if got := exemplarOf(t, h, 2); got != other {
		t.Fatalf("the other bucket's exemplar %q, want %s", got, other)
	}
	s.observe(sampledCtx(t, second), 0.004, now.Add(exemplarEvery))
	if got := exemplarOf(t, h, 0.003); got != second {
		t.Fatalf("after a second: exemplar %q, want %s", got, second)
	}
	var m dto.Metric
	_ = h.Write(&m)
	if n := m.GetHistogram().GetSampleCount(); n != 5 {
		t.Fatalf("%d observations, want 5", n)
	}
}
