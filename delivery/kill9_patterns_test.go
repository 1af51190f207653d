package delivery

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/delivery/redisqueue"
	"github.com/trellis-go/trellis/internal/testenv"
	"github.com/trellis-go/trellis/runtime"
)

// The kill -9 test of work pulling and sharding: as for point to point
// (kill9_test.go), with the work-pulling or sharding producer controller's
// durable queue in Redis. The producer asks for every job and records in
// Redis the last one stored (the ask's reply); a restarted producer goes on
// after it. Every consumer appends the jobs it is delivered to a list, and
// adds them to a set, before it confirms them; the child is done when the
// set holds every job.

// kill9Entities is how many entities the sharding child sends to.
const kill9Entities = 100

// TestKill9DurableRedisWorkPulling: three workers; every job arrives, none
// twice before the kill.
func TestKill9DurableRedisWorkPulling(t *testing.T) {
	const jobs = 2000
	r := runKill9(t, "workpulling", jobs)
	seen := make(map[int]int)
	for i, j := range r.got {
		if seen[j]++; seen[j] > 1 && i < r.atKill {
			t.Fatalf("job %d delivered twice before the kill", j)
		}
	}
	for j := 1; j <= jobs; j++ {
		if seen[j] == 0 {
			t.Fatalf("job %d lost", j)
		}
	}
	t.Logf("%d deliveries of %d jobs", len(r.got), jobs)
}

// TestKill9DurableRedisSharding: 100 entities; every job arrives, each
// entity's in order before the kill, and after it at most two steps back
// (its unconfirmed jobs again, then the jobs stored whose replies the
// killed producer never saw).
func TestKill9DurableRedisSharding(t *testing.T) {
	const jobs = 3000
	r := runKill9(t, "sharding", jobs)
	ds := make([]Delivery[job], len(r.got))
	for i, j := range r.got {
		ds[i] = Delivery[job]{Message: job{N: j}, ProducerID: fmt.Sprint("e", j%kill9Entities)}
	}
	if err := perEntityOrder(ds[:r.atKill]); err != nil {
		t.Fatalf("before the kill: %v", err)
	}
	if err := perEntityAtLeastOnce(ds, jobs, 2); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d deliveries of %d jobs", len(r.got), jobs)
}

// kill9PatternChild is the child process of the work-pulling and sharding
// tests. Its exit code says what went wrong, if anything.
func kill9PatternChild(mode string) int {
	fail := func(code int, args ...any) int {
		fmt.Fprintln(os.Stderr, append([]any{"kill9 child:"}, args...)...)
		return code
	}
	prefix := os.Getenv(kill9PrefixEnv)
	jobs, err := strconv.Atoi(os.Getenv(kill9JobsEnv))
	if err != nil || prefix == "" {
		return fail(2, "bad environment")
	}
	opts, err := redis.ParseURL(os.Getenv(testenv.RedisURLEnv))
	if err != nil {
		return fail(2, err)
	}
	client := redis.NewClient(opts)
	defer client.Close()
	queue, err := redisqueue.New[job](client, prefix, nil)
	if err != nil {
		return fail(2, err)
	}
	ctx := context.Background()
	list, seenKey, acceptedKey := prefix+":delivered", prefix+":seen", prefix+":accepted"
	first := 1
	if v, err := client.Get(ctx, acceptedKey).Int(); err == nil {
		first = v + 1
	}
	sys := runtime.NewSystem("kill9", runtime.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		_ = sys.Shutdown(sctx)
	}()

	failed := make(chan error, 1)
	// consumer records each job, then confirms it: a kill in between makes
	// it unconfirmed, and it comes again.
	consumer := func(start func(ConsumerStart[job])) runtime.Behavior[Delivery[job]] {
		return runtime.Funcs[Delivery[job]]{
			Signal: func(ctx *runtime.Context[Delivery[job]], s runtime.Signal) {
				if _, ok := s.(runtime.Started); ok {
					start(ConsumerStart[job]{DeliverTo: ctx.Self()})
				}
			},
			Message: func(_ *runtime.Context[Delivery[job]], d Delivery[job]) {
				rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, err := client.TxPipelined(rctx, func(p redis.Pipeliner) error {
					p.RPush(rctx, list, d.Message.N)
					p.SAdd(rctx, seenKey, d.Message.N)
					return nil
				})
				if err != nil {
					select {
					case failed <- err:
					default:
					}
					return
				}
				d.Confirm()
			},
		}
	}
	// The producer's last stored job goes to Redis behind its back: a kill
	// before it is written makes the restarted producer send a job again,
	// never skip one.
	accepted := make(chan int, 4096)
	go func() {
		for j := range accepted {
			_ = client.Set(ctx, acceptedKey, j, 0).Err()
		}
	}()
	tb := &seedT{}
	spec := producerSpec{limit: jobs, first: first, ask: true, accepted: accepted}
	switch mode {
	case "workpulling":
		key := runtime.NewServiceKey[ConsumerCommand[job]]("kill9-workers")
		for i := range 3 {
			cc, err := SpawnConsumerController[job](sys, fmt.Sprint("cc", i), ConsumerSettings{FlowControlWindow: 20})
			if err != nil {
				return fail(2, err)
			}
			if _, err := runtime.Spawn(sys, fmt.Sprint("consumer", i), func() runtime.Behavior[Delivery[job]] {
				return consumer(func(s ConsumerStart[job]) { cc.Tell(s) })
			}); err != nil {
				return fail(2, err)
			}
			runtime.Register(sys, key, cc)
		}
		wp, err := SpawnWorkPullingProducerController[job](sys, "wp", "kill9-wp", key, WorkPullingSettings{}, WithDurableQueue[job](queue))
		if err != nil {
			return fail(2, err)
		}
		spec.connect = workPullingConnect(wp)
	case "sharding":
		create, err := NewShardingConsumerController(func(_ string, start runtime.Ref[ConsumerStart[job]]) runtime.Behavior[Delivery[job]] {
			return consumer(func(s ConsumerStart[job]) { start.Tell(s) })
		}, ShardingConsumerSettings{Consumer: ConsumerSettings{FlowControlWindow: 20}})
		if err != nil {
			return fail(2, err)
		}
		region, err := runtime.InitSharding(sys, runtime.Entity[ConsumerCommand[job]]{Key: entityKey, Create: create})
		if err != nil {
			return fail(2, err)
		}
		sp, err := SpawnShardingProducerController[job](sys, "sp", "kill9-sp", region, ShardingSettings{}, WithDurableQueue[job](queue))
		if err != nil {
			return fail(2, err)
		}
		spec.connect, spec.entity = shardingConnect(sp), entityOf(kill9Entities)
	default:
		return fail(2, "unknown mode", mode)
	}
	spawnProducer(tb, sys, "producer", nil, spec)

	deadline := time.After(time.Minute)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-failed:
			return fail(3, err)
		case <-deadline:
			return fail(4, "not every job delivered within a minute")
		case <-tick.C:
		}
		if tb.failed() {
			return fail(5, tb.errors())
		}
		if n, err := client.SCard(ctx, seenKey).Result(); err == nil && n == int64(jobs) {
			return 0
		}
	}
}
