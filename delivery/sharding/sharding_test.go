package sharding_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/sharding"
	"github.com/trellis-go/trellis/runtime"
)

// shardingStats asks sp for its stats.
func shardingStats(t testing.TB, sp runtime.Ref[sharding.Command[deliverytest.Job]]) sharding.Stats {
	t.Helper()
	return deliverytest.Ask(t, sp, func(r runtime.Ref[sharding.Stats]) sharding.Command[deliverytest.Job] {
		return sharding.GetStats[deliverytest.Job]{ReplyTo: r}
	})
}

// TestSharding sends jobs to entities through a sharding producer
// controller without faults: every job arrives exactly once, each entity's
// in the order sent.
func TestSharding(t *testing.T) {
	cases := []struct {
		name     string
		n        int                       // jobs to send
		entities int                       // jobs go round robin to this many entities
		ask      bool                      // the producer asks and checks the replies
		producer delivery.ProducerSettings // the entities' producer controllers' settings
		pad      int                       // bytes of padding per job
		durable  bool                      // with a durable queue in memory
	}{
		{name: "one entity", n: 500, entities: 1},
		{name: "100 entities interleaved", n: 3000, entities: 100},
		{name: "100 entities, ask", n: 1000, entities: 100, ask: true},
		{name: "chunked 7 bytes", n: 500, entities: 10, producer: delivery.ProducerSettings{ChunkLargeMessages: 7}, pad: 40},
		{name: "chunked, ask", n: 300, entities: 10, ask: true, producer: delivery.ProducerSettings{ChunkLargeMessages: 5}, pad: 20},
		{name: "durable", n: 1000, entities: 100, durable: true},
		{name: "durable, ask, chunked", n: 300, entities: 10, durable: true, ask: true, producer: delivery.ProducerSettings{ChunkLargeMessages: 6}, pad: 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys, _ := deliverytest.NewSystem(t)
			col := deliverytest.NewCollectorAll(tc.n)
			// Fast retries: the last confirmations come with an idle Request.
			rs := deliverytest.RegionSpec{Settings: sharding.ConsumerSettings{Consumer: delivery.ConsumerSettings{ResendIntervalMin: 50 * time.Millisecond}}}
			region := deliverytest.StartRegion(t, sys, rs, col)
			q, opts := deliverytest.MemoryQueue(tc.durable)
			sp := deliverytest.SpawnSP(t, sys, "sp", region, sharding.Settings{Producer: tc.producer}, opts...)
			replies := make(chan delivery.SeqNr, tc.n)
			deliverytest.SpawnProducer(t, sys, "producer", nil, deliverytest.ProducerSpec{Limit: tc.n, Ask: tc.ask, Replies: replies, Pad: deliverytest.Padding(tc.pad),
				Connect: deliverytest.ShardingConnect(sp), Entity: deliverytest.EntityOf(tc.entities)})
			deliverytest.WaitAll(t, col)
			deliverytest.ExactlyOnce(t, col, tc.n)
			if err := deliverytest.PerEntityOrder(col.Deliveries()); err != nil {
				t.Fatal(err)
			}
			if got := len(deliverytest.ByEntity(col.Deliveries())); got != tc.entities {
				t.Fatalf("jobs went to %d entities, want %d", got, tc.entities)
			}
			if tc.ask {
				deliverytest.ExpectReplies(t, replies, tc.n)
			}
			if tc.durable {
				deliverytest.QueueDrained(t, q, delivery.SeqNr(tc.n)+1)
			}
		})
	}
}

// fakeShardingSystem is a system on a fake clock whose entities' consumer
// controllers never tick on their own (a huge retry interval): only the
// test moves time.
func fakeShardingSystem(t *testing.T) (*runtime.System, *clockwork.FakeClock, *deliverytest.LogBuffer) {
	t.Helper()
	clock := clockwork.NewFakeClock()
	sys, logs := deliverytest.NewSystem(t, runtime.WithClock(clock))
	return sys, clock, logs
}

// quietConsumer are consumer controller settings without idle retries in
// the time a test advances its fake clock.
var quietConsumer = delivery.ConsumerSettings{ResendIntervalMin: 1000 * time.Hour}

