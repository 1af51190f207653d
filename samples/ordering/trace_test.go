package ordering_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/samples/ordering"
	"github.com/trellis-go/trellis/trellistest"
)

// clientTraceparent is a W3C traceparent a client sends: its trace and
// its span.
const (
	clientTraceID     = "0af7651916cd43dd8448eb211c80319c"
	clientSpanID      = "b7ad6b7169203331"
	clientTraceparent = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

// TestTraceOfAnOrder follows orders through their traces: one placed
// with a client's traceparent (HTTP → the entity's command and its store
// write → the timer's creation, in the client's trace), later expired
// (the timer's run, a trace of its own linked to the creation → the
// timed action → the entity), one confirmed (the command and the timer's
// deletion), the consumer's handling, and the log lines inside a span
// stamped with its ids.
func TestTraceOfAnOrder(t *testing.T) {
	const expiry = time.Minute
	var notices *ordering.Notices
	spans := trellistest.NewSpans(t)
	ts := trellistest.Start(t, orderApp(expiry, &notices), spans.Option())

	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/orders", strings.NewReader(`{"item":"tea","quantity":2}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", clientTraceparent)
	resp, err := ts.Send(req)
	if err != nil || resp.Status != http.StatusCreated {
		t.Fatalf("POST /orders: %v %v", resp, err)
	}
	var placed contract.Order
	resp.JSON(t, &placed)

	post := spans.Wait(t, "POST /orders")
	if post.SpanContext().TraceID().String() != clientTraceID || post.Parent().SpanID().String() != clientSpanID {
		t.Fatalf("the request's span %v under %v does not continue the client's trace", post.SpanContext(), post.Parent())
	}
	if post.SpanKind() != trace.SpanKindServer || trellistest.SpanAttr(post, "http.route") != "/orders" ||
		trellistest.SpanAttr(post, "http.response.status_code") != "201" || trellistest.SpanAttr(post, "http.request.method") != "POST" {
		t.Fatalf("request span: kind %v, attributes %v", post.SpanKind(), post.Attributes())
	}
	create := spans.Child(t, post, "timer create")
	if trellistest.SpanAttr(create, "trellis.timer.name") != ordering.TimerName(placed.Id) {
		t.Fatalf("timer create names %q", trellistest.SpanAttr(create, "trellis.timer.name"))
	}
	place := spans.Child(t, post, "call order.placeOrder")
	if trellistest.SpanAttr(place, "trellis.entity.id") != placed.Id || trellistest.SpanAttr(place, "trellis.component") != "order" || trellistest.SpanAttr(place, "trellis.method") != "placeOrder" {
		t.Fatalf("command span attributes %v", place.Attributes())
	}
	spans.Child(t, place, "entity save")
	if !strings.Contains(ts.Logs(), `"trace_id":"`+clientTraceID+`"`) {
		t.Fatal("no log line of the request carries its trace_id")
	}

	// A confirmed order: the command and its timer's deletion.
	other := ts.Post(t, "/orders", map[string]any{"item": "milk", "quantity": 1})
	var confirmed contract.Order
	other.JSON(t, &confirmed)
	if r := ts.Post(t, "/orders/"+confirmed.Id+"/confirm", nil); r.Status != http.StatusOK {
		t.Fatalf("confirm: %d %s", r.Status, r.Body)
	}
	confirm := spans.Wait(t, "POST /orders/{id}/confirm")
	spans.Child(t, confirm, "call order.confirm")
	spans.Child(t, confirm, "timer delete")

	// The expiry, a minute later: a trace of its own, linked to the
	// creation of its timer.
	ts.AdvanceTimers(t, expiry)
	run := spans.Wait(t, "timer run")
	if run.Parent().IsValid() || run.SpanContext().TraceID() == post.SpanContext().TraceID() {
		t.Fatal("the timer's run is not the root of a trace of its own")
	}
	if l := run.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != create.SpanContext().SpanID() ||
		l[0].SpanContext.TraceID().String() != clientTraceID {
		t.Fatalf("the run links %v, want the timer's creation %v", l, create.SpanContext())
	}
	action := spans.Child(t, run, "call order-timed-action.expireOrder")
	expire := spans.Child(t, action, "call order.expire")
	spans.Child(t, expire, "entity delete")

	// The consumer's handling of each change: a trace of its own, linked
	// to the write that recorded the change.
	ts.WaitConsumers(t)
	writes := map[trace.SpanID]bool{}
	for _, w := range append(spans.Named("entity save"), spans.Named("entity delete")...) {
		writes[w.SpanContext().SpanID()] = true
	}
	consumed := spans.Named("consume order-notices")
	if len(consumed) == 0 {
		t.Fatalf("no consumer span among %q", spans.Names())
	}
	for _, c := range consumed {
		if c.SpanKind() != trace.SpanKindConsumer || c.Parent().IsValid() || trellistest.SpanAttr(c, "trellis.entity.id") == "" {
			t.Fatalf("consumer span: kind %v, parent %v, attributes %v", c.SpanKind(), c.Parent(), c.Attributes())
		}
		if l := c.Links(); len(l) != 1 || !writes[l[0].SpanContext.SpanID()] {
			t.Fatalf("consumer span of %s links %v, want the write's span", trellistest.SpanAttr(c, "trellis.entity.id"), l)
		}
	}
}
