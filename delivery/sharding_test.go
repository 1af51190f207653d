package delivery

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/runtime"
)

// entityKey is the entity type of the sharding tests.
var entityKey = runtime.NewEntityTypeKey[ConsumerCommand[job]]("jobs")

// regionSpec describes the entities of a sharding test.
type regionSpec struct {
	settings  ShardingConsumerSettings // each entity's settings
	consumer  consumerSpec             // each entity's consumer (it starts in Started)
	passivate time.Duration            // Entity.PassivateAfter; 0: the runtime's default
}

// startRegion initialises sharding of entityKey on sys: each entity is a
// ShardingConsumerController whose consumer is a testConsumer recording in
// col.
func startRegion(t testing.TB, sys *runtime.System, rs regionSpec, col *collector) *runtime.Sharding[ConsumerCommand[job]] {
	t.Helper()
	spec := rs.consumer
	spec.started = true
	create, err := NewShardingConsumerController(func(_ string, start runtime.Ref[ConsumerStart[job]]) runtime.Behavior[consMsg] {
		return testConsumer(spec, col, func(s ConsumerStart[job]) { start.Tell(s) })
	}, rs.settings)
	if err != nil {
		t.Fatalf("sharding consumer controller: %v", err)
	}
	region, err := runtime.InitSharding(sys, runtime.Entity[ConsumerCommand[job]]{Key: entityKey, Create: create, PassivateAfter: rs.passivate})
	if err != nil {
		t.Fatalf("init sharding: %v", err)
	}
	return region
}

// entityOf spreads jobs over n entities, e0..e(n-1).
func entityOf(n int) func(j job) string {
	return func(j job) string { return fmt.Sprintf("e%d", j.N%n) }
}

// shardingStats asks sp for its stats.
func shardingStats(t testing.TB, sp runtime.Ref[ShardingCommand[job]]) ShardingStats {
	t.Helper()
	return ask(t, sp, func(r runtime.Ref[ShardingStats]) ShardingCommand[job] { return GetShardingStats[job]{ReplyTo: r} })
}

// byEntity groups the job numbers delivered by the producer id of their
// consumer controller's producer: one per entity.
func byEntity(ds []Delivery[job]) map[string][]int {
	out := make(map[string][]int)
	for _, d := range ds {
		out[d.ProducerID] = append(out[d.ProducerID], d.Message.N)
	}
	return out
}

// perEntityOrder returns an error unless each entity got its jobs in
// increasing order (strictly: no duplicates).
func perEntityOrder(ds []Delivery[job]) error {
	for id, jobs := range byEntity(ds) {
		for i := 1; i < len(jobs); i++ {
			if jobs[i] <= jobs[i-1] {
				return fmt.Errorf("entity %s: job %d after job %d (around: %v)", id, jobs[i], jobs[i-1], jobs[max(0, i-5):min(len(jobs), i+5)])
			}
		}
	}
	return nil
}

// TestSharding sends jobs to entities through a sharding producer
// controller without faults: every job arrives exactly once, each entity's
// in the order sent.
func TestSharding(t *testing.T) {
	cases := []struct {
		name     string
		n        int              // jobs to send
		entities int              // jobs go round robin to this many entities
		ask      bool             // the producer asks and checks the replies
		producer ProducerSettings // the entities' producer controllers' settings
		pad      int              // bytes of padding per job
		durable  bool             // with a durable queue in memory
	}{
		{name: "one entity", n: 500, entities: 1},
		{name: "100 entities interleaved", n: 3000, entities: 100},
		{name: "100 entities, ask", n: 1000, entities: 100, ask: true},
		{name: "chunked 7 bytes", n: 500, entities: 10, producer: ProducerSettings{ChunkLargeMessages: 7}, pad: 40},
		{name: "chunked, ask", n: 300, entities: 10, ask: true, producer: ProducerSettings{ChunkLargeMessages: 5}, pad: 20},
		{name: "durable", n: 1000, entities: 100, durable: true},
		{name: "durable, ask, chunked", n: 300, entities: 10, durable: true, ask: true, producer: ProducerSettings{ChunkLargeMessages: 6}, pad: 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sys, _ := newSystem(t)
			col := newCollectorAll(tc.n)
			// Fast retries: the last confirmations come with an idle Request.
			rs := regionSpec{settings: ShardingConsumerSettings{Consumer: ConsumerSettings{ResendIntervalMin: 50 * time.Millisecond}}}
			region := startRegion(t, sys, rs, col)
			q, opts := memoryQueue(tc.durable)
			sp := spawnSP(t, sys, "sp", region, ShardingSettings{Producer: tc.producer}, opts...)
			replies := make(chan SeqNr, tc.n)
			spawnProducer(t, sys, "producer", nil, producerSpec{limit: tc.n, ask: tc.ask, replies: replies, pad: padding(tc.pad),
				connect: shardingConnect(sp), entity: entityOf(tc.entities)})
			waitAll(t, col)
			exactlyOnce(t, col, tc.n)
			if err := perEntityOrder(col.deliveries()); err != nil {
				t.Fatal(err)
			}
			if got := len(byEntity(col.deliveries())); got != tc.entities {
				t.Fatalf("jobs went to %d entities, want %d", got, tc.entities)
			}
			if tc.ask {
				expectReplies(t, replies, tc.n)
			}
			if tc.durable {
				queueDrained(t, q, SeqNr(tc.n)+1)
			}
		})
	}
}

