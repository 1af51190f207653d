package delivery

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

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/redisqueue"
	"github.com/trellis-go/trellis/internal/testenv"
	"github.com/trellis-go/trellis/runtime"
)

// The kill -9 test runs producer, controllers and consumer in a child
// process (this test binary, re-executed with kill9RoleEnv set), with the
// producer controller's durable queue in Redis. The consumer appends every
// job it is delivered to a Redis list before it confirms it. The test kills
// the child with SIGKILL mid-stream, starts it again with the same producer
// id, and checks the list: every job is there, and only jobs above the
// confirmation stored at the kill come twice.
const (
	kill9RoleEnv   = "TRELLIS_DELIVERY_KILL9_ROLE" // "child"
	kill9PrefixEnv = "TRELLIS_DELIVERY_KILL9_PREFIX"
	kill9JobsEnv   = "TRELLIS_DELIVERY_KILL9_JOBS"
	kill9ModeEnv   = "TRELLIS_DELIVERY_KILL9_MODE" // "", "workpulling" or "sharding"
)

func TestKill9DurableRedis(t *testing.T) {
	const jobs = 3000
	r := runKill9(t, "", jobs)
	checkAtLeastOnce(t, r.got, jobs, int(r.state.HighestConfirmedSeqNr))
}

// kill9Result is what runKill9 saw: the durable state just after the kill,
// how many jobs had been delivered then, and every delivery of both runs.
type kill9Result struct {
	state  durable.State[job]
	atKill int
	got    []int
}

// runKill9 runs the child process in mode (kill9ModeEnv; "" is point to
// point) once until a third of the jobs are delivered, kills it with
// SIGKILL, runs it again until it has delivered every job, and returns
// what the consumers recorded.
func runKill9(t *testing.T, mode string, jobs int) kill9Result {
	client := testenv.Redis(t)
	ctx := context.Background()
	prefix := "trellis-test:kill9:" + uuid.NewString()
	queue, err := redisqueue.New[job](client, prefix, nil)
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
		cmd.Env = append(os.Environ(), kill9RoleEnv+"=child", kill9PrefixEnv+"="+prefix, kill9JobsEnv+"="+strconv.Itoa(jobs),
			kill9ModeEnv+"="+mode)
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
	var r kill9Result
	r.atKill = int(client.LLen(ctx, list).Val())
	if r.atKill >= jobs {
		t.Fatalf("the child delivered all %d jobs before it was killed: nothing tested", r.atKill)
	}
	if r.state, err = queue.LoadState(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed after %d deliveries; stored: current %d, confirmed %d, %d unconfirmed",
		r.atKill, r.state.CurrentSeqNr, r.state.HighestConfirmedSeqNr, len(r.state.Unconfirmed))

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
	r.got = make([]int, len(raw))
	for i, s := range raw {
		if r.got[i], err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// kill9Child is the child process: it delivers jobs until the last one,
// then exits 0. Its exit code says what went wrong otherwise.
func kill9Child() int {
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
	queue, err := redisqueue.New[job](client, prefix, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kill9 child:", err)
		return 2
	}
	sys := runtime.NewSystem("kill9", runtime.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		_ = sys.Shutdown(ctx)
	}()
	tb := &seedT{}
	pc, err := SpawnProducerController[job](sys, "pc", "kill9-producer", ProducerSettings{}, WithDurableQueue[job](queue))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kill9 child:", err)
		return 2
	}
	cc, err := SpawnConsumerController[job](sys, "cc", ConsumerSettings{FlowControlWindow: 20})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kill9 child:", err)
		return 2
	}
	finished := make(chan error, 1)
	list := prefix + ":delivered"
	_, err = runtime.Spawn(sys, "consumer", func() runtime.Behavior[Delivery[job]] {
		return runtime.Funcs[Delivery[job]]{
			Signal: func(ctx *runtime.Context[Delivery[job]], s runtime.Signal) {
				if _, ok := s.(runtime.Started); ok {
					cc.Tell(ConsumerStart[job]{DeliverTo: ctx.Self()})
				}
			},
			Message: func(_ *runtime.Context[Delivery[job]], d Delivery[job]) {
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
	spawnProducer(tb, sys, "producer", pc, producerSpec{limit: jobs, bySeqNr: true})
	cc.Tell(RegisterToProducerController[job]{ProducerController: pc})
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
	if tb.failed() {
		fmt.Fprintln(os.Stderr, "kill9 child:", tb.errors())
		return 5
	}
	return 0
}
