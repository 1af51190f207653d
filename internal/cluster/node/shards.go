package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/cluster/entityhost"
)

// ShardSet is the set of shards an instance serves: every one when it is
// not part of a cluster ([Every]), those of its membership of the moment
// when it is ([Shards]). The consumers, views and workflows run on those
// shards.
type ShardSet interface {
	// Serving is consumers.Shards': whether this instance serves shard
	// now, and under which fence.
	Serving(shard int) (cluster.Fence, bool)
	// Served counts the shards this instance acts for now: 0 when it is
	// not part of a cluster.
	Served() int
	// Serves reports whether this instance runs the commands of the
	// entity (componentID, entityID) now, rather than forwarding them.
	Serves(componentID, entityID string) bool
}

// Every is the ShardSet of an instance that is not part of a cluster: it
// runs every entity, under no fence, and counts no shard as served.
var Every ShardSet = every{}

type every struct{}

func (every) Serving(int) (cluster.Fence, bool) { return cluster.Fence{}, true }
func (every) Served() int                       { return 0 }
func (every) Serves(string, string) bool        { return true }

// Shards is the cluster's membership of the moment: none until the first
// join, replaced by each join again. The entity layer (as its
// entities.Cluster), the consumers and the placement of sharded actors
// read it; without a membership (joining, or joining again) the instance
// serves no shard, admits nothing and routes nothing. Make it with
// NewShards before the parts that read it, and give it to Join.
type Shards struct {
	cur atomic.Pointer[membership]
	// stop is closed when the node leaves or stops joining: what waits
	// for the next membership waits no more.
	stop chan struct{}
}

// membership is one join: the member and the entity layer's host over it.
// A membership that is lost (its lease expired in Redis: Redis was out of
// reach for longer than the lease) is replaced by a new one.
type membership struct {
	member   *cluster.Member
	host     *entityhost.Host
	replaced chan struct{} // closed once the next membership is the node's
}

// NewShards makes the view of an instance that has not joined yet.
func NewShards() *Shards { return &Shards{stop: make(chan struct{})} }

var (
	_ ShardSet         = (*Shards)(nil)
	_ entities.Cluster = (*Shards)(nil)
)

// Serving is the fence of shard while this instance serves it.
func (v *Shards) Serving(shard int) (cluster.Fence, bool) {
	m := v.cur.Load()
	if m == nil {
		return cluster.Fence{}, false
	}
	return m.host.Rebalancer().Serving(shard)
}

// Owner is placement.Table's: the owner of shard in the table of
// the membership of the moment.
func (v *Shards) Owner(shard int) (cluster.Ownership, bool) {
	m := v.cur.Load()
	if m == nil {
		return cluster.Ownership{}, false
	}
	return m.host.Rebalancer().Owner(shard)
}

// Served counts the shards this instance serves now.
func (v *Shards) Served() int {
	count := 0
	for shard := range cluster.NumShards {
		if _, ok := v.Serving(shard); ok {
			count++
		}
	}
	return count
}

// Serves reports whether this instance serves the entity's shard now.
func (v *Shards) Serves(componentID, entityID string) bool {
	_, ok := v.Fence(componentID, entityID)
	return ok
}

// Fence is entities.Cluster's.
func (v *Shards) Fence(entityType, id string) (cluster.Fence, bool) {
	m := v.cur.Load()
	if m == nil {
		return cluster.Fence{}, false
	}
	return m.host.Fence(entityType, id)
}

// Route routes by the membership of the moment; a command that waited
// for its shard's owner while that membership was lost waits for the next
// one (bounded by ctx) and is routed by it.
func (v *Shards) Route(ctx context.Context, entityType, id string) (string, func(), error) {
	for {
		m := v.cur.Load()
		if m == nil {
			return "", nil, errNotJoined
		}
		addr, done, err := m.host.Route(ctx, entityType, id)
		if !errors.Is(err, entityhost.ErrLost) {
			return addr, done, err
		}
		select {
		case <-m.replaced:
		case <-v.stop:
			return "", nil, errNotJoined
		case <-ctx.Done():
			return "", nil, fmt.Errorf("wait for the cluster to be joined again: %w", ctx.Err())
		}
	}
}

// Admit is entities.Cluster's.
func (v *Shards) Admit(ctx context.Context, entityType, id string) (func(), error) {
	m := v.cur.Load()
	if m == nil {
		return nil, fmt.Errorf("%w (it is joining the cluster)", entities.ErrMoved)
	}
	return m.host.Admit(ctx, entityType, id)
}

// Forward is entities.Cluster's.
func (v *Shards) Forward(ctx context.Context, addr string, call components.DeferredCall) (json.RawMessage, error) {
	m := v.cur.Load()
	if m == nil {
		return nil, errNotJoined
	}
	return m.host.Forward(ctx, addr, call)
}

// errNotJoined answers a command while the instance has no membership.
var errNotJoined = fmt.Errorf("%w: this instance is joining the cluster (its Redis did not answer)", components.ErrUnavailable)

// Ready is the cluster's readiness check: a member, or why not.
func (v *Shards) Ready(context.Context) error {
	if v.cur.Load() == nil {
		return errNotJoined
	}
	return nil
}
