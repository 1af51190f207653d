package sharding_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/sharding"
	"github.com/trellis-go/trellis/runtime"
)

// sccHarness is one entity's ShardingConsumerController spawned as a plain
// actor, with probes playing its producer controllers.
type sccHarness struct {
	sys      *runtime.System
	entity   runtime.Ref[delivery.ConsumerCommand[deliverytest.Job]]
	consumer runtime.Ref[deliverytest.ConsMsg] // the entity's consumer, once it has started
	col      *deliverytest.Collector
}

func newSCC(t *testing.T, want int) *sccHarness {
	t.Helper()
	h := &sccHarness{col: deliverytest.NewCollectorAll(want)}
	h.sys, _ = deliverytest.NewSystem(t)
	consumers := make(chan runtime.Ref[deliverytest.ConsMsg], 1)
	// The consumer starts only when the test tells it to, and reports its
	// ref so that the test can.
	create, err := sharding.NewConsumerController(func(_ string, start runtime.Ref[delivery.ConsumerStart[deliverytest.Job]]) runtime.Behavior[deliverytest.ConsMsg] {
		inner := deliverytest.ConsumerBehavior(deliverytest.ConsumerSpec{}, h.col, func(s delivery.ConsumerStart[deliverytest.Job]) { start.Tell(s) })
		return runtime.Funcs[deliverytest.ConsMsg]{
			Message: inner.Receive,
			Signal: func(ctx *runtime.Context[deliverytest.ConsMsg], s runtime.Signal) {
				if _, ok := s.(runtime.Started); ok {
					consumers <- ctx.Self()
				}
			},
		}
	}, sharding.ConsumerSettings{Consumer: delivery.ConsumerSettings{ResendIntervalMin: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	h.entity, err = runtime.Spawn(h.sys, "entity", func() runtime.Behavior[delivery.ConsumerCommand[deliverytest.Job]] { return create("e1") })
	if err != nil {
		t.Fatal(err)
	}
	h.consumer = deliverytest.Recv(t, consumers)
	return h
}

// send sends job n as message seqNr of producer id, from pc.
func (h *sccHarness) send(id string, pc *deliverytest.Probe[delivery.ProducerCommand[deliverytest.Job]], inc uint64, seqNr delivery.SeqNr, first bool, n int) {
	h.entity.Tell(&delivery.SequencedMessage[deliverytest.Job]{ProducerID: id, SeqNr: seqNr, Message: deliverytest.Job{N: n}, First: first,
		ProducerController: pc.Ref, Incarnation: inc})
}

// awaitGone returns a function that waits until every part of the runtime
// has been told that ref's actor stopped: the receptionist drops an actor
// only after it has told its watchers.
func awaitGone(t *testing.T, sys *runtime.System, ref runtime.Ref[delivery.ProducerCommand[deliverytest.Job]]) func() {
	t.Helper()
	key := runtime.NewServiceKey[delivery.ProducerCommand[deliverytest.Job]]("gone:" + ref.Path())
	runtime.Register(sys, key, ref)
	listings := deliverytest.NewProbe[runtime.Listing[delivery.ProducerCommand[deliverytest.Job]]](t, sys, "listing-"+fmt.Sprint(time.Now().UnixNano()))
	runtime.Subscribe(sys, key, listings.Ref)
	return func() {
		for len(listings.Expect(t).Refs) != 0 {
		}
	}
}

// TestShardingConsumerController: the entity keeps what arrives until its
// consumer starts, runs one consumer controller per producer id, and tells
// a producer's consumer controller to finish and stop when the producer
// controller stops: what the same producer id sends next starts afresh.
func TestShardingConsumerController(t *testing.T) {
	h := newSCC(t, 4)
	pc1 := deliverytest.NewProbe[delivery.ProducerCommand[deliverytest.Job]](t, h.sys, "pc1")
	for n := 1; n <= 3; n++ {
		h.send("p1", pc1, 7, delivery.SeqNr(n), n == 1, n)
	}
	pc1.ExpectNone(t, 20*time.Millisecond) // kept: no consumer controller yet
	if h.col.Count() != 0 {
		t.Fatal("delivered before the consumer started")
	}
	h.consumer.Tell(deliverytest.ConsMsg{}) // start
	if r, ok := pc1.Expect(t).(delivery.Request[deliverytest.Job]); !ok || r.RequestUpToSeqNr < 3 {
		t.Fatalf("producer 1 got %+v, want a Request for its messages", r)
	}
	deliverytest.Eventually(t, "jobs 1-3 delivered", func() bool { return h.col.Distinct() == 3 })

	// A second producer: a consumer controller of its own, which adopts
	// its first message though the first producer's is at 3.
	pc2 := deliverytest.NewProbe[delivery.ProducerCommand[deliverytest.Job]](t, h.sys, "pc2")
	h.send("p2", pc2, 9, 1, true, 4)
	if r, ok := pc2.Expect(t).(delivery.Request[deliverytest.Job]); !ok || r.RequestUpToSeqNr < 1 {
		t.Fatalf("producer 2 got %+v, want a Request", r)
	}
	deliverytest.WaitAll(t, h.col)

	// Producer 1's controller stops. Its consumer controller is told to
	// stop; a later message of producer id p1 from a new producer
	// controller, not marked first, finds a new consumer controller that
	// knows nothing yet, and asks for everything (the old one would have
	// dropped it: a stranger's message that does not start an
	// association).
	gone := awaitGone(t, h.sys, pc1.Ref)
	h.sys.Stop(pc1.Ref)
	gone()
	pc3 := deliverytest.NewProbe[delivery.ProducerCommand[deliverytest.Job]](t, h.sys, "pc3")
	h.send("p1", pc3, 8, 4, false, 5)
	if r, ok := pc3.Expect(t).(delivery.Resend[deliverytest.Job]); !ok || r.FromSeqNr != 0 {
		t.Fatalf("the new producer controller got %+v, want Resend(0) from a new consumer controller", r)
	}
}

// TestShardingConsumerStopsWithConsumer: the entity stops when its
// consumer does.
func TestShardingConsumerStopsWithConsumer(t *testing.T) {
	h := newSCC(t, 1)
	w := deliverytest.NewWatcher(t, h.sys)
	w.Watch(h.entity)
	h.sys.Stop(h.consumer)
	w.ExpectStopped(t, "/user/entity")
}

// TestShardingConsumerHandOver: when a producer's controller stops while
// its consumer controller still has a Delivery outstanding, a new
// controller's messages for the same producer id wait until the old
// consumer controller has delivered what it had and stopped, so the
// consumer never gets one producer's messages from two consumer
// controllers at once, out of order. (The reference starts the new one at
// once.)
func TestShardingConsumerHandOver(t *testing.T) {
	const hold = time.Second
	clock := clockwork.NewFakeClock()
	sys, _ := deliverytest.NewSystem(t, runtime.WithClock(clock))
	col := deliverytest.NewCollectorAll(2)
	create, err := sharding.NewConsumerController(func(_ string, start runtime.Ref[delivery.ConsumerStart[deliverytest.Job]]) runtime.Behavior[deliverytest.ConsMsg] {
		// The consumer confirms each job hold after it came, on the fake clock.
		return deliverytest.ConsumerBehavior(deliverytest.ConsumerSpec{Delay: func() time.Duration { return hold }, Started: true}, col,
			func(s delivery.ConsumerStart[deliverytest.Job]) { start.Tell(s) })
	}, sharding.ConsumerSettings{Consumer: delivery.ConsumerSettings{ResendIntervalMin: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	entity, err := runtime.Spawn(sys, "entity", func() runtime.Behavior[delivery.ConsumerCommand[deliverytest.Job]] { return create("e1") })
	if err != nil {
		t.Fatal(err)
	}
	h := &sccHarness{sys: sys, entity: entity, col: col}

	pc1 := deliverytest.NewProbe[delivery.ProducerCommand[deliverytest.Job]](t, sys, "pc1")
	h.send("p1", pc1, 7, 1, true, 1)
	deliverytest.Eventually(t, "job 1 delivered, not yet confirmed", func() bool { return col.Count() == 1 })

	gone := awaitGone(t, sys, pc1.Ref)
	sys.Stop(pc1.Ref)
	gone()
	pc2 := deliverytest.NewProbe[delivery.ProducerCommand[deliverytest.Job]](t, sys, "pc2")
	h.send("p1", pc2, 8, 1, true, 2)
	pc2.ExpectNone(t, 50*time.Millisecond) // no consumer controller for it yet
	if n := col.Count(); n != 1 {
		t.Fatalf("%d deliveries while the old consumer controller still had job 1 out, want 1", n)
	}

	clock.Advance(hold) // job 1 confirmed: the old consumer controller stops
	if r, ok := pc2.Expect(t).(delivery.Request[deliverytest.Job]); !ok {
		t.Fatalf("the new producer controller got %+v, want a Request", r)
	}
	deliverytest.Eventually(t, "job 2 delivered", func() bool { return col.Count() == 2 })
}