// fakeShardingSystem is a system on a fake clock whose entities' consumer
// controllers never tick on their own (a huge retry interval): only the
// test moves time.
func fakeShardingSystem(t *testing.T) (*runtime.System, *clockwork.FakeClock, *logBuffer) {
	t.Helper()
	clock := clockwork.NewFakeClock()
	sys, logs := newSystem(t, runtime.WithClock(clock))
	return sys, clock, logs
}

// quietConsumer are consumer controller settings without idle retries in
// the time a test advances its fake clock.
var quietConsumer = ConsumerSettings{ResendIntervalMin: 1000 * time.Hour}

// TestShardingBuffering: messages to an entity without demand are
// buffered; RequestNext says which entities have demand and what is
// buffered, and stops coming while the buffer is full; once the entity
// confirms, the buffer drains in order and RequestNext comes again.
func TestShardingBuffering(t *testing.T) {
	sys, clock, _ := fakeShardingSystem(t)
	col := newCollectorAll(5)
	// The consumer confirms each job a minute after it gets it; the window
	// of 2 lets two jobs go to the entity, the rest are buffered.
	slow := consumerSpec{delay: func() time.Duration { return time.Minute }}
	rs := regionSpec{settings: ShardingConsumerSettings{Consumer: ConsumerSettings{FlowControlWindow: 2, ResendIntervalMin: 24 * time.Hour}}, consumer: slow}
	region := startRegion(t, sys, rs, col)
	sp := spawnSP(t, sys, "sp", region, ShardingSettings{BufferSize: 3, ResendFirstUnconfirmedIdleTimeout: 24 * time.Hour})
	producer := shardingProbe(t, sys, sp)
	r := producer.Expect(t)
	if len(r.EntitiesWithDemand) != 0 || len(r.BufferedForEntitiesWithoutDemand) != 0 {
		t.Fatalf("first RequestNext %+v: want no demand, nothing buffered", r)
	}
	r.SendNextTo.Tell(ShardingEnvelope[job]{EntityID: "a", Message: job{N: 1}})
	r = producer.Expect(t)
	if got := r.BufferedForEntitiesWithoutDemand["a"]; got != 1 {
		t.Fatalf("RequestNext after the first message to a new entity: buffered %v, want a:1", r.BufferedForEntitiesWithoutDemand)
	}
	for n := 2; n <= 5; n++ {
		r.SendNextTo.Tell(ShardingEnvelope[job]{EntityID: "a", Message: job{N: n}})
		if n < 5 {
			r = producer.Expect(t)
		}
	}
	eventually(t, "two jobs sent, three buffered", func() bool {
		s := shardingStats(t, sp)
		return s.Unconfirmed == 2 && s.Buffered == 3
	})
	producer.ExpectNone(t, 20*time.Millisecond) // the buffer is full
	for k := 1; k <= 5; k++ {
		eventually(t, fmt.Sprintf("job %d delivered", k), func() bool { return col.distinct() >= k })
		clock.Advance(time.Minute) // the consumer confirms it
	}
	// It came when the first buffered job went out, with two left.
	r = producer.Expect(t)
	if got := r.BufferedForEntitiesWithoutDemand["a"]; got != 2 {
		t.Fatalf("RequestNext once the buffer had room: buffered %v, want a:2", r.BufferedForEntitiesWithoutDemand)
	}
	if err := perEntityOrder(col.deliveries()); err != nil {
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
	region, err := runtime.InitSharding(sys, runtime.Entity[ConsumerCommand[job]]{Key: entityKey,
		Create: func(string) runtime.Behavior[ConsumerCommand[job]] {
			return runtime.ReceiveFunc(func(*runtime.Context[ConsumerCommand[job]], ConsumerCommand[job]) {})
		}})
	if err != nil {
		t.Fatal(err)
	}
	sp := spawnSP(t, sys, "sp", region, ShardingSettings{BufferSize: 2})
	w := newWatcher(t, sys)
	w.watch(sp)
	producer := shardingProbe(t, sys, sp)
	r := producer.Expect(t)
	// Four messages for one entity: whether its first goes out before the
	// others arrive or not, two fill the buffer and the next overflows it.
	for n := 1; n <= 4; n++ {
		r.SendNextTo.Tell(ShardingEnvelope[job]{EntityID: "e1", Message: job{N: n}})
	}
	expectFailed(t, w, logs, "/user/sp", "buffer full", "ShardingSettings.BufferSize")
}

// TestShardingNotPassivatedWithUnconfirmed: an entity whose consumer holds
// a job, with more waiting in its consumer controller, is not passivated
// however long it idles: passivated, it would lose them, and the consumer
// could get again a job it had processed. Once the consumer confirms, the
// rest arrive, each once and in order, and then the entity is passivated.
func TestShardingNotPassivatedWithUnconfirmed(t *testing.T) {
	sys, clock, _ := fakeShardingSystem(t)
	col := newCollectorAll(5)
	// The consumer holds the second job it is given for two minutes (four
	// times longer than the entity may idle); it confirms every other at once.
	var calls atomic.Int32
	hold := consumerSpec{delay: func() time.Duration {
		if calls.Add(1) == 2 {
			return 2 * time.Minute
		}
		return 0
	}}
	region := startRegion(t, sys, regionSpec{settings: ShardingConsumerSettings{Consumer: quietConsumer}, consumer: hold, passivate: 30 * time.Second}, col)
	sp := spawnSP(t, sys, "sp", region, ShardingSettings{ResendFirstUnconfirmedIdleTimeout: 24 * time.Hour, CleanupUnusedAfter: 100 * time.Hour})
	producer := shardingProbe(t, sys, sp)
	for n := 1; n <= 5; n++ {
		producer.Expect(t).SendNextTo.Tell(ShardingEnvelope[job]{EntityID: "a", Message: job{N: n}})
	}
	eventually(t, "job 1 confirmed, job 2 held, 3-5 sent to the entity", func() bool {
		return col.distinct() == 2 && shardingStats(t, sp).Unconfirmed == 4
	})
	for range 3 { // 90 s: three times what the entity may idle, still holding job 2
		clock.Advance(30 * time.Second)
		if region.Active() != 1 {
			t.Fatal("the entity was passivated while its consumer held job 2")
		}
	}
	eventually(t, "jobs 3-5 delivered once job 2 is confirmed", func() bool {
		clock.Advance(10 * time.Second)
		return col.distinct() == 5
	})
	eventually(t, "the entity passivated", func() bool {
		clock.Advance(30 * time.Second)
		return region.Active() == 0
	})
	got := byEntity(col.deliveries())["sp-a"]
	if want := []int{1, 2, 3, 4, 5}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("entity a got %v, want %v", got, want)
	}
}

