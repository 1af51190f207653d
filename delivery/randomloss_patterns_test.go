package delivery

import (
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellis-go/trellis/runtime"
)

// The random-loss acceptance cases again, through work pulling and
// sharding: every link between a worker's or an entity's producer
// controller and its consumer controller is lossy, as in point to point.
// Without resending, each worker and each entity must see its jobs in
// increasing order, and no job twice; with it, every job arrives exactly
// once (no worker leaves, nobody crashes), and each entity's in order.

func TestRandomLossWorkPulling(t *testing.T) {
	for _, c := range lossCases() {
		t.Run(c.name, func(t *testing.T) { runLossCase(t, c, runWorkPullingLossSeed) })
	}
}

// TestRandomLossWorkPullingChurn: as the flaky-network cases, but a third
// of the way through one worker stops and a new one registers: the jobs
// the leaving worker had not confirmed go to the others, so some come
// twice, and none is lost.
func TestRandomLossWorkPullingChurn(t *testing.T) {
	base := lossCase{name: "flaky network, workers come and go", messages: 63, toCC: [2]float64{0.1, 0.3}, toPC: [2]float64{0.1, 0.3}, delays: true, churn: true}
	durableQueue := base
	durableQueue.name, durableQueue.queue = base.name+", durable queue", [2]float64{0.1, 0.2}
	for _, c := range []lossCase{base, durableQueue} {
		chunked := c
		chunked.name, chunked.chunk = c.name+", 1-byte chunks", 1
		for _, c := range []lossCase{c, chunked} {
			t.Run(c.name, func(t *testing.T) { runLossCase(t, c, runWorkPullingLossSeed) })
		}
	}
}

func TestRandomLossSharding(t *testing.T) {
	for _, c := range lossCases() {
		t.Run(c.name, func(t *testing.T) { runLossCase(t, c, runShardingLossSeed) })
	}
}

func TestRandomLossFlowOnlyChunksPatterns(t *testing.T) {
	for _, c := range flowOnlyChunkCases() {
		t.Run("work pulling, "+c.name, func(t *testing.T) { runLossCase(t, c, runWorkPullingLossSeed) })
		t.Run("sharding, "+c.name, func(t *testing.T) { runLossCase(t, c, runShardingLossSeed) })
	}
}

// runWorkPullingLossSeed runs one case through a work-pulling producer
// controller and 2-4 workers, each behind a lossy link of its own.
func runWorkPullingLossSeed(c lossCase, seed uint64) (err error) {
	r := newLossRun(c, seed)
	defer r.close(&err)
	workers := 2 + r.rng.IntN(3)
	key := runtime.NewServiceKey[ConsumerCommand[job]]("workers")
	col := newCollectorAll(c.messages)
	limit := c.messages
	if c.onlyFlow {
		// Lost jobs stay lost: send until one numbered c.messages or more
		// arrives.
		col, limit = newCollector(c.messages), 0
	}
	toCC, toPC := r.faults()
	links := make([]*faultLink[job], workers)
	var leaving *testWorker
	for i := range workers {
		w := spawnWorker(r.rt, r.sys, fmt.Sprintf("worker%d", i), key,
			workerSpec{consumer: r.cs, spec: r.consumerSpec(), toCC: &toCC, toPC: toPC, seed: seed + uint64(i)<<32}, col)
		links[i] = w.link
		leaving = w
	}
	wp, err := SpawnWorkPullingProducerController[job](r.sys, "wp", fmt.Sprint("wp-", seed), key, WorkPullingSettings{Producer: r.ps}, r.queueOpts()...)
	if err != nil {
		return err
	}
	spawnProducer(r.rt, r.sys, "producer", nil, producerSpec{limit: limit, delay: r.producerDelayFunc(), connect: workPullingConnect(wp)})
	describe := func() string { return describeLinks(links) }
	if c.churn {
		if err := waitFor(func() bool { return col.count() >= c.messages/3 }); err != nil {
			return fmt.Errorf("%s: before the churn: %w", r.params(), err)
		}
		w := spawnWorker(r.rt, r.sys, "worker-new", key,
			workerSpec{consumer: r.cs, spec: r.consumerSpec(), toCC: &toCC, toPC: toPC, seed: seed + uint64(workers)<<32}, col)
		links = append(links, w.link)
		leaving.stop(r.sys)
	}
	if err := r.wait(col, describe); err != nil {
		return err
	}
	if c.churn {
		return nil // every job arrived: what the collector waited for
	}
	if err := checkLossDeliveries(c, col); err != nil {
		return fmt.Errorf("%s, %d workers: %w\n\tlinks: %s", r.params(), workers, err, describe())
	}
	return nil
}

