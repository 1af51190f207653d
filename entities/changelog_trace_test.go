package entities_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestChangeLogKeepsTheTraceContext: a change records the W3C trace
// context its write ran in, for the consumer's handling to link to; an
// untraced write records none.
func TestChangeLogKeepsTheTraceContext(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("k=v")
	traced := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts}))
	const want = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nk=v"
	for name, newStore := range changeTargets(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			s, _ := newStore(t)
			const shard = 3
			ids := idsInShard("order", shard, 2)
			if _, err := s.Register(ctx, "mailer", shard); err != nil {
				t.Fatal(err)
			}
			rev := mustSave(t, traced, s, "order", ids[0], `{"n":1}`, 0)
			mustDelete(t, traced, s, "order", ids[0], rev)
			mustSave(t, ctx, s, "order", ids[1], `{"n":2}`, 0)
			changes, _, _, err := s.Changes(ctx, shard, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(changes) != 3 {
				t.Fatalf("%d changes, want 3", len(changes))
			}
			for i, w := range []string{want, want, ""} {
				if changes[i].TraceContext != w {
					t.Errorf("change %d: trace context %q, want %q", i+1, changes[i].TraceContext, w)
				}
			}
		})
	}
}
