package tracing

import (
	"context"
	"fmt"
	"math"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// protoExporter sends spans through an OTLP client (otlptracehttp's or
// otlptracegrpc's, which read the OTEL_EXPORTER_OTLP_* variables, retry,
// compress and observe themselves), turning each batch into OTLP's
// messages itself: the same messages as the SDK's exporter makes, but
// with the spans, ids and scalar attributes of a batch in a few blocks,
// rather than three or four small allocations per attribute, which at
// every request sampled were most of the garbage tracing made.
type protoExporter struct {
	client   otlptrace.Client
	stopOnce sync.Once
}

// newProtoExporter starts client and exports through it.
func newProtoExporter(ctx context.Context, client otlptrace.Client) (*protoExporter, error) {
	if err := client.Start(ctx); err != nil {
		return nil, fmt.Errorf("tracing: start the OTLP client: %w", err)
	}
	return &protoExporter{client: client}, nil
}

func (e *protoExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	rs := toProto(spans)
	if len(rs) == 0 {
		return nil
	}
	if err := e.client.UploadTraces(ctx, rs); err != nil {
		return fmt.Errorf("traces export: %w", err)
	}
	return nil
}

func (e *protoExporter) Shutdown(ctx context.Context) error {
	var err error
	e.stopOnce.Do(func() { err = e.client.Stop(ctx) })
	return err
}

// toProto groups spans by resource and instrumentation scope, in the
// order first met, as OTLP's messages.
func toProto(spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	b := newBlocks(spans)
	type scopeKey struct {
		res   attribute.Distinct
		scope instrumentation.Scope
	}
	var out []*tracepb.ResourceSpans
	byRes := map[attribute.Distinct]*tracepb.ResourceSpans{}
	byScope := map[scopeKey]*tracepb.ScopeSpans{}
	for _, sd := range spans {
		if sd == nil {
			continue
		}
		res, scope := sd.Resource(), sd.InstrumentationScope()
		k := scopeKey{res.Equivalent(), scope}
		ss, ok := byScope[k]
		if !ok {
			ss = &tracepb.ScopeSpans{Scope: scopeProto(scope), Spans: []*tracepb.Span{}, SchemaUrl: scope.SchemaURL}
			byScope[k] = ss
			rs, seen := byRes[k.res]
			if !seen {
				rs = &tracepb.ResourceSpans{Resource: resourceProto(res), SchemaUrl: res.SchemaURL()}
				byRes[k.res] = rs
				out = append(out, rs)
			}
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, b.span(sd))
	}
	return out
}

// blocks hold a batch's spans and their scalar attributes, handed out
// one by one.
type blocks struct {
	spans    []tracepb.Span
	statuses []tracepb.Status
	ids      []byte // per span: trace id, span id, parent span id
	kvs      []commonpb.KeyValue
	kvPtrs   []*commonpb.KeyValue
	values   []commonpb.AnyValue
	strs     []commonpb.AnyValue_StringValue
	ints     []commonpb.AnyValue_IntValue
	bools    []commonpb.AnyValue_BoolValue
	doubles  []commonpb.AnyValue_DoubleValue
}

func newBlocks(spans []sdktrace.ReadOnlySpan) *blocks {
	var nAttrs, nStr, nInt, nBool, nDouble int
	for _, sd := range spans {
		if sd == nil {
			continue
		}
		for _, kv := range sd.Attributes() {
			nAttrs++
			switch kv.Value.Type() {
			case attribute.STRING:
				nStr++
			case attribute.INT64:
				nInt++
			case attribute.BOOL:
				nBool++
			case attribute.FLOAT64:
				nDouble++
			}
		}
	}
	return &blocks{
		spans:    make([]tracepb.Span, 0, len(spans)),
		statuses: make([]tracepb.Status, 0, len(spans)),
		ids:      make([]byte, 0, len(spans)*32),
		kvs:      make([]commonpb.KeyValue, 0, nAttrs),
		kvPtrs:   make([]*commonpb.KeyValue, 0, nAttrs),
		values:   make([]commonpb.AnyValue, 0, nAttrs),
		strs:     make([]commonpb.AnyValue_StringValue, 0, nStr),
		ints:     make([]commonpb.AnyValue_IntValue, 0, nInt),
		bools:    make([]commonpb.AnyValue_BoolValue, 0, nBool),
		doubles:  make([]commonpb.AnyValue_DoubleValue, 0, nDouble),
	}
}

// next extends a block by one element and returns it; the blocks are
// sized beforehand, so the element never moves.
func next[T any](s *[]T) *T {
	*s = (*s)[:len(*s)+1]
	return &(*s)[len(*s)-1]
}

// put adds v to a block sized beforehand and returns where it is.
func put[T any](s *[]T, v T) *T {
	*s = append(*s, v)
	return &(*s)[len(*s)-1]
}

// id copies an id into the ids block.
func (b *blocks) id(v []byte) []byte {
	start := len(b.ids)
	b.ids = append(b.ids, v...)
	return b.ids[start:len(b.ids):len(b.ids)]
}

func (b *blocks) span(sd sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := sd.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	st := sd.Status()
	status := next(&b.statuses)
	status.Code, status.Message = statusCode(st.Code), st.Description
	s := next(&b.spans)
	s.TraceId, s.SpanId = b.id(tid[:]), b.id(sid[:])
	s.TraceState = sc.TraceState().String()
	s.Status = status
	s.StartTimeUnixNano = unixNanos(sd.StartTime().UnixNano())
	s.EndTimeUnixNano = unixNanos(sd.EndTime().UnixNano())
	s.Links = linksProto(sd.Links())
	s.Kind = spanKind(sd.SpanKind())
	s.Name = sd.Name()
	s.Attributes = b.attrs(sd.Attributes())
	s.Events = eventsProto(sd.Events())
	s.DroppedAttributesCount = clampUint32(sd.DroppedAttributes())
	s.DroppedEventsCount = clampUint32(sd.DroppedEvents())
	s.DroppedLinksCount = clampUint32(sd.DroppedLinks())
	parent := sd.Parent()
	if psid := parent.SpanID(); psid.IsValid() {
		s.ParentSpanId = b.id(psid[:])
	}
	s.Flags = spanFlags(sc.TraceFlags(), parent)
	return s
}

// attrs are a span's attributes, the scalar ones in the blocks.
func (b *blocks) attrs(attrs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(attrs) == 0 {
		return nil
	}
	start := len(b.kvPtrs)
	for _, a := range attrs {
		av := next(&b.values)
		switch a.Value.Type() {
		case attribute.STRING:
			av.Value = put(&b.strs, commonpb.AnyValue_StringValue{StringValue: a.Value.AsString()})
		case attribute.INT64:
			av.Value = put(&b.ints, commonpb.AnyValue_IntValue{IntValue: a.Value.AsInt64()})
		case attribute.BOOL:
			av.Value = put(&b.bools, commonpb.AnyValue_BoolValue{BoolValue: a.Value.AsBool()})
		case attribute.FLOAT64:
			av.Value = put(&b.doubles, commonpb.AnyValue_DoubleValue{DoubleValue: a.Value.AsFloat64()})
		default:
			setValue(av, a.Value)
		}
		kv := next(&b.kvs)
		kv.Key, kv.Value = string(a.Key), av
		b.kvPtrs = append(b.kvPtrs, kv)
	}
	return b.kvPtrs[start:len(b.kvPtrs):len(b.kvPtrs)]
}

// keyValues are attributes as OTLP's, each allocated: for the resource,
// the scopes, events and links, which are few.
func keyValues(attrs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(attrs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, len(attrs))
	for i, a := range attrs {
		out[i] = &commonpb.KeyValue{Key: string(a.Key), Value: anyValue(a.Value)}
	}
	return out
}

func anyValue(v attribute.Value) *commonpb.AnyValue {
	av := new(commonpb.AnyValue)
	setValue(av, v)
	return av
}

// setValue sets av to v, of any type, as the SDK's exporter does: an
// empty value holds nothing, a type it does not know is "INVALID".
func setValue(av *commonpb.AnyValue, v attribute.Value) {
	switch v.Type() {
	case attribute.EMPTY:
	case attribute.BOOL:
		av.Value = &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}
	case attribute.INT64:
		av.Value = &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}
	case attribute.FLOAT64:
		av.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}
	case attribute.STRING:
		av.Value = &commonpb.AnyValue_StringValue{StringValue: v.AsString()}
	case attribute.BYTESLICE:
		av.Value = &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}
	case attribute.BOOLSLICE:
		av.Value = arrayValue(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		av.Value = arrayValue(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		av.Value = arrayValue(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		av.Value = arrayValue(v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		av.Value = arrayValue(v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		av.Value = &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: keyValues(v.AsMap())}}
	default:
		av.Value = &commonpb.AnyValue_StringValue{StringValue: "INVALID"}
	}
}

func arrayValue[T any](s []T, value func(T) attribute.Value) *commonpb.AnyValue_ArrayValue {
	vs := make([]*commonpb.AnyValue, len(s))
	for i, e := range s {
		vs[i] = anyValue(value(e))
	}
	return &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}
}

