package outbox_test

import (
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/trellis-go/trellis/samples/outbox"
	"github.com/trellis-go/trellis/trellistest"
)

// TestOutboxTraceAcrossInstances: a change accepted by the instance that
// does not own the queue is one trace: its request there, the send on
// the owner (handed over through the cluster transport, which carries the
// trace context), and the notice's delivery to the mailer, a child of the
// send, also on the owner.
func TestOutboxTraceAcrossInstances(t *testing.T) {
	spansA, spansB := trellistest.NewSpans(t), trellistest.NewSpans(t)
	a := &instance{m: &mailbox{}}
	a.ts = trellistest.StartInstances(t, 1, outbox.Setup(a.m), spansA.Option())[0]
	b := &instance{m: &mailbox{}}
	b.ts = trellistest.JoinInstance(t, a.ts, outbox.Setup(b.m), spansB.Option())
	change(t, a.ts, "first")
	trellistest.Eventually(t, 30*time.Second, "the first notice mailed", func() bool { return len(holdsMailed(a, b)) == 1 })
	own, other := owner(t, a, b)
	ownSpans, otherSpans := spansA, spansB
	if own == b {
		ownSpans, otherSpans = spansB, spansA
	}

	change(t, other.ts, "second")
	req := otherSpans.Wait(t, "PUT /holds/{id}/state/{state}")
	var deliver, send sdktrace.ReadOnlySpan
	trellistest.Eventually(t, 30*time.Second, "the second notice's delivery in the request's trace", func() bool {
		for _, d := range ownSpans.Named("deliver notices") {
			if d.SpanContext().TraceID() == req.SpanContext().TraceID() {
				deliver = d
			}
		}
		return deliver != nil
	})
	for _, s := range ownSpans.Named("send notices") {
		if s.SpanContext().SpanID() == deliver.Parent().SpanID() {
			send = s
		}
	}
	if send == nil {
		t.Fatalf("the delivery's parent %v is no send on the owner", deliver.Parent().SpanID())
	}
	if send.Parent().TraceID() != req.SpanContext().TraceID() || !send.Parent().IsRemote() {
		t.Fatalf("the owner's send (parent %v) does not continue the other instance's request", send.Parent())
	}
	if got := trellistest.SpanAttr(deliver, "trellis.delivery.seq_nr"); got != "2" {
		t.Fatalf("the delivery is of message %q, want 2", got)
	}
}
