package delivery

// Helpers of the work-pulling and sharding tests: both send jobs from one
// producer to many consumers (workers, entities), check the same things of
// what arrived, and stop a durable controller mid-stream the same way.

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/runtime"
)

// waitAll waits until every job of col has arrived.
func waitAll(t testing.TB, col *collector) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := col.wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// exactlyOnce fails unless every job 1..n was delivered exactly once.
func exactlyOnce(t testing.TB, col *collector, n int) {
	t.Helper()
	got := col.deliveries()
	if len(got) != n {
		t.Fatalf("%d deliveries of %d jobs, want each once", len(got), n)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	for j := 1; j <= n; j++ {
		if col.seen[j] != 1 {
			t.Fatalf("job %d delivered %d times", j, col.seen[j])
		}
	}
}

// padding is n bytes of padding.
func padding(n int) string { return strings.Repeat("x", n) }

// memoryQueue returns a durable queue in memory and, when use is set, the
// option that makes a controller use it (none otherwise).
func memoryQueue(use bool) (*durable.Memory[job], []ProducerOption[job]) {
	q := durable.NewMemory[job]()
	if !use {
		return q, nil
	}
	return q, []ProducerOption[job]{WithDurableQueue[job](q)}
}

// expectReplies takes n ask replies from replies: each must be a distinct
// sequence number in 1..n, the controller's numbering of n jobs.
func expectReplies(t testing.TB, replies <-chan SeqNr, n int) {
	t.Helper()
	seen := make(map[SeqNr]bool)
	for range n {
		s := recv(t, replies)
		if s < 1 || s > SeqNr(n) || seen[s] {
			t.Fatalf("ask reply %d: out of 1..%d or repeated", s, n)
		}
		seen[s] = true
	}
}

// queueDrained waits until q holds nothing unconfirmed and, if
// currentSeqNr is not zero, has stored exactly the messages before it.
func queueDrained(t testing.TB, q durable.Queue[job], currentSeqNr SeqNr) {
	t.Helper()
	eventually(t, "every confirmation stored", func() bool {
		s, err := q.LoadState(context.Background())
		return err == nil && len(s.Unconfirmed) == 0 && (currentSeqNr == 0 || s.CurrentSeqNr == currentSeqNr)
	})
}

// holdGate keeps the jobs numbered above a bound unconfirmed until it is
// opened (as consumerSpec.hold), so that a test can stop a durable
// controller with jobs certainly unconfirmed, however fast the processors.
type holdGate struct {
	above  int
	opened atomic.Bool
}

func (g *holdGate) holds(d Delivery[job]) bool { return !g.opened.Load() && d.Message.N > g.above }

func (g *holdGate) open() { g.opened.Store(true) }

// stopMidStream waits until the producer has had ask replies (in replies)
// for stored jobs, stops it and its durable controller, waits until the
// controller has stopped (w watches it), and returns the highest job
// replied to and the state left in q. It fails the test if nothing is left
// unconfirmed: then there is nothing to test.
func stopMidStream(t testing.TB, sys *runtime.System, w *watcher, producer, controller runtime.AnyRef,
	replies chan SeqNr, q durable.Queue[job], stored int) (accepted int, s durable.State[job]) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d jobs stored", stored), func() bool { return len(replies) >= stored })
	sys.Stop(producer)
	sys.Stop(controller)
	w.expectStopped(t, controller.Path())
	for len(replies) > 0 {
		accepted = max(accepted, int(<-replies))
	}
	s, err := q.LoadState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Unconfirmed) == 0 {
		t.Fatalf("nothing unconfirmed at the stop (%d jobs accepted): nothing tested", accepted)
	}
	t.Logf("stopped with %d jobs accepted, %d unconfirmed", accepted, len(s.Unconfirmed))
	return accepted, s
}

// expectFailed waits until the controller at path (watched by w) stops,
// and checks that the log says why: every one of wants.
func expectFailed(t testing.TB, w *watcher, logs *logBuffer, path string, wants ...string) {
	t.Helper()
	w.expectStopped(t, path)
	for _, want := range wants {
		if !logs.contains(want) {
			t.Fatalf("no %q in the log:\n%s", want, logs.tail(5))
		}
	}
}

// ask sends to what build makes for a reply address and returns the
// reply, failing the test if none comes within waitLimit.
func ask[Req, Resp any](t testing.TB, to runtime.Ref[Req], build func(runtime.Ref[Resp]) Req) Resp {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	r, err := runtime.Ask(ctx, to, build)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// spawnWP spawns a work-pulling producer controller named name, with
// producer id wp, for the workers registered under key.
func spawnWP(t testing.TB, sys *runtime.System, name string, key runtime.ServiceKey[ConsumerCommand[job]], s WorkPullingSettings,
	opts ...ProducerOption[job]) runtime.Ref[WorkPullingCommand[job]] {
	t.Helper()
	wp, err := SpawnWorkPullingProducerController[job](sys, name, "wp", key, s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return wp
}

// spawnSP spawns a sharding producer controller named name, with producer
// id sp, for the entities of region.
func spawnSP(t testing.TB, sys *runtime.System, name string, region EntityRegion[job], s ShardingSettings,
	opts ...ProducerOption[job]) runtime.Ref[ShardingCommand[job]] {
	t.Helper()
	sp, err := SpawnShardingProducerController[job](sys, name, "sp", region, s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// workPullingProbe starts wp with a probe, named producer, as its producer.
func workPullingProbe(t testing.TB, sys *runtime.System, wp runtime.Ref[WorkPullingCommand[job]]) *probe[WorkPullingRequestNext[job]] {
	t.Helper()
	producer := newProbe[WorkPullingRequestNext[job]](t, sys, "producer")
	wp.Tell(WorkPullingStart[job]{Producer: producer.Ref})
	return producer
}

// shardingProbe starts sp with a probe, named producer, as its producer.
func shardingProbe(t testing.TB, sys *runtime.System, sp runtime.Ref[ShardingCommand[job]]) *probe[ShardingRequestNext[job]] {
	t.Helper()
	producer := newProbe[ShardingRequestNext[job]](t, sys, "producer")
	sp.Tell(ShardingStart[job]{Producer: producer.Ref})
	return producer
}
