package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of the platform's own spans.
const Scope = "github.com/trellis-go/trellis"

// The attributes of the platform's spans. None holds a payload or a
// secret: names and ids only.
const (
	AttrComponent = attribute.Key("trellis.component")
	AttrMethod    = attribute.Key("trellis.method")
	AttrEntityID  = attribute.Key("trellis.entity.id")
	AttrTimer     = attribute.Key("trellis.timer.name")
	AttrAttempt   = attribute.Key("trellis.timer.attempt")
	AttrConsumer  = attribute.Key("trellis.consumer")
	AttrPeer      = attribute.Key("trellis.peer.addr")
	// AttrErrorType is the kind of failure (see End), as OpenTelemetry's
	// semantic conventions name it.
	AttrErrorType = attribute.Key("error.type")
)

// noSpan is what the helpers return when tracing is off: it records
// nothing and, being a value, costs no allocation.
var noSpan trace.Span = noop.Span{}

// Start opens a span named name under ctx, with attrs. With a nil tracer
// (tracing off) it returns ctx as it is and a no-op span.
func Start(ctx context.Context, tr trace.Tracer, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if tr == nil {
		return ctx, noSpan
	}
	return tr.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// StartCall opens the span of a component call: named prefix followed
// by "component.method", with the component, the method and the entity
// id (when there is one) as attributes. With a nil tracer it costs
// nothing.
func StartCall(ctx context.Context, tr trace.Tracer, prefix, component, method, entityID string, kind trace.SpanKind) (context.Context, trace.Span) {
	if tr == nil {
		return ctx, noSpan
	}
	name := prefix + component + "." + method
	attrs := append(make([]attribute.KeyValue, 0, 3), AttrComponent.String(component), AttrMethod.String(method))
	if entityID != "" {
		attrs = append(attrs, AttrEntityID.String(entityID))
	}
	return tr.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// End ends span; when errType is not empty the span failed with that
// kind, which becomes its status description and its error.type. The
// error's message is never recorded: it may hold an argument's content.
func End(span trace.Span, errType string) {
	if errType != "" && span.IsRecording() {
		span.SetStatus(codes.Error, errType)
		span.SetAttributes(AttrErrorType.String(errType))
	}
	span.End()
}

// StartStore opens the span of a store operation op ("entity save") on
// one entity, with its component and id as attributes. With a nil tracer
// it costs nothing.
func StartStore(ctx context.Context, tr trace.Tracer, op, component, entityID string) (context.Context, trace.Span) {
	if tr == nil {
		return ctx, noSpan
	}
	return tr.Start(ctx, op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(AttrComponent.String(component), AttrEntityID.String(entityID)))
}

// StartConsume opens the span of a consumer handling one change of
// entity entityID of entityType: the root of a trace of its own, linked
// to the write's span when the change kept its context (stored, Capture's
// form, "" for none).
func StartConsume(ctx context.Context, tr trace.Tracer, consumer, entityType, entityID, stored string) (context.Context, trace.Span) {
	if tr == nil {
		return ctx, noSpan
	}
	opts := append(LinkTo(stored), trace.WithSpanKind(trace.SpanKindConsumer), trace.WithNewRoot(),
		trace.WithAttributes(AttrConsumer.String(consumer), AttrComponent.String(entityType), AttrEntityID.String(entityID)))
	return tr.Start(ctx, "consume "+consumer, opts...)
}

// StartTimer opens the span of an operation op ("timer create") on the
// timer called name. With a nil tracer it costs nothing.
func StartTimer(ctx context.Context, tr trace.Tracer, op, name string) (context.Context, trace.Span) {
	if tr == nil {
		return ctx, noSpan
	}
	return tr.Start(ctx, op, trace.WithAttributes(AttrTimer.String(name)))
}

// StartTimerRun opens the span of one run of a timer: the root of a
// trace of its own, linked to the span that created the timer (stored,
// tracing.Capture's form, "" for none). With a nil tracer it costs
// nothing.
func StartTimerRun(ctx context.Context, tr trace.Tracer, name string, attempt int, stored string) (context.Context, trace.Span) {
	if tr == nil {
		return ctx, noSpan
	}
	opts := append(LinkTo(stored), trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(AttrTimer.String(name), AttrAttempt.Int(attempt)))
	return tr.Start(ctx, "timer run", opts...)
}
