package sharding_test

import (
	"testing"

	"github.com/trellis-go/trellis/delivery/internal/deliverytest"
)

func TestRandomLossSharding(t *testing.T) {
	for _, c := range deliverytest.LossCases() {
		t.Run(c.Name, func(t *testing.T) { deliverytest.RunLossCase(t, c, deliverytest.RunShardingLossSeed) })
	}
}
