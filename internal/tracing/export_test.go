package tracing

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// capturingClient is an OTLP client that keeps what it is given to
// upload, or fails with err.
type capturingClient struct {
	got     []*tracepb.ResourceSpans
	err     error
	stopped int
}

func (c *capturingClient) Start(context.Context) error { return nil }
func (c *capturingClient) Stop(context.Context) error  { c.stopped++; return nil }
func (c *capturingClient) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	c.got = append(c.got, rs...)
	return c.err
}

// spansOfEveryKind ends spans with every kind of attribute, events,
// links, statuses, a remote parent with a tracestate, a local parent, and
// two scopes.
func spansOfEveryKind(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	res := resource.NewSchemaless(attribute.String("service.name", "svc"), attribute.Int("n", 1))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res))
	ctx := remoteCtx(t, "vendor=abc")
	tr, other := tp.Tracer(Scope), tp.Tracer("other", trace.WithInstrumentationVersion("1.2"),
		trace.WithInstrumentationAttributes(attribute.String("scope.attr", "x")))
	ctx, root := tr.Start(ctx, "root", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("s", "v"), attribute.Int64("i", -3), attribute.Bool("b", true), attribute.Float64("f", 1.5),
		attribute.StringSlice("ss", []string{"a", "b"}), attribute.Int64Slice("is", []int64{1, 2}),
		attribute.BoolSlice("bs", []bool{true}), attribute.Float64Slice("fs", []float64{0.5}),
		attribute.KeyValue{Key: "empty"}))
	root.AddEvent("e", trace.WithAttributes(attribute.String("ea", "x")))
	root.SetStatus(codes.Error, "broken")
	_, child := other.Start(ctx, "child", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(trace.Link{SpanContext: trace.SpanContextFromContext(remoteCtx(t, "")), Attributes: []attribute.KeyValue{attribute.Int("l", 1)}}))
	child.SetStatus(codes.Ok, "")
	child.End()
	_, plain := tr.Start(context.Background(), "plain", trace.WithSpanKind(trace.SpanKindProducer))
	plain.End()
	root.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rec.Ended()
}

// TestExportMakesTheSDKsMessages: the exporter hands its client the same
// OTLP messages as the SDK's own exporter makes of the same spans.
func TestExportMakesTheSDKsMessages(t *testing.T) {
	spans := spansOfEveryKind(t)
	ctx := context.Background()
	want := &capturingClient{}
	sdkExp, err := otlptrace.New(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	if err := sdkExp.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	got := &capturingClient{}
	exp, err := newProtoExporter(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	if len(got.got) != 1 || len(want.got) != 1 {
		t.Fatalf("resource spans: got %d, the SDK's %d, want 1", len(got.got), len(want.got))
	}
	if !proto.Equal(got.got[0], want.got[0]) {
		t.Fatalf("messages differ:\n got  %v\n want %v", got.got[0], want.got[0])
	}
	a, _ := proto.Marshal(got.got[0])
	b, _ := proto.Marshal(want.got[0])
	if len(a) != len(b) {
		t.Fatalf("encoded in %d bytes, the SDK's in %d", len(a), len(b))
	}
	if err := exp.ExportSpans(ctx, nil); err != nil || len(got.got) != 1 {
		t.Fatalf("no spans: err %v, uploads %d", err, len(got.got))
	}
	_ = exp.Shutdown(ctx)
	_ = exp.Shutdown(ctx)
	if got.stopped != 1 {
		t.Fatalf("client stopped %d times, want 1", got.stopped)
	}
}

func TestExportFails(t *testing.T) {
	down := errors.New("collector down")
	exp, err := newProtoExporter(context.Background(), &capturingClient{err: down})
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(context.Background(), spansOfEveryKind(t)); !errors.Is(err, down) {
		t.Fatalf("err = %v, want %v", err, down)
	}
}
