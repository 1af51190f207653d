package deliverytest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/redisqueue"
	"github.com/trellis-go/trellis/delivery/sharding"
	"github.com/trellis-go/trellis/delivery/workpulling"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

// The kill -9 test runs producer, controllers and consumer in a child
// process (the test binary, re-executed with Kill9RoleEnv set: see Main), with the
// producer controller's durable queue in Redis. The consumer appends every
// job it is delivered to a Redis list before it confirms it. The test kills
// the child with SIGKILL mid-stream, starts it again with the same producer
// id, and checks the list: every job is there, and only jobs above the
// confirmation stored at the kill come twice.
const (
	Kill9RoleEnv   = "TRELLIS_DELIVERY_KILL9_ROLE" // "child"
	kill9PrefixEnv = "TRELLIS_DELIVERY_KILL9_PREFIX"
	kill9JobsEnv   = "TRELLIS_DELIVERY_KILL9_JOBS"
	kill9ModeEnv   = "TRELLIS_DELIVERY_KILL9_MODE" // "", "workpulling" or "sharding"
)

// kill9Lease is the queue's owner lease in the kill -9 tests: the
// restarted child takes the queue over once the killed one's lapses.
const kill9Lease = time.Second

// Kill9Result is what RunKill9 saw: the durable state just after the kill,
// how many jobs had been delivered then, and every delivery of both runs.
type Kill9Result struct {
	State  durable.State[Job]
	AtKill int
	Got    []int
}

