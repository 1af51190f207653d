package trellis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/clusterhost"
)

// shardSet is the set of shards this instance serves: every one when it
// is not part of a cluster (everyShard), those of its membership of the
// moment when it is (shardView). The consumers consume those shards.
type shardSet interface {
	// Serving is consumers.Shards: whether this instance serves shard
	// now, and under which fence.
	Serving(shard int) (cluster.Fence, bool)
	// served counts the shards this instance acts for now, for
	// Service.ShardsServed: 0 when it is not part of a cluster.
	served() int
	// serves is Service.Serves.
	serves(componentID, entityID string) bool
}

// everyShard is the shardSet of an instance that is not part of a
// cluster: it runs every entity, under no fence.
type everyShard struct{}

func (everyShard) Serving(int) (cluster.Fence, bool) { return cluster.Fence{}, true }
func (everyShard) served() int                       { return 0 }
func (everyShard) serves(string, string) bool        { return true }

// shardView is the cluster's membership of the moment: nil until the
// first join, replaced by each join again (see clusterNode.watch). The
// entity layer (as its entities.Cluster), the consumers and the
// placement of sharded actors read it; without a membership (joining,
// or joining again) the instance serves no shard, admits nothing and
// routes nothing.
type shardView struct {
	cur atomic.Pointer[membership]
	// stop is closed when the instance leaves or stops joining: what
	// waits for the next membership waits no more.
	stop chan struct{}
}

// newShardView makes the view of an instance that has not joined yet.
func newShardView() *shardView { return &shardView{stop: make(chan struct{})} }

var (
	_ shardSet         = (*shardView)(nil)
	_ entities.Cluster = (*shardView)(nil)
)

func (v *shardView) Serving(shard int) (cluster.Fence, bool) {
	m := v.cur.Load()
	if m == nil {
		return cluster.Fence{}, false
	}
	return m.host.Rebalancer().Serving(shard)
}

// Owner is clusterplacement.Table's: the owner of shard in the table of
// the membership of the moment.
func (v *shardView) Owner(shard int) (cluster.Ownership, bool) {
	m := v.cur.Load()
	if m == nil {
		return cluster.Ownership{}, false
	}
	return m.host.Rebalancer().Owner(shard)
}

func (v *shardView) served() int {
	count := 0
	for shard := range cluster.NumShards {
		if _, ok := v.Serving(shard); ok {
			count++
		}
	}
	return count
}

func (v *shardView) serves(componentID, entityID string) bool {
	_, ok := v.Fence(componentID, entityID)
	return ok
}

func (v *shardView) Fence(entityType, id string) (cluster.Fence, bool) {
	m := v.cur.Load()
	if m == nil {
		return cluster.Fence{}, false
	}
	return m.host.Fence(entityType, id)
}

// Route routes by the membership of the moment; a command that waited
// for its shard's owner while that membership was lost waits for the next
// one (bounded by ctx) and is routed by it.
func (v *shardView) Route(ctx context.Context, entityType, id string) (string, func(), error) {
	for {
		m := v.cur.Load()
		if m == nil {
			return "", nil, errNotJoined
		}
		addr, done, err := m.host.Route(ctx, entityType, id)
		if !errors.Is(err, clusterhost.ErrLost) {
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

func (v *shardView) Admit(ctx context.Context, entityType, id string) (func(), error) {
	m := v.cur.Load()
	if m == nil {
		return nil, fmt.Errorf("%w (it is joining the cluster)", entities.ErrMoved)
	}
	return m.host.Admit(ctx, entityType, id)
}

func (v *shardView) Forward(ctx context.Context, addr string, call components.DeferredCall) (json.RawMessage, error) {
	m := v.cur.Load()
	if m == nil {
		return nil, errNotJoined
	}
	return m.host.Forward(ctx, addr, call)
}

// errNotJoined answers a command while the instance has no membership.
var errNotJoined = fmt.Errorf("%w: this instance is joining the cluster (its Redis did not answer)", components.ErrUnavailable)

// ready is the cluster's part of /readyz: a member, or why not.
func (v *shardView) ready(context.Context) error {
	if v.cur.Load() == nil {
		return errNotJoined
	}
	return nil
}
