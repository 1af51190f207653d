package sharding_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/delivery/internal/testkit/deliverytest"
	"github.com/trellis-go/trellis/delivery/sharding"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/testkit/remotetest"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

// remoteLease is the test cluster's membership lease: short, so that a
// killed instance's shards are taken over within a few seconds, and long
// enough for a busy machine to renew it in time.
const remoteLease = 3 * time.Second

// remoteLimit bounds the waits of a run: 20 runs at once under the race
// detector, on a busy machine, take many times longer than one alone (a
// run alone takes about 3 s).
const remoteLimit = time.Minute

// remoteWindow is each entity's consumer controller's flow-control
// window: how many of its messages a move can deliver twice.
const remoteWindow = 10

// remoteShardCase is a sharding run over instances of a real cluster.
type remoteShardCase struct {
	name     string
	jobs     int
	entities int
	// fault is what happens to the cluster mid-run: "" nothing; "leave"
	// one instance leaves gracefully, then a new one joins; "kill" the
	// instance hosting entities is killed (kill -9 as the others see it);
	// "cut" the connections into b and c are reset every few milliseconds
	// (what was in flight on them is lost), while the shards stay put.
	fault string
	// cleanup is the sharding producer controller's CleanupUnusedAfter
	// (0: its default, longer than a run).
	cleanup time.Duration
}

// TestRemoteSharding runs a sharding producer controller on instance A and
// its entities wherever the cluster's shard ownership (internal/cluster, in
// Redis) puts them: over A, B and C, reached over the real transport
// (remotetest). Every job arrives and each entity's jobs arrive in order.
// Without a fault each arrives exactly once. When shards move (an
// instance leaves, one joins, one is killed) the jobs an entity had
// delivered but whose confirmation its producer controller had not heard
// of are delivered again by the new owner: at most remoteWindow per
// entity and move, and each entity's sequence steps back at most once per
// move. 20 seeds per case, several at once; -delivery.remoteseeds=1000
// for a long run.
func TestRemoteSharding(t *testing.T) {
	testenv.Long(t)
	cases := []remoteShardCase{
		{name: "steady", jobs: 400, entities: 30},
		{name: "leave and join", jobs: 800, entities: 30, fault: "leave"},
		{name: "kill", jobs: 800, entities: 30, fault: "kill"},
		{name: "cuts", jobs: 800, entities: 30, fault: "cut"},
		// The entities' producer controllers are cleaned up and made again
		// all along: the entities on other instances see no watch fire,
		// and take the new ones' messages.
		{name: "cleanup", jobs: 400, entities: 30, cleanup: 20 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, seed := range deliverytest.RemoteSeeds() {
				t.Run(fmt.Sprint(seed), func(t *testing.T) {
					t.Parallel() // each seed on a cluster of its own
					runRemoteSharding(t, c, seed)
				})
			}
		})
	}
}

// shardNode is one instance of the run: its node, region and membership.
type shardNode struct {
	*remotetest.Node
	region *runtime.Sharding[delivery.ConsumerCommand[deliverytest.Job]]
	member *remotetest.Member
}

