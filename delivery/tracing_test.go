package delivery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/redisqueue"
	"github.com/trellis-go/trellis/delivery/sharding"
	"github.com/trellis-go/trellis/delivery/workpulling"
	"github.com/trellis-go/trellis/internal/testkit/remotetest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/internal/tracing"
	"github.com/trellis-go/trellis/runtime"
	"github.com/trellis-go/trellis/trellistest"
)

// checkDelivered checks that deliver is the delivery of message seqNr,
// a child of send in send's trace, made by the tracer named by, and that
// d (the Delivery the consumer got) holds it.
func checkDelivered(t *testing.T, deliver, send sdktrace.ReadOnlySpan, by string, seqNr int, d delivery.Delivery[deliverytest.Job]) {
	t.Helper()
	if deliver.Parent().SpanID() != send.SpanContext().SpanID() || deliver.SpanContext().TraceID() != send.SpanContext().TraceID() {
		t.Fatalf("%s (parent %s, trace %s) is not a child of %s (span %s, trace %s)", deliver.Name(), deliver.Parent().SpanID(),
			deliver.SpanContext().TraceID(), send.Name(), send.SpanContext().SpanID(), send.SpanContext().TraceID())
	}
	if deliver.SpanKind() != trace.SpanKindConsumer || send.SpanKind() != trace.SpanKindProducer {
		t.Fatalf("kinds %v and %v, want consumer and producer", deliver.SpanKind(), send.SpanKind())
	}
	if got := deliver.InstrumentationScope().Name; got != by {
		t.Fatalf("%s made by %q, want the consumer's instance %q", deliver.Name(), got, by)
	}
	if got := trellistest.SpanAttr(deliver, string(tracing.AttrSeqNr)); got != fmt.Sprint(seqNr) {
		t.Fatalf("%s has seq nr %q, want %d", deliver.Name(), got, seqNr)
	}
	if got := trace.SpanContextFromContext(d.Context()); !got.Equal(deliver.SpanContext()) {
		t.Fatalf("the Delivery's context holds span %v, want %v", got.SpanID(), deliver.SpanContext().SpanID())
	}
}

// tracedAcrossInstances starts a producer on an instance tracing with
// sender and, on another tracing with receiver, a consumer that collects
// want deliveries, connected over the real transport.
func tracedAcrossInstances(t *testing.T, sender, receiver trace.Tracer, want int) (*delivery.Producer[deliverytest.Job], *deliverytest.Collector) {
	t.Helper()
	a := remotetest.NewNode(t, "sender", nil, runtime.WithTracer(sender))
	b := remotetest.NewNode(t, "receiver", nil, runtime.WithTracer(receiver))
	p, err := delivery.NewProducer[deliverytest.Job](a.Sys, "pc", "traced", delivery.ProducerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	at, err := runtime.Expose(a.Sys, p.Controller())
	if err != nil {
		t.Fatal(err)
	}
	cc, err := delivery.SpawnConsumerController[deliverytest.Job](b.Sys, "cc", delivery.ConsumerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	col := deliverytest.NewCollector(want)
	deliverytest.SpawnConsumer(t, b.Sys, "consumer", cc, deliverytest.ConsumerSpec{}, col)
	cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{
		ProducerController: runtime.RemoteRef[delivery.ProducerCommand[deliverytest.Job]](b.Sys, at.Addr, at.Path),
	})
	return p, col
}

// TestTraceUnsampledDeliveryFollowsItsSend: with a parent-based sampler,
// a message sent inside a span that was not sampled is delivered with
// that span's trace in the Delivery's context, unsampled, so that what
// the consumer does under it is not sampled either; no span of it is
// recorded on either instance.
func TestTraceUnsampledDeliveryFollowsItsSend(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p, col := tracedAcrossInstances(t, tp.Tracer("sender"), tp.Tracer("receiver"), 1)

	ctx, cancel := context.WithTimeout(context.Background(), deliverytest.WaitLimit)
	defer cancel()
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 1}, SpanID: trace.SpanID{0x00, 0xf0, 1}, Remote: true})
	if _, err := p.Send(trace.ContextWithRemoteSpanContext(ctx, unsampled), deliverytest.Job{N: 1}); err != nil {
		t.Fatal(err)
	}
	if err := col.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	got := trace.SpanContextFromContext(col.Deliveries()[0].Context())
	if !got.IsValid() || got.IsSampled() || got.TraceID() != unsampled.TraceID() {
		t.Fatalf("the Delivery's context holds %v (sampled %v), want a span of trace %v, unsampled", got.TraceID(), got.IsSampled(), unsampled.TraceID())
	}
	if ended := rec.Ended(); len(ended) != 0 {
		t.Fatalf("%d spans recorded of an unsampled trace, the first %q", len(ended), ended[0].Name())
	}
}

