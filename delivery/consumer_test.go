package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/impl"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/runtime"
)

// ccHarness is a consumer controller between probes: one plays the
// producer controller, one the consumer. Its clock is fake.
type ccHarness struct {
	sys      *runtime.System
	clock    *clockwork.FakeClock
	cc       runtime.Ref[delivery.ConsumerCommand[deliverytest.Job]]
	pc       *deliverytest.Probe[delivery.ProducerCommand[deliverytest.Job]]
	consumer *deliverytest.Probe[delivery.Delivery[deliverytest.Job]]
	logs     *deliverytest.LogBuffer
}

const incA, incB = 0xA, 0xB // two producer controller incarnations

func newCC(t *testing.T, s delivery.ConsumerSettings) *ccHarness {
	t.Helper()
	h := &ccHarness{clock: clockwork.NewFakeClock()}
	h.sys, h.logs = deliverytest.NewSystem(t, runtime.WithClock(h.clock))
	var err error
	h.cc, err = delivery.SpawnConsumerController[deliverytest.Job](h.sys, "cc", s)
	if err != nil {
		t.Fatal(err)
	}
	h.pc = deliverytest.NewProbe[delivery.ProducerCommand[deliverytest.Job]](t, h.sys, "pc")
	h.consumer = deliverytest.NewProbe[delivery.Delivery[deliverytest.Job]](t, h.sys, "consumer")
	h.cc.Tell(delivery.ConsumerStart[deliverytest.Job]{DeliverTo: h.consumer.Ref})
	return h
}

// send tells the consumer controller message n of producer incarnation inc.
func (h *ccHarness) send(n delivery.SeqNr, first bool, inc uint64) {
	h.cc.Tell(&delivery.SequencedMessage[deliverytest.Job]{ProducerID: "p", SeqNr: n, Message: deliverytest.Job{N: int(n)}, First: first,
		ProducerController: h.pc.Ref, Incarnation: inc})
}

func (h *ccHarness) expectRequest(t *testing.T, confirmed, upTo delivery.SeqNr, viaTimeout bool) {
	t.Helper()
	want := delivery.Request[deliverytest.Job]{ConfirmedSeqNr: confirmed, RequestUpToSeqNr: upTo, SupportResend: true, ViaTimeout: viaTimeout}
	if got := h.pc.Expect(t); got != delivery.ProducerCommand[deliverytest.Job](want) {
		t.Fatalf("producer controller got %#v, want %#v", got, want)
	}
}

func (h *ccHarness) expectPC(t *testing.T, want delivery.ProducerCommand[deliverytest.Job]) {
	t.Helper()
	if got := h.pc.Expect(t); got != want {
		t.Fatalf("producer controller got %#v, want %#v", got, want)
	}
}

func (h *ccHarness) expectAck(t *testing.T, confirmed delivery.SeqNr) {
	t.Helper()
	got := h.pc.Expect(t)
	if a, ok := got.(*delivery.Ack[deliverytest.Job]); !ok || a.ConfirmedSeqNr != confirmed {
		t.Fatalf("producer controller got %#v, want an Ack of %d", got, confirmed)
	}
}

func (h *ccHarness) expectDelivery(t *testing.T, seqNr delivery.SeqNr) delivery.Delivery[deliverytest.Job] {
	t.Helper()
	d := h.consumer.Expect(t)
	if d.SeqNr != seqNr || d.Message.N != int(seqNr) || d.ProducerID != "p" {
		t.Fatalf("delivery %+v, want seqNr %d", d, seqNr)
	}
	return d
}

// tick fires the retry timer, whose interval must be d.
func (h *ccHarness) tick(t *testing.T, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deliverytest.WaitLimit)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("retry timer not armed: %v", err)
	}
	h.clock.Advance(d)
}

// TestConsumerWindow checks the flow control arithmetic with W = 20: the
// first message s asks for s-1+W, confirming it asks again, and from then
// on a Request goes out only when W/2 of the demand is left.
func TestConsumerWindow(t *testing.T) {
	cases := []struct {
		name  string
		first delivery.SeqNr // the association's first sequence number
	}{
		{name: "fresh producer", first: 1},
		{name: "producer restarted at 5", first: 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20})
			s := tc.first
			h.send(s, true, incA)
			h.expectRequest(t, 0, s-1+20, false)
			h.expectDelivery(t, s).Confirm()
			h.expectRequest(t, s, s-1+20, false)
			upTo := s - 1 + 20
			for n := s + 1; n <= s+30; n++ {
				h.send(n, false, incA)
				h.expectDelivery(t, n).Confirm()
				if upTo-n == 10 {
					upTo += 10
					h.expectRequest(t, n, upTo, false)
				}
			}
			h.pc.ExpectNone(t, 20*time.Millisecond) // exactly the Requests above
		})
	}
}

