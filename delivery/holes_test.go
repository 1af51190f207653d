package delivery_test

// Deterministic tests of ways the protocol once stopped for good, confirmed
// a message before it was processed, or delivered one twice. Each builds
// its case with a link whose gate holds back, drops and later releases
// chosen messages, on a fake clock: no timer fires unless a test moves it,
// so whatever recovers does so with nothing more from anyone.

import (
	"context"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/runtime"
)

func spawnPCOrFail(t *testing.T, sys *runtime.System, name string, opts ...delivery.ProducerOption[deliverytest.Job]) runtime.Ref[delivery.ProducerCommand[deliverytest.Job]] {
	t.Helper()
	pc, err := delivery.SpawnProducerController[deliverytest.Job](sys, name, "p", delivery.ProducerSettings{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

func spawnCCOrFail(t *testing.T, sys *runtime.System, name string, s delivery.ConsumerSettings) runtime.Ref[delivery.ConsumerCommand[deliverytest.Job]] {
	t.Helper()
	cc, err := delivery.SpawnConsumerController[deliverytest.Job](sys, name, s)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// wantInOrder checks that col got exactly the jobs from..to, in order, each
// once (it may have got more after to).
func wantInOrder(t *testing.T, col *deliverytest.Collector, from, to int) {
	t.Helper()
	got := col.Jobs()
	for i := range to - from + 1 {
		if i >= len(got) || got[i] != from+i {
			t.Fatalf("delivery %d is not job %d: got %v", i, from+i, got)
		}
	}
}

func isSeq(m any, n delivery.SeqNr) bool {
	s, ok := m.(*delivery.SequencedMessage[deliverytest.Job])
	return ok && s.SeqNr == n
}

func isAck(m any) bool { _, ok := m.(*delivery.Ack[deliverytest.Job]); return ok }

// holding is a gate that holds back the messages that match and passes
// the others.
func holding(match func(m any) bool) func(m any) deliverytest.Verdict {
	return func(m any) deliverytest.Verdict {
		if match(m) {
			return deliverytest.Hold
		}
		return deliverytest.Pass
	}
}

// TestReplacementConsumerGetsTheNextMessage: with window 10 and every
// Request beyond 10 lost, consumer 1 confirms 1-10 and stops, and its
// last Ack arrives. A new consumer controller that registers must get
// message 11 with nothing more from anyone: the producer controller has
// no demand from it, and nothing unconfirmed to resend.
func TestReplacementConsumerGetsTheNextMessage(t *testing.T) {
	sys, _ := deliverytest.HolesSystem(t)
	pc := spawnPCOrFail(t, sys, "pc")
	cs := delivery.ConsumerSettings{FlowControlWindow: 10}
	cc1 := spawnCCOrFail(t, sys, "cc1", cs)
	link1 := deliverytest.NewFaultLink[deliverytest.Job](t, sys, "link1", pc, cc1, deliverytest.Faults{}, deliverytest.Faults{}, 1)
	link1.SetGate(func(m any) deliverytest.Verdict {
		switch m := m.(type) {
		case delivery.Request[deliverytest.Job]:
			if m.RequestUpToSeqNr > 10 {
				return deliverytest.Drop
			}
		case *delivery.Ack[deliverytest.Job]:
			return deliverytest.Hold // released by the test, before the new consumer registers
		}
		return deliverytest.Pass
	})
	col1 := deliverytest.NewCollector(10)
	consumer1 := deliverytest.SpawnConsumer(t, sys, "consumer1", cc1, deliverytest.ConsumerSpec{}, col1)
	deliverytest.SpawnProducer(t, sys, "producer", pc, deliverytest.ProducerSpec{})
	cc1.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: link1.ToPC})
	deliverytest.WaitJob(t, col1)

	sys.Stop(consumer1) // its controller stops with it, and acks 10
	deliverytest.Eventually(t, "consumer controller 1's last Ack", func() bool { return link1.HeldCount(isAck) == 1 })
	link1.Release(isAck)

	cc2 := spawnCCOrFail(t, sys, "cc2", cs)
	link2 := deliverytest.NewFaultLink[deliverytest.Job](t, sys, "link2", pc, cc2, deliverytest.Faults{}, deliverytest.Faults{}, 2)
	col2 := deliverytest.NewCollector(20)
	deliverytest.SpawnConsumer(t, sys, "consumer2", cc2, deliverytest.ConsumerSpec{}, col2)
	cc2.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: link2.ToPC})
	deliverytest.WaitJob(t, col2)
	wantInOrder(t, col1, 1, 10)
	wantInOrder(t, col2, 11, 20)
}

