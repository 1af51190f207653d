package delivery_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/redisqueue"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/testkit/remotetest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

// TestRemoteProducerInstanceKilled: the producer's instance dies
// mid-stream (as kill -9 looks to the others: its connections reset, its
// transport and, with a durable queue, its Redis connection gone, no
// goodbye) while its producer controller streams to a consumer controller
// on another instance; a producer controller of the same producer id on a
// third instance goes on, and the consumer controller registers with it.
// Each case holds the stream to the bound docs/delivery.md and the package
// documentation give (What each fault costs, Across instances):
//
//   - plain (no durable queue): what the dead controller held
//     unconfirmed is lost. The consumer got a prefix of the dead producer's
//     stream (jobs 1..k, in order, each once), then the whole stream of the
//     new producer controller, whose incarnation starts over at its first
//     message: nothing twice, nothing of the dead one's after it.
//   - durable (the queue in Redis): the standby takes the queue over once
//     the dead owner's lease lapses and sends what was stored unconfirmed,
//     then the rest. Every job arrives, in order but for one restart, and a
//     job comes twice only above the confirmation stored at the kill.
func TestRemoteProducerInstanceKilled(t *testing.T) {
	testenv.Long(t)
	url := testenv.RedisURL(t)
	cases := []struct {
		name    string
		durable bool
	}{
		{name: "plain"},
		{name: "durable", durable: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, seed := range deliverytest.RemoteSeeds() {
				t.Run(fmt.Sprint(seed), func(t *testing.T) {
					run := producerKill{t: t, seed: seed, url: url}
					if c.durable {
						run.durable()
					} else {
						run.plain()
					}
				})
			}
		})
	}
}

// producerKill is one seed of TestRemoteProducerInstanceKilled.
type producerKill struct {
	t    *testing.T
	seed uint64
	url  string
}

const (
	producerKillJobs   = 400 // jobs of the killed producer's stream
	producerKillWindow = 20
)

// settings are both sides' settings: quick retries, so that a seed takes
// a fraction of a second.
func (producerKill) settings() (delivery.ProducerSettings, delivery.ConsumerSettings) {
	return delivery.ProducerSettings{ResendFirstInterval: 50 * time.Millisecond},
		delivery.ConsumerSettings{FlowControlWindow: producerKillWindow, ResendIntervalMin: 20 * time.Millisecond, ResendIntervalMax: 200 * time.Millisecond}
}

// consumer starts, on n, a consumer controller and its consumer, and
// returns the controller.
func (k producerKill) consumer(n *remotetest.Node, col *deliverytest.Collector) runtime.Ref[delivery.ConsumerCommand[deliverytest.Job]] {
	_, cs := k.settings()
	cc, err := delivery.SpawnConsumerController[deliverytest.Job](n.Sys, "cc", cs)
	if err != nil {
		k.t.Fatal(err)
	}
	deliverytest.SpawnConsumer(k.t, n.Sys, "consumer", cc, deliverytest.ConsumerSpec{}, col)
	return cc
}

// register tells cc, on instance consumerSide, to register with the
// producer controller pc of instance producerSide, over the transport.
func (k producerKill) register(cc runtime.Ref[delivery.ConsumerCommand[deliverytest.Job]], consumerSide, producerSide *remotetest.Node, pc runtime.Ref[delivery.ProducerCommand[deliverytest.Job]]) {
	at, err := runtime.Expose(producerSide.Sys, pc)
	if err != nil {
		k.t.Fatal(err)
	}
	cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{
		ProducerController: runtime.RemoteRef[delivery.ProducerCommand[deliverytest.Job]](consumerSide.Sys, at.Addr, at.Path)})
}

// killAt is after how many deliveries the producer's instance dies.
func (k producerKill) killAt() int {
	return 50 + rand.New(rand.NewPCG(k.seed, 5)).IntN(producerKillJobs/2)
}

// pace is the producers' pace: 0 or 1 ms before each job.
func (k producerKill) pace() func() time.Duration {
	rng := rand.New(rand.NewPCG(k.seed, 6))
	return func() time.Duration { return time.Duration(rng.IntN(2)) * time.Millisecond }
}

func (k producerKill) wait(col *deliverytest.Collector) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := col.Wait(ctx); err != nil {
		k.t.Fatalf("consumer: %v", err)
	}
}