// TestConsumerStashesWhileWaiting: messages that arrive while a Delivery
// is unconfirmed are kept and delivered in order, one at a time.
func TestConsumerStashesWhileWaiting(t *testing.T) {
	h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20})
	for n := delivery.SeqNr(1); n <= 5; n++ {
		h.send(n, n == 1, incA)
	}
	h.expectRequest(t, 0, 20, false)
	d := h.expectDelivery(t, 1)
	h.consumer.ExpectNone(t, 20*time.Millisecond)
	d.Confirm()
	h.expectRequest(t, 1, 20, false) // the first message is confirmed
	for n := delivery.SeqNr(2); n <= 5; n++ {
		d = h.expectDelivery(t, n)
		h.consumer.ExpectNone(t, 5*time.Millisecond)
		d.Confirm()
	}
}

// TestConsumerResendOnGap: a gap asks for a Resend from the missing number
// once; until it comes everything else is dropped.
func TestConsumerResendOnGap(t *testing.T) {
	h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20})
	h.send(1, true, incA)
	h.expectRequest(t, 0, 20, false)
	h.expectDelivery(t, 1).Confirm()
	h.expectRequest(t, 1, 20, false)
	h.send(2, false, incA)
	h.expectDelivery(t, 2).Confirm()
	h.send(4, false, incA) // 3 lost
	h.expectPC(t, delivery.Resend[deliverytest.Job]{FromSeqNr: 3})
	h.send(5, false, incA) // in flight before the Resend: dropped, no second Resend
	h.pc.ExpectNone(t, 20*time.Millisecond)
	for n := delivery.SeqNr(3); n <= 5; n++ {
		h.send(n, false, incA)
	}
	for n := delivery.SeqNr(3); n <= 5; n++ {
		h.expectDelivery(t, n).Confirm()
	}
	h.consumer.ExpectNone(t, 20*time.Millisecond)
}

// TestConsumerDropsDuplicates: a message already taken is dropped; a
// duplicate of the first message (its confirmation was lost) makes the
// controller repeat its Request.
func TestConsumerDropsDuplicates(t *testing.T) {
	h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20})
	h.send(1, true, incA)
	h.expectRequest(t, 0, 20, false)
	h.expectDelivery(t, 1).Confirm()
	h.expectRequest(t, 1, 20, false)
	h.send(2, false, incA)
	h.expectDelivery(t, 2).Confirm()
	h.send(2, false, incA)
	h.send(1, true, incA) // the first message again
	h.expectRequest(t, 2, 20, false)
	h.send(3, false, incA)
	h.expectDelivery(t, 3)
	h.consumer.ExpectNone(t, 20*time.Millisecond)
}

// TestConsumerNewProducer checks the first-message handshake: which
// messages of an unknown producer controller incarnation are taken.
func TestConsumerNewProducer(t *testing.T) {
	t.Run("first message of a new incarnation is taken", func(t *testing.T) {
		h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20})
		h.send(1, true, incA)
		h.expectRequest(t, 0, 20, false)
		h.expectDelivery(t, 1).Confirm()
		h.expectRequest(t, 1, 20, false)
		h.send(2, false, incB) // new incarnation, not first: dropped
		h.pc.ExpectNone(t, 20*time.Millisecond)
		h.consumer.ExpectNone(t, 0)
		h.send(1, true, incB) // its first: a new association
		h.expectRequest(t, 0, 20, false)
		h.expectDelivery(t, 1).Confirm()
		h.expectRequest(t, 1, 20, false)
		h.send(2, false, incB)
		h.expectDelivery(t, 2)
		h.send(2, false, incA) // the old incarnation's: dropped
		h.consumer.ExpectNone(t, 20*time.Millisecond)
	})
	t.Run("fresh controller that missed the first asks for a resend from 0, once", func(t *testing.T) {
		h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20})
		h.send(7, false, incA)
		h.expectPC(t, delivery.Resend[deliverytest.Job]{FromSeqNr: 0})
		h.send(8, false, incA)
		h.pc.ExpectNone(t, 20*time.Millisecond)
		h.consumer.ExpectNone(t, 0)
		h.send(7, true, incA)
		h.expectRequest(t, 0, 26, false)
		h.expectDelivery(t, 7)
	})
	t.Run("new producer while a delivery is unconfirmed", func(t *testing.T) {
		h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20})
		h.send(1, true, incA)
		h.expectRequest(t, 0, 20, false)
		d := h.expectDelivery(t, 1)
		h.send(2, false, incA) // stashed, then dropped with the old association
		h.send(1, true, incB)
		h.expectRequest(t, 0, 20, false)
		d.Confirm() // the old producer's: no Request to the new one
		h.expectDelivery(t, 1).Confirm()
		h.expectRequest(t, 1, 20, false)
		h.consumer.ExpectNone(t, 20*time.Millisecond)
	})
}

