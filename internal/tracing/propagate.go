package tracing

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Propagator carries the W3C trace context (traceparent, tracestate): on
// the HTTP requests the service accepts, between its instances, and in
// its stored timers.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// The W3C headers, as they are carried.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// MaxContextLen bounds a captured trace context: a traceparent is 55
// bytes; a tracestate longer than W3C's 512 characters is not kept.
const MaxContextLen = 55 + 1 + 512

// Inject writes the trace context of ctx into h; nothing when ctx holds
// no span.
func Inject(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	Propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Extract returns ctx with the remote span context that h carries, if
// it carries a valid one.
func Extract(ctx context.Context, h http.Header) context.Context {
	if h.Get(HeaderTraceparent) == "" {
		return ctx
	}
	return Propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Capture is the trace context of ctx's span as one string to carry with
// a message that continues the trace (reliable delivery): the
// traceparent, then a newline and the tracestate when there is one
// (tracestate holds no newline). "" when ctx holds no span. An unsampled
// span's context is carried too, so that the spans that continue it
// follow its sampling decision rather than start traces of their own.
func Capture(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	return capture(ctx)
}

// CaptureForLink is Capture for a context stored to be linked to later (a
// timer's runs, the consumers of an entity's change): "" unless ctx's
// span is sampled, since a link to a span no backend received leads
// nowhere, and storing it would cost every such write its bytes.
func CaptureForLink(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	return capture(ctx)
}

func capture(ctx context.Context) string {
	var c storedCarrier
	Propagator.Inject(ctx, &c)
	s := c.traceparent
	if c.tracestate != "" && len(s)+1+len(c.tracestate) <= MaxContextLen {
		s += "\n" + c.tracestate
	}
	return s
}

// Restore reads a context written by Capture or CaptureForLink: the span
// context it names, remote; ok is false for "" or one that does not
// parse.
func Restore(stored string) (sc trace.SpanContext, ok bool) {
	if stored == "" {
		return trace.SpanContext{}, false
	}
	var c storedCarrier
	c.traceparent, c.tracestate, _ = strings.Cut(stored, "\n")
	sc = trace.SpanContextFromContext(Propagator.Extract(context.Background(), &c))
	return sc, sc.IsValid()
}

// storedCarrier carries the two W3C headers in fields: a map, as
// propagation.MapCarrier, costs allocations on every span that stores
// its context.
type storedCarrier struct{ traceparent, tracestate string }

func (c *storedCarrier) Get(key string) string {
	switch key {
	case HeaderTraceparent:
		return c.traceparent
	case HeaderTracestate:
		return c.tracestate
	}
	return ""
}

func (c *storedCarrier) Set(key, value string) {
	switch key {
	case HeaderTraceparent:
		c.traceparent = value
	case HeaderTracestate:
		c.tracestate = value
	}
}

func (c *storedCarrier) Keys() []string { return []string{HeaderTraceparent, HeaderTracestate} }

// LinkTo is the option that links a new span to the stored context, if
// it names one.
func LinkTo(stored string) []trace.SpanStartOption {
	if sc, ok := Restore(stored); ok {
		return []trace.SpanStartOption{trace.WithLinks(trace.Link{SpanContext: sc})}
	}
	return nil
}
