package delivery_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/runtime"
)

// pcHarness is a producer controller between probes: one plays the
// producer, one the consumer controller. Its clock is fake.
type pcHarness struct {
	sys      *runtime.System
	clock    *clockwork.FakeClock
	pc       runtime.Ref[delivery.ProducerCommand[deliverytest.Job]]
	producer *deliverytest.Probe[delivery.RequestNext[deliverytest.Job]]
	cc       *deliverytest.Probe[delivery.ConsumerCommand[deliverytest.Job]]
	logs     *deliverytest.LogBuffer
	watcher  *deliverytest.Watcher
	// assoc is the association of the last message marked first that
	// expectSeq saw: the probe answers in it, as a consumer controller does.
	assoc uint64
}

func newPC(t *testing.T, s delivery.ProducerSettings, opts ...delivery.ProducerOption[deliverytest.Job]) *pcHarness {
	t.Helper()
	h := &pcHarness{clock: clockwork.NewFakeClock()}
	h.sys, h.logs = deliverytest.NewSystem(t, runtime.WithClock(h.clock))
	var err error
	h.pc, err = delivery.SpawnProducerController[deliverytest.Job](h.sys, "pc", "p", s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	h.watcher = deliverytest.NewWatcher(t, h.sys)
	h.watcher.Watch(h.pc)
	h.producer = deliverytest.NewProbe[delivery.RequestNext[deliverytest.Job]](t, h.sys, "producer")
	h.cc = deliverytest.NewProbe[delivery.ConsumerCommand[deliverytest.Job]](t, h.sys, "cc")
	return h
}

// start connects producer and consumer controller probes.
func (h *pcHarness) start() {
	h.pc.Tell(delivery.ProducerStart[deliverytest.Job]{Producer: h.producer.Ref})
	h.pc.Tell(delivery.RegisterConsumer[deliverytest.Job]{ConsumerController: h.cc.Ref})
}

func (h *pcHarness) expectRequestNext(t *testing.T, current, confirmed delivery.SeqNr) delivery.RequestNext[deliverytest.Job] {
	t.Helper()
	r := h.producer.Expect(t)
	if r.CurrentSeqNr != current || r.ConfirmedSeqNr != confirmed || r.ProducerID != "p" {
		t.Fatalf("RequestNext(current %d, confirmed %d), want (%d, %d)", r.CurrentSeqNr, r.ConfirmedSeqNr, current, confirmed)
	}
	return r
}

// expectSeq takes the consumer controller's next message, which must be
// message n (job n), first or not as said.
func (h *pcHarness) expectSeq(t *testing.T, n delivery.SeqNr, first bool) *delivery.SequencedMessage[deliverytest.Job] {
	t.Helper()
	m, ok := h.cc.Expect(t).(*delivery.SequencedMessage[deliverytest.Job])
	if !ok {
		t.Fatalf("consumer controller got %T, want a SequencedMessage", m)
	}
	if m.SeqNr != n || m.First != first || m.ProducerID != "p" || m.ProducerController != h.pc || m.Incarnation == 0 {
		t.Fatalf("SequencedMessage(seqNr %d, first %t, producer %q), want (%d, %t, \"p\")", m.SeqNr, m.First, m.ProducerID, n, first)
	}
	if m.First && m.Association > h.assoc {
		h.assoc = m.Association
	}
	if m.Chunk == nil && m.Message.N != int(n) {
		t.Fatalf("message %d carries job %d", n, m.Message.N)
	}
	return m
}

// sendJobs sends jobs from..to, each on the RequestNext before it.
func (h *pcHarness) sendJobs(t *testing.T, r delivery.RequestNext[deliverytest.Job], from, to delivery.SeqNr, confirmed delivery.SeqNr) delivery.RequestNext[deliverytest.Job] {
	t.Helper()
	for n := from; n <= to; n++ {
		r.SendNextTo.Tell(deliverytest.Job{N: int(n)})
		if n < to {
			r = h.expectRequestNext(t, n+1, confirmed)
		}
	}
	return r
}

func (h *pcHarness) request(confirmed, upTo delivery.SeqNr) {
	h.pc.Tell(delivery.Request[deliverytest.Job]{ConfirmedSeqNr: confirmed, RequestUpToSeqNr: upTo, SupportResend: true, Association: h.assoc})
}

// TestProducerFirstMessageWithoutDemand: message 1 goes out before any
// Request; the next RequestNext waits for one.
func TestProducerFirstMessageWithoutDemand(t *testing.T) {
	h := newPC(t, delivery.ProducerSettings{})
	h.start()
	r := h.expectRequestNext(t, 1, 0)
	r.SendNextTo.Tell(deliverytest.Job{N: 1})
	h.expectSeq(t, 1, true)
	h.producer.ExpectNone(t, 20*time.Millisecond)
	h.request(0, 3)
	r = h.expectRequestNext(t, 2, 0)
	r = h.sendJobs(t, r, 2, 3, 0)
	h.expectSeq(t, 2, false)
	h.expectSeq(t, 3, false)
	h.producer.ExpectNone(t, 20*time.Millisecond) // the demand is used up
	h.request(1, 4)
	h.expectRequestNext(t, 4, 1)
}

// TestProducerWaitsForEverything: nothing is requested until the
// controller has both a producer and a consumer controller, whichever
// comes first.
func TestProducerWaitsForEverything(t *testing.T) {
	for _, order := range []string{"producer first", "consumer first"} {
		t.Run(order, func(t *testing.T) {
			h := newPC(t, delivery.ProducerSettings{})
			start := delivery.ProducerCommand[deliverytest.Job](delivery.ProducerStart[deliverytest.Job]{Producer: h.producer.Ref})
			register := delivery.ProducerCommand[deliverytest.Job](delivery.RegisterConsumer[deliverytest.Job]{ConsumerController: h.cc.Ref})
			if order == "consumer first" {
				start, register = register, start
			}
			h.pc.Tell(start)
			h.producer.ExpectNone(t, 20*time.Millisecond)
			h.pc.Tell(register)
			h.expectRequestNext(t, 1, 0)
		})
	}
}

// TestProducerWithoutDemandFails: a producer that sends twice on one
// RequestNext breaks the protocol, and the controller stops saying so.
func TestProducerWithoutDemandFails(t *testing.T) {
	h := newPC(t, delivery.ProducerSettings{})
	h.start()
	r := h.expectRequestNext(t, 1, 0)
	r.SendNextTo.Tell(deliverytest.Job{N: 1})
	r.SendNextTo.Tell(deliverytest.Job{N: 2})
	h.watcher.ExpectStopped(t, "/user/pc")
	if !h.logs.Contains("without demand") {
		t.Fatalf("no protocol error in the log:\n%s", h.logs.Tail(5))
	}
}

// TestProducerResend: Resend(n) sends the unconfirmed from n on again;
// Resend(0) marks the head first before it resends.
func TestProducerResend(t *testing.T) {
	h := newPC(t, delivery.ProducerSettings{})
	h.start()
	r := h.expectRequestNext(t, 1, 0)
	r.SendNextTo.Tell(deliverytest.Job{N: 1})
	h.expectSeq(t, 1, true)
	h.request(1, 10) // confirms 1
	r = h.expectRequestNext(t, 2, 1)
	h.sendJobs(t, r, 2, 5, 1)
	for n := delivery.SeqNr(2); n <= 5; n++ {
		h.expectSeq(t, n, false)
	}
	h.pc.Tell(delivery.Resend[deliverytest.Job]{FromSeqNr: 4, Association: h.assoc})
	h.expectSeq(t, 4, false)
	h.expectSeq(t, 5, false)
	h.pc.Tell(delivery.Resend[deliverytest.Job]{FromSeqNr: 0, Association: h.assoc})
	h.expectSeq(t, 2, true) // marked first, in the same round trip
	h.expectSeq(t, 3, false)
	h.expectSeq(t, 4, false)
	h.expectSeq(t, 5, false)
	h.cc.ExpectNone(t, 20*time.Millisecond)
}

// TestProducerResendFirst: the first message is sent again every
// ResendFirstInterval until it is confirmed.
func TestProducerResendFirst(t *testing.T) {
	h := newPC(t, delivery.ProducerSettings{ResendFirstInterval: time.Second})
	h.start()
	r := h.expectRequestNext(t, 1, 0)
	r.SendNextTo.Tell(deliverytest.Job{N: 1})
	h.expectSeq(t, 1, true)
	for range 3 {
		h.advance(t, time.Second)
		h.expectSeq(t, 1, true)
	}
	h.request(1, 10)
	h.expectRequestNext(t, 2, 1)
	deliverytest.Eventually(t, "the resend-first timer is cancelled", func() bool { return !timersPending(h.clock, 1) })
	h.cc.ExpectNone(t, 20*time.Millisecond)
}

// advance moves the fake clock by d once a timer is pending.
func (h *pcHarness) advance(t *testing.T, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deliverytest.WaitLimit)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("no timer pending: %v", err)
	}
	h.clock.Advance(d)
}