// TestLateFlowControlOfReplacedConsumer: window 20; consumer controller
// 1's confirmations above 10 are held back; it delivers up to 30 and
// stops. Consumer controller 2 registers and loses message 12. Then cc1's
// held Request(20, 40) and Ack(30) arrive, before cc2's Resend(12). They
// come from a consumer controller that was replaced: they must not
// confirm anything nor open the window, and cc2 must get 11 on, in order.
func TestLateFlowControlOfReplacedConsumer(t *testing.T) {
	sys, _ := deliverytest.HolesSystem(t)
	pc := spawnPCOrFail(t, sys, "pc")
	cs := delivery.ConsumerSettings{FlowControlWindow: 20}
	cc1 := spawnCCOrFail(t, sys, "cc1", cs)
	link1 := deliverytest.NewFaultLink[deliverytest.Job](t, sys, "link1", pc, cc1, deliverytest.Faults{}, deliverytest.Faults{}, 1)
	isLate := func(m any) bool {
		switch m := m.(type) {
		case delivery.Request[deliverytest.Job]:
			return m.ConfirmedSeqNr > 10
		case *delivery.Ack[deliverytest.Job]:
			return m.ConfirmedSeqNr > 10
		}
		return false
	}
	link1.SetGate(holding(isLate))
	col1 := deliverytest.NewCollector(30)
	consumer1 := deliverytest.SpawnConsumer(t, sys, "consumer1", cc1, deliverytest.ConsumerSpec{}, col1)
	deliverytest.SpawnProducer(t, sys, "producer", pc, deliverytest.ProducerSpec{})
	cc1.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: link1.ToPC})
	deliverytest.WaitJob(t, col1)
	sys.Stop(consumer1)
	// Its last Ack comes after its Requests.
	deliverytest.Eventually(t, "cc1's Requests and Ack(30) held", func() bool { return link1.HeldCount(isAck) == 1 })

	cc2 := spawnCCOrFail(t, sys, "cc2", cs)
	link2 := deliverytest.NewFaultLink[deliverytest.Job](t, sys, "link2", pc, cc2, deliverytest.Faults{}, deliverytest.Faults{}, 2)
	lost12 := false
	isResend := func(m any) bool { _, ok := m.(delivery.Resend[deliverytest.Job]); return ok }
	link2.SetGate(func(m any) deliverytest.Verdict {
		switch {
		case isSeq(m, 12) && !lost12:
			lost12 = true
			return deliverytest.Drop
		case isResend(m):
			return deliverytest.Hold
		}
		return deliverytest.Pass
	})
	col2 := deliverytest.NewCollector(60)
	deliverytest.SpawnConsumer(t, sys, "consumer2", cc2, deliverytest.ConsumerSpec{}, col2)
	cc2.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: link2.ToPC})
	deliverytest.Eventually(t, "cc2's Resend(12)", func() bool { return link2.HeldCount(isResend) >= 1 })
	link1.Release(isLate)
	link2.SetGate(nil)
	link2.Release(isResend)
	deliverytest.WaitJob(t, col2)
	wantInOrder(t, col2, 11, 60)
}