func (k producerKill) plain() {
	t := k.t
	const rest = 100 // jobs of the new producer controller, numbered above the dead one's
	a, b, c := remotetest.NewNode(t, "producer-1", nil), remotetest.NewNode(t, "consumer", nil), remotetest.NewNode(t, "producer-2", nil)
	ps, _ := k.settings()
	col := deliverytest.NewCollector(producerKillJobs + rest)
	cc := k.consumer(b, col)
	pcA, err := delivery.SpawnProducerController[deliverytest.Job](a.Sys, "pc", "killed-plain", ps)
	if err != nil {
		t.Fatal(err)
	}
	deliverytest.SpawnProducer(t, a.Sys, "producer", pcA, deliverytest.ProducerSpec{Limit: producerKillJobs, Delay: k.pace()})
	k.register(cc, b, a, pcA)

	killAt := k.killAt()
	deliverytest.Eventually(t, fmt.Sprintf("%d jobs delivered", killAt), func() bool { return col.Count() >= killAt })
	a.Kill()
	atKill := col.Count()
	pcC, err := delivery.SpawnProducerController[deliverytest.Job](c.Sys, "pc", "killed-plain", ps)
	if err != nil {
		t.Fatal(err)
	}
	deliverytest.SpawnProducer(t, c.Sys, "producer", pcC, deliverytest.ProducerSpec{First: producerKillJobs + 1, Limit: producerKillJobs + rest})
	k.register(cc, b, c, pcC)
	k.wait(col)

	got := col.Jobs()
	split := slices.Index(got, producerKillJobs+1)
	if split < atKill {
		t.Fatalf("the new producer's first job at delivery %d, before the %d of the dead one's delivered at the kill", split, atKill)
	}
	for i, j := range got[:split] {
		if j != i+1 {
			t.Fatalf("delivery %d of the dead producer's is job %d, not %d: not a prefix of its stream", i+1, j, i+1)
		}
	}
	for i, j := range got[split:] {
		if j != producerKillJobs+1+i {
			t.Fatalf("delivery %d of the new producer's is job %d, not %d", i+1, j, producerKillJobs+1+i)
		}
	}
	if len(got)-split != rest {
		t.Fatalf("%d deliveries of the new producer's %d jobs", len(got)-split, rest)
	}
	t.Logf("seed %d: killed at %d deliveries; %d of the dead producer's delivered (%d lost), then the new one's %d",
		k.seed, atKill, split, producerKillJobs-split, rest)
}

// durableSide is a producer's instance with its own Redis client, as a
// process has, and its producer controller on the shared queue.
type durableSide struct {
	node   *remotetest.Node
	client *redis.Client
	pc     runtime.Ref[delivery.ProducerCommand[deliverytest.Job]]
}

func (k producerKill) durableSide(name, prefix string) durableSide {
	t := k.t
	opts, err := redis.ParseURL(k.url)
	if err != nil {
		t.Fatal(err)
	}
	s := durableSide{node: remotetest.NewNode(t, name, nil), client: redis.NewClient(opts)}
	t.Cleanup(func() { _ = s.client.Close() }) // closed again after the kill: harmless
	q, err := redisqueue.New[deliverytest.Job](s.client, prefix, nil, redisqueue.WithLease(takeoverLease))
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := k.settings()
	if s.pc, err = delivery.SpawnProducerController[deliverytest.Job](s.node.Sys, "pc", "killed-durable", ps, delivery.WithDurableQueue[deliverytest.Job](q)); err != nil {
		t.Fatal(err)
	}
	deliverytest.SpawnProducer(t, s.node.Sys, "producer", s.pc, deliverytest.ProducerSpec{BySeqNr: true, Limit: producerKillJobs, Delay: k.pace()})
	return s
}

func (k producerKill) durable() {
	t := k.t
	prefix := fmt.Sprintf("trellis-test-remote-producer-kill:%d:%d", time.Now().UnixNano(), k.seed)
	admin := testenv.Redis(t)
	t.Cleanup(func() {
		q, err := redisqueue.New[deliverytest.Job](admin, prefix, nil)
		if err == nil {
			_ = q.Delete(context.Background())
		}
	})
	b := remotetest.NewNode(t, "consumer", nil)
	col := deliverytest.NewCollector(producerKillJobs)
	cc := k.consumer(b, col)
	a := k.durableSide("producer-1", prefix)
	k.register(cc, b, a.node, a.pc)
	// A owns the queue before C starts: C stands by from its first load.
	deliverytest.Eventually(t, "the owner delivers", func() bool { return col.Count() > 0 })
	c := k.durableSide("producer-2", prefix)

	killAt := k.killAt()
	deliverytest.Eventually(t, fmt.Sprintf("%d jobs delivered", killAt), func() bool { return col.Count() >= killAt })
	a.node.Kill()
	_ = a.client.Close()
	atKill := col.Count()
	// The confirmation stored at the kill: a store of the dead owner's
	// still on its way can only raise it, which the standby's fence then
	// sees too, so a job at or below this one never comes twice.
	confirmed, err := admin.HGet(context.Background(), keyspace.Tag(prefix)+":meta", "highest").Int()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	k.register(cc, b, c.node, c.pc)
	k.wait(col)

	got := col.Jobs()
	if err := atLeastOnce(got, producerKillJobs, confirmed); err != nil {
		t.Fatalf("killed at %d deliveries, confirmed %d: %v", atKill, confirmed, err)
	}
	dups := len(got) - producerKillJobs
	t.Logf("seed %d: killed at %d deliveries, %d confirmed in the queue; %d jobs twice", k.seed, atKill, confirmed, dups)
}
