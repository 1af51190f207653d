package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// The attributes of reliable delivery's spans.
const (
	AttrProducerID = attribute.Key("trellis.delivery.producer_id")
	AttrSeqNr      = attribute.Key("trellis.delivery.seq_nr")
	// AttrResent marks a delivery of a message that its producer
	// controller sent more than once: on a consumer controller's request,
	// or after a restart, from its durable queue.
	AttrResent = attribute.Key("trellis.delivery.resent")
)

// EventRedelivered is the event of a delivery span each time the consumer
// controller gives its consumer the same Delivery again.
const EventRedelivered = "redelivered"

// StartSend opens the span of a message sent through the producer
// controller of producerID, under ctx: named "send " + producerID, of
// kind producer. With a nil tracer it costs nothing.
func StartSend(ctx context.Context, tr trace.Tracer, producerID string) (context.Context, trace.Span) {
	if tr == nil {
		return ctx, noSpan
	}
	return tr.Start(ctx, "send "+producerID, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(AttrProducerID.String(producerID)))
}

// StartDelivery opens the span of a consumer's handling of one delivered
// message: named "deliver " + producerID, of kind consumer, a child of
// the send whose context the message carried (stored, Capture's form), in
// its trace. It is not started (ok false) with a nil tracer or a message
// sent untraced.
func StartDelivery(tr trace.Tracer, producerID string, seqNr int64, resent bool, stored string) (ctx context.Context, span trace.Span, ok bool) {
	if tr == nil || stored == "" {
		return nil, nil, false
	}
	sc, ok := Restore(stored)
	if !ok {
		return nil, nil, false
	}
	attrs := append(make([]attribute.KeyValue, 0, 3), AttrProducerID.String(producerID), AttrSeqNr.Int64(seqNr))
	if resent {
		attrs = append(attrs, AttrResent.Bool(true))
	}
	ctx, span = tr.Start(trace.ContextWithRemoteSpanContext(context.Background(), sc), "deliver "+producerID,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
	return ctx, span, true
}
