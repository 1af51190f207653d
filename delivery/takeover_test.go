package delivery_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/redisqueue"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

// takeoverLease is the queue's owner lease in the takeover tests: how long
// the standby waits after the owner dies. It is renewed every third of it,
// so a renewal must be late by two thirds to depose a living owner: long
// enough for a race-detector build on a loaded machine.
const takeoverLease = time.Second

// TestTakeoverAfterKill: two instances (two actor systems, each with a
// Redis client of its own, as two processes have) run the same durable
// producer, with a local consumer each, on one Redis queue. The first to
// load owns the queue; the other stands by. The owner is killed mid-stream
// (its Redis connection cut at a random point, so that it neither stores
// nor releases anything more: no goodbye), and the standby takes the queue
// over when the lease lapses and delivers, to its own consumer, what was
// unconfirmed, then the rest of the stream. Every job arrives; each
// instance's consumer gets its jobs in order; a job comes twice only above
// the confirmation stored when the owner died, the bound the package
// documentation gives for a replaced producer controller; the duplicates
// are counted.
func TestTakeoverAfterKill(t *testing.T) {
	testenv.Long(t)
	url := testenv.RedisURL(t)
	var dups, allowed atomic.Int64
	c := deliverytest.LossCase{Name: "owner killed", Messages: 400, Delays: true}
	deliverytest.RunLossCase(t, c, func(c deliverytest.LossCase, seed uint64) error {
		return runTakeoverSeed(c, seed, url, &dups, &allowed)
	})
	t.Logf("duplicates %d, allowed %d, over %d seeds of %d jobs", dups.Load(), allowed.Load(), *deliverytest.FlagSeeds, c.Messages)
}

// instance is one side of a takeover run: its Redis client, queue, system
// and what its consumer got.
type instance struct {
	client *redis.Client
	queue  *redisqueue.Queue[deliverytest.Job]
	sys    *runtime.System
	col    *deliverytest.Collector
	pc     runtime.Ref[delivery.ProducerCommand[deliverytest.Job]]
}

func startInstance(r *deliverytest.LossRun, sys *runtime.System, url, prefix, id string, lease time.Duration) (*instance, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	in := &instance{client: redis.NewClient(opts), sys: sys, col: deliverytest.NewCollector(r.C.Messages)}
	if in.queue, err = redisqueue.New[deliverytest.Job](in.client, prefix, nil, redisqueue.WithLease(lease)); err != nil {
		return nil, err
	}
	if in.pc, err = delivery.SpawnProducerController[deliverytest.Job](sys, "pc", id, r.Producer, delivery.WithDurableQueue[deliverytest.Job](in.queue)); err != nil {
		return nil, err
	}
	cc, err := delivery.SpawnConsumerController[deliverytest.Job](sys, "cc", r.Consumer)
	if err != nil {
		return nil, err
	}
	spec := r.ConsumerSpec()
	spec.Started = true
	deliverytest.SpawnConsumer(r.TB, sys, "consumer", cc, spec, in.col)
	deliverytest.SpawnProducer(r.TB, sys, "producer", in.pc, deliverytest.ProducerSpec{BySeqNr: true, Limit: r.C.Messages})
	cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: in.pc})
	return in, nil
}

