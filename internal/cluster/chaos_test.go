package cluster

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestNeverTwoOwners: up to three instances in one process on one Redis
// join, leave gracefully and crash (stop renewing, no hand-over) at
// random, while a sampler checks, over and over, that at most one
// instance considers itself serving each shard (its Serving view: it
// owns the shard and its lease is valid) and that epochs only grow, both
// in the instances' views and in Redis. At the end the live instances
// serve every shard again.
func TestNeverTwoOwners(t *testing.T) {
	testenv.Long(t)
	client := testenv.Redis(t)
	prefix := testPrefix(t, client)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	c := &chaos{t: t, client: client, prefix: prefix}
	c.join()
	stopSampling := c.sample()
	t.Cleanup(stopSampling) // a failed wait below must not leave it sampling

	const steps = 24
	for i := range steps {
		// Between 0.1 and 0.7 s between events: some within one lease
		// of the last, some after a takeover could finish.
		<-time.After(time.Duration(100+rng.IntN(600)) * time.Millisecond)
		c.step(rng, i)
	}
	live := c.liveNodes()
	// Generous: this test is about owners, not takeover times (which
	// TestTakeoverAfterKill measures), and a loaded machine is slow.
	counts := waitAllServed(t, testLease+15*time.Second, live...)
	stopSampling()
	t.Logf("%d events, %d samples; at the end %d live instances serve %v", steps, c.samples, len(live), counts)
}

// chaos is the state of TestNeverTwoOwners: every node ever started (the
// dead ones too: a crashed one keeps its view of its shards until its
// lease runs out, and the sampler keeps looking at it).
type chaos struct {
	t      *testing.T
	client redis.UniversalClient
	prefix string

	mu    sync.Mutex
	nodes []*node
	live  []bool
	next  int

	samples int
}

// step makes one random event: while fewer than three are live, a join
// half of the time; otherwise a graceful leave or a crash, as often; at
// least one stays live.
func (c *chaos) step(rng *rand.Rand, i int) {
	live := c.liveIndexes()
	switch r := rng.IntN(4); {
	case len(live) < 3 && (r < 2 || len(live) == 1):
		c.join()
	case r%2 == 0:
		n := live[rng.IntN(len(live))]
		c.t.Logf("event %d: %s leaves", i, c.nodes[n].m.ID())
		if err := c.nodes[n].r.Leave(c.t.Context()); err != nil {
			c.t.Errorf("leave: %v", err)
		}
		c.setLive(n, false)
	default:
		n := live[rng.IntN(len(live))]
		c.t.Logf("event %d: %s crashes", i, c.nodes[n].m.ID())
		c.nodes[n].kill()
		c.setLive(n, false)
	}
}

// join starts a node with a new id.
func (c *chaos) join() {
	c.mu.Lock()
	id := fmt.Sprintf("n%d", c.next)
	c.next++
	c.mu.Unlock()
	n := startNode(c.t, c.client, c.prefix, id)
	c.t.Logf("%s joins", id)
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.live = append(c.live, true)
	c.mu.Unlock()
}

func (c *chaos) setLive(i int, live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live[i] = live
}

func (c *chaos) liveIndexes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i, l := range c.live {
		if l {
			out = append(out, i)
		}
	}
	return out
}

func (c *chaos) liveNodes() []*node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*node
	for i, l := range c.live {
		if l {
			out = append(out, c.nodes[i])
		}
	}
	return out
}

// sample starts the sampler; the returned func stops it and waits.
func (c *chaos) sample() (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		var servedEpoch, redisEpoch [NumShards]uint64
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			c.checkServing(&servedEpoch)
			if i%25 == 0 {
				c.checkRecords(&redisEpoch)
			}
			c.samples++
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-stopped }) }
}

// checkServing holds every node's lock at once, so that no node changes
// what it owns meanwhile, and evaluates every node's Serving at one
// instant: at most one may serve a shard, at an epoch no lower than the
// last seen.
func (c *chaos) checkServing(last *[NumShards]uint64) {
	c.mu.Lock()
	nodes := append([]*node(nil), c.nodes...)
	c.mu.Unlock()
	for _, n := range nodes {
		n.r.mu.Lock()
	}
	defer func() {
		for _, n := range nodes {
			n.r.mu.Unlock()
		}
	}()
	now := time.Now()
	for s := range NumShards {
		server := ""
		for _, n := range nodes {
			f, ok := n.r.servingLocked(s, now)
			if !ok {
				continue
			}
			if server != "" {
				c.t.Errorf("shard %d is served by %s and %s at once", s, server, n.m.ID())
			}
			server = n.m.ID()
			if f.Epoch < last[s] {
				c.t.Errorf("shard %d: %s serves at epoch %d after epoch %d was served", s, server, f.Epoch, last[s])
			}
			last[s] = f.Epoch
		}
	}
}

// checkRecords reads every record: no epoch may ever go down.
func (c *chaos) checkRecords(last *[NumShards]uint64) {
	m := c.anyMember()
	recs, err := m.Records(c.t.Context())
	if err != nil {
		c.t.Errorf("read records: %v", err)
		return
	}
	for s, rec := range recs {
		if rec.Epoch < last[s] {
			c.t.Errorf("shard %d: epoch went from %d down to %d in Redis", s, last[s], rec.Epoch)
		}
		last[s] = rec.Epoch
	}
}

// anyMember is a member to read records with (reading needs no lease).
func (c *chaos) anyMember() *Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[0].m
}