// TestTraceDeliveryAcrossInstances: a message sent through a producer
// handle on one instance, inside a span, is delivered on another over the
// real transport, and the delivery's span is a child of the send's, which
// is a child of the sender's: one trace across both instances. A message
// sent with no span in its context starts a trace of its own at its send.
func TestTraceDeliveryAcrossInstances(t *testing.T) {
	spans := trellistest.NewSpans(t)
	sender := spans.Provider.Tracer("sender")
	p, col := tracedAcrossInstances(t, sender, spans.Provider.Tracer("receiver"), 2)

	ctx, cancel := context.WithTimeout(context.Background(), deliverytest.WaitLimit)
	defer cancel()
	reqCtx, req := sender.Start(ctx, "request")
	if _, err := p.Send(reqCtx, deliverytest.Job{N: 1}); err != nil {
		t.Fatal(err)
	}
	req.End()
	if _, err := p.Send(ctx, deliverytest.Job{N: 2}); err != nil {
		t.Fatal(err)
	}
	if err := col.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	trellistest.Eventually(t, 10*time.Second, "two deliveries traced", func() bool { return len(spans.Named("deliver traced")) == 2 })
	sends, delivers := spans.Named("send traced"), spans.Named("deliver traced")
	if len(sends) != 2 {
		t.Fatalf("spans %v: want two sends", spans.Names())
	}
	root := spans.Wait(t, "request")
	if sends[0].Parent().SpanID() != root.SpanContext().SpanID() || sends[0].SpanContext().TraceID() != root.SpanContext().TraceID() {
		t.Fatalf("the first send is not a child of the request")
	}
	if sends[1].Parent().IsValid() {
		t.Fatalf("the send without a span in its context has a parent %v", sends[1].Parent().SpanID())
	}
	got := col.Deliveries()
	for i := range 2 {
		checkDelivered(t, delivers[i], sends[i], "receiver", i+1, got[i])
	}
}

