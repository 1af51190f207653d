package sharding_test

import (
	"testing"

	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// The random-loss acceptance cases again, through sharding: every link
// between an entity's producer controller and its consumer controller is
// lossy, as in point to point. Without resending, each entity must see its
// jobs in increasing order, and no job twice; with it, every job arrives
// exactly once (nobody crashes), each entity's in order.

func TestRandomLossSharding(t *testing.T) {
	testenv.Long(t)
	for _, c := range deliverytest.LossCases() {
		t.Run(c.Name, func(t *testing.T) { deliverytest.RunLossCase(t, c, deliverytest.RunShardingLossSeed) })
	}
}
