package remotetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/cluster/placement"
)

// Member is a node's membership of a test cluster: the real shard
// ownership of internal/cluster (fenced leases in Redis, a rebalancer that
// moves one shard at a time), placing the node's sharded entities
// (placement).
type Member struct {
	Member     *cluster.Member
	Rebalancer *cluster.Rebalancer
	Placement  *placement.Placement
	endOnce    sync.Once
}

// JoinCluster makes n, made with a deferred Connect (Config.Deferred), a
// member of the cluster of the nodes that join with the same client and
// prefix: once connected (Node.Connect), its sharded entities run where
// the cluster places their shards. It starts the rebalancer at once. At the test's end
// the member leaves, unless it left or was killed before.
func (n *Node) JoinCluster(tb testing.TB, client redis.UniversalClient, prefix string, lease time.Duration) *Member {
	tb.Helper()
	m, err := cluster.Join(context.Background(), cluster.Config{Client: client, Prefix: prefix, ID: n.Sys.Name(),
		Addr: n.addr, Lease: lease, Margin: lease / 20, Logger: n.log})
	if err != nil {
		tb.Fatalf("remotetest: %v", err)
	}
	cm := &Member{Member: m}
	cm.Rebalancer = cluster.NewRebalancer(m, cluster.Hooks{BeforeRelease: func(ctx context.Context, shard int) error {
		cm.Placement.BeforeRelease(ctx, shard)
		return nil
	}, OnServe: func(f cluster.Fence) { cm.Placement.Serve(f) }})
	cm.Placement = placement.New(n.Sys, cm.Rebalancer, n.addr)
	n.member = cm
	cm.Rebalancer.Start()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// A membership whose lease lapsed (a machine too busy to renew
		// in time) has nothing left to hand over: its shards are the
		// others' already.
		if err := cm.Leave(ctx); err != nil && !errors.Is(err, cluster.ErrGone) {
			tb.Errorf("remotetest: %v", err)
		}
	})
	return cm
}

// Leave hands the member's shards over, one at a time, and leaves: the
// graceful departure of an instance.
func (m *Member) Leave(ctx context.Context) error {
	var err error
	m.endOnce.Do(func() { err = m.Rebalancer.Leave(ctx) })
	return err
}

// abandon stops the member as a crash would: no more renewals or moves,
// nothing said to Redis; the others take its shards once its lease runs
// out.
func (m *Member) abandon() {
	m.endOnce.Do(func() {
		m.Rebalancer.Shutdown()
		m.Member.Abandon()
	})
}

// WaitShards waits (up to limit) until the members serve every shard
// between them, each shard exactly one, and each member's table names the
// owner of every shard: the cluster is settled.
func WaitShards(tb testing.TB, limit time.Duration, members ...*Member) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for !settled(members) {
		if time.Now().After(deadline) {
			tb.Fatalf("remotetest: the shards are not settled over %d members within %v", len(members), limit)
		}
		for _, m := range members {
			m.Rebalancer.Trigger()
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-tb.Context().Done():
			tb.Fatalf("remotetest: %v", tb.Context().Err())
		}
	}
}

func settled(members []*Member) bool {
	for shard := range cluster.NumShards {
		serving := 0
		for _, m := range members {
			if _, ok := m.Rebalancer.Serving(shard); ok {
				serving++
			}
		}
		if serving != 1 {
			return false
		}
		for _, m := range members {
			if o, ok := m.Rebalancer.Owner(shard); !ok || o.Addr == "" {
				return false
			}
		}
	}
	return true
}

// Served is how many shards the member serves now.
func (m *Member) Served() int {
	n := 0
	for shard := range cluster.NumShards {
		if _, ok := m.Rebalancer.Serving(shard); ok {
			n++
		}
	}
	return n
}