// timersPending reports whether fc has at least n pending timers, at once.
func timersPending(fc *clockwork.FakeClock, n int) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return fc.BlockUntilContext(ctx, n) == nil
}

// TestProducerAsk: an ask is answered with the message's sequence number
// once the consumer controller confirms it, by Request or by Ack.
func TestProducerAsk(t *testing.T) {
	h := newPC(t, delivery.ProducerSettings{})
	replies := deliverytest.NewProbe[delivery.SeqNr](t, h.sys, "replies")
	h.start()
	r := h.expectRequestNext(t, 1, 0)
	r.AskNextTo.Tell(delivery.MessageWithConfirmation[deliverytest.Job]{Message: deliverytest.Job{N: 1}, ReplyTo: replies.Ref})
	if m := h.expectSeq(t, 1, true); !m.Ack {
		t.Fatal("an asked message without Ack")
	}
	h.request(0, 10)
	r = h.expectRequestNext(t, 2, 0)
	r.AskNextTo.Tell(delivery.MessageWithConfirmation[deliverytest.Job]{Message: deliverytest.Job{N: 2}, ReplyTo: replies.Ref})
	h.expectSeq(t, 2, false)
	r = h.expectRequestNext(t, 3, 0)
	r.AskNextTo.Tell(delivery.MessageWithConfirmation[deliverytest.Job]{Message: deliverytest.Job{N: 3}, ReplyTo: replies.Ref})
	h.expectSeq(t, 3, false)
	replies.ExpectNone(t, 20*time.Millisecond)
	h.request(2, 10)
	for _, want := range []delivery.SeqNr{1, 2} {
		if got := replies.Expect(t); got != want {
			t.Fatalf("reply %d, want %d", got, want)
		}
	}
	h.pc.Tell(delivery.Ack[deliverytest.Job]{ConfirmedSeqNr: 3, Association: h.assoc})
	if got := replies.Expect(t); got != 3 {
		t.Fatalf("reply %d, want 3", got)
	}
}