// TestTraceDurableResendAfterRestart: a message stored in a Redis durable
// queue and delivered but not confirmed before its producer controller's
// process stops is sent again by the next controller of the queue, in
// another process, with the trace context it was stored with: its
// delivery is a child of the original send, marked resent.
func TestTraceDurableResendAfterRestart(t *testing.T) {
	client := testenv.Redis(t)
	spans := trellistest.NewSpans(t)
	prefix := fmt.Sprintf("trellis-test-trace-resend:%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), deliverytest.WaitLimit)
	defer cancel()
	// run starts a "process": a System with a producer handle over the
	// queue and a consumer, confirming or not.
	run := func(name string, confirm bool) (*runtime.System, *delivery.Producer[deliverytest.Job], *redisqueue.Queue[deliverytest.Job], *deliverytest.Collector) {
		sys, _ := deliverytest.NewSystem(t, runtime.WithTracer(spans.Provider.Tracer(name)))
		q, err := redisqueue.New[deliverytest.Job](client, prefix, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := delivery.NewProducer[deliverytest.Job](sys, "pc", "notices", delivery.ProducerSettings{}, delivery.WithDurableQueue[deliverytest.Job](q))
		if err != nil {
			t.Fatal(err)
		}
		cc, err := delivery.SpawnConsumerController[deliverytest.Job](sys, "cc", delivery.ConsumerSettings{})
		if err != nil {
			t.Fatal(err)
		}
		col := deliverytest.NewCollector(1)
		spec := deliverytest.ConsumerSpec{Started: true}
		if !confirm {
			spec.Drop = func(delivery.Delivery[deliverytest.Job]) bool { return true }
		}
		deliverytest.SpawnConsumer(t, sys, "consumer", cc, spec, col)
		cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: p.Controller()})
		return sys, p, q, col
	}
	sys1, p1, q1, _ := run("first", false)
	reqCtx, req := spans.Provider.Tracer("first").Start(ctx, "request")
	if _, err := p1.Send(reqCtx, deliverytest.Job{N: 1}); err != nil { // stored
		t.Fatal(err)
	}
	req.End()
	first := spans.Wait(t, "send notices")
	// The first delivery is outstanding, never confirmed, until the
	// process stops: its span ends then.
	if err := sys1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_, _, q2, col2 := run("second", true)
	t.Cleanup(func() { _ = q2.Delete(context.Background()) })
	if err := col2.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var resent sdktrace.ReadOnlySpan
	trellistest.Eventually(t, 10*time.Second, "the resent delivery's span", func() bool {
		for _, sp := range spans.Named("deliver notices") {
			if sp.InstrumentationScope().Name == "second" {
				resent = sp
				return true
			}
		}
		return false
	})
	checkDelivered(t, resent, first, "second", 1, col2.Deliveries()[0])
	if got := trellistest.SpanAttr(resent, string(tracing.AttrResent)); got != "true" {
		t.Fatalf("the delivery after the restart has %s=%q, want true", tracing.AttrResent, got)
	}
	if req.SpanContext().TraceID() != resent.SpanContext().TraceID() {
		t.Fatal("the resent delivery left the request's trace")
	}
}

// TestTracePatterns: a message sent with its context through a work-pulling
// or a sharding producer controller (RequestNext.SendContext), with or
// without a durable queue, is delivered to its worker or entity in a span
// that is a child of the sender's.
func TestTracePatterns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		durable bool
		send    func(ctx context.Context, t *testing.T, sys *runtime.System, col *deliverytest.Collector, opts []delivery.ProducerOption[deliverytest.Job])
	}{
		{name: "work pulling", send: sendWorkPulling},
		{name: "work pulling, durable", durable: true, send: sendWorkPulling},
		{name: "sharding", send: sendSharding},
		{name: "sharding, durable", durable: true, send: sendSharding},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spans := trellistest.NewSpans(t)
			tr := spans.Provider.Tracer("test")
			sys, _ := deliverytest.NewSystem(t, runtime.WithTracer(tr))
			_, opts := deliverytest.MemoryQueue(tc.durable)
			col := deliverytest.NewCollector(1)
			ctx, sender := tr.Start(context.Background(), "sender")
			tc.send(ctx, t, sys, col, opts)
			sender.End()
			wait, cancel := context.WithTimeout(context.Background(), deliverytest.WaitLimit)
			defer cancel()
			if err := col.Wait(wait); err != nil {
				t.Fatal(err)
			}
			deliver := spans.Wait(t, "deliver *")
			if deliver.Parent().SpanID() != sender.SpanContext().SpanID() || deliver.SpanContext().TraceID() != sender.SpanContext().TraceID() {
				t.Fatalf("%s is not a child of the sender's span", deliver.Name())
			}
			if got := trace.SpanContextFromContext(col.Deliveries()[0].Context()); !got.Equal(deliver.SpanContext()) {
				t.Fatal("the Delivery's context does not hold its span")
			}
		})
	}
}