func runRemoteSharding(t *testing.T, c remoteShardCase, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	rdb := testenv.Redis(t)
	prefix := "sharding-remote-" + uuid.NewString()[:8]
	t.Cleanup(func() { testenv.DeleteKeys(t, rdb, keyspace.Must(prefix).Pattern()) })
	col := deliverytest.NewCollectorAll(c.jobs)
	rs := deliverytest.RegionSpec{Settings: sharding.ConsumerSettings{Consumer: delivery.ConsumerSettings{
		FlowControlWindow: remoteWindow, ResendIntervalMin: 20 * time.Millisecond, ResendIntervalMax: 200 * time.Millisecond}}}
	start := func(name string) *shardNode {
		n := &shardNode{Node: remotetest.NewNodeWith(t, name, remotetest.Config{Deferred: true})}
		delivery.RegisterCodecs[deliverytest.Job](n.Sys) // its entities start on messages from afar
		n.region = deliverytest.StartRegion(t, n.Sys, rs, col)
		n.member = n.JoinCluster(t, rdb, prefix, remoteLease)
		n.Connect(t)
		return n
	}
	a, b, cc := start("a"), start("b"), start("c")
	remotetest.WaitShards(t, remoteLimit, a.member, b.member, cc.member)

	sp := deliverytest.SpawnSP(t, a.Sys, "sp", a.region, sharding.Settings{ResendFirstUnconfirmedIdleTimeout: 200 * time.Millisecond,
		CleanupUnusedAfter: c.cleanup})
	pace := rand.New(rand.NewPCG(seed, 8))
	deliverytest.SpawnProducer(t, a.Sys, "producer", nil, deliverytest.ProducerSpec{Limit: c.jobs,
		Connect: deliverytest.ShardingConnect(sp), Entity: deliverytest.EntityOf(c.entities),
		Delay: func() time.Duration { return time.Duration(pace.IntN(3)) * time.Millisecond }})

	moves := 0
	faultAt := c.jobs/5 + rng.IntN(c.jobs/3)
	switch c.fault {
	case "leave":
		testenv.Eventually(t, remoteLimit, fmt.Sprintf("%d jobs in", faultAt), func() bool { return col.Distinct() >= faultAt })
		if cc.region.Active() == 0 {
			t.Fatalf("no entity runs on c: its leaving would prove nothing")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cc.member.Leave(ctx); err != nil {
			t.Fatalf("c leaves: %v", err)
		}
		// Its entities stop as their shards leave, and none starts again
		// there: the messages to them go to the new owners.
		deliverytest.Eventually(t, "c's entities stopped", func() bool { return cc.region.Active() == 0 })
		remotetest.WaitShards(t, remoteLimit, a.member, b.member)
		d := start("d")
		remotetest.WaitShards(t, remoteLimit, a.member, b.member, d.member)
		moves = 2
	case "kill":
		testenv.Eventually(t, remoteLimit, fmt.Sprintf("%d jobs in", faultAt), func() bool { return col.Distinct() >= faultAt })
		if b.region.Active() == 0 {
			t.Fatalf("no entity runs on b: the kill would prove nothing")
		}
		b.Kill()
		remotetest.WaitShards(t, remoteLimit, a.member, cc.member)
		moves = 1
	}
	cuts := 0
	if c.fault == "cut" {
		cuts = cutUntilDone(rng, col, b, cc)
		if cuts < 5 {
			t.Fatalf("seed %d: only %d cuts before every job was in: the run proves nothing", seed, cuts)
		}
	}
	waitRemote(t, col, sp, []*shardNode{a, b, cc}, c.entities)

	ds := col.Deliveries()
	twice := len(ds) - c.jobs
	if err := deliverytest.PerEntityAtLeastOnce(ds, c.jobs, moves); err != nil {
		t.Fatalf("seed %d: %v (re-run with -delivery.remoteseed=%d)", seed, err, seed)
	}
	if bound := moves * remoteWindow * c.entities; twice > bound {
		t.Fatalf("seed %d: %d deliveries of %d jobs: %d twice, more than the bound %d", seed, len(ds), c.jobs, twice, bound)
	}
	if moves == 0 && twice != 0 {
		t.Fatalf("seed %d: %d jobs delivered twice with no shard moved", seed, twice)
	}
	for _, n := range []*shardNode{a, b, cc} {
		if n.region.Active() == 0 && c.fault == "" {
			t.Fatalf("seed %d: no entity ran on %s: the entities were not spread", seed, n.Sys.Name())
		}
	}
	t.Logf("seed %d: %d jobs to %d entities, %d delivered twice (%d moves, %d cuts); dead letters a %d, b %d, c %d", seed, c.jobs, c.entities,
		twice, moves, cuts, a.Sys.RemoteDeadLetters(), b.Sys.RemoteDeadLetters(), cc.Sys.RemoteDeadLetters())
}

// waitRemote waits until every job of col has arrived; if they do not,
// it fails saying which entities miss jobs and where each instance places
// them.
func waitRemote(t *testing.T, col *deliverytest.Collector, sp runtime.Ref[sharding.Command[deliverytest.Job]], nodes []*shardNode, entities int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), remoteLimit)
	defer cancel()
	err := col.Wait(ctx)
	if err == nil {
		return
	}
	col.Mu.Lock()
	missing := map[string][]int{}
	for j := 1; j <= col.Want(); j++ {
		if col.Seen[j] == 0 {
			id := deliverytest.EntityOf(entities)(deliverytest.Job{N: j})
			missing[id] = append(missing[id], j)
		}
	}
	col.Mu.Unlock()
	for id, jobs := range missing {
		where := ""
		for _, n := range nodes {
			addr, here := n.member.Placement.Where(deliverytest.EntityKey.Name(), id)
			where += fmt.Sprintf(" %s:(%q,%v)", n.Sys.Name(), addr, here)
		}
		t.Logf("entity %s misses %d jobs from %d; placed%s", id, len(jobs), jobs[0], where)
	}
	t.Fatalf("%v; stats %+v", err, shardingStats(t, sp))
}

// cutUntilDone resets the connections into one of nodes, drawn by rng,
// every 5 to 30 ms until col has every job (or remoteLimit passes), and
// returns how many times.
func cutUntilDone(rng *rand.Rand, col *deliverytest.Collector, nodes ...*shardNode) int {
	ctx, cancel := context.WithTimeout(context.Background(), remoteLimit)
	defer cancel()
	done := make(chan struct{})
	go func() {
		_ = col.Wait(ctx)
		close(done)
	}()
	cuts := 0
	for {
		select {
		case <-done:
			return cuts
		case <-time.After(time.Duration(5+rng.IntN(25)) * time.Millisecond):
			nodes[rng.IntN(len(nodes))].Proxy.Cut()
			cuts++
		}
	}
}