// TestProducerNewConsumer: RegisterConsumer with another consumer
// controller sends it the unconfirmed messages, the head marked first.
func TestProducerNewConsumer(t *testing.T) {
	h := newPC(t, delivery.ProducerSettings{})
	h.start()
	r := h.expectRequestNext(t, 1, 0)
	r.SendNextTo.Tell(deliverytest.Job{N: 1})
	h.expectSeq(t, 1, true)
	h.request(2, 10) // confirms 2, which was never sent: a stale or bogus confirmation, ignored
	r = h.expectRequestNext(t, 2, 0)
	r.SendNextTo.Tell(deliverytest.Job{N: 2})
	h.expectSeq(t, 2, false)
	r = h.expectRequestNext(t, 3, 0)
	h.request(1, 10)
	h.sendJobs(t, r, 3, 4, 1)
	for n := delivery.SeqNr(3); n <= 4; n++ {
		h.expectSeq(t, n, false)
	}
	h.expectRequestNext(t, 5, 1)
	h.request(2, 10)
	cc2 := deliverytest.NewProbe[delivery.ConsumerCommand[deliverytest.Job]](t, h.sys, "cc2")
	h.pc.Tell(delivery.RegisterConsumer[deliverytest.Job]{ConsumerController: cc2.Ref})
	h.cc = cc2
	h.expectSeq(t, 3, true)
	h.expectSeq(t, 4, false)
	h.cc.ExpectNone(t, 20*time.Millisecond)
}

