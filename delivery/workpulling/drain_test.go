package workpulling_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/workpulling"
	"github.com/trellis-go/trellis/runtime"
)

// TestWorkPullingDrain: once every job is delivered and confirmed by the
// workers, Drain returns only when the work-pulling controller's durable
// queue holds nothing unconfirmed: each worker's consumer controller
// reported its confirmations, its producer controller passed them on, and
// the work-pulling controller stored them. Without Drain the last half
// window of each worker is known only to its consumer controller.
func TestWorkPullingDrain(t *testing.T) {
	const n = 300
	sys, _ := deliverytest.NewSystem(t)
	key := runtime.NewServiceKey[delivery.ConsumerCommand[deliverytest.Job]]("workers")
	col := deliverytest.NewCollectorAll(n)
	for i := range 3 {
		deliverytest.SpawnWorker(t, sys, fmt.Sprintf("worker%d", i), key, deliverytest.WorkerSpec{}, col)
	}
	q := durable.NewMemory[deliverytest.Job]()
	wp := deliverytest.SpawnWP(t, sys, "wp", key, workpulling.Settings{}, delivery.WithDurableQueue[deliverytest.Job](q))
	deliverytest.SpawnProducer(t, sys, "producer", nil, deliverytest.ProducerSpec{Limit: n, Connect: deliverytest.WorkPullingConnect(wp)})
	deliverytest.WaitAll(t, col)
	ctx, cancel := context.WithTimeout(t.Context(), deliverytest.WaitLimit)
	defer cancel()
	if err := delivery.Drain(ctx, sys); err != nil {
		t.Fatal(err)
	}
	s, err := q.LoadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Unconfirmed) != 0 {
		t.Fatalf("after Drain the queue holds %d unconfirmed (from seqNr %d)", len(s.Unconfirmed), s.Unconfirmed[0].SeqNr)
	}
}
