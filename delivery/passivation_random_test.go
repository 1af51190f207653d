package delivery

import (
	"flag"
	"fmt"
	goruntime "runtime"
	"sync"
	"testing"
	"time"
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
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(1))
	c := lossCase{name: "passivation", messages: *flagPassivationJobs}
	par := *flagParallel
	*flagParallel = 1
	defer func() { *flagParallel = par }()
	runLossCase(t, c, runPassivationSeed)
}

func runPassivationSeed(c lossCase, seed uint64) (err error) {
	r := newLossRun(c, seed)
	defer r.close(&err)
	const entities = 200
	passivate := time.Duration(20+r.rng.IntN(81)) * time.Millisecond
	col := newCollectorAll(c.messages)
	var mu sync.Mutex // the consumers draw from one RNG
	slow := func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if r.rng.IntN(100) == 0 {
			return passivate * 3 / 2
		}
		return 0
	}
	region := startRegion(r.rt, r.sys, regionSpec{passivate: passivate, consumer: consumerSpec{delay: slow},
		settings: ShardingConsumerSettings{Consumer: ConsumerSettings{ResendIntervalMin: 50 * time.Millisecond}}}, col)
	sp, err := SpawnShardingProducerController[job](r.sys, "sp", "sp", region,
		ShardingSettings{ResendFirstUnconfirmedIdleTimeout: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	spawnProducer(r.rt, r.sys, "producer", nil, producerSpec{limit: c.messages, connect: shardingConnect(sp), entity: entityOf(entities)})
	if err := r.wait(col, func() string {
		return fmt.Sprintf("passivate after %v, %d entities active", passivate, region.Active())
	}); err != nil {
		return err
	}
	if dups := col.count() - col.distinct(); dups != 0 {
		return fmt.Errorf("passivate after %v: %d duplicates of %d jobs, want none (nothing crashed)", passivate, dups, c.messages)
	}
	return perEntityOrder(col.deliveries())
}
