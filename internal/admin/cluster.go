package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/trellis-go/trellis/api"
	adminapi "github.com/trellis-go/trellis/api/admin"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/store"
)

// Cluster is what the cluster routes read of the instance's cluster.
type Cluster interface {
	// Self is this instance's member id.
	Self() string
	// View reads the cluster from Redis ([cluster.ReadView]).
	View(ctx context.Context) (cluster.View, error)
}

// GetCluster answers GET /admin/cluster: the members with their shard
// counts and heartbeats, and the shards counted by state; {"enabled":
// false} when the instance is not part of a cluster.
func (a *server) GetCluster(w http.ResponseWriter, r *http.Request) {
	v, ok := a.view(w, r)
	if !ok {
		return
	}
	self := a.cluster.Self()
	out := adminapi.Cluster{Enabled: true, Self: self, Now: v.Now.UTC(),
		Members: make([]adminapi.ClusterMember, 0, len(v.Members)), Shards: shardCounts(v)}
	for _, m := range v.Members {
		out.Members = append(out.Members, memberJSON(m, v.Now, self))
	}
	api.WriteJSON(w, r, http.StatusOK, out)
}

// GetClusterShards answers GET /admin/cluster/shards: every shard with its
// owner, epoch, state and preferred owner; {"enabled": false} when the
// instance is not part of a cluster.
func (a *server) GetClusterShards(w http.ResponseWriter, r *http.Request) {
	v, ok := a.view(w, r)
	if !ok {
		return
	}
	out := adminapi.ClusterShards{Enabled: true, Now: v.Now.UTC(), Shards: make([]adminapi.ClusterShard, 0, len(v.Shards))}
	for _, s := range v.Shards {
		out.Shards = append(out.Shards, adminapi.ClusterShard{Shard: s.Shard, Owner: s.Owner, Epoch: int64(s.Epoch), //nolint:gosec // an epoch counts changes of owner: far below 2^63
			State: adminapi.ClusterShardState(s.State), Preferred: s.Preferred})
	}
	api.WriteJSON(w, r, http.StatusOK, out)
}

// view reads the cluster, or answers for the caller: {"enabled": false}
// when there is none, the problem when Redis could not be read.
func (a *server) view(w http.ResponseWriter, r *http.Request) (cluster.View, bool) {
	if a.cluster == nil {
		api.WriteJSON(w, r, http.StatusOK, adminapi.Cluster{Enabled: false})
		return cluster.View{}, false
	}
	v, err := a.cluster.View(r.Context())
	if err != nil {
		api.WriteError(w, r, store.Classify(err))
		return cluster.View{}, false
	}
	return v, true
}

// memberJSON is a member as the contract shows it; its times are Redis's,
// its heartbeat's age counted to now (Redis's too).
func memberJSON(m cluster.MemberView, now time.Time, self string) adminapi.ClusterMember {
	out := adminapi.ClusterMember{Id: m.ID, Addr: m.Addr, Status: adminapi.ClusterMemberStatus(m.Status),
		Self: m.ID == self, Shards: m.Shards}
	if !m.Joined.IsZero() {
		out.JoinedAt = m.Joined.UTC()
	}
	if !m.Heartbeat.IsZero() {
		out.HeartbeatAt = m.Heartbeat.UTC()
		age := int(max(now.Sub(m.Heartbeat), 0).Milliseconds())
		out.HeartbeatAgeMs = &age
	}
	if !m.LeaseExpiry.IsZero() {
		out.LeaseExpiresAt = m.LeaseExpiry.UTC()
	}
	return out
}

// shardCounts counts v's shards by state.
func shardCounts(v cluster.View) adminapi.ShardCounts {
	c := adminapi.ShardCounts{
		Total: len(v.Shards), Served: v.Count(cluster.ShardServed), HandingOver: v.Count(cluster.ShardHandingOver),
		Orphaned: v.Count(cluster.ShardOrphaned), Unowned: v.Count(cluster.ShardUnowned),
	}
	c.Owned = c.Served + c.HandingOver
	return c
}