// TestShardingBuffering: messages to an entity without demand are
// buffered; RequestNext says which entities have demand and what is
// buffered, and stops coming while the buffer is full; once the entity
// confirms, the buffer drains in order and RequestNext comes again.
func TestShardingBuffering(t *testing.T) {
	sys, clock, _ := fakeShardingSystem(t)
	col := deliverytest.NewCollectorAll(5)
	// The consumer confirms each job a minute after it gets it; the window
	// of 2 lets two jobs go to the entity, the rest are buffered.
	slow := deliverytest.ConsumerSpec{Delay: func() time.Duration { return time.Minute }}
	rs := deliverytest.RegionSpec{Settings: sharding.ConsumerSettings{Consumer: delivery.ConsumerSettings{FlowControlWindow: 2, ResendIntervalMin: 24 * time.Hour}}, Consumer: slow}
	region := deliverytest.StartRegion(t, sys, rs, col)
	sp := deliverytest.SpawnSP(t, sys, "sp", region, sharding.Settings{BufferSize: 3, ResendFirstUnconfirmedIdleTimeout: 24 * time.Hour})
	producer := deliverytest.ShardingProbe(t, sys, sp)
	r := producer.Expect(t)
	if len(r.EntitiesWithDemand) != 0 || len(r.BufferedForEntitiesWithoutDemand) != 0 {
		t.Fatalf("first RequestNext %+v: want no demand, nothing buffered", r)
	}
	r.SendNextTo.Tell(sharding.Envelope[deliverytest.Job]{EntityID: "a", Message: deliverytest.Job{N: 1}})
	r = producer.Expect(t)
	if got := r.BufferedForEntitiesWithoutDemand["a"]; got != 1 {
		t.Fatalf("RequestNext after the first message to a new entity: buffered %v, want a:1", r.BufferedForEntitiesWithoutDemand)
	}
	for n := 2; n <= 5; n++ {
		r.SendNextTo.Tell(sharding.Envelope[deliverytest.Job]{EntityID: "a", Message: deliverytest.Job{N: n}})
		if n < 5 {
			r = producer.Expect(t)
		}
	}
	deliverytest.Eventually(t, "two jobs sent, three buffered", func() bool {
		s := shardingStats(t, sp)
		return s.Unconfirmed == 2 && s.Buffered == 3
	})
	producer.ExpectNone(t, 20*time.Millisecond) // the buffer is full
	for k := 1; k <= 5; k++ {
		deliverytest.Eventually(t, fmt.Sprintf("job %d delivered", k), func() bool { return col.Distinct() >= k })
		clock.Advance(time.Minute) // the consumer confirms it
	}
	// It came when the first buffered job went out, with two left.
	r = producer.Expect(t)
	if got := r.BufferedForEntitiesWithoutDemand["a"]; got != 2 {
		t.Fatalf("RequestNext once the buffer had room: buffered %v, want a:2", r.BufferedForEntitiesWithoutDemand)
	}
	if err := deliverytest.PerEntityOrder(col.Deliveries()); err != nil {
		t.Fatal(err)
	}
}

// TestShardingBufferFull: a producer that sends more than BufferSize
// messages for entities without demand, without waiting for RequestNext,
// stops the controller with an error that says so.
func TestShardingBufferFull(t *testing.T) {
	sys, _, logs := fakeShardingSystem(t)
	// Entities that never start a consumer controller: an entity's
	// producer controller takes one message before any demand (the one that
	// starts the entity), and no more ever.
	region, err := runtime.InitSharding(sys, runtime.Entity[delivery.ConsumerCommand[deliverytest.Job]]{Key: deliverytest.EntityKey,
		Create: func(string) runtime.Behavior[delivery.ConsumerCommand[deliverytest.Job]] {
			return runtime.ReceiveFunc(func(*runtime.Context[delivery.ConsumerCommand[deliverytest.Job]], delivery.ConsumerCommand[deliverytest.Job]) {
			})
		}})
	if err != nil {
		t.Fatal(err)
	}
	sp := deliverytest.SpawnSP(t, sys, "sp", region, sharding.Settings{BufferSize: 2})
	w := deliverytest.NewWatcher(t, sys)
	w.Watch(sp)
	producer := deliverytest.ShardingProbe(t, sys, sp)
	r := producer.Expect(t)
	// Four messages for one entity: whether its first goes out before the
	// others arrive or not, two fill the buffer and the next overflows it.
	for n := 1; n <= 4; n++ {
		r.SendNextTo.Tell(sharding.Envelope[deliverytest.Job]{EntityID: "e1", Message: deliverytest.Job{N: n}})
	}
	deliverytest.ExpectFailed(t, w, logs, "/user/sp", "buffer full", "sharding.Settings.BufferSize")
}

