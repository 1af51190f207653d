package trellistest

import (
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/trellis-go/trellis"
)

// Spans keeps in memory every span of the services it is given to
// (Option), sampling all of them: a test checks what a request, a timer
// or a consumer traced, the platform's spans and the application's own.
type Spans struct {
	rec *tracetest.SpanRecorder
	// Provider is the tracer provider the services trace with.
	Provider *sdktrace.TracerProvider
}

// NewSpans makes the recorder; it stops when the test ends.
func NewSpans(t testing.TB) *Spans {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &Spans{rec: rec, Provider: tp}
}

// Option makes a service trace into s.
func (s *Spans) Option() Option {
	return WithServiceOptions(trellis.WithTracerProvider(s.Provider))
}

// Ended are the spans ended so far, in the order they ended.
func (s *Spans) Ended() []sdktrace.ReadOnlySpan { return s.rec.Ended() }

// Named are the ended spans called name, or whose name starts with it
// when it ends in '*'.
func (s *Spans) Named(name string) []sdktrace.ReadOnlySpan {
	prefix, wild := strings.CutSuffix(name, "*")
	var out []sdktrace.ReadOnlySpan
	for _, sp := range s.rec.Ended() {
		if sp.Name() == name || wild && strings.HasPrefix(sp.Name(), prefix) {
			out = append(out, sp)
		}
	}
	return out
}

// Wait waits (up to 10 s) until a span called name (see Named) has
// ended, and returns the last one.
func (s *Spans) Wait(t testing.TB, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	Eventually(t, 10*time.Second, "a span "+name, func() bool { return len(s.Named(name)) > 0 })
	got := s.Named(name)
	return got[len(got)-1]
}

// Names lists the ended spans' names, for a failure's message.
func (s *Spans) Names() []string {
	var out []string
	for _, sp := range s.rec.Ended() {
		out = append(out, sp.Name())
	}
	return out
}

// Child waits (up to 10 s) for a span called name (see Named) whose
// parent is parent, in parent's trace, and returns it.
func (s *Spans) Child(t testing.TB, parent sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	Eventually(t, 10*time.Second, name+" under "+parent.Name(), func() bool {
		for _, sp := range s.Named(name) {
			if sp.Parent().SpanID() == parent.SpanContext().SpanID() && sp.SpanContext().TraceID() == parent.SpanContext().TraceID() {
				found = sp
				return true
			}
		}
		return false
	})
	return found
}

// SpanAttr is the span's attribute key as a string ("" when it has none).
func SpanAttr(sp sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range sp.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}
