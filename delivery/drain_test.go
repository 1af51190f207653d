package delivery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/redisqueue"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

// TestDrainThenRestartSendsNothingTwice: a producer with a durable queue
// in Redis sends N jobs, its consumer confirms each; then the system is
// drained and shut down at once, as a service's graceful shutdown does,
// and started again with the same producer id. The queue holds nothing
// unconfirmed, and the restarted consumer's first job is the new one, N+1:
// no job is sent twice. Without the drain, the confirmations of the last
// half window are known only to the consumer controller, and those behind
// the write-behind only to the producer controller.
func TestDrainThenRestartSendsNothingTwice(t *testing.T) {
	const jobs = 500
	client := testenv.Redis(t)
	prefix := fmt.Sprintf("trellis-test-drain:%d", time.Now().UnixNano())
	run := func(first, limit int) (*runtime.System, *deliverytest.Collector) {
		q, err := redisqueue.New[deliverytest.Job](client, prefix, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = q.Delete(context.Background()) })
		sys := runtime.NewSystem(t.Name())
		pc, err := delivery.SpawnProducerController[deliverytest.Job](sys, "pc", "drained", delivery.ProducerSettings{}, delivery.WithDurableQueue[deliverytest.Job](q))
		if err != nil {
			t.Fatal(err)
		}
		cc, err := delivery.SpawnConsumerController[deliverytest.Job](sys, "cc", delivery.ConsumerSettings{})
		if err != nil {
			t.Fatal(err)
		}
		col := deliverytest.NewCollector(limit)
		deliverytest.SpawnConsumer(t, sys, "consumer", cc, deliverytest.ConsumerSpec{Started: true}, col)
		deliverytest.SpawnProducer(t, sys, "producer", pc, deliverytest.ProducerSpec{First: first, Limit: limit})
		cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: pc})
		return sys, col
	}
	sys, col := run(1, jobs)
	if err := col.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), deliverytest.WaitLimit)
	defer cancel()
	if err := delivery.Drain(ctx, sys); err != nil {
		t.Fatal(err)
	}
	if err := sys.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	q, err := redisqueue.New[deliverytest.Job](client, prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := q.LoadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if len(s.Unconfirmed) != 0 || s.HighestConfirmedSeqNr != jobs {
		t.Fatalf("after the drain the queue holds %d unconfirmed, confirmed up to %d; want 0 and %d", len(s.Unconfirmed), s.HighestConfirmedSeqNr, jobs)
	}
	sys2, col2 := run(jobs+1, jobs+1)
	t.Cleanup(func() { _ = sys2.Shutdown(context.Background()) })
	if err := col2.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := col2.Jobs(); len(got) != 1 || got[0] != jobs+1 {
		t.Fatalf("after the restart the consumer got %v, want only [%d]: %d sent twice", got, jobs+1, len(got)-1)
	}
}