func sendWorkPulling(ctx context.Context, t *testing.T, sys *runtime.System, col *deliverytest.Collector, opts []delivery.ProducerOption[deliverytest.Job]) {
	key := runtime.NewServiceKey[delivery.ConsumerCommand[deliverytest.Job]]("traced-workers")
	deliverytest.SpawnWorker(t, sys, "worker", key, deliverytest.WorkerSpec{Spec: deliverytest.ConsumerSpec{Started: true}}, col)
	wp := deliverytest.SpawnWP(t, sys, "wp", key, workpulling.Settings{}, opts...)
	deliverytest.WorkPullingProbe(t, sys, wp).Expect(t).SendContext(ctx, deliverytest.Job{N: 1})
}

func sendSharding(ctx context.Context, t *testing.T, sys *runtime.System, col *deliverytest.Collector, opts []delivery.ProducerOption[deliverytest.Job]) {
	region := deliverytest.StartRegion(t, sys, deliverytest.RegionSpec{}, col)
	sp := deliverytest.SpawnSP(t, sys, "sp", region, sharding.Settings{}, opts...)
	deliverytest.ShardingProbe(t, sys, sp).Expect(t).SendContext(ctx, sharding.Envelope[deliverytest.Job]{EntityID: "e1", Message: deliverytest.Job{N: 1}})
}

// TestTracePatternReplayMarkedResent: a message a work-pulling or sharding
// producer controller finds unconfirmed in its durable queue when it
// starts (an earlier controller of the queue sent it, or was about to)
// is delivered in a span that is a child of the send's stored context,
// marked resent.
func TestTracePatternReplayMarkedResent(t *testing.T) {
	for _, tc := range []struct {
		name      string
		qualifier string
		start     func(t *testing.T, sys *runtime.System, col *deliverytest.Collector, opts []delivery.ProducerOption[deliverytest.Job])
	}{
		{name: "work pulling", qualifier: "a-worker-of-before", start: func(t *testing.T, sys *runtime.System, col *deliverytest.Collector, opts []delivery.ProducerOption[deliverytest.Job]) {
			key := runtime.NewServiceKey[delivery.ConsumerCommand[deliverytest.Job]]("replayed-workers")
			deliverytest.SpawnWorker(t, sys, "worker", key, deliverytest.WorkerSpec{Spec: deliverytest.ConsumerSpec{Started: true}}, col)
			deliverytest.SpawnWP(t, sys, "wp", key, workpulling.Settings{}, opts...)
		}},
		{name: "sharding", qualifier: "e1", start: func(t *testing.T, sys *runtime.System, col *deliverytest.Collector, opts []delivery.ProducerOption[deliverytest.Job]) {
			region := deliverytest.StartRegion(t, sys, deliverytest.RegionSpec{}, col)
			deliverytest.SpawnSP(t, sys, "sp", region, sharding.Settings{}, opts...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spans := trellistest.NewSpans(t)
			tr := spans.Provider.Tracer("test")
			sys, _ := deliverytest.NewSystem(t, runtime.WithTracer(tr))
			q, opts := deliverytest.MemoryQueue(true)
			ctx, cancel := context.WithTimeout(context.Background(), deliverytest.WaitLimit)
			defer cancel()
			sendCtx, send := tr.Start(ctx, "send before")
			send.End()
			if err := q.StoreMessageSent(ctx, durable.MessageSent[deliverytest.Job]{SeqNr: 1, Message: deliverytest.Job{N: 1},
				Qualifier: tc.qualifier, Timestamp: time.Now(), Trace: tracing.Capture(sendCtx)}); err != nil {
				t.Fatal(err)
			}
			col := deliverytest.NewCollector(1)
			tc.start(t, sys, col, opts)
			if err := col.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			deliver := spans.Wait(t, "deliver *")
			if deliver.Parent().SpanID() != send.SpanContext().SpanID() || deliver.SpanContext().TraceID() != send.SpanContext().TraceID() {
				t.Fatalf("%s is not a child of the stored send", deliver.Name())
			}
			if got := trellistest.SpanAttr(deliver, string(tracing.AttrResent)); got != "true" {
				t.Fatalf("the replayed delivery has %s=%q, want true", tracing.AttrResent, got)
			}
		})
	}
}
