package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestMovesAreAnnounced, on one Redis and on a Redis Cluster: with a
// clock that never ticks, so that no rebalancer passes by itself, the
// shards still spread over a member that joins and come back from one
// that leaves: each join, release, acquisition and leave is announced,
// and the others pass at once.
func TestMovesAreAnnounced(t *testing.T) {
	for _, target := range testenv.RedisTargets {
		t.Run(target.Name, func(t *testing.T) {
			client := target.Connect(t)
			prefix := testPrefix(t, client)
			clock := clockwork.NewFakeClock()
			start := func(id string) *node {
				cfg := testConfig(client, prefix, id)
				// Redis keeps the membership for a minute; the lease never
				// runs out on the stopped clock, and no renewal is due.
				cfg.Clock, cfg.Lease = clock, time.Minute
				n := &node{m: mustJoin(t, cfg)}
				n.r = NewRebalancer(n.m, Hooks{})
				n.r.Start()
				t.Cleanup(n.kill)
				return n
			}
			a := start("a")
			waitBalanced(t, 10*time.Second, a)
			b := start("b")
			waitBalanced(t, 10*time.Second, a, b)
			c := start("c")
			waitBalanced(t, 10*time.Second, a, b, c)
			if err := c.r.Leave(context.Background()); err != nil {
				t.Fatal(err)
			}
			waitBalanced(t, 10*time.Second, a, b)
		})
	}
}