// TestShardingCleanup: the producer controller of an entity idle for
// CleanupUnusedAfter, with nothing unconfirmed, is stopped; a later
// message to the entity makes a new one, and arrives.
func TestShardingCleanup(t *testing.T) {
	sys, clock, _ := fakeShardingSystem(t)
	col := newCollectorAll(2)
	region := startRegion(t, sys, regionSpec{settings: ShardingConsumerSettings{Consumer: quietConsumer}, passivate: -1}, col)
	sp := spawnSP(t, sys, "sp", region, ShardingSettings{CleanupUnusedAfter: time.Minute, ResendFirstUnconfirmedIdleTimeout: time.Hour})
	producer := shardingProbe(t, sys, sp)
	producer.Expect(t).SendNextTo.Tell(ShardingEnvelope[job]{EntityID: "a", Message: job{N: 1}})
	r := producer.Expect(t)
	eventually(t, "job 1 confirmed", func() bool {
		s := shardingStats(t, sp)
		return col.distinct() == 1 && s.Unconfirmed == 0 && s.Entities == 1
	})
	clock.Advance(30 * time.Second)
	if s := shardingStats(t, sp); s.Entities != 1 {
		t.Fatalf("cleaned up after half the time: %+v", s)
	}
	clock.Advance(30 * time.Second)
	eventually(t, "the entity's producer controller cleaned up", func() bool { return shardingStats(t, sp).Entities == 0 })
	r.SendNextTo.Tell(ShardingEnvelope[job]{EntityID: "a", Message: job{N: 2}})
	waitAll(t, col)
	if got := byEntity(col.deliveries())["sp-a"]; fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("entity a got %v, want [1 2]", got)
	}
}

