package sharding_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/sharding"
)

// TestNoPassivationWhileTheConsumerHolds: a sharded entity whose consumer
// holds a Delivery it has not confirmed is not passivated, however long it
// is idle; once it confirms, it is. No message comes twice.
func TestNoPassivationWhileTheConsumerHolds(t *testing.T) {
	sys, clock := deliverytest.HolesSystem(t)
	var holding atomic.Bool
	holding.Store(true)
	col := deliverytest.NewCollector(1)
	passivate := 100 * time.Millisecond
	region := deliverytest.StartRegion(t, sys, deliverytest.RegionSpec{Consumer: deliverytest.ConsumerSpec{Hold: func(delivery.Delivery[deliverytest.Job]) bool { return holding.Load() }}, Passivate: passivate}, col)
	sp := deliverytest.SpawnSP(t, sys, "sp", region, sharding.Settings{})
	deliverytest.SpawnProducer(t, sys, "producer", nil, deliverytest.ProducerSpec{Limit: 1, Connect: deliverytest.ShardingConnect(sp), Entity: func(deliverytest.Job) string { return "e0" }})
	deliverytest.WaitJob(t, col)

	clock.Advance(passivate + time.Millisecond)
	deliverytest.Stays(t, "the entity is alive while its consumer holds job 1", func() bool { return region.Active() == 1 })

	holding.Store(false)
	clock.Advance(time.Millisecond) // the consumer looks again, and confirms
	deliverytest.Eventually(t, "the entity passivated once job 1 is confirmed", func() bool {
		clock.Advance(passivate)
		return region.Active() == 0
	})
	clock.Advance(sharding.DefaultResendFirstUnconfirmedIdleTimeout + time.Second)
	deliverytest.Stays(t, "job 1 delivered once", func() bool { return col.Count() == 1 })
}