// TestResendOfWhatIsGone: a Resend from a sequence number that is no
// longer kept (confirmed meanwhile) starts over at the oldest unconfirmed
// message, marked first, instead of resending what follows the gap the
// consumer controller waits on for ever.
func TestResendOfWhatIsGone(t *testing.T) {
	h := newPC(t, delivery.ProducerSettings{})
	h.start()
	r := h.expectRequestNext(t, 1, 0)
	r.SendNextTo.Tell(deliverytest.Job{N: 1})
	h.expectSeq(t, 1, true)
	h.request(0, 10)
	r = h.expectRequestNext(t, 2, 0)
	h.sendJobs(t, r, 2, 6, 0)
	for n := delivery.SeqNr(2); n <= 6; n++ {
		h.expectSeq(t, n, false)
	}
	h.request(4, 10) // 1-4 confirmed: 5 and 6 are kept
	h.pc.Tell(delivery.Resend[deliverytest.Job]{FromSeqNr: 3, Association: h.assoc})
	h.expectSeq(t, 5, true)
	h.expectSeq(t, 6, false)
}

// TestStaleConfirmConfirmsNothing: delivery 1 is lost and redelivered; the
// consumer confirms the second copy. Later, while it works on 5, it calls
// Confirm on its first copy of 1: that must not confirm 5, so 6 must not
// come, nor may the producer controller hear that 5 is confirmed.
func TestStaleConfirmConfirmsNothing(t *testing.T) {
	h := newCC(t, delivery.ConsumerSettings{FlowControlWindow: 20, ResendIntervalMin: 10 * time.Millisecond, RedeliverAfter: 30 * time.Millisecond})
	for n := delivery.SeqNr(1); n <= 10; n++ {
		h.send(n, n == 1, incA)
	}
	h.expectRequest(t, 0, 20, false)
	first := h.expectDelivery(t, 1) // the consumer drops it
	h.tick(t, 10*time.Millisecond)  // delivered during this tick: not yet counted
	for range 3 {
		h.tick(t, 10*time.Millisecond)
	}
	again := h.expectDelivery(t, 1)
	again.Confirm()
	h.expectRequest(t, 1, 20, false) // confirms the first message
	for n := delivery.SeqNr(2); n <= 4; n++ {
		h.expectDelivery(t, n).Confirm()
	}
	h.expectDelivery(t, 5)
	first.Confirm() // late, and of another Delivery
	h.consumer.ExpectNone(t, 50*time.Millisecond)
	h.pc.ExpectNone(t, 10*time.Millisecond)
}

// TestLateFirstMessageOfReplacedProducer: a copy of producer controller
// 1's first message is held back; pc1 delivers 1-10 and is replaced by pc2
// (same producer id), which delivers 11-15; then the late copy arrives.
// The consumer controller must not go back to pc1: no job twice, and pc2's
// messages go on.
func TestLateFirstMessageOfReplacedProducer(t *testing.T) {
	cases := []struct {
		name string
		// durable gives both producer controllers one durable queue: pc2
		// goes on at sequence number 11, a later generation than pc1.
		// Without, pc2 starts again at 1, and ranks above pc1 by the
		// order the process made them.
		durable bool
	}{
		{name: "durable queue", durable: true},
		{name: "without durable queue"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys, _ := deliverytest.HolesSystem(t)
			var opts []delivery.ProducerOption[deliverytest.Job]
			q := durable.NewMemory[deliverytest.Job]()
			if tc.durable {
				opts = append(opts, delivery.WithDurableQueue[deliverytest.Job](q))
			}
			pc1 := spawnPCOrFail(t, sys, "pc1", opts...)
			cc := spawnCCOrFail(t, sys, "cc", delivery.ConsumerSettings{FlowControlWindow: 20})
			link1 := deliverytest.NewFaultLink[deliverytest.Job](t, sys, "link1", pc1, cc, deliverytest.Faults{}, deliverytest.Faults{}, 1)
			copied := false
			link1.SetGate(func(m any) deliverytest.Verdict {
				if isSeq(m, 1) && !copied {
					copied = true
					return deliverytest.HoldCopy
				}
				return deliverytest.Pass
			})
			col := deliverytest.NewCollector(30)
			deliverytest.SpawnConsumer(t, sys, "consumer", cc, deliverytest.ConsumerSpec{}, col)
			producer1 := deliverytest.SpawnProducer(t, sys, "producer1", pc1, deliverytest.ProducerSpec{Limit: 10})
			cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: link1.ToPC})
			deliverytest.Eventually(t, "jobs 1-10 confirmed", func() bool {
				if !tc.durable {
					return col.Count() >= 10
				}
				// Stored so: pc2 has nothing to send again. (Each look is
				// a load, a later incarnation; pc2's is later still.)
				s, err := q.LoadState(context.Background())
				return err == nil && s.HighestConfirmedSeqNr == 10
			})
			w := deliverytest.NewWatcher(t, sys)
			w.Watch(pc1)
			sys.Stop(producer1)
			sys.Stop(pc1)
			w.ExpectStopped(t, pc1.Path())

			pc2 := spawnPCOrFail(t, sys, "pc2", opts...)
			link2 := deliverytest.NewFaultLink[deliverytest.Job](t, sys, "link2", pc2, cc, deliverytest.Faults{}, deliverytest.Faults{}, 2)
			after15 := func(m any) bool {
				s, ok := m.(*delivery.SequencedMessage[deliverytest.Job])
				return ok && s.Message.N > 15
			}
			link2.SetGate(holding(after15)) // until the late copy has come
			deliverytest.SpawnProducer(t, sys, "producer2", pc2, deliverytest.ProducerSpec{BySeqNr: tc.durable, First: 11})
			cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: link2.ToPC})
			deliverytest.Eventually(t, "jobs 11-15 delivered", func() bool { return col.Count() >= 15 })
			if link1.Release(func(m any) bool { return isSeq(m, 1) }) != 1 {
				t.Fatal("the copy of pc1's first message was not held")
			}
			link2.SetGate(nil)
			link2.Release(after15)
			deliverytest.WaitJob(t, col)
			wantInOrder(t, col, 1, 30)
		})
	}
}