func resourceProto(r *resource.Resource) *resourcepb.Resource {
	if r == nil {
		return nil
	}
	return &resourcepb.Resource{Attributes: keyValues(r.Attributes())}
}

func scopeProto(s instrumentation.Scope) *commonpb.InstrumentationScope {
	if s == (instrumentation.Scope{}) {
		return nil
	}
	return &commonpb.InstrumentationScope{Name: s.Name, Version: s.Version, Attributes: keyValues(s.Attributes.ToSlice())}
}

func linksProto(links []sdktrace.Link) []*tracepb.Span_Link {
	if len(links) == 0 {
		return nil
	}
	out := make([]*tracepb.Span_Link, len(links))
	for i, l := range links {
		tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		out[i] = &tracepb.Span_Link{
			TraceId:                tid[:],
			SpanId:                 sid[:],
			Attributes:             keyValues(l.Attributes),
			DroppedAttributesCount: clampUint32(l.DroppedAttributeCount),
			Flags:                  spanFlags(l.SpanContext.TraceFlags(), l.SpanContext),
		}
	}
	return out
}

func eventsProto(events []sdktrace.Event) []*tracepb.Span_Event {
	if len(events) == 0 {
		return nil
	}
	out := make([]*tracepb.Span_Event, len(events))
	for i, e := range events {
		out[i] = &tracepb.Span_Event{
			Name:                   e.Name,
			TimeUnixNano:           unixNanos(e.Time.UnixNano()),
			Attributes:             keyValues(e.Attributes),
			DroppedAttributesCount: clampUint32(e.DroppedAttributeCount),
		}
	}
	return out
}