// runShardingLossSeed runs one case through a sharding producer controller
// to 5-20 entities, each behind a lossy link of its own.
func runShardingLossSeed(c lossCase, seed uint64) (err error) {
	r := newLossRun(c, seed)
	defer r.close(&err)
	entities := 5 + r.rng.IntN(16)
	col := newCollectorAll(c.messages)
	limit := c.messages
	if c.onlyFlow {
		col, limit = newCollector(c.messages), 0
	}
	region := startRegion(r.rt, r.sys, regionSpec{settings: ShardingConsumerSettings{Consumer: r.cs}, consumer: r.consumerSpec()}, col)
	toCC, toPC := r.faults()
	links := &linkRegion{t: r.rt, sys: r.sys, region: region, toCC: toCC, toPC: toPC, seed: seed, links: make(map[string]*faultLink[job])}
	ss := ShardingSettings{Producer: r.ps, ResendFirstUnconfirmedIdleTimeout: scaled(10 * DefaultResendIntervalMin)}
	sp, err := SpawnShardingProducerController[job](r.sys, "sp", fmt.Sprint("sp-", seed), links, ss, r.queueOpts()...)
	if err != nil {
		return err
	}
	spawnProducer(r.rt, r.sys, "producer", nil, producerSpec{limit: limit, delay: r.producerDelayFunc(),
		connect: shardingConnect(sp), entity: entityOf(entities)})
	if err := r.wait(col, links.describe); err != nil {
		return err
	}
	if err := checkLossDeliveries(c, col); err != nil {
		return fmt.Errorf("%s, %d entities: %w\n\tlinks: %s", r.params(), entities, err, links.describe())
	}
	return nil
}

// checkLossDeliveries checks what a work-pulling or sharding case
// delivered: per producer id (a worker, an entity) strictly increasing, no
// job twice, and, with resending, every job once.
func checkLossDeliveries(c lossCase, col *collector) error {
	ds := col.deliveries()
	if err := perEntityOrder(ds); err != nil {
		return err
	}
	seen := make(map[int]bool, len(ds))
	for _, d := range ds {
		if seen[d.Message.N] {
			return fmt.Errorf("job %d delivered twice", d.Message.N)
		}
		seen[d.Message.N] = true
	}
	if c.onlyFlow {
		return nil
	}
	for j := 1; j <= c.messages; j++ {
		if !seen[j] {
			return fmt.Errorf("job %d lost", j)
		}
	}
	return nil
}

// waitFor polls cond until it holds, for a minute at most.
func waitFor(cond func() bool) error {
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not true within a minute")
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

func describeLinks(links []*faultLink[job]) string {
	parts := make([]string, len(links))
	for i, l := range links {
		parts[i] = l.describe()
	}
	return strings.Join(parts, " | ")
}

// linkRegion is an EntityRegion whose entities sit behind lossy links, one
// per entity, made on first use (from the sharding producer controller's
// goroutine).
type linkRegion struct {
	t          testing.TB
	sys        *runtime.System
	region     *runtime.Sharding[ConsumerCommand[job]]
	toCC, toPC faults
	seed       uint64
	mu         sync.Mutex
	links      map[string]*faultLink[job]
}

func (l *linkRegion) EntityRef(id string) runtime.Ref[ConsumerCommand[job]] {
	l.mu.Lock()
	defer l.mu.Unlock()
	if link := l.links[id]; link != nil {
		return link.toCC
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	link := newFaultLink[job](l.t, l.sys, "link-"+id, nil, l.region.EntityRef(id), l.toCC, l.toPC, l.seed^h.Sum64())
	l.links[id] = link
	return link.toCC
}

func (l *linkRegion) describe() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	links := make([]*faultLink[job], 0, len(l.links))
	for _, link := range l.links {
		links = append(links, link)
	}
	return describeLinks(links)
}