// TestShardingNotPassivatedWithUnconfirmed: an entity whose consumer holds
// a job, with more waiting in its consumer controller, is not passivated
// however long it idles: passivated, it would lose them, and the consumer
// could get again a job it had processed. Once the consumer confirms, the
// rest arrive, each once and in order, and then the entity is passivated.
func TestShardingNotPassivatedWithUnconfirmed(t *testing.T) {
	sys, clock, _ := fakeShardingSystem(t)
	col := deliverytest.NewCollectorAll(5)
	// The consumer holds the second job it is given for two minutes (four
	// times longer than the entity may idle); it confirms every other at once.
	var calls atomic.Int32
	hold := deliverytest.ConsumerSpec{Delay: func() time.Duration {
		if calls.Add(1) == 2 {
			return 2 * time.Minute
		}
		return 0
	}}
	region := deliverytest.StartRegion(t, sys, deliverytest.RegionSpec{Settings: sharding.ConsumerSettings{Consumer: quietConsumer}, Consumer: hold, Passivate: 30 * time.Second}, col)
	sp := deliverytest.SpawnSP(t, sys, "sp", region, sharding.Settings{ResendFirstUnconfirmedIdleTimeout: 24 * time.Hour, CleanupUnusedAfter: 100 * time.Hour})
	producer := deliverytest.ShardingProbe(t, sys, sp)
	for n := 1; n <= 5; n++ {
		producer.Expect(t).SendNextTo.Tell(sharding.Envelope[deliverytest.Job]{EntityID: "a", Message: deliverytest.Job{N: n}})
	}
	deliverytest.Eventually(t, "job 1 confirmed, job 2 held, 3-5 sent to the entity", func() bool {
		return col.Distinct() == 2 && shardingStats(t, sp).Unconfirmed == 4
	})
	for range 3 { // 90 s: three times what the entity may idle, still holding job 2
		clock.Advance(30 * time.Second)
		if region.Active() != 1 {
			t.Fatal("the entity was passivated while its consumer held job 2")
		}
	}
	deliverytest.Eventually(t, "jobs 3-5 delivered once job 2 is confirmed", func() bool {
		clock.Advance(10 * time.Second)
		return col.Distinct() == 5
	})
	deliverytest.Eventually(t, "the entity passivated", func() bool {
		clock.Advance(30 * time.Second)
		return region.Active() == 0
	})
	got := deliverytest.ByEntity(col.Deliveries())["sp-a"]
	if want := []int{1, 2, 3, 4, 5}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("entity a got %v, want %v", got, want)
	}
}

// TestShardingCleanup: the producer controller of an entity idle for
// CleanupUnusedAfter, with nothing unconfirmed, is stopped; a later
// message to the entity makes a new one, and arrives.
func TestShardingCleanup(t *testing.T) {
	sys, clock, _ := fakeShardingSystem(t)
	col := deliverytest.NewCollectorAll(2)
	region := deliverytest.StartRegion(t, sys, deliverytest.RegionSpec{Settings: sharding.ConsumerSettings{Consumer: quietConsumer}, Passivate: -1}, col)
	sp := deliverytest.SpawnSP(t, sys, "sp", region, sharding.Settings{CleanupUnusedAfter: time.Minute, ResendFirstUnconfirmedIdleTimeout: time.Hour})
	producer := deliverytest.ShardingProbe(t, sys, sp)
	producer.Expect(t).SendNextTo.Tell(sharding.Envelope[deliverytest.Job]{EntityID: "a", Message: deliverytest.Job{N: 1}})
	r := producer.Expect(t)
	deliverytest.Eventually(t, "job 1 confirmed", func() bool {
		s := shardingStats(t, sp)
		return col.Distinct() == 1 && s.Unconfirmed == 0 && s.Entities == 1
	})
	clock.Advance(30 * time.Second)
	if s := shardingStats(t, sp); s.Entities != 1 {
		t.Fatalf("cleaned up after half the time: %+v", s)
	}
	// The check runs every half of CleanupUnusedAfter, its timer armed
	// again once a tick is handled: the clock goes on a second at a time
	// until it runs, as a real one would.
	clock.Advance(30 * time.Second)
	deliverytest.Eventually(t, "the entity's producer controller cleaned up", func() bool {
		if shardingStats(t, sp).Entities == 0 {
			return true
		}
		clock.Advance(time.Second)
		return false
	})
	r.SendNextTo.Tell(sharding.Envelope[deliverytest.Job]{EntityID: "a", Message: deliverytest.Job{N: 2}})
	deliverytest.WaitAll(t, col)
	if got := deliverytest.ByEntity(col.Deliveries())["sp-a"]; fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("entity a got %v, want [1 2]", got)
	}
}