// TestLateRegistrationOfReplacedConsumer: consumer controller 1's
// RegisterConsumer is held back; consumer controller 2 registers and gets
// jobs 1-20 (its Requests for more held back too). Then cc1's
// registration arrives, before cc2's Requests: it comes from a consumer
// controller that was replaced, so it must not take the producer
// controller from cc2, whose stream must go on to job 60, in order.
// Neither when cc1 is gone, nor when it still runs and keeps registering.
func TestLateRegistrationOfReplacedConsumer(t *testing.T) {
	cases := []struct {
		name string
		// stopFirst stops cc1 (with its consumer) before its registration
		// arrives; otherwise it runs on, and registers once more after.
		stopFirst bool
	}{
		{name: "consumer controller gone", stopFirst: true},
		{name: "consumer controller still running"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys, clock := deliverytest.HolesSystem(t)
			pc := spawnPCOrFail(t, sys, "pc")
			cs := delivery.ConsumerSettings{FlowControlWindow: 20}
			deliverytest.SpawnProducer(t, sys, "producer", pc, deliverytest.ProducerSpec{})

			cc1 := spawnCCOrFail(t, sys, "cc1", cs)
			link1 := deliverytest.NewFaultLink[deliverytest.Job](t, sys, "link1", pc, cc1, deliverytest.Faults{}, deliverytest.Faults{}, 1)
			isRegister := func(m any) bool { _, ok := m.(delivery.RegisterConsumer[deliverytest.Job]); return ok }
			link1.SetGate(holding(isRegister))
			col1 := deliverytest.NewCollector(60)
			consumer1 := deliverytest.SpawnConsumer(t, sys, "consumer1", cc1, deliverytest.ConsumerSpec{}, col1)
			cc1.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: link1.ToPC})
			deliverytest.Eventually(t, "cc1's RegisterConsumer held", func() bool { return link1.HeldCount(isRegister) == 1 })

			cc2 := spawnCCOrFail(t, sys, "cc2", cs)
			link2 := deliverytest.NewFaultLink[deliverytest.Job](t, sys, "link2", pc, cc2, deliverytest.Faults{}, deliverytest.Faults{}, 2)
			isMoreDemand := func(m any) bool { r, ok := m.(delivery.Request[deliverytest.Job]); return ok && r.ConfirmedSeqNr > 0 }
			link2.SetGate(holding(isMoreDemand))
			col2 := deliverytest.NewCollector(60)
			deliverytest.SpawnConsumer(t, sys, "consumer2", cc2, deliverytest.ConsumerSpec{}, col2)
			cc2.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: link2.ToPC})
			deliverytest.Eventually(t, "jobs 1-20 delivered to consumer 2", func() bool { return col2.Count() >= 20 })

			if tc.stopFirst {
				w := deliverytest.NewWatcher(t, sys)
				w.Watch(cc1)
				sys.Stop(consumer1) // its consumer controller stops with it
				w.ExpectStopped(t, cc1.Path())
			}
			// Released from this goroutine, cc1's registration reaches
			// the producer controller before cc2's Requests.
			link1.SetGate(nil)
			link1.Release(isRegister)
			link2.SetGate(nil)
			link2.Release(isMoreDemand)
			if !tc.stopFirst {
				clock.Advance(delivery.DefaultResendIntervalMin) // cc1 registers again
				deliverytest.Eventually(t, "cc1's second RegisterConsumer passed", func() bool { return link1.ToPCStats.Passed.Load() >= 1 })
			}
			deliverytest.WaitJob(t, col2)
			wantInOrder(t, col2, 1, 60)
			if n := col1.Count(); n != 0 {
				t.Fatalf("consumer 1, replaced, got %d jobs: %v", n, col1.Jobs())
			}
		})
	}
}

