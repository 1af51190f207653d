package workpulling_test

import (
	"testing"

	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// The random-loss acceptance cases again, through work pulling: every link
// between a worker's producer controller and its consumer controller is
// lossy, as in point to point. Without resending, each worker must see its
// jobs in increasing order, and no job twice; with it, every job arrives
// exactly once (no worker leaves, nobody crashes).

func TestRandomLossWorkPulling(t *testing.T) {
	testenv.Long(t)
	for _, c := range deliverytest.LossCases() {
		t.Run(c.Name, func(t *testing.T) { deliverytest.RunLossCase(t, c, deliverytest.RunWorkPullingLossSeed) })
	}
}

// TestRandomLossWorkPullingChurn: as the flaky-network cases, but a third
// of the way through one worker stops and a new one registers: the jobs
// the leaving worker had not confirmed go to the others, so some come
// twice, and none is lost.
func TestRandomLossWorkPullingChurn(t *testing.T) {
	testenv.Long(t)
	base := deliverytest.LossCase{Name: "flaky network, workers come and go", Messages: 63, ToCC: [2]float64{0.1, 0.3}, ToPC: [2]float64{0.1, 0.3}, Delays: true, Churn: true}
	durableQueue := base
	durableQueue.Name, durableQueue.Queue = base.Name+", durable queue", [2]float64{0.1, 0.2}
	for _, c := range []deliverytest.LossCase{base, durableQueue} {
		chunked := c
		chunked.Name, chunked.Chunk = c.Name+", 1-byte chunks", 1
		for _, c := range []deliverytest.LossCase{c, chunked} {
			t.Run(c.Name, func(t *testing.T) { deliverytest.RunLossCase(t, c, deliverytest.RunWorkPullingLossSeed) })
		}
	}
}
