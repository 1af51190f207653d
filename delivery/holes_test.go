package delivery

// Deterministic tests of ways the protocol once stopped for good, confirmed
// a message before it was processed, or delivered one twice. Each builds
// its case with a link whose gate holds back, drops and later releases
// chosen messages, on a fake clock: no timer fires unless a test moves it,
// so whatever recovers does so with nothing more from anyone.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/runtime"
)

// holesSystem starts a system on a fake clock.
func holesSystem(t *testing.T) (*runtime.System, *clockwork.FakeClock) {
	t.Helper()
	clock := clockwork.NewFakeClock()
	sys, _ := newSystem(t, runtime.WithClock(clock))
	return sys, clock
}

func spawnPCOrFail(t *testing.T, sys *runtime.System, name string, opts ...ProducerOption[job]) runtime.Ref[ProducerCommand[job]] {
	t.Helper()
	pc, err := SpawnProducerController[job](sys, name, "p", ProducerSettings{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

func spawnCCOrFail(t *testing.T, sys *runtime.System, name string, s ConsumerSettings) runtime.Ref[ConsumerCommand[job]] {
	t.Helper()
	cc, err := SpawnConsumerController[job](sys, name, s)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

// waitJob waits until col has the wanted job.
func waitJob(t *testing.T, col *collector) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := col.wait(ctx); err != nil {
		t.Fatalf("%v; delivered: %v", err, col.jobs())
	}
}

// wantInOrder checks that col got exactly the jobs from..to, in order, each
// once (it may have got more after to).
func wantInOrder(t *testing.T, col *collector, from, to int) {
	t.Helper()
	got := col.jobs()
	for i := range to - from + 1 {
		if i >= len(got) || got[i] != from+i {
			t.Fatalf("delivery %d is not job %d: got %v", i, from+i, got)
		}
	}
}

func isSeq(m any, n SeqNr) bool {
	s, ok := m.(*SequencedMessage[job])
	return ok && s.SeqNr == n
}

func isAck(m any) bool { _, ok := m.(*Ack[job]); return ok }

// holding is a gate that holds back the messages that match and passes
// the others.
func holding(match func(m any) bool) func(m any) verdict {
	return func(m any) verdict {
		if match(m) {
			return hold
		}
		return pass
	}
}

// TestReplacementConsumerGetsTheNextMessage: with window 10 and every
// Request beyond 10 lost, consumer 1 confirms 1-10 and stops, and its
// last Ack arrives. A new consumer controller that registers must get
// message 11 with nothing more from anyone: the producer controller has
// no demand from it, and nothing unconfirmed to resend.
func TestReplacementConsumerGetsTheNextMessage(t *testing.T) {
	sys, _ := holesSystem(t)
	pc := spawnPCOrFail(t, sys, "pc")
	cs := ConsumerSettings{FlowControlWindow: 10}
	cc1 := spawnCCOrFail(t, sys, "cc1", cs)
	link1 := newFaultLink[job](t, sys, "link1", pc, cc1, faults{}, faults{}, 1)
	link1.setGate(func(m any) verdict {
		switch m := m.(type) {
		case Request[job]:
			if m.RequestUpToSeqNr > 10 {
				return drop
			}
		case *Ack[job]:
			return hold // released by the test, before the new consumer registers
		}
		return pass
	})
	col1 := newCollector(10)
	consumer1 := spawnConsumer(t, sys, "consumer1", cc1, consumerSpec{}, col1)
	spawnProducer(t, sys, "producer", pc, producerSpec{})
	cc1.Tell(RegisterToProducerController[job]{ProducerController: link1.toPC})
	waitJob(t, col1)

	sys.Stop(consumer1) // its controller stops with it, and acks 10
	eventually(t, "consumer controller 1's last Ack", func() bool { return link1.heldCount(isAck) == 1 })
	link1.release(isAck)

	cc2 := spawnCCOrFail(t, sys, "cc2", cs)
	link2 := newFaultLink[job](t, sys, "link2", pc, cc2, faults{}, faults{}, 2)
	col2 := newCollector(20)
	spawnConsumer(t, sys, "consumer2", cc2, consumerSpec{}, col2)
	cc2.Tell(RegisterToProducerController[job]{ProducerController: link2.toPC})
	waitJob(t, col2)
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
	sys, _ := holesSystem(t)
	pc := spawnPCOrFail(t, sys, "pc")
	cs := ConsumerSettings{FlowControlWindow: 20}
	cc1 := spawnCCOrFail(t, sys, "cc1", cs)
	link1 := newFaultLink[job](t, sys, "link1", pc, cc1, faults{}, faults{}, 1)
	isLate := func(m any) bool {
		switch m := m.(type) {
		case Request[job]:
			return m.ConfirmedSeqNr > 10
		case *Ack[job]:
			return m.ConfirmedSeqNr > 10
		}
		return false
	}
	link1.setGate(holding(isLate))
	col1 := newCollector(30)
	consumer1 := spawnConsumer(t, sys, "consumer1", cc1, consumerSpec{}, col1)
	spawnProducer(t, sys, "producer", pc, producerSpec{})
	cc1.Tell(RegisterToProducerController[job]{ProducerController: link1.toPC})
	waitJob(t, col1)
	sys.Stop(consumer1)
	// Its last Ack comes after its Requests.
	eventually(t, "cc1's Requests and Ack(30) held", func() bool { return link1.heldCount(isAck) == 1 })

	cc2 := spawnCCOrFail(t, sys, "cc2", cs)
	link2 := newFaultLink[job](t, sys, "link2", pc, cc2, faults{}, faults{}, 2)
	lost12 := false
	isResend := func(m any) bool { _, ok := m.(Resend[job]); return ok }
	link2.setGate(func(m any) verdict {
		switch {
		case isSeq(m, 12) && !lost12:
			lost12 = true
			return drop
		case isResend(m):
			return hold
		}
		return pass
	})
	col2 := newCollector(60)
	spawnConsumer(t, sys, "consumer2", cc2, consumerSpec{}, col2)
	cc2.Tell(RegisterToProducerController[job]{ProducerController: link2.toPC})
	eventually(t, "cc2's Resend(12)", func() bool { return link2.heldCount(isResend) >= 1 })
	link1.release(isLate)
	link2.setGate(nil)
	link2.release(isResend)
	waitJob(t, col2)
	wantInOrder(t, col2, 11, 60)
}

// TestResendOfWhatIsGone: a Resend from a sequence number that is no
// longer kept (confirmed meanwhile) starts over at the oldest unconfirmed
// message, marked first, instead of resending what follows the gap the
// consumer controller waits on for ever.
func TestResendOfWhatIsGone(t *testing.T) {
	h := newPC(t, ProducerSettings{})
	h.start()
	r := h.expectRequestNext(t, 1, 0)
	r.SendNextTo.Tell(job{N: 1})
	h.expectSeq(t, 1, true)
	h.request(0, 10)
	r = h.expectRequestNext(t, 2, 0)
	h.sendJobs(t, r, 2, 6, 0)
	for n := SeqNr(2); n <= 6; n++ {
		h.expectSeq(t, n, false)
	}
	h.request(4, 10) // 1-4 confirmed: 5 and 6 are kept
	h.pc.Tell(Resend[job]{FromSeqNr: 3, Association: h.assoc})
	h.expectSeq(t, 5, true)
	h.expectSeq(t, 6, false)
}

// TestStaleConfirmConfirmsNothing: delivery 1 is lost and redelivered; the
// consumer confirms the second copy. Later, while it works on 5, it calls
// Confirm on its first copy of 1: that must not confirm 5, so 6 must not
// come, nor may the producer controller hear that 5 is confirmed.
func TestStaleConfirmConfirmsNothing(t *testing.T) {
	h := newCC(t, ConsumerSettings{FlowControlWindow: 20, ResendIntervalMin: 10 * time.Millisecond, RedeliverAfter: 30 * time.Millisecond})
	for n := SeqNr(1); n <= 10; n++ {
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
	for n := SeqNr(2); n <= 4; n++ {
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
			sys, _ := holesSystem(t)
			var opts []ProducerOption[job]
			q := durable.NewMemory[job]()
			if tc.durable {
				opts = append(opts, WithDurableQueue[job](q))
			}
			pc1 := spawnPCOrFail(t, sys, "pc1", opts...)
			cc := spawnCCOrFail(t, sys, "cc", ConsumerSettings{FlowControlWindow: 20})
			link1 := newFaultLink[job](t, sys, "link1", pc1, cc, faults{}, faults{}, 1)
			copied := false
			link1.setGate(func(m any) verdict {
				if isSeq(m, 1) && !copied {
					copied = true
					return holdCopy
				}
				return pass
			})
			col := newCollector(30)
			spawnConsumer(t, sys, "consumer", cc, consumerSpec{}, col)
			producer1 := spawnProducer(t, sys, "producer1", pc1, producerSpec{limit: 10})
			cc.Tell(RegisterToProducerController[job]{ProducerController: link1.toPC})
			eventually(t, "jobs 1-10 confirmed", func() bool {
				if !tc.durable {
					return col.count() >= 10
				}
				// Stored so: pc2 has nothing to send again. (Each look is
				// a load, a later incarnation; pc2's is later still.)
				s, err := q.LoadState(context.Background())
				return err == nil && s.HighestConfirmedSeqNr == 10
			})
			w := newWatcher(t, sys)
			w.watch(pc1)
			sys.Stop(producer1)
			sys.Stop(pc1)
			w.expectStopped(t, pc1.Path())

			pc2 := spawnPCOrFail(t, sys, "pc2", opts...)
			link2 := newFaultLink[job](t, sys, "link2", pc2, cc, faults{}, faults{}, 2)
			after15 := func(m any) bool { s, ok := m.(*SequencedMessage[job]); return ok && s.Message.N > 15 }
			link2.setGate(holding(after15)) // until the late copy has come
			spawnProducer(t, sys, "producer2", pc2, producerSpec{bySeqNr: tc.durable, first: 11})
			cc.Tell(RegisterToProducerController[job]{ProducerController: link2.toPC})
			eventually(t, "jobs 11-15 delivered", func() bool { return col.count() >= 15 })
			if link1.release(func(m any) bool { return isSeq(m, 1) }) != 1 {
				t.Fatal("the copy of pc1's first message was not held")
			}
			link2.setGate(nil)
			link2.release(after15)
			waitJob(t, col)
			wantInOrder(t, col, 1, 30)
		})
	}
}

// TestNoPassivationWhileTheConsumerHolds: a sharded entity whose consumer
// holds a Delivery it has not confirmed is not passivated, however long it
// is idle; once it confirms, it is. No message comes twice.
func TestNoPassivationWhileTheConsumerHolds(t *testing.T) {
	sys, clock := holesSystem(t)
	var holding atomic.Bool
	holding.Store(true)
	col := newCollector(1)
	passivate := 100 * time.Millisecond
	region := startRegion(t, sys, regionSpec{consumer: consumerSpec{hold: func(Delivery[job]) bool { return holding.Load() }}, passivate: passivate}, col)
	sp := spawnSP(t, sys, "sp", region, ShardingSettings{})
	spawnProducer(t, sys, "producer", nil, producerSpec{limit: 1, connect: shardingConnect(sp), entity: func(job) string { return "e0" }})
	waitJob(t, col)

	clock.Advance(passivate + time.Millisecond)
	stays(t, "the entity is alive while its consumer holds job 1", func() bool { return region.Active() == 1 })

	holding.Store(false)
	clock.Advance(time.Millisecond) // the consumer looks again, and confirms
	eventually(t, "the entity passivated once job 1 is confirmed", func() bool {
		clock.Advance(passivate)
		return region.Active() == 0
	})
	clock.Advance(DefaultResendFirstUnconfirmedIdleTimeout + time.Second)
	stays(t, "job 1 delivered once", func() bool { return col.count() == 1 })
}

// stays checks that cond holds throughout a short bounded wait: for what
// must not happen, when nothing signals that it did not.
func stays(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		if !cond() {
			t.Fatalf("no longer true: %s", what)
		}
		time.Sleep(time.Millisecond) // a poll, bounded by the deadline
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
			sys, clock := holesSystem(t)
			pc := spawnPCOrFail(t, sys, "pc")
			cs := ConsumerSettings{FlowControlWindow: 20}
			spawnProducer(t, sys, "producer", pc, producerSpec{})

			cc1 := spawnCCOrFail(t, sys, "cc1", cs)
			link1 := newFaultLink[job](t, sys, "link1", pc, cc1, faults{}, faults{}, 1)
			isRegister := func(m any) bool { _, ok := m.(RegisterConsumer[job]); return ok }
			link1.setGate(holding(isRegister))
			col1 := newCollector(60)
			consumer1 := spawnConsumer(t, sys, "consumer1", cc1, consumerSpec{}, col1)
			cc1.Tell(RegisterToProducerController[job]{ProducerController: link1.toPC})
			eventually(t, "cc1's RegisterConsumer held", func() bool { return link1.heldCount(isRegister) == 1 })

			cc2 := spawnCCOrFail(t, sys, "cc2", cs)
			link2 := newFaultLink[job](t, sys, "link2", pc, cc2, faults{}, faults{}, 2)
			isMoreDemand := func(m any) bool { r, ok := m.(Request[job]); return ok && r.ConfirmedSeqNr > 0 }
			link2.setGate(holding(isMoreDemand))
			col2 := newCollector(60)
			spawnConsumer(t, sys, "consumer2", cc2, consumerSpec{}, col2)
			cc2.Tell(RegisterToProducerController[job]{ProducerController: link2.toPC})
			eventually(t, "jobs 1-20 delivered to consumer 2", func() bool { return col2.count() >= 20 })

			if tc.stopFirst {
				w := newWatcher(t, sys)
				w.watch(cc1)
				sys.Stop(consumer1) // its consumer controller stops with it
				w.expectStopped(t, cc1.Path())
			}
			// Released from this goroutine, cc1's registration reaches
			// the producer controller before cc2's Requests.
			link1.setGate(nil)
			link1.release(isRegister)
			link2.setGate(nil)
			link2.release(isMoreDemand)
			if !tc.stopFirst {
				clock.Advance(DefaultResendIntervalMin) // cc1 registers again
				eventually(t, "cc1's second RegisterConsumer passed", func() bool { return link1.toPCStats.passed.Load() >= 1 })
			}
			waitJob(t, col2)
			wantInOrder(t, col2, 1, 60)
			if n := col1.count(); n != 0 {
				t.Fatalf("consumer 1, replaced, got %d jobs: %v", n, col1.jobs())
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
	sys, clock := holesSystem(t)
	pc := spawnPCOrFail(t, sys, "pc")
	cs := ConsumerSettings{FlowControlWindow: 20}
	cc1 := spawnCCOrFail(t, sys, "cc1", cs)
	cc2 := spawnCCOrFail(t, sys, "cc2", cs)
	link1 := newFaultLink[job](t, sys, "link1", pc, cc1, faults{}, faults{}, 1)
	link2 := newFaultLink[job](t, sys, "link2", pc, cc2, faults{}, faults{}, 2)
	isRegister := func(m any) bool { _, ok := m.(RegisterConsumer[job]); return ok }
	link2.setGate(holding(isRegister))
	col1, col2 := newCollector(40), newCollector(1)
	spawnConsumer(t, sys, "consumer1", cc1, consumerSpec{}, col1)
	spawnConsumer(t, sys, "consumer2", cc2, consumerSpec{}, col2)
	spawnProducer(t, sys, "producer", pc, producerSpec{})

	cc2.Tell(RegisterToProducerController[job]{ProducerController: link2.toPC})
	eventually(t, "cc2's registration made", func() bool { return link2.heldCount(isRegister) == 1 })
	cc1.Tell(RegisterToProducerController[job]{ProducerController: link1.toPC})
	eventually(t, "jobs 1-20 delivered to consumer 1", func() bool { return col1.count() >= 20 })
	link2.setGate(nil)
	link2.release(isRegister)               // arrives after cc1's
	clock.Advance(DefaultResendIntervalMin) // cc2 registers again, with the same number
	eventually(t, "cc2's second RegisterConsumer passed", func() bool { return link2.toPCStats.passed.Load() >= 1 })
	stays(t, "consumer 2, registered before consumer 1, gets nothing", func() bool { return col2.count() == 0 })
	waitJob(t, col1)
	wantInOrder(t, col1, 1, 40)
}