// perEntityAtLeastOnce returns an error unless every job 1..n was
// delivered, and each entity's jobs came in increasing order except where
// a producer restart sent some again: at most restarts steps back (or
// repeats) per entity.
func perEntityAtLeastOnce(ds []Delivery[job], n, restarts int) error {
	seen := make(map[int]bool)
	for _, d := range ds {
		seen[d.Message.N] = true
	}
	for j := 1; j <= n; j++ {
		if !seen[j] {
			return fmt.Errorf("job %d lost", j)
		}
	}
	for id, jobs := range byEntity(ds) {
		back := 0
		for i := 1; i < len(jobs); i++ {
			if jobs[i] <= jobs[i-1] {
				back++
			}
		}
		if back > restarts {
			return fmt.Errorf("entity %s: its jobs go back %d times, want at most %d: %v", id, back, restarts, jobs)
		}
	}
	return nil
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
	sys, _ := newSystem(t)
	col := newCollectorAll(n)
	gate := &holdGate{above: held}
	slow := consumerSpec{delay: func() time.Duration { return 200 * time.Microsecond }, hold: gate.holds}
	rs := regionSpec{settings: ShardingConsumerSettings{Consumer: ConsumerSettings{ResendIntervalMin: 50 * time.Millisecond, FlowControlWindow: 4}}, consumer: slow}
	region := startRegion(t, sys, rs, col)
	q := durable.NewMemory[job]()
	w := newWatcher(t, sys)
	sp1 := spawnSP(t, sys, "sp1", region, ShardingSettings{BufferSize: 100}, WithDurableQueue[job](q))
	w.watch(sp1)
	// The producer asks: a reply says the job is stored; its sequence
	// number is the job's.
	replies := make(chan SeqNr, n)
	prod1 := spawnProducer(t, sys, "producer1", nil, producerSpec{limit: stopAt, ask: true, replies: replies,
		connect: shardingConnect(sp1), entity: entityOf(entities)})
	accepted, s := stopMidStream(t, sys, w, prod1, sp1, replies, q, stopAt)
	for _, u := range s.Unconfirmed {
		if want := entityOf(entities)(u.Message); u.Qualifier != want {
			t.Fatalf("job %d stored with qualifier %q, want its entity %q", u.Message.N, u.Qualifier, want)
		}
	}
	gate.open()

	sp2 := spawnSP(t, sys, "sp2", region, ShardingSettings{}, WithDurableQueue[job](q))
	spawnProducer(t, sys, "producer2", nil, producerSpec{limit: n, first: accepted + 1, connect: shardingConnect(sp2), entity: entityOf(entities)})
	waitAll(t, col)
	// Two steps back at most: the unconfirmed jobs sent again, and any
	// jobs stored whose replies the stopped producer never saw, which the
	// new producer sends again as new ones.
	if err := perEntityAtLeastOnce(col.deliveries(), n, 2); err != nil {
		t.Fatal(err)
	}
	queueDrained(t, q, 0)
}

// TestShardingRequestNextDemand: RequestNext names the entities that have
// demand, and a message to an entity that has none (a new one) is
// buffered for it.
func TestShardingRequestNextDemand(t *testing.T) {
	sys, _ := newSystem(t)
	col := newCollectorAll(2)
	region := startRegion(t, sys, regionSpec{}, col)
	sp := spawnSP(t, sys, "sp", region, ShardingSettings{})
	producer := shardingProbe(t, sys, sp)
	producer.Expect(t).SendNextTo.Tell(ShardingEnvelope[job]{EntityID: "a", Message: job{N: 1}})
	r := producer.Expect(t)
	eventually(t, "entity a has demand", func() bool { return shardingStats(t, sp).EntitiesWithDemand == 1 })
	r.SendNextTo.Tell(ShardingEnvelope[job]{EntityID: "b", Message: job{N: 2}})
	r = producer.Expect(t)
	if fmt.Sprint(r.EntitiesWithDemand) != "[a]" || fmt.Sprint(r.BufferedForEntitiesWithoutDemand) != "map[b:1]" {
		t.Fatalf("RequestNext: demand %v, buffered %v; want [a] and map[b:1]", r.EntitiesWithDemand, r.BufferedForEntitiesWithoutDemand)
	}
	waitAll(t, col)
}
