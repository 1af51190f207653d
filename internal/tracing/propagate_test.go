package tracing

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func remoteCtx(t *testing.T, state string) context.Context {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, err := trace.ParseTraceState(state)
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	return trace.ContextWithSpanContext(context.Background(), sc)
}

func TestCaptureRestore(t *testing.T) {
	for _, tc := range []struct {
		name, state string
	}{
		{name: "traceparent only"},
		{name: "with tracestate", state: "vendor=abc,other=x y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := remoteCtx(t, tc.state)
			stored := Capture(ctx)
			if !strings.HasPrefix(stored, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01") {
				t.Fatalf("stored = %q", stored)
			}
			sc, ok := Restore(stored)
			if !ok || !sc.Equal(trace.SpanContextFromContext(ctx).WithRemote(true)) {
				t.Fatalf("restored %v %v, want %v", sc, ok, trace.SpanContextFromContext(ctx))
			}
			if got := sc.TraceState().String(); got != tc.state {
				t.Fatalf("tracestate = %q, want %q", got, tc.state)
			}
		})
	}
	if Capture(context.Background()) != "" {
		t.Fatal("a context without a span captured something")
	}
	unsampled := trace.ContextWithSpanContext(context.Background(), trace.SpanContextFromContext(remoteCtx(t, "")).WithTraceFlags(0))
	if got := Capture(unsampled); !strings.HasPrefix(got, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00") {
		t.Fatalf("an unsampled span captured %q, want its context, to carry its sampling decision", got)
	}
	if got := CaptureForLink(unsampled); got != "" {
		t.Fatalf("an unsampled span captured %q for a link", got)
	}
	if got := CaptureForLink(remoteCtx(t, "")); !strings.HasPrefix(got, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01") {
		t.Fatalf("a sampled span captured %q for a link", got)
	}
	if _, ok := Restore("00-garbage"); ok {
		t.Fatal("a bad traceparent restored")
	}
	if LinkTo("") != nil {
		t.Fatal("no context, yet a link")
	}
}

func TestInjectExtract(t *testing.T) {
	h := http.Header{}
	Inject(context.Background(), h)
	if len(h) != 0 {
		t.Fatalf("no span, yet headers %v", h)
	}
	ctx := remoteCtx(t, "k=v")
	Inject(ctx, h)
	got := trace.SpanContextFromContext(Extract(context.Background(), h))
	if got.TraceID() != trace.SpanContextFromContext(ctx).TraceID() || got.TraceState().Get("k") != "v" {
		t.Fatalf("extracted %v from %v", got, h)
	}
}

func TestLogHandler(t *testing.T) {
	var b strings.Builder
	log := slog.New(LogHandler(slog.NewJSONHandler(&b, nil))).With("component", "x")
	log.InfoContext(context.Background(), "outside")
	log.InfoContext(remoteCtx(t, ""), "inside")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	if strings.Contains(lines[0], LogTraceID) {
		t.Fatalf("a line outside a span has a trace id: %s", lines[0])
	}
	for _, want := range []string{`"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`, `"span_id":"00f067aa0ba902b7"`, `"component":"x"`} {
		if !strings.Contains(lines[1], want) {
			t.Fatalf("line %s lacks %s", lines[1], want)
		}
	}
}
