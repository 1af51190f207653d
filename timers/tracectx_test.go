package timers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/components"
)

// tracedRecorder is a recorder whose Tracer makes the scheduler trace, as
// a components.Client with a tracer does.
type tracedRecorder struct {
	*recorder
	tracer trace.Tracer
}

func (r tracedRecorder) Tracer() trace.Tracer { return r.tracer }

// TestStoredFormKeepsTheTraceContext: the stored form carries the trace
// context beside any form of the call, single or recurring, and a form
// stored without one (as before) still decodes, with none.
func TestStoredFormKeepsTheTraceContext(t *testing.T) {
	const tc = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nvendor=x"
	run := epoch.Add(time.Minute)
	recur := &Recurrence{Schedule: Schedule{Every: time.Minute, Start: run}.filled(run), Run: run}
	for _, c := range []struct {
		name  string
		recur *Recurrence
		call  components.DeferredCall
		trace string
	}{
		{name: "plain JSON, traced", call: testCall(`{"a":1}`), trace: tc},
		{name: "compressed, traced", call: testCall(jsonString(900)), trace: tc},
		{name: "recurring, traced", recur: recur, call: testCall(`{"a":1}`), trace: tc},
		{name: "plain JSON, untraced", call: testCall(`{"a":1}`)},
		{name: "compressed, untraced", call: testCall(jsonString(900))},
		{name: "shared table, traced", call: testCall(base64String(900)), trace: tc},
		{name: "shared table, untraced", call: testCall(base64String(900))},
		{name: "recurring, shared table, traced", recur: recur, call: testCall(base64String(900)), trace: tc},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := encodeStored(c.recur, c.call, c.trace)
			if err != nil {
				t.Fatal(err)
			}
			old, err := encodeStored(c.recur, c.call, "")
			if err != nil {
				t.Fatal(err)
			}
			if c.trace == "" && string(b) != string(old) {
				t.Fatal("an untraced call is not stored as before")
			}
			if c.trace != "" && len(b) <= len(old)+len(c.trace) {
				t.Fatalf("stored %d bytes: the context is not counted in the timer's size", len(b))
			}
			r, call, got, err := decodeStored(string(b))
			if err != nil || got != c.trace || string(call.Argument) != string(c.call.Argument) || (r == nil) != (c.recur == nil) {
				t.Fatalf("decoded %v %v %q %v", r, call, got, err)
			}
			if c.recur == nil {
				if call2, err := decodeCall(string(b)); err != nil || string(call2.Argument) != string(c.call.Argument) {
					t.Fatalf("decodeCall: %v %v", call2, err)
				}
			}
		})
	}
	if _, _, _, err := decodeStored("\x03\x7fshort"); err == nil {
		t.Fatal("a truncated trace context decoded")
	}
}

// TestTimerRunLinksToItsCreation: each store keeps the trace context a
// timer was created in (outside the payload limit), and its run is a
// span of a trace of its own, linked to the span that created it.
func TestTimerRunLinksToItsCreation(t *testing.T) {
	for _, kind := range []storeKind{memoryKind, redisKind} {
		t.Run(string(kind), func(t *testing.T) {
			spans := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			clk := clockwork.NewFakeClockAt(epoch)
			rec := tracedRecorder{newRecorder(clk), tp.Tracer("test")}
			s := startScheduler(t, newStore(t, kind, clk), rec, Config{MaxPayload: 16})

			ctx, parent := tp.Tracer("test").Start(t.Context(), "place order")
			// 16 bytes of argument: at the limit, whatever the context adds.
			if _, err := s.Create(ctx, "expire", time.Minute, testCall(`"`+strings.Repeat("x", 14)+`"`)); err != nil {
				t.Fatal(err)
			}
			parent.End()
			got, err := s.Get(t.Context(), "expire")
			if err != nil {
				t.Fatal(err)
			}
			create := findSpan(t, spans, "timer create")
			if !strings.Contains(got.TraceContext, create.SpanContext().SpanID().String()) {
				t.Fatalf("stored context %q does not name the create span %v", got.TraceContext, create.SpanContext())
			}
			if create.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Fatal("the create span is not the caller's child")
			}
			advanceTo(t, clk, s, epoch.Add(time.Minute))
			waitFor(t, "the timer's call", func() bool { return rec.len() == 1 })
			waitFor(t, "the run span", func() bool { return hasSpan(spans, "timer run") })
			run := findSpan(t, spans, "timer run")
			if run.Parent().IsValid() || run.SpanContext().TraceID() == parent.SpanContext().TraceID() {
				t.Fatal("the run is not the root of a trace of its own")
			}
			links := run.Links()
			if len(links) != 1 || links[0].SpanContext.SpanID() != create.SpanContext().SpanID() ||
				links[0].SpanContext.TraceID() != parent.SpanContext().TraceID() {
				t.Fatalf("run links %v, want the create span %v", links, create.SpanContext())
			}

			// A recurring timer: each of its runs links to its creation.
			ctx, parent = tp.Tracer("test").Start(t.Context(), "schedule the report")
			if _, err := s.CreateRecurring(ctx, "report", Schedule{Every: time.Minute}, testCall(`"r"`)); err != nil {
				t.Fatal(err)
			}
			parent.End()
			var recurCreate sdktrace.ReadOnlySpan
			for _, sp := range spans.Ended() {
				if sp.Name() == "timer create" && sp.Parent().SpanID() == parent.SpanContext().SpanID() {
					recurCreate = sp
				}
			}
			if recurCreate == nil {
				t.Fatal("no create span for the recurring timer")
			}
			for i := 1; i <= 2; i++ {
				advanceTo(t, clk, s, clk.Now().Add(2*time.Minute))
				waitFor(t, "the recurring runs", func() bool { return countLinked(spans, recurCreate) >= i })
			}
		})
	}
}

// countLinked counts the "timer run" spans linked to to.
func countLinked(r *tracetest.SpanRecorder, to sdktrace.ReadOnlySpan) int {
	n := 0
	for _, s := range r.Ended() {
		if s.Name() == "timer run" && len(s.Links()) == 1 && s.Links()[0].SpanContext.SpanID() == to.SpanContext().SpanID() {
			n++
		}
	}
	return n
}

func hasSpan(r *tracetest.SpanRecorder, name string) bool {
	for _, s := range r.Ended() {
		if s.Name() == name {
			return true
		}
	}
	return false
}

func findSpan(t *testing.T, r *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range r.Ended() {
		if s.Name() == name {
			return s
		}
	}
	t.Fatalf("no span %q among %d", name, len(r.Ended()))
	return nil
}
