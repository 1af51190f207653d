package sharding_test

import (
	"fmt"
	"testing"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// The kill -9 test of sharding: as for work pulling
// (delivery/workpulling/kill9_test.go), with the sharding producer
// controller's durable queue in Redis.

// TestKill9DurableRedisSharding: 100 entities; every job arrives, each
// entity's in order before the kill, and after it at most two steps back
// (its unconfirmed jobs again, then the jobs stored whose replies the
// killed producer never saw).
func TestKill9DurableRedisSharding(t *testing.T) {
	testenv.Long(t)
	const jobs = 3000
	r := deliverytest.RunKill9(t, "sharding", jobs)
	ds := make([]delivery.Delivery[deliverytest.Job], len(r.Got))
	for i, j := range r.Got {
		ds[i] = delivery.Delivery[deliverytest.Job]{Message: deliverytest.Job{N: j}, ProducerID: fmt.Sprint("e", j%deliverytest.Kill9Entities)}
	}
	if err := deliverytest.PerEntityOrder(ds[:r.AtKill]); err != nil {
		t.Fatalf("before the kill: %v", err)
	}
	if err := deliverytest.PerEntityAtLeastOnce(ds, jobs, 2); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d deliveries of %d jobs", len(r.Got), jobs)
}