func runTakeoverSeed(c deliverytest.LossCase, seed uint64, url string, dupsTotal, allowedTotal *atomic.Int64) (err error) {
	r := deliverytest.NewLossRun(c, seed)
	defer r.Close(&err)
	r.OnRealStore()
	sysB := runtime.NewSystem(fmt.Sprintf("takeover-b-%d", seed), runtime.WithLogger(slog.New(slog.NewTextHandler(r.Logs, nil))))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), deliverytest.WaitLimit)
		defer cancel()
		_ = sysB.Shutdown(ctx)
	}()
	prefix := fmt.Sprintf("trellis-test-takeover:%d:%d", time.Now().UnixNano(), seed)
	a, err := startInstance(r, r.Sys, url, prefix, "notices", takeoverLease)
	if err != nil {
		return err
	}
	defer func() { _ = a.client.Close() }() // closed again after the kill: harmless
	// A owns the queue before B starts: B stands by from its first load.
	deadline := time.Now().Add(time.Minute)
	for a.col.Count() == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the owner delivered nothing\n\tlog tail:\n%s", r.Logs.Tail(30))
		}
		time.Sleep(time.Millisecond) // a poll, bounded by the deadline
	}
	b, err := startInstance(r, sysB, url, prefix, "notices", takeoverLease)
	if err != nil {
		return err
	}
	defer func() {
		_ = b.queue.Delete(context.Background())
		_ = b.client.Close()
	}()
	killAt := c.Messages/5 + r.RNG.IntN(c.Messages/2)
	for a.col.Count() < killAt {
		if time.Now().After(deadline) {
			return fmt.Errorf("the owner delivered %d of %d before the kill (the standby %d: more than 0 means the owner's lease lapsed)\n\tlog tail:\n%s",
				a.col.Count(), killAt, b.col.Count(), r.Logs.Tail(30))
		}
		time.Sleep(time.Millisecond) // a poll, bounded by the deadline
	}
	if b.col.Count() > 0 {
		return fmt.Errorf("the standby delivered %d jobs while the owner lived", b.col.Count())
	}
	// The kill: A stores, renews and releases nothing more, and its actors
	// stop (the few deliveries meanwhile count as the owner's).
	_ = a.client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), deliverytest.WaitLimit)
	defer cancel()
	if err := a.sys.Shutdown(ctx); err != nil {
		return err
	}
	if err := r.Wait(b.col, func() string { return "" }); err != nil {
		return err
	}
	gotA, gotB := a.col.Jobs(), b.col.Jobs()
	// The standby starts at the head of what the queue held unconfirmed
	// when it took over: what the owner had stored as confirmed.
	confirmed := gotB[0] - 1
	if err := atLeastOnce(append(gotA, gotB...), c.Messages, confirmed); err != nil {
		return fmt.Errorf("owner got %d, standby %d, confirmed at the kill %d: %w", len(gotA), len(gotB), confirmed, err)
	}
	seen := map[int]int{}
	for _, j := range append(gotA, gotB...) {
		seen[j]++
	}
	dups := 0
	for _, k := range seen {
		dups += k - 1
	}
	dupsTotal.Add(int64(dups))
	allowedTotal.Add(int64(max(len(gotA)-confirmed, 0)))
	if dups > len(gotA)-confirmed {
		return fmt.Errorf("%d duplicates, but the owner delivered only %d jobs above the stored confirmation %d", dups, len(gotA)-confirmed, confirmed)
	}
	return nil
}

// pausedRenewals is a Redis queue whose renewals are lost, as those of a
// process that froze (a long GC pause, a stopped VM) are, until it wakes.
type pausedRenewals struct {
	*redisqueue.Queue[deliverytest.Job]
}

func (pausedRenewals) Renew(context.Context) error { return nil }

