package deliverytest

// Helpers of the work-pulling and sharding tests: both send jobs from one
// producer to many consumers (workers, entities), check the same things of
// what arrived, and stop a durable controller mid-stream the same way.

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/sharding"
	"github.com/trellis-go/trellis/delivery/workpulling"
	"github.com/trellis-go/trellis/runtime"
)

// WaitAll waits until every job of col has arrived.
func WaitAll(t testing.TB, col *Collector) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	if err := col.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// ExactlyOnce fails unless every job 1..n was delivered exactly once.
func ExactlyOnce(t testing.TB, col *Collector, n int) {
	t.Helper()
	got := col.Deliveries()
	if len(got) != n {
		t.Fatalf("%d deliveries of %d jobs, want each once", len(got), n)
	}
	col.Mu.Lock()
	defer col.Mu.Unlock()
	for j := 1; j <= n; j++ {
		if col.Seen[j] != 1 {
			t.Fatalf("job %d delivered %d times", j, col.Seen[j])
		}
	}
}

// Padding is n bytes of padding.
func Padding(n int) string { return strings.Repeat("x", n) }

// MemoryQueue returns a durable queue in memory and, when use is set, the
// option that makes a controller use it (none otherwise).
func MemoryQueue(use bool) (*durable.Memory[Job], []delivery.ProducerOption[Job]) {
	q := durable.NewMemory[Job]()
	if !use {
		return q, nil
	}
	return q, []delivery.ProducerOption[Job]{delivery.WithDurableQueue[Job](q)}
}

// ExpectReplies takes n ask replies from replies: each must be a distinct
// sequence number in 1..n, the controller's numbering of n jobs.
func ExpectReplies(t testing.TB, replies <-chan delivery.SeqNr, n int) {
	t.Helper()
	seen := make(map[delivery.SeqNr]bool)
	for range n {
		s := Recv(t, replies)
		if s < 1 || s > delivery.SeqNr(n) || seen[s] {
			t.Fatalf("ask reply %d: out of 1..%d or repeated", s, n)
		}
		seen[s] = true
	}
}

// QueueDrained waits until q holds nothing unconfirmed and, if
// currentSeqNr is not zero, has stored exactly the messages before it.
func QueueDrained(t testing.TB, q durable.Queue[Job], currentSeqNr delivery.SeqNr) {
	t.Helper()
	Eventually(t, "every confirmation stored", func() bool {
		s, err := q.LoadState(context.Background())
		return err == nil && len(s.Unconfirmed) == 0 && (currentSeqNr == 0 || s.CurrentSeqNr == currentSeqNr)
	})
}

// HoldGate keeps the jobs numbered above a bound unconfirmed until it is
// opened (as consumerSpec.hold), so that a test can stop a durable
// controller with jobs certainly unconfirmed, however fast the processors.
type HoldGate struct {
	Above  int
	opened atomic.Bool
}

// Holds reports whether d is held back: the gate is not yet opened and d's
// job is numbered above Above.
func (g *HoldGate) Holds(d delivery.Delivery[Job]) bool {
	return !g.opened.Load() && d.Message.N > g.Above
}

// Open lets every job through from now on.
func (g *HoldGate) Open() { g.opened.Store(true) }

// StopMidStream waits until the producer has had ask replies (in replies)
// for stored jobs, stops it and its durable controller, waits until the
// controller has stopped (w watches it), and returns the highest job
// replied to and the state left in q. It fails the test if nothing is left
// unconfirmed: then there is nothing to test.
func StopMidStream(t testing.TB, sys *runtime.System, w *Watcher, producer, controller runtime.AnyRef,
	replies chan delivery.SeqNr, q durable.Queue[Job], stored int) (accepted int, s durable.State[Job]) {
	t.Helper()
	Eventually(t, fmt.Sprintf("%d jobs stored", stored), func() bool { return len(replies) >= stored })
	sys.Stop(producer)
	sys.Stop(controller)
	w.ExpectStopped(t, controller.Path())
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

// ExpectFailed waits until the controller at path (watched by w) stops,
// and checks that the log says why: every one of wants.
func ExpectFailed(t testing.TB, w *Watcher, logs *LogBuffer, path string, wants ...string) {
	t.Helper()
	w.ExpectStopped(t, path)
	for _, want := range wants {
		if !logs.Contains(want) {
			t.Fatalf("no %q in the log:\n%s", want, logs.Tail(5))
		}
	}
}

// Ask sends to what build makes for a reply address and returns the
// reply, failing the test if none comes within waitLimit.
func Ask[Req, Resp any](t testing.TB, to runtime.Ref[Req], build func(runtime.Ref[Resp]) Req) Resp {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	r, err := runtime.Ask(ctx, to, build)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// SpawnWP spawns a work-pulling producer controller named name, with
// producer id wp, for the workers registered under key.
func SpawnWP(t testing.TB, sys *runtime.System, name string, key runtime.ServiceKey[delivery.ConsumerCommand[Job]], s workpulling.Settings,
	opts ...delivery.ProducerOption[Job]) runtime.Ref[workpulling.Command[Job]] {
	t.Helper()
	wp, err := workpulling.SpawnProducerController[Job](sys, name, "wp", key, s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return wp
}

// SpawnSP spawns a sharding producer controller named name, with producer
// id sp, for the entities of region.
func SpawnSP(t testing.TB, sys *runtime.System, name string, region sharding.EntityRegion[Job], s sharding.Settings,
	opts ...delivery.ProducerOption[Job]) runtime.Ref[sharding.Command[Job]] {
	t.Helper()
	sp, err := sharding.SpawnProducerController[Job](sys, name, "sp", region, s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// WorkPullingProbe starts wp with a probe, named producer, as its producer.
func WorkPullingProbe(t testing.TB, sys *runtime.System, wp runtime.Ref[workpulling.Command[Job]]) *Probe[workpulling.RequestNext[Job]] {
	t.Helper()
	producer := NewProbe[workpulling.RequestNext[Job]](t, sys, "producer")
	wp.Tell(workpulling.Start[Job]{Producer: producer.Ref})
	return producer
}

// ShardingProbe starts sp with a probe, named producer, as its producer.
func ShardingProbe(t testing.TB, sys *runtime.System, sp runtime.Ref[sharding.Command[Job]]) *Probe[sharding.RequestNext[Job]] {
	t.Helper()
	producer := NewProbe[sharding.RequestNext[Job]](t, sys, "producer")
	sp.Tell(sharding.Start[Job]{Producer: producer.Ref})
	return producer
}
