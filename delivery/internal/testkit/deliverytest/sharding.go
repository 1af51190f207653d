package deliverytest

import (
	"fmt"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/sharding"
	"github.com/trellis-go/trellis/runtime"
)

// EntityKey is the entity type of the sharding tests.
var EntityKey = runtime.NewEntityTypeKey[delivery.ConsumerCommand[Job]]("jobs")

// RegionSpec describes the entities of a sharding test.
type RegionSpec struct {
	Settings  sharding.ConsumerSettings // each entity's settings
	Consumer  ConsumerSpec              // each entity's consumer (it starts in Started)
	Passivate time.Duration             // Entity.PassivateAfter; 0: the runtime's default
}

// StartRegion initialises sharding of entityKey on sys: each entity is a
// ShardingConsumerController whose consumer is a testConsumer recording in
// col.
func StartRegion(t testing.TB, sys *runtime.System, rs RegionSpec, col *Collector) *runtime.Sharding[delivery.ConsumerCommand[Job]] {
	t.Helper()
	spec := rs.Consumer
	spec.Started = true
	create, err := sharding.NewConsumerController(func(_ string, start runtime.Ref[delivery.ConsumerStart[Job]]) runtime.Behavior[ConsMsg] {
		return ConsumerBehavior(spec, col, func(s delivery.ConsumerStart[Job]) { start.Tell(s) })
	}, rs.Settings)
	if err != nil {
		t.Fatalf("sharding consumer controller: %v", err)
	}
	region, err := runtime.InitSharding(sys, runtime.Entity[delivery.ConsumerCommand[Job]]{Key: EntityKey, Create: create, PassivateAfter: rs.Passivate})
	if err != nil {
		t.Fatalf("init sharding: %v", err)
	}
	return region
}

// EntityOf spreads jobs over n entities, e0..e(n-1).
func EntityOf(n int) func(j Job) string {
	return func(j Job) string { return fmt.Sprintf("e%d", j.N%n) }
}

// ByEntity groups the job numbers delivered by the producer id of their
// consumer controller's producer: one per entity.
func ByEntity(ds []delivery.Delivery[Job]) map[string][]int {
	out := make(map[string][]int)
	for _, d := range ds {
		out[d.ProducerID] = append(out[d.ProducerID], d.Message.N)
	}
	return out
}

// PerEntityOrder returns an error unless each entity got its jobs in
// increasing order (strictly: no duplicates).
func PerEntityOrder(ds []delivery.Delivery[Job]) error {
	for id, jobs := range ByEntity(ds) {
		for i := 1; i < len(jobs); i++ {
			if jobs[i] <= jobs[i-1] {
				return fmt.Errorf("entity %s: job %d after job %d (around: %v)", id, jobs[i], jobs[i-1], jobs[max(0, i-5):min(len(jobs), i+5)])
			}
		}
	}
	return nil
}

// PerEntityAtLeastOnce returns an error unless every job 1..n was
// delivered, and each entity's jobs came in increasing order except where
// a producer restart sent some again: at most restarts steps back (or
// repeats) per entity.
func PerEntityAtLeastOnce(ds []delivery.Delivery[Job], n, restarts int) error {
	seen := make(map[int]bool)
	for _, d := range ds {
		seen[d.Message.N] = true
	}
	for j := 1; j <= n; j++ {
		if !seen[j] {
			return fmt.Errorf("job %d lost", j)
		}
	}
	for id, jobs := range ByEntity(ds) {
		back := 0
		for i := 1; i < len(jobs); i++ {
			if jobs[i] <= jobs[i-1] {
				back++
			}
		}
		if back > restarts {
			return fmt.Errorf("entity %s: its jobs go back %d times, want at most %d: %v", id, back, restarts, jobs)
		}
	}
	return nil
}
