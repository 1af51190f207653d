package node

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trellis-go/trellis/internal/cluster"
)

// What an operator sees of the cluster through this instance: the admin
// API's view of every member and shard, read from Redis, and the series
// of this instance's own membership on /metrics.

// Self is this instance's member id (the same across joins).
func (n *Node) Self() string { return n.id }

// View reads the whole cluster from Redis, for the admin API.
func (n *Node) View(ctx context.Context) (cluster.View, error) {
	return cluster.ReadView(ctx, n.cfg.Redis, n.cfg.Prefix)
}

// viewCollectors are the series of this instance's view of the cluster:
// how many members it sees alive (at its last poll, every lease/3), and
// how long ago its last accepted lease renewal was sent.
func (n *Node) viewCollectors() []prometheus.Collector {
	members := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "trellis_cluster_members",
		Help: "Members of the cluster alive in Redis at this instance's last poll (every third of the lease), itself included.",
	}, func() float64 {
		if m := n.view.cur.Load(); m != nil {
			return float64(m.host.Rebalancer().MembersSeen())
		}
		return 0
	})
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "trellis_cluster_heartbeat_age_seconds",
		Help: "Seconds since this instance sent its last lease renewal that Redis accepted; " +
			"it renews every third of the lease and stops serving its shards at 90 % of it.",
	}, func() float64 {
		if m := n.view.cur.Load(); m != nil {
			return m.member.Lease().SinceRenewal().Seconds()
		}
		return 0 // not a member yet: trellis_cluster_member is 0
	})
	return []prometheus.Collector{members, age}
}
