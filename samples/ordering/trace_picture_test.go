package ordering_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/samples/contract"
	"github.com/trellis-go/trellis/samples/ordering"
	"github.com/trellis-go/trellis/trellistest"
)

// picturePath, when set, is where TestTracePicture writes its screenshot
// of the waterfall; docs/trace.png is made with
//
//	go test ./samples/ordering -run TestTracePicture -trace.picture $PWD/docs/trace.png
var picturePath = flag.String("trace.picture", "", "write the screenshot of the trace's waterfall to this PNG file")

// TestTracePicture follows one order across two instances and renders
// its traces as a waterfall: the POST on the instance that took it,
// forwarded to the order's owner, which stores it; the expiry timer
// created in the request; and, a minute later, the timer's run, a trace
// of its own linked to the creation, whose command reaches the owner.
// It checks the traces' shape (parents, kinds, the instance of every
// span, the link), then writes the waterfall as text (to the log) and
// HTML, and, with Chromium there, screenshots the HTML (see picturePath).
func TestTracePicture(t *testing.T) {
	const expiry = time.Minute
	var notices *ordering.Notices
	spansA, spansB := trellistest.NewSpans(t), trellistest.NewSpans(t)
	a := trellistest.StartInstances(t, 1, orderApp(expiry, &notices), spansA.Option())[0]
	var noticesB *ordering.Notices
	b := trellistest.JoinInstance(t, a, orderApp(expiry, &noticesB), spansB.Option())
	trellistest.WaitSettled(t, a, b)

	// Place orders on A until one is owned by B: its placement is
	// forwarded.
	var id string
	for i := 0; id == "" && i < 64; i++ {
		var o contract.Order
		a.Post(t, "/orders", map[string]any{"item": "tea", "quantity": 2}).JSON(t, &o)
		if b.Serves("order", o.Id) {
			id = o.Id
		}
	}
	if id == "" {
		t.Fatal("64 orders placed, none owned by the second instance")
	}
	a.AdvanceTimers(t, expiry)
	b.AdvanceTimers(t, expiry)

	w := newWaterfall(map[string]*trellistest.Spans{"A": spansA, "B": spansB})
	var post *span
	trellistest.Eventually(t, 10*time.Second, "the placement's trace", func() bool {
		w.collect()
		post = w.find("POST /orders", func(s *span) bool {
			return w.child(s, "call order.placeOrder", func(c *span) bool { return attr(c, "trellis.entity.id") == id }) != nil
		})
		return post != nil && w.child(w.child(w.child(w.child(post, "call order.placeOrder", nil), "forward order.placeOrder", nil),
			"run forwarded order.placeOrder", nil), "entity save", nil) != nil
	})
	expect := func(parent *span, name, instance string, kind trace.SpanKind) *span {
		t.Helper()
		c := w.child(parent, name, nil)
		if c == nil || c.instance != instance || c.SpanKind() != kind {
			t.Fatalf("under %s: %s on instance %s of kind %v: got %+v", parent.Name(), name, instance, kind, c)
		}
		return c
	}
	if post.instance != "A" || post.Parent().IsValid() || post.SpanKind() != trace.SpanKindServer {
		t.Fatalf("the request's span: instance %s, parent %v, kind %v", post.instance, post.Parent(), post.SpanKind())
	}
	create := expect(post, "timer create", "A", trace.SpanKindInternal)
	place := expect(post, "call order.placeOrder", "A", trace.SpanKindInternal)
	fwd := expect(place, "forward order.placeOrder", "A", trace.SpanKindClient)
	if attr(fwd, "trellis.peer.addr") != b.Host().Config.ClusterAddr && attr(fwd, "trellis.peer.addr") == "" {
		t.Fatalf("the forward names no peer: %v", fwd.Attributes())
	}
	run := expect(fwd, "run forwarded order.placeOrder", "B", trace.SpanKindServer)
	expect(run, "entity save", "B", trace.SpanKindClient)

	// The expiry: a trace of its own, linked to the creation, reaching
	// the owner.
	var timerRun *span
	trellistest.Eventually(t, 10*time.Second, "the expiry's trace", func() bool {
		w.collect()
		timerRun = w.find("timer run", func(s *span) bool {
			l := s.Links()
			return len(l) == 1 && l[0].SpanContext.SpanID() == create.SpanContext().SpanID()
		})
		return timerRun != nil && len(w.named(timerRun.SpanContext().TraceID(), "entity delete")) == 1
	})
	if timerRun.Parent().IsValid() || timerRun.SpanContext().TraceID() == post.SpanContext().TraceID() {
		t.Fatal("the timer's run is not the root of a trace of its own")
	}
	action := expect(timerRun, "call order-timed-action.expireOrder", timerRun.instance, trace.SpanKindInternal)
	expire := expect(action, "call order.expire", timerRun.instance, trace.SpanKindInternal)
	del := w.named(timerRun.SpanContext().TraceID(), "entity delete")[0]
	if del.instance != "B" {
		t.Fatalf("the order was deleted on instance %s, not on its owner B", del.instance)
	}
	if timerRun.instance == "A" {
		ran := expect(expect(expire, "forward order.expire", "A", trace.SpanKindClient), "run forwarded order.expire", "B", trace.SpanKindServer)
		if w.parentOf(del) != ran {
			t.Fatal("the delete is not under the forwarded command")
		}
	}

	traces := []*span{post, timerRun}
	text := w.text(traces)
	t.Logf("the traces of order %s:\n%s", id, text)
	dir := t.ArtifactDir()
	page := filepath.Join(dir, "trace.html")
	if err := os.WriteFile(page, []byte(w.html(traces)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "trace.txt"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out := *picturePath
	if out == "" {
		out = filepath.Join(dir, "trace.png")
	}
	screenshot(t, page, out)
}

// span is a recorded span and the instance that recorded it.
type span struct {
	sdktrace.ReadOnlySpan
	instance string
}

func attr(s *span, key string) string { return trellistest.SpanAttr(s.ReadOnlySpan, key) }
