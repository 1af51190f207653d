package sharding_test

import (
	"flag"
	"fmt"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/sharding"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

var flagPassivationJobs = flag.Int("delivery.passivation-jobs", 2000, "jobs per seed of the sharding passivation runs")

// TestShardingPassivationRandom: a producer that is not paced sends to 200
// entities that are passivated after 20-100 ms idle (drawn per seed), on
// one processor; a consumer takes longer than that over one job in a
// hundred, so entities sit idle while their consumer holds a job all the
// time. Nothing crashes, so every job must come exactly once, and each
// entity's in order. The seeds run one after another: GOMAXPROCS is the
// process's.
func TestShardingPassivationRandom(t *testing.T) {
	testenv.Long(t)
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(1))
	c := deliverytest.LossCase{Name: "passivation", Messages: *flagPassivationJobs}
	par := *deliverytest.FlagParallel
	*deliverytest.FlagParallel = 1
	defer func() { *deliverytest.FlagParallel = par }()
	deliverytest.RunLossCase(t, c, runPassivationSeed)
}

func runPassivationSeed(c deliverytest.LossCase, seed uint64) (err error) {
	r := deliverytest.NewLossRun(c, seed)
	defer r.Close(&err)
	const entities = 200
	passivate := time.Duration(20+r.RNG.IntN(81)) * time.Millisecond
	col := deliverytest.NewCollectorAll(c.Messages)
	var mu sync.Mutex // the consumers draw from one RNG
	slow := func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if r.RNG.IntN(100) == 0 {
			return passivate * 3 / 2
		}
		return 0
	}
	region := deliverytest.StartRegion(r.TB, r.Sys, deliverytest.RegionSpec{Passivate: passivate, Consumer: deliverytest.ConsumerSpec{Delay: slow},
		Settings: sharding.ConsumerSettings{Consumer: delivery.ConsumerSettings{ResendIntervalMin: 50 * time.Millisecond}}}, col)
	sp, err := sharding.SpawnProducerController[deliverytest.Job](r.Sys, "sp", "sp", region,
		sharding.Settings{ResendFirstUnconfirmedIdleTimeout: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	deliverytest.SpawnProducer(r.TB, r.Sys, "producer", nil, deliverytest.ProducerSpec{Limit: c.Messages, Connect: deliverytest.ShardingConnect(sp), Entity: deliverytest.EntityOf(entities)})
	if err := r.Wait(col, func() string {
		return fmt.Sprintf("passivate after %v, %d entities active", passivate, region.Active())
	}); err != nil {
		return err
	}
	if dups := col.Count() - col.Distinct(); dups != 0 {
		return fmt.Errorf("passivate after %v: %d duplicates of %d jobs, want none (nothing crashed)", passivate, dups, c.Messages)
	}
	return deliverytest.PerEntityOrder(col.Deliveries())
}