// TestDeposedControllerStops: an owner whose lease lapsed while it was
// frozen is deposed by the standby, which takes the queue over; the
// deposed owner's next store is refused (fenced in the store's own script)
// and it stops with an error that says so, instead of writing under its
// successor.
func TestDeposedControllerStops(t *testing.T) {
	client := testenv.Redis(t)
	sys, logs := deliverytest.NewSystem(t)
	prefix := "trellis-test-deposed:" + t.Name() + fmt.Sprint(time.Now().UnixNano())
	open := func() *redisqueue.Queue[deliverytest.Job] {
		q, err := redisqueue.New[deliverytest.Job](client, prefix, nil, redisqueue.WithLease(takeoverLease))
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	qa, qb := open(), open()
	t.Cleanup(func() { _ = qb.Delete(context.Background()) })
	spawn := func(name string, q durable.Queue[deliverytest.Job], col *deliverytest.Collector, delay time.Duration) runtime.Ref[delivery.ProducerCommand[deliverytest.Job]] {
		pc, err := delivery.SpawnProducerController[deliverytest.Job](sys, name+"-pc", "notices", delivery.ProducerSettings{}, delivery.WithDurableQueue(q))
		if err != nil {
			t.Fatal(err)
		}
		cc, err := delivery.SpawnConsumerController[deliverytest.Job](sys, name+"-cc", delivery.ConsumerSettings{})
		if err != nil {
			t.Fatal(err)
		}
		deliverytest.SpawnConsumer(t, sys, name+"-consumer", cc, deliverytest.ConsumerSpec{Started: true}, col)
		deliverytest.SpawnProducer(t, sys, name+"-producer", pc, deliverytest.ProducerSpec{BySeqNr: true, Delay: func() time.Duration { return delay }})
		cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: pc})
		return pc
	}
	colA, colB := deliverytest.NewCollector(0), deliverytest.NewCollector(0)
	w := deliverytest.NewWatcher(t, sys)
	pcA := spawn("a", pausedRenewals{qa}, colA, 5*time.Millisecond) // a slow producer: it keeps storing
	w.Watch(pcA)
	deliverytest.Eventually(t, "the owner delivers", func() bool { return colA.Count() > 0 })
	spawn("b", qb, colB, 0)
	deliverytest.Eventually(t, "the standby takes over and delivers", func() bool { return colB.Count() > 0 })
	w.ExpectStopped(t, pcA.Path())
	if err := logs.LoggedError(durable.ErrFenced); err == nil {
		t.Fatal("the deposed controller stopped without logging ErrFenced")
	} else {
		t.Logf("the deposed controller: %v", err)
	}
	if colB.Jobs()[0] > colA.Jobs()[len(colA.Jobs())-1]+1 {
		t.Fatalf("the standby started at job %d, after the owner's last %d: jobs lost", colB.Jobs()[0], colA.Jobs()[len(colA.Jobs())-1])
	}
}

// TestGracefulHandover: the owner of a queue is drained and stops
// gracefully mid-stream; it releases its lease, so the standby takes over
// at once (well within the lease of redisqueue.DefaultLease) and sends the
// rest: every job once, none twice.
func TestGracefulHandover(t *testing.T) {
	const jobs = 300
	url := testenv.RedisURL(t)
	r := deliverytest.NewLossRun(deliverytest.LossCase{Name: "handover", Messages: jobs, Delays: true}, 1)
	var err error
	defer func() {
		r.Close(&err)
		if err != nil {
			t.Error(err)
		}
	}()
	sysB, _ := deliverytest.NewSystem(t)
	prefix := fmt.Sprintf("trellis-test-handover:%d", time.Now().UnixNano())
	a, err := startInstance(r, r.Sys, url, prefix, "notices", redisqueue.DefaultLease)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.client.Close() })
	deliverytest.Eventually(t, "the owner delivers", func() bool { return a.col.Count() > 0 })
	b, err := startInstance(r, sysB, url, prefix, "notices", redisqueue.DefaultLease)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = b.queue.Delete(context.Background())
		_ = b.client.Close()
	})
	deliverytest.Eventually(t, "the owner delivers a third", func() bool { return a.col.Count() >= jobs/3 })
	ctx, cancel := context.WithTimeout(t.Context(), deliverytest.WaitLimit)
	defer cancel()
	if err := delivery.Drain(ctx, a.sys); err != nil {
		t.Fatal(err)
	}
	if err := a.sys.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	wait, cancelWait := context.WithTimeout(ctx, redisqueue.DefaultLease/2)
	defer cancelWait()
	if err := b.col.Wait(wait); err != nil {
		t.Fatalf("the standby did not finish within half a lease: %v", err)
	}
	gotA, gotB := a.col.Jobs(), b.col.Jobs()
	if err := atLeastOnce(append(gotA, gotB...), jobs, jobs); err != nil {
		t.Fatalf("owner got %d, standby %d: %v", len(gotA), len(gotB), err)
	}
	if len(gotA)+len(gotB) != jobs {
		t.Fatalf("%d deliveries of %d jobs: %d twice", len(gotA)+len(gotB), jobs, len(gotA)+len(gotB)-jobs)
	}
	t.Logf("handed over after %d jobs; the standby finished %d more in %v", len(gotA), len(gotB), time.Since(start))
}