// RunKill9 runs the child process in mode (kill9ModeEnv; "" is point to
// point) once until a third of the jobs are delivered, kills it with
// SIGKILL, runs it again until it has delivered every job, and returns
// what the consumers recorded.
func RunKill9(t *testing.T, mode string, jobs int) Kill9Result {
	client := testenv.Redis(t)
	ctx := context.Background()
	prefix := "trellis-test:kill9:" + uuid.NewString()
	queue, err := redisqueue.New[Job](client, prefix, nil, redisqueue.WithLease(kill9Lease))
	if err != nil {
		t.Fatal(err)
	}
	list := prefix + ":delivered"
	t.Cleanup(func() {
		_ = queue.Delete(ctx)
		_ = client.Del(ctx, list, prefix+":seen", prefix+":accepted").Err()
	})

	start := func() (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		// The child reaches the test's Redis by its URL, which may be a
		// server this test binary started for itself (not in the
		// environment it inherits).
		cmd.Env = append(os.Environ(), Kill9RoleEnv+"=child", kill9PrefixEnv+"="+prefix, kill9JobsEnv+"="+strconv.Itoa(jobs),
			kill9ModeEnv+"="+mode, testenv.RedisURLEnv+"="+testenv.RedisURL(t))
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatalf("start the producer process: %v", err)
		}
		return cmd, out
	}

	// First run: kill it once a third of the jobs are delivered.
	cmd, out := start()
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := client.LLen(ctx, list).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n >= int64(jobs/3) {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("only %d jobs delivered within a minute; child output:\n%s", n, out)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	var r Kill9Result
	r.AtKill = int(client.LLen(ctx, list).Val())
	if r.AtKill >= jobs {
		t.Fatalf("the child delivered all %d jobs before it was killed: nothing tested", r.AtKill)
	}
	// The killed child's lease lapses, then the test reads the queue as
	// the child left it and gives the lease back for the second run.
	testenv.Eventually(t, 10*kill9Lease, "the killed child's lease lapses", func() bool {
		r.State, err = queue.LoadState(ctx)
		return err == nil
	})
	if err := queue.Release(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed after %d deliveries; stored: current %d, confirmed %d, %d unconfirmed",
		r.AtKill, r.State.CurrentSeqNr, r.State.HighestConfirmedSeqNr, len(r.State.Unconfirmed))

	// Second run: the same producer id goes on and finishes.
	cmd, out = start()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("second run: %v; output:\n%s", err, out)
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("second run did not finish within a minute; output:\n%s", out)
	}

	raw, err := client.LRange(ctx, list, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	r.Got = make([]int, len(raw))
	for i, s := range raw {
		if r.Got[i], err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// Kill9Child is the child process: it delivers jobs until the last one,
// then exits 0. Its exit code says what went wrong otherwise.
func Kill9Child() int {
	switch os.Getenv(kill9ModeEnv) {
	case "workpulling", "sharding":
		return kill9PatternChild(os.Getenv(kill9ModeEnv))
	}
	prefix := os.Getenv(kill9PrefixEnv)
	jobs, err := strconv.Atoi(os.Getenv(kill9JobsEnv))
	if err != nil || prefix == "" {
		fmt.Fprintln(os.Stderr, "kill9 child: bad environment")
		return 2
	}
	opts, err := redis.ParseURL(os.Getenv(testenv.RedisURLEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kill9 child:", err)
		return 2
	}
	client := redis.NewClient(opts)
	defer client.Close()
	queue, err := redisqueue.New[Job](client, prefix, nil, redisqueue.WithLease(kill9Lease))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kill9 child:", err)
		return 2
	}
	sys := runtime.NewSystem("kill9", runtime.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
		defer cancel()
		_ = sys.Shutdown(ctx)
	}()
	tb := &seedT{}
	pc, err := delivery.SpawnProducerController[Job](sys, "pc", "kill9-producer", delivery.ProducerSettings{}, delivery.WithDurableQueue[Job](queue))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kill9 child:", err)
		return 2
	}
	cc, err := delivery.SpawnConsumerController[Job](sys, "cc", delivery.ConsumerSettings{FlowControlWindow: 20})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kill9 child:", err)
		return 2
	}
	finished := make(chan error, 1)
	list := prefix + ":delivered"
	_, err = runtime.Spawn(sys, "consumer", func() runtime.Behavior[delivery.Delivery[Job]] {
		return runtime.Funcs[delivery.Delivery[Job]]{
			Signal: func(ctx *runtime.Context[delivery.Delivery[Job]], s runtime.Signal) {
				if _, ok := s.(runtime.Started); ok {
					cc.Tell(delivery.ConsumerStart[Job]{DeliverTo: ctx.Self()})
				}
			},
			Message: func(_ *runtime.Context[delivery.Delivery[Job]], d delivery.Delivery[Job]) {
				// Recorded before it is confirmed: a kill in between makes it
				// unconfirmed, and it comes again.
				rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := client.RPush(rctx, list, d.Message.N).Err(); err != nil {
					finished <- err
					return
				}
				d.Confirm()
				if d.Message.N == jobs {
					finished <- nil
				}
			},
		}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kill9 child:", err)
		return 2
	}
	SpawnProducer(tb, sys, "producer", pc, ProducerSpec{Limit: jobs, BySeqNr: true})
	cc.Tell(delivery.RegisterToProducerController[Job]{ProducerController: pc})
	select {
	case err := <-finished:
		if err != nil {
			fmt.Fprintln(os.Stderr, "kill9 child:", err)
			return 3
		}
	case <-time.After(time.Minute):
		fmt.Fprintln(os.Stderr, "kill9 child: the last job did not come within a minute")
		return 4
	}
	if tb.Failed() {
		fmt.Fprintln(os.Stderr, "kill9 child:", tb.Errors())
		return 5
	}
	return 0
}

// Kill9Entities is how many entities the sharding child sends to.
const Kill9Entities = 100

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
	queue, err := redisqueue.New[Job](client, prefix, nil, redisqueue.WithLease(kill9Lease))
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
		sctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
		defer cancel()
		_ = sys.Shutdown(sctx)
	}()

	failed := make(chan error, 1)
	// consumer records each job, then confirms it: a kill in between makes
	// it unconfirmed, and it comes again.
	consumer := func(start func(delivery.ConsumerStart[Job])) runtime.Behavior[delivery.Delivery[Job]] {
		return runtime.Funcs[delivery.Delivery[Job]]{
			Signal: func(ctx *runtime.Context[delivery.Delivery[Job]], s runtime.Signal) {
				if _, ok := s.(runtime.Started); ok {
					start(delivery.ConsumerStart[Job]{DeliverTo: ctx.Self()})
				}
			},
			Message: func(_ *runtime.Context[delivery.Delivery[Job]], d delivery.Delivery[Job]) {
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
	spec := ProducerSpec{Limit: jobs, First: first, Ask: true, accepted: accepted}
	switch mode {
	case "workpulling":
		key := runtime.NewServiceKey[delivery.ConsumerCommand[Job]]("kill9-workers")
		for i := range 3 {
			cc, err := delivery.SpawnConsumerController[Job](sys, fmt.Sprint("cc", i), delivery.ConsumerSettings{FlowControlWindow: 20})
			if err != nil {
				return fail(2, err)
			}
			if _, err := runtime.Spawn(sys, fmt.Sprint("consumer", i), func() runtime.Behavior[delivery.Delivery[Job]] {
				return consumer(func(s delivery.ConsumerStart[Job]) { cc.Tell(s) })
			}); err != nil {
				return fail(2, err)
			}
			runtime.Register(sys, key, cc)
		}
		wp, err := workpulling.SpawnProducerController[Job](sys, "wp", "kill9-wp", key, workpulling.Settings{}, delivery.WithDurableQueue[Job](queue))
		if err != nil {
			return fail(2, err)
		}
		spec.Connect = WorkPullingConnect(wp)
	case "sharding":
		create, err := sharding.NewConsumerController(func(_ string, start runtime.Ref[delivery.ConsumerStart[Job]]) runtime.Behavior[delivery.Delivery[Job]] {
			return consumer(func(s delivery.ConsumerStart[Job]) { start.Tell(s) })
		}, sharding.ConsumerSettings{Consumer: delivery.ConsumerSettings{FlowControlWindow: 20}})
		if err != nil {
			return fail(2, err)
		}
		region, err := runtime.InitSharding(sys, runtime.Entity[delivery.ConsumerCommand[Job]]{Key: EntityKey, Create: create})
		if err != nil {
			return fail(2, err)
		}
		sp, err := sharding.SpawnProducerController[Job](sys, "sp", "kill9-sp", region, sharding.Settings{}, delivery.WithDurableQueue[Job](queue))
		if err != nil {
			return fail(2, err)
		}
		spec.Connect, spec.Entity = ShardingConnect(sp), EntityOf(Kill9Entities)
	default:
		return fail(2, "unknown mode", mode)
	}
	SpawnProducer(tb, sys, "producer", nil, spec)

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
		if tb.Failed() {
			return fail(5, tb.Errors())
		}
		if n, err := client.SCard(ctx, seenKey).Result(); err == nil && n == int64(jobs) {
			return 0
		}
	}
}