// TestConsumerOnlyFlowControl: without resending, gaps are delivered and
// every message is taken, first or not.
func TestConsumerOnlyFlowControl(t *testing.T) {
	h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20, OnlyFlowControl: true})
	h.send(3, false, incA) // not first: taken all the same
	h.expectPC(t, delivery.Request[deliverytest.Job]{ConfirmedSeqNr: 0, RequestUpToSeqNr: 22})
	h.expectDelivery(t, 3).Confirm()
	h.send(5, false, incA) // 4 lost: delivered with the gap, no Resend
	h.expectDelivery(t, 5).Confirm()
	h.send(4, false, incA) // late: a duplicate now
	h.consumer.ExpectNone(t, 20*time.Millisecond)
	h.pc.ExpectNone(t, 0)
}

// TestConsumerRetry drives the retry timer: an idle controller asks again
// after 2 s, then waits 1.5 times longer each idle tick up to 30 s; a
// message brings the interval back to 2 s.
func TestConsumerRetry(t *testing.T) {
	h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20})
	h.send(1, true, incA)
	h.expectRequest(t, 0, 20, false)
	h.expectDelivery(t, 1).Confirm()
	h.expectRequest(t, 1, 20, false)
	h.tick(t, 2*time.Second) // heard a message since the start: not idle
	h.pc.ExpectNone(t, 20*time.Millisecond)
	intervals := []time.Duration{2 * time.Second, 3 * time.Second, 4500 * time.Millisecond, 6750 * time.Millisecond,
		10125 * time.Millisecond, 15187500 * time.Microsecond, 22781250 * time.Microsecond, 30 * time.Second, 30 * time.Second}
	for _, d := range intervals {
		h.tick(t, d)
		h.expectRequest(t, 1, 20, true) // expecting more than came: via timeout
	}
	h.send(2, false, incA)
	h.expectDelivery(t, 2).Confirm()
	h.tick(t, 30*time.Second) // heard: back to the minimum
	h.pc.ExpectNone(t, 20*time.Millisecond)
	h.tick(t, 2*time.Second)
	h.expectRequest(t, 2, 20, true)
}

// TestConsumerRetryWhileResending: a lost Resend (or lost resent message)
// is asked for again on the retry tick, even while later messages come.
func TestConsumerRetryWhileResending(t *testing.T) {
	h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20})
	h.send(1, true, incA)
	h.expectRequest(t, 0, 20, false)
	h.expectDelivery(t, 1).Confirm()
	h.expectRequest(t, 1, 20, false)
	h.send(3, false, incA)
	h.expectPC(t, delivery.Resend[deliverytest.Job]{FromSeqNr: 2})
	h.tick(t, 2*time.Second) // heard 3 just now
	h.pc.ExpectNone(t, 20*time.Millisecond)
	h.send(4, false, incA)
	h.send(1, true, incA) // a duplicate first, answered with a Request: shows 4 was handled
	h.expectRequest(t, 1, 20, false)
	h.tick(t, 2*time.Second) // heard 4, but still no 2: ask again
	h.expectPC(t, delivery.Resend[deliverytest.Job]{FromSeqNr: 2})
	h.tick(t, 2*time.Second) // idle
	h.expectPC(t, delivery.Resend[deliverytest.Job]{FromSeqNr: 2})
}

// TestConsumerRedeliversLostDelivery: a Delivery the consumer lost is
// given again after RedeliverAfter, and a late second Confirmed of it does
// not confirm the next message.
func TestConsumerRedeliversLostDelivery(t *testing.T) {
	h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20, RedeliverAfter: 5 * time.Second})
	h.send(1, true, incA)
	h.send(2, false, incA)
	h.expectRequest(t, 0, 20, false)
	lost := h.expectDelivery(t, 1) // the consumer drops it
	// A repeat of message 1 is answered with a Request: then message 2,
	// queued before it, was taken too. A timer's tick overtakes queued
	// messages, and message 2 taken after the first tick would make the
	// second one not idle.
	h.send(1, true, incA)
	h.expectRequest(t, 0, 20, false)
	h.tick(t, 2*time.Second) // delivered during this tick: not yet counted
	h.tick(t, 2*time.Second) // unconfirmed for 2 s
	h.consumer.ExpectNone(t, 20*time.Millisecond)
	h.tick(t, 2*time.Second) // 2+2 s without confirmation: not yet 5 s
	h.consumer.ExpectNone(t, 20*time.Millisecond)
	h.tick(t, 2*time.Second) // 6 s >= 5 s (the interval stays at 2 s: not idle)
	again := h.expectDelivery(t, 1)
	// Waiting for the consumer is not idle: the ticks asked the producer
	// controller for nothing.
	h.pc.ExpectNone(t, 20*time.Millisecond)
	if again != lost {
		t.Fatalf("redelivered %+v, want the same delivery %+v", again, lost)
	}
	again.Confirm()
	h.expectRequest(t, 1, 20, false)
	next := h.expectDelivery(t, 2)
	lost.Confirm() // the first delivery's own confirmation, late: ignored
	h.consumer.ExpectNone(t, 20*time.Millisecond)
	next.Confirm()
	h.send(3, false, incA)
	h.expectDelivery(t, 3)
}