// spanFlags are the W3C trace flags, with the bits saying whether the
// parent (or a link's span) is remote.
func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	flags := uint32(tf) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if parent.IsRemote() {
		flags |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	return flags
}

func statusCode(c codes.Code) tracepb.Status_StatusCode {
	switch c {
	case codes.Ok:
		return tracepb.Status_STATUS_CODE_OK
	case codes.Error:
		return tracepb.Status_STATUS_CODE_ERROR
	}
	return tracepb.Status_STATUS_CODE_UNSET
}

func spanKind(k trace.SpanKind) tracepb.Span_SpanKind {
	switch k {
	case trace.SpanKindInternal:
		return tracepb.Span_SPAN_KIND_INTERNAL
	case trace.SpanKindClient:
		return tracepb.Span_SPAN_KIND_CLIENT
	case trace.SpanKindServer:
		return tracepb.Span_SPAN_KIND_SERVER
	case trace.SpanKindProducer:
		return tracepb.Span_SPAN_KIND_PRODUCER
	case trace.SpanKindConsumer:
		return tracepb.Span_SPAN_KIND_CONSUMER
	}
	return tracepb.Span_SPAN_KIND_UNSPECIFIED
}

func unixNanos(n int64) uint64 { return uint64(max(0, n)) } //nolint:gosec // not negative

func clampUint32(v int) uint32 {
	return uint32(min(max(int64(v), 0), math.MaxUint32)) //nolint:gosec // clamped
}