// TestRegistrationOrderIsHandlingOrder: a registration is numbered when
// the consumer controller handles RegisterToProducerController, not when
// it is told. Consumer controller 2 handles its registration first;
// consumer controller 1, told before it but handling its own after, is
// the one registered last, and gets the stream; cc2's retries, older,
// are ignored. (The randomized replacement test once assumed the order of
// the tells, and failed when a busy consumer controller handled its
// registration after its successor.)
func TestRegistrationOrderIsHandlingOrder(t *testing.T) {
	sys, clock := deliverytest.HolesSystem(t)
	pc := spawnPCOrFail(t, sys, "pc")
	cs := delivery.ConsumerSettings{FlowControlWindow: 20}
	cc1 := spawnCCOrFail(t, sys, "cc1", cs)
	cc2 := spawnCCOrFail(t, sys, "cc2", cs)
	link1 := deliverytest.NewFaultLink[deliverytest.Job](t, sys, "link1", pc, cc1, deliverytest.Faults{}, deliverytest.Faults{}, 1)
	link2 := deliverytest.NewFaultLink[deliverytest.Job](t, sys, "link2", pc, cc2, deliverytest.Faults{}, deliverytest.Faults{}, 2)
	isRegister := func(m any) bool { _, ok := m.(delivery.RegisterConsumer[deliverytest.Job]); return ok }
	link2.SetGate(holding(isRegister))
	col1, col2 := deliverytest.NewCollector(40), deliverytest.NewCollector(1)
	deliverytest.SpawnConsumer(t, sys, "consumer1", cc1, deliverytest.ConsumerSpec{}, col1)
	deliverytest.SpawnConsumer(t, sys, "consumer2", cc2, deliverytest.ConsumerSpec{}, col2)
	deliverytest.SpawnProducer(t, sys, "producer", pc, deliverytest.ProducerSpec{})

	cc2.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: link2.ToPC})
	deliverytest.Eventually(t, "cc2's registration made", func() bool { return link2.HeldCount(isRegister) == 1 })
	cc1.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: link1.ToPC})
	deliverytest.Eventually(t, "jobs 1-20 delivered to consumer 1", func() bool { return col1.Count() >= 20 })
	link2.SetGate(nil)
	link2.Release(isRegister)                        // arrives after cc1's
	clock.Advance(delivery.DefaultResendIntervalMin) // cc2 registers again, with the same number
	deliverytest.Eventually(t, "cc2's second RegisterConsumer passed", func() bool { return link2.ToPCStats.Passed.Load() >= 1 })
	deliverytest.Stays(t, "consumer 2, registered before consumer 1, gets nothing", func() bool { return col2.Count() == 0 })
	deliverytest.WaitJob(t, col1)
	wantInOrder(t, col1, 1, 40)
}