// TestShardingDurableRestart: a durable sharding controller and its
// producer stop mid-stream; new ones with the same queue send every
// unconfirmed message again, each entity's in order before its new ones:
// every job arrives, and the queue ends with nothing unconfirmed.
func TestShardingDurableRestart(t *testing.T) {
	const n, entities = 1000, 100
	// The first producer stops after job stopAt; the jobs after held stay
	// unconfirmed until then, one or none per entity (fewer than its
	// window), so all are stored before the stop.
	const held, stopAt = n / 3, n/3 + 30
	sys, _ := deliverytest.NewSystem(t)
	col := deliverytest.NewCollectorAll(n)
	gate := &deliverytest.HoldGate{Above: held}
	slow := deliverytest.ConsumerSpec{Delay: func() time.Duration { return 200 * time.Microsecond }, Hold: gate.Holds}
	rs := deliverytest.RegionSpec{Settings: sharding.ConsumerSettings{Consumer: delivery.ConsumerSettings{ResendIntervalMin: 50 * time.Millisecond, FlowControlWindow: 4}}, Consumer: slow}
	region := deliverytest.StartRegion(t, sys, rs, col)
	q := durable.NewMemory[deliverytest.Job]()
	w := deliverytest.NewWatcher(t, sys)
	sp1 := deliverytest.SpawnSP(t, sys, "sp1", region, sharding.Settings{BufferSize: 100}, delivery.WithDurableQueue[deliverytest.Job](q))
	w.Watch(sp1)
	// The producer asks: a reply says the job is stored; its sequence
	// number is the job's.
	replies := make(chan delivery.SeqNr, n)
	prod1 := deliverytest.SpawnProducer(t, sys, "producer1", nil, deliverytest.ProducerSpec{Limit: stopAt, Ask: true, Replies: replies,
		Connect: deliverytest.ShardingConnect(sp1), Entity: deliverytest.EntityOf(entities)})
	accepted, s := deliverytest.StopMidStream(t, sys, w, prod1, sp1, replies, q, stopAt)
	for _, u := range s.Unconfirmed {
		if want := deliverytest.EntityOf(entities)(u.Message); u.Qualifier != want {
			t.Fatalf("job %d stored with qualifier %q, want its entity %q", u.Message.N, u.Qualifier, want)
		}
	}
	gate.Open()

	sp2 := deliverytest.SpawnSP(t, sys, "sp2", region, sharding.Settings{}, delivery.WithDurableQueue[deliverytest.Job](q))
	deliverytest.SpawnProducer(t, sys, "producer2", nil, deliverytest.ProducerSpec{Limit: n, First: accepted + 1, Connect: deliverytest.ShardingConnect(sp2), Entity: deliverytest.EntityOf(entities)})
	deliverytest.WaitAll(t, col)
	// Two steps back at most: the unconfirmed jobs sent again, and any
	// jobs stored whose replies the stopped producer never saw, which the
	// new producer sends again as new ones.
	if err := deliverytest.PerEntityAtLeastOnce(col.Deliveries(), n, 2); err != nil {
		t.Fatal(err)
	}
	deliverytest.QueueDrained(t, q, 0)
}

// TestShardingRequestNextDemand: RequestNext names the entities that have
// demand, and a message to an entity that has none (a new one) is
// buffered for it.
func TestShardingRequestNextDemand(t *testing.T) {
	sys, _ := deliverytest.NewSystem(t)
	col := deliverytest.NewCollectorAll(2)
	region := deliverytest.StartRegion(t, sys, deliverytest.RegionSpec{}, col)
	sp := deliverytest.SpawnSP(t, sys, "sp", region, sharding.Settings{})
	producer := deliverytest.ShardingProbe(t, sys, sp)
	producer.Expect(t).SendNextTo.Tell(sharding.Envelope[deliverytest.Job]{EntityID: "a", Message: deliverytest.Job{N: 1}})
	r := producer.Expect(t)
	deliverytest.Eventually(t, "entity a has demand", func() bool { return shardingStats(t, sp).EntitiesWithDemand == 1 })
	r.SendNextTo.Tell(sharding.Envelope[deliverytest.Job]{EntityID: "b", Message: deliverytest.Job{N: 2}})
	r = producer.Expect(t)
	if fmt.Sprint(r.EntitiesWithDemand) != "[a]" || fmt.Sprint(r.BufferedForEntitiesWithoutDemand) != "map[b:1]" {
		t.Fatalf("RequestNext: demand %v, buffered %v; want [a] and map[b:1]", r.EntitiesWithDemand, r.BufferedForEntitiesWithoutDemand)
	}
	deliverytest.WaitAll(t, col)
}