// TestProducerRequestViaTimeout: a Request after the consumer controller
// heard nothing for a while brings the unconfirmed messages again.
func TestProducerRequestViaTimeout(t *testing.T) {
	h := newPC(t, delivery.ProducerSettings{})
	h.start()
	r := h.expectRequestNext(t, 1, 0)
	r.SendNextTo.Tell(deliverytest.Job{N: 1})
	h.expectSeq(t, 1, true)
	h.request(1, 3)
	r = h.expectRequestNext(t, 2, 1)
	h.sendJobs(t, r, 2, 3, 1)
	h.expectSeq(t, 2, false)
	h.expectSeq(t, 3, false) // say both are lost
	h.pc.Tell(delivery.Request[deliverytest.Job]{ConfirmedSeqNr: 1, RequestUpToSeqNr: 3, SupportResend: true, ViaTimeout: true, Association: h.assoc})
	h.expectSeq(t, 2, false)
	h.expectSeq(t, 3, false)
}

// TestProducerOnlyFlowControl: a consumer controller without resending
// makes the producer controller keep nothing; after a timeout with
// everything lost, the window opens past what was sent.
func TestProducerOnlyFlowControl(t *testing.T) {
	h := newPC(t, delivery.ProducerSettings{})
	h.start()
	r := h.expectRequestNext(t, 1, 0)
	r.SendNextTo.Tell(deliverytest.Job{N: 1})
	h.expectSeq(t, 1, true)
	h.pc.Tell(delivery.Request[deliverytest.Job]{ConfirmedSeqNr: 0, RequestUpToSeqNr: 3, Association: h.assoc})
	r = h.expectRequestNext(t, 2, 0)
	h.sendJobs(t, r, 2, 3, 0)
	h.expectSeq(t, 2, false)
	h.expectSeq(t, 3, false) // 2 and 3 lost
	h.pc.Tell(delivery.Resend[deliverytest.Job]{FromSeqNr: 2, Association: h.assoc})
	h.cc.ExpectNone(t, 20*time.Millisecond) // nothing kept to resend
	h.pc.Tell(delivery.Request[deliverytest.Job]{ConfirmedSeqNr: 1, RequestUpToSeqNr: 3, ViaTimeout: true, Association: h.assoc})
	h.expectRequestNext(t, 4, 1)
	h.cc.ExpectNone(t, 20*time.Millisecond)
}

// TestProducerNewProducer: Start from another producer moves an unused
// RequestNext to it.
func TestProducerNewProducer(t *testing.T) {
	h := newPC(t, delivery.ProducerSettings{})
	h.start()
	h.expectRequestNext(t, 1, 0)
	p2 := deliverytest.NewProbe[delivery.RequestNext[deliverytest.Job]](t, h.sys, "producer2")
	h.pc.Tell(delivery.ProducerStart[deliverytest.Job]{Producer: p2.Ref})
	h.producer = p2
	r := h.expectRequestNext(t, 1, 0)
	r.SendNextTo.Tell(deliverytest.Job{N: 1})
	h.expectSeq(t, 1, true)
}