// TestConsumerStartAgain: a consumer that sends Start again (it restarted)
// gets the unconfirmed Delivery again.
func TestConsumerStartAgain(t *testing.T) {
	h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20})
	h.send(1, true, incA)
	h.expectRequest(t, 0, 20, false)
	h.expectDelivery(t, 1)
	h.cc.Tell(delivery.ConsumerStart[deliverytest.Job]{DeliverTo: h.consumer.Ref})
	h.expectDelivery(t, 1).Confirm()
	h.expectRequest(t, 1, 20, false)
}

// TestConsumerStashBound: beyond the window, messages are not kept; they
// come again by Resend.
func TestConsumerStashBound(t *testing.T) {
	h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 4})
	for n := delivery.SeqNr(1); n <= 7; n++ { // 1 out, 2..5 stashed, 6 dropped, so 7 is a gap
		h.send(n, n == 1, incA)
	}
	h.expectRequest(t, 0, 4, false)
	h.expectPC(t, delivery.Resend[deliverytest.Job]{FromSeqNr: 6})
	h.expectDelivery(t, 1).Confirm()
	h.expectRequest(t, 1, 4, false)
	for n := delivery.SeqNr(2); n <= 5; n++ {
		h.expectDelivery(t, n).Confirm()
	}
}

// TestConsumerDeliverThenStop: the controller stops once the stashed
// messages are delivered and confirmed, and acks the last on its way out.
func TestConsumerDeliverThenStop(t *testing.T) {
	h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20})
	w := deliverytest.NewWatcher(t, h.sys)
	w.Watch(h.cc)
	for n := delivery.SeqNr(1); n <= 3; n++ {
		h.send(n, n == 1, incA)
	}
	h.expectRequest(t, 0, 20, false)
	h.cc.Tell(delivery.DeliverThenStop[deliverytest.Job]{})
	h.expectDelivery(t, 1).Confirm()
	h.expectRequest(t, 1, 20, false)
	h.expectDelivery(t, 2).Confirm()
	select {
	case p := <-w.Stopped:
		t.Fatalf("%s stopped with a message left", p)
	case <-time.After(20 * time.Millisecond):
	}
	h.expectDelivery(t, 3).Confirm()
	w.ExpectStopped(t, "/user/cc")
	h.expectAck(t, 3)
}

// TestConsumerStopsWithConsumer: the controller watches its consumer.
func TestConsumerStopsWithConsumer(t *testing.T) {
	h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20})
	w := deliverytest.NewWatcher(t, h.sys)
	w.Watch(h.cc)
	h.send(1, true, incA)
	h.expectRequest(t, 0, 20, false)
	h.expectDelivery(t, 1).Confirm()
	h.expectRequest(t, 1, 20, false)
	h.sys.Stop(h.consumer.Ref)
	w.ExpectStopped(t, "/user/cc")
	h.expectAck(t, 1)
}

// TestConsumerRegisterRetries: RegisterToProducerController sends
// RegisterConsumer, again on idle ticks until a message from that producer
// controller arrives. Every copy carries the registration's number, later
// than that of any registration made before.
func TestConsumerRegisterRetries(t *testing.T) {
	h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20})
	before := impl.NextRegistration()
	h.cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: h.pc.Ref})
	first, ok := h.pc.Expect(t).(delivery.RegisterConsumer[deliverytest.Job])
	if !ok || first.ConsumerController != h.cc || impl.Registration(first) <= before {
		t.Fatalf("producer controller got %#v, want a RegisterConsumer of %v numbered above %d", first, h.cc, before)
	}
	h.tick(t, 2*time.Second)
	h.expectPC(t, first)
	h.send(1, true, incA)
	h.expectRequest(t, 0, 20, false)
	h.expectDelivery(t, 1).Confirm()
	h.expectRequest(t, 1, 20, false)
	h.tick(t, 3*time.Second) // heard; the interval grew on the idle tick before
	h.tick(t, 2*time.Second) // idle: a Request, no RegisterConsumer
	h.expectRequest(t, 1, 20, true)
	h.pc.ExpectNone(t, 20*time.Millisecond)
}
