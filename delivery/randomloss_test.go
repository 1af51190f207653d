package delivery_test

import (
	"fmt"
	"testing"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

func TestRandomLoss(t *testing.T) {
	testenv.Long(t)
	for _, c := range deliverytest.LossCases() {
		t.Run(c.Name, func(t *testing.T) { deliverytest.RunLossCase(t, c, runLossSeed) })
	}
}

func TestRandomLossFlowOnlyChunks(t *testing.T) {
	testenv.Long(t)
	for _, c := range deliverytest.FlowOnlyChunkCases() {
		t.Run(c.Name, func(t *testing.T) { deliverytest.RunLossCase(t, c, runLossSeed) })
	}
}

// TestRandomLossLong sends 10,000 messages through a lossy, repeating,
// reordering link, without delays, window 50.
func TestRandomLossLong(t *testing.T) {
	testenv.Long(t)
	cases := []deliverytest.LossCase{
		{Name: "10000 messages", Messages: 10000, ToCC: [2]float64{0.01, 0.05}, ToPC: [2]float64{0.01, 0.05}, Dup: 0.01, Reorder: 0.01, Window: 50},
		{Name: "10000 messages, without resending", Messages: 10000, ToCC: [2]float64{0.01, 0.05}, ToPC: [2]float64{0.01, 0.05}, Dup: 0.01, Reorder: 0.01, Window: 50, OnlyFlow: true},
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) { deliverytest.RunLossCase(t, c, runLossSeed) })
	}
}

// runLossSeed runs one case of point to point with one seed.
func runLossSeed(c deliverytest.LossCase, seed uint64) (err error) {
	r := deliverytest.NewLossRun(c, seed)
	defer r.Close(&err)
	pc, err := delivery.SpawnProducerController[deliverytest.Job](r.Sys, "pc", "p-"+fmt.Sprint(seed), r.Producer, r.QueueOpts()...)
	if err != nil {
		return err
	}
	cc, err := delivery.SpawnConsumerController[deliverytest.Job](r.Sys, "cc", r.Consumer)
	if err != nil {
		return err
	}
	toCC, toPC := r.Faults()
	link := deliverytest.NewFaultLink[deliverytest.Job](r.TB, r.Sys, "link", pc, cc, toCC, toPC, seed)
	col := deliverytest.NewCollector(c.Messages)
	deliverytest.SpawnConsumer(r.TB, r.Sys, "consumer", cc, r.ConsumerSpec(), col)
	// Without resending, a chunked job arrives whole only if none of its
	// chunks is lost (at a drop of 0.5, one 10-byte job in a thousand):
	// send the jobs once, and check that only jobs that arrived whole are
	// delivered, in order.
	wholeOnly := c.OnlyFlow && c.Chunk > 0
	spec := deliverytest.ProducerSpec{Delay: r.ProducerDelayFunc()}
	if wholeOnly {
		spec.Limit = c.Messages
	}
	deliverytest.SpawnProducer(r.TB, r.Sys, "producer", pc, spec)
	cc.Tell(delivery.RegisterToProducerController[deliverytest.Job]{ProducerController: link.ToPC})

	if wholeOnly {
		return r.WaitWholeJobs(col, link)
	}
	if err := r.Wait(col, link.Describe); err != nil {
		return err
	}
	params := r.Params()
	got := col.Jobs()
	if c.OnlyFlow {
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				return fmt.Errorf("%s: job %d after job %d: not strictly increasing (around: %v)", params, got[i], got[i-1], got[max(0, i-5):min(len(got), i+5)])
			}
		}
		return nil
	}
	for i := range c.Messages {
		if i >= len(got) || got[i] != i+1 {
			return fmt.Errorf("%s: delivery %d is not job %d: %v\n\tlink: %s", params, i, i+1, got[max(0, i-5):min(len(got), i+5)], link.Describe())
		}
	}
	return nil
}

func TestRandomLossFlowOnlyChunksPatterns(t *testing.T) {
	testenv.Long(t)
	for _, c := range deliverytest.FlowOnlyChunkCases() {
		t.Run("work pulling, "+c.Name, func(t *testing.T) { deliverytest.RunLossCase(t, c, deliverytest.RunWorkPullingLossSeed) })
		t.Run("sharding, "+c.Name, func(t *testing.T) { deliverytest.RunLossCase(t, c, deliverytest.RunShardingLossSeed) })
	}
}