// TestProducerChunks: a message longer than the chunk size goes out as
// chunks, each with its own sequence number, the Ack on the last, and the
// next RequestNext only after the last chunk.
func TestProducerChunks(t *testing.T) {
	h := newPC(t, delivery.ProducerSettings{ChunkLargeMessages: 4})
	replies := deliverytest.NewProbe[delivery.SeqNr](t, h.sys, "replies")
	h.start()
	r := h.expectRequestNext(t, 1, 0)
	r.AskNextTo.Tell(delivery.MessageWithConfirmation[deliverytest.Job]{Message: deliverytest.Job{N: 1}, ReplyTo: replies.Ref}) // {"n":1} is 7 bytes: 2 chunks
	c1 := h.expectSeq(t, 1, true)
	h.cc.ExpectNone(t, 20*time.Millisecond) // the second chunk needs demand
	h.request(0, 10)
	c2 := h.expectSeq(t, 2, false)
	if !c1.Chunk.First || c1.Chunk.Last || c2.Chunk.First || !c2.Chunk.Last || c1.Ack || !c2.Ack {
		t.Fatalf("chunks %+v %+v (ack %t %t)", *c1.Chunk, *c2.Chunk, c1.Ack, c2.Ack)
	}
	if got := string(c1.Chunk.Data) + string(c2.Chunk.Data); got != `{"n":1}` {
		t.Fatalf("chunks join to %q", got)
	}
	h.expectRequestNext(t, 3, 0)
	h.request(2, 10)
	if got := replies.Expect(t); got != 2 {
		t.Fatalf("reply %d, want 2 (the last chunk)", got)
	}
}

// TestSettingsValidation: settings out of range are an error naming the
// field, before any controller runs.
func TestSettingsValidation(t *testing.T) {
	cases := []struct {
		name     string
		producer *delivery.ProducerSettings // checked with NewProducerController
		consumer *delivery.ConsumerSettings // checked with NewConsumerController
		field    string                     // the field the error must name
	}{
		{name: "window 1", consumer: &delivery.ConsumerSettings{FlowControlWindow: 1}, field: "FlowControlWindow"},
		{name: "negative window", consumer: &delivery.ConsumerSettings{FlowControlWindow: -3}, field: "FlowControlWindow"},
		{name: "resend max below min", consumer: &delivery.ConsumerSettings{ResendIntervalMin: 5 * time.Second, ResendIntervalMax: time.Second}, field: "ResendIntervalMax"},
		{name: "negative resend min", consumer: &delivery.ConsumerSettings{ResendIntervalMin: -time.Second}, field: "ResendIntervalMin"},
		{name: "chunk below 1 byte", producer: &delivery.ProducerSettings{ChunkLargeMessages: -1}, field: "ChunkLargeMessages"},
		{name: "negative durable timeout", producer: &delivery.ProducerSettings{DurableQueueRequestTimeout: -1}, field: "DurableQueueRequestTimeout"},
		{name: "negative retries", producer: &delivery.ProducerSettings{DurableQueueRetryAttempts: -1}, field: "DurableQueueRetryAttempts"},
		{name: "resend first below 1ms", producer: &delivery.ProducerSettings{ResendFirstInterval: time.Microsecond}, field: "ResendFirstInterval"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.producer != nil {
				_, err = delivery.NewProducerController[deliverytest.Job]("p", *tc.producer)
			} else {
				_, err = delivery.NewConsumerController[deliverytest.Job](*tc.consumer)
			}
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v, want one naming %s", err, tc.field)
			}
		})
	}
	if _, err := delivery.NewProducerController[deliverytest.Job]("", delivery.ProducerSettings{}); err == nil {
		t.Fatal("an empty producer id is accepted")
	}
	if s := delivery.DefaultConsumerSettings(); s.FlowControlWindow != 50 || s.ResendIntervalMin != 2*time.Second || s.ResendIntervalMax != 30*time.Second || s.OnlyFlowControl {
		t.Fatalf("consumer defaults %+v", s)
	}
	if s := delivery.DefaultProducerSettings(); s.ChunkLargeMessages != 0 || s.DurableQueueRequestTimeout != 3*time.Second ||
		s.DurableQueueRetryAttempts != 10 || s.ResendFirstInterval != time.Second {
		t.Fatalf("producer defaults %+v", s)
	}
}

var _ durable.BatchQueue[deliverytest.Job] = (*deliverytest.FlakyQueue[deliverytest.Job])(nil)
